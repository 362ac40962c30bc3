"""What a relation type says by its words: nothing ("related to" and its kin), or that one end took the other's place.

An edge typed RELATED_TO tells search and find_paths only that two entities have something to do with each other,
which the edge's existence already says. Such edges are stored (refusing them would lose the caller's fact) but
flagged, so the model can replace them with a specific type.

An edge typed SUPERSEDES, REPLACED_BY, DEPRECATES, ... says that one of its ends no longer holds as it did: search
shows it with that end (`replaced_end`), which would otherwise read as current.
"""

from __future__ import annotations

import functools
from typing import Literal

from duckgraph.ports import relation_type
from duckgraph.ports.text import stemmed

#: Vague types after `relation_type` and without a leading IS_/ARE_/WAS_ ("is related to" -> RELATED_TO).
VAGUE_TYPES = frozenset({
    "RELATED", "RELATED_TO", "RELATED_WITH", "RELATES_TO", "RELATION", "RELATION_TO", "RELATIONSHIP",
    "HAS_RELATION", "HAS_RELATION_WITH", "HAS_RELATIONSHIP", "HAS_RELATIONSHIP_WITH",
    "ASSOCIATED", "ASSOCIATED_WITH", "ASSOCIATES_WITH", "ASSOCIATION",
    "CONNECTED", "CONNECTED_TO", "CONNECTED_WITH", "CONNECTS_TO", "CONNECTION",
    "LINKED", "LINKED_TO", "LINKED_WITH", "LINKS_TO", "LINK",
})
_COPULAS = ("IS_", "ARE_", "WAS_", "WERE_")

VAGUE_HINT = (
    "{count} edge(s) stored with a vague type ({types}): a specific type (FOUNDED, WORKS_AT, LOCATED_IN, "
    "TREATS, ...) is what search and find_paths can use. To change one, call delete_relations on it and add it "
    "again with a specific type."
)


def is_vague(label: str) -> bool:
    """Whether a relation type, in any spelling, is one of the vague types."""
    normal = relation_type(label)
    for copula in _COPULAS:
        if normal.startswith(copula):
            normal = normal[len(copula):]
            break
    return normal in VAGUE_TYPES


#: Stems (`ports.text.stemmed`) of the words of a relation type that say its source took the place of its target
#: ("ADR-7 SUPERSEDES ADR-3", "Redis REPLACED Memcached", "v2 DEPRECATES v1", "IS_REPLACEMENT_FOR"). Not "succeed":
#: who SUCCEEDED_IN a task replaced nothing.
REPLACING_STEMS = frozenset({"supersed", "replac", "deprec", "obsolet"})
#: A word after such a word that turns it round: the target took the source's place ("ADR-3 SUPERSEDED_BY ADR-7",
#: "Memcached REPLACED_WITH Redis").
_PASSIVE = frozenset({"by", "with"})


@functools.lru_cache(maxsize=4096)
def replaced_end(label: str) -> Literal["source", "target"] | None:
    """The end of a relation of type `label` (in any spelling) that the other took the place of: "target" for
    SUPERSEDES, "source" for SUPERSEDED_BY; None for a type that says no such thing (CHOSE)."""
    words = relation_type(label).casefold().split("_")
    for position, stem in enumerate(stemmed(words)):
        if stem in REPLACING_STEMS:
            return "source" if _PASSIVE.intersection(words[position + 1:position + 2]) else "target"
    return None
