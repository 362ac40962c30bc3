"""How fresh a namespace's communities are, and the background thread that rebuilds them once writes have changed
more than a share of the graph: never on the path of a search or a write, which only wake it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duckgraph.ports import DuckgraphError

if TYPE_CHECKING:
    from duckgraph.ports import GraphStore
    from duckgraph.ports.communities import CommunityBuild

log = logging.getLogger(__name__)

#: Rebuild once the nodes and relations written since the build exceed this share of those it covered.
REBUILD_SHARE = 0.2
#: A burst of writes wakes the thread once: it waits this long for the burst to end before it looks.
SETTLE_SECONDS = 2.0


@dataclass(frozen=True)
class Freshness:
    built_at: datetime
    changed: int  # nodes and relations written, ended or deleted since the build
    changed_share: float
    stale: bool  # more changed than the rebuild share
    rebuilding: bool


class Keeper:
    """Wakes after each commit (`written`), waits for the writes to settle, and rebuilds (through `rebuild`) the
    built namespaces whose changed share exceeds `share`, one at a time, on its own daemon thread."""

    def __init__(self, store: GraphStore, rebuild: Callable[[str], Any], *, share: float = REBUILD_SHARE,
                 settle: float = SETTLE_SECONDS) -> None:
        self._store = store
        self._rebuild = rebuild
        self.share = share
        self.settle = settle
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.rebuilding: set[str] = set()
        self.idle = threading.Event()  # set while no check or rebuild runs (tests wait on it)
        self.idle.set()
        self._writes = 0  # commits seen: the count of changes is read again only after one (or another build)
        self._removals = 0  # of those, commits that may have removed entities (see `removals`)
        self._counted: dict[str, tuple[tuple[datetime, int], int]] = {}

    def freshness(self, namespace: str, build: CommunityBuild | None = None) -> Freshness | None:
        """How fresh the namespace's build is (`build`: its record, when the caller has just read it)."""
        build = build or self._store.community_build(namespace)
        if build is None:
            return None
        key = (build.built_at, self._writes)
        held = self._counted.get(namespace)
        if held is None or held[0] != key:  # counting scans the graph's tables: not on every global_search
            held = self._counted[namespace] = (key, self._store.changed_since_build(namespace, build.built_at))
        changed = held[1]
        share = changed / max(build.nodes + build.edges, 1)
        return Freshness(built_at=build.built_at, changed=changed, changed_share=round(share, 4),
                         stale=share > self.share, rebuilding=namespace in self.rebuilding)

    @property
    def removals(self) -> int:
        """Commits seen so far that may have removed entities: what was read of the communities before the last
        one may be out of date (a deletion or a merge takes members out of them)."""
        return self._removals

    def written(self, removing: bool = False) -> None:
        """A write committed (`removing`: one that may have removed entities): look again once writes settle."""
        self._writes += 1
        self._removals += removing
        if self._stop.is_set():
            return
        self.idle.clear()
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="duckgraph-communities", daemon=True)
                self._thread.start()
        self._wake.set()

    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            while self._wake.is_set() and not self._stop.is_set():  # until no write came during the wait
                self._wake.clear()
                self._stop.wait(self.settle)
            if self._stop.is_set():
                break
            self._check()
            if not self._wake.is_set():
                self.idle.set()

    def _check(self) -> None:
        try:
            namespaces = self._store.namespaces()
            for namespace in namespaces:
                freshness = self.freshness(namespace)
                if freshness is None or not freshness.stale:
                    continue
                self.rebuilding.add(namespace)
                try:
                    self._rebuild(namespace)
                finally:
                    self.rebuilding.discard(namespace)
        except DuckgraphError as exc:  # e.g. the store closed under it: the next write looks again
            log.info("keeping the communities fresh failed: %s", exc)
        except Exception:
            log.exception("keeping the communities fresh failed")
