"""Anchor & expand: find the entities a query is about, walk the graph around them, keep what is on topic.

0. The floor (`_relevant`): nothing is returned when nothing stored is similar enough to the query.
1. Anchors: the query's nearest node vectors fused (reciprocal rank fusion) with nodes named verbatim in it and
   the keyword channel's best entities, then the ends of its best facts (a word only a fact holds, "PO-88123" in a
   relation's description, finds the two entities it joins).
   An anchor far less relevant than the best one (picked for its name alone: "apple" the fruit for a
   question about the company) is dropped before expansion, so its neighbourhood is never entered.
2. Expansion: a breadth-first walk up to `hops`, at most `frontier` nodes carried into each next hop (the
   most promising by proximity x relevance). Proximity decays per hop and with weak edges. A reached node's
   relevance is the better of its own similarity to the query and that of the fact (edge) that reached it:
   "Harvard University" alone is far from "which university did Bill Gates drop out of?", the fact
   "Bill Gates dropped out of Harvard University" is close.
3. Pruning: a reached node is kept when its relevance is at least `keep_ratio` times the best relevance
   among the anchors; the nodes on the path that reached it are kept too, so the result stays connected.
4. Passages: a walk over entities and passages from the query's seeds (`passage_ranking`).

`SearchOptions` (search_options.py) holds every knob of these steps.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from duckgraph.core.domain.passage_ranking import rank_passages
from duckgraph.core.domain.resolution import noun_form, noun_variants
from duckgraph.core.domain.search_options import (
    CALLER_LIMITS, SearchOptions, edge_filter, keyword_passages, nearest_passages, timed, windowed)
from duckgraph.core.domain.texts import passage_text
from duckgraph.ports import (
    ChunkRecord, EdgeRecord, Embedder, GraphStore, NodeRecord, inflections, isin_ids, loose_key, name_candidates, terms,
    tokens)
from duckgraph.ports.names import unaccented
from duckgraph.ports.text import WORD_RUN, stemmed

if TYPE_CHECKING:
    import numpy as np


#: Facts returned at most per node kept: enough for every path and its neighbours, bounded on dense graphs.
FACTS_PER_NODE = 2
#: Words that ask for whatever a memory holds of a thing, not for one fact of it ("Tell me about Tomas", "What do
#: you know about Atlas?", "What happened on 11 October?"): they say nothing of whether the memory holds the answer.
_ASKING_WORDS = ("tell know remember remind recall summarise summarize summary describe explain recap overview details "
                 "information anything everything something happened mention talk say show give find")
#: Words that ask for a list or a count of things ("How many incidents have we had?", "List all teams"): with
#: nothing but a stored entity type besides them (and `_ASKING_WORDS`), a query is about that type's entities.
_LISTING_WORDS = "list count many number total"
#: Month names (and the abbreviations that are no common word or first name).
_MONTHS = frozenset("""january february march april may june july august september october november december
feb apr jun jul aug sep sept oct nov dec""".split())
#: Words that say when, not what: `_MONTHS`, weekdays and the days next to today. The time window (as_of, after,
#: before) handles when; one of these that the memory does not hold says nothing of whether it holds the answer
#: ("on call for payments in March").
_WHEN_WORDS = _MONTHS | frozenset("monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow "
                                  "tonight".split())
#: Words that name a span of time or place one relative to now ("that week", "last month", "the past few days").
#: Given a window (after, before), they speak of it (`_asks_for_window`); without one they may be what is asked
#: ("Which day is the deadline?", "How long is a sprint in weeks?"), so they are no `_WHEN_WORDS`.
_PERIOD_WORDS = "day week weekend fortnight month quarter year time period last past previous recent recently ago"
#: Words that ask what was done, not what about ("What did I work on that week?", "What kept me busy?"; "do", "up
#: to", "between" and "during" are no terms at all). Given a window, they ask for what it holds, as `_PERIOD_WORDS`
#: do; without one they may be what is asked ("Where does Priya work?"), so they are no `_ASKING_WORDS`.
_DOING_WORDS = "work busy spend spent keep kept get got done accomplish achieve"
#: A day of a month written with a number alone ("June 10", "10-16 June"): in a query that names a month, given a
#: window, it says when as `_WHEN_DIGITS` do (without one, "2" of "the 2 June releases" may count things).
_DAY = re.compile(r"\d{1,2}(?:-\d{1,2})?")
#: The same, written with digits (as `tokens` gives them): a year (1500-2099, or a decade: 1990s), a date
#: (2026-03-15, 2026-03, 15/03/2026), a time of day (10am, 3pm) or a day of a month (1st, 22nd).
_WHEN_DIGITS = re.compile(r"(?:1[5-9]|20)\d\ds?|\d{4}[-/]\d{1,2}(?:[-/]\d{1,2})?|\d{1,2}/\d{1,2}(?:/\d{2,4})?"
                          r"|\d{1,2}(?:am|pm)|\d{1,2}(?:st|nd|rd|th)")
#: An id (as `tokens` gives it): letters and digits joined by '-', '.', '_' or '/' ("INC-199", "v2.7", "orders-db-3").
_ID = re.compile(r"(?=.*[^\W\d_])(?=.*\d)[^\W_]+(?:[-._/][^\W_]+)+")
#: The fewest digits of a number that names one thing ("port 5432", "exit code 137", "issue 482") rather than counts
#: ("2 kids", "45 minutes"); a number after '#' names one whatever its length ("#48").
_NAMING_DIGITS = 3
#: A dotted key, file name or path: two parts of two characters or more around a dot ("spring.datasource.url",
#: "deploy.sh", "src/api/users.py"), not initials ("e.g.", "U.S.").
_DOTTED = re.compile(r"[^\W_]{2}\.[^\W_]{2}")
#: How many of the rows holding a part of an id are asked whether they hold it whole (those holding it whole rank
#: first but for long rows holding its parts often).
_HELD_CHECKED = 20
#: Where a passage's sentences end: also at a semicolon, whose clause often answers alone.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
#: The most words (besides `_ASKING_WORDS` and `_LISTING_WORDS`) a query names a type with for `_typed` to look
#: its entities up in the other number too, and for `_type_count` to count them: types are a word or two
#: ("Incident", "Purchase Order").
_TYPE_WORDS = 3
#: How many of the entities the keyword channel ranks best for a word are asked whether their name holds it (see
#: `_names_held`): as many as a search takes as anchor candidates by default (`_anchor_candidates`).
_NAMES_CHECKED = 20
#: The most facts of one entity counted for `_more_facts` (a hub's count stops there).
_FACTS_COUNTED = 10_000
#: Where a sentence of a query ends: its next word starts with a capital whatever it is.
_SENTENCE_BREAK = re.compile(r"[.!?:;\n]\s*$")
#: A date written with digits (2026-03-15, 2026-03, 15/03/2026): a day or a month, unlike a year or a time of day.
_DATE = re.compile(r"\d{4}[-/]\d{1,2}(?:[-/]\d{1,2})?|\d{1,2}/\d{1,2}(?:/\d{2,4})?")


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
    #: True when the namespace holds no entity and no passage at all (a search that wanted passages knows it).
    nothing_stored: bool = False
    #: True with `nothing_relevant` when a window (after, before) was given that holds no passage (the namespace
    #: holding something): nothing stored is timed in it.
    empty_window: bool = False
    #: The ids and names the query names that nothing stored holds (`_ids_not_stored`, `_names_not_stored`): what is
    #: above is not about them.
    not_stored: list[str] = field(default_factory=list)
    #: Kept entity's name -> relation type -> how many more of its facts of that type the search could show than
    #: `edges` holds, where `max_nodes` cut that list short (`_more_facts`).
    more_facts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The type the query asks for the entities of, when the result holds fewer than are stored (`_type_count`).
    type_count: TypeCount | None = None
    #: The query's words that say when, which no time argument applied (`_dates_not_applied`).
    dates_not_applied: list[str] = field(default_factory=list)


class TypeCount(NamedTuple):
    """The entities of the type a query asks about (`_type_count`): its name, how many the result holds, how many
    are stored."""

    type: str
    shown: int
    stored: int
    k_anchors: int | None  # the k_anchors that shows them all; None above the most a caller may ask for


class Relevance(NamedTuple):
    """Why a search goes on (see `_relevant`): whether a whole entity or passage (or an id the query names) reached
    the floor (if not, only parts did or the query asks for whatever is stored of names: no entity anchors it by its
    vector alone), the entities whose own observation did, with that observation's similarity, and the entities
    of the type the query asks about (`_typed`), its anchors then."""

    whole: bool
    observed: dict[int, float]
    typed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class WordMatches:
    """What the query's words find without its vector: the entities it names, and the entities, passages and facts
    (with their BM25 scores, best first) the keyword channel ranks best. A search looks them up while the query is
    embedded."""

    named: list[NodeRecord]
    nodes: list[tuple[int, float]]
    chunks: list[tuple[int, float]]
    facts: list[tuple[EdgeRecord, float]] = field(default_factory=list)


def match_words(store: GraphStore, query_text: str, namespace: str, options: SearchOptions) -> WordMatches:
    """The query's `WordMatches`: the entities named verbatim (or loosely), the keyword channel's best entities
    and facts (anchor candidates: a fact's through its ends) and passages (when passages are wanted and the channel
    weighs)."""
    candidates = name_candidates(query_text)
    named = store.find_nodes(namespace, candidates | {loose for key in candidates if (loose := loose_key(key))})
    nodes = store.keyword_search("node", query_text, _anchor_candidates(options), namespace)
    chunks = (keyword_passages(store, query_text, options.keyword_candidates, namespace, options)
              if options.max_passages > 0 and options.keyword_weight > 0 else [])
    found = store.keyword_search("edge", query_text, _anchor_candidates(options), namespace)
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
    nearest = store.vector_search("node", query, max(_anchor_candidates(options), options.fact_seed_nodes), namespace)
    # One search of the passages nearest the query (among those the time window may show) serves the floor and the
    # passage ranking: a question about a period is judged by that period's passages.
    nearest_chunks = (nearest_passages(store, query, max(options.passage_seeds, options.max_passages), namespace,
                                       options) if options.max_passages > 0 else None)
    ids = _ids(query_text)  # for the floor and for `not_stored`
    relevance = _relevant(store, query_text, query, nearest, nearest_chunks, namespace, options, words, embedder,
                          ids)
    # The vector searches are exact when they find fewer than asked (see the store): none at all means that the
    # namespace holds nothing, perhaps a misspelt one (a time window without passages may be all that is empty).
    nothing_stored = not nearest and nearest_chunks == [] and not (
        timed(options) and store.vector_search("chunk", query, 1, namespace))
    if relevance is None:  # a window that holds no passage tells nothing of its period, not of the query's topic
        return Subgraph(anchors=[], nodes=[], records={}, edges=[], passages=[], nothing_relevant=True,
                        nothing_stored=nothing_stored,
                        empty_window=windowed(options) and nearest_chunks == [] and not nothing_stored,
                        dates_not_applied=[] if nothing_stored else _dates_not_applied(query_text, options))
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
                       _called(query_text, named), _holding_ids(store, "node", ids, namespace, options.k_anchors))
    anchors = _without_sibling_ids(store, anchors, named)
    if not relevance.whole:  # no whole reached the floor: a vector below it alone does not make an anchor
        backed = {n.id for n in named} | {i for i, _ in words.nodes} | relevance.observed.keys() | set(fact_ends)
        anchors = [a for a in anchors if a.node_id in backed]
    reached, edges = _expand(store, query, namespace, anchors, options)
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
                             _holding_ids(store, "chunk", ids, namespace, options.max_passages) if nearest_chunks
                             else set())
    return Subgraph(anchors=[r for r in kept if r.hop == 0], nodes=kept, records=records, edges=result_edges,
                    passages=passages[: options.max_passages], more_passages=passages[options.max_passages:],
                    nothing_stored=nothing_stored,
                    not_stored=[*_ids_not_stored(store, ids, namespace, words.named),
                                *_names_not_stored(store, query_text, namespace, ids,
                                                   _shown_texts(records, result_edges, passages))],
                    more_facts=_more_facts(store, namespace, options, _left_out_links(reached, anchors, kept, options)
                                           + capped + dropped, kept, records, result_edges, named),
                    type_count=_type_count(store, query_text, namespace, [records[r.node_id] for r in kept]),
                    dates_not_applied=_dates_not_applied(query_text, options, [
                        spelling for r in kept for spelling in (records[r.node_id].name, *records[r.node_id].aliases)]))


def _anchor_candidates(options: SearchOptions) -> int:
    """How many of the nodes nearest the query may become anchors: 4 per anchor wanted, at least 20."""
    return max(4 * options.k_anchors, 20)


def _fact_ends(facts: list[tuple[EdgeRecord, float]], query_text: str) -> list[int]:
    """The ends of the facts the keyword channel found (`facts`, best first) by their own words (`_fact_terms`),
    in their facts' order: a word that only a fact holds ("PO-88123" in a relation's description) finds the
    entities it joins. A fact found by its ends' names alone adds nothing: the entities' own words hold the names.
    Each end is as relevant as its own vector (a fact close enough to the floor lends them its similarity:
    `_parts_near`), as the keyword channel's entities are: a fact's similarity lent to every anchor would raise
    the share of it that the nodes reached need to be kept (`_keep_threshold`)."""
    wanted = set(terms(query_text))
    return list(dict.fromkeys(i for edge, _ in facts if wanted.intersection(_fact_terms(edge))
                              for i in (edge.source_id, edge.target_id)))


def _fact_terms(edge: EdgeRecord) -> frozenset[str]:
    """The words of a fact besides its ends' names: its relation type's and its description's."""
    return _relation_terms(edge.type) | frozenset(terms(edge.description))


def _relevant(
    store: GraphStore, query_text: str, query: np.ndarray, nearest: list[tuple[int, float]],
    nearest_chunks: list[tuple[int, float]] | None, namespace: str, options: SearchOptions,
    words: WordMatches | None = None, embedder: Embedder | None = None, ids: dict[str, str] | None = None,
) -> Relevance | None:
    """Whether anything stored is relevant enough to answer: the nearest entity or passage is at least
    `relevance_floor` similar to the query (moved by what the memory holds of the query's words), the query asks
    for whatever is stored of names the memory holds ("Tell me about Kirsty"), an id it names (`_ids`: "INC-142",
    "ECONNREFUSED", "5432") is stored whole (in an entity, passage or fact), or one observation, sentence or fact of
    what the keyword channel found is that similar on its own (`_parts_near`). Below it a search returns nothing
    (None here), so that the model says it does not know instead of reading noise. A query that asks for nothing but
    the entities of a stored type ("How many incidents have we had?") is about them, however far their vectors are
    (`_typed`). With a window given (`after`, `before`), a query that asks for nothing but what it holds ("What did I
    do that week?": `_asks_for_window`) is about the window's passages, when it holds any."""
    if not options.relevance_floor:
        return Relevance(True, {})
    floor = options.relevance_floor
    highest = floor * (1 + options.name_margin + options.word_margin)  # the most the query's words raise it to
    best = max((s for _, s in nearest[:1]), default=-1.0)
    if best < highest:
        if nearest_chunks is None:  # no passages wanted: only the nearest one counts here
            nearest_chunks = nearest_passages(store, query, 1, namespace, options)
        best = max(best, max((s for _, s in nearest_chunks[:1]), default=-1.0))
    if best >= highest:
        return Relevance(True, {})
    if nearest_chunks and (_asks_for_window(query_text, options)
                           or _window_holds_words(store, query_text, namespace, options)):
        # Its vector says little of what the window holds ("What did I do that week?": 0.23 from the week's notes):
        # the window's passages are what is asked, not an entity near that vector.
        return Relevance(False, {})
    # The query's names, those its case marks and those it writes otherwise that name stored entities ("nowak").
    named = _name_words(query_text, store, namespace)
    names, asked = (_names_stored(store, query_text, namespace, named),
                    _words_stored(store, query_text, namespace, named))
    if names < 0 and asked is None:  # it asks for whatever is stored of things the memory holds: they anchor it
        return Relevance(False, {})
    # The query's words move the floor (the parts below are held to it too): `name_margin` of it down when every
    # name it gives is a word of something stored, up when one is not; `word_margin` of it up when none of the
    # other words it asks with is.
    floor *= 1 + options.name_margin * names + options.word_margin * (asked or 0)
    if best >= floor or _closest_without_when(store, query_text, namespace, embedder, options) >= floor:
        return Relevance(True, {})
    # An id (`_ids`) or a run joined as one ("cert-manager") that something stored holds whole: the vectors barely see
    # such words ("how do I fix ECONNREFUSED?": 0.27 from the observation that answers). So does an id of letters and
    # digits whose letters are stored, one of a series the memory holds ("INC-199" of INC-142: shown with
    # `not_stored`). Other parts do not count: "src" and "py" of "src/payments/refund.py" are in many paths.
    joined = [word for word in tokens(query_text) if any(joiner in word for joiner in "-._/") and not _says_when(word)]
    named_records = words.named if words is not None else []
    candidates = dict.fromkeys([*(_ids(query_text) if ids is None else ids).values(), *joined])
    series = [part for word in candidates if _ID.fullmatch(word) for part in tokens(word)[:-1] if not part.isdigit()]
    if ((series and _stored(store, " ".join(series), namespace))
            or any(_held(store, word, namespace, named_records) for word in candidates)):
        return Relevance(True, {})
    if words is None:
        return None
    if typed := _typed(store, query_text, words, namespace, _anchor_candidates(options)):
        # Each is as relevant as the closest of them: the question is about them all, and one far from its words
        # must not fall below the share of the best anchor that an anchor needs (`_keep_threshold`).
        closest = max(store.similarities("node", list(typed), query).values(), default=0.0)
        return Relevance(False, dict.fromkeys(typed, closest), typed)
    if embedder is None or options.parts_compared <= 0:
        return None
    observed, sentence = _parts_near(store, query_text, query, namespace, words, embedder, options.parts_compared,
                                     named)
    observed = {i: s for i, s in observed.items() if s >= floor}
    return Relevance(False, observed) if observed or sentence >= floor else None


def _closest_without_when(
    store: GraphStore, query_text: str, namespace: str, embedder: Embedder | None, options: SearchOptions
) -> float:
    """The similarity of the nearest entity or passage to the query without its words that say when (`_says_when`;
    -1 when it has none): "in March 2026" moves the vector of "Who was on call for payments?" away from what
    answers it (0.46 to 0.36 from the entity Payments Team), and the time window, not the vector, handles when.
    Embedded only for a query below the floor that holds such a word; the passages are those the time window may
    show (`nearest_passages`)."""
    if embedder is None:
        return -1.0
    # A joined run's tokens end with the whole run ("2026-03"); a stop word gives none.
    what = WORD_RUN.sub(lambda run: "" if _says_when((tokens(run[0]) or [""])[-1]) else run[0], query_text)
    if what == query_text or not tokens(what):
        return -1.0
    what = embedder.embed_query(what)
    return max((s for _, s in [*store.vector_search("node", what, 1, namespace),
                               *nearest_passages(store, what, 1, namespace, options)]), default=-1.0)


def _parts_near(
    store: GraphStore, query_text: str, query: np.ndarray, namespace: str, words: WordMatches, embedder: Embedder,
    limit: int, names: set[str] | None = None,
) -> tuple[dict[int, float], float]:
    """The similarity to the query of the `limit` parts of what the keyword channel found that share most of its
    words (at least one besides the names it gives, which `_names_stored` weighs: "Sam's partner" says nothing of
    Sam's blood type): an entity's observations, each after its name ("Tomas: Borrowed Sam's drill in October"),
    and the sentences of a passage (one of a single sentence too), each after its title as the passage is
    embedded, and alone. A vector of a whole (an entity with its first observations together, a passage of several
    sentences, or a title longer than the sentence) dilutes the one part that answers; a part alone reads like the
    short passages the floor was calibrated on. A fact the keyword
    channel found whose own words (`_fact_terms`) share such a word is a part too, embedded alone already: it
    counts for both its ends.
    `names`: the query's `_name_words`, when found already.
    Returns each entity's best observation's or fact's similarity, and the best sentence's (-1 when none)."""
    wanted = set(terms(query_text)) - _name_terms(query_text, store, namespace, names)
    ids = [node_id for node_id, _ in words.nodes]
    stored = store.get_observations(ids)
    labels = {n.id: n.name for n in store.get_nodes([i for i in ids if stored.get(i)])}
    parts: list[tuple[int | None, str, str]] = [(i, text, f"{labels[i]}: {text}") for i in ids if i in labels
                                                 for text in stored[i]]
    chunks = store.get_chunks([chunk_id for chunk_id, _ in words.chunks])
    titles = store.document_titles({c.document_id for c in chunks}, namespace)
    for chunk in chunks:
        sentences = [t for t in _SENTENCE_END.split(chunk.text) if t.strip()]
        title = titles.get(chunk.document_id, "")
        parts += [(None, sentence, passage_text(title, sentence, chunk.section)) for sentence in sentences]
    shared = [len(wanted.intersection(terms(part))) for _, part, _ in parts]
    chosen = sorted((i for i in range(len(parts)) if shared[i]), key=lambda i: -shared[i])[:limit]
    facts = {edge.id: edge for edge, _ in words.facts if wanted.intersection(_fact_terms(edge))}
    observed: dict[int, float] = {}
    for edge_id, similarity in store.similarities("edge", list(facts), query).items():
        edge = facts[edge_id]
        for node_id in (edge.source_id, edge.target_id):
            observed[node_id] = max(observed.get(node_id, -1.0), similarity)
    sentence = -1.0
    if chosen:
        # A sentence is compared alone too: under a long title (as its passage is embedded) the one that answers
        # reads as far ("At what temperature was the November batch sintered?": 0.21 after the paper's title,
        # 0.44 alone). An observation keeps its entity's name: it is what the observation is about.
        alone = [i for i in chosen if parts[i][0] is None]
        texts = [parts[i][2] for i in chosen] + [parts[i][1] for i in alone]
        similarities = (embedder.embed_documents(texts) @ query).tolist()
        best = dict(zip(alone, similarities[len(chosen):]))
        for i, similarity in zip(chosen, similarities):
            node_id = parts[i][0]
            if node_id is None:
                sentence = max(sentence, similarity, best[i])
            else:
                observed[node_id] = max(observed.get(node_id, -1.0), similarity)
    return observed, sentence


def _names_stored(store: GraphStore, query_text: str, namespace: str, names: set[str] | None = None) -> int:
    """-1 when the query names things (words written like proper names, or that name a stored entity: `_name_words`,
    numbers of fewer than `_NAMING_DIGITS` digits aside) and every one is a word of something stored, +1 when one is
    not, 0 when it names nothing. A name is the surest sign of what a question is about: one the memory holds makes a
    middling match likely relevant, one it never saw ("Kubernetes" in a memory of other things) makes it likely that
    nothing stored answers.
    `names`: the query's `_name_words`, when found already."""
    # Words, not their terms, go to the keyword search, which stems them: a stem stemmed again may differ ("Ilse"
    # gives "ils", and "ils" gives "il").
    if names is None:
        names = _name_words(query_text, store, namespace)
    # A number that counts ("2 kids") is no name; one that names a thing ("port 5432") is, as an id is.
    words = {word for word in names if not word.isdigit() or len(word) >= _NAMING_DIGITS}
    stored = {word for word in words if _stored(store, word, namespace)}
    # One that says when ("March", "2026-03") and is not stored counts for nothing: the time window handles it.
    unstored = {word for word in words - stored if not _says_when(word)}
    if not stored and not unstored:
        return 0
    return 1 if unstored else -1


def _words_stored(store: GraphStore, query_text: str, namespace: str, names: set[str] | None = None) -> int | None:
    """+1 when none of the words the query asks with (besides its names and `_ASKING_WORDS`) is a word of something
    stored in any of its forms ("write" is stored as "wrote"), 0 when one is, None when it asks with no other word
    ("Who is Kirsty?", "What happened on 11 October?"). A question none of whose words the memory holds asks about
    what it never stored ("Sam's blood type" in a memory without blood or type); one that shares a word may still
    not, so the floor comes down for names only. A word that says when (`_says_when`) and is not stored counts as
    no word: "in march" says nothing of what is asked. `names`: the query's `_name_words`, when found already."""
    skipped = _name_terms(query_text, store, namespace, names) | _asking_terms()
    written = tokens(query_text)
    words = {word for word, term in zip(written, stemmed(written)) if term not in skipped}
    if any(_stored(store, " ".join(inflections(word)), namespace) for word in words):
        return 0
    return 1 if any(not _says_when(word) for word in words) else None


@functools.cache
def _asking_terms() -> frozenset[str]:
    """The terms of `_ASKING_WORDS`, stemmed on first use (the stemmer is not loaded when the server starts)."""
    return frozenset(terms(_ASKING_WORDS))


@functools.cache
def _listing_terms() -> frozenset[str]:
    """The terms of `_LISTING_WORDS` (stemmed on first use, as `_asking_terms`)."""
    return frozenset(terms(_LISTING_WORDS))


@functools.cache
def _window_terms() -> frozenset[str]:
    """The terms of `_ASKING_WORDS`, `_PERIOD_WORDS` and `_DOING_WORDS` (stemmed on first use, as `_asking_terms`)."""
    return _asking_terms() | frozenset(terms(f"{_PERIOD_WORDS} {_DOING_WORDS}"))


def _asks_for_window(query_text: str, options: SearchOptions) -> bool:
    """Whether the query asks for whatever a given window (`after`, `before`) holds: it has no word besides
    `_ASKING_WORDS`, words that say when (`_says_when`, and the days of a month it names: `_DAY`), `_PERIOD_WORDS`
    and `_DOING_WORDS` ("What did I do that week?", "What happened last month?", "What did I work on between June
    10 and June 16?"); its subject is the window itself. A name or any other word keeps it to the floor."""
    if not windowed(options):
        return False
    written = tokens(query_text)
    dated = not _MONTHS.isdisjoint(written)
    return all(term in _window_terms() or _says_when(word) or (dated and _DAY.fullmatch(word))
               for word, term in zip(written, stemmed(written)))


def _window_holds_words(store: GraphStore, query_text: str, namespace: str, options: SearchOptions) -> bool:
    """Whether a given window (`after`, `before`) holds a passage with each of the query's words that
    `_asks_for_window` does not pass over (and the words that ask for a count: `_LISTING_WORDS`), in any form the
    keyword channel matches, and the query has one: "How many weekly syncs did we have?" of a window of notes that
    each read "Weekly sync on ...". A question that counts or lists what a period holds is far from each of its
    passages by vector (that one answered "Nothing relevant" over three such notes); its words say that the window
    holds what it asks about. One word the window does not hold ("What did I cook that week?") keeps the floor."""
    if not windowed(options):
        return False
    written = tokens(query_text)
    dated = not _MONTHS.isdisjoint(written)
    passed = _window_terms() | _listing_terms()
    asked = [word for word, term in zip(written, stemmed(written))
             if term not in passed and not _says_when(word) and not (dated and _DAY.fullmatch(word))]
    return bool(asked) and all(keyword_passages(store, word, 1, namespace, options) for word in dict.fromkeys(asked))


def _says_when(word: str) -> bool:
    """Whether a word (as `tokens` gives it) says when, not what: `_WHEN_WORDS` (or its plural: "on Fridays"),
    `_WHEN_DIGITS`."""
    return (word in _WHEN_WORDS or (word.endswith("s") and word[:-1] in _WHEN_WORDS)
            or _WHEN_DIGITS.fullmatch(word) is not None)


def tells_time(word: str) -> bool:
    """Whether a word (as `tokens` gives it) says when (`_says_when`) or names a span of time or places one
    (`_PERIOD_WORDS`: "this month", "last week"): for global_search's question about what changed."""
    return _says_when(word) or stemmed([word])[0] in _period_terms()


@functools.cache
def _period_terms() -> frozenset[str]:
    """The terms of `_PERIOD_WORDS` (stemmed on first use, as `_asking_terms`)."""
    return frozenset(terms(_PERIOD_WORDS))


def _typed(store: GraphStore, query_text: str, words: WordMatches, namespace: str, limit: int) -> frozenset[int]:
    """The entities of the stored types that the query asks about with no other word besides `_ASKING_WORDS` and
    `_LISTING_WORDS`, in any case and number ("How many incidents have we had?", "List all teams": Incident, Team;
    "List all people": Person, persons, people); none when it asks with another word ("Which incident hit
    checkout?"). Among those the keyword channel found (it indexes types) and, when a word of the query has a
    number form of another stem ("people", "person"; "children", "child"), at most `limit` more that the keyword
    channel finds for those forms: an entity typed Person holds no word "people"."""
    asked = _asked_type(query_text)
    if asked is None:
        return frozenset()
    # Forms the keyword channel did not look for: it matches a word's stem, and "person" is no form of "peopl".
    # Not for a longer query: a type is a word or two, and such a query would pay a keyword search for nothing.
    forms = (sorted({form for word in asked.words for form in noun_variants(word)})
             if len(asked.words) <= _TYPE_WORDS else [])
    other = [form for form, term in zip(forms, stemmed(forms)) if term not in asked.stems]
    ids = dict.fromkeys(i for i, _ in words.nodes)
    if other:
        ids.update(dict.fromkeys(i for i, _ in store.keyword_search("node", " ".join(other), limit, namespace)))
    if not ids:
        return frozenset()
    return frozenset(n.id for n in store.get_nodes(list(ids)) if asked.names(n.type))


class _AskedType(NamedTuple):
    """The words a query asks for the entities of a type with (`_asked_type`), their terms and singular forms."""

    words: list[str]
    stems: frozenset[str]
    singular: frozenset[str]

    def names(self, type_: str) -> bool:
        """Whether a stored type is the one asked about, by its words' stems or singular forms (`_type_words`)."""
        stems, singular = _type_words(type_)
        return stems == self.stems or singular == self.singular


def _asked_type(query_text: str, most: int | None = None) -> _AskedType | None:
    """The query's words besides `_ASKING_WORDS` and `_LISTING_WORDS` (as `tokens` gives them), which name a type
    when the query asks for its entities ("How many incidents have we had?": "incidents"); None when it has none, or
    more than `most`."""
    written = tokens(query_text)
    skipped = _asking_terms() | _listing_terms()
    asked = [(word, term) for word, term in zip(written, stemmed(written)) if term not in skipped]
    if not asked or (most is not None and len(asked) > most):
        return None
    return _AskedType([word for word, _ in asked], frozenset(term for _, term in asked),
                      frozenset(noun_form(word) for word, _ in asked))


def _type_count(store: GraphStore, query_text: str, namespace: str, kept: list[NodeRecord]) -> TypeCount | None:
    """How many entities of the type the query asks for the entities of (`_asked_type`) the result holds (`kept`),
    and how many the namespace stores, when it holds fewer: a search shows at most `k_anchors` of them ("How many
    incidents have we had?" showed 5 of 9, and a model counted 5). The type is named as most of its entities
    spell it. Counted only when the result holds one: most queries name no type."""
    asked = _asked_type(query_text, _TYPE_WORDS)  # a type is a word or two
    if asked is None:
        return None
    shown = [n for n in kept if asked.names(n.type)]
    if not shown:
        return None
    spellings = {type_: count for type_, count in store.stats(namespace)["node_types"].items() if asked.names(type_)}
    stored = sum(spellings.values())
    if stored <= len(shown):
        return None
    return TypeCount(max(spellings, key=spellings.__getitem__), len(shown), stored,
                     stored if stored <= CALLER_LIMITS["k_anchors"][1] else None)


@functools.lru_cache(maxsize=4096)
def _type_words(type_: str) -> tuple[frozenset[str], frozenset[str]]:
    """The terms of a stored type's words and their singular forms (`noun_form`), to match a query's by either
    (cached: a query about a type compares them with the types of the entities it found, most of them seen before).
    Without the joined whole that `tokens` adds ("purchase_order" gives purchase, order and it)."""
    written = [word for word in tokens(type_) if word.isalnum()]
    return frozenset(stemmed(written)), frozenset(noun_form(word) for word in written)


def _ids_not_stored(store: GraphStore, ids: dict[str, str], namespace: str, named: list[NodeRecord]) -> list[str]:
    """The ids the query names (`_ids`: "INC-199", "getUserByName", "spring.datasource.password"), as written, that
    nothing stored holds (`_held`): what a search finds for them holds a part only ("INC-142" for "INC-199",
    "spring.datasource.url" for "spring.datasource.password", as the keyword index holds an id both whole and by its
    parts), or is merely related ("getUserById": the vectors of two ids differing by a word are close).
    `named`: the entities the query names (`match_words`)."""
    return [written for written, word in ids.items() if not _held(store, word, namespace, named)]


def _names_not_stored(
    store: GraphStore, query_text: str, namespace: str, ids: dict[str, str], shown: list[str],
) -> list[str]:
    """The words the query writes like names (a capital: "Tokyo" of "Who is based in Tokyo?"), as written, that
    nothing stored holds in any form the keyword channel matches (`_stored`: no entity's name, alias, type,
    description, observation or property value, no fact, no passage). What a search finds for such a question is
    about something else (the people based in other cities), and read as the answer it misleads. A sentence's
    first word has a capital whatever it is: it counts only when it is no common English word (`_common_word`:
    "Kubernetes version?", not "List all teams"). Not the ids (`_ids`, which `_ids_not_stored` reports), words of a
    joined run or holding a digit, stop words, nor words that say when (`_dates_not_applied`); nor one that a text
    the result shows (`shown`) holds inside a longer word: the keyword channel matches whole words, and a writer
    spells a name several ways ("Postgres" of a runbook that writes "PostgreSQL")."""
    found: list[str] = []
    for run in WORD_RUN.finditer(query_text):
        written, word = run[0], (tokens(run[0]) or [""])[0]
        if (not written[0].isupper() or not written.isalpha() or written in ids or not word or _says_when(word)
                or _stored(store, word, namespace)):
            continue
        if not (_sentence_start(query_text, run.start()) and _common_word(word)):
            found.append(written)
    if found:
        texts = unaccented("\n".join(shown))
        found = [written for written in found if (tokens(written) or [""])[0] not in texts]
    return list(dict.fromkeys(found))


def _shown_texts(records: dict[int, NodeRecord], edges: list[tuple[EdgeRecord, float]],
                 passages: list[tuple[ChunkRecord, float]]) -> list[str]:
    """The texts a search result shows: its entities' names, aliases and descriptions, its facts' descriptions and
    its passages (the ranked next ones too)."""
    return [*(text for n in records.values() for text in (n.name, *n.aliases, n.description)),
            *(edge.description for edge, _ in edges), *(chunk.text for chunk, _ in passages)]


def _sentence_start(text: str, at: int) -> bool:
    """Whether the word at `at` of `text` starts it or a sentence of it, where a capital says nothing."""
    return not text[:at].strip() or _SENTENCE_BREAK.search(text[:at]) is not None


def _dates_not_applied(query_text: str, options: SearchOptions, names: Sequence[str] = ()) -> list[str]:
    """The dates and months the query names, as written ("March 2025", "2026-03-15", "June 10"), when no time argument
    (`as_of`, `after`, `before`) was given: a search compares them as words, not as a time window, and shows what
    holds of any time ("Which meetings did we have in March 2025?" showed other months' notes first, and a model
    read them as March's). A month's name counts next to a day or a year, or written with a capital past a
    sentence's first word ("may" is a verb, "May I ...?" a question); a year alone does not (it is often what is
    asked about: "born in 1990"), nor a weekday or "today" (relative to when the question was asked). A month's
    name alone that is a word of one of `names` (the entities found: "March Patel", "May Lin") is that name."""
    if timed(options):
        return []
    groups: list[list[re.Match[str]]] = []
    previous: re.Match[str] | None = None
    for run in WORD_RUN.finditer(query_text):
        word = run[0].casefold()
        if not (word in _MONTHS or _WHEN_DIGITS.fullmatch(word) or _DAY.fullmatch(word)):
            previous = None
            continue
        if previous is not None and not query_text[previous.end():run.start()].strip(" ,"):
            groups[-1].append(run)  # "June 10, 2025": one date
        else:
            groups.append([run])
        previous = run
    found = []
    for group in groups:
        months = [run for run in group if run[0].casefold() in _MONTHS]
        if any(_DATE.fullmatch(run[0]) for run in group) or (months and (
                len(group) > 1 or (months[0][0][0].isupper() and not _sentence_start(query_text, months[0].start())))):
            found.append(query_text[group[0].start():group[-1].end()])
    named = {word for name in names for word in tokens(name)}
    return [date for date in found if not (date.casefold() in _MONTHS and date.casefold() in named)]


def _ids(query_text: str) -> dict[str, str]:
    """The ids the query names, as written (a run of `WORD_RUN`) -> as `tokens` gives them (a joined run whole):
    words written as codes, not as prose, which a memory holds verbatim or not at all and which the vectors barely
    see. Letters and digits joined (`_ID`: "INC-199", "v2.7"); a number of `_NAMING_DIGITS` digits or more ("5432",
    "137") or after '#' ("#482"); a command-line option, a word of letters after a '-' that starts it ("-Xmx4g",
    "--dry-run"); a word in capitals that is no common word (`_common_word`: "ECONNREFUSED", "HCI"; not "US");
    camelCase (`_camel_case`: "getUserById", "OOMKilled"; each part of a joined run alone, so not "Jean-Luc"; not
    "McKenna"); snake_case ("get_user_by_name"); a dotted key, file name or path (`_DOTTED`: "spring.datasource.url",
    "src/api/users.py"). Not a word that says when ("2026-03-15", "10AM"), nor the compounds of prose
    ("self-portrait", "artists/bands"), which writers spell several ways."""
    found: dict[str, str] = {}
    for run in WORD_RUN.finditer(query_text):
        written, word = run[0], (tokens(run[0]) or [""])[-1]  # a joined run's tokens end with the whole run
        # The character before the run: '#' before a number, '-' before an option (a run never starts after a
        # letter or digit and a '-', which would have joined it).
        before = query_text[run.start() - 1:run.start()]
        if word and not _says_when(word) and (
                _ID.fullmatch(word) or "_" in written or _DOTTED.search(written)
                or (word.isdigit() and (len(word) >= _NAMING_DIGITS or before == "#"))
                or (before == "-" and word[0].isalpha())
                or any(_camel_case(part) for part in re.split(r"[-._/]", written))
                or (len(word) > 1 and written.isupper() and not _common_word(word))):
            found.setdefault(written, word)
    return found


def _camel_case(word: str) -> bool:
    """Whether a word (as written) has a capital past its first letter and small letters ("getUserById", "OOMKilled",
    "iPhone", "UserRepo", "GitHub"), unlike a name ("Nowak") or a word in capitals ("HCI"), and is no name joined of
    two (`_joined_name`: "McKenna")."""
    return (any(char.isupper() for char in word[1:]) and any(char.islower() for char in word)
            and not _joined_name(word))


def _joined_name(word: str) -> bool:
    """Whether a word (as written) is a name with an inner capital: two capitalised parts of small letters, neither
    a common English word (`_common_word`: "McKenna", "MacDonald", "DeShawn", "LaToya", "DiCaprio"). A code is built
    of words ("UserRepo", "GitHub": a hub, "HashMap", "PgBouncer"; "getUserById", "UserRepoImpl" and "DuckDB" have
    more parts); such a name joins a prefix or particle to a name, and is prose: "What is McKenna's phone number?"
    is held to the floor as a question about any other stored name is (`_names_stored`), not let through because
    McKenna is stored. The lexicon lists no proper nouns, so a product named of two such parts ("NumPy") reads as a
    name too."""
    capitals = [i for i, char in enumerate(word) if char.isupper()]
    if len(capitals) != 2 or capitals[0] != 0 or not word.isalpha() or not 2 <= capitals[1] <= len(word) - 2:
        return False
    return not any(_common_word(part.casefold()) for part in (word[:capitals[1]], word[capitals[1]:]))


def _held(store: GraphStore, word: str, namespace: str, named: list[NodeRecord]) -> bool:
    """Whether something stored holds the id `word` (as `tokens` gives it) whole (`_held_whole`), or an entity the
    query names (`named`) is called by it up to punctuation ("orders_db" names orders-db: `_called`)."""
    return bool(_called(word, named)) or _held_whole(store, word, namespace)


def _held_whole(store: GraphStore, word: str, namespace: str) -> bool:
    """Whether an entity, passage or fact holds the joined `word` as a whole (`_holding`)."""
    return any(_holding(store, kind, word, namespace) for kind in ("node", "chunk", "edge"))


def _holding(store: GraphStore, kind: str, word: str, namespace: str) -> list[int]:
    """The rows of `kind` among the `_HELD_CHECKED` the keyword channel ranks best for the id `word` (as `tokens`
    gives it) that hold it as a whole, best first: the keyword score of such a row exceeds its score for the word's
    parts alone (BM25 sums one positive share per query term a row holds)."""
    parts = " ".join(tokens(word)[:-1])
    found = store.keyword_search(kind, word, _HELD_CHECKED, namespace)
    alone = store.keyword_scores(kind, parts, [i for i, _ in found], namespace) if found and parts else {}
    # The two lookups round differently (float32, float64): the whole id's share is far above that.
    return [i for i, score in found if score > alone.get(i, 0.0) * (1 + 1e-4)]


def _holding_ids(store: GraphStore, kind: str, ids: dict[str, str], namespace: str, places: int) -> set[int]:
    """The rows of `kind` that hold one of the query's ids (`_ids`) whole (`_holding`), of the ids that at most
    `places` rows hold (the anchors or passages shown): an id that more hold singles none out ("LGBTQ" in a
    conversation about it, "UK" in an encyclopedia), and putting its holders first would only push out what the
    question's other words found."""
    held: set[int] = set()
    for word in dict.fromkeys(ids.values()):
        if len(rows := _holding(store, kind, word, namespace)) <= places:
            held.update(rows)
    return held


def _stored(store: GraphStore, word: str, namespace: str) -> bool:
    """Whether an entity, passage or fact of the namespace holds one of the words."""
    return any(store.keyword_search(kind, word, 1, namespace) for kind in ("node", "chunk", "edge"))


def _name_words(query_text: str, store: GraphStore | None = None, namespace: str = "") -> set[str]:
    """The words (as `tokens` gives them) the query writes like proper names (a capital past its first letter) and,
    given the store, those it writes otherwise that name a stored entity (`_names_held`: "nowak", "Nowak" alone)."""
    # Not a caseless script's words: without case, nothing there says a word is a name, and these are not matched
    # against stored names (every word of a Chinese question would count as a name the memory must hold).
    marked = {word for name in name_candidates(query_text, 1, proper_only=True, caseless=False)
              for word in tokens(name)}
    if store is None:
        return marked
    return marked | _names_held(store, [w for w in tokens(query_text) if w not in marked], namespace)


def _name_terms(query_text: str, store: GraphStore | None = None, namespace: str = "",
                names: set[str] | None = None) -> set[str]:
    """The terms of `_name_words` (`names`, when found already)."""
    if names is None:
        names = _name_words(query_text, store, namespace)
    return set(terms(" ".join(names)))


def _names_held(store: GraphStore, words: list[str], namespace: str) -> set[str]:
    """Of `words` (as `tokens` gives them), those that a stored entity's name or alias writes like a proper name
    (`_proper_words`) and that are no common English word (`_common_word`): "nowak" of Łukasz Nowak, "strasse" of
    Straße, "soren" of Søren Kierkegaard, whatever their case in the query, but not "team" of Payments Team.
    A query's case says little of a name: a one-word query's capital is the one any text starts with, and a search
    box is often typed in lower case; the stored name's writing and the lexicon say it instead. Words holding a
    digit are left out (numbers and ids are names by their digits already)."""
    # The lexicon first: most words of a question are common ones, and it spares their keyword searches.
    wanted = {w for w in words if not any(char.isdigit() for char in w) and not _common_word(w)}
    if not wanted:
        return set()
    found = {word: [i for i, _ in store.keyword_search("node", word, _NAMES_CHECKED, namespace)] for word in wanted}
    records = {n.id: n for n in store.get_nodes({i for ids in found.values() for i in ids})}
    return {word for word, ids in found.items()
            if any(word in _proper_words(name) for i in ids if i in records
                   for name in (records[i].name, *records[i].aliases))}


@functools.lru_cache(maxsize=4096)
def _proper_words(name: str) -> frozenset[str]:
    """The words (as `tokens` gives them) a stored name writes like a proper name: those of each run holding a
    capital, the first included (a name is no sentence: "Straße", "Łukasz Nowak"; not "checkout" of the
    "checkout-service" a writer kept in lower case)."""
    return frozenset(word for run in WORD_RUN.findall(name) if any(char.isupper() for char in run)
                     for word in tokens(run))


def _common_word(word: str) -> bool:
    """Whether `word` (lower case) is a common English word in one of its forms: lemminflect's lexicon knows a
    lemma for it ("team", "payments", "services"). Its lexicon keeps proper nouns apart, capitalised, so "nowak",
    "paris" or "priya" have none: a common word that title case capitalised in a stored name ("Team" of Payments
    Team) is told from a word that is a name in its own right."""
    from lemminflect import getAllLemmas  # as `ports.text.inflections`: its tables load on first use

    return bool(getAllLemmas(word))


def _anchors(
    store: GraphStore, named: list[NodeRecord], nearest: list[tuple[int, float]],
    keyword_nodes: list[tuple[int, float]], query: np.ndarray, options: SearchOptions,
    observed: dict[int, float] | None = None, fact_ends: list[int] | None = None, called: set[int] | None = None,
    holding: set[int] | None = None,
) -> list[Reached]:
    """The nodes the query is about; `observed`: entities whose own observation is that close to the query;
    `fact_ends`: `_fact_ends`, ranked after the entities the keyword channel found by their own words (one
    ranking of the channel: a fact's ends add candidates, not a vote for entities its names found already);
    `called`: the entities the whole query names (`_called`), first and as relevant as the best anchor: the query
    asks for nothing else, while the vectors and the words of another ("ORA-00942", whose observation writes
    "orders" three times) may rank it first ("orders-db"); `holding`: the entities that hold an id the query names
    whole (`_holding_ids`), next among the anchors chosen and as relevant too: a memory holds an id verbatim or not
    at all, and the vectors barely see it, so the words around it may rank another first ("how do I fix
    ECONNREFUSED?": "OOMKilled api pod", fixed by raising a limit, before orders-db, whose observation holds
    ECONNREFUSED)."""
    if options.k_anchors <= 0:
        return []
    vector_hits = nearest[: _anchor_candidates(options)]
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


def _called(query_text: str, named: list[NodeRecord]) -> set[int]:
    """The entities of `named` (those the query names) whose name or an alias is the whole query, up to case,
    accents and punctuation (`loose_key`: "orders_db" or "Orders DB?" calls orders-db)."""
    whole = loose_key(query_text)
    return {n.id for n in named if any(loose_key(name) == whole for name in (n.name, *n.aliases))}


def _without_sibling_ids(store: GraphStore, anchors: list[Reached], named: list[NodeRecord]) -> list[Reached]:
    """A query that names one id of a series ("What happened in INC-117?") is about that one: the anchors named
    by another id of the same series ("INC-101": the same letters around other digits, a vector as near) go,
    unless the query names them too."""
    series = {_series(n.name) for n in named if _ID.fullmatch(n.name)}
    if not series:
        return anchors
    asked = {n.id for n in named}
    names = {n.id: n.name for n in store.get_nodes([a.node_id for a in anchors if a.node_id not in asked])}
    return [a for a in anchors if a.node_id in asked or a.node_id not in names
            or not (_ID.fullmatch(names[a.node_id]) and _series(names[a.node_id]) in series)]


def _series(identifier: str) -> str:
    """An id with its digits left out, case folded: "INC-117" and "inc-101" are of one series."""
    return re.sub(r"\d+", "#", identifier.casefold())


def _expand(
    store: GraphStore, query: np.ndarray, namespace: str, anchors: list[Reached], options: SearchOptions
) -> tuple[dict[int, Reached], list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The nodes reached from the anchors that can be kept (relevant enough) or that led further, and the
    (ids, sources, targets) of the edges walked, hop by hop.

    A hop reaches thousands of nodes in a big graph, so it is computed over arrays: every walked edge in both
    directions is a candidate step; a node keeps the step that brings the most proximity (the first such step,
    edges in `neighbor_ends` order, on a tie) and the best similarity among the facts that reached it.
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
    """The facts (edges) that best answer the query, best first, each with its score and its own similarity
    to the query: those among the kept
    nodes, and those from a kept node to one left out that score as high as a node needs to be kept ("Payments
    Team owns Checkout Service" for "which team owned the service hit by INC-142?": the team alone is far from
    the question). At most `FACTS_PER_NODE` per kept node; those that cap leaves out come second, as (id, source,
    target), for `_more_facts`.

    A fact scores the geometric mean of its own similarity to the query and of its context: the mean
    relevance of the chain that reached the kept end it extends (the anchor's relevance, then each fact
    walked). Both must be high: for "who leads the team that owns X?", "Omar leads Discovery Team", next to
    "Discovery Team owns X", outranks "Lena leads Platform Team", though the two facts alone are about as close
    to the question; and a weak fact hanging off a strong chain stays weak. A fact's own similarity is lifted by
    its words (`_with_fact_words`) for this score, not for the relevance it lends a far end.
    """
    import numpy as np  # see passage_ranking._walk

    nodes = np.fromiter(sorted(r.node_id for r in kept), np.int64, len(kept))
    ids, sources, targets = _edges_touching(walked, nodes)
    if not len(ids):
        return {}, []
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
    score = np.sqrt(best_context * _with_fact_words(store, query_text, ids, similarity, options))
    threshold = _keep_threshold([r for r in kept if r.hop == 0], options)
    chosen = np.flatnonzero(both_kept | (score >= threshold))
    ranked = chosen[np.argsort(-score[chosen], kind="stable")]
    best, capped = ranked[: FACTS_PER_NODE * options.max_nodes], ranked[FACTS_PER_NODE * options.max_nodes:]
    return (dict(zip(ids[best].tolist(), zip(score[best].tolist(), similarity[best].tolist()))),
            list(zip(ids[capped].tolist(), sources[capped].tolist(), targets[capped].tolist())))


def _with_fact_words(
    store: GraphStore, query_text: str, ids: np.ndarray, similarity: np.ndarray, options: SearchOptions,
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
    types = store.edge_types(ids.tolist())
    held = {relation: len(wanted.intersection(_relation_terms(relation))) for relation in set(types.values())}
    words = np.fromiter((held.get(types.get(i, ""), 0) for i in ids.tolist()), np.float64, len(ids))
    if not words.max():
        return similarity
    return similarity + options.keyword_weight * similarity.max() * words / words.max()


@functools.lru_cache(maxsize=4096)
def _relation_terms(relation: str) -> frozenset[str]:
    return frozenset(terms(relation.replace("_", " ")))


def _join_far_ends(
    facts: list[tuple[EdgeRecord, float, float]], kept: list[Reached], records: dict[int, NodeRecord],
    options: SearchOptions,
) -> tuple[list[tuple[EdgeRecord, float]], list[Reached], list[tuple[int, int, int]]]:
    """The facts (best first, with their scores) and the nodes: a fact leading out of the kept nodes brings
    its far end in while fewer than `max_nodes` are kept (reached through the fact, as relevant as the fact),
    and is dropped otherwise, so the result stays a connected subgraph of at most `max_nodes`. Third, the facts
    dropped for `max_nodes` alone, as (id, source, target), for `_more_facts`."""
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


def _more_facts(
    store: GraphStore, namespace: str, options: SearchOptions, capped: list[tuple[int, int, int]],
    kept: list[Reached], records: dict[int, NodeRecord], shown: list[tuple[EdgeRecord, float]],
    named: Sequence[NodeRecord] = (),
) -> dict[str, dict[str, int]]:
    """Anchor's name -> relation type -> how many more of its facts of that type the search could show (those
    `edge_filter` reads) than `shown` holds, for the lists the caps cut short: a type of which `shown` holds at
    least two facts of the entity (one is no list: a hub's one fact on a multi-hop path) and a cap (`capped`:
    `max_nodes`, `FACTS_PER_NODE` x it) left out another. A list shown in part reads as whole ("Who is on the
    Support team?" showed 29 of 40 members, and a model counted 29); facts left out as less relevant are no part
    of a list the result shows. Only the anchors' lists, and of those the query names (`named`) when it names
    any: the query is about them, not about another team whose members were reached on the way ("Who is in the
    Support Team?" kept some Platform Team members too). The entities missing most come first."""
    if not capped:
        return {}
    kept_ids = {r.node_id for r in kept if r.hop == 0}
    kept_ids = ({n.id for n in named} & kept_ids) or kept_ids
    types = store.edge_types(sorted({edge_id for edge_id, _, _ in capped}))
    in_result = Counter((end, edge.type) for edge, _ in shown for end in (edge.source_id, edge.target_id))
    cut = {(end, types[edge_id]) for edge_id, *ends in capped if edge_id in types for end in ends
           if end in kept_ids and in_result[end, types[edge_id]] >= 2}
    more: dict[int, dict[str, int]] = {}
    for node_id in sorted({node_id for node_id, _ in cut}):
        edge_ids = store.neighbor_ends([node_id], namespace, as_of=edge_filter(options), limit=_FACTS_COUNTED)[0]
        stored = Counter(store.edge_types(edge_ids.tolist()).values())
        for type_ in sorted(type_ for end, type_ in cut if end == node_id):
            if (count := stored[type_] - in_result[node_id, type_]) > 0:
                more.setdefault(node_id, {})[type_] = count
    ranked = sorted(more, key=lambda node_id: -sum(more[node_id].values()))
    return {records[node_id].name: more[node_id] for node_id in ranked}


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

