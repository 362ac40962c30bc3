"""Global search: rank the community reports of one level by relevance to a query (vector and keyword channels,
fused by rank) and return the best within a token budget, each with its key entities."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from duckgraph.core.domain.communities.hierarchy import level_view, withheld
from duckgraph.core.domain.communities.reports import (
    FACTS_DELETED,
    OBSERVATIONS_DELETED,
    PASSAGES_DELETED,
    title_of,
)
from duckgraph.core.domain.query_words import tells_time
from duckgraph.core.domain.render import NOTE_TOKENS, cut_to_tokens, estimate_tokens
from duckgraph.core.domain.search_options import TOOL_LIMITS
from duckgraph.ports.communities import CommunityRecord
from duckgraph.ports.text import one_line, stemmed, terms, tokens

if TYPE_CHECKING:
    from duckgraph.core.domain.model import CommunityReport

#: Reciprocal rank fusion's constant (the usual 60): a report first in one channel outranks one tenth in both.
RRF_K = 60
#: A report's rendering leaves out key entities beyond these.
ENTITIES_SHOWN = 6
#: The largest token_budget global_search takes: a note never asks for more.
MAX_BUDGET = TOOL_LIMITS["global_search"]["token_budget"][1]
#: How many times the budget asked the note may suggest, as the one that shows every report.
SUGGESTED_BUDGETS = 4
#: The summary shown for a report whose community lost members since it was written (see `withheld`).
WITHHELD = ("Not shown: entities this report was written about were deleted or merged away since, and its text may "
            "name them. It is written again at the next build of the communities (a running server starts one "
            "within seconds).")
#: The summaries shown for a report citing facts or passages deleted since it was written, or one whose named
#: entities lost observations since (see `withheld`).
WITHHELD_FACTS = ("Not shown: facts this report was written from were deleted since, and its text may state them. "
                  "It is written again at the next build of the communities (a running server starts one within "
                  "seconds).")
WITHHELD_PASSAGES = ("Not shown: passages this report was written from were deleted since (with their document), "
                     "and its text may state what they said. It is written again at the next build of the "
                     "communities (a running server starts one within seconds).")
WITHHELD_OBSERVATIONS = ("Not shown: observations of the entities this report names were deleted since, and its "
                         "text may state them. It is written again at the next build of the communities (a running "
                         "server starts one within seconds).")
_WITHHELD_BY = {FACTS_DELETED: WITHHELD_FACTS, PASSAGES_DELETED: WITHHELD_PASSAGES,
                OBSERVATIONS_DELETED: WITHHELD_OBSERVATIONS}


def _as_stored(community: CommunityRecord) -> CommunityRecord:
    return community


def choose_level(communities: Sequence[CommunityRecord], token_budget: int, named: set[int],
                 current: Callable[[CommunityRecord], CommunityRecord] = _as_stored) -> int:
    """The finest level at which the reports the query needs all fit the budget together: those that `named` a
    word of it when some do, else all of them (a broad question: "what are the main themes?"). The coarsest when
    none fits: it gathers them into the fewest reports. Words, not vectors, say how many reports a query needs:
    the texts of one memory are all somewhat similar, so the count above a similarity floor means little.
    `current`: a report as it is shown (see CommunityService._as_now)."""
    levels = sorted({c.level for c in communities})
    fitting = [level for level in levels
               if _fits([c for c in level_view(communities, level) if not named or c.id in named], token_budget,
                        current)]
    return fitting[-1] if fitting else levels[0]


def _fits(view: Sequence[CommunityRecord], token_budget: int,
          current: Callable[[CommunityRecord], CommunityRecord]) -> bool:
    used = 0
    for community in view:  # stops at the first report over the budget: a large view costs no more than a small
        used += estimate_tokens(render(current(community)))
        if used > token_budget:
            return False
    return True


#: Words of a question about the memory as a whole ("What are the main themes?", "Summarise what we know", "Give
#: me an overview"): a query of these and stop words only names no topic. One word besides ("the garden", "our
#: children") makes it about that topic, though no report may hold the word: its vector ranks the reports then.
#: Words, not a similarity floor: a report's vector is a mean of its entities', and a topic's own report is often
#: less similar to the question than an entity or a passage is (0.36 for "What do we know about the garden?" and
#: the allotment's report, under the default model's floor of 0.40), while a broad question can be as similar
#: to one report ("main themes" and a book club's, 0.31). English only: elsewhere similarity always ranks.
BROAD_WORDS = """theme topic subject area main key major central important overall general broad big picture
overview summary summarise summarize sum recap gist highlight everything anything something thing stuff whole
entire memory memories knowledge know known remember stored store hold contain cover include tell give show list
describe explain say talk mention discuss far please kind sort type common recurring information info data
content note record learn happen new recent lately go going""".split()
#: Words that say how to answer, not what about ("What are the main themes? Answer in detail please", "Briefly,
#: ..."): no more a topic than BROAD_WORDS are.
REQUEST_WORDS = """answer reply respond response detail detailed brief briefly concise thorough thoroughly please
thanks thank kindly""".split()
#: Words of a question about what changed in the memory, not about a topic ("What changed this month?", "What
#: happened last week?", "Anything new?"): no report says when things were written; recent_changes does.
CHANGE_WORDS = "change update add edit new happen latest recent recently lately".split()
#: The hint for such a question (search's text says it too, render.NOTHING_RELEVANT).
RECENT_CHANGES = ("For what changed recently, call recent_changes: it lists what was written, newest first (since and "
                  "until bound the span). These reports say what the memory holds, not when it was written.")


@functools.cache
def _broad_terms() -> frozenset[str]:
    return frozenset(stemmed(BROAD_WORDS + REQUEST_WORDS))


@functools.cache
def _change_terms() -> frozenset[str]:
    return frozenset(stemmed(CHANGE_WORDS))


def is_specific(query: str, keyword: dict[int, float]) -> bool:
    """Whether the query is about something in particular: a word of it matches a report, or it has a word that
    is not about the memory as a whole nor says how to answer (see BROAD_WORDS, REQUEST_WORDS). Not so for "what
    are the main themes?"."""
    return bool(keyword) or any(term not in _broad_terms() for term in terms(query))


def topical(query: str) -> str:
    """The query without its words about the memory as a whole or about how to answer (`is_specific`): what the
    keyword channel matches the reports by, so that "going" of "What's going on with the kids?" matches no report
    of the skill "Go". A word is what lies between spaces: a joined run ("main-theme") goes only when all its terms
    do."""
    return " ".join(word for word in query.split() if any(term not in _broad_terms() for term in terms(word)))


def asks_what_changed(query: str) -> bool:
    """Whether the query asks what changed in the memory: a word of CHANGE_WORDS, and besides it only words about
    the memory as a whole or how to answer (`is_specific`) and words that say when ("What changed this month?",
    "What happened last week?", "Anything new?"); not "What happened at work?", which is about work."""
    written = tokens(query)
    found = stemmed(written)
    return (any(term in _change_terms() for term in found)
            and all(term in _change_terms() or term in _broad_terms() or tells_time(word)
                    for word, term in zip(written, found)))


def rank(view: Sequence[CommunityRecord], similarity: dict[int, float], keyword: dict[int, float],
         specific: bool) -> list[tuple[CommunityRecord, float]]:
    """The view's communities by relevance: reciprocal rank fusion of vector similarity and BM25 (only matches
    count), larger communities first on a tie; the largest first when the query is not `specific` (a broad
    question: the broadest themes first)."""
    size = {c.id: len(c.members) for c in view}
    if not specific:
        ordered = sorted(view, key=lambda c: (-size[c.id], -similarity.get(c.id, 0.0), c.id))
        return [(c, similarity.get(c.id, 0.0)) for c in ordered]
    fused: dict[int, float] = {c.id: 0.0 for c in view}
    for channel in (similarity, keyword):
        for position, community in enumerate(sorted((i for i in channel if i in fused), key=lambda i: -channel[i])):
            fused[community] += 1.0 / (RRF_K + position + 1)
    ordered = sorted(view, key=lambda c: (-fused[c.id], -size[c.id], c.id))
    return [(c, fused[c.id]) for c in ordered]


def shown(community: CommunityRecord) -> tuple[str, str]:
    """The title and summary a reader gets: the report's, or, when `withheld`, a title of the key entities still
    members and a summary saying why there is no more."""
    if not withheld(community):
        return community.title, community.summary
    names = [e["name"] for e in community.details.get("entities", [])]
    why = WITHHELD if len(community.members) < community.written_for else next(
        text for key, text in _WITHHELD_BY.items() if community.details.get(key))
    return title_of(names), why


def render(community: CommunityRecord, changed: Sequence[str] = ()) -> str:
    """A report as the text shows it; `changed`: the entities it names that changed since it was built. Its title,
    summary and names each on their line (`one_line`): a line break in a summary the host wrote (from material a
    stored text may have steered) would start lines that read as the text's own ("## ...", another report)."""
    names = ", ".join(f"{e['name']} ({e['type']})" for e in community.details.get("entities", [])[:ENTITIES_SHOWN])
    stale = " (stale)" if community.stale or changed else ""
    title, summary = shown(community)
    return (f"## {one_line(title)} [community {community.id}, level {community.level}, "
            f"{len(community.members)} entities]{stale}\n{one_line(summary)}\nKey entities: {one_line(names)}\n")


def within_budget(ranked: Sequence[tuple[CommunityRecord, float]], token_budget: int, *,
                  changed: dict[int, list[str]] | None = None, closing: str = "", order: str = "most relevant",
                  current: Callable[[CommunityRecord], CommunityRecord] = _as_stored
                  ) -> tuple[list[tuple[CommunityRecord, float]], str, bool]:
    """The best reports whose renderings fit the budget together, their text, and whether any was left out or cut.
    `closing` (what the reader must know of the reports' freshness) ends the text and has its room first. When not
    all fit, a note says how many were shown and what budget shows them all; when not even the first fits, it is
    cut to the budget (the budget is the caller's) and the note says so. `current`: a report as it is shown (see
    CommunityService._as_now), asked only of those rendered: the reports returned are those."""
    changed = changed or {}
    closing_cost = _cost(closing) if closing else 0
    texts: list[str] = []
    total = closing_cost + NOTE_TOKENS  # what shows them all
    # Rendering stops past the largest budget worth naming: a few times the one asked (a memory of a thousand
    # communities would otherwise render them all at every question), and never past the largest taken.
    enough = min(MAX_BUDGET, SUGGESTED_BUDGETS * token_budget)
    for community, _ in ranked:
        if texts and total > enough:
            break
        texts.append(render(current(community), changed.get(community.id, ())))
        total += _cost(texts[-1])
    costs = [_cost(text) for text in texts]
    room = token_budget - closing_cost
    ranked = [(current(community), score) for community, score in ranked[:len(texts)]] + list(ranked[len(texts):])
    if len(texts) == len(ranked) and sum(costs) <= room:
        return ranked, _joined(texts, closing), False
    room -= NOTE_TOKENS
    count, used = 0, 0
    while count < len(texts) and used + costs[count] <= room:
        used += costs[count]
        count += 1
    more = (f"token_budget={total} shows them all" if len(texts) == len(ranked) and total <= MAX_BUDGET
            else f"a larger token_budget (up to {MAX_BUDGET}) shows more")
    if count:
        note = (f"({count} of {len(ranked)} reports shown, {order} first, within token_budget={token_budget}; "
                f"{more})")
        return list(ranked[:count]), _joined(texts[:count], note, closing), True
    cut = cut_to_tokens(texts[0], max(room, 1))
    left = f", {len(ranked) - 1} more reports not shown" if len(ranked) > 1 else ""
    note = f"(report {ranked[0][0].id} cut short to fit token_budget={token_budget}{left}; {more})"
    return list(ranked[:1]), _joined([cut], note, closing), True


def _joined(texts: Sequence[str], *closing: str) -> str:
    return "\n".join([*texts, *filter(None, closing)])


def _cost(text: str) -> int:
    return estimate_tokens(text) + 1  # and its line break


def as_report(community: CommunityRecord, score: float = 0.0, changed: Sequence[str] = ()) -> CommunityReport:
    from duckgraph.core.domain.model import CommunityReport, KeyEntity

    title, summary = shown(community)
    return CommunityReport(
        id=community.id, level=community.level, size=len(community.members), title=title,
        summary=summary, author=community.author, stale=community.stale or bool(changed), score=round(score, 5),
        key_entities=[KeyEntity(name=e["name"], type=e["type"]) for e in community.details.get("entities", [])],
    )
