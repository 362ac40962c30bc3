"""Report vectors. A small community's extractive report names a few central entities whose vectors the store
already holds: its vector is their mean, weighted by each one's weighted degree (a hub says most about what the
community is), and costs no model call. A larger community's report says more than five names (its recurring
words), and a written report says what its author wrote: those are embedded by the model from their text
(`report_text`), reusing the vector the last build computed from the same text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.communities.reports import EMBEDDED_NAMES, report_text
from duckgraph.core.domain.ingest import embed_in_batches
from duckgraph.ports.communities import CommunityRecord

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase

#: Extractive reports of communities of at most this many entities get their vector from their central members'.
#: Up to here the five central names are a quarter of the community or more, and global search ranked the reports
#: of MuSiQue's graph as well as with model vectors (contrib/bench/HISTORY.md, 2026-11-27).
DERIVED_MAX_MEMBERS = 20


def set_report_vectors(kb: KnowledgeBase, fresh: Sequence[CommunityRecord], before: Sequence[CommunityRecord],
                       central: dict[int, list[int]], degree: Any) -> tuple[int, int]:
    """Give each of `fresh` its report's vector. `before`: the last build's communities with their vectors;
    `central`: each community's (ref's) central members, most central first; `degree`: each node's weighted degree
    (an array by node id). Returns (vectors derived from members, texts sent to the model)."""
    derived = _derive(kb, [c for c in fresh if c.author == "extractive" and len(c.members) <= DERIVED_MAX_MEMBERS],
                      central, degree)
    rest = [c for c in fresh if id(c) not in derived]
    # A vector is a function of its text: a report whose text the last build embedded (the file's one embedder)
    # keeps that vector. Shortest first, so that each model batch holds texts of similar length (less padding).
    known = {report_text(c): c.embedding for c in before if c.embedding is not None}
    pairs = sorted(((c, report_text(c)) for c in rest), key=lambda pair: len(pair[1]))
    to_model = len({text for _, text in pairs if text not in known})
    embed_in_batches(kb.embedder, pairs, None, "embedding reports", known)
    return len(derived), to_model


def _derive(kb: KnowledgeBase, small: Sequence[CommunityRecord], central: dict[int, list[int]], degree: Any
            ) -> set[int]:
    """Set the vector of each of `small` whose named central members all have one; the `id()`s of those set."""
    import numpy as np  # loaded by then (the detector's input and the edge table)

    named = {c.ref: central.get(c.ref, [])[:EMBEDDED_NAMES] for c in small}
    held = kb.store.get_vectors("node", {node for nodes in named.values() for node in nodes})
    done: set[int] = set()
    for community in small:
        nodes = named[community.ref]
        if not nodes or any(node not in held for node in nodes):
            continue  # the model embeds its text instead
        weights = np.asarray([(degree[n] if n < len(degree) else 0.0) + 1.0 for n in nodes], dtype=np.float32)
        vector = weights @ np.stack([held[node] for node in nodes]).astype(np.float32)
        community.embedding = vector / max(float(np.linalg.norm(vector)), 1e-12)
        done.add(id(community))
    return done
