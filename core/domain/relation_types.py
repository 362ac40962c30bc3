"""Relation types that say nothing: "related to" and its kin.

An edge typed RELATED_TO tells search and find_paths only that two entities have something to do with each other,
which the edge's existence already says. Such edges are stored (refusing them would lose the caller's fact) but
flagged, so the model can replace them with a specific type.
"""

from __future__ import annotations

from duckgraph.ports import relation_type

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
