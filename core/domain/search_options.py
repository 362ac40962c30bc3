"""What a search may be asked (`SearchOptions`, the knobs of docs/search.md) and the time window through which it
reads the store: which facts hold and which passages may be shown at the moment asked."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from duckgraph.core.domain.history import MAX_CHANGES
from duckgraph.ports import GraphStore, TimeFilter

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

#: The most passages a time window (or the passages a given `as_of` leaves out) may hold for a search to find the
#: query's nearest among the passages it may show (see `nearest_passages`): each is compared with the query, or
#: that many more are fetched. Beyond it, the nearest passages overall are filtered, and the log says so.
WINDOW_PASSAGES = 100_000
#: The range each number a caller gives a tool may take, by tool and argument: the MCP tools' schemas and the
#: command line's flags for the same arguments (`duckgraph search`, `changes`, `communities`, `documents show`) are
#: both held to these, so the two cannot drift apart.
TOOL_LIMITS: dict[str, dict[str, tuple[int, int]]] = {
    "search": {"k_anchors": (1, 50), "hops": (0, 3), "max_nodes": (1, 200), "max_passages": (0, 50),
               "token_budget": (100, 50_000)},
    "global_search": {"level": (0, 20), "token_budget": (100, 50_000)},
    "communities_to_summarize": {"limit": (1, 50)},
    "recent_changes": {"limit": (1, MAX_CHANGES)},  # the most history.recent_changes lists
    "read_document": {"before": (0, 100), "after": (0, 100)},  # passages around the one asked for
}
#: The ranges of `search`'s numbers.
CALLER_LIMITS: dict[str, tuple[int, int]] = TOOL_LIMITS["search"]


@dataclass(frozen=True)
class SearchOptions:
    """Knobs of a search. The defaults suit a graph written by a host LLM. Each knob's comment names the function it
    tunes: in retrieval.py (anchors, expansion, facts), relevance.py (the relevance floor), passage_ranking.py (the
    passages) or render.py (the text)."""

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
    #: The cosine similarity the nearest entity or passage needs for anything to be returned (see `relevant`):
    #: None takes the embedder's calibrated `relevance_floor`; 0 turns the floor off.
    relevance_floor: float | None = None
    #: Share of the floor it moves by for a query that names things (see `_names_stored`): down when every name is
    #: stored, up when one is not (0.04-0.06 in cosine held on both public LoCoMo conversations in both modes).
    name_margin: float = 0.12
    #: Share of the floor it moves up by when the memory holds none of the query's other words (see `_words_stored`;
    #: 0.24 held the public LoCoMo conversations' floor shares in every mode, 0.36 did not).
    word_margin: float = 0.24
    #: Parts of what the keyword channel found (observations, sentences) compared one by one with the query before a
    #: search says nothing relevant is stored (see `_parts_near`; 0: none). Embedding 8 on two CPU cores: ~12 ms
    #: for short observations, ~50 ms for encyclopedic sentences, paid only by a search that would come back empty.
    parts_compared: int = 8
    #: Time (naive UTC): facts valid at `as_of` (None: now) are followed and shown; `include_history` adds those
    #: that ended before it (asked of now, those that start later too); `after` / `before` keep facts valid, and
    #: passages whose document's time falls, within [after, before). A given `as_of` also leaves out passages of documents timed after it (they told of
    #: a later world). Unused, they cost nothing: the store's plain path is taken.
    as_of: datetime | None = None
    include_history: bool = False
    after: datetime | None = None
    before: datetime | None = None

    @property
    def more_passages_wanted(self) -> int:
        """`more_passages`, none when it is negative."""
        return max(self.more_passages, 0)


def edge_filter(options: SearchOptions) -> TimeFilter | datetime | None:
    """What the store's graph reads take as `as_of`: the plain moment (None: now) unless more is asked."""
    if not options.include_history and options.after is None and options.before is None:
        return options.as_of
    if options.include_history and options.as_of is None and options.after is None and options.before is None:
        # History asked of now: every period, those that start later (planned) too, as the ended ones.
        return TimeFilter(as_of=datetime.max, history=True)
    return TimeFilter(as_of=options.as_of, history=options.include_history, after=options.after,
                      before=options.before)


def timed(options: SearchOptions) -> bool:
    """Whether passages are filtered by their document's time (see `in_window`)."""
    return options.as_of is not None or options.after is not None or options.before is not None


def windowed(options: SearchOptions) -> bool:
    """Whether a window (`after`, `before`) is given: only passages timed in it may be shown."""
    return options.after is not None or options.before is not None


def in_window(store: GraphStore, ids: Sequence[int], namespace: str, options: SearchOptions) -> np.ndarray:
    """Which of the chunk `ids` may be shown: those whose document's time lies in [after, before) (with a window,
    a passage of unknown time is left out) and is not after a given `as_of` (unknown time: kept, as a fact of
    unknown start is valid at any moment)."""
    import numpy as np  # see passage_ranking._walk

    ids = np.asarray(ids, dtype=np.int64)
    if not timed(options):
        return np.ones(len(ids), dtype=bool)
    times = store.chunk_times(ids.tolist(), namespace)
    window = options.after is not None or options.before is not None

    def shown(t: datetime | None) -> bool:
        if t is None:
            return not window
        return ((options.after is None or t >= options.after) and (options.before is None or t < options.before)
                and (options.as_of is None or t <= options.as_of))

    return np.array([shown(times.get(i)) for i in ids.tolist()], dtype=bool)


def nearest_passages(
    store: GraphStore, query: np.ndarray, k: int, namespace: str, options: SearchOptions
) -> list[tuple[int, float]]:
    """The `k` passages nearest the query among those the time window may show (`in_window`), best first: the
    window's passages (`timed_chunks`) each compared with the query, or with a given `as_of` alone the nearest
    overall, as many more fetched as it leaves out. Filtering the nearest passages overall would leave a window
    empty whose passages are not among them, the likelier the more the memory holds. Untimed: the store's
    nearest, as ever."""
    import numpy as np  # see in_window

    if not timed(options):
        return store.vector_search("chunk", query, k, namespace)
    window = _window(store, namespace, options)
    if window is not None:
        similarity = store.similarity_array("chunk", window, query)
        held = ~np.isnan(similarity)
        window, similarity = window[held], similarity[held]
        best = np.argsort(-similarity, kind="stable")[:k]
        return list(zip(window[best].tolist(), similarity[best].tolist()))
    return _shown(store, store.vector_search("chunk", query, k + _left_out(store, namespace, options), namespace),
                  k, namespace, options)


def keyword_passages(
    store: GraphStore, query_text: str, k: int, namespace: str, options: SearchOptions
) -> list[tuple[int, float]]:
    """The keyword channel's `k` best passages for the query among those the time window may show, best first
    (ties: lowest id first), found as `nearest_passages` finds the nearest."""
    if not timed(options):
        return store.keyword_search("chunk", query_text, k, namespace)
    window = _window(store, namespace, options)
    if window is not None:
        scores = store.keyword_scores("chunk", query_text, window.tolist(), namespace)
        return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))[:k]
    return _shown(store, store.keyword_search("chunk", query_text, k + _left_out(store, namespace, options),
                                              namespace), k, namespace, options)


def _window(store: GraphStore, namespace: str, options: SearchOptions) -> np.ndarray | None:
    """The passages a window (`after`, `before`) may show, sorted ids; None without one, or when it holds more than
    `WINDOW_PASSAGES` (logged)."""
    if options.after is None and options.before is None:
        return None
    ids = store.timed_chunks(namespace, options.after, options.before)
    if len(ids) > WINDOW_PASSAGES:
        log.info("the time window holds %d passages, more than the %d compared one by one: the nearest passages "
                 "overall are filtered", len(ids), WINDOW_PASSAGES)
        return None
    return ids[in_window(store, ids, namespace, options)] if options.as_of is not None else ids


def _left_out(store: GraphStore, namespace: str, options: SearchOptions) -> int:
    """How many more passages than wanted a search fetches to find those a given `as_of` alone may show: as many as
    are timed from it on (those timed after it are left out); none with a window (`_window` found it too large)
    or more than `WINDOW_PASSAGES` of them (logged)."""
    if options.as_of is None or options.after is not None or options.before is not None:
        return 0
    later = len(store.timed_chunks(namespace, options.as_of, None))
    if later > WINDOW_PASSAGES:
        log.info("%d passages are timed after the moment searched, more than the %d fetched besides: the nearest "
                 "passages overall are filtered", later, WINDOW_PASSAGES)
        return 0
    return later


def _shown(store: GraphStore, found: list[tuple[int, float]], k: int, namespace: str, options: SearchOptions
           ) -> list[tuple[int, float]]:
    """The first `k` of `found` that the time window may show."""
    shown = in_window(store, [i for i, _ in found], namespace, options)
    return [pair for pair, keep in zip(found, shown.tolist()) if keep][:k]
