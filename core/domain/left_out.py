"""Notes on what a search result leaves out or could not apply, so that it is not read as a whole answer: the ids
and names nothing stored holds, the dates no time window applied, the entities of an asked type beyond those shown
(`TypeCount`), the facts the caps cut from a list (`more_facts`), and the chains of one relation type that go on past
the last hop (`ChainGoesOn`)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from duckgraph.core.domain.query_words import (
    DAY, MONTHS, TYPE_WORDS, WHEN_DIGITS, asked_type, common_word, held, is_stored, says_when)
from duckgraph.core.domain.search_options import CALLER_LIMITS, SearchOptions, edge_filter, timed
from duckgraph.ports import ChunkRecord, EdgeRecord, GraphStore, NodeRecord, tokens
from duckgraph.ports.names import unaccented
from duckgraph.ports.text import WORD_RUN

if TYPE_CHECKING:
    from duckgraph.core.domain.retrieval import Reached  # an annotation only: retrieval imports this module

#: The most facts of one entity counted for `more_facts` (a hub's count stops there).
_FACTS_COUNTED = 10_000
#: Where a sentence of a query ends: its next word starts with a capital whatever it is.
_SENTENCE_BREAK = re.compile(r"[.!?:;\n]\s*$")
#: A date written with digits (2026-03-15, 2026-03, 15/03/2026): a day or a month, unlike a year or a time of day.
_DATE = re.compile(r"\d{4}[-/]\d{1,2}(?:[-/]\d{1,2})?|\d{1,2}/\d{1,2}(?:/\d{2,4})?")


class TypeCount(NamedTuple):
    """The entities of the type a query asks about (`type_count`): its name, how many the result holds, how many
    are stored."""

    type: str
    shown: int
    stored: int
    k_anchors: int | None  # the k_anchors that shows them all; None above the most a caller may ask for


def type_count(store: GraphStore, query_text: str, namespace: str, kept: list[NodeRecord]) -> TypeCount | None:
    """How many entities of the type the query asks for the entities of (`asked_type`) the result holds (`kept`),
    and how many the namespace stores, when it holds fewer: a search shows at most `k_anchors` of them ("How many
    incidents have we had?" showed 5 of 9, and a model counted 5). The type is named as most of its entities
    spell it. Counted only when the result holds one: most queries name no type."""
    asked = asked_type(query_text, TYPE_WORDS)  # a type is a word or two
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


class ChainGoesOn(NamedTuple):
    """A chain of facts of one relation type from an entity the query names that goes on past the last hop walked
    (`chains_go_on`): its type, the entity it starts from, the hops walked, the names of its entities at the last
    hop that have a fact of its type further on, how many entities those facts lead to, and the hops that shows
    them (None: more than a caller may ask for)."""

    type: str
    start: str
    past: int
    ends: list[str]
    more: int
    hops: int | None


def chains_go_on(
    store: GraphStore, namespace: str, options: SearchOptions, reached: dict[int, Reached], kept: list[Reached],
    records: dict[int, NodeRecord],
) -> list[ChainGoesOn]:
    """The chains of one relation type from an entity the query names (`Reached.chain`) that the result shows up to
    the last hop, where an entity at that hop has a fact of the chain's type, in its direction, to an entity the
    search did not reach: "What would break if we drop Redis?" showed auth-service and billing-service (DEPENDS_ON
    auth-service), not checkout-service (DEPENDS_ON billing-service) one hop further, and the list read as whole.
    One read of those entities' facts."""
    ends = {r.node_id: r for r in kept if r.chain is not None and r.hop == options.hops}
    if not ends:
        return []
    edge_ids, sources, targets, _ = store.neighbor_ends(list(ends), namespace, as_of=edge_filter(options),
                                                        limit=_FACTS_COUNTED)
    types = store.edge_types(edge_ids.tolist())
    seen = reached.keys() | records.keys()
    going_on: dict[int, set[int]] = {}  # chain end -> the entities its chain goes on to
    for edge_id, source, target in zip(edge_ids.tolist(), sources.tolist(), targets.tolist()):
        for here, there, forwards in ((source, target, True), (target, source, False)):
            if here in ends and there not in seen and ends[here].chain == (types.get(edge_id), forwards):
                going_on.setdefault(here, set()).add(there)
    chains: dict[tuple[int, str, bool], tuple[list[str], set[int]]] = {}
    for node_id, further in going_on.items():
        first = ends[node_id]
        while first.parent is not None and reached[first.parent].chain == ends[node_id].chain:
            first = reached[first.parent]
        found = chains.setdefault((first.parent, *ends[node_id].chain), ([], set()))
        found[0].append(records[node_id].name)
        found[1].update(further)
    hops = options.hops + 1 if options.hops < CALLER_LIMITS["hops"][1] else None
    return [ChainGoesOn(type_, records[start].name, options.hops, sorted(names), len(further), hops)
            for (start, type_, _), (names, further) in chains.items()]


def ids_not_stored(store: GraphStore, ids: dict[str, str], namespace: str, named: list[NodeRecord]) -> list[str]:
    """The ids the query names (`query_ids`: "INC-199", "getUserByName", "spring.datasource.password"), as written, that
    nothing stored holds (`held`): what a search finds for them holds a part only ("INC-142" for "INC-199",
    "spring.datasource.url" for "spring.datasource.password", as the keyword index holds an id both whole and by its
    parts), or is merely related ("getUserById": the vectors of two ids differing by a word are close).
    `named`: the entities the query names (`match_words`)."""
    return [written for written, word in ids.items() if not held(store, word, namespace, named)]


def names_not_stored(
    store: GraphStore, query_text: str, namespace: str, ids: dict[str, str], shown: list[str],
) -> list[str]:
    """The words the query writes like names (a capital: "Tokyo" of "Who is based in Tokyo?"), as written, that
    nothing stored holds in any form the keyword channel matches (`is_stored`: no entity's name, alias, type,
    description, observation or property value, no fact, no passage). What a search finds for such a question is
    about something else (the people based in other cities), and read as the answer it misleads. A sentence's
    first word has a capital whatever it is: it counts only when it is no common English word (`common_word`:
    "Kubernetes version?", not "List all teams"). Not the ids (`query_ids`, which `ids_not_stored` reports), words of a
    joined run or holding a digit, stop words, nor words that say when (`dates_not_applied`); nor one that a text
    the result shows (`shown`) holds inside a longer word: the keyword channel matches whole words, and a writer
    spells a name several ways ("Postgres" of a runbook that writes "PostgreSQL")."""
    found: list[str] = []
    for run in WORD_RUN.finditer(query_text):
        written, word = run[0], (tokens(run[0]) or [""])[0]
        if (not written[0].isupper() or not written.isalpha() or written in ids or not word or says_when(word)
                or is_stored(store, word, namespace)):
            continue
        if not (_sentence_start(query_text, run.start()) and common_word(word)):
            found.append(written)
    if found:
        texts = unaccented("\n".join(shown))
        found = [written for written in found if (tokens(written) or [""])[0] not in texts]
    return list(dict.fromkeys(found))


def shown_texts(records: dict[int, NodeRecord], edges: list[tuple[EdgeRecord, float]],
                passages: list[tuple[ChunkRecord, float]]) -> list[str]:
    """The texts a search result shows: its entities' names, aliases and descriptions, its facts' descriptions and
    its passages (the ranked next ones too)."""
    return [*(text for n in records.values() for text in (n.name, *n.aliases, n.description)),
            *(edge.description for edge, _ in edges), *(chunk.text for chunk, _ in passages)]


def _sentence_start(text: str, at: int) -> bool:
    """Whether the word at `at` of `text` starts it or a sentence of it, where a capital says nothing."""
    return not text[:at].strip() or _SENTENCE_BREAK.search(text[:at]) is not None


def dates_not_applied(query_text: str, options: SearchOptions, names: Sequence[str] = ()) -> list[str]:
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
        if not (word in MONTHS or WHEN_DIGITS.fullmatch(word) or DAY.fullmatch(word)):
            previous = None
            continue
        if previous is not None and not query_text[previous.end():run.start()].strip(" ,"):
            groups[-1].append(run)  # "June 10, 2025": one date
        else:
            groups.append([run])
        previous = run
    found = []
    for group in groups:
        months = [run for run in group if run[0].casefold() in MONTHS]
        if any(_DATE.fullmatch(run[0]) for run in group) or (months and (
                len(group) > 1 or (months[0][0][0].isupper() and not _sentence_start(query_text, months[0].start())))):
            found.append(query_text[group[0].start():group[-1].end()])
    named = {word for name in names for word in tokens(name)}
    return [date for date in found if not (date.casefold() in MONTHS and date.casefold() in named)]


def more_facts(
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
