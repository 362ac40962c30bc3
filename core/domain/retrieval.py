"""Anchor & expand: find the entities a query is about, walk the graph around them, keep what is on topic.

0. The floor (relevance.py's `relevant`): nothing is returned when nothing stored is similar enough to the query.
1. Anchors: the query's nearest node vectors fused (reciprocal rank fusion) with nodes named verbatim in it and
   the keyword channel's best entities, then the ends of its best facts (a word only a fact holds, "PO-88123" in a
   relation's description, finds the two entities it joins).
   An anchor far less relevant than the best one (picked for its name alone: "apple" the fruit for a
   question about the company) is dropped before expansion, so its neighbourhood is never entered.
2. Expansion: a breadth-first walk up to `hops`, at most `frontier` nodes carried into each next hop (the
   most promising by proximity x relevance). Proximity decays per hop and with weak edges. A reached node's
   relevance is the better of its own similarity to the query and that of the fact (edge) that reached it:
   "Harvard University" alone is far from "which university did Bill Gates drop out of?", the fact
   "Bill Gates dropped out of Harvard University" is close. A step to what replaced a node ("ADR-7 SUPERSEDES
   ADR-3"), or one that goes on with the chain of one relation type that reached it from an entity the query names
   ("billing-service DEPENDS_ON auth-service DEPENDS_ON Redis"), lends the node it reaches the relevance of the one
   it leaves (`_lending`).
3. Pruning: a reached node is kept when its relevance is at least `keep_ratio` times the best relevance
   among the anchors; the nodes on the path that reached it are kept too, so the result stays connected.
4. Passages: a walk over entities and passages from the query's seeds (`passage_ranking`).

`SearchOptions` (search_options.py) holds every knob of these steps. What the query's words are and whether the
memory holds them is query_words.py's; the notes on what a result leaves out or could not apply, left_out.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from duckgraph.core.domain.left_out import (
    ChainGoesOn, TypeCount, chains_go_on, dates_not_applied, ids_not_stored, more_facts, names_not_stored,
    shown_texts, type_count)
from duckgraph.core.domain.passage_ranking import rank_passages
from duckgraph.core.domain.query_words import (
    ID, WordMatches, anchor_candidates, called, fact_terms, holding_ids, query_ids, relation_terms)
from duckgraph.core.domain.relation_types import replaced_end
from duckgraph.core.domain.relevance import relevant
from duckgraph.core.domain.search_options import (
    SearchOptions, edge_filter, keyword_passages, nearest_passages, timed, windowed)
from duckgraph.ports import (
    ChunkRecord, EdgeRecord, Embedder, GraphStore, NodeRecord, isin_ids, loose_key, name_candidates, terms)

if TYPE_CHECKING:
    import numpy as np


#: Facts returned at most per node kept: enough for every path and its neighbours, bounded on dense graphs.
FACTS_PER_NODE = 2


@dataclass
class Reached:
    node_id: int
    hop: int
    proximity: float
    relevance: float = 0.0
    parent: int | None = None
    via_edge: int | None = None
    #: Whether the step over `via_edge` lent this node `parent`'s relevance (`_lending`).
    lent: bool = False
    #: The (type, forwards from the source) of the chain of facts of one relation type, from an entity the query
    #: names, that this node ends (`_expand`); None when it ends none.
    chain: tuple[str, bool] | None = None

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
    #: True when the namespace holds no entity and no passage at all (a search that wanted passages knows it).
    nothing_stored: bool = False
    #: True with `nothing_relevant` when a window (after, before) was given that holds no passage (the namespace
    #: holding something): nothing stored is timed in it.
    empty_window: bool = False
    #: The ids and names the query names that nothing stored holds (`ids_not_stored`, `names_not_stored`): what is
    #: above is not about them.
    not_stored: list[str] = field(default_factory=list)
    #: Kept entity's name -> relation type -> how many more of its facts of that type the search could show than
    #: `edges` holds, where `max_nodes` cut that list short (`left_out.more_facts`).
    more_facts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The type the query asks for the entities of, when the result holds fewer than are stored (`left_out.type_count`).
    type_count: TypeCount | None = None
    #: The query's words that say when, which no time argument applied (`left_out.dates_not_applied`).
    dates_not_applied: list[str] = field(default_factory=list)
    #: The chains of one relation type from an entity the query names that go on past the last hop
    #: (`left_out.chains_go_on`).
    chains_go_on: list[ChainGoesOn] = field(default_factory=list)


def match_words(store: GraphStore, query_text: str, namespace: str, options: SearchOptions) -> WordMatches:
    """The query's `WordMatches`: the entities named verbatim (or loosely), the keyword channel's best entities
    and facts (anchor candidates: a fact's through its ends) and passages (when passages are wanted and the channel
    weighs)."""
    candidates = name_candidates(query_text)
    named = store.find_nodes(namespace, candidates | {loose for key in candidates if (loose := loose_key(key))})
    nodes = store.keyword_search("node", query_text, anchor_candidates(options), namespace)
    chunks = (keyword_passages(store, query_text, options.keyword_candidates, namespace, options)
              if options.max_passages > 0 and options.keyword_weight > 0 else [])
    found = store.keyword_search("edge", query_text, anchor_candidates(options), namespace)
    records = {e.id: e for e in store.get_edges([i for i, _ in found])}
    return WordMatches(named, nodes, chunks, [(records[i], score) for i, score in found if i in records])


def anchor_and_expand(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, options: SearchOptions,
    words: WordMatches | None = None, embedder: Embedder | None = None,
) -> Subgraph:
    """The subgraph and passages that answer the query; `words`: `match_words`'s, when looked up already;
    `embedder`: the query's, to compare parts of entities and passages with it below the floor (none: they are
    not)."""
    if words is None:
        words = match_words(store, query_text, namespace, options)
    named = words.named
    nearest = store.vector_search("node", query, max(anchor_candidates(options), options.fact_seed_nodes), namespace)
    # One search of the passages nearest the query (among those the time window may show) serves the floor and the
    # passage ranking: a question about a period is judged by that period's passages.
    nearest_chunks = (nearest_passages(store, query, max(options.passage_seeds, options.max_passages), namespace,
                                       options) if options.max_passages > 0 else None)
    ids = query_ids(query_text)  # for the floor and for `not_stored`
    relevance = relevant(store, query_text, query, nearest, nearest_chunks, namespace, options, words, embedder,
                         ids)
    # The vector searches are exact when they find fewer than asked (see the store): none at all means that the
    # namespace holds nothing, perhaps a misspelt one (a time window without passages may be all that is empty).
    nothing_stored = not nearest and nearest_chunks == [] and not (
        timed(options) and store.vector_search("chunk", query, 1, namespace))
    if relevance is None:  # a window that holds no passage tells nothing of its period, not of the query's topic
        return Subgraph(anchors=[], nodes=[], records={}, edges=[], passages=[], nothing_relevant=True,
                        nothing_stored=nothing_stored,
                        empty_window=windowed(options) and nearest_chunks == [] and not nothing_stored,
                        dates_not_applied=[] if nothing_stored else dates_not_applied(query_text, options))
    fact_ends = _fact_ends(words.facts, query_text)
    candidates, keyword_nodes = nearest, words.nodes
    if relevance.typed:  # a query about the entities of a type ("List all incidents"): they are its anchors
        named = [n for n in named if n.id in relevance.typed]
        candidates = [(i, s) for i, s in nearest if i in relevance.typed]
        keyword_nodes = [(i, s) for i, s in words.nodes if i in relevance.typed]
        # Those of the type the query's words did not find (`_typed`) come after, in the order they were stored.
        ranked = {i for i, _ in keyword_nodes}
        keyword_nodes += [(i, 0.0) for i in sorted(relevance.typed) if i not in ranked]
        fact_ends = [i for i in fact_ends if i in relevance.typed]
    anchors = _anchors(store, named, candidates, keyword_nodes, query, options, relevance.observed, fact_ends,
                       called(query_text, named), holding_ids(store, "node", ids, namespace, options.k_anchors))
    anchors = _without_sibling_ids(store, anchors, named)
    if not relevance.whole:  # no whole reached the floor: a vector below it alone does not make an anchor
        backed = {n.id for n in named} | {i for i, _ in words.nodes} | relevance.observed.keys() | set(fact_ends)
        anchors = [a for a in anchors if a.node_id in backed]
    reached, edges = _expand(store, query, namespace, anchors, options, frozenset(n.id for n in named))
    kept = _prune(reached, anchors, options)
    kept_ids = {r.node_id for r in kept}
    records = {n.id: n for n in store.get_nodes(kept_ids)}
    kept = [r for r in kept if r.node_id in records]
    facts, capped = _rank_facts(store, query_text, query, edges, kept, options)
    fetched = {e.id: e for e in store.get_edges(list(facts))}
    far_ends = {i for e in fetched.values() for i in (e.source_id, e.target_id)} - records.keys()
    records.update({n.id: n for n in store.get_nodes(far_ends)})
    result_edges, kept, dropped = _join_far_ends([(fetched[i], *facts[i]) for i in facts if i in fetched], kept,
                                                 records, options)
    passages = rank_passages(store, query_text, query, namespace, named, nearest[: options.fact_seed_nodes],
                             nearest_chunks or [], words.chunks, options,
                             holding_ids(store, "chunk", ids, namespace, options.max_passages) if nearest_chunks
                             else set())
    return Subgraph(anchors=[r for r in kept if r.hop == 0], nodes=kept, records=records, edges=result_edges,
                    passages=passages[: options.max_passages], more_passages=passages[options.max_passages:],
                    nothing_stored=nothing_stored,
                    not_stored=[*ids_not_stored(store, ids, namespace, words.named),
                                *names_not_stored(store, query_text, namespace, ids,
                                                  shown_texts(records, result_edges, passages))],
                    more_facts=more_facts(store, namespace, options, _left_out_links(reached, anchors, kept, options)
                                          + capped + dropped, kept, records, result_edges, named),
                    type_count=type_count(store, query_text, namespace, [records[r.node_id] for r in kept]),
                    dates_not_applied=dates_not_applied(query_text, options, [
                        spelling for r in kept for spelling in (records[r.node_id].name, *records[r.node_id].aliases)]),
                    chains_go_on=chains_go_on(store, namespace, options, reached, kept, records))


def _fact_ends(facts: list[tuple[EdgeRecord, float]], query_text: str) -> list[int]:
    """The ends of the facts the keyword channel found (`facts`, best first) by their own words (`fact_terms`),
    in their facts' order: a word that only a fact holds ("PO-88123" in a relation's description) finds the
    entities it joins. A fact found by its ends' names alone adds nothing: the entities' own words hold the names.
    Each end is as relevant as its own vector (a fact close enough to the floor lends them its similarity:
    `_parts_near`), as the keyword channel's entities are: a fact's similarity lent to every anchor would raise
    the share of it that the nodes reached need to be kept (`_keep_threshold`)."""
    wanted = set(terms(query_text))
    return list(dict.fromkeys(i for edge, _ in facts if wanted.intersection(fact_terms(edge))
                              for i in (edge.source_id, edge.target_id)))


def _anchors(
    store: GraphStore, named: list[NodeRecord], nearest: list[tuple[int, float]],
    keyword_nodes: list[tuple[int, float]], query: np.ndarray, options: SearchOptions,
    observed: dict[int, float] | None = None, fact_ends: list[int] | None = None, called: set[int] | None = None,
    holding: set[int] | None = None,
) -> list[Reached]:
    """The nodes the query is about; `observed`: entities whose own observation is that close to the query;
    `fact_ends`: `_fact_ends`, ranked after the entities the keyword channel found by their own words (one
    ranking of the channel: a fact's ends add candidates, not a vote for entities its names found already);
    `called`: the entities the whole query names (`query_words.called`), first and as relevant as the best anchor:
    the query asks for nothing else, while the vectors and the words of another ("ORA-00942", whose observation
    writes "orders" three times) may rank it first ("orders-db"); `holding`: the entities that hold an id the query
    names whole (`holding_ids`), next among the anchors chosen and as relevant too: a memory holds an id verbatim or
    not at all, and the vectors barely see it, so the words around it may rank another first ("how do I fix
    ECONNREFUSED?": "OOMKilled api pod", fixed by raising a limit, before orders-db, whose observation holds
    ECONNREFUSED)."""
    if options.k_anchors <= 0:
        return []
    vector_hits = nearest[: anchor_candidates(options)]
    named = list(named)
    keyword_ranking = list(dict.fromkeys([*(i for i, _ in keyword_nodes), *(fact_ends or [])]))
    relevance = dict(vector_hits)
    missing = [i for i in [*(n.id for n in named), *keyword_ranking] if i not in relevance]
    relevance.update(store.similarities("node", missing, query))
    for node_id, similarity in (observed or {}).items():
        relevance[node_id] = max(relevance.get(node_id, -1.0), similarity)
    # Longer names are more specific ("New York Times" over "New York"); ties go to the closer vector.
    named.sort(key=lambda n: (-len(n.key), -relevance.get(n.id, -1.0)))
    fused: dict[int, float] = {}
    for ranking in ([node_id for node_id, _ in vector_hits], [n.id for n in named], keyword_ranking):
        for rank, node_id in enumerate(ranking):
            fused[node_id] = fused.get(node_id, 0.0) + 1.0 / (options.rrf_k + rank + 1)
    called, holding = called or set(), holding or set()
    chosen = sorted(fused, key=lambda node_id: (node_id not in called, -fused[node_id]))[: options.k_anchors]
    # Those holding an id come first among the chosen only: a name in capitals counts as an id too, and one that
    # many entities hold ("UK", in 20 and more of MuSiQue's) would take every place.
    chosen.sort(key=lambda node_id: (node_id not in called, node_id not in holding))
    best = max((relevance.get(i, 0.0) for i in chosen), default=0.0)
    relevance.update({i: max(relevance.get(i, 0.0), best) for i in (called | holding).intersection(chosen)})
    anchors = [Reached(node_id=i, hop=0, proximity=1.0, relevance=relevance.get(i, 0.0)) for i in chosen]
    threshold = _keep_threshold(anchors, options)
    return [a for a in anchors if a.relevance >= threshold]


def _without_sibling_ids(store: GraphStore, anchors: list[Reached], named: list[NodeRecord]) -> list[Reached]:
    """A query that names one id of a series ("What happened in INC-117?") is about that one: the anchors named
    by another id of the same series ("INC-101": the same letters around other digits, a vector as near) go,
    unless the query names them too."""
    series = {_series(n.name) for n in named if ID.fullmatch(n.name)}
    if not series:
        return anchors
    asked = {n.id for n in named}
    names = {n.id: n.name for n in store.get_nodes([a.node_id for a in anchors if a.node_id not in asked])}
    return [a for a in anchors if a.node_id in asked or a.node_id not in names
            or not (ID.fullmatch(names[a.node_id]) and _series(names[a.node_id]) in series)]


def _series(identifier: str) -> str:
    """An id with its digits left out, case folded: "INC-117" and "inc-101" are of one series."""
    return re.sub(r"\d+", "#", identifier.casefold())


def _expand(
    store: GraphStore, query: np.ndarray, namespace: str, anchors: list[Reached], options: SearchOptions,
    named: frozenset[int] = frozenset(),
) -> tuple[dict[int, Reached], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The nodes reached from the anchors that can be kept (relevant enough) or that led further, and the
    (ids, sources, targets) of the edges walked, hop by hop; `named`: the anchors the query names.

    A hop reaches thousands of nodes in a big graph, so it is computed over arrays: every walked edge in both
    directions is a candidate step; a node keeps the step that brings the most proximity (the first such step,
    edges in `neighbor_ends` order, on a tie) and the best relevance among the steps that reached it: the fact's
    similarity, or the relevance of the node it left where the step lends it (`_lending`).
    """
    import numpy as np  # see passage_ranking._walk

    reached = {a.node_id: a for a in anchors}
    reached_ids = np.fromiter(reached, np.int64, len(reached))
    threshold = _keep_threshold(anchors, options)
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    frontier = [a.node_id for a in anchors]
    for hop in range(1, options.hops + 1):
        if not frontier:
            break
        edge_ids, sources, targets, weights = store.neighbor_ends(
            frontier, namespace, as_of=edge_filter(options), limit=options.frontier * 20)
        if not len(edge_ids):
            break
        edges.append((edge_ids, sources, targets))
        fact = np.nan_to_num(store.similarity_array("edge", edge_ids, query), nan=-1.0)
        # Candidate steps in the order a loop over the edges would take them: each edge forwards, then backwards.
        here = np.stack([sources, targets], axis=1).ravel()
        there = np.stack([targets, sources], axis=1).ravel()
        edge_at = np.repeat(np.arange(len(edge_ids)), 2)
        forwards = np.tile([True, False], len(edge_ids))
        sorted_frontier = np.sort(np.asarray(frontier, dtype=np.int64))
        position = np.minimum(np.searchsorted(sorted_frontier, here), len(sorted_frontier) - 1)
        step = (sorted_frontier[position] == here) & ~isin_ids(there, reached_ids)
        here, there, edge_at, position, forwards = (
            here[step], there[step], edge_at[step], position[step], forwards[step])
        if not len(there):
            break
        frontier_proximity = np.array([reached[n].proximity for n in sorted_frontier.tolist()])
        frontier_relevance = np.array([reached[n].relevance for n in sorted_frontier.tolist()])
        proximity = frontier_proximity[position] * options.hop_decay * np.minimum(weights[edge_at].astype(float), 1.0)
        types = store.edge_types(edge_ids.tolist())
        kinds = [types.get(i, "") for i in edge_ids.tolist()]
        chains = {n: reached[n].chain for n in frontier if reached[n].chain is not None}
        lends = _lending(kinds, here, edge_at, forwards, chains)
        step_relevance = np.where(lends, np.maximum(fact[edge_at], frontier_relevance[position]), fact[edge_at])
        # Per reached node: its best step (most proximity, then the earliest) and its best relevance, the nodes in
        # the order they were first reached (so that ties in the frontier's ranking fall the same way every time).
        sequence = np.arange(len(there))
        by_node = np.lexsort((sequence, -proximity, there))
        starts = np.flatnonzero(np.r_[True, there[by_node][1:] != there[by_node][:-1]])
        in_order = np.argsort(np.minimum.reduceat(sequence[by_node], starts))
        best = by_node[starts][in_order]
        found = there[best]
        relevance = np.maximum(
            np.nan_to_num(store.similarity_array("node", found, query), nan=0.0),
            np.maximum.reduceat(step_relevance[by_node], starts)[in_order],
        )
        score = proximity[best] * np.maximum(relevance, 0.0)
        carried = np.argsort(-score, kind="stable")[: options.frontier]
        # Records only for what can be kept or carried on; the rest only needs to count as reached.
        wanted = relevance >= threshold
        wanted[carried] = True
        step_of = best[wanted]  # converted to lists at once: indexing arrays item by item costs more than the rest
        for node_id, node_proximity, node_relevance, parent, at, forward, lent in zip(
                found[wanted].tolist(), proximity[step_of].tolist(), relevance[wanted].tolist(),
                here[step_of].tolist(), edge_at[step_of].tolist(), forwards[step_of].tolist(),
                lends[step_of].tolist()):
            step = (kinds[at], forward)
            reached[node_id] = Reached(node_id, hop, node_proximity, node_relevance, parent=parent,
                                       via_edge=int(edge_ids[at]), lent=lent,
                                       chain=step if parent in named or chains.get(parent) == step else None)
        reached_ids = np.concatenate([reached_ids, found])
        frontier = found[carried].tolist()
    return reached, edges


def _lending(
    kinds: list[str], here: np.ndarray, edge_at: np.ndarray, forwards: np.ndarray,
    chains: dict[int, tuple[str, bool]],
) -> np.ndarray:
    """Which steps (from `here` over the edge of type `kinds[edge_at]`, `forwards` from its source) lend the node
    they reach the relevance of the node they leave, whatever the fact's own similarity to the query:
    - a step to what replaced it (`replaced_end`: "ADR-7 SUPERSEDES ADR-3", from ADR-3): the successor stands where
      it stood, and "What caching layer did we choose?" is answered by ADR-7's choice, not ADR-3's;
    - a step that goes on with the type and direction of the chain of facts that reached `here` from an anchor the
      query names (`chains`): "billing-service DEPENDS_ON auth-service" after "auth-service DEPENDS_ON Redis" for
      "What would break if we drop Redis?", a fact whose words share nothing with the question.
    """
    import numpy as np  # see passage_ranking._walk

    replaced = [replaced_end(kind) for kind in kinds]
    source_replaced = np.fromiter((end == "source" for end in replaced), bool, len(replaced))
    target_replaced = np.fromiter((end == "target" for end in replaced), bool, len(replaced))
    lends = np.where(forwards, source_replaced[edge_at], target_replaced[edge_at])
    if chains:
        ongoing = np.flatnonzero(isin_ids(here, np.fromiter(chains, np.int64, len(chains))))
        lends[ongoing] |= np.fromiter(
            (chains[h] == (kinds[e], f) for h, e, f in zip(
                here[ongoing].tolist(), edge_at[ongoing].tolist(), forwards[ongoing].tolist())), bool, len(ongoing))
    return lends


def _edges_touching(
    walked: list[tuple[np.ndarray, np.ndarray, np.ndarray]], node_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct walked edges with an end among `node_ids` (sorted), as (ids, sources, targets)."""
    import numpy as np  # see passage_ranking._walk

    if not walked:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    ids, sources, targets = (np.concatenate(part) for part in zip(*walked))
    touching = isin_ids(sources, node_ids) | isin_ids(targets, node_ids)
    ids, first = np.unique(ids[touching], return_index=True)
    return ids, sources[touching][first], targets[touching][first]


def _rank_facts(
    store: GraphStore, query_text: str, query: np.ndarray, walked: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    kept: list[Reached], options: SearchOptions,
) -> tuple[dict[int, tuple[float, float]], list[tuple[int, int, int]]]:
    """The facts (edges) that best answer the query, best first, each with its score and the relevance it lends
    a far end (its own similarity to the query, or what it lent: `_with_lent`): those among the kept
    nodes, and those from a kept node to one left out that score as high as a node needs to be kept ("Payments
    Team owns Checkout Service" for "which team owned the service hit by INC-142?": the team alone is far from
    the question). At most `FACTS_PER_NODE` per kept node; those that cap leaves out come second, as (id, source,
    target), for `more_facts`.

    A fact scores the geometric mean of its own similarity to the query and of its context: the mean
    relevance of the chain that reached the kept end it extends (the anchor's relevance, then each fact
    walked). Both must be high: for "who leads the team that owns X?", "Omar leads Discovery Team", next to
    "Discovery Team owns X", outranks "Lena leads Platform Team", though the two facts alone are about as close
    to the question; and a weak fact hanging off a strong chain stays weak. A fact's own similarity is lifted by
    its words (`_with_fact_words`) for this score, not for the relevance it lends a far end; it is raised, for
    both and in the chains, to the relevance the fact lent (`_with_lent`). The facts of what replaced a kept entity
    stand beside that entity's (`_with_successors`).
    """
    import numpy as np  # see passage_ranking._walk

    nodes = np.fromiter(sorted(r.node_id for r in kept), np.int64, len(kept))
    ids, sources, targets = _edges_touching(walked, nodes)
    if not len(ids):
        return {}, []
    similarity = np.maximum(np.nan_to_num(store.similarity_array("edge", ids, query), nan=0.0), 0.0)
    types = store.edge_types(ids.tolist())
    lent = _with_lent(kept, ids, sources, targets, types, similarity)
    context, via = (np.array([column[n] for n in nodes.tolist()]) for column in _chains(kept, ids, lent))
    best_context = np.zeros(len(ids))
    both_kept = np.ones(len(ids), dtype=bool)
    for ends in (sources, targets):
        at = np.minimum(np.searchsorted(nodes, ends), len(nodes) - 1)
        inside = nodes[at] == ends
        both_kept &= inside
        # The fact that reached an end is the last link of that end's chain: it extends the other end's.
        extends = inside & (via[at] != ids)
        best_context = np.where(extends, np.maximum(best_context, context[at]), best_context)
    score = np.sqrt(best_context * np.maximum(_with_fact_words(query_text, ids, types, similarity, options), lent))
    threshold = _keep_threshold([r for r in kept if r.hop == 0], options)
    shown = both_kept | (score >= threshold)
    _with_successors(kept, ids, sources, targets, types, score, shown)
    chosen = np.flatnonzero(shown)
    ranked = chosen[np.argsort(-score[chosen], kind="stable")]
    best, capped = ranked[: FACTS_PER_NODE * options.max_nodes], ranked[FACTS_PER_NODE * options.max_nodes:]
    return (dict(zip(ids[best].tolist(), zip(score[best].tolist(), lent[best].tolist()))),
            list(zip(ids[capped].tolist(), sources[capped].tolist(), targets[capped].tolist())))


def _with_fact_words(
    query_text: str, ids: np.ndarray, types: dict[int, str], similarity: np.ndarray, options: SearchOptions,
) -> np.ndarray:
    """The facts' similarities, each plus `keyword_weight` x the best one x the query's words its relation type
    holds (not its ends' names) over the most any of them holds. A fact's sentence is short and its vector mostly
    its ends' names, so among the facts of the entity a query names the vectors barely tell which one it asks
    about ("Who manages Sam?": "Sam partner of Ana" 0.73, "Karin de Vries manages Sam" 0.59); the relation's own
    words do. Counted from the types (`edge_types`), not with the keyword index: a thousand facts touch the kept
    entities of a graph with hubs, and a common word's postings would cost more than the whole ranking."""
    import numpy as np  # see passage_ranking._walk

    wanted = set(terms(query_text))
    if options.keyword_weight <= 0 or not wanted:
        return similarity
    held = {relation: len(wanted.intersection(relation_terms(relation))) for relation in set(types.values())}
    words = np.fromiter((held.get(types.get(i, ""), 0) for i in ids.tolist()), np.float64, len(ids))
    if not words.max():
        return similarity
    return similarity + options.keyword_weight * similarity.max() * words / words.max()


def _with_lent(
    kept: list[Reached], ids: np.ndarray, sources: np.ndarray, targets: np.ndarray, types: dict[int, str],
    similarity: np.ndarray,
) -> np.ndarray:
    """The facts' similarities, each raised to the relevance it lends: that of the kept node a step over it left
    where the step lent it (`_lending`), and, for a fact that says a kept node was replaced (`replaced_end`),
    that node's, whether or not the walk reached the successor through it. A kept entity another replaced reads as
    current without that fact, and a chain of one type from a named entity answers as its first fact does; their
    own words may share nothing with the query ("ADR-7 SUPERSEDES ADR-3", "billing-service DEPENDS_ON
    auth-service")."""
    relevance = {r.node_id: r.relevance for r in kept}
    lent_by = {r.via_edge: relevance[r.parent] for r in kept if r.lent and r.parent in relevance}
    lent = similarity.copy()
    for position, (edge, source, target) in enumerate(zip(ids.tolist(), sources.tolist(), targets.tolist())):
        end = replaced_end(types.get(edge, ""))
        replaced = source if end == "source" else target if end == "target" else None
        lent[position] = max(lent[position], lent_by.get(edge, 0.0), relevance.get(replaced, 0.0))
    return lent


def _with_successors(
    kept: list[Reached], ids: np.ndarray, sources: np.ndarray, targets: np.ndarray, types: dict[int, str],
    score: np.ndarray, shown: np.ndarray,
) -> None:
    """Show (in `shown`, scoring in `score`) each fact of an entity that replaced a kept one (`replaced_end`) of a
    type and direction the replaced one's shown facts have, scoring at least as the best of those: what holds in
    their place ("ADR-7 CHOSE Redis" beside "ADR-3 CHOSE Memcached", once "ADR-7 SUPERSEDES ADR-3"). The oldest
    replaced first, so that a successor's successor follows."""
    hop = {r.node_id: r.hop for r in kept}
    facts: dict[int, list[int]] = {}  # node -> positions of the facts (not of replacement) it is an end of
    successions = []  # (replaced, successor)
    for position, (edge, source, target) in enumerate(zip(ids.tolist(), sources.tolist(), targets.tolist())):
        end = replaced_end(types.get(edge, ""))
        if end is None:
            if source != target:
                facts.setdefault(source, []).append(position)
                facts.setdefault(target, []).append(position)
        elif (replaced := source if end == "source" else target) in hop:
            successions.append((replaced, target if end == "source" else source))
    for replaced, successor in sorted(successions, key=lambda pair: hop[pair[0]]):
        best: dict[tuple[str, bool], float] = {}  # (type, from the entity) -> best score of a shown fact
        for position in facts.get(replaced, ()):
            if shown[position]:
                key = (types.get(int(ids[position]), ""), int(sources[position]) == replaced)
                best[key] = max(best.get(key, 0.0), float(score[position]))
        for position in facts.get(successor, ()):
            key = (types.get(int(ids[position]), ""), int(sources[position]) == successor)
            if key in best:
                score[position] = max(float(score[position]), best[key])
                shown[position] = True


def _join_far_ends(
    facts: list[tuple[EdgeRecord, float, float]], kept: list[Reached], records: dict[int, NodeRecord],
    options: SearchOptions,
) -> tuple[list[tuple[EdgeRecord, float]], list[Reached], list[tuple[int, int, int]]]:
    """The facts (best first, with their scores) and the nodes: a fact leading out of the kept nodes brings
    its far end in while fewer than `max_nodes` are kept (reached through the fact, as relevant as the fact),
    and is dropped otherwise, so the result stays a connected subgraph of at most `max_nodes`. Third, the facts
    dropped for `max_nodes` alone, as (id, source, target), for `more_facts`."""
    by_id = {r.node_id: r for r in kept}
    shown: list[tuple[EdgeRecord, float]] = []
    capped: list[tuple[int, int, int]] = []
    for edge, score, similarity in facts:
        far = [i for i in (edge.source_id, edge.target_id) if i not in by_id]
        if far and (len(by_id) >= options.max_nodes or far[0] not in records or len(far) > 1):
            if len(far) == 1 and far[0] in records:
                capped.append((edge.id, edge.source_id, edge.target_id))
            continue
        if far:
            near = by_id[edge.target_id if far[0] == edge.source_id else edge.source_id]
            by_id[far[0]] = Reached(far[0], near.hop + 1, near.proximity * options.hop_decay, similarity,
                                    parent=near.node_id, via_edge=edge.id)
        shown.append((edge, score))
    return shown, sorted(by_id.values(), key=lambda r: (r.hop > 0, -r.score)), capped


def _left_out_links(
    reached: dict[int, Reached], anchors: list[Reached], kept: list[Reached], options: SearchOptions,
) -> list[tuple[int, int, int]]:
    """The facts that lead from the kept nodes towards the nodes `max_nodes` left out (`_keepable` ones not kept),
    as (id, kept end, other end): a team's 40 members are reached, relevant enough, and 29 of them are kept."""
    kept_ids = {r.node_id for r in kept}
    links: dict[int, tuple[int, int, int]] = {}
    for item in _keepable(reached, anchors, options):
        if item.node_id in kept_ids:
            continue
        while item.parent is not None and item.parent not in kept_ids and item.parent in reached:
            item = reached[item.parent]
        if item.parent in kept_ids and item.via_edge is not None:
            links.setdefault(item.via_edge, (item.via_edge, item.parent, item.node_id))
    return list(links.values())


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


def _keepable(reached: dict[int, Reached], anchors: list[Reached], options: SearchOptions) -> list[Reached]:
    """The reached nodes that may be kept, best first: the anchors and the nodes relevant enough (`_keep_threshold`;
    the nodes on their paths are added from `reached`). All of them are kept but for `max_nodes`."""
    threshold = _keep_threshold(anchors, options)
    return sorted((r for r in reached.values() if r.hop == 0 or r.relevance >= threshold),
                  key=lambda r: (r.hop > 0, -r.score))


def _prune(reached: dict[int, Reached], anchors: list[Reached], options: SearchOptions) -> list[Reached]:
    if not anchors:
        return []
    kept: dict[int, Reached] = {}
    for item in _keepable(reached, anchors, options):
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
