"""Communities and their reports in the file (tables `communities`, `community_members`, `community_builds`), and
the reports' search index in memory (`ReportIndex`: their vectors and a BM25 index of their words).

Derived data: a build replaces a namespace's communities at once; the index is loaded from the table on the first
search after a change (thousands of rows: milliseconds), so it never runs ahead of a commit."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.keywords import KindIndex, Vocabulary
from duckgraph.ports import StoreError, terms
from duckgraph.ports.communities import CommunityBuild, CommunityRecord

np: Any = NumpyOnFirstUse(globals())

TABLES = """
CREATE TABLE communities (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    level INTEGER NOT NULL,
    parent_id BIGINT,
    leaf BOOLEAN NOT NULL DEFAULT true,
    size INTEGER NOT NULL DEFAULT 0,
    title VARCHAR NOT NULL DEFAULT '',
    summary VARCHAR NOT NULL DEFAULT '',
    details JSON NOT NULL DEFAULT '{}',
    author VARCHAR NOT NULL DEFAULT 'extractive',
    stale BOOLEAN NOT NULL DEFAULT false,
    embedding BLOB
);
CREATE INDEX communities_namespace ON communities (namespace);
CREATE TABLE community_members (community_id BIGINT NOT NULL, node_id BIGINT NOT NULL);
CREATE INDEX community_members_node ON community_members (node_id);
CREATE TABLE community_builds (
    namespace VARCHAR PRIMARY KEY, built_at TIMESTAMP NOT NULL, nodes BIGINT NOT NULL, edges BIGINT NOT NULL,
    detector VARCHAR NOT NULL
);
"""
_COLUMNS = "id, namespace, level, parent_id, leaf, size, title, summary, details, author, stale"


def edge_arrays(con: Any, namespace: str, now: datetime) -> tuple[Any, Any, Any, Any]:
    """Ids, sources, targets and weights of the namespace's edges valid at `now`."""
    found = con.execute(
        f"SELECT id, source_id, target_id, weight FROM edges WHERE namespace = $1 AND {sql.holds_at('$2')}",
        [namespace, now]).fetchnumpy()
    return tuple(np.asarray(found[column], dtype=np.int64) for column in ("id", "source_id", "target_id")) + (
        np.asarray(found["weight"], dtype=np.float64),)


def replace(con: Any, namespace: str, communities: Sequence[CommunityRecord], build: CommunityBuild) -> None:
    """The namespace's communities become `communities` (ids given here; parents by `parent_ref`), inside the
    caller's transaction."""
    import pyarrow as pa  # a slow import, which only a build needs

    drop(con, namespace)
    first = (con.execute("SELECT max(id) FROM communities").fetchone()[0] or 0) + 1
    for position, community in enumerate(communities):
        community.id = first + position
    by_ref = {c.ref: c.id for c in communities}
    for community in communities:
        community.parent = by_ref[community.parent_ref] if community.parent_ref is not None else None
    if communities:
        con.register("_incoming_communities", pa.table(_columns(communities)))
        try:
            con.execute(f"INSERT INTO communities SELECT {_COLUMNS}, embedding FROM _incoming_communities")
        finally:
            con.unregister("_incoming_communities")
        ids = np.concatenate([np.full(len(c.members), c.id, dtype=np.int64) for c in communities])
        nodes = np.concatenate([np.asarray(c.members, dtype=np.int64) for c in communities])
        con.register("_incoming_members", pa.table({"community_id": ids, "node_id": nodes}))
        try:
            con.execute("INSERT INTO community_members SELECT community_id, node_id FROM _incoming_members")
        finally:
            con.unregister("_incoming_members")
    con.execute("INSERT INTO community_builds VALUES (?, ?, ?, ?, ?)",
                [namespace, build.built_at, build.nodes, build.edges, build.detector])


def drop(con: Any, namespace: str) -> None:
    """Delete the namespace's communities, their members and reports, and its build, inside the caller's
    transaction."""
    con.execute("DELETE FROM community_members WHERE community_id IN (SELECT id FROM communities WHERE namespace = ?)",
                [namespace])
    con.execute("DELETE FROM communities WHERE namespace = ?", [namespace])
    con.execute("DELETE FROM community_builds WHERE namespace = ?", [namespace])


def _columns(communities: Sequence[CommunityRecord]) -> dict[str, Any]:
    import pyarrow as pa

    return {
        "id": pa.array([c.id for c in communities], pa.int64()),
        "namespace": pa.array([c.namespace for c in communities], pa.string()),
        "level": pa.array([c.level for c in communities], pa.int32()),
        "parent_id": pa.array([c.parent for c in communities], pa.int64()),
        "leaf": pa.array([c.leaf for c in communities], pa.bool_()),
        "size": pa.array([len(c.members) for c in communities], pa.int32()),
        "title": pa.array([c.title for c in communities], pa.string()),
        "summary": pa.array([c.summary for c in communities], pa.string()),
        "details": pa.array([json.dumps(c.details, ensure_ascii=False) for c in communities], pa.string()),
        "author": pa.array([c.author for c in communities], pa.string()),
        "stale": pa.array([c.stale for c in communities], pa.bool_()),
        "embedding": pa.array([_blob(c.embedding) for c in communities], pa.binary()),
    }


def _blob(vector: Any) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype="<f4").tobytes()


def save_reports(con: Any, communities: Sequence[CommunityRecord]) -> None:
    """Store the reports of existing communities (title, summary, details, author, stale, vector)."""
    import pyarrow as pa

    known = {row[0] for row in con.execute(
        "SELECT id FROM communities WHERE id IN (SELECT unnest(?::BIGINT[]))", [[c.id for c in communities]]
    ).fetchall()}
    missing = [c.id for c in communities if c.id not in known]
    if missing:
        raise StoreError(f"no community with id {missing[0]}: it was rebuilt since; list the communities again")
    # `size`: the members the report is written for (fewer now, after a deletion, than the build's).
    columns = {name: values for name, values in _columns(communities).items()
               if name in ("id", "size", "title", "summary", "details", "author", "stale", "embedding")}
    con.register("_incoming_reports", pa.table(columns))
    try:
        con.execute("UPDATE communities SET size = r.size, title = r.title, summary = r.summary, "
                    "details = r.details::JSON, author = r.author, stale = r.stale, embedding = r.embedding "
                    "FROM _incoming_reports r WHERE communities.id = r.id")
    finally:
        con.unregister("_incoming_reports")


def read(con: Any, namespace: str, ids: Sequence[int] | None = None, *, members: bool = True,
         vectors: bool = False) -> list[CommunityRecord]:
    """The namespace's communities (or those of `ids`), coarse to fine, with their members (ids) if asked.

    Deleting (or merging away) an entity deletes its memberships, while `size` stays the count of members the
    report was written for: a report whose community has fewer now is stale, and its key entities are only those
    still members (its title and summary may name the others until it is written again)."""
    where, params = "namespace = ?", [namespace]
    if ids is not None:
        where += " AND id IN (SELECT unnest(?::BIGINT[]))"
        params.append(list(ids))
    rows = con.execute(f"SELECT {_COLUMNS}, embedding, (SELECT count(*) FROM community_members m WHERE "
                       f"m.community_id = communities.id) FROM communities WHERE {where} ORDER BY level, id",
                       params).fetchall()
    held: dict[int, list[int]] = {}
    if members and rows:
        found = con.execute(
            "SELECT community_id, node_id FROM community_members WHERE community_id IN "
            "(SELECT id FROM communities WHERE " + where + ") ORDER BY community_id, node_id", params).fetchnumpy()
        for community, node in zip(found["community_id"].tolist(), found["node_id"].tolist()):
            held.setdefault(community, []).append(node)
    details = {row[0]: json.loads(row[8]) if row[8] else {} for row in rows}
    shrunk = {row[0] for row in rows if row[12] < row[5]}
    _keep_members_only(con, {community: details[community] for community in shrunk})
    return [CommunityRecord(
        id=row[0], namespace=row[1], level=row[2], parent=row[3], leaf=row[4], members=tuple(held.get(row[0], ())),
        title=row[6], summary=row[7], details=details[row[0]], author=row[9], stale=row[10] or row[0] in shrunk,
        written_for=row[5],
        embedding=np.frombuffer(row[11], dtype="<f4") if vectors and row[11] is not None else None,
    ) for row in rows]


def _keep_members_only(con: Any, details: dict[int, dict[str, Any]]) -> None:
    """Drop from each community's (id's) key entities those no longer among its members."""
    named = [(community, entity["name"]) for community, found in details.items()
             for entity in found.get("entities", [])]
    if not named:
        return
    present = set(con.execute(
        "SELECT DISTINCT m.community_id, n.name FROM community_members m JOIN nodes n ON n.id = m.node_id "
        "JOIN (SELECT unnest(?::BIGINT[]) AS community_id, unnest(?::VARCHAR[]) AS name) w "
        "ON w.community_id = m.community_id AND w.name = n.name", [[c for c, _ in named], [n for _, n in named]]
    ).fetchall())
    for community, found in details.items():
        found["entities"] = [e for e in found.get("entities", []) if (community, e["name"]) in present]


def build_of(con: Any, namespace: str) -> CommunityBuild | None:
    row = con.execute("SELECT built_at, nodes, edges, detector FROM community_builds WHERE namespace = ?",
                      [namespace]).fetchone()
    return None if row is None else CommunityBuild(namespace, row[0], row[1], row[2], row[3])


def changed_since(con: Any, namespace: str, since: datetime, now: datetime) -> int:
    """Nodes and edges written since `since`, and edges whose period began or ended since, by `now` (a planned end
    or start still to come changes nothing yet: the build counted the fact as it holds until then), members deleted
    since the build (the build counted the members of its leaves: each entity is in one), and relations of the build
    deleted since: the build counted those holding at `since`; of them, those still stored were written before it
    and either hold then as stored, or were written since (their row then may say otherwise: counted as present,
    and as written above)."""
    return con.execute(
        "SELECT (SELECT count(*) FROM nodes WHERE namespace = $1 AND updated_at > $2)"
        f" + (SELECT count(*) FROM edges WHERE namespace = $1 AND (updated_at > $2 OR {_passed('$2', '$3')}))"
        " + (SELECT coalesce(max(nodes), 0) FROM community_builds WHERE namespace = $1)"
        " - (SELECT count(*) FROM community_members m JOIN communities c ON c.id = m.community_id"
        "    WHERE c.namespace = $1 AND c.leaf)"
        " + greatest(0, (SELECT coalesce(max(edges), 0) FROM community_builds WHERE namespace = $1)"
        f"   - (SELECT count(*) FROM edges WHERE namespace = $1 AND created_at <= $2"
        f"      AND (updated_at > $2 OR ({sql.holds_at('$2')}))))", [namespace, since, now]).fetchone()[0]


def _passed(since: str, until: str) -> str:
    """SQL true for an edge whose period began or ended after `since` and by `until` (parameters): it held at one
    of the two moments and not at the other."""
    return (f"((valid_from > {since} AND valid_from <= {until}) "
            f"OR (valid_until > {since} AND valid_until <= {until}))")


def periods_passed(con: Any, namespace: str, since: datetime, until: datetime, limit: int) -> dict[int, datetime]:
    """Edge id -> when its period last began or ended after `since` and by `until`, at most `limit` edges."""
    return dict(con.execute(
        "SELECT id, CASE WHEN valid_until > $2 AND valid_until <= $3 THEN valid_until ELSE valid_from END "
        f"FROM edges WHERE namespace = $1 AND {_passed('$2', '$3')} ORDER BY id LIMIT $4",
        [namespace, since, until, limit]).fetchall())


def next_period_boundary(con: Any, namespace: str, after: datetime) -> datetime | None:
    """The first start or end of an edge's period after `after`: until then, time changes no fact that holds."""
    return con.execute(
        "SELECT least(min(valid_from) FILTER (WHERE valid_from > $2), "
        "min(valid_until) FILTER (WHERE valid_until > $2)) FROM edges WHERE namespace = $1",
        [namespace, after]).fetchone()[0]


def node_communities(con: Any, node_ids: Sequence[int], namespace: str) -> dict[int, list[tuple[int, int, str]]]:
    """Node id -> its communities as (id, level, title), coarse to fine."""
    found: dict[int, list[tuple[int, int, str]]] = {}
    if not node_ids:
        return found
    for node, community, level, title in con.execute(
            "SELECT m.node_id, c.id, c.level, c.title FROM community_members m JOIN communities c "
            "ON c.id = m.community_id WHERE c.namespace = ? AND m.node_id IN (SELECT unnest(?::BIGINT[])) "
            "ORDER BY c.level", [namespace, list(node_ids)]).fetchall():
        found.setdefault(node, []).append((community, level, title))
    return found


class ReportIndex:
    """The reports of each namespace, in memory, for `search`: their vectors (a normalised matrix) and their
    words (BM25, `KindIndex`). Loaded on the first search after a change (`forget`)."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[Any, Any, KindIndex, Vocabulary]] = {}
        self._builds: dict[str, CommunityBuild | None] = {}
        self._lock = threading.Lock()

    def forget(self, namespace: str | None = None) -> None:
        with self._lock:
            if namespace is None:
                self._held.clear()
                self._builds.clear()
            else:
                self._held.pop(namespace, None)
                self._builds.pop(namespace, None)

    def build(self, con: Any, namespace: str) -> CommunityBuild | None:
        """The namespace's last build, read once until forgotten: every search asks, to name its anchors'
        communities, and a query per search cost more than the rest of that naming."""
        with self._lock:
            if namespace not in self._builds:
                self._builds[namespace] = build_of(con, namespace)
            return self._builds[namespace]

    def _load(self, con: Any, namespace: str) -> tuple[Any, Any, KindIndex, Vocabulary]:
        rows = con.execute("SELECT id, title, summary, details, embedding FROM communities WHERE namespace = ? "
                           "ORDER BY id", [namespace]).fetchall()
        ids = np.asarray([r[0] for r in rows], dtype=np.int64)
        width = next((len(r[4]) // 4 for r in rows if r[4] is not None), 0)
        matrix = np.zeros((len(rows), width), dtype=np.float32)
        for i, row in enumerate(rows):
            if row[4] is not None and len(row[4]) == 4 * width:
                vector = np.frombuffer(row[4], dtype="<f4")
                matrix[i] = vector / max(float(np.linalg.norm(vector)), 1e-12)
        vocabulary = Vocabulary()
        words = KindIndex(vocabulary)
        words.add(ids.tolist(), [0] * len(rows),
                  [[vocabulary.id_of(t) for t in terms(_report_words(r[1], r[2], r[3]))] for r in rows])
        return ids, matrix, words, vocabulary

    def search(self, con: Any, namespace: str, vector: Any, query: str, candidates: Sequence[int]
               ) -> tuple[dict[int, float], dict[int, float]]:
        """Cosine similarity and BM25 score of each of `candidates` (ids) that has them."""
        with self._lock:
            held = self._held.get(namespace)
            if held is None:
                held = self._held[namespace] = self._load(con, namespace)
        ids, matrix, words, vocabulary = held
        wanted = np.asarray(list(candidates), dtype=np.int64)
        rows = np.searchsorted(ids, wanted)
        rows = rows[(rows < len(ids)) & (ids[np.minimum(rows, len(ids) - 1)] == wanted)] if len(ids) else rows[:0]
        similarity: dict[int, float] = {}
        if len(rows) and matrix.shape[1] == len(vector):
            query_vector = np.asarray(vector, dtype=np.float32)
            query_vector = query_vector / max(float(np.linalg.norm(query_vector)), 1e-12)
            similarity = dict(zip(ids[rows].tolist(), (matrix[rows] @ query_vector).tolist()))
        keep = set(wanted.tolist())
        keyword = {row: score for row, score in words.search(vocabulary.known(terms(query)), len(ids), 0)
                   if row in keep}
        return similarity, keyword


def _report_words(title: str, summary: str, details: str | None) -> str:
    found = json.loads(details) if details else {}
    names = " ".join(f"{e.get('name', '')} {e.get('type', '')}" for e in found.get("entities", []))
    return f"{title} {summary} {names} {' '.join(found.get('terms', []))}"
