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
4. Passages: a short random walk with restart (personalized PageRank) over the graph of entities and the passages
   that mention them. The walk restarts at the query's seeds: the two ends of the facts (edges) most similar to
   the query among the facts of the entities nearest it, the entities the query names as proper names (weighted
   down the more passages mention them), and, lightly, the passages most similar to the query. A passage scores
   by the share of the walk that reaches it, so a passage about the bridge entity of a multi-hop question ("the
   performer of Hello Love" -> Hank Snow -> where he died) ranks high although its text shares little with the
   question, and entities every passage mentions ("United States") spread their weight thin.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from duckgraph.ports import ChunkRecord, EdgeRecord, GraphStore, NodeRecord, isin_ids, loose_key, name_candidates

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
    #: Facts (edges) nearest the query whose two ends seed the passage walk.
    fact_seeds: int = 4
    #: The facts are sought among the edges of this many nodes nearest the query (at most 20 times as many edges,
    #: the strongest first).
    fact_seed_nodes: int = 100
    #: Weight of an entity the query names, relative to the best fact's similarity, before rarity damping.
    name_seed_weight: float = 1.5
    #: Passages nearest the query that seed the walk, and their weight relative to the entity seeds.
    passage_seeds: int = 30
    passage_seed_weight: float = 0.05
    #: Probability that the walk follows a link rather than restarting at a seed, and how many steps it takes.
    walk_damping: float = 0.4
    walk_steps: int = 3
    #: An entity or passage holding less than this share of the seeds' weight stops moving (see `_walk`).
    walk_min_share: float = 1e-4
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
    passages: list[tuple[ChunkRecord, float]]  # best first


def anchor_and_expand(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, options: SearchOptions
) -> Subgraph:
    candidates = name_candidates(query_text)
    named = store.find_nodes(namespace, candidates | {loose for key in candidates if (loose := loose_key(key))})
    nearest = store.vector_search("node", query, max(_anchor_candidates(options), options.fact_seed_nodes), namespace)
    anchors = _anchors(store, named, nearest, query, options)
    reached, edges = _expand(store, query, namespace, anchors, options)
    kept = _prune(reached, anchors, options)
    kept_ids = {r.node_id for r in kept}
    records = {n.id: n for n in store.get_nodes(kept_ids)}
    kept = [r for r in kept if r.node_id in records]
    result_edges = store.get_edges(_edges_among(edges, kept_ids))
    result_edges.sort(key=lambda e: -(reached[e.source_id].score + reached[e.target_id].score))
    passages = _rank_passages(store, query_text, query, namespace, named, nearest[: options.fact_seed_nodes], options)
    return Subgraph(
        anchors=[r for r in kept if r.hop == 0], nodes=kept, records=records, edges=result_edges, passages=passages
    )


def _anchor_candidates(options: SearchOptions) -> int:
    """How many of the nodes nearest the query may become anchors: 4 per anchor wanted, at least 20."""
    return max(4 * options.k_anchors, 20)


def _anchors(
    store: GraphStore, named: list[NodeRecord], nearest: list[tuple[int, float]], query: np.ndarray,
    options: SearchOptions,
) -> list[Reached]:
    if options.k_anchors <= 0:
        return []
    vector_hits = nearest[: _anchor_candidates(options)]
    named = list(named)
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
    threshold = _keep_threshold(anchors, options)
    return [a for a in anchors if a.relevance >= threshold]


def _expand(
    store: GraphStore, query: np.ndarray, namespace: str, anchors: list[Reached], options: SearchOptions
) -> tuple[dict[int, Reached], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The nodes reached from the anchors that can be kept (relevant enough) or that led further, and the
    (ids, sources, targets) of the edges walked, hop by hop.

    A hop reaches thousands of nodes in a big graph, so it is computed over arrays: every walked edge in both
    directions is a candidate step; a node keeps the step that brings the most proximity (the first such step,
    edges in `neighbor_ends` order, on a tie) and the best similarity among the facts that reached it.
    """
    import numpy as np  # see _walk

    reached = {a.node_id: a for a in anchors}
    reached_ids = np.fromiter(reached, np.int64, len(reached))
    threshold = _keep_threshold(anchors, options)
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    frontier = [a.node_id for a in anchors]
    for hop in range(1, options.hops + 1):
        if not frontier:
            break
        edge_ids, sources, targets, weights = store.neighbor_ends(
            frontier, namespace, as_of=options.as_of, limit=options.frontier * 20)
        if not len(edge_ids):
            break
        edges.append((edge_ids, sources, targets))
        fact = np.nan_to_num(store.similarity_array("edge", edge_ids, query), nan=-1.0)
        # Candidate steps in the order a loop over the edges would take them: each edge forwards, then backwards.
        here = np.stack([sources, targets], axis=1).ravel()
        there = np.stack([targets, sources], axis=1).ravel()
        edge_at = np.repeat(np.arange(len(edge_ids)), 2)
        sorted_frontier = np.sort(np.asarray(frontier, dtype=np.int64))
        position = np.minimum(np.searchsorted(sorted_frontier, here), len(sorted_frontier) - 1)
        step = (sorted_frontier[position] == here) & ~isin_ids(there, reached_ids)
        here, there, edge_at, position = here[step], there[step], edge_at[step], position[step]
        if not len(there):
            break
        frontier_proximity = np.array([reached[n].proximity for n in sorted_frontier.tolist()])
        proximity = frontier_proximity[position] * options.hop_decay * np.minimum(weights[edge_at].astype(float), 1.0)
        # Per reached node: its best step (most proximity, then the earliest) and its best fact, the nodes in the
        # order they were first reached (so that ties in the frontier's ranking fall the same way every time).
        sequence = np.arange(len(there))
        by_node = np.lexsort((sequence, -proximity, there))
        starts = np.flatnonzero(np.r_[True, there[by_node][1:] != there[by_node][:-1]])
        in_order = np.argsort(np.minimum.reduceat(sequence[by_node], starts))
        best = by_node[starts][in_order]
        found = there[best]
        relevance = np.maximum(
            np.nan_to_num(store.similarity_array("node", found, query), nan=0.0),
            np.maximum.reduceat(fact[edge_at][by_node], starts)[in_order],
        )
        score = proximity[best] * np.maximum(relevance, 0.0)
        carried = np.argsort(-score, kind="stable")[: options.frontier]
        # Records only for what can be kept or carried on; the rest only needs to count as reached.
        wanted = relevance >= threshold
        wanted[carried] = True
        step_of = best[wanted]  # converted to lists at once: indexing arrays item by item costs more than the rest
        for node_id, node_proximity, node_relevance, parent, via_edge in zip(
                found[wanted].tolist(), proximity[step_of].tolist(), relevance[wanted].tolist(),
                here[step_of].tolist(), edge_ids[edge_at[step_of]].tolist()):
            reached[node_id] = Reached(node_id, hop, node_proximity, node_relevance, parent=parent, via_edge=via_edge)
        reached_ids = np.concatenate([reached_ids, found])
        frontier = found[carried].tolist()
    return reached, edges


def _edges_among(walked: list[tuple[np.ndarray, np.ndarray, np.ndarray]], node_ids: set[int]) -> list[int]:
    """The distinct walked edges with both ends among `node_ids`, in the order they were walked."""
    import numpy as np  # see _walk

    nodes = np.fromiter(node_ids, np.int64, len(node_ids))
    inside = [ids[isin_ids(sources, nodes) & isin_ids(targets, nodes)] for ids, sources, targets in walked]
    return list(dict.fromkeys(np.concatenate(inside).tolist())) if inside else []


def _keep_threshold(anchors: list[Reached], options: SearchOptions) -> float:
    """The relevance a reached node needs to be kept: `keep_ratio` of the best anchor's."""
    return options.keep_ratio * max((a.relevance for a in anchors), default=0.0)


def _prune(reached: dict[int, Reached], anchors: list[Reached], options: SearchOptions) -> list[Reached]:
    if not anchors:
        return []
    threshold = _keep_threshold(anchors, options)
    # Only anchors and nodes relevant enough can be kept (nodes on their paths are added from `reached`).
    candidates = sorted((r for r in reached.values() if r.hop == 0 or r.relevance >= threshold),
                        key=lambda r: (r.hop > 0, -r.score))
    kept: dict[int, Reached] = {}
    for item in candidates:
        if len(kept) >= options.max_nodes:
            break
        chain = [item]
        while chain[-1].parent is not None and chain[-1].parent not in kept:
            chain.append(reached[chain[-1].parent])
        if len(kept) + len(chain) > options.max_nodes:
            continue
        for link in reversed(chain):
            kept.setdefault(link.node_id, link)
    return sorted(kept.values(), key=lambda r: (r.hop > 0, -r.score))


def _rank_passages(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, named: list[NodeRecord],
    nearest: list[tuple[int, float]], options: SearchOptions,
) -> list[tuple[int, float]]:
    import numpy as np  # see _walk

    if options.max_passages <= 0:
        return []
    direct = dict(store.vector_search("chunk", query, max(options.passage_seeds, options.max_passages), namespace))
    if not direct:
        return []
    node_seeds = _fact_seeds(store, query, namespace, [node_id for node_id, _ in nearest], options)
    best_fact = max(node_seeds.values(), default=max(direct.values()))
    proper = _proper_names(query_text, named, query, store)
    degree = Counter(node_id for _, node_id in store.chunks_mentioning(proper, limit=2**62))
    for node_id in proper:
        # log(2)/log(1 + n): 1 for a name one passage mentions, a third for one that seven passages mention.
        weight = options.name_seed_weight * best_fact * math.log(2) / math.log(1 + max(degree.get(node_id, 0), 1))
        node_seeds[node_id] = max(node_seeds.get(node_id, 0.0), weight)
    top_direct = max(direct.values())
    chunk_seeds = {c: options.passage_seed_weight * max(s, 0.0) / top_direct for c, s in direct.items()}
    chunk_ids, scores = _walk(store, node_seeds, chunk_seeds, namespace, options)
    # Passages the walk reached beyond the nearest ones also keep their own (restart) share of similarity.
    others = ~isin_ids(chunk_ids, np.fromiter(direct, np.int64, len(direct)))
    similarity = np.nan_to_num(store.similarity_array("chunk", chunk_ids[others], query), nan=0.0)
    restart = (1 - options.walk_damping) * options.passage_seed_weight / top_direct
    scores[others] += restart * np.maximum(similarity, 0.0)
    # 4 candidates per passage wanted leave room for passages of the same document; ties: lower ids first.
    best = np.argsort(-scores, kind="stable")[: 4 * options.max_passages]
    ranked = _one_per_document(store, list(zip(chunk_ids[best].tolist(), scores[best].tolist())), options.max_passages)
    top = ranked[0][1] if ranked and ranked[0][1] > 0 else 1.0
    return [(chunk, score / top) for chunk, score in ranked]


def _one_per_document(
    store: GraphStore, candidates: list[tuple[int, float]], limit: int
) -> list[tuple[ChunkRecord, float]]:
    """The best `limit` of the ranked `candidates`, at most one per document while other documents have some."""
    document_of = store.chunk_documents([chunk_id for chunk_id, _ in candidates])
    seen: set[str] = set()
    first, repeats = [], []
    for chunk_id, score in candidates:
        if (document_id := document_of.get(chunk_id)) is not None:
            (repeats if document_id in seen else first).append((chunk_id, score))
            seen.add(document_id)
    picked = sorted(first[:limit] + repeats[: max(0, limit - len(first))], key=lambda item: -item[1])
    chunks = {c.id: c for c in store.get_chunks([chunk_id for chunk_id, _ in picked])}
    return [(chunks[chunk_id], score) for chunk_id, score in picked if chunk_id in chunks]


def _fact_seeds(
    store: GraphStore, query: np.ndarray, namespace: str, nearest: list[int], options: SearchOptions
) -> dict[int, float]:
    """The ends of the facts nearest the query, each weighted by its best fact's similarity.

    The facts are those of the nodes nearest the query, not all of them: a fact close to a question is nearly
    always about an entity close to it too (on the MuSiQue set, 96.5% of the 4 best facts are the same), and
    scoring the edges of 100 nodes costs a fraction of a millisecond where searching millions of edge vectors
    costs tens (and an index over them).
    """
    import numpy as np  # see _walk

    if options.fact_seeds <= 0 or not nearest:
        return {}
    edge_ids, sources, targets, _ = store.neighbor_ends(
        nearest, namespace, as_of=options.as_of, limit=20 * len(nearest))
    similarity = store.similarity_array("edge", edge_ids, query)
    scored = np.flatnonzero(~np.isnan(similarity))  # edges stored without a vector are no facts to match
    best = scored[np.argsort(-similarity[scored], kind="stable")[: options.fact_seeds]]
    seeds: dict[int, float] = {}
    for source, target, weight in zip(sources[best].tolist(), targets[best].tolist(), similarity[best].tolist()):
        for node_id in (source, target):
            seeds[node_id] = max(seeds.get(node_id, 0.0), max(weight, 0.0))
    return seeds


def _proper_names(query_text: str, named: list[NodeRecord], query: np.ndarray, store: GraphStore) -> list[int]:
    """Nodes the query names as proper names, leaving out those inside a longer name it also names.

    A name several nodes share ("Apple": the company's alias, the fruit) stands for the one nearest the query.
    """
    proper_keys = {loose_key(key) for key in name_candidates(query_text, proper_only=True)}
    keys = {n.id: k for n in named if (k := _matched_key(n, proper_keys))}
    similarity = store.similarities("node", list(keys), query)
    sense: dict[str, int] = {}
    for node_id, key in keys.items():
        if key not in sense or similarity.get(node_id, -1.0) > similarity.get(sense[key], -1.0):
            sense[key] = node_id
    return [node_id for key, node_id in sense.items()
            if not any(other != key and f" {key} " in f" {other} " for other in sense)]


def _matched_key(node: NodeRecord, loose_keys: set[str]) -> str | None:
    """The loose form of the node's name or alias that the query names, if any."""
    for name in (node.name, *node.aliases):
        if (key := loose_key(name)) in loose_keys:
            return key
    return None


def _walk(
    store: GraphStore, node_seeds: dict[int, float], chunk_seeds: dict[int, float], namespace: str,
    options: SearchOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """Personalized PageRank over entities and passages by power iteration from the seeds, `walk_steps` long.

    Only what the walk reaches is fetched (links of the nodes and chunks holding weight), so the cost follows
    the seeds' neighbourhood, not the size of the graph; each step moves weight over all its links at once.
    Returns the passages reached (sorted ids) and their scores.
    """
    import numpy as np  # loaded by then (the query vector is an array); not at import, to keep start-up light

    damping = options.walk_damping
    # An entity or passage holding less than this share of the seeds' weight moves too little to change the
    # ranking: dropping it spares fetching the links of most of the neighbourhood (each of a hub's thousands of
    # neighbours and passages holds a thousandth of its share).
    negligible = options.walk_min_share * (sum(node_seeds.values()) + sum(chunk_seeds.values()))

    def arrays(seeds: dict[int, float]) -> tuple[np.ndarray, np.ndarray]:
        return _summed([(list(seeds), list(seeds.values()))])

    def spread(ids: np.ndarray, weight: np.ndarray, *owner_arrays: np.ndarray, degree: np.ndarray | None = None
               ) -> list[np.ndarray]:
        """Each id's damped weight, shared evenly over its links (`degree` of them, or those in the arrays): the
        share carried by each link of each array."""
        positions = [np.searchsorted(ids, np.asarray(owners, dtype=np.int64)) for owners in owner_arrays]
        if degree is None:
            degree = sum(np.bincount(p, minlength=len(ids)) for p in positions)
        share = np.divide(damping * weight, degree, out=np.zeros(len(ids)), where=degree > 0)
        return [share[p] for p in positions]

    (node_ids, node_weight), (chunk_ids, chunk_weight) = arrays(node_seeds), arrays(chunk_seeds)
    restart_nodes, restart_chunks = (node_ids, (1 - damping) * node_weight), (chunk_ids, (1 - damping) * chunk_weight)
    for step in range(options.walk_steps):
        held, held_chunks = node_weight >= negligible, chunk_weight >= negligible
        node_ids, node_weight, chunk_ids, chunk_weight = (
            node_ids[held], node_weight[held], chunk_ids[held_chunks], chunk_weight[held_chunks])
        if step == options.walk_steps - 1:  # only what flows into passages: each entity's degree, not its neighbours
            degree, (mentioned, mentioning) = store.passage_links(node_ids, namespace, as_of=options.as_of)
            chunk_ids, chunk_weight = _summed(
                [restart_chunks, (mentioning, *spread(node_ids, node_weight, mentioned, degree=degree))])
            break
        links = store.links(node_ids, chunk_ids, namespace, as_of=options.as_of)
        (neighbour_of, neighbours), (mentioned, mentioning) = links.node_neighbors, links.node_chunks
        to_neighbours, to_chunks = spread(node_ids, node_weight, neighbour_of, mentioned)
        chunk_of, in_chunk = links.chunk_nodes
        node_ids, node_weight = _summed(
            [restart_nodes, (neighbours, to_neighbours), (in_chunk, *spread(chunk_ids, chunk_weight, chunk_of))])
        chunk_ids, chunk_weight = _summed([restart_chunks, (mentioning, to_chunks)])
    return chunk_ids, chunk_weight


def _summed(parts: list[tuple[Sequence[int], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) pairs merged: sorted distinct ids, each with the sum of its weights."""
    import numpy as np  # see _walk

    ids = np.concatenate([np.asarray(i, dtype=np.int64) for i, _ in parts])
    weights = np.concatenate([np.asarray(w, dtype=float) for _, w in parts])
    distinct, position = np.unique(ids, return_inverse=True)
    return distinct, np.bincount(position, weights=weights, minlength=len(distinct))
