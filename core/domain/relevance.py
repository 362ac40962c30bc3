"""The relevance floor (`relevant`): whether anything stored is relevant enough for a search to answer at all, moved
by what the memory holds of the query's words; below it a search returns nothing, so that the model says it does not
know instead of reading noise."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from duckgraph.core.domain.chunking import SECTION_SEPARATOR, TABLE_DELIMITER
from duckgraph.core.domain.query_words import (
    DAY, ID, MONTHS, NAMING_DIGITS, TYPE_WORDS, WordMatches, anchor_candidates, asked_type, asking_terms,
    asks_consequence, fact_terms, held, is_stored, listing_terms, name_terms, name_words, query_ids, saying_terms,
    says_when, window_terms)
from duckgraph.core.domain.resolution import noun_variants
from duckgraph.core.domain.search_options import SearchOptions, keyword_passages, nearest_passages, windowed
from duckgraph.core.domain.texts import passage_text
from duckgraph.ports import Embedder, GraphStore, NodeRecord, inflections, terms, tokens
from duckgraph.ports.text import WORD_RUN, stemmed

if TYPE_CHECKING:
    import numpy as np

#: Where a passage's sentences end: also at a semicolon, whose clause often answers alone.
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")


class Relevance(NamedTuple):
    """Why a search goes on (see `relevant`): whether a whole entity or passage (or an id the query names) reached
    the floor (if not, only parts did or the query asks for whatever is stored of names: no entity anchors it by its
    vector alone), the entities whose own observation did, with that observation's similarity, and the entities
    of the type the query asks about (`_typed`), its anchors then."""

    whole: bool
    observed: dict[int, float]
    typed: frozenset[int] = frozenset()


def relevant(
    store: GraphStore, query_text: str, query: np.ndarray, nearest: list[tuple[int, float]],
    nearest_chunks: list[tuple[int, float]] | None, namespace: str, options: SearchOptions,
    words: WordMatches | None = None, embedder: Embedder | None = None, ids: dict[str, str] | None = None,
) -> Relevance | None:
    """Whether anything stored is relevant enough to answer: the nearest entity or passage is at least
    `relevance_floor` similar to the query (moved by what the memory holds of the query's words), the query asks
    for whatever is stored of names the memory holds ("Tell me about Kirsty") or for what a change to entities it
    names would bring about, when they hold relations (`_asks_for_relations`), an id it names (`query_ids`: "INC-142",
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
    named = name_words(query_text, store, namespace)
    names, asked = (_names_stored(store, query_text, namespace, named),
                    _words_stored(store, query_text, namespace, named))
    named_records = words.named if words is not None else []
    # It asks for whatever is stored of things the memory holds, or for what a change to them reaches: they anchor it.
    if names < 0 and (asked is None or _asks_for_relations(store, query_text, named_records, namespace)):
        return Relevance(False, {})
    # The query's words move the floor (the parts below are held to it too): `name_margin` of it down when every
    # name it gives is a word of something stored, up when one is not; `word_margin` of it up when none of the
    # other words it asks with is.
    floor *= 1 + options.name_margin * names + options.word_margin * (asked or 0)
    if best >= floor or _closest_without_when(store, query_text, namespace, embedder, options) >= floor:
        return Relevance(True, {})
    # An id (`query_ids`) or a run joined as one ("cert-manager") that something stored holds whole: the vectors barely
    # see such words ("how do I fix ECONNREFUSED?": 0.27 from the observation that answers). So does an id of letters
    # and digits whose letters are stored, one of a series the memory holds ("INC-199" of INC-142: shown with
    # `not_stored`). Other parts do not count: "src" and "py" of "src/payments/refund.py" are in many paths.
    joined = [word for word in tokens(query_text) if any(joiner in word for joiner in "-._/") and not says_when(word)]
    candidates = dict.fromkeys([*(query_ids(query_text) if ids is None else ids).values(), *joined])
    series = [part for word in candidates if ID.fullmatch(word) for part in tokens(word)[:-1] if not part.isdigit()]
    if ((series and is_stored(store, " ".join(series), namespace))
            or any(held(store, word, namespace, named_records) for word in candidates)):
        return Relevance(True, {})
    if words is None:
        return None
    if typed := _typed(store, query_text, words, namespace, anchor_candidates(options)):
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
    """The similarity of the nearest entity or passage to the query without its words that say when (`says_when`;
    -1 when it has none): "in March 2026" moves the vector of "Who was on call for payments?" away from what
    answers it (0.46 to 0.36 from the entity Payments Team), and the time window, not the vector, handles when.
    Embedded only for a query below the floor that holds such a word; the passages are those the time window may
    show (`nearest_passages`)."""
    if embedder is None:
        return -1.0
    # A joined run's tokens end with the whole run ("2026-03"); a stop word gives none.
    what = WORD_RUN.sub(lambda run: "" if says_when((tokens(run[0]) or [""])[-1]) else run[0], query_text)
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
    Sam's blood type; of those that share as many, those that share its names first): an entity's observations,
    each after its name ("Tomas: Borrowed Sam's drill in October"), and the sentences of a passage (one of a single
    sentence too) and the rows of its tables, each under its table's header (`_table_rows`: "What is Maria Garcia's
    phone number?" is 0.62 from "| name | email | phone |" over her row, which alone shares only her name), each
    after its title as the passage is embedded, and alone. A vector of a whole (an entity with its first
    observations together, a passage of several sentences, or a title longer than the sentence) dilutes the one part
    that answers; a part alone reads like the short passages the floor was calibrated on. A passage's section
    heading is a part too, chosen by the words it adds to those above it (`_heading_part`): a heading that is the
    query's subject says that its section answers ("What are my open action items?": 0.54 from "Ops weekly sync
    2026-11-26 > Action items", 0.30 from a line under it), though none of its sentences holds the query's words. A
    fact the keyword channel found whose own words (`fact_terms`) share such a word is a part too, embedded alone
    already: it counts for both its ends.
    `names`: the query's `name_words`, when found already.
    Returns each entity's best observation's or fact's similarity, and the best sentence's or heading's (-1 when
    none)."""
    named = name_terms(query_text, store, namespace, names)
    wanted = set(terms(query_text)) - named
    ids = [node_id for node_id, _ in words.nodes]
    stored = store.get_observations(ids)
    labels = {n.id: n.name for n in store.get_nodes([i for i in ids if stored.get(i)])}
    # Each part: its entity (None for a passage's part), the words that choose it, its text as embedded, and its
    # text alone ("" for a part not compared alone).
    parts: list[tuple[int | None, set[str], str, str]] = [
        (i, set(terms(text)), f"{labels[i]}: {text}", "") for i in ids if i in labels for text in stored[i]]
    chunks = store.get_chunks([chunk_id for chunk_id, _ in words.chunks])
    titles = store.document_titles({c.document_id for c in chunks}, namespace)
    headings: dict[str, set[str]] = {}  # a section's passages share its heading: it is compared once
    for chunk in chunks:
        rows, prose = _table_rows(chunk.text)
        sentences = [t for t in _SENTENCE_END.split(prose) if t.strip()]
        # A row is chosen by its header's words only when it holds every name the query gives and one of its words:
        # else every row of a table would tie on them, and another record's would answer for a name it shares
        # ("Hugo Garcia's phone number" of Maria Garcia's row).
        for header, row in rows:
            cells = set(terms(row))
            if named <= cells and not (wanted | named).isdisjoint(cells):
                sentences.append(f"{header}\n{row}")
        title = titles.get(chunk.document_id, "")
        parts += [(None, set(terms(sentence)), passage_text(title, sentence, chunk.section), sentence)
                  for sentence in sentences]
        if heading := _heading_part(title, chunk.section):
            headings.setdefault(*heading)
    parts += [(None, added, text, "") for text, added in headings.items()]
    shared = [len(wanted.intersection(part)) for _, part, _, _ in parts]
    # Of parts that share as many of its other words, those that share its names first: the rows of a table all
    # share its header's ("phone"), and the row of the name asked about answers ("Maria Garcia's phone number").
    chosen = sorted((i for i in range(len(parts)) if shared[i]),
                    key=lambda i: (-shared[i], -len(named.intersection(parts[i][1]))))[:limit]
    facts = {edge.id: edge for edge, _ in words.facts if wanted.intersection(fact_terms(edge))}
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
        alone = [i for i in chosen if parts[i][3]]
        texts = [parts[i][2] for i in chosen] + [parts[i][3] for i in alone]
        similarities = (embedder.embed_documents(texts) @ query).tolist()
        best = dict(zip(alone, similarities[len(chosen):]))
        for i, similarity in zip(chosen, similarities):
            node_id = parts[i][0]
            if node_id is None:
                sentence = max(sentence, similarity, best.get(i, -1.0))
            else:
                observed[node_id] = max(observed.get(node_id, -1.0), similarity)
    return observed, sentence


def _table_rows(text: str) -> tuple[list[tuple[str, str]], str]:
    """A passage's Markdown table rows, each with its table's header row (the line above its delimiter line,
    `TABLE_DELIMITER`: a passage of a table's rows starts with both, `chunk_text`), and its other lines. A row alone
    does not say what its cells are ("| Maria Garcia | +34 612 345 678 | Madrid |"): read under its header, it is a
    part as a sentence is (`_parts_near`)."""
    rows: list[tuple[str, str]] = []
    rest: list[str] = []
    header = ""
    lines = text.split("\n")
    for above, line in zip(["", *lines], lines):
        if header and "|" in line and line.strip():
            rows.append((header, line))
            continue
        header = above if "|" in above and TABLE_DELIMITER.match(line) else ""
        rest.append(line)
    return rows, "\n".join(rest)


def _heading_part(title: str, section: str) -> tuple[str, set[str]] | None:
    """A passage's section heading as a part (`_parts_near`): the heading under its document's title and the
    headings above it, as its passage is embedded, and the words its own heading (the last of the section's path)
    adds to them. None for a passage of no section, or one whose heading has nothing above it: a heading alone is a
    word or two ("Notes", "Summary") that reads close to any question holding it ("What notes did I take about
    cooking?": 0.45 from "Notes" alone, 0.24 from "Ops weekly sync 2026-11-26 > Notes"). A heading that only
    repeats the title adds no word: a title names its whole document, no part that answers."""
    above, _, own = section.rpartition(SECTION_SEPARATOR)
    if not own or not (title or above):
        return None
    return passage_text(title, section), set(terms(own)) - set(terms(f"{title} {above}"))


def _asks_for_relations(store: GraphStore, query_text: str, named: list[NodeRecord], namespace: str) -> bool:
    """Whether the query asks what a change to the entities it names would bring about (`asks_consequence`: "What
    would break if we drop Redis?", "What is the impact of removing Redis?") and one of them (`named`) holds a
    relation: what such a change reaches is what they relate to ("auth-service depends on Redis"). Its other words
    say what changes ("drop", "goes down", "removing"), which a memory seldom holds: they are no attribute it lacks
    ("What is Kirsty's phone number?"), which `_words_stored` weighs. The facts, compared as parts, do not tell the
    two apart: a fact's vector is mostly its ends' names (Redis's are as near to "What is Redis's license?")."""
    return (bool(named) and asks_consequence(query_text)
            and len(store.neighbor_ends([n.id for n in named], namespace, limit=1)[0]) > 0)


def _names_stored(store: GraphStore, query_text: str, namespace: str, names: set[str] | None = None) -> int:
    """-1 when the query names things (words written like proper names, or that name a stored entity: `name_words`,
    numbers of fewer than `NAMING_DIGITS` digits aside) and every one is a word of something stored, +1 when one is
    not, 0 when it names nothing. A name is the surest sign of what a question is about: one the memory holds makes a
    middling match likely relevant, one it never saw ("Kubernetes" in a memory of other things) makes it likely that
    nothing stored answers.
    `names`: the query's `name_words`, when found already."""
    # Words, not their terms, go to the keyword search, which stems them: a stem stemmed again may differ ("Ilse"
    # gives "ils", and "ils" gives "il").
    if names is None:
        names = name_words(query_text, store, namespace)
    # A number that counts ("2 kids") is no name; one that names a thing ("port 5432") is, as an id is.
    words = {word for word in names if not word.isdigit() or len(word) >= NAMING_DIGITS}
    stored = {word for word in words if is_stored(store, word, namespace)}
    # One that says when ("March", "2026-03") and is not stored counts for nothing: the time window handles it.
    unstored = {word for word in words - stored if not says_when(word)}
    if not stored and not unstored:
        return 0
    return 1 if unstored else -1


def _words_stored(store: GraphStore, query_text: str, namespace: str, names: set[str] | None = None) -> int | None:
    """+1 when none of the words the query asks with (besides its names, `_ASKING_WORDS` and `_SAYING_WORDS`) is a
    word of something stored in any of its forms ("write" is stored as "wrote"), 0 when one is, None when it asks
    with no other word ("Who is Kirsty?", "What happened on 11 October?", "What did Sarah ask me to do?"). A
    question none of whose words the memory holds asks about what it never stored ("Sam's blood type" in a memory
    without blood or type); one that shares a word may still not, so the floor comes down for names only. A word
    that says when (`says_when`) and is not stored counts as no word: "in march" says nothing of what is asked.
    `names`: the query's `name_words`, when found already."""
    skipped = name_terms(query_text, store, namespace, names) | asking_terms() | saying_terms()
    written = tokens(query_text)
    words = {word for word, term in zip(written, stemmed(written)) if term not in skipped}
    if any(is_stored(store, " ".join(inflections(word)), namespace) for word in words):
        return 0
    return 1 if any(not says_when(word) for word in words) else None


def _asks_for_window(query_text: str, options: SearchOptions) -> bool:
    """Whether the query asks for whatever a given window (`after`, `before`) holds: it has no word besides
    `_ASKING_WORDS` and `_SAYING_WORDS`, words that say when (`says_when`, and the days of a month it names: `DAY`),
    `_PERIOD_WORDS` and `_DOING_WORDS` ("What did I do that week?", "What happened last month?", "What did I work on
    between June 10 and June 16?"); its subject is the window itself. A name or any other word keeps it to the
    floor."""
    if not windowed(options):
        return False
    written = tokens(query_text)
    dated = not MONTHS.isdisjoint(written)
    return all(term in window_terms() or says_when(word) or (dated and DAY.fullmatch(word))
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
    dated = not MONTHS.isdisjoint(written)
    passed = window_terms() | listing_terms()
    asked = [word for word, term in zip(written, stemmed(written))
             if term not in passed and not says_when(word) and not (dated and DAY.fullmatch(word))]
    return bool(asked) and all(keyword_passages(store, word, 1, namespace, options) for word in dict.fromkeys(asked))


def _typed(store: GraphStore, query_text: str, words: WordMatches, namespace: str, limit: int) -> frozenset[int]:
    """The entities of the stored types that the query asks about with no other word besides `_ASKING_WORDS` and
    `_LISTING_WORDS`, in any case and number ("How many incidents have we had?", "List all teams": Incident, Team;
    "List all people": Person, persons, people); none when it asks with another word ("Which incident hit
    checkout?"). Among those the keyword channel found (it indexes types) and, when a word of the query has a
    number form of another stem ("people", "person"; "children", "child"), at most `limit` more that the keyword
    channel finds for those forms: an entity typed Person holds no word "people"."""
    asked = asked_type(query_text)
    if asked is None:
        return frozenset()
    # Forms the keyword channel did not look for: it matches a word's stem, and "person" is no form of "peopl".
    # Not for a longer query: a type is a word or two, and such a query would pay a keyword search for nothing.
    forms = (sorted({form for word in asked.words for form in noun_variants(word)})
             if len(asked.words) <= TYPE_WORDS else [])
    other = [form for form, term in zip(forms, stemmed(forms)) if term not in asked.stems]
    ids = dict.fromkeys(i for i, _ in words.nodes)
    if other:
        ids.update(dict.fromkeys(i for i, _ in store.keyword_search("node", " ".join(other), limit, namespace)))
    if not ids:
        return frozenset()
    return frozenset(n.id for n in store.get_nodes(list(ids)) if asked.names(n.type))
