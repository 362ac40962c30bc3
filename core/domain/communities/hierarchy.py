"""From a detector's memberships to community records: one per (level, cluster), with its parent and members."""

from __future__ import annotations

from collections.abc import Sequence

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


def reuse_reports(new: Sequence[CommunityRecord], old: Sequence[CommunityRecord], *, overlap: float = 0.5) -> None:
    """Carry reports over from the last build: a community with the same members keeps its report as it was; a
    written one (model, host) of a community that changed but still shares `overlap` of its members (Jaccard) is
    kept, marked stale, until it is written again. Extractive reports of changed communities are not carried."""
    exact = {(c.level, c.members): c for c in old}
    by_node: dict[int, list[CommunityRecord]] = {}
    for c in old:
        if c.author != "extractive":
            for node in c.members:
                by_node.setdefault(node, []).append(c)
    for community in new:
        same = exact.get((community.level, community.members))
        stale = False
        if same is None:
            same, stale = _closest(community, by_node, overlap), True
        if same is not None:
            community.title, community.summary, community.details = same.title, same.summary, same.details
            community.author, community.stale = same.author, same.stale or stale
            community.embedding = same.embedding


def _closest(community: CommunityRecord, by_node: dict[int, list[CommunityRecord]],
             overlap: float) -> CommunityRecord | None:
    members = set(community.members)
    seen = {id(c): c for node in members for c in by_node.get(node, ()) if c.level == community.level}
    best, best_score = None, overlap
    for candidate in seen.values():
        shared = len(members.intersection(candidate.members))
        score = shared / (len(members) + len(candidate.members) - shared)
        if score >= best_score:
            best, best_score = candidate, score
    return best
