"""Reads answered by SQL: listings, counts, documents, and passages whose texts are not held in
memory. (What a search reads on its path comes from the mirror instead; see `DuckDBStore`.) Each takes the
connection; the store calls them under its lock."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.plugins.duckdb.deletions import CREATED_TYPE, observations_label
from duckgraph.plugins.duckdb.schema import LABEL_CHARS
from duckgraph.ports import ChangeRecord, ChunkRecord, DocumentRecord, EdgeRecord, NodeRecord
from duckgraph.ports.text import entity_header

_NODE_COLUMNS = "id, namespace, key, name, type, description, aliases, properties, created_at, updated_at"
_EDGE_COLUMNS = (
    "id, source_id, target_id, type, description, weight, properties, valid_from, valid_until, created_at, updated_at"
)
_DOCUMENT_COLUMNS = "id, namespace, text, title, metadata, created_at, time"
#: Up to this many ids, rows are fetched by one probe of the primary key each (UNION ALL of `id = ...`): DuckDB
#: answers `id IN (list)` with a scan of the whole table.
_POINT_LOOKUPS = 64


def list_nodes(con: Any, namespace: str, offset: int, limit: int) -> list[NodeRecord]:
    rows = con.execute(
        f"SELECT {_NODE_COLUMNS} FROM nodes WHERE namespace = $1 ORDER BY id LIMIT $2 OFFSET $3",
        [namespace, limit, offset],
    ).fetchall()
    return [_node(row) for row in rows]


def list_edges(con: Any, namespace: str, offset: int, limit: int, include_expired: bool) -> list[EdgeRecord]:
    holding = "" if include_expired else f"AND {sql.holds_at('$4')} "
    rows = con.execute(
        f"SELECT {_EDGE_COLUMNS} FROM edges WHERE namespace = $1 {holding}"
        "ORDER BY id LIMIT $2 OFFSET $3",
        [namespace, limit, offset] + ([] if include_expired else [sql.now()]),
    ).fetchall()
    return [_edge(row) for row in rows]


def edges_from(con: Any, node_ids: list[int], namespace: str, limit: int) -> list[EdgeRecord]:
    """`DuckDBStore.edges_from`: edges that hold now and start at one of `node_ids`, by source id then id."""
    if not node_ids:
        return []
    rows = con.execute(
        f"SELECT {_EDGE_COLUMNS} FROM edges WHERE namespace = $1 AND {sql.holds_at('$4')} "
        f"AND source_id IN (SELECT unnest({sql.JSON_IDS % 2})) ORDER BY source_id, id LIMIT $3",
        [namespace, sql.json_list(node_ids), limit, sql.now()],
    ).fetchall()
    return [_edge(row) for row in rows]


def documents(con: Any, ids: Iterable[str], namespace: str) -> list[DocumentRecord]:
    ids = list(set(ids))
    if not ids:
        return []
    if len(ids) <= _POINT_LOOKUPS:  # (what a search asks): index probes, not a scan of the table
        rows = con.execute(" UNION ALL ".join(
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE namespace = $1 AND id = ${i + 2}"
            for i in range(len(ids))), [namespace, *ids]).fetchall()
    else:
        rows = con.execute(
            f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE namespace = $1 AND id IN "
            f"(SELECT unnest({sql.JSON_NAMES % 2}))",
            [namespace, sql.json_list(ids)],
        ).fetchall()
    return [_document(row) for row in rows]


def chunks(con: Any, ids: list[int]) -> list[ChunkRecord]:
    """The chunks of the given (distinct) ids, read from the file."""
    if len(ids) <= _POINT_LOOKUPS:  # (what a search asks): index probes, not a scan of the table
        rows = con.execute(" UNION ALL ".join(
            f"SELECT id, document_id, ordinal, text, section FROM chunks WHERE id = {i}" for i in ids)).fetchall()
    else:
        rows = con.execute(
            "SELECT id, document_id, ordinal, text, section FROM chunks "
            f"WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))",
            [sql.json_list(ids)],
        ).fetchall()
    return [ChunkRecord(id=r[0], document_id=r[1], ordinal=r[2], text=r[3], section=r[4] or "") for r in rows]


def extraction_marks(con: Any, ids: list[int]) -> dict[int, str]:
    """`DuckDBStore.extraction_marks`: who read each of the chunks `ids` that were read."""
    if not ids:
        return {}
    return dict(con.execute(
        "SELECT id, extracted_by FROM chunks WHERE extracted_by IS NOT NULL "
        f"AND id IN (SELECT unnest({sql.JSON_IDS % 1}))", [sql.json_list(ids)]).fetchall())


def document_chunks(con: Any, namespace: str, document_ids: Iterable[str]) -> list[ChunkRecord]:
    ids = list(dict.fromkeys(document_ids))
    if not ids:
        return []
    rows = con.execute(
        "SELECT id, document_id, ordinal, text, section FROM chunks WHERE namespace = $1 AND document_id IN "
        f"(SELECT unnest({sql.JSON_NAMES % 2})) ORDER BY list_position({sql.JSON_NAMES % 2}, document_id), ordinal",
        [namespace, sql.json_list(ids)],
    ).fetchall()
    return [ChunkRecord(id=r[0], document_id=r[1], ordinal=r[2], text=r[3], section=r[4] or "") for r in rows]


def document_chunk_window(con: Any, namespace: str, document_id: str, start: int, stop: int
                          ) -> tuple[list[ChunkRecord], int]:
    """`GraphStore.document_chunk_window`: the rows of the window and a count, both on the (namespace, document_id)
    index, never the texts of the rest of the document."""
    where = "FROM chunks WHERE namespace = $1 AND document_id = $2"
    [(total,)] = con.execute(f"SELECT count(*) {where}", [namespace, document_id]).fetchall()
    rows = con.execute(f"SELECT id, document_id, ordinal, text, section {where} AND ordinal >= $3 AND ordinal < $4 "
                       "ORDER BY ordinal", [namespace, document_id, start, stop]).fetchall() if total else []
    return [ChunkRecord(id=r[0], document_id=r[1], ordinal=r[2], text=r[3], section=r[4] or "") for r in rows], total


def stats(con: Any, namespace: str | None) -> dict[str, Any]:
    where = "" if namespace is None else "WHERE namespace = $1"
    params = [] if namespace is None else [namespace]
    counts = {
        table: con.execute(f"SELECT count(*) FROM {table} {where}", params).fetchone()[0]
        for table in ("nodes", "documents", "chunks")
    }
    # Edges and their types count the same edges: those that hold now, as search shows them (not ended ones,
    # nor those that start later).
    holding = f"{where or 'WHERE'} {'AND' if where else ''} {sql.holds_at(f'${len(params) + 1}')}"
    edge_params = [*params, sql.now()]
    counts["edges"] = con.execute(f"SELECT count(*) FROM edges {holding}", edge_params).fetchone()[0]
    # Every node type: the domain counts the spellings of one type (case, number) together before it keeps 50.
    node_types = dict(con.execute(
        f"SELECT type, count(*) FROM nodes {where} GROUP BY type ORDER BY count(*) DESC, type", params
    ).fetchall())
    edge_types = dict(con.execute(
        f"SELECT type, count(*) FROM edges {holding} GROUP BY type ORDER BY count(*) DESC LIMIT 50", edge_params
    ).fetchall())
    return {**counts, "node_types": node_types, "edge_types": edge_types}


def relation_counts(con: Any, at: datetime) -> dict[str, int]:
    """All the edges of every namespace, and those ended by `at` (a naive UTC time): see GraphStore."""
    stored, ended = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE valid_until IS NOT NULL AND valid_until <= $1) FROM edges", [at]
    ).fetchone()
    return {"edges": int(stored), "edges_ended": int(ended)}


def type_examples(con: Any, namespace: str, limit: int | None) -> dict[str, list[dict[str, Any]]]:
    nodes = con.execute(  # LIMIT NULL: every type
        "SELECT type, count(*), arg_min(name, id) FROM nodes WHERE namespace = $1 "
        "GROUP BY type ORDER BY count(*) DESC, type LIMIT $2",
        [namespace, limit],
    ).fetchall()
    edges = con.execute(
        "SELECT e.type, count(*), arg_min(s.name, e.id), arg_min(t.name, e.id) FROM edges e "
        "JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id "
        f"WHERE e.namespace = $1 AND {sql.holds_at('$3', 'e')} GROUP BY e.type ORDER BY count(*) DESC, e.type "
        "LIMIT $2",
        [namespace, limit, sql.now()],
    ).fetchall()
    return {
        "node_types": [{"type": t, "count": n, "example": name} for t, n, name in nodes],
        "edge_types": [{"type": t, "count": n, "example": {"source": s, "target": o}} for t, n, s, o in edges],
    }


def most_connected(con: Any, namespace: str, limit: int) -> list[tuple[int, int]]:
    rows = con.execute(
        f"WITH live AS (SELECT source_id, target_id FROM edges WHERE namespace = $1 AND {sql.holds_at('$3')}) "
        "SELECT id, count(*) AS n FROM (SELECT source_id AS id FROM live UNION ALL SELECT target_id FROM live) "
        "GROUP BY id ORDER BY n DESC, id LIMIT $2",
        [namespace, limit, sql.now()],
    ).fetchall()
    return [(int(node), int(n)) for node, n in rows]


def types_held_many(con: Any, namespace: str, types: list[str]) -> set[str]:
    """`GraphStore.types_held_many`: of `types`, those a source holds now to two or more targets."""
    if not types:
        return set()
    rows = con.execute(
        f"SELECT DISTINCT type FROM edges WHERE namespace = $1 AND type IN (SELECT unnest({sql.JSON_NAMES % 2})) "
        f"AND {sql.holds_at('$3')} GROUP BY type, source_id HAVING count(DISTINCT target_id) > 1",
        [namespace, sql.json_list(types), sql.now()],
    ).fetchall()
    return {row[0] for row in rows}


def namespaces(con: Any) -> list[str]:
    rows = con.execute(
        "SELECT namespace FROM nodes UNION SELECT namespace FROM edges UNION SELECT namespace FROM documents "
        "ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def namespace_summaries(con: Any) -> list[dict[str, Any]]:
    """Each namespace's counts and last write. Deletions are writes: the log's latest line counts for the last
    write, and a namespace whose only rows are log lines (all of it deleted by hand) is listed with zero counts, so
    that the texts the log keeps can be seen, and deleted with the namespace."""
    rows = con.execute(
        "WITH n AS (SELECT namespace, count(*) AS c, max(updated_at) AS t FROM nodes GROUP BY 1), "
        f"e AS (SELECT namespace, count(*) FILTER (WHERE {sql.holds_at('$1')}) AS c, max(updated_at) AS t "
        "FROM edges GROUP BY 1), "
        "d AS (SELECT namespace, count(*) AS c, max(created_at) AS t FROM documents GROUP BY 1), "
        "x AS (SELECT namespace, max(deleted_at) AS t FROM deletions GROUP BY 1), "
        "names AS (SELECT namespace FROM n UNION SELECT namespace FROM e UNION SELECT namespace FROM d "
        "UNION SELECT namespace FROM x) "
        "SELECT names.namespace, coalesce(n.c, 0), coalesce(e.c, 0), coalesce(d.c, 0), "
        "greatest(n.t, e.t, d.t, x.t) FROM names LEFT JOIN n USING (namespace) LEFT JOIN e USING (namespace) "
        "LEFT JOIN d USING (namespace) LEFT JOIN x USING (namespace) ORDER BY 1",
        [sql.now()],
    ).fetchall()
    return [{"namespace": ns, "nodes": nodes, "edges": edges, "documents": documents, "last_write": last}
            for ns, nodes, edges, documents, last in rows]


def list_documents(con: Any, namespace: str, offset: int, limit: int) -> list[DocumentRecord]:
    rows = con.execute(
        f"SELECT {_DOCUMENT_COLUMNS} FROM documents LEFT JOIN (SELECT document_id AS id, min(id) AS first_chunk "
        "FROM chunks WHERE namespace = $1 GROUP BY document_id) USING (id) "
        "WHERE namespace = $1 ORDER BY first_chunk NULLS LAST, id LIMIT $2 OFFSET $3",
        [namespace, limit, offset],
    ).fetchall()
    return [_document(row) for row in rows]


def written_by_hand(con: Any, kind: str, ids: Iterable[int]) -> set[int]:
    """Those of the nodes or edges (`kind`) `ids` marked as written by hand (schema.BY_HAND)."""
    wanted, params = sql.rows(1, id=("BIGINT", list(set(ids))))
    return {row[0] for row in con.execute(
        f"SELECT {kind}_id FROM {kind}s_by_hand WHERE {kind}_id IN (SELECT id FROM {wanted})", params).fetchall()}


def edge_evidence(con: Any, edge_ids: Iterable[int]) -> list[tuple[int, int]]:
    ids = list(set(edge_ids))
    if not ids:
        return []
    wanted, params = sql.rows(1, id=("BIGINT", ids))
    rows = con.execute(
        f"SELECT edge_id, chunk_id FROM edge_evidence WHERE edge_id IN (SELECT id FROM {wanted}) "
        "ORDER BY edge_id, chunk_id",
        params,
    ).fetchall()
    return [(int(e), int(c)) for e, c in rows]


def changes(con: Any, namespace: str, since: Any, until: Any, limit: int) -> list[ChangeRecord]:
    def span(column: str) -> str:
        return (f"{column} >= coalesce($2::TIMESTAMP, '-infinity'::TIMESTAMP) "
                f"AND {column} < coalesce($3::TIMESTAMP, 'infinity'::TIMESTAMP)")

    rows = con.execute(
        # An entity whose type a later write changed is listed as created with the type it had then, as recorded
        # (deletions.CREATED_TYPE), under its name now ("created_as": its name and that type).
        "SELECT * FROM (SELECT n.created_at AS moment, 'entity created' AS kind, n.id AS node, NULL::BIGINT AS edge, "
        "NULL::VARCHAR AS doc, NULL::VARCHAR AS label, NULL::VARCHAR[] AS added, "
        "CASE WHEN t.label IS NOT NULL THEN [n.name, t.label[strpos(t.label, ' ') + 1:]] END AS created_as "
        "FROM nodes n LEFT JOIN deletions t ON t.kind = $5 AND t.namespace = n.namespace "
        f"AND split_part(t.label, ' ', 1) = n.id::VARCHAR WHERE n.namespace = $1 AND {span('n.created_at')} "
        "UNION ALL SELECT updated_at, 'entity updated', id, NULL, NULL, NULL, NULL, NULL FROM nodes "
        f"WHERE namespace = $1 AND updated_at > created_at AND {span('updated_at')} "
        # Observations a later write added to a stored entity, one line per entity and write, as deleted ones are
        # listed ("Ada [Person]: text; text", worded below as the log words those): "entity updated" alone leaves
        # the reader with the old text. Those written with the entity come with "entity created"; an import (newer
        # rows than its entities' last update) adds none.
        "UNION ALL SELECT o.created_at, 'observations added', n.id, NULL, NULL, NULL, "
        "list_concat([n.name, n.type], list(o.text ORDER BY o.rowid)), NULL FROM observations o JOIN nodes n "
        f"ON n.id = o.node_id WHERE n.namespace = $1 AND o.created_at > n.created_at AND o.created_at <= "
        f"n.updated_at AND {span('o.created_at')} GROUP BY n.id, n.name, n.type, o.created_at "
        "UNION ALL SELECT created_at, 'fact added', NULL, id, NULL, NULL, NULL, NULL FROM edges WHERE namespace = $1 "
        f"AND {span('created_at')} "
        # A fact's last write after its creation: it ended it when the fact had ended by then (end_relations, or
        # an end given in the past); else it changed a fact that still held (an end to come is not an end yet).
        "UNION ALL SELECT updated_at, CASE WHEN valid_until <= updated_at THEN 'fact ended' ELSE 'fact updated' END, "
        f"NULL, id, NULL, NULL, NULL, NULL FROM edges WHERE namespace = $1 AND updated_at > created_at "
        f"AND {span('updated_at')} "
        # A document whose write replaced another text of it is listed once, as replaced (below).
        "UNION ALL SELECT created_at, 'document added', NULL, NULL, id, NULL, NULL, NULL FROM documents d "
        "WHERE namespace = $1 "
        f"AND {span('created_at')} AND NOT EXISTS (SELECT 1 FROM deletions x WHERE x.namespace = d.namespace "
        "AND x.deleted_at = d.created_at AND x.kind = 'document replaced' AND x.label = d.id) "
        # What writes deleted: the rows are gone, their labels were recorded (deletions.py `record`). A
        # replaced document still stored is named by its id, so that its title can be shown.
        "UNION ALL SELECT deleted_at, kind, NULL, NULL, CASE WHEN kind = 'document replaced' THEN label END, label, "
        f"NULL, NULL FROM deletions WHERE namespace = $1 AND kind <> $5 AND {span('deleted_at')}) AS c "
        "ORDER BY moment DESC, kind, node, edge, doc, label LIMIT $4",
        [namespace, since, until, limit, CREATED_TYPE],
    ).fetchall()
    return [ChangeRecord(at=at, kind=kind, node_id=node, edge_id=edge, document_id=doc, label=_label(label, added,
                                                                                                    created_as))
            for at, kind, node, edge, doc, label, added, created_as in rows]


def _label(label: str | None, added: list[str] | None, created_as: list[str] | None) -> str | None:
    """A change's words where the row says more than its ids: the observations added to an entity ("Ada [Person]:
    text; text"), an entity created with another type than it has now ("Jordan [Country]"), else the log's."""
    if added is not None:
        return observations_label(added[0], added[1], added[2:])[:LABEL_CHARS]
    if created_as is not None:
        return entity_header(created_as[0], created_as[1])
    return label


def _edge(row: tuple) -> EdgeRecord:
    return EdgeRecord(id=row[0], source_id=row[1], target_id=row[2], type=row[3], description=row[4], weight=row[5],
                      properties=json.loads(row[6]), valid_from=row[7], valid_until=row[8], created_at=row[9],
                      updated_at=row[10])


def _document(row: tuple) -> DocumentRecord:
    return DocumentRecord(id=row[0], namespace=row[1], text=row[2], title=row[3], metadata=json.loads(row[4]),
                          created_at=row[5], time=row[6])


def _node(row: tuple) -> NodeRecord:
    return NodeRecord(
        id=row[0], namespace=row[1], key=row[2], name=row[3], type=row[4], description=row[5],
        aliases=tuple(row[6]), properties=json.loads(row[7]), created_at=row[8], updated_at=row[9],
    )
