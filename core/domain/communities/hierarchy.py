"""From a detector's memberships to community records: one per (level, cluster), with its parent and members."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from duckgraph.core.domain.communities.reports import DELETED_COUNTS
from duckgraph.ports.communities import CommunityRecord, Membership


def communities_of(memberships: Sequence[Membership], namespace: str) -> list[CommunityRecord]:
    """Communities coarse to fine (largest first within a level); `ref` is the position, `parent_ref` the parent's.
    A community is a leaf when no finer one lies under it."""
    members: dict[tuple[int, int], list[int]] = {}
    parent_of: dict[tuple[int, int], tuple[int, int] | None] = {}
    for m in memberships:
        key = (m.level, m.cluster)
        members.setdefault(key, []).append(m.node)
        parent_of.setdefault(key, None if m.parent is None or m.level == 0 else (m.level - 1, m.parent))
    split = {parent for parent in parent_of.values() if parent is not None}
    keys = sorted(members, key=lambda key: (key[0], -len(members[key]), key[1]))
    ref = {key: position for position, key in enumerate(keys)}
    return [CommunityRecord(namespace=namespace, level=key[0], members=tuple(sorted(members[key])),
                            leaf=key not in split, ref=ref[key],
                            parent_ref=ref.get(parent_of[key]) if parent_of[key] else None)
            for key in keys]


def level_view(communities: Sequence[CommunityRecord], level: int) -> list[CommunityRecord]:
    """The partition at `level`: its communities, and the leaves of coarser levels (their members are split no
    finer), so that every node is in exactly one."""
    return [c for c in communities if c.level == level or (c.leaf and c.level < level)]


def reuse_reports(new: Sequence[CommunityRecord], old: Sequence[CommunityRecord],
                  changed: Callable[[CommunityRecord], bool] = lambda report: False) -> list[CommunityRecord]:
    """Carry reports over from the last build: a community with the same level and members keeps its report as it
    was, unless `changed` says an entity or fact it names changed since (an extractive one is then written anew, a
    written one carried stale); a written one (model, host) whose community changed goes, marked stale until it is
    written again, to the community of its level that now holds the most of its members, when that is at least
    half of them. One old report goes to one community at most and a community takes one at most: the pairs sharing
    the most members are matched first. Extractive reports of changed communities are not carried (the build writes
    them anew), nor written ones whose members were deleted (or merged away) since: their text may name them, and
    what was deleted must not read as known; nor reports of either kind citing a fact or passage deleted since, nor
    written ones an observation of whose named entities was deleted since, for the same reason (`withheld`).
    Returns the written reports that found no community."""
    intact = [c for c in old if not withheld(c)]  # nothing it names deleted since it was written
    exact = {(c.level, c.members): c for c in intact}
    taken: set[int] = set()  # id() of the old reports carried, and of the communities that took one
    for community in new:
        same = exact.get((community.level, community.members))
        if same is None:
            continue
        if not changed(same):
            _carry(community, same, same.stale)
        elif same.author != "extractive":
            _carry(community, same, True)
        else:
            continue
        taken.update((id(same), id(community)))
    holder = {(c.level, node): c for c in new if id(c) not in taken for node in c.members}
    written = [c for c in intact if c.author != "extractive" and id(c) not in taken]
    pairs = []
    for position, report in enumerate(written):
        shared: dict[int, list] = {}
        for node in report.members:
            community = holder.get((report.level, node))
            if community is not None:
                shared.setdefault(id(community), [community, 0])[1] += 1
        for community, count in shared.values():
            if 2 * count >= len(report.members):
                jaccard = count / (len(report.members) + len(community.members) - count)
                pairs.append((-count, -jaccard, community.ref, position, report, community))
    for *_, report, community in sorted(pairs, key=lambda pair: pair[:4]):
        if id(report) not in taken and id(community) not in taken:
            _carry(community, report, True)
            taken.update((id(report), id(community)))
    return [c for c in old if c.author != "extractive" and id(c) not in taken]


def _carry(community: CommunityRecord, report: CommunityRecord, stale: bool) -> None:
    community.title, community.summary, community.details = report.title, report.summary, report.details
    community.author, community.stale = report.author, report.stale or stale
    community.embedding = report.embedding


def withheld(community: CommunityRecord) -> bool:
    """Whether knowledge the report's text was written from was deleted since: members (deleted or merged away),
    facts or passages it cites, or observations its named entities had when it was written (`DELETED_COUNTS`, see
    freshness.drop_deleted). Its text may state them, and deleted knowledge must not be shown as known: the text
    is withheld until a build writes it again."""
    deleted = any(community.details.get(count) for count in DELETED_COUNTS)
    return len(community.members) < community.written_for or deleted
