"""Global search: rank the community reports of one level by relevance to a query (vector and keyword channels,
fused by rank) and return the best within a token budget, each with its key entities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from duckgraph.core.domain.communities.hierarchy import level_view
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.ports.communities import CommunityRecord

if TYPE_CHECKING:
    from duckgraph.core.domain.model import CommunityReport

#: Reciprocal rank fusion's constant (the usual 60): a report first in one channel outranks one tenth in both.
RRF_K = 60
#: A report's rendering leaves out key entities beyond these.
ENTITIES_SHOWN = 6


def choose_level(communities: Sequence[CommunityRecord], token_budget: int, named: set[int]) -> int:
    """The finest level at which the reports the query needs all fit the budget together: those that `named` a
    word of it when some do, else all of them (a broad question: "what are the main themes?"). The coarsest when
    none fits: it gathers them into the fewest reports. Words, not vectors, say how many reports a query needs:
    the texts of one memory are all somewhat similar, so the count above a similarity floor means little."""
    levels = sorted({c.level for c in communities})
    fitting = [level for level in levels
               if _fits([c for c in level_view(communities, level) if not named or c.id in named], token_budget)]
    return fitting[-1] if fitting else levels[0]


def _fits(view: Sequence[CommunityRecord], token_budget: int) -> bool:
    used = 0
    for community in view:  # stops at the first report over the budget: a large view costs no more than a small
        used += estimate_tokens(render(community))
        if used > token_budget:
            return False
    return True


def is_specific(similarity: dict[int, float], keyword: dict[int, float], floor: float) -> bool:
    """Whether something answers the query in particular: a word of it matches, or a report is as similar as the
    embedder's relevance `floor` (0: none known, so similarity always ranks). Not so for "what are the main
    themes?"."""
    return bool(keyword) or not floor or max(similarity.values(), default=0.0) >= floor


def rank(view: Sequence[CommunityRecord], similarity: dict[int, float], keyword: dict[int, float],
         specific: bool) -> list[tuple[CommunityRecord, float]]:
    """The view's communities by relevance: reciprocal rank fusion of vector similarity and BM25 (only matches
    count), larger communities first on a tie; the largest first when the query is not `specific`."""
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


def render(community: CommunityRecord) -> str:
    names = ", ".join(f"{e['name']} ({e['type']})" for e in community.details.get("entities", [])[:ENTITIES_SHOWN])
    stale = " (stale)" if community.stale else ""
    return (f"## {community.title} [community {community.id}, level {community.level}, "
            f"{len(community.members)} entities]{stale}\n{community.summary}\nKey entities: {names}\n")


def within_budget(ranked: Sequence[tuple[CommunityRecord, float]], token_budget: int
                  ) -> tuple[list[tuple[CommunityRecord, float]], str, bool]:
    """The best reports whose renderings fit the budget together (at least the first), their text, and whether
    any was left out."""
    kept, texts, used = [], [], 0
    for community, score in ranked:
        text = render(community)
        cost = estimate_tokens(text)
        if kept and used + cost > token_budget:
            break
        kept.append((community, score))
        texts.append(text)
        used += cost
    return kept, "\n".join(texts), len(kept) < len(ranked)


def as_report(community: CommunityRecord, score: float = 0.0) -> CommunityReport:
    from duckgraph.core.domain.model import CommunityReport, KeyEntity

    return CommunityReport(
        id=community.id, level=community.level, size=len(community.members), title=community.title,
        summary=community.summary, author=community.author, stale=community.stale, score=round(score, 5),
        key_entities=[KeyEntity(name=e["name"], type=e["type"]) for e in community.details.get("entities", [])],
    )
