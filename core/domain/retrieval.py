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
   that mention them. The walk restarts at the query's seeds: the entities the query names as proper names (weighted
   down the more passages mention them) and the far ends of each one's facts nearest the query (when it names none:
   the two ends of the facts most similar to the query among the facts of the entities nearest it), and, lightly,
   the passages most similar to the query; a seed whose name holds other names ("Fredericton, New Brunswick",
   "Maharashtra state") brings in the entities they name ("Fredericton", "New Brunswick", "Maharashtra") as well. A
   passage scores by the share of the walk that reaches it, so a passage about the bridge entity of a multi-hop
   question ("the performer of Hello Love" -> Hank Snow -> where he died) ranks high although its text shares little
   with the question, and entities every passage mentions ("United States") spread their weight thin. The entities
   the walk reached most beyond its seeds (the likely bridges) then seed a shorter walk, which ranks the passages
   about them, and so on while the walk has steps left. The chunks just before and after each of the best passages
   in its document join the passages ranked next: a passage cut from a longer text goes on there.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from duckgraph.core.domain.texts import passage_text
from duckgraph.ports import (
    ChunkRecord, EdgeRecord, GraphStore, NodeRecord, TimeFilter, entity_key, isin_ids, loose_key, name_candidates,
    terms, tokens)

if TYPE_CHECKING:
    import numpy as np


#: Facts returned at most per node kept: enough for every path and its neighbours, bounded on dense graphs.
FACTS_PER_NODE = 2
#: Where a name's parts meet ("Fredericton, New Brunswick"; not "2,913,123"): see `_with_name_parts`.
_PARTS = re.compile(r"\s*,\s+")


@dataclass(frozen=True)
class SearchOptions:
    """Knobs of a search. The defaults suit a graph written by a host LLM."""

    k_anchors: int = 5
    hops: int = 2
    max_nodes: int = 30
    max_passages: int = 5
    #: Passages ranked next after the best `max_passages` that the text shows after everything else, while the
    #: token budget has room (see `render_search`): the answer to a multi-hop question is often a few ranks further
    #: down. They are not among the result's `passages`. 0: none.
    more_passages: int = 5
    #: The share of the best passage's score such a passage needs: the walk's tail (passages it barely reached, in
    #: a small memory all the others) is no answer.
    more_passages_share: float = 0.05
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
    #: When the query names entities, the walk starts from them and from this many of each one's facts nearest
    #: the query (not from the facts nearest the query anywhere): see `_named_fact_seeds`.
    facts_per_name: int = 2
    #: Entities a walk reached most (seeds and named entities aside) that seed a walk on from them: the likely
    #: bridges of a multi-hop question (see `_walk_with_bridges`); 0 walks once.
    bridge_seeds: int = 3
    #: Passages nearest the query that seed the walk, and their weight relative to the entity seeds.
    passage_seeds: int = 30
    passage_seed_weight: float = 0.05
    #: Probability that the walk follows a link rather than restarting at a seed, and how many steps it takes.
    walk_damping: float = 0.4
    walk_steps: int = 3
    #: An entity or passage holding less than this share of the seeds' weight stops moving (see `_walk`).
    walk_min_share: float = 1e-4
    rrf_k: int = 60
    #: Rows the keyword (BM25) channel proposes per kind, and the weight of its score beside the cosine's (see
    #: `_with_keywords`; chosen on the public LoCoMo conversations, where 0.5-0.7 held on both).
    keyword_candidates: int = 30
    keyword_weight: float = 0.6
    #: Pseudo-relevance feedback for passages that mention no entity (see `_with_feedback`): the passages taken as
    #: relevant (0: none), the weight of their mean vector beside the query's, and of their words' BM25 beside the
    #: query's (on the public LoCoMo conversations, 0.3-1.0 and 0.3-0.5 helped in both modes).
    feedback_passages: int = 3
    feedback_weight: float = 0.5
    feedback_keyword_weight: float = 0.3
    #: The share of a shown passage's score that the passage following it in reading order gets at least (see
    #: `_with_replies`; 0: none). On the public LoCoMo conversations 0.6-0.7 held in both modes; from 0.75 up, the
    #: facts mode lost its open-domain questions (facts that follow each other are not replies).
    reply_share: float = 0.7
    #: The cosine similarity the nearest entity or passage needs for anything to be returned (see `_relevant`):
    #: None takes the embedder's calibrated `relevance_floor`; 0 turns the floor off.
    relevance_floor: float | None = None
    #: Share of the floor it moves by for a query that names things (see `_floor`): down when every name is stored,
    #: up when one is not (0.04-0.06 in cosine held on both public LoCoMo conversations in both modes).
    name_margin: float = 0.12
    #: Time (naive UTC): facts valid at `as_of` (None: now) are followed and shown; `include_history` adds those
    #: that ended before it; `after` / `before` keep facts valid, and passages whose document's time falls,
    #: within [after, before). A given `as_of` also leaves out passages of documents timed after it (they told of
    #: a later world). Unused, they cost nothing: the store's plain path is taken.
    as_of: datetime | None = None
    include_history: bool = False
    after: datetime | None = None
    before: datetime | None = None


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
    records: dict[int, NodeRecord]  # the kept nodes (and perhaps a few far ends of facts not kept)
    edges: list[tuple[EdgeRecord, float]]  # the facts that best answer the query first, with their scores
    passages: list[tuple[ChunkRecord, float]]  # best first
    #: The passages ranked next (at most `more_passages`), best first: shown in the text while the budget has room.
    more_passages: list[tuple[ChunkRecord, float]] = field(default_factory=list)
    #: True when nothing stored reached the relevance floor (everything above is then empty).
    nothing_relevant: bool = False


@dataclass(frozen=True)
class WordMatches:
    """What the query's words find without its vector: the entities it names, and the entities and passages the
    keyword channel ranks best. A search looks them up while the query is embedded."""

    named: list[NodeRecord]
    nodes: list[tuple[int, float]]
    chunks: list[tuple[int, float]]


def match_words(store: GraphStore, query_text: str, namespace: str, options: SearchOptions) -> WordMatches:
    """The query's `WordMatches`: the entities named verbatim (or loosely), the keyword channel's best entities
    (anchor candidates) and passages (when passages are wanted and the channel weighs)."""
    candidates = name_candidates(query_text)
    named = store.find_nodes(namespace, candidates | {loose for key in candidates if (loose := loose_key(key))})
    nodes = store.keyword_search("node", query_text, _anchor_candidates(options), namespace)
    chunks = (store.keyword_search("chunk", query_text, options.keyword_candidates, namespace)
              if options.max_passages > 0 and options.keyword_weight > 0 else [])
    return WordMatches(named, nodes, chunks)


def anchor_and_expand(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, options: SearchOptions,
    words: WordMatches | None = None,
) -> Subgraph:
    """The subgraph and passages that answer the query; `words`: `match_words`'s, when looked up already."""
    if words is None:
        words = match_words(store, query_text, namespace, options)
    named = words.named
    nearest = store.vector_search("node", query, max(_anchor_candidates(options), options.fact_seed_nodes), namespace)
    # One search of the passages nearest the query serves the floor and the passage ranking.
    nearest_chunks = (store.vector_search("chunk", query, max(options.passage_seeds, options.max_passages), namespace)
                      if options.max_passages > 0 else None)
    if not _relevant(store, query_text, query, nearest, nearest_chunks, namespace, options):
        return Subgraph(anchors=[], nodes=[], records={}, edges=[], passages=[], nothing_relevant=True)
    anchors = _anchors(store, named, nearest, words.nodes, query, options)
    reached, edges = _expand(store, query, namespace, anchors, options)
    kept = _prune(reached, anchors, options)
    kept_ids = {r.node_id for r in kept}
    records = {n.id: n for n in store.get_nodes(kept_ids)}
    kept = [r for r in kept if r.node_id in records]
    facts = _rank_facts(store, query, edges, kept, options)
    fetched = {e.id: e for e in store.get_edges(list(facts))}
    far_ends = {i for e in fetched.values() for i in (e.source_id, e.target_id)} - records.keys()
    records.update({n.id: n for n in store.get_nodes(far_ends)})
    result_edges, kept = _join_far_ends([(fetched[i], *facts[i]) for i in facts if i in fetched], kept, records, options)
    passages = _rank_passages(store, query_text, query, namespace, named, nearest[: options.fact_seed_nodes],
                              nearest_chunks or [], words.chunks, options)
    return Subgraph(anchors=[r for r in kept if r.hop == 0], nodes=kept, records=records, edges=result_edges,
                    passages=passages[: options.max_passages], more_passages=passages[options.max_passages:])


def _edge_filter(options: SearchOptions) -> TimeFilter | datetime | None:
    """What the store's graph reads take as `as_of`: the plain moment (None: now) unless more is asked."""
    if not options.include_history and options.after is None and options.before is None:
        return options.as_of
    return TimeFilter(as_of=options.as_of, history=options.include_history, after=options.after,
                      before=options.before)


def _timed(options: SearchOptions) -> bool:
    """Whether passages are filtered by their document's time (see `_in_window`)."""
    return options.as_of is not None or options.after is not None or options.before is not None


def _in_window(store: GraphStore, ids: Sequence[int], namespace: str, options: SearchOptions) -> np.ndarray:
    """Which of the chunk `ids` may be shown: those whose document's time lies in [after, before) (with a window,
    a passage of unknown time is left out) and is not after a given `as_of` (unknown time: kept, as a fact of
    unknown start is valid at any moment)."""
    import numpy as np  # see _walk

    ids = np.asarray(ids, dtype=np.int64)
    if not _timed(options):
        return np.ones(len(ids), dtype=bool)
    times = store.chunk_times(ids.tolist(), namespace)
    window = options.after is not None or options.before is not None

    def shown(t: datetime | None) -> bool:
        if t is None:
            return not window
        return ((options.after is None or t >= options.after) and (options.before is None or t < options.before)
                and (options.as_of is None or t <= options.as_of))

    return np.array([shown(times.get(i)) for i in ids.tolist()], dtype=bool)


def _anchor_candidates(options: SearchOptions) -> int:
    """How many of the nodes nearest the query may become anchors: 4 per anchor wanted, at least 20."""
    return max(4 * options.k_anchors, 20)


def _relevant(
    store: GraphStore, query_text: str, query: np.ndarray, nearest: list[tuple[int, float]],
    nearest_chunks: list[tuple[int, float]] | None, namespace: str, options: SearchOptions,
) -> bool:
    """Whether anything stored is relevant enough to answer: the nearest entity or passage is at least
    `relevance_floor` similar to the query (a `name_margin` share of it less when every name the query gives is
    stored, that much more when one is not: `_names_stored`), or an id the query names verbatim ("INC-142",
    "v2.3") is stored. Below it a search returns nothing, so that the model says it does not know instead of
    reading noise."""
    if not options.relevance_floor:
        return True
    floor, margin = options.relevance_floor, options.relevance_floor * options.name_margin
    best = max((s for _, s in nearest[:1]), default=-1.0)
    if best < floor + margin:
        if nearest_chunks is None:  # no passages wanted: only the nearest one counts here
            nearest_chunks = store.vector_search("chunk", query, 1, namespace)
        best = max(best, max((s for _, s in nearest_chunks[:1]), default=-1.0))
    if floor - margin <= best < floor + margin:  # near the floor: what the query names tips the balance
        floor += margin * _names_stored(store, query_text, namespace)
    if best >= floor:
        return True
    ids = [word for word in tokens(query_text) if any(joiner in word for joiner in "-._/")]
    return any(store.keyword_search(kind, " ".join(ids), 1, namespace) for kind in ("node", "chunk")) if ids else False


def _names_stored(store: GraphStore, query_text: str, namespace: str) -> int:
    """-1 when the query names things (words written like proper names, numbers aside) and every one is a word of
    something stored, +1 when one is not, 0 when it names nothing. A name is the surest sign of what a question
    is about: one the memory holds makes a middling match likely relevant, one it never saw ("Kubernetes" in a
    memory of other things) makes it likely that nothing stored answers."""
    names = name_candidates(query_text, 1, proper_only=True)
    words = {term for name in names for term in terms(name) if not term.isdigit()}
    if not words:
        return 0
    stored = all(any(store.keyword_search(kind, word, 1, namespace) for kind in ("node", "chunk", "edge"))
                 for word in words)
    return -1 if stored else 1


def _anchors(
    store: GraphStore, named: list[NodeRecord], nearest: list[tuple[int, float]],
    keyword_nodes: list[tuple[int, float]], query: np.ndarray, options: SearchOptions,
) -> list[Reached]:
    if options.k_anchors <= 0:
        return []
    vector_hits = nearest[: _anchor_candidates(options)]
    named = list(named)
    relevance = dict(vector_hits)
    missing = [i for i in [*(n.id for n in named), *(i for i, _ in keyword_nodes)] if i not in relevance]
    relevance.update(store.similarities("node", missing, query))
    # Longer names are more specific ("New York Times" over "New York"); ties go to the closer vector.
    named.sort(key=lambda n: (-len(n.key), -relevance.get(n.id, -1.0)))
    fused: dict[int, float] = {}
    for ranking in ([node_id for node_id, _ in vector_hits], [n.id for n in named], [i for i, _ in keyword_nodes]):
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
            frontier, namespace, as_of=_edge_filter(options), limit=options.frontier * 20)
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


def _edges_touching(
    walked: list[tuple[np.ndarray, np.ndarray, np.ndarray]], node_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct walked edges with an end among `node_ids` (sorted), as (ids, sources, targets)."""
    import numpy as np  # see _walk

    if not walked:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    ids, sources, targets = (np.concatenate(part) for part in zip(*walked))
    touching = isin_ids(sources, node_ids) | isin_ids(targets, node_ids)
    ids, first = np.unique(ids[touching], return_index=True)
    return ids, sources[touching][first], targets[touching][first]


def _rank_facts(
    store: GraphStore, query: np.ndarray, walked: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    kept: list[Reached], options: SearchOptions,
) -> dict[int, tuple[float, float]]:
    """The facts (edges) that best answer the query, best first, each with its score and its own similarity
    to the query: those among the kept
    nodes, and those from a kept node to one left out that score as high as a node needs to be kept ("Payments
    Team owns Checkout Service" for "which team owned the service hit by INC-142?": the team alone is far from
    the question). At most `FACTS_PER_NODE` per kept node.

    A fact scores the geometric mean of its own similarity to the query and of its context: the mean
    relevance of the chain that reached the kept end it extends (the anchor's relevance, then each fact
    walked). Both must be high: for "who leads the team that owns X?", "Omar leads Discovery Team", next to
    "Discovery Team owns X", outranks "Lena leads Platform Team", though the two facts alone are about as close
    to the question; and a weak fact hanging off a strong chain stays weak.
    """
    import numpy as np  # see _walk

    nodes = np.fromiter(sorted(r.node_id for r in kept), np.int64, len(kept))
    ids, sources, targets = _edges_touching(walked, nodes)
    if not len(ids):
        return {}
    similarity = np.maximum(np.nan_to_num(store.similarity_array("edge", ids, query), nan=0.0), 0.0)
    context, via = (np.array([column[n] for n in nodes.tolist()]) for column in _chains(kept, ids, similarity))
    best_context = np.zeros(len(ids))
    both_kept = np.ones(len(ids), dtype=bool)
    for ends in (sources, targets):
        at = np.minimum(np.searchsorted(nodes, ends), len(nodes) - 1)
        inside = nodes[at] == ends
        both_kept &= inside
        # The fact that reached an end is the last link of that end's chain: it extends the other end's.
        extends = inside & (via[at] != ids)
        best_context = np.where(extends, np.maximum(best_context, context[at]), best_context)
    score = np.sqrt(best_context * similarity)
    threshold = _keep_threshold([r for r in kept if r.hop == 0], options)
    chosen = np.flatnonzero(both_kept | (score >= threshold))
    best = chosen[np.argsort(-score[chosen], kind="stable")[: FACTS_PER_NODE * options.max_nodes]]
    return dict(zip(ids[best].tolist(), zip(score[best].tolist(), similarity[best].tolist())))


def _join_far_ends(
    facts: list[tuple[EdgeRecord, float, float]], kept: list[Reached], records: dict[int, NodeRecord],
    options: SearchOptions,
) -> tuple[list[tuple[EdgeRecord, float]], list[Reached]]:
    """The facts (best first, with their scores) and the nodes: a fact leading out of the kept nodes brings
    its far end in while fewer than `max_nodes` are kept (reached through the fact, as relevant as the fact),
    and is dropped otherwise, so the result stays a connected subgraph of at most `max_nodes`."""
    by_id = {r.node_id: r for r in kept}
    shown: list[tuple[EdgeRecord, float]] = []
    for edge, score, similarity in facts:
        far = [i for i in (edge.source_id, edge.target_id) if i not in by_id]
        if far and (len(by_id) >= options.max_nodes or far[0] not in records or len(far) > 1):
            continue
        if far:
            near = by_id[edge.target_id if far[0] == edge.source_id else edge.source_id]
            by_id[far[0]] = Reached(far[0], near.hop + 1, near.proximity * options.hop_decay, similarity,
                                    parent=near.node_id, via_edge=edge.id)
        shown.append((edge, score))
    return shown, sorted(by_id.values(), key=lambda r: (r.hop > 0, -r.score))


def _chains(kept: list[Reached], ids: np.ndarray, similarity: np.ndarray) -> tuple[dict[int, float], dict[int, int]]:
    """Per kept node, the mean relevance of the chain that reached it from its anchor (the anchor's own
    relevance and the similarity of each fact walked), and the fact that reached it (-1 for anchors)."""
    fact = dict(zip(ids.tolist(), similarity.tolist()))
    by_id = {r.node_id: r for r in kept}
    total: dict[int, float] = {}
    length: dict[int, int] = {}
    for item in sorted(kept, key=lambda r: r.hop):  # parents (one hop closer) first
        parent = by_id.get(item.parent) if item.parent is not None else None
        if parent is None or item.via_edge is None:
            total[item.node_id], length[item.node_id] = max(item.relevance, 0.0), 1
        else:
            total[item.node_id] = total[parent.node_id] + fact.get(item.via_edge, 0.0)
            length[item.node_id] = length[parent.node_id] + 1
    mean = {node_id: total[node_id] / length[node_id] for node_id in total}
    return mean, {r.node_id: r.via_edge if r.via_edge is not None else -1 for r in kept}


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
    nearest: list[tuple[int, float]], nearest_chunks: list[tuple[int, float]], keyword_chunks: list[tuple[int, float]],
    options: SearchOptions,
) -> list[tuple[ChunkRecord, float]]:
    """The best `max_passages` passages, then the `more_passages` ranked next, each part best first."""
    import numpy as np  # see _walk

    if _timed(options):
        shown = _in_window(store, [c for c, _ in nearest_chunks], namespace, options)
        nearest_chunks = [pair for pair, keep in zip(nearest_chunks, shown.tolist()) if keep]
    direct = dict(nearest_chunks)
    if options.max_passages <= 0 or not direct:
        return []
    proper = _proper_names(query_text, named, query, store)
    if proper:
        degree = Counter(node_id for _, node_id in store.chunks_mentioning(proper, limit=2**62))
        rarity = {node_id: _rarity(degree.get(node_id, 0)) for node_id in proper}
        node_seeds, best_fact = _named_fact_seeds(store, query, namespace, rarity, options)
        best_fact = best_fact or max(direct.values())
        for node_id in proper:
            weight = options.name_seed_weight * best_fact * rarity[node_id]
            node_seeds[node_id] = max(node_seeds.get(node_id, 0.0), weight)
    else:
        node_seeds = _fact_seeds(store, query, namespace, [node_id for node_id, _ in nearest], options)
        best_fact = max(node_seeds.values(), default=max(direct.values()))
    top_similarity = max(direct.values())
    direct = _with_keywords(store, query_text, query, direct, keyword_chunks, namespace, options)
    top_direct = max(direct.values())
    chunk_seeds = {c: options.passage_seed_weight * max(s, 0.0) / top_direct for c, s in direct.items()}
    node_seeds = _with_name_parts(store, node_seeds, namespace)
    chunk_ids, scores = _walk_with_bridges(store, node_seeds, chunk_seeds, {n.id for n in named}, best_fact,
                                           namespace, options)
    # Passages the walk reached beyond the nearest ones also keep their own (restart) share of similarity.
    others = ~isin_ids(chunk_ids, np.fromiter(direct, np.int64, len(direct)))
    similarity = np.nan_to_num(store.similarity_array("chunk", chunk_ids[others], query), nan=0.0)
    restart = (1 - options.walk_damping) * options.passage_seed_weight / top_direct
    scores[others] += restart * np.maximum(similarity, 0.0)
    shown = _in_window(store, chunk_ids, namespace, options)
    chunk_ids, scores = _with_replies(store, chunk_ids[shown], scores[shown], namespace, options)
    # 4 candidates per passage wanted leave room for passages of the same document; ties: lower ids first.
    wanted = options.max_passages + max(options.more_passages, 0)
    best = np.argsort(-scores, kind="stable")[: 4 * wanted]
    ranked = _one_per_document(store, list(zip(chunk_ids[best].tolist(), scores[best].tolist())),
                               options.max_passages, wanted, namespace, options)
    scale = _absolute_scale(ranked, top_similarity)
    shown = ranked[: options.max_passages] + [
        (chunk, score) for chunk, score in ranked[options.max_passages:]
        if score >= options.more_passages_share * ranked[0][1]]
    return [(chunk, score * scale) for chunk, score in shown]


def _with_replies(
    store: GraphStore, chunk_ids: np.ndarray, scores: np.ndarray, namespace: str, options: SearchOptions
) -> tuple[np.ndarray, np.ndarray]:
    """The walk's passages with the one that follows each of the best `max_passages` in reading order (the next
    turn of a conversation kept one turn per document, the next chunk of a text: `_neighbours`)
    scored at least `reply_share` of it. A question's words match the turn that asks or tells of a thing; what
    was said of it is often in the reply, whose own words share little with the question."""
    import numpy as np  # see _walk

    if options.reply_share <= 0 or not len(chunk_ids):
        return chunk_ids, scores
    best = np.argsort(-scores, kind="stable")[: options.max_passages]
    lead = dict(zip(chunk_ids[best].tolist(), scores[best].tolist()))
    lifted: dict[int, float] = {}
    for chunk_id, (_, after) in _neighbours(store, list(lead), namespace, options).items():
        if after is not None:
            lifted[after] = max(lifted.get(after, 0.0), options.reply_share * lead[chunk_id])
    replies = np.fromiter(lifted, np.int64, len(lifted))
    if not len(replies):
        return chunk_ids, scores
    present = np.flatnonzero(isin_ids(chunk_ids, replies))
    scores[present] = np.maximum(scores[present], [lifted[i] for i in chunk_ids[present].tolist()])
    new = replies[~isin_ids(replies, chunk_ids[present])]
    return np.concatenate([chunk_ids, new]), np.concatenate([scores, [lifted[i] for i in new.tolist()]])


def _with_keywords(
    store: GraphStore, query_text: str, query: np.ndarray, nearest: dict[int, float],
    keyword_chunks: list[tuple[int, float]], namespace: str, options: SearchOptions,
) -> dict[int, float]:
    """The passages nearest the query, fused with those the keyword (BM25) channel finds, as the walk's passage
    seeds. A passage that mentions no entity, which the walk cannot reach through the graph, scores its cosine
    similarity plus `keyword_weight` x the best cosine x its BM25 score over the best one's, so an exact id,
    number or rare word the vectors miss ("INC-142") lifts it. A passage that mentions entities keeps its
    cosine: the graph already carries the words that matter there (the entities the query names seed the walk),
    and lifting such passages by their words as well pulled multi-hop answers' bridge passages down."""
    import numpy as np  # see _walk

    found = dict(keyword_chunks)
    if found and _timed(options):
        found = {c: s for (c, s), keep in zip(found.items(), _in_window(store, list(found), namespace, options))
                 if keep}
    if not found or options.keyword_weight <= 0:
        return nearest
    candidates = np.fromiter({*nearest, *found}, np.int64)
    linked = set(store.links((), candidates, namespace, as_of=_edge_filter(options)).chunk_nodes[0].tolist())
    missing = np.fromiter((i for i in found if i not in nearest and i not in linked), np.int64)
    similarity = np.nan_to_num(store.similarity_array("chunk", missing, query), nan=0.0)
    fused = {**nearest, **dict(zip(missing.tolist(), similarity.tolist()))}
    # Every candidate is scored on both channels: one the vectors found also gets its words' score, even where it
    # is not among the keyword channel's best.
    unscored = [i for i in fused if i not in found and i not in linked]
    found.update(store.keyword_scores("chunk", query_text, unscored, namespace) if unscored else {})
    lift = options.keyword_weight * max(max(nearest.values(), default=0.0), 0.0) / max(found.values())
    fused = {i: s + (0.0 if i in linked else lift * found.get(i, 0.0)) for i, s in fused.items()}
    return _with_feedback(store, query, fused, found, linked, namespace, options)


def _with_feedback(
    store: GraphStore, query: np.ndarray, fused: dict[int, float], found: dict[int, float], linked: set[int],
    namespace: str, options: SearchOptions,
) -> dict[int, float]:
    """Pseudo-relevance feedback for the candidate passages that mention no entity: the best `feedback_passages`
    of them are taken as relevant, and each such candidate is scored again as `_with_keywords` scores it, its
    cosine taken to the query vector moved towards their mean vector (Rocchio, `feedback_weight`) and its BM25
    score joined by `feedback_keyword_weight` x its score for their words (each over its best). A conversation
    says one thing over several turns in other words than the question's; the turns that match best bring in
    their words and their meaning. Passages that mention entities have the graph for that."""
    import numpy as np  # see _walk

    unlinked = [i for i in fused if i not in linked]
    if options.feedback_passages <= 0 or len(unlinked) <= options.feedback_passages:
        return fused
    best = sorted(unlinked, key=lambda i: (-fused[i], i))[: options.feedback_passages]
    vectors = store.get_vectors("chunk", best)
    if not vectors:
        return fused
    moved = query + options.feedback_weight * np.mean(list(vectors.values()), axis=0)
    moved = moved / max(float(np.linalg.norm(moved)), 1e-12)
    ids = np.fromiter(unlinked, np.int64, len(unlinked))
    cosine = np.nan_to_num(store.similarity_array("chunk", ids, moved), nan=0.0)
    chunks = store.get_chunks(best)
    titles = store.document_titles({c.document_id for c in chunks}, namespace)
    echoed = store.keyword_scores(
        "chunk", " ".join(passage_text(titles.get(c.document_id, ""), c.text, c.section) for c in chunks), unlinked,
        namespace)
    top_found, top_echoed = max(found.values()), max(echoed.values(), default=0.0) or 1.0
    words = {i: found.get(i, 0.0) / top_found + options.feedback_keyword_weight * echoed.get(i, 0.0) / top_echoed
             for i in unlinked}
    lift = options.keyword_weight * max(float(cosine.max()), 0.0) / (max(words.values()) or 1.0)
    return {**fused, **{i: c + lift * words[i] for i, c in zip(ids.tolist(), cosine.tolist())}}


def _absolute_scale(ranked: list[tuple[ChunkRecord, float]], top_similarity: float) -> float:
    """What turns walk scores into scores comparable across queries: the best passage scores the best
    similarity of any passage to the query (a cosine), the others in proportion, so the ranking stays the
    walk's while an off-topic query, whose nearest passage is far, gets low scores."""
    top = ranked[0][1] if ranked else 0.0
    return max(top_similarity, 0.0) / top if top > 0 else 0.0


def _one_per_document(
    store: GraphStore, candidates: list[tuple[int, float]], limit: int, total: int, namespace: str,
    options: SearchOptions,
) -> list[tuple[ChunkRecord, float]]:
    """The best `limit` of the ranked `candidates`, at most one per document while other documents have some,
    then the next best up to `total` in all by the same rule and the chunks next to the first `limit` in their
    documents (`_with_adjacent`), each part best first."""
    document_of = store.chunk_documents([chunk_id for chunk_id, _ in candidates])
    seen: set[str] = set()
    first, repeats = [], []
    for chunk_id, score in candidates:
        if (document_id := document_of.get(chunk_id)) is not None:
            (repeats if document_id in seen else first).append((chunk_id, score))
            seen.add(document_id)
    order = first + repeats
    best = sorted(order[:limit], key=lambda item: -item[1])
    picked = [*best, *_with_adjacent(store, best, order[limit:total], total - limit, namespace, options)]
    chunks = {c.id: c for c in store.get_chunks([chunk_id for chunk_id, _ in picked])}
    return [(chunks[chunk_id], score) for chunk_id, score in picked if chunk_id in chunks]


def _with_adjacent(
    store: GraphStore, best: list[tuple[int, float]], next_ones: list[tuple[int, float]], limit: int, namespace: str,
    options: SearchOptions,
) -> list[tuple[int, float]]:
    """The passages ranked next (`next_ones`) and the chunks just before and after each of the `best` in reading
    order (`_neighbours`), each such chunk scored as the best passage beside it: at most `limit`, best first.

    A passage is a piece of a longer text cut to the chunk size, and what it leaves out goes on in the next or the
    previous piece: the paragraph on a city's snowfall whose figures fell into the chunk before, which mentions
    other entities and so gets little of the walk (the parent document / sentence window of retrieval)."""
    if limit <= 0:
        return []
    scores, shown = dict(next_ones), dict(best)
    for chunk_id, adjacent in _neighbours(store, list(shown), namespace, options).items():
        for other in adjacent:
            if other is not None and other not in shown:
                scores[other] = max(scores.get(other, 0.0), shown[chunk_id])
    return sorted(scores.items(), key=lambda item: -item[1])[:limit]


def _neighbours(
    store: GraphStore, ids: list[int], namespace: str, options: SearchOptions
) -> dict[int, tuple[int | None, int | None]]:
    """The chunks before and after each of `ids` in reading order (`GraphStore.adjacent_chunks`), less those the
    search's time window leaves out: a conversation's next turn may be timed after `as_of`."""
    adjacent = store.adjacent_chunks(ids, namespace)
    if not _timed(options):
        return adjacent
    others = [other for pair in adjacent.values() for other in pair if other is not None]
    kept = {other for other, keep in zip(others, _in_window(store, others, namespace, options).tolist()) if keep}
    return {i: (before if before in kept else None, after if after in kept else None)
            for i, (before, after) in adjacent.items()}


def _fact_seeds(
    store: GraphStore, query: np.ndarray, namespace: str, nearest: list[int], options: SearchOptions
) -> dict[int, float]:
    """The ends of the facts nearest the query, each weighted by its best fact's similarity.

    The facts are those of the nodes nearest the query, not all of them: a fact close to a question is nearly
    always about an entity close to it too (on the MuSiQue set, 96.5% of the 4 best facts are the same), and
    scoring the edges of 100 nodes costs a fraction of a millisecond where searching millions of edge vectors
    costs tens (and an index over them).
    """
    if options.fact_seeds <= 0 or not nearest:
        return {}
    seeds: dict[int, float] = {}
    for source, target, weight in _nearest_facts(store, query, namespace, nearest, options.fact_seeds,
                                                 20 * len(nearest), options):
        for node_id in (source, target):
            seeds[node_id] = max(seeds.get(node_id, 0.0), max(weight, 0.0))
    return seeds


def _nearest_facts(
    store: GraphStore, query: np.ndarray, namespace: str, node_ids: list[int], k: int, limit: int,
    options: SearchOptions,
) -> list[tuple[int, int, float]]:
    """The `k` facts most similar to the query among those of `node_ids` (at most `limit` of them, the strongest
    first), as (source, target, similarity), most similar first."""
    import numpy as np  # see _walk

    edge_ids, sources, targets, _ = store.neighbor_ends(node_ids, namespace, as_of=_edge_filter(options), limit=limit)
    similarity = store.similarity_array("edge", edge_ids, query)
    scored = np.flatnonzero(~np.isnan(similarity))  # edges stored without a vector are no facts to match
    best = scored[np.argsort(-similarity[scored], kind="stable")[:k]]
    return list(zip(sources[best].tolist(), targets[best].tolist(), similarity[best].tolist()))


def _rarity(passages: int) -> float:
    """How much an entity mentioned by `passages` passages weighs as a seed: log(2)/log(1 + n), 1 for a name one
    passage mentions, a third for one that seven passages mention (a hub spreads the walk over passages that are
    not about the query)."""
    return math.log(2) / math.log(1 + max(passages, 1))


def _named_fact_seeds(
    store: GraphStore, query: np.ndarray, namespace: str, rarity: dict[int, float], options: SearchOptions
) -> tuple[dict[int, float], float]:
    """The far ends of the `facts_per_name` facts nearest the query of each entity the query names, each weighted
    by its fact's similarity and its named entity's rarity; and the best of those facts' similarities.

    A multi-hop question starts from what it names ("the performer of Hello Love"), and the fact that leads on
    from there (Hello Love -PERFORMED_BY-> Hank Snow) is among the named entity's facts nearest the question. The
    facts nearest the question anywhere are taken over by its last hop's words ("how many stores"): those of
    similar entities it does not name ("41st Chess Olympiad" for one about the 26th), which lead the walk away.
    Each name gets its own facts, so a question naming two chains follows both.
    """
    seeds: dict[int, float] = {}
    best_fact = 0.0
    if options.fact_seeds <= 0:  # no fact seeds at all
        return seeds, best_fact
    for named_id, share in rarity.items():
        for source, target, weight in _nearest_facts(store, query, namespace, [named_id], options.facts_per_name,
                                                     options.frontier * 20, options):
            far = target if source == named_id else source
            seeds[far] = max(seeds.get(far, 0.0), max(weight, 0.0) * share)
            best_fact = max(best_fact, weight)
    return seeds, best_fact


def _walk_with_bridges(
    store: GraphStore, node_seeds: dict[int, float], chunk_seeds: dict[int, float], named: set[int],
    best_fact: float, namespace: str, options: SearchOptions,
) -> tuple[np.ndarray, np.ndarray]:
    """The walk from the seeds, then from the bridges it leads to: the passages reached and their scores.

    The `bridge_seeds` entities a walk reached with most weight, other than the seeds so far and the entities the
    query names, are what the seeds' facts and passages lead to: the bridge of a multi-hop question (Hank Snow,
    reached from Hello Love), whose own passages (where he died) the walk reached only thinly, its weight spread
    over all of them. Each round walks on from the last round's bridges, one step beyond the seeds before it: one
    step shorter (while a step is left), each bridge weighted the walk's damping times the round before's weight
    (the best fact's similarity first), scaled by its weight over the most reached bridge's. The walk is linear in
    its seeds, so each round's scores add to the first's.
    """
    import numpy as np  # see _walk

    chunk_ids, scores, reached = _walk(store, node_seeds, chunk_seeds, namespace, options)
    seen = dict(node_seeds)
    total = sum(node_seeds.values()) + sum(chunk_seeds.values())
    weight = best_fact
    for steps in range(options.walk_steps - 1, 0, -1):
        node_ids, weights = reached
        weight *= options.walk_damping
        chosen = [i for i in np.argsort(-weights, kind="stable").tolist()
                  if (node_id := int(node_ids[i])) not in seen and node_id not in named][: options.bridge_seeds]
        if not chosen or weight <= 0 or weights[chosen[0]] <= 0:
            break
        bridges = {int(node_ids[i]): weight * float(weights[i] / weights[chosen[0]]) for i in chosen}
        seen.update(bridges)
        total += sum(bridges.values())
        more_ids, more_scores, reached = _walk(store, bridges, {}, namespace, replace(options, walk_steps=steps),
                                               weight_of_seeds=total)
        chunk_ids, scores = _summed([(chunk_ids, scores), (more_ids, more_scores)])
    return chunk_ids, scores


def _with_name_parts(store: GraphStore, node_seeds: dict[int, float], namespace: str) -> dict[int, float]:
    """The seeds and the entities named by the parts of their names (`_name_parts`: "Fredericton" and "New
    Brunswick" in "Fredericton, New Brunswick", "Maharashtra" in "Maharashtra state"), each as heavy as the heaviest
    seed whose name holds it.

    Extractors write one place several ways, as different entities: the passage that says where Meehan Bonnar was
    born names "Fredericton, New Brunswick", the one about the Diocese of Fredericton names "Fredericton", and the
    walk has no link between them; the passage about Shringarpur names "Maharashtra state", the one about the state
    "Maharashtra". The parts after the first name what holds it ("Pocahontas Mounds is in Hinds County,
    Mississippi"): what a question often asks for next ("when did the state where Pocahontas Mounds is become part
    of the United States?"). A part that names no stored entity brings nothing.
    """
    weight_of: dict[str, float] = {}  # a part's loose key -> the heaviest seed whose name holds it
    keys: set[str] = set()
    for node in store.get_nodes([node_id for node_id, weight in node_seeds.items() if weight > 0]):
        for part in _name_parts(node.name):
            if loose := loose_key(part):
                weight_of[loose] = max(weight_of.get(loose, 0.0), node_seeds[node.id])
                keys.update((loose, entity_key(part)))
    parts: dict[int, float] = {}
    loose_keys = set(weight_of)
    for other in store.find_nodes(namespace, keys) if keys else []:
        if other.id not in node_seeds and (key := _matched_key(other, loose_keys)):
            parts[other.id] = max(parts.get(other.id, 0.0), weight_of[key])
    return {**node_seeds, **parts} if parts else node_seeds


def _name_parts(name: str) -> list[str]:
    """The names inside an entity's name: its parts between commas, and each longest run of capitalised words that
    is not the whole name, when a lower-case word longer than three letters tells that the name is a proper name
    with common nouns around it ("2000 Hong Kong action film", "Roman invasion of Britain"). A name written in title
    case, where only articles, conjunctions and short prepositions stay lower case ("The Jewel of the Nile", "Jump
    for Glory"), or a date ("7 December 1988"), is one name: "Nile" there is no seed for a question about the
    film."""
    name = name.strip()
    parts = _PARTS.split(name) if _PARTS.search(name) else []
    if not any(word.isalpha() and word.islower() and len(word) > 3 for word in name.split()):
        return parts
    runs: list[list[str]] = [[]]
    for word in name.split():
        if word[0].isupper():
            runs[-1].append(word)
        elif runs[-1]:
            runs.append([])
    capitalised = (" ".join(words) for words in runs if words)
    return [*parts, *(run for run in capitalised if run != name and run not in parts)]


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
    options: SearchOptions, weight_of_seeds: float | None = None,
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Personalized PageRank over entities and passages by power iteration from the seeds, `walk_steps` long.

    Only what the walk reaches is fetched (links of the nodes and chunks holding weight), so the cost follows
    the seeds' neighbourhood, not the size of the graph; each step moves weight over all its links at once.
    Returns the passages reached (sorted ids) and their scores, and the entities that held weight before the
    last step (ids, weights). `weight_of_seeds` is what the negligible share (`walk_min_share`) is taken of, when
    this walk adds to another (default: these seeds' own weight).
    """
    import numpy as np  # loaded by then (the query vector is an array); not at import, to keep start-up light

    damping = options.walk_damping
    # An entity or passage holding less than this share of the seeds' weight moves too little to change the
    # ranking: dropping it spares fetching the links of most of the neighbourhood (each of a hub's thousands of
    # neighbours and passages holds a thousandth of its share).
    if weight_of_seeds is None:
        weight_of_seeds = sum(node_seeds.values()) + sum(chunk_seeds.values())
    negligible = options.walk_min_share * weight_of_seeds

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
    entities = (node_ids, node_weight)
    for step in range(options.walk_steps):
        held, held_chunks = node_weight >= negligible, chunk_weight >= negligible
        node_ids, node_weight, chunk_ids, chunk_weight = (
            node_ids[held], node_weight[held], chunk_ids[held_chunks], chunk_weight[held_chunks])
        entities = (node_ids, node_weight)
        if step == options.walk_steps - 1:  # only what flows into passages: each entity's degree, not its neighbours
            degree, (mentioned, mentioning) = store.passage_links(node_ids, namespace, as_of=_edge_filter(options))
            chunk_ids, chunk_weight = _summed(
                [restart_chunks, (mentioning, *spread(node_ids, node_weight, mentioned, degree=degree))])
            break
        links = store.links(node_ids, chunk_ids, namespace, as_of=_edge_filter(options))
        (neighbour_of, neighbours), (mentioned, mentioning) = links.node_neighbors, links.node_chunks
        to_neighbours, to_chunks = spread(node_ids, node_weight, neighbour_of, mentioned)
        chunk_of, in_chunk = links.chunk_nodes
        node_ids, node_weight = _summed(
            [restart_nodes, (neighbours, to_neighbours), (in_chunk, *spread(chunk_ids, chunk_weight, chunk_of))])
        chunk_ids, chunk_weight = _summed([restart_chunks, (mentioning, to_chunks)])
    return chunk_ids, chunk_weight, entities


def _summed(parts: list[tuple[Sequence[int], Sequence[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights) pairs merged: sorted distinct ids, each with the sum of its weights."""
    import numpy as np  # see _walk

    ids = np.concatenate([np.asarray(i, dtype=np.int64) for i, _ in parts])
    weights = np.concatenate([np.asarray(w, dtype=float) for _, w in parts])
    distinct, position = np.unique(ids, return_inverse=True)
    return distinct, np.bincount(position, weights=weights, minlength=len(distinct))
