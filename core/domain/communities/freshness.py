"""How fresh a namespace's communities are, and the background thread that rebuilds them once writes have changed
more than a share of the graph: never on the path of a search or a write, which only wake it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.communities.reports import (
    FACT_IDS,
    FACTS_DELETED,
    OBSERVATIONS_DELETED,
    OBSERVED,
    PASSAGE_IDS,
    PASSAGES_DELETED,
    WRITTEN_AT,
    observation_digest,
)
from duckgraph.core.domain.moments import now
from duckgraph.ports import DuckgraphError

if TYPE_CHECKING:
    from duckgraph.ports import GraphStore
    from duckgraph.ports.communities import CommunityBuild, CommunityRecord

log = logging.getLogger(__name__)

#: Rebuild once the nodes and relations written since the build exceed this share of those it covered.
REBUILD_SHARE = 0.2
#: A burst of writes wakes the thread once: it waits this long for the burst to end before it looks.
SETTLE_SECONDS = 2.0
#: The changes since a build read to tell which entities changed (`touched`); past these, no one report can be told
#: apart and the changed share speaks for them all.
CHANGES_READ = 5_000


@dataclass(frozen=True)
class Freshness:
    built_at: datetime
    changed: int  # nodes and relations written, ended or deleted since the build (a planned end once it passed)
    changed_share: float
    stale: bool  # more changed than the rebuild share
    rebuilding: bool


@dataclass(frozen=True)
class Unreported:
    """The entities with a relation valid now (to another entity) that no community of the last build holds: written
    or linked since it, no report names them, and a build puts each in a community. `apart`: some of them form a
    group with no relation to a member, a topic of its own that no report speaks of, however small. `example`: the
    one of them with the most relations among those."""
    ids: tuple[int, ...] = ()
    apart: bool = False
    example: int | None = None


class Keeper:
    """Wakes after each commit (`written`), waits for the writes to settle, and rebuilds (through `rebuild`) the
    built namespaces whose changed share exceeds `share`, one at a time, on its own daemon thread."""

    def __init__(self, store: GraphStore, rebuild: Callable[[str], Any], *, share: float = REBUILD_SHARE,
                 settle: float = SETTLE_SECONDS, shrunk: Callable[[str], bool] = lambda namespace: False,
                 members: Callable[[str], set[int]] = lambda namespace: set()) -> None:
        self._store = store
        self._rebuild = rebuild
        self._shrunk = shrunk  # whether a report of the namespace is withheld: what it was written from was deleted
        self._members = members  # the entities of the namespace's communities (of its last build) now
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
        self._moments: dict[str, tuple[tuple[datetime, int], datetime, datetime | None]] = {}
        self._counted: dict[str, tuple[tuple[datetime, int, datetime], int]] = {}
        self._touched: dict[str, tuple[tuple[datetime, int, datetime], Touched | None]] = {}
        self._unreported: dict[str, tuple[tuple[datetime, int, datetime], Unreported]] = {}

    def freshness(self, namespace: str, build: CommunityBuild | None = None) -> Freshness | None:
        """How fresh the namespace's build is (`build`: its record, when the caller has just read it)."""
        build = build or self._store.community_build(namespace)
        if build is None:
            return None
        key = self.key(namespace, build)
        held = self._counted.get(namespace)
        if held is None or held[0] != key:  # counting scans the graph's tables: not on every global_search
            held = self._counted[namespace] = (key, self._store.changed_since_build(namespace, build.built_at,
                                                                                   key[2]))
        changed = held[1]
        share = changed / max(build.nodes + build.edges, 1)
        return Freshness(built_at=build.built_at, changed=changed, changed_share=round(share, 4),
                         stale=share > self.share, rebuilding=namespace in self.rebuilding)

    def touched(self, namespace: str, build: CommunityBuild) -> Touched | None:
        """The entities changed since the build, by id with their names now: those updated (a new description,
        name or property) and both ends of each fact updated or ended, or whose planned start or end passed; what a
        report naming them may have out of date. None when more changed than `CHANGES_READ` (then the changed share
        says the reports are stale)."""
        key = self.key(build.namespace, build)
        held = self._touched.get(build.namespace)
        if held is None or held[0] != key:
            found = touched_since(self._store, build.namespace, build.built_at, key[2]) if self.freshness(
                build.namespace, build).changed else Touched()  # nothing written since: no read of the changes
            held = self._touched[build.namespace] = (key, found)
        return held[1]

    def unreported(self, namespace: str, build: CommunityBuild) -> Unreported:
        """The entities no report holds though a build would (see `Unreported`), read again after a write."""
        key = self.key(namespace, build)
        held = self._unreported.get(namespace)
        if held is None or held[0] != key:
            found = unreported(self._store, namespace, self._members(namespace), key[2]) if self.freshness(
                namespace, build).changed else Unreported()  # nothing written since: the build holds them all
            held = self._unreported[namespace] = (key, found)
        return held[1]

    def due(self, namespace: str, build: CommunityBuild) -> bool:
        """Whether the namespace's communities are to be rebuilt: more changed than the share; or a report is
        withheld, as knowledge it was written from was deleted (it must leave the reports soon, whatever the share:
        global_search withholds such texts meanwhile); or entities written since form a group apart (a new topic,
        which no report speaks of however small it is: written below the share, it would stay out of every answer
        until the share is reached)."""
        freshness = self.freshness(namespace, build)
        return freshness is not None and (freshness.stale or self._shrunk(namespace)
                                          or self.unreported(namespace, build).apart)

    def pending(self, namespace: str, build: CommunityBuild) -> bool:
        """Whether a rebuild of the namespace runs, or is due and this process's thread will start it once writes
        settle (it was woken and has not looked yet)."""
        return namespace in self.rebuilding or (
            not self.idle.is_set() and not self.stopped() and self.due(namespace, build))

    def key(self, namespace: str, build: CommunityBuild) -> tuple[datetime, int, datetime]:
        """What the changes since `build` depend on: the build, the commits seen, and the moment they are counted
        at. That moment is now, taken again after a commit or once a relation's period has begun or ended since
        (a planned end that passed is a change, as a write ending the fact would be): between those, time changes
        nothing that holds, and the counts stay read. Such a passed end wakes the thread, as a write does."""
        held = self._moments.get(namespace)
        written = (build.built_at, self._writes)
        moment = now()
        if held is None or held[0] != written or (held[2] is not None and moment >= held[2]):
            if held is not None and held[0] == written:
                self.wake()  # no write came: a rebuild may be due all the same
            held = self._moments[namespace] = (written, moment, self._store.next_period_boundary(namespace, moment))
        return (*held[0], held[1])

    @property
    def writes(self) -> int:
        """Commits seen so far: a fact a report cites may have been deleted by the last one."""
        return self._writes

    @property
    def removals(self) -> int:
        """Commits seen so far that may have removed entities: what was read of the communities before the last
        one may be out of date (a deletion or a merge takes members out of them)."""
        return self._removals

    def written(self, removing: bool = False) -> None:
        """A write committed (`removing`: one that may have removed entities): look again once writes settle."""
        self._writes += 1
        self._removals += removing
        self.wake()

    def wake(self) -> None:
        """Look at every built namespace once writes settle, and rebuild those due: after a write, and once when a
        server starts (the file may have been written while none ran: an import, another process)."""
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
                build = self._store.community_build(namespace)
                if build is None or not self.due(namespace, build):
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


class Touched(dict[int, str]):
    """Entity id -> its name now, of the entities changed since a moment (see `Keeper.touched`); `last`: when each
    last changed (naive UTC), so that a report written after a change is not taken for one written before it."""

    def __init__(self, names: dict[int, str] | None = None, last: dict[int, datetime] | None = None) -> None:
        super().__init__(names or {})
        self.last = last or {}


def touched_since(store: GraphStore, namespace: str, since: datetime, until: datetime) -> Touched | None:
    """See `Keeper.touched` (a build asks too, of the build it replaces); `until`: the moment the facts that began
    or ended with no write (a planned period's start or end) are taken by."""
    changes = store.changes(namespace, since, None, CHANGES_READ)
    room = CHANGES_READ - len(changes)
    passed = store.periods_passed(namespace, since, until, room) if room > 0 else {}
    if len(passed) >= room:
        return None
    last: dict[int, datetime] = {}
    at_edge: dict[int, datetime] = dict(passed)
    for change in changes:
        if change.kind == "entity updated" and change.node_id is not None:
            last[change.node_id] = max(change.at, last.get(change.node_id, change.at))
        elif change.kind in ("fact updated", "fact ended") and change.edge_id is not None:
            at_edge[change.edge_id] = max(change.at, at_edge.get(change.edge_id, change.at))
    for edge in store.get_edges(at_edge) if at_edge else ():
        for end in (edge.source_id, edge.target_id):
            last[end] = max(at_edge[edge.id], last.get(end, at_edge[edge.id]))
    if not last:
        return Touched()
    nodes = store.get_nodes(set(last))
    return Touched({node.id: node.name for node in nodes}, {node.id: last[node.id] for node in nodes})


def unreported(store: GraphStore, namespace: str, members: set[int], at: datetime) -> Unreported:
    """See `Unreported`: from the relations valid at `at` (those a build reads) and the build's `members` now."""
    import numpy as np  # the store's arrays are numpy's

    _, sources, targets, _ = store.edge_arrays(namespace, at)
    other = sources != targets  # a relation to itself puts an entity in no community (the detector skips it)
    sources, targets = sources[other], targets[other]
    known = np.fromiter(members, dtype=np.int64, count=len(members))
    source_out, target_out = ~np.isin(sources, known), ~np.isin(targets, known)
    ends = np.concatenate([sources[source_out], targets[target_out]])
    if not len(ends):
        return Unreported()
    left, degree = np.unique(ends, return_counts=True)
    # Groups of them, joined by the relations between two of them; one is apart when none of its entities has a
    # relation to a member.
    group = {node: node for node in left.tolist()}

    def root(node: int) -> int:
        while group[node] != node:
            group[node] = node = group[group[node]]
        return node

    both = source_out & target_out
    for source, target in zip(sources[both].tolist(), targets[both].tolist()):
        group[root(source)] = root(target)
    linked = {root(node) for node in (sources[source_out & ~target_out].tolist()
                                      + targets[target_out & ~source_out].tolist())}
    apart = any(root(node) not in linked for node in group)
    return Unreported(tuple(left.tolist()), apart, int(left[np.argmax(degree)]))


def written_at(community: CommunityRecord) -> datetime | None:
    """When a model or the host wrote the report (naive UTC; None: an extractive one, or one written before the
    time was kept, as of its build)."""
    stamp = community.details.get(WRITTEN_AT)
    return datetime.fromisoformat(stamp) if stamp else None


def touches(community: CommunityRecord, touched: Touched) -> list[str]:
    """The names (now) of the changed entities among those the community's report names (by id; by name in a
    report built before ids were kept), changed after the report was written: a report written again after a
    change (save_community_report, `communities write`) was written from what holds now."""
    named = community.details.get("entities", [])
    ids = {e["id"] for e in named if "id" in e}
    names = {e["name"] for e in named if "id" not in e}
    since = written_at(community)
    return [name for node, name in touched.items() if (node in ids or name in names)
            and (since is None or touched.last[node] > since)]


def drop_deleted(store: GraphStore, communities: Sequence[CommunityRecord]) -> None:
    """Take what the reports were written from and was deleted since out of their details, counting it: the facts
    they cite (by id, `FACTS_DELETED`), the passages they quote (by id, `PASSAGES_DELETED`: deleting a document
    deletes its passages) and, of a written one, the observations its named entities had when it was written (by
    digest, `OBSERVATIONS_DELETED`). Such a report is stale and its text withheld until a build writes it again
    (hierarchy.withheld), as it may state them. Lookups of the cited ids in the store's graph in memory. Only as
    read: the counts are never stored with a report (see CommunityService.save_written)."""
    _drop_cited(communities, FACT_IDS, "facts", FACTS_DELETED, store.edge_types)
    _drop_cited(communities, PASSAGE_IDS, "passages", PASSAGES_DELETED, store.chunk_documents)
    _drop_observed(store, communities)


def _drop_cited(communities: Sequence[CommunityRecord], ids_key: str, texts_key: str, count_key: str,
                present: Callable[[set[int]], dict[int, Any]]) -> None:
    """Take the texts (`texts_key`) whose ids (`ids_key`, in their order) `present` no longer finds out of the
    reports' details, counting them in `count_key`."""
    cited = {item for c in communities for item in c.details.get(ids_key, ())}
    if not cited:
        return
    found = present(cited).keys()
    for community in communities:
        ids = community.details.get(ids_key, ())
        if found >= set(ids):
            continue
        kept = [position for position, item in enumerate(ids) if item in found]
        texts = community.details.get(texts_key, [])
        community.details = {**community.details, texts_key: [texts[p] for p in kept if p < len(texts)],
                             ids_key: [ids[p] for p in kept],
                             count_key: community.details.get(count_key, 0) + len(ids) - len(kept)}
        community.stale = True


def _drop_observed(store: GraphStore, communities: Sequence[CommunityRecord]) -> None:
    """Take the observations deleted since a written report was written out of its `OBSERVED`, counting them in
    `OBSERVATIONS_DELETED` (by digest: one deleted and written again with the same text is there again for the
    next read of the reports)."""
    written = [c for c in communities if c.details.get(OBSERVED)]
    if not written:
        return
    now = store.get_observations({int(node) for c in written for node in c.details[OBSERVED]})
    held = {str(node): {observation_digest(text) for text in texts} for node, texts in now.items()}
    for community in written:
        seen = community.details[OBSERVED]
        kept = {node: [d for d in digests if d in held.get(node, ())] for node, digests in seen.items()}
        lost = sum(map(len, seen.values())) - sum(map(len, kept.values()))
        if lost:
            community.details = {**community.details, OBSERVED: kept,
                                 OBSERVATIONS_DELETED: community.details.get(OBSERVATIONS_DELETED, 0) + lost}
            community.stale = True
