"""Building a namespace's communities: hierarchical detection over the relations valid now (weighted by their
weight), extractive reports for the communities that have no report to keep, their vectors, one commit."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from duckgraph.core.domain.communities.freshness import drop_deleted, touched_since, touches
from duckgraph.core.domain.communities.hierarchy import communities_of, reuse_reports
from duckgraph.core.domain.communities.reports import EdgeTable, write_extractive
from duckgraph.core.domain.communities.vectors import set_report_vectors
from duckgraph.core.domain.ingest import Progress
from duckgraph.ports import ConfigError, StoreError
from duckgraph.ports.communities import (
    CommunityBuild,
    CommunityDetector,
    CommunityRecord,
)

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.ports import GraphStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildOutcome:
    namespace: str
    communities: int
    levels: int
    entities: int
    relations: int
    reports_written: int
    reports_kept: int
    #: Reports a model or the host wrote whose community no longer holds half their members: replaced.
    written_reports_dropped: int
    seconds: float
    #: Of the reports written: vectors derived from their members' (no model call), texts the model embedded.
    vectors_derived: int = 0
    texts_embedded: int = 0


def build(kb: KnowledgeBase, detector: CommunityDetector | None, namespace: str,
          progress: Progress | None = None, cancelled: Callable[[], bool] = lambda: False) -> BuildOutcome:
    """Detect the namespace's communities and store them with their reports, replacing the last build.
    `cancelled`: asked before the file is opened and before the commit (a background rebuild whose knowledge
    base closed meanwhile must not open it again)."""
    if detector is None:
        raise ConfigError("no community detector is configured: install duckgraph with graspologic-native "
                          "(pip install graspologic-native) and restart the server")
    if cancelled():
        raise StoreError("the community build was cancelled: the knowledge base closed")
    started = time.perf_counter()
    built_at = _now()
    kb.prepare_write()  # binds the file's embedder (another is refused): the reports are embedded with it
    store = kb.store
    report = progress or (lambda done, total, message: None)
    report(0, 4, "reading the relations valid now")
    arrays = store.edge_arrays(namespace, built_at)
    report(1, 4, f"detecting communities among {len(arrays[0])} relations")
    found = communities_of(detector.detect(arrays[1], arrays[2], arrays[3]), namespace)
    before = store.communities(namespace, vectors=True)
    drop_deleted(store, before)  # a report written from what was deleted since is not kept (hierarchy.withheld)
    dropped = reuse_reports(found, before, _changed_since(store, namespace, built_at))
    if dropped:
        log.warning("%d written community reports of namespace %r found no community holding half their members, "
                    "or had members, facts, passages or observations deleted since, and were replaced by extractive "
                    "ones: %s", len(dropped), namespace, "; ".join(c.title for c in dropped))
    # A stale report, written or not, gets this build's entities, facts and words: its readers and its next
    # author see the community as it is now (a written one keeps its title and summary).
    fresh = [c for c in found if c.embedding is None or c.stale]
    extractive = sum(c.author == "extractive" for c in fresh)
    report(2, 4, f"writing {extractive} extractive reports of {len(found)} communities")
    table = EdgeTable(arrays)
    central = write_extractive(store, fresh, table, found)
    derived, embedded = set_report_vectors(kb, fresh, before, central, table.weighted_degree())
    report(3, 4, "storing the communities")
    entities = len({node for c in found if c.leaf for node in c.members})
    if cancelled():
        raise StoreError("the community build was cancelled: the knowledge base closed")
    with kb.writing() as writer:
        writer.replace_communities(namespace, found, CommunityBuild(
            namespace=namespace, built_at=built_at, nodes=entities, edges=len(arrays[0]), detector=detector.id))
    report(4, 4, f"{len(found)} communities stored")
    return BuildOutcome(namespace=namespace, communities=len(found),
                        levels=len({c.level for c in found}), entities=entities, relations=len(arrays[0]),
                        reports_written=extractive, reports_kept=len(found) - extractive,
                        written_reports_dropped=len(dropped), seconds=round(time.perf_counter() - started, 3),
                        vectors_derived=derived, texts_embedded=embedded)


def _changed_since(store: GraphStore, namespace: str, now: datetime) -> Callable[[CommunityRecord], bool]:
    """Whether an entity or fact a report of the last build names changed since that build, by `now` (a planned
    end that passed is a change): its report, though its community kept its members, says what no longer holds.
    When too much changed to tell, every extractive report is written anew (as a first build writes them) and
    written ones are kept as they were."""
    last = store.community_build(namespace)
    touched = touched_since(store, namespace, last.built_at, now) if last is not None else {}
    if touched is None:
        return lambda report: report.author == "extractive"
    return lambda report: bool(touches(report, touched))


def _now() -> datetime:
    # Naive UTC, as the store keeps its times.
    return datetime.now(timezone.utc).replace(tzinfo=None)
