"""The words that characterise a community: those recurring among its members' names and rare in the other
communities of its level (class-based TF-IDF). A coarse community holds several themes and its report names only
its most central entities; its terms carry every theme it holds into the report's text and keyword index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from duckgraph.ports import tokens
from duckgraph.ports.communities import CommunityRecord

#: Terms a report lists at most.
KEY_TERMS = 10


def distinctive_terms(communities: Sequence[CommunityRecord], names: Mapping[int, str], *, k: int = KEY_TERMS
                      ) -> dict[int, list[str]]:
    """Community ref -> up to `k` words, best first: a word counts once per member whose name holds it, must recur
    (two members at least), and weighs tf * log(communities of the level / communities holding it)."""
    import numpy as np  # loaded by the build already (the detector's arrays)

    vocabulary: dict[str, int] = {}
    pair_node: list[int] = []
    pair_term: list[int] = []
    for node, name in names.items():
        for word in set(tokens(name)):
            pair_node.append(node)
            pair_term.append(vocabulary.setdefault(word, len(vocabulary)))
    if not pair_node:
        return {c.ref: [] for c in communities}
    words = np.asarray(list(vocabulary), dtype=object)
    node_of, term_of = np.asarray(pair_node, dtype=np.int64), np.asarray(pair_term, dtype=np.int64)
    found: dict[int, list[str]] = {c.ref: [] for c in communities}
    for level in sorted({c.level for c in communities}):
        at_level = [c for c in communities if c.level == level]
        label = np.full(int(node_of.max()) + 1, -1, dtype=np.int64)
        for position, community in enumerate(at_level):
            members = np.asarray(community.members, dtype=np.int64)
            label[members[members < len(label)]] = position
        owner = label[node_of]
        held = owner >= 0
        key, tf = np.unique(owner[held] * len(words) + term_of[held], return_counts=True)
        owner_of, term = key // len(words), key % len(words)
        idf = np.log(len(at_level) / np.maximum(np.bincount(term, minlength=len(words)), 1))
        score = tf * idf[term]
        keep = (tf >= 2) & (score > 0)
        owner_of, term, score = owner_of[keep], term[keep], score[keep]
        order = np.lexsort((term, -score, owner_of))
        owner_of, term = owner_of[order], term[order]
        first = np.searchsorted(owner_of, owner_of)  # each row's group start: its rank is the distance to it
        top = np.arange(len(owner_of)) - first < k
        for position, word in zip(owner_of[top].tolist(), words[term[top]].tolist()):
            found[at_level[position].ref].append(word)
    return found

