"""Anchor & expand: find the entities a query is about, walk the graph around them, keep what is on topic.

1. Anchors: the query's nearest node vectors fused (reciprocal rank fusion) with nodes named verbatim in it.
   An anchor far less relevant than the best one (picked for its name alone: "apple" the fruit for a
   question about the company) is dropped before expansion, so its neighbourhood is never entered.
2. Expansion: a breadth-first walk up to `hops`, at most `frontier` nodes carried into each next hop (the
   most promising by proximity x relevance). Proximity decays per hop and with weak edges. A reached node's
   relevance is the better of its own similarity to the query and that of the fact (edge) that reached it:
   "Harvard University" alone is far from "which university did Bill Gates drop out of?", the fact
   "Bill Gates dropped out of Harvard University" is close.
3. Pruning: a reached node is kept when its relevance is at least `keep_ratio` times the best relevance
   among the anchors; the nodes on the path that reached it are kept too, so the result stays connected.
4. Passages: chunks that match the query directly, plus chunks that mention kept nodes, ranked by their own
   similarity plus a bonus for supporting high-scoring nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from duckgraph.ports import EdgeRecord, GraphStore, NodeRecord, name_candidates

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class SearchOptions:
    """Knobs of a search. The defaults suit a graph written by a host LLM."""

    k_anchors: int = 5
    hops: int = 2
    max_nodes: int = 30
    max_passages: int = 5
    #: Nodes carried from one hop into the next.
    frontier: int = 100
    #: Proximity kept per hop: a node two hops out starts from decay**2 of its anchor's weight.
    hop_decay: float = 0.6
    #: A reached node is kept when its relevance is at least this share of the best anchor's.
    keep_ratio: float = 0.55
    #: How much support of kept nodes adds to a passage's own similarity.
    passage_graph_weight: float = 0.15
    rrf_k: int = 60
    as_of: datetime | None = None


@dataclass
class Reached:
    node_id: int
    hop: int
    proximity: float
    relevance: float = 0.0
    parent: int | None = None
    via_edge: int | None = None

    @property
    def score(self) -> float:
        return self.proximity * max(self.relevance, 0.0)


@dataclass
class Subgraph:
    anchors: list[Reached]
    nodes: list[Reached]  # kept nodes, best first; anchors included
    records: dict[int, NodeRecord]
    edges: list[EdgeRecord]
    passages: list[tuple[int, float]]  # (chunk id, score), best first


def anchor_and_expand(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, options: SearchOptions
) -> Subgraph:
    anchors = _anchors(store, query_text, query, namespace, options)
    reached, edges = _expand(store, query, namespace, anchors, options)
    kept = _prune(reached, anchors, options)
    kept_ids = {r.node_id for r in kept}
    records = {n.id: n for n in store.get_nodes(kept_ids)}
    kept = [r for r in kept if r.node_id in records]
    result_edges = [e for e in edges.values() if e.source_id in kept_ids and e.target_id in kept_ids]
    result_edges.sort(key=lambda e: -(reached[e.source_id].score + reached[e.target_id].score))
    passages = _rank_passages(store, query, namespace, kept, options)
    return Subgraph(
        anchors=[r for r in kept if r.hop == 0], nodes=kept, records=records, edges=result_edges, passages=passages
    )


def _anchors(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, options: SearchOptions
) -> list[Reached]:
    if options.k_anchors <= 0:
        return []
    vector_hits = store.vector_search("node", query, max(4 * options.k_anchors, 20), namespace)
    named = store.find_nodes(namespace, name_candidates(query_text))
    relevance = dict(vector_hits)
    missing = [n.id for n in named if n.id not in relevance]
    relevance.update(store.similarities("node", missing, query))
    # Longer names are more specific ("New York Times" over "New York"); ties go to the closer vector.
    named.sort(key=lambda n: (-len(n.key), -relevance.get(n.id, -1.0)))
    fused: dict[int, float] = {}
    for ranking in ([node_id for node_id, _ in vector_hits], [n.id for n in named]):
        for rank, node_id in enumerate(ranking):
            fused[node_id] = fused.get(node_id, 0.0) + 1.0 / (options.rrf_k + rank + 1)
    chosen = sorted(fused, key=lambda node_id: -fused[node_id])[: options.k_anchors]
    anchors = [Reached(node_id=i, hop=0, proximity=1.0, relevance=relevance.get(i, 0.0)) for i in chosen]
    threshold = options.keep_ratio * max((a.relevance for a in anchors), default=0.0)
    return [a for a in anchors if a.relevance >= threshold]


def _expand(
    store: GraphStore, query: np.ndarray, namespace: str, anchors: list[Reached], options: SearchOptions
) -> tuple[dict[int, Reached], dict[int, EdgeRecord]]:
    reached = {a.node_id: a for a in anchors}
    edges: dict[int, EdgeRecord] = {}
    frontier = [a.node_id for a in anchors]
    for hop in range(1, options.hops + 1):
        if not frontier:
            break
        in_frontier = set(frontier)
        found: dict[int, Reached] = {}
        fact_relevance: dict[int, float] = {}
        hop_edges = store.neighbors(frontier, namespace, as_of=options.as_of, limit=options.frontier * 20)
        edge_similarity = store.similarities("edge", [e.id for e in hop_edges], query)
        for edge in hop_edges:
            edges[edge.id] = edge
            for here, there in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
                if here not in in_frontier or there in reached:
                    continue
                proximity = reached[here].proximity * options.hop_decay * min(edge.weight, 1.0)
                if there not in found or proximity > found[there].proximity:
                    found[there] = Reached(there, hop, proximity, parent=here, via_edge=edge.id)
                fact_relevance[there] = max(fact_relevance.get(there, -1.0), edge_similarity.get(edge.id, -1.0))
        for node_id, similarity in store.similarities("node", list(found), query).items():
            found[node_id].relevance = similarity
        for node_id, similarity in fact_relevance.items():
            found[node_id].relevance = max(found[node_id].relevance, similarity)
        reached.update(found)
        frontier = [r.node_id for r in sorted(found.values(), key=lambda r: -r.score)[: options.frontier]]
    return reached, edges


def _prune(reached: dict[int, Reached], anchors: list[Reached], options: SearchOptions) -> list[Reached]:
    if not anchors:
        return []
    best_anchor = max(a.relevance for a in anchors)
    threshold = options.keep_ratio * best_anchor
    candidates = sorted(reached.values(), key=lambda r: (r.hop > 0, -r.score))
    kept: dict[int, Reached] = {}
    for item in candidates:
        if len(kept) >= options.max_nodes:
            break
        if item.hop > 0 and item.relevance < threshold:
            continue
        chain = [item]
        while chain[-1].parent is not None and chain[-1].parent not in kept:
            chain.append(reached[chain[-1].parent])
        if len(kept) + len(chain) > options.max_nodes:
            continue
        for link in reversed(chain):
            kept.setdefault(link.node_id, link)
    return sorted(kept.values(), key=lambda r: (r.hop > 0, -r.score))


def _rank_passages(
    store: GraphStore, query: np.ndarray, namespace: str, kept: list[Reached], options: SearchOptions
) -> list[tuple[int, float]]:
    if options.max_passages <= 0:
        return []
    direct = dict(store.vector_search("chunk", query, max(3 * options.max_passages, 10), namespace))
    node_score = {r.node_id: r.score for r in kept}
    top_score = max(node_score.values(), default=0.0) or 1.0
    support: dict[int, float] = {}
    for chunk_id, node_id in store.chunks_mentioning(list(node_score), limit=20 * options.max_passages + 200):
        support[chunk_id] = max(support.get(chunk_id, 0.0), node_score[node_id] / top_score)
    similarity = dict(direct)
    similarity.update(store.similarities("chunk", [c for c in support if c not in direct], query))
    scored = {
        chunk_id: similarity.get(chunk_id, 0.0) + options.passage_graph_weight * support.get(chunk_id, 0.0)
        for chunk_id in {*direct, *support}
    }
    return sorted(scored.items(), key=lambda item: -item[1])[: options.max_passages]
