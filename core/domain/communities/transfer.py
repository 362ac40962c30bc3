"""Written community reports across export and import. Communities are derived from the graph and built again
after an import; the reports a model or the host wrote cannot be derived, so an export carries them (with their
communities' members) and an import puts them back on the communities they were written for."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from duckgraph.ports.communities import CommunityRecord

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase


@dataclass(frozen=True)
class CarriedReport:
    """A written report as a file carries it: its community's level and members by node key."""

    namespace: str
    level: int
    keys: tuple[str, ...]
    title: str
    summary: str
    author: str
    stale: bool


def written_reports(kb: KnowledgeBase, namespace: str) -> Iterator[CommunityRecord]:
    """The namespace's communities whose report a model or the host wrote (and that still have a member: one
    with none could not be put back), as global_search shows them: stale when it says so, none it withholds
    (CommunityService.written_reports)."""
    return iter(kb.communities.written_reports(namespace))


def restore(kb: KnowledgeBase, carried: Sequence[CarriedReport]) -> tuple[int, list[str]]:
    """Build the communities of each namespace the reports are of, then put each report back (see
    `CommunityService.restore_written`). Returns how many were restored, and why the others were not."""
    if kb.community_detector is None:
        return 0, [f"{len(carried)} written community reports: no community detector is configured (install "
                   "graspologic-native), so no communities were built to put them on"]
    restored, problems = 0, []
    by_namespace: dict[str, list[CarriedReport]] = {}
    for report in carried:
        by_namespace.setdefault(report.namespace, []).append(report)
    for namespace, reports in sorted(by_namespace.items()):
        ids = _node_ids(kb, namespace, {key for r in reports for key in r.keys})
        records = [CommunityRecord(namespace=namespace, level=r.level, title=r.title, summary=r.summary,
                                   author=r.author, stale=r.stale,
                                   members=tuple(sorted(ids[key] for key in r.keys if key in ids)))
                   for r in reports]
        kb.communities.build(namespace)
        done = kb.communities.restore_written(namespace, records)
        restored += done
        if done < len(records):
            problems.append(f"{len(records) - done} written community reports of namespace {namespace!r}: no "
                            "community holds half their members any more; their communities have extractive "
                            "reports")
    return restored, problems


def _node_ids(kb: KnowledgeBase, namespace: str, keys: set[str]) -> Mapping[str, int]:
    return {node.key: node.id for node in kb.store.find_nodes(namespace, keys) if node.key in keys}
