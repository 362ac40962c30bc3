"""Restore: a snapshot (an export, or another file's contents) written into the file by natural keys, with its
times, provenance and vectors. Statements bind every column as one JSON array (`sql.rows`), so they cost the
same for ten rows or ten thousand."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.plugins.duckdb.periods import _overlap
from duckgraph.plugins.duckdb.schema import BEFORE_MARKS, name_keys
from duckgraph.plugins.duckdb.writes import Writer, mark_extracted
from duckgraph.ports import EdgeWrite, InvalidInputError, NodeRecord, Snapshot, WriteBatch, WriteSummary


def restore_snapshot(writer: Writer, snapshot: Snapshot, batch: WriteBatch, dimensions: int | None) -> WriteSummary:
    """Write the snapshot (`batch`: its documents, chunks, nodes and edges); the mirror is then loaded again."""
    con = writer.con
    now = sql.now()
    writer.replace_documents(batch, now)
    chunk_ids = writer.insert_chunks(batch, dimensions)  # with their `extracted_by`
    created, updated = _restore_nodes(writer, snapshot.nodes, now, dimensions)
    writer.mark_by_hand([n.id for n in snapshot.nodes if n.by_hand and n.id is not None], [])
    edges_created, edges_updated = _restore_edges(writer, snapshot.edges, now, dimensions)
    mentions, evidence = _restore_provenance(con, snapshot)
    _restore_marks(writer, snapshot)
    # Many rows at once: the mirror loads what changed from the file again instead of replaying the changes.
    reload = set()
    if batch.documents or batch.nodes or batch.edges or mentions or evidence:
        con.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", [now.isoformat()])
        reload.add("graph")
    if batch.documents or batch.nodes or batch.edges:
        reload.add("vectors")
    writer.changes.reload = frozenset(reload)
    return WriteSummary(
        nodes_created=created, nodes_updated=updated, edges_created=edges_created, edges_updated=edges_updated,
        documents_written=len(batch.documents), chunks_written=len(batch.chunks),
        node_ids={n.key: n.id for n in snapshot.nodes}, chunk_ids=chunk_ids, mentions_added=mentions,
        evidence_added=evidence,
    )


def _restore_nodes(
    writer: Writer, nodes: list[NodeRecord], now: datetime, dimensions: int | None
) -> tuple[int, int]:
    """Insert or replace nodes by (namespace, key), with their times, names and observations."""
    if not nodes:
        return 0, 0
    con = writer.con
    keys = [(n.namespace, n.key) for n in nodes]
    if len(set(keys)) != len(keys):
        raise InvalidInputError("a snapshot holds the same node twice")
    wanted, params = sql.rows(1, ns=("VARCHAR", [ns for ns, _ in keys]), key=("VARCHAR", [k for _, k in keys]))
    existing = {(ns, key): node_id for ns, key, node_id in con.execute(
        f"SELECT n.namespace, n.key, n.id FROM nodes n JOIN {wanted} ON n.namespace = w.ns AND n.key = w.key",
        params,
    ).fetchall()}
    new = [n for n in nodes if (n.namespace, n.key) not in existing]
    fresh = iter(r[0] for r in con.execute("SELECT nextval('node_ids') FROM range(?)", [len(new)]).fetchall())
    for node in nodes:
        node.id = existing[(node.namespace, node.key)] if (node.namespace, node.key) in existing else next(fresh)
    rows, params = sql.rows(
        1, id=("BIGINT", [n.id for n in nodes]), namespace=("VARCHAR", [n.namespace for n in nodes]),
        key=("VARCHAR", [n.key for n in nodes]), name=("VARCHAR", [n.name for n in nodes]),
        type=("VARCHAR", [n.type for n in nodes]), description=("VARCHAR", [n.description for n in nodes]),
        aliases=("VARCHAR[]", [list(n.aliases) for n in nodes]),
        properties=("VARCHAR", [json.dumps(n.properties) for n in nodes]),
        created_at=("TIMESTAMP", [n.created_at or now for n in nodes]),
        updated_at=("TIMESTAMP", [n.updated_at or now for n in nodes]),
        is_new=("BOOLEAN", [(n.namespace, n.key) not in existing for n in nodes]),
        keep_created=("BOOLEAN", [n.created_at is None for n in nodes]),
    )
    if new:
        con.execute(
            "INSERT INTO nodes SELECT id, namespace, key, name, type, description, aliases, properties::JSON, "
            f"created_at, updated_at FROM {rows} WHERE is_new",
            params,
        )
    if len(new) < len(nodes):
        con.execute(
            "UPDATE nodes SET name = w.name, type = w.type, description = w.description, aliases = w.aliases, "
            "properties = w.properties::JSON, updated_at = w.updated_at, "
            "created_at = CASE WHEN w.keep_created THEN nodes.created_at ELSE w.created_at END "
            f"FROM {rows} WHERE nodes.id = w.id AND NOT w.is_new",
            params,
        )
    ids, params = sql.rows(1, id=("BIGINT", [n.id for n in nodes]))
    con.execute(f"DELETE FROM node_names WHERE node_id IN (SELECT id FROM {ids})", params)
    names = [(n.namespace, key, n.id) for n in nodes for key in name_keys(n)]
    rows, params = sql.rows(1, ns=("VARCHAR", [a for a, _, _ in names]), key=("VARCHAR", [b for _, b, _ in names]),
                            id=("BIGINT", [c for _, _, c in names]))
    con.execute(f"INSERT INTO node_names SELECT ns, key, id FROM {rows}", params)
    writer.replace_observations([n for n in nodes if n.observations is not None], now)
    with_vectors = [n for n in nodes if n.embedding is not None]
    if with_vectors:
        writer.write_vectors("node", [n.id for n in with_vectors], [n.embedding for n in with_vectors],
                            dimensions)
    return len(new), len(nodes) - len(new)

def _restore_edges(
    writer: Writer, edges: list[EdgeWrite], now: datetime, dimensions: int | None
) -> tuple[int, int]:
    """Insert or replace edges: one that still holds replaces the one with the same ends and type that
    still holds; one that no longer holds, the one with the same ends, type and validity; else one replaces the
    stored period of its ends and type that starts at the same moment and overlaps it."""
    if not edges:
        return 0, 0
    con = writer.con
    keys = sorted({(e.namespace, k) for e in edges for k in (e.source_key, e.target_key)})
    wanted, params = sql.rows(1, ns=("VARCHAR", [ns for ns, _ in keys]), key=("VARCHAR", [k for _, k in keys]))
    id_of = {(ns, key): node_id for ns, key, node_id in con.execute(
        f"SELECT n.namespace, n.key, n.id FROM nodes n JOIN {wanted} ON n.namespace = w.ns AND n.key = w.key",
        params,
    ).fetchall()}
    for i, edge in enumerate(edges):
        for key in (edge.source_key, edge.target_key):
            if (edge.namespace, key) not in id_of:
                raise InvalidInputError(f"edges[{i}]: node {key!r} does not exist in namespace {edge.namespace!r}")
    ends = [(e.namespace, id_of[(e.namespace, e.source_key)], id_of[(e.namespace, e.target_key)], e.type)
            for e in edges]
    identities = [(*end, e.valid_until, e.valid_from if e.valid_until else None) for e, end in zip(edges, ends)]
    if len(set(identities)) != len(identities):
        raise InvalidInputError("a snapshot holds the same edge twice")
    wanted, params = sql.rows(1, ns=("VARCHAR", [a for a, _, _, _ in ends]), s=("BIGINT", [b for _, b, _, _ in ends]),
                           t=("BIGINT", [c for _, _, c, _ in ends]), type=("VARCHAR", [d for _, _, _, d in ends]))
    stored: dict[tuple[Any, ...], int] = {}
    starting: dict[tuple[Any, ...], list[tuple[int, Any]]] = {}  # (ns, source, target, type, valid_from) -> rows
    for edge_id, ns, source, target, type_, valid_from, valid_until in con.execute(
        "SELECT e.id, e.namespace, e.source_id, e.target_id, e.type, e.valid_from, e.valid_until FROM edges e "
        f"JOIN (SELECT DISTINCT * FROM {wanted}) d ON e.namespace = d.ns AND e.source_id = d.s "
        "AND e.target_id = d.t AND e.type = d.type ORDER BY e.id",
        params,
    ).fetchall():
        stored.setdefault((ns, source, target, type_, valid_until, valid_from if valid_until else None), edge_id)
        starting.setdefault((ns, source, target, type_, valid_from), []).append((edge_id, valid_until))
    # Else the stored period that starts at the same moment and overlaps it (ended since, or reopened elsewhere):
    # the snapshot's end replaces its end, rather than adding a second period that overlaps it (the importer
    # refuses any other overlap). Each stored row goes to one snapshot edge.
    claimed = {stored[identity] for identity in identities if identity in stored}
    targets: list[int | None] = []
    for identity, end, edge in zip(identities, ends, edges):
        if identity in stored:
            targets.append(stored[identity])
            continue
        same = next((edge_id for edge_id, until in starting.get((*end, edge.valid_from), [])
                     if edge_id not in claimed
                     and _overlap((edge.valid_from, edge.valid_until), (edge.valid_from, until))), None)
        if same is not None:
            claimed.add(same)
        targets.append(same)
    is_new = [target is None for target in targets]
    fresh = iter(r[0] for r in con.execute(
        "SELECT nextval('edge_ids') FROM range(?)", [is_new.count(True)]
    ).fetchall())
    ids = [next(fresh) if target is None else target for target in targets]
    rows, params = sql.rows(
        1, id=("BIGINT", ids), namespace=("VARCHAR", [e.namespace for e in edges]),
        source_id=("BIGINT", [s for _, s, _, _ in ends]), target_id=("BIGINT", [t for _, _, t, _ in ends]),
        type=("VARCHAR", [e.type for e in edges]), description=("VARCHAR", [e.description for e in edges]),
        weight=("DOUBLE", [1.0 if e.weight is None else e.weight for e in edges]),
        properties=("VARCHAR", [json.dumps(e.properties) for e in edges]),
        valid_from=("TIMESTAMP", [e.valid_from for e in edges]),
        valid_until=("TIMESTAMP", [e.valid_until for e in edges]),
        created_at=("TIMESTAMP", [e.created_at or now for e in edges]),
        updated_at=("TIMESTAMP", [e.updated_at or now for e in edges]),
        is_new=("BOOLEAN", is_new), keep_created=("BOOLEAN", [e.created_at is None for e in edges]),
    )
    created = is_new.count(True)
    if created:
        con.execute(
            "INSERT INTO edges SELECT id, namespace, source_id, target_id, type, description, weight, "
            f"properties::JSON, valid_from, valid_until, created_at, updated_at FROM {rows} WHERE is_new",
            params,
        )
    if created < len(edges):
        con.execute(
            "UPDATE edges SET description = w.description, weight = w.weight, properties = w.properties::JSON, "
            "valid_from = w.valid_from, valid_until = w.valid_until, updated_at = w.updated_at, "
            "created_at = CASE WHEN w.keep_created THEN edges.created_at ELSE w.created_at END "
            f"FROM {rows} WHERE edges.id = w.id AND NOT w.is_new",
            params,
        )
    vectors = {edge_id: e.embedding for edge_id, e in zip(ids, edges) if e.embedding is not None}
    if vectors:
        writer.write_vectors("edge", list(vectors), list(vectors.values()), dimensions)
    writer.mark_by_hand([], [edge_id for edge_id, e in zip(ids, edges) if e.by_hand])
    return created, len(edges) - created

#: The stored edge `e` a row `w` of `_edge_keys` names: one that still holds by its ends and type, one that no
#: longer holds by its period too.
_EDGE_OF_KEYS = (
    "LEFT JOIN nodes s ON s.namespace = w.ns AND s.key = w.s "
    "LEFT JOIN nodes t ON t.namespace = w.ns AND t.key = w.t "
    "LEFT JOIN edges e ON e.namespace = w.ns AND e.source_id = s.id AND e.target_id = t.id "
    "AND e.type = w.type AND e.valid_until IS NOT DISTINCT FROM w.valid_until "
    "AND (w.valid_until IS NULL OR e.valid_from IS NOT DISTINCT FROM w.valid_from)"
)


def _edge_keys(keys: list[tuple[Any, ...]], **more: tuple[str, list[Any]]) -> tuple[str, list[str]]:
    """Rows `w` of edges by natural keys, (namespace, source key, target key, type, valid_from, valid_until) first
    in each of `keys`, with the columns `more`."""
    return sql.rows(
        1, ns=("VARCHAR", [k[0] for k in keys]), s=("VARCHAR", [k[1] for k in keys]),
        t=("VARCHAR", [k[2] for k in keys]), type=("VARCHAR", [k[3] for k in keys]),
        valid_from=("TIMESTAMP", [k[4] for k in keys]), valid_until=("TIMESTAMP", [k[5] for k in keys]), **more,
    )


def _restore_marks(writer: Writer, snapshot: Snapshot) -> None:
    """Mark the stored nodes and edges the snapshot names by natural keys as written by hand."""
    con = writer.con
    nodes: list[int] = []
    if snapshot.nodes_by_hand:
        keys, params = sql.rows(1, ns=("VARCHAR", [n[0] for n in snapshot.nodes_by_hand]),
                                key=("VARCHAR", [n[1] for n in snapshot.nodes_by_hand]))
        nodes = [row[0] for row in con.execute(
            f"SELECT n.id FROM {keys} JOIN nodes n ON n.namespace = w.ns AND n.key = w.key", params).fetchall()]
    edges: list[int] = []
    if snapshot.edges_by_hand:
        keys, params = _edge_keys(snapshot.edges_by_hand)
        edges = [row[0] for row in con.execute(
            f"SELECT DISTINCT e.id FROM {keys} {_EDGE_OF_KEYS} WHERE e.id IS NOT NULL", params).fetchall()]
    writer.mark_by_hand(nodes, edges)


def _restore_provenance(con: Any, snapshot: Snapshot) -> tuple[int, int]:
    """Add the snapshot's mentions and evidence, resolved by natural keys; return how many were new."""
    mentions, mention_params = sql.rows(
        1, ns=("VARCHAR", [m[0] for m in snapshot.mentions]), key=("VARCHAR", [m[1] for m in snapshot.mentions]),
        doc=("VARCHAR", [m[2] for m in snapshot.mentions]), ordinal=("BIGINT", [m[3] for m in snapshot.mentions]),
    )
    evidence, evidence_params = _edge_keys(
        snapshot.evidence, doc=("VARCHAR", [e[6] for e in snapshot.evidence]),
        ordinal=("BIGINT", [e[7] for e in snapshot.evidence]),
    )
    chunk = "LEFT JOIN chunks c ON c.namespace = w.ns AND c.document_id = w.doc AND c.ordinal = w.ordinal"
    resolved = {
        "mentions": (
            f"SELECT c.id AS a, n.id AS b, w.* FROM {mentions} "
            f"LEFT JOIN nodes n ON n.namespace = w.ns AND n.key = w.key {chunk}",
            mention_params, len(snapshot.mentions),
        ),
        "edge_evidence": (
            f"SELECT min(e.id) AS a, any_value(c.id) AS b, any_value(w.s) AS s, any_value(w.t) AS t, "
            f"any_value(w.type) AS type, any_value(w.doc) AS doc, any_value(w.ordinal) AS ordinal FROM "
            f"(SELECT row_number() OVER () AS i, * FROM {evidence}) w {_EDGE_OF_KEYS} {chunk} GROUP BY w.i",
            evidence_params, len(snapshot.evidence),
        ),
    }
    added = []
    for table, (select, params, count) in resolved.items():
        if not count:
            added.append(0)
            continue
        missing = con.execute(f"SELECT * FROM ({select}) WHERE a IS NULL OR b IS NULL LIMIT 1", params).fetchone()
        if missing is not None:
            raise InvalidInputError(f"{table}: {missing[2:]} names a chunk, node or edge that does not exist")
        before = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        con.execute(f"INSERT OR IGNORE INTO {table} SELECT DISTINCT a, b FROM ({select})", params)
        added.append(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before)
        if table == "mentions" and snapshot.before_marks:
            # Its chunks carry no marks: one with entities linked was read, as the upgrade to schema 6 assumes.
            mark_extracted(con, [row[0] for row in con.execute(f"SELECT DISTINCT a FROM ({select})", params)
                                 .fetchall()], BEFORE_MARKS, unmarked_only=True)
    return added[0], added[1]
