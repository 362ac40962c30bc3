"""Writes: the statements of one write transaction, and the changes to the mirror they imply.

A `Writer` runs inside the transaction the store opens. It reads the mirror (a batch's edges resolve their ends
and find the edges they update there) but never changes it: it notes each change in `MirrorChanges`, which the
store applies once the transaction has committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb import communities, deletions, periods, sql, vector_tables
from duckgraph.plugins.duckdb.mirror.graph import GraphMirror
from duckgraph.plugins.duckdb.mirror.matrix import floats
from duckgraph.plugins.duckdb.name_matching import loose_text, naming, naming_loosely, nearest
from duckgraph.plugins.duckdb.schema import HOST_MARK, name_keys
from duckgraph.plugins.duckdb.vector_tables import VECTOR_TABLES
from duckgraph.ports import (
    ChunkRecord,
    EmbedderMismatchError,
    InvalidInputError,
    NodeRecord,
    StoreError,
    WriteBatch,
    WriteSummary,
    entity_key,
)
from duckgraph.ports.periods import joined_periods
from duckgraph.ports.text import entity_header


@dataclass
class MirrorChanges:
    """What a write changes in the mirror, noted while its transaction runs and applied by the store after COMMIT."""

    #: Calls to make on the graph mirror, in order.
    graph: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    #: Kind -> ids whose vectors went.
    removed_vectors: dict[str, list[int]] = field(default_factory=dict)
    #: (kind, namespace) -> (id, vector or None) of the records written.
    written_vectors: dict[tuple[str, str], list[tuple[int, Any]]] = field(default_factory=dict)
    #: Kind -> ids of rows whose words may have changed (written, deleted, or an edge whose end was renamed): the
    #: keyword index reads them again from the file once the write has committed.
    keywords: dict[str, set[int]] = field(default_factory=lambda: {"node": set(), "edge": set(), "chunk": set()})
    #: Set by a restore, which touches many rows: these parts ("graph", "vectors") are loaded from the file again
    #: instead of the changes being replayed.
    reload: frozenset[str] | None = None


def require_dimensions(batch: WriteBatch, bound: tuple[str, int] | None, path: Path) -> int | None:
    """The width of the file's vectors (None before an embedder is bound); refuses vectors of another width."""
    has_vectors = any(item.embedding is not None for item in [*batch.nodes, *batch.chunks, *batch.edges])
    if has_vectors and bound is None:
        raise StoreError("no embedder is bound to this file yet; call bind_embedder first")
    if bound is None:
        return None
    for item in [*batch.nodes, *batch.chunks, *batch.edges]:
        if item.embedding is not None and len(item.embedding) != bound[1]:
            raise EmbedderMismatchError(
                f"a vector of {len(item.embedding)} dimensions cannot be stored in {path}, "
                f"which holds {bound[1]}-dimensional vectors of {bound[0]!r}"
            )
    return bound[1]


class Writer:
    """The statements of one write transaction on `con` (see the module docstring)."""

    def __init__(self, con: Any, graph: GraphMirror, stored_precision: dict[str, str], has_vector_tables: bool) -> None:
        self.con = con
        self._graph = graph
        self._stored_precision = stored_precision
        #: False before an embedder is bound: the file has no vector tables yet.
        self._has_vector_tables = has_vector_tables
        self.changes = MirrorChanges()
        #: Nodes this write renames or merges into (`WriteBatch.renamed` too): their relations' sentences change.
        self._renamed: set[int] = set()

    def write(self, batch: WriteBatch, dimensions: int | None) -> WriteSummary:
        now = sql.now()
        self._renamed.update(batch.renamed)
        # A replaced text keeps its passages that did not change (`WriteBatch.chunks`); what only its other old
        # passages supported goes with them, as on a delete, unless its new passages still name it (`keep_named`).
        dropped = self._replaced_chunks(batch)
        replaced_nodes, replaced_edges, replaced_held = self._supported_only_by(
            f"SELECT unnest({sql.JSON_IDS % 1})", [sql.json_list(dropped)]) if dropped else ([], [], {})
        held = self._provenance_in(dropped) if batch.keep_named else ([], [])
        removed_chunks = self.replace_documents(batch, now, dropped)
        gone_documents, gone_chunks, unsupported_nodes, unsupported_edges, by_hand_ends = self._delete_documents(
            batch, now)
        removed_chunks += gone_chunks
        inserted = [c for c in batch.chunks if c.id is None]
        chunk_ids = self.insert_chunks(batch, dimensions)
        named_nodes, named_edges = self._keep_named(inserted, *held)
        unsupported_nodes += [n for n in replaced_nodes if n not in named_nodes]
        unsupported_edges += [e for e in replaced_edges if e not in named_edges]
        self._require_source_chunks(batch)
        collapsed = self._apply_merges(batch, now)
        merged = [s for _, ss in batch.merges for s in ss]
        forgotten = [namespace for namespace, since, until in batch.forget_deletions if since is None and until is None]
        deleted_nodes = self._delete_nodes([*batch.delete_nodes, *merged, *unsupported_nodes], now, merged, forgotten)
        node_ids, created, updated, nodes_unchanged = self._upsert_nodes(batch, now, dimensions)
        self._write_observations(batch, now)
        self._link_node_sources(batch, dimensions)
        try:
            edge_ids, edges_created, edges_updated, edges_unchanged, versions = self._upsert_edges(
                batch, now, dimensions)
        except periods.PeriodOverlap as overlap:  # worded with the ends' names as stored, not their keys
            raise overlap.named(*(self._stored_name(overlap.edge.namespace, k)
                                  for k in (overlap.edge.source_key, overlap.edge.target_key))) from None
        self.mark_by_hand([n.id for n in batch.nodes if n.by_hand and n.id is not None],
                          [i for i, e in zip(edge_ids, batch.edges) if e.by_hand])
        # An unsupported edge this batch writes again (with its new provenance) stays.
        rewritten = set(edge_ids)
        # The edges a merge joined into the target's are not recorded as deleted (the merge is recorded); its
        # self-loops were, by `_apply_merges`. Those of deleted nodes were recorded with their nodes.
        deleted_edges = [*batch.delete_edges, *(e for e in unsupported_edges if e not in rewritten)]
        dropped_edges = self._delete_edges([*collapsed, *deleted_edges, *deleted_nodes[1]], now, deleted_edges)
        for namespace in batch.drop_communities:
            communities.drop(self.con, namespace)
        forgotten_lines = deletions.forget(self.con, batch.forget_deletions)  # last: after every line it recorded
        if batch.end_edges:
            self.end_edges([i for i, _ in batch.end_edges], [sql.naive_utc(t) for _, t in batch.end_edges], now)
        self.con.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", [now.isoformat()])
        self._note_vectors(batch, {"node": deleted_nodes[0], "chunk": removed_chunks, "edge": dropped_edges}, edge_ids)
        return WriteSummary(
            nodes_created=created, nodes_updated=updated, nodes_unchanged=nodes_unchanged,
            edges_created=edges_created, edges_updated=edges_updated, edges_unchanged=edges_unchanged,
            documents_written=len(batch.documents), chunks_written=len(inserted),
            chunks_kept=len(batch.chunks) - len(inserted),
            nodes_deleted=len(deleted_nodes[0]), edges_deleted=len(dropped_edges), documents_deleted=gone_documents,
            edges_ended=len(batch.end_edges), edges_versioned=versions, deletions_forgotten=forgotten_lines,
            nodes_kept=sorted({*replaced_nodes, *replaced_held} & named_nodes - set(deleted_nodes[0])),
            nodes_held={n: edges for n, edges in sorted({**replaced_held, **by_hand_ends}.items())
                        if n not in named_nodes and n not in deleted_nodes[0]},
            edges_kept=sorted(set(replaced_edges) & named_edges - set(dropped_edges)),
            node_ids=node_ids,
            chunk_ids=chunk_ids,
        )

    def _stored_name(self, namespace: str, key: str) -> str:
        """The name of the node `key`, as stored (this write's new nodes included), or the key when there is none."""
        row = self.con.execute("SELECT name FROM nodes WHERE namespace = ? AND key = ?", [namespace, key]).fetchone()
        return row[0] if row else key

    def _require_source_chunks(self, batch: WriteBatch) -> None:
        """Refuse provenance that names passages not stored (as this transaction sees them): a graph extracted from
        a passage its document's replacement deleted meanwhile would be stored tied to no passage, so that no
        later replacement or deletion of the document would ever take it."""
        wanted = sorted({i for item in [*batch.nodes, *batch.edges] for i in item.source_chunk_ids})
        if not wanted:
            return
        stored = {row[0] for row in self.con.execute(
            f"SELECT id FROM chunks WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))", [sql.json_list(wanted)]
        ).fetchall()}
        missing = [str(i) for i in wanted if i not in stored]
        if missing:
            raise InvalidInputError(
                f"source_chunk_ids name passages that are not stored ({', '.join(missing[:10])}): their document "
                "was replaced or deleted since; nothing was written")

    def _note(self, change: Callable[..., None], *args: Any) -> None:
        """Note a change to the graph mirror, made once the write in progress commits."""
        self.changes.graph.append((change, args))

    def _note_vectors(self, batch: WriteBatch, removed: dict[str, list[int]], edge_ids: list[int]) -> None:
        """Note the vectors the batch removed and wrote, for the indexes once the write commits."""
        self.changes.removed_vectors = removed
        written = self.changes.written_vectors
        for node in batch.nodes:
            written.setdefault(("node", node.namespace), []).append((node.id, node.embedding))
        for chunk in batch.chunks:  # `insert_chunks` set each chunk's namespace
            written.setdefault(("chunk", chunk.namespace), []).append((chunk.id, chunk.embedding))
        for edge_id, edge in zip(edge_ids, batch.edges):
            written.setdefault(("edge", edge.namespace), []).append((edge_id, edge.embedding))

    def _apply_merges(self, batch: WriteBatch, now: datetime) -> list[int]:
        """Re-point the sources' edges and mentions at the target; return the ids of edges that collapsed."""
        collapsed: list[int] = []
        for target, sources in batch.merges:
            if not sources:
                continue
            # With the count of relations each source passed on: their vectors are computed again afterwards
            # without each being listed as updated (curation.py `_refresh_edge_vectors`), so this line says it.
            sources_json = sql.JSON_IDS % 2
            deletions.record(
                self.con, "entity merged", "SELECT s.namespace, s.id AS position, s.name, s.type, t.name AS target, "
                f"m.moved FROM nodes s JOIN nodes t ON t.id = $1 LEFT JOIN (SELECT x.node, "
                f"count(*) AS moved FROM (SELECT source_id AS node, target_id AS other FROM edges WHERE source_id IN "
                f"(SELECT unnest({sources_json})) UNION ALL SELECT target_id, source_id FROM edges WHERE target_id "
                f"IN (SELECT unnest({sources_json}))) x WHERE x.other <> $1 AND x.other NOT IN (SELECT unnest("
                f"{sources_json})) GROUP BY x.node) m ON m.node = s.id WHERE s.id IN (SELECT unnest("
                f"{sources_json})) AND s.id <> t.id", [target, sql.json_list(sources)], now, deletions.merged_label)
            self._renamed.add(target)
            # Relations between the merged entities become self-loops, deleted below (not joined into anything):
            # recorded as deleted facts now, while they still name their ends as they were.
            self._record_facts_deleted([r[0] for r in self.con.execute(
                f"SELECT id FROM edges WHERE source_id IN (SELECT unnest({sql.JSON_IDS % 1})) AND target_id IN "
                f"(SELECT unnest({sql.JSON_IDS % 1}))", [sql.json_list([target, *sources])]).fetchall()], now)
            for column in ("source_id", "target_id"):
                self.con.execute(f"UPDATE edges SET {column} = $1 WHERE {column} IN "
                                 f"(SELECT unnest({sql.JSON_IDS % 2}))",
                            [target, sql.json_list(sources)])
            self.con.execute(
                "INSERT OR IGNORE INTO mentions SELECT chunk_id, $1 FROM mentions WHERE node_id IN "
                f"(SELECT unnest({sql.JSON_IDS % 2}))",
                [target, sql.json_list(sources)],
            )
            self.con.execute(
                "INSERT OR IGNORE INTO nodes_by_hand SELECT DISTINCT $1 FROM nodes_by_hand WHERE node_id IN "
                f"(SELECT unnest({sql.JSON_IDS % 2}))", [target, sql.json_list(sources)])
            self._note(self._graph.copy_mentions, target, list(sources))
            self._note(self._graph.repoint, target, list(sources))
            # the moved edges now name the target in their sentences
            self.changes.keywords["edge"].update(r[0] for r in self.con.execute(
                "SELECT id FROM edges WHERE source_id = $1 OR target_id = $1", [target]).fetchall())
            # A self-loop made by the merge goes; so do all but the oldest of edges of one relation whose periods
            # overlap (search would list the fact twice): the oldest takes their union as its period, keeps its own
            # description, weight and properties, and takes their provenance and by-hand marks. A period that has
            # not begun is never joined with one that has: folding the fact that holds now into a planned one
            # would lose it.
            loops = [r[0] for r in self.con.execute(
                "SELECT id FROM edges WHERE source_id = $1 AND target_id = $1", [target]).fetchall()]
            joined, spans_of = joined_periods(self.con.execute(
                "SELECT id, namespace, source_id, target_id, type, valid_from, valid_until FROM edges "
                "WHERE (source_id = $1 OR target_id = $1) AND source_id <> target_id ORDER BY id",
                [target]).fetchall(), now)
            if joined:
                pairs, params = sql.rows(1, id=("BIGINT", list(joined)), keep=("BIGINT", list(joined.values())))
                self.con.execute(f"INSERT OR IGNORE INTO edge_evidence SELECT w.keep, e.chunk_id FROM {pairs} "
                                 "JOIN edge_evidence e ON e.edge_id = w.id", params)
                self.con.execute(f"INSERT OR IGNORE INTO edges_by_hand SELECT DISTINCT w.keep FROM {pairs} "
                                 "WHERE w.id IN (SELECT edge_id FROM edges_by_hand)", params)
            if spans_of:
                ids = list(spans_of)
                spans, params = sql.rows(2, id=("BIGINT", ids), vf=("TIMESTAMP", [spans_of[i][0] for i in ids]),
                                         vu=("TIMESTAMP", [spans_of[i][1] for i in ids]))
                self.con.execute(f"UPDATE edges SET valid_from = w.vf, valid_until = w.vu, updated_at = $1 "
                                 f"FROM {spans} WHERE edges.id = w.id", [now, *params])
                self._note(self._graph.set_validity, ids, [spans_of[i][0] for i in ids],
                           [spans_of[i][1] for i in ids], now)
            collapsed += [*loops, *joined]
        return collapsed

    def _delete_nodes(self, ids: list[int], now: datetime, merged: list[int],
                      forgotten: list[str]) -> tuple[list[int], list[int]]:
        """Delete nodes and what hangs on them except their edges, whose ids are returned for _delete_edges. The
        nodes (but the `merged` ones, recorded by `_apply_merges`) and their edges are recorded as deleted while
        their names are still stored, and the log's lines of what they held go (`deletions.forget_contents`; a
        merged node's contents moved to its target, with its name as an alias: its lines stay, about the target;
        those of the namespaces `forgotten` whole go with the rest of their log)."""
        ids = sorted(set(ids))
        if not ids:
            return [], []
        listed = [sql.json_list(ids)]
        existing = [r[0] for r in self.con.execute(
            f"SELECT id FROM nodes WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed).fetchall()]
        edges = [r[0] for r in self.con.execute(
            f"SELECT id FROM edges WHERE source_id IN (SELECT unnest({sql.JSON_IDS % 1})) UNION "
            f"SELECT id FROM edges WHERE target_id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed
        ).fetchall()]
        if deleted := sorted(set(existing) - set(merged)):
            deletions.record(
                self.con, "entity deleted", "SELECT namespace, id AS position, name, type FROM nodes "
                f"WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))", [sql.json_list(deleted)], now, entity_header)
            deletions.forget_contents(self.con, deleted, existing, forgotten)
        deletions.forget_created_types(self.con, existing)
        self._record_facts_deleted(edges, now)
        for table, column in (("mentions", "node_id"), ("node_names", "node_id"), ("observations", "node_id"),
                              ("community_members", "node_id"), ("nodes_by_hand", "node_id"),
                              ("node_vectors", "node_id")):
            if table == "node_vectors" and not self._has_vector_tables:
                continue  # no vector tables before an embedder is bound
            self.con.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest({sql.JSON_IDS % 1}))", listed)
        self.con.execute(f"DELETE FROM nodes WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed)
        self._note(self._graph.delete_nodes, existing)
        self.changes.keywords["node"].update(existing)
        return existing, edges

    def _record_facts_deleted(self, ids: list[int], now: datetime) -> None:
        """Record the edges `ids` as deleted, those whose ends are still stored (the edges of a node deleted
        earlier in the write were recorded with it)."""
        if ids:
            deletions.record(
                self.con, "fact deleted", "SELECT e.namespace, e.id AS position, s.name AS source, e.type, "
                f"t.name AS target, {deletions.period('e')} AS period FROM edges e JOIN nodes s ON s.id = e.source_id "
                f"JOIN nodes t ON t.id = e.target_id WHERE e.id IN (SELECT unnest({sql.JSON_IDS % 1}))",
                [sql.json_list(sorted(set(ids)))], now, deletions.fact_label)

    def _delete_edges(self, ids: list[int], now: datetime, recorded: list[int]) -> list[int]:
        """Delete edges with their provenance and vectors; the `recorded` ones among them are recorded as
        deleted."""
        ids = sorted(set(ids))
        if not ids:
            return []
        self._record_facts_deleted(recorded, now)
        listed = [sql.json_list(ids)]
        existing = [r[0] for r in self.con.execute(
            f"SELECT id FROM edges WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed).fetchall()]
        for table in ("edge_evidence", "edges_by_hand"):
            self.con.execute(f"DELETE FROM {table} WHERE edge_id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed)
        if self._has_vector_tables:
            self.con.execute(f"DELETE FROM edge_vectors WHERE edge_id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed)
        self.con.execute(f"DELETE FROM edges WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))", listed)
        self._note(self._graph.delete_edges, existing)
        self.changes.keywords["edge"].update(existing)
        return existing

    def _write_observations(self, batch: WriteBatch, now: datetime) -> None:
        # Two statements for the whole batch: per-node statements would bind list parameters, slowly, node by node.
        self.replace_observations([n for n in batch.nodes if n.observations is not None], now)

    def replace_documents(self, batch: WriteBatch, now: datetime, dropped: list[int] | None = None) -> list[int]:
        """Store the batch's documents, dropping the chunks (and what hangs on them) of those they replace that no
        chunk of the batch keeps (`dropped`, as `_replaced_chunks` finds them); the kept ones take their new ordinal.
        Return the dropped chunks' ids. A few statements for the whole batch, not four per document."""
        documents = list({(doc.namespace, doc.id): doc for doc in batch.documents}.values())  # the last one wins
        if not documents:
            return []
        namespaces, ids = [d.namespace for d in documents], [d.id for d in documents]
        keys, key_params = sql.rows(1, ns=("VARCHAR", namespaces), id=("VARCHAR", ids))
        # A stored document given another text is recorded as replaced: its old text is gone (a new title or
        # metadata alone changes what it is, not what it says).
        texts, text_params = sql.rows(1, ns=("VARCHAR", namespaces), id=("VARCHAR", ids),
                                      text=("VARCHAR", [d.text for d in documents]))
        deletions.record(self.con, "document replaced", "SELECT d.namespace, d.id AS position, d.id AS label FROM "
                         f"documents d JOIN {texts} ON d.namespace = w.ns AND d.id = w.id WHERE d.text <> w.text",
                         text_params, now, str)
        removed = self._drop_chunks(self._replaced_chunks(batch) if dropped is None else dropped)
        self._move_kept_chunks(batch, keys, key_params, {(d.namespace, d.id): d.title for d in documents})
        rows, params = sql.rows(
            1, ns=("VARCHAR", namespaces), id=("VARCHAR", ids), title=("VARCHAR", [d.title for d in documents]),
            text=("VARCHAR", [d.text for d in documents]),
            metadata=("VARCHAR", [json.dumps(d.metadata) for d in documents]),
            created=("TIMESTAMP", [sql.naive_utc(d.created_at) or now for d in documents]),
            time=("TIMESTAMP", [sql.naive_utc(d.time) for d in documents]),
        )
        # A stored document is updated in place: DuckDB (1.5) never frees the space of a row deleted and inserted
        # again under the same primary key, so a note replaced daily grew the file by its size each day.
        self.con.execute(
            "UPDATE documents SET title = w.title, text = w.text, metadata = w.metadata::JSON, created_at = w.created, "
            f"time = w.time FROM {rows} WHERE documents.namespace = w.ns AND documents.id = w.id", params)
        self.con.execute(
            f"INSERT INTO documents BY NAME SELECT ns AS namespace, id, title, text, metadata::JSON AS metadata, "
            f"created AS created_at, time FROM {rows} WHERE NOT EXISTS (SELECT 1 FROM documents d "
            "WHERE d.namespace = w.ns AND d.id = w.id)", params)
        self._note(self._graph.put_documents, namespaces, ids, [d.title for d in documents],
                   [sql.naive_utc(d.time) for d in documents])
        return removed

    def _replaced_chunks(self, batch: WriteBatch) -> list[int]:
        """The stored chunks of the batch's documents that none of its chunks keeps (`WriteBatch.chunks`): those
        its write drops. A chunk that names another chunk than a stored one of its document with its text and
        section is refused."""
        documents = sorted({(doc.namespace, doc.id) for doc in batch.documents})
        if not documents:
            return []
        keys, key_params = sql.rows(1, ns=("VARCHAR", [ns for ns, _ in documents]),
                                    id=("VARCHAR", [i for _, i in documents]))
        stored = {row[0]: row[1:] for row in self.con.execute(
            "SELECT c.id, c.namespace, c.document_id, c.text, coalesce(c.section, '') FROM chunks c "
            f"JOIN {keys} ON c.namespace = w.ns AND c.document_id = w.id ORDER BY c.id", key_params).fetchall()}
        kept: set[int] = set()
        for chunk, namespace in zip(batch.chunks, _chunk_namespaces(batch)):
            if chunk.id is None:
                continue
            if chunk.id in kept or stored.get(chunk.id) != (namespace, chunk.document_id, chunk.text, chunk.section):
                raise InvalidInputError(
                    f"chunk {chunk.id} is not a stored passage of document {chunk.document_id!r} with the same text "
                    "and section (or it is given twice): give a passage that changed without an id; nothing was "
                    "written")
            kept.add(chunk.id)
        return [i for i in stored if i not in kept]

    def _move_kept_chunks(self, batch: WriteBatch, keys: str, key_params: list[str],
                          titles: dict[tuple[str, str], str]) -> None:
        """Give the chunks the batch keeps their new ordinal (only those it changes: a row rewritten is space the
        file holds until a checkpoint). Those whose document gets another `titles` are read again by the keyword
        index: a passage's words include its document's title."""
        kept = [(c.id, c.ordinal, (namespace, c.document_id))
                for c, namespace in zip(batch.chunks, _chunk_namespaces(batch)) if c.id is not None]
        if not kept:
            return
        rows, params = sql.rows(1, id=("BIGINT", [i for i, _, _ in kept]), ordinal=("BIGINT", [o for _, o, _ in kept]))
        self.con.execute(f"UPDATE chunks SET ordinal = w.ordinal FROM {rows} WHERE chunks.id = w.id "
                         "AND chunks.ordinal <> w.ordinal", params)
        retitled = {(ns, doc) for ns, doc, title in self.con.execute(
            f"SELECT d.namespace, d.id, d.title FROM documents d JOIN {keys} ON d.namespace = w.ns AND d.id = w.id",
            key_params).fetchall() if titles.get((ns, doc), title) != title}
        self.changes.keywords["chunk"].update(i for i, _, document in kept if document in retitled)

    def _drop_chunks(self, removed: list[int]) -> list[int]:
        """Delete the chunks `removed`, with their provenance and vectors."""
        if removed:
            listed = [sql.json_list(removed)]
            for table, column in (("mentions", "chunk_id"), ("edge_evidence", "chunk_id"),
                                  ("chunk_vectors", "chunk_id"), ("chunks", "id")):
                if table == "chunk_vectors" and not self._has_vector_tables:
                    continue  # no vector tables before an embedder is bound
                self.con.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest({sql.JSON_IDS % 1}))", listed)
            self._note(self._graph.drop_chunks, removed)
            self.changes.keywords["chunk"].update(removed)
        return removed

    def _delete_documents(
        self, batch: WriteBatch, now: datetime
    ) -> tuple[int, list[int], list[int], list[int], dict[int, list[int]]]:
        """Delete `batch.delete_documents` and their chunks (recorded as deleted); return how many were stored, the
        chunks' ids, the nodes and edges that only those chunks supported (deleted with the batch's other
        deletions), and the nodes kept for relations written by hand (`_supported_only_by`)."""
        documents = sorted(set(batch.delete_documents))
        if not documents:
            return 0, [], [], [], {}
        keys, key_params = sql.rows(1, ns=("VARCHAR", [ns for ns, _ in documents]), id=("VARCHAR", [i for _, i in documents]))
        deletions.record(self.con, "document deleted", "SELECT d.namespace, d.id AS position, d.id AS label FROM "
                         f"documents d JOIN {keys} ON d.namespace = w.ns AND d.id = w.id", key_params, now,
                         deletions.document_label)
        nodes, edges, by_hand_ends = self._supported_only_by(
            f"SELECT c.id FROM chunks c JOIN {keys} ON c.namespace = w.ns AND c.document_id = w.id", key_params)
        stored = self.con.execute(f"SELECT count(*) FROM documents d JOIN {keys} ON d.namespace = w.ns AND d.id = w.id",
                                  key_params).fetchone()[0]
        removed = self._drop_chunks([row[0] for row in self.con.execute(
            f"SELECT c.id FROM chunks c JOIN {keys} ON c.namespace = w.ns AND c.document_id = w.id", key_params
        ).fetchall()])
        self.con.execute(f"DELETE FROM documents USING {keys} WHERE documents.namespace = w.ns AND documents.id = w.id",
                         key_params)
        self._note(self._graph.drop_documents, documents)
        return stored, removed, nodes, edges, by_hand_ends

    def _supported_only_by(
        self, chunks: str, key_params: list[Any]
    ) -> tuple[list[int], list[int], dict[int, list[int]]]:
        """The nodes and edges whose provenance is all in the passages the query `chunks` selects (with the
        parameters `key_params`). Provenance other passages also give keeps a node or an edge; one without any, or
        ever written by hand (`NodeRecord.by_hand`), is never among them. Nor is a node that is an end of an edge
        ever written by hand, which would go with it: those are returned apart, each with those edges' ids."""
        nodes = [row[0] for row in self.con.execute(
            f"SELECT node_id FROM mentions WHERE node_id IN (SELECT node_id FROM mentions WHERE chunk_id IN ({chunks})) "
            "AND node_id NOT IN (SELECT node_id FROM nodes_by_hand) "
            f"GROUP BY node_id HAVING bool_and(chunk_id IN ({chunks}))", key_params).fetchall()]
        edges = [row[0] for row in self.con.execute(
            f"SELECT edge_id FROM edge_evidence WHERE edge_id IN (SELECT edge_id FROM edge_evidence WHERE chunk_id IN "
            f"({chunks})) AND edge_id NOT IN (SELECT edge_id FROM edges_by_hand) "
            f"GROUP BY edge_id HAVING bool_and(chunk_id IN ({chunks}))", key_params).fetchall()]
        held: dict[int, list[int]] = {}
        if nodes:
            listed = [sql.json_list(nodes)]
            for node, edge in self.con.execute(
                    f"SELECT source_id, id FROM edges WHERE source_id IN (SELECT unnest({sql.JSON_IDS % 1})) "
                    "AND id IN (SELECT edge_id FROM edges_by_hand) UNION ALL "
                    f"SELECT target_id, id FROM edges WHERE target_id IN (SELECT unnest({sql.JSON_IDS % 1})) "
                    "AND id IN (SELECT edge_id FROM edges_by_hand) ORDER BY ALL", listed).fetchall():
                held.setdefault(node, []).append(edge)
        return [n for n in nodes if n not in held], edges, held

    def insert_chunks(self, batch: WriteBatch, dimensions: int | None) -> dict[str, list[int]]:
        """Insert the batch's chunks but those it keeps (with an `id`: see `replace_documents`), with their vectors;
        a kept one gets the vector it carries, if any. Return each document's chunk ids, kept ones included."""
        if not batch.chunks:
            return {}
        namespaces = _chunk_namespaces(batch)
        new = [(c, namespace) for c, namespace in zip(batch.chunks, namespaces) if c.id is None]
        ids = [r[0] for r in self.con.execute("SELECT nextval('chunk_ids') FROM range(?)", [len(new)]).fetchall()]
        if new:
            rows, params = sql.rows(1, id=("BIGINT", ids), ns=("VARCHAR", [ns for _, ns in new]),
                                    doc=("VARCHAR", [c.document_id for c, _ in new]),
                                    ordinal=("BIGINT", [c.ordinal for c, _ in new]),
                                    text=("VARCHAR", [c.text for c, _ in new]),
                                    section=("VARCHAR", [c.section for c, _ in new]),
                                    read=("VARCHAR", [c.extracted_by for c, _ in new]))
            self.con.execute("INSERT INTO chunks (id, namespace, document_id, ordinal, text, section, extracted_by) "
                             f"SELECT id, ns, doc, ordinal, text, section, read FROM {rows}", params)
        for (chunk, _), chunk_id in zip(new, ids):
            chunk.id = chunk_id
        fresh = set(ids)
        for replace in (False, True):  # a new id has no vector yet: nothing to delete first
            with_vectors = [(c.id, c.embedding) for c in batch.chunks
                            if c.embedding is not None and (c.id not in fresh) is replace]
            if with_vectors:
                self.write_vectors("chunk", [i for i, _ in with_vectors], [v for _, v in with_vectors], dimensions,
                                   replace=replace)
        # All the chunks of each document: a kept one moves to its document's new entry and ordinal.
        self._note(self._graph.add_chunks, [c.id for c in batch.chunks], namespaces,
                     [c.document_id for c in batch.chunks], [c.ordinal for c in batch.chunks],
                     [c.text for c in batch.chunks], [c.section for c in batch.chunks])
        self.changes.keywords["chunk"].update(ids)
        by_document: dict[str, list[int]] = {}
        for chunk, namespace in zip(batch.chunks, namespaces):
            chunk.namespace = namespace
            by_document.setdefault(chunk.document_id, []).append(chunk.id)
        return by_document

    def _provenance_in(self, chunks: list[int]) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
        """(namespace, document id, node id) of the mentions in `chunks`; (namespace, document id, edge id) of
        their evidence."""
        if not chunks:
            return [], []
        listed = [sql.json_list(chunks)]
        return tuple(self.con.execute(  # type: ignore[return-value]
            f"SELECT DISTINCT c.namespace, c.document_id, p.{column} FROM {table} p JOIN chunks c ON c.id = p.chunk_id "
            f"WHERE p.chunk_id IN (SELECT unnest({sql.JSON_IDS % 1})) ORDER BY ALL", listed).fetchall()
            for table, column in (("mentions", "node_id"), ("edge_evidence", "edge_id")))

    def _keep_named(self, inserted: list[ChunkRecord], nodes: list[tuple[str, str, int]],
                    edges: list[tuple[str, str, int]]) -> tuple[set[int], set[int]]:
        """`WriteBatch.keep_named`: give the `nodes` and `edges` (`_provenance_in` the dropped chunks) the `inserted`
        chunks of the same document that name them (a node: its name or an alias, as its key or in its loose form,
        `name_matching.naming_loosely`; an edge: both its ends) as mentions and evidence. Return the nodes and the
        edges that got some."""
        if not inserted or not (nodes or edges):
            return set(), set()
        texts: dict[tuple[str | None, str], list[tuple[int, str, str]]] = {}
        for chunk in inserted:  # `insert_chunks` set their ids and namespaces
            texts.setdefault((chunk.namespace, chunk.document_id), []).append(
                (chunk.id, entity_key(chunk.text), loose_text(chunk.text)))
        ends = {edge_id: (source, target) for edge_id, source, target in self.con.execute(
            f"SELECT id, source_id, target_id FROM edges WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))",
            [sql.json_list(e for _, _, e in edges)]).fetchall()} if edges else {}
        # The keys as written, not `node_names`, which holds their loose forms too: those are matched against the
        # text's loose form, and only where they keep the name apart from other words (`name_matching`: the "c" of
        # "C++" is not to match "written in C").
        keys = {node_id: [key, *map(entity_key, aliases)] for node_id, key, aliases in self.con.execute(
                f"SELECT id, key, aliases FROM nodes WHERE id IN (SELECT unnest({sql.JSON_IDS % 1}))",
                [sql.json_list({n for _, _, n in nodes} | {n for pair in ends.values() for n in pair})]).fetchall()}
        mentions = {(chunk_id, node_id) for namespace, doc, node_id in nodes
                    for chunk_id in naming_loosely(texts.get((namespace, doc), []), keys.get(node_id, []))}
        evidence = {(edge_id, chunk_id) for namespace, doc, edge_id in edges if edge_id in ends
                    for chunk_id in set.intersection(*(set(naming_loosely(texts.get((namespace, doc), []),
                                                                           keys.get(end, [])))
                                                       for end in ends[edge_id]))}
        sql.insert_pairs(self.con, "mentions", mentions)
        sql.insert_pairs(self.con, "edge_evidence", evidence)
        if mentions:
            self._note(self._graph.add_mentions, [c for c, _ in mentions], [n for _, n in mentions])
        return {n for _, n in mentions}, {e for e, _ in evidence}

    def _upsert_nodes(
        self, batch: WriteBatch, now: datetime, dimensions: int | None
    ) -> tuple[dict[str, int], int, int, int]:
        """Insert the batch's new nodes and update its stored ones; return their ids by key, and how many were
        created, changed and written again as stored (`_changed_nodes`)."""
        node_ids: dict[str, int] = {}
        new = [n for n in batch.nodes if n.id is None]
        old = [n for n in batch.nodes if n.id is not None]
        self._note_renamed_edges(old)
        changed = self._changed_nodes(old, batch)
        self._record_values_replaced(changed, now)
        if new:
            ids = [r[0] for r in self.con.execute("SELECT nextval('node_ids') FROM range(?)", [len(new)]).fetchall()]
            for node, node_id in zip(new, ids):
                node.id = node_id
        # Every column bound as one JSON array (`sql.rows`): list parameters bind element by element.
        for nodes, is_new in ((new, True), (changed, False)):
            if not nodes:
                continue
            rows, params = sql.rows(
                2, id=("BIGINT", [n.id for n in nodes]), namespace=("VARCHAR", [n.namespace for n in nodes]),
                key=("VARCHAR", [n.key for n in nodes]), name=("VARCHAR", [n.name for n in nodes]),
                type=("VARCHAR", [n.type for n in nodes]), description=("VARCHAR", [n.description for n in nodes]),
                aliases=("VARCHAR[]", [list(n.aliases) for n in nodes]),
                properties=("VARCHAR", [json.dumps(n.properties) if n.properties else "{}" for n in nodes]),
            )
            if is_new:
                try:
                    self.con.execute(
                        "INSERT INTO nodes SELECT id, namespace, key, name, type, description, aliases, "
                        f"properties::JSON, $1, $1 FROM {rows}",
                        [now, *params],
                    )
                except Exception as exc:
                    if "Duplicate key" in str(exc) or "unique" in str(exc).lower():
                        raise InvalidInputError(f"a node with one of these names already exists: {exc}") from exc
                    raise
            else:
                self.con.execute(
                    "UPDATE nodes SET key = w.key, name = w.name, type = w.type, description = w.description, "
                    f"aliases = w.aliases, properties = w.properties::JSON, updated_at = $1 FROM {rows} "
                    "WHERE nodes.id = w.id",
                    [now, *params],
                )
        if old:
            touched, params = sql.rows(1, id=("BIGINT", [n.id for n in old]))
            self.con.execute(f"DELETE FROM node_names WHERE node_id IN (SELECT id FROM {touched})", params)
        if batch.nodes:
            keys_of = {n.id: name_keys(n) for n in batch.nodes}
            names = [(n.namespace, key, n.id) for n in batch.nodes for key in keys_of[n.id]]
            rows, params = sql.rows(1, ns=("VARCHAR", [a for a, _, _ in names]),
                                    key=("VARCHAR", [b for _, b, _ in names]),
                                 id=("BIGINT", [c for _, _, c in names]))
            self.con.execute(f"INSERT INTO node_names SELECT ns, key, id FROM {rows}", params)
            self._note(self._graph.put_nodes, [*new, *changed], now, keys_of)
        for nodes, is_new in ((new, True), (old, False)):
            with_vectors = [n for n in nodes if n.embedding is not None]
            if with_vectors:  # a new id has no vector yet: nothing to delete first
                self.write_vectors("node", [n.id for n in with_vectors], [n.embedding for n in with_vectors],
                                    dimensions, replace=not is_new)
        for node in batch.nodes:
            node_ids[node.key] = node.id
        self.changes.keywords["node"].update(node_ids.values())
        return node_ids, len(new), len(changed), len(old) - len(changed)

    def _changed_nodes(self, nodes: list[NodeRecord], batch: WriteBatch) -> list[NodeRecord]:
        """Those of the stored `nodes` that this write changes (the mirror still holds them as before it): a node
        written again as it is (an entity added again, word for word) keeps its updated_at, so recent_changes and
        the communities' freshness do not count it as updated."""
        stored = {record.id: record for record in self._graph.node_records([n.id for n in nodes])}
        observations = self._graph.observations(stored)
        targets = {target for target, _ in batch.merges}  # it takes over the sources' relations

        def same(node: NodeRecord, record: NodeRecord | None) -> bool:
            return record is not None and node.id not in targets and (
                (node.namespace, node.key, node.name, node.type, node.description, tuple(node.aliases))
                == (record.namespace, record.key, record.name, record.type, record.description, tuple(record.aliases))
                and json.dumps(node.properties, sort_keys=True) == json.dumps(record.properties, sort_keys=True)
                and (node.observations is None
                     or set(node.observations) == set(observations.get(node.id, ()))))

        return [n for n in nodes if not same(n, stored.get(n.id))]

    def _record_values_replaced(self, nodes: list[NodeRecord], now: datetime) -> None:
        """Record in the log (as what a write takes away: the values it replaced) the properties and the types this
        write changes, one row of each per entity: "Ada [Person]: role: SRE -> lead", "Jordan [Person]: Country ->
        Person". recent_changes lists them, so that a reader of "entity updated" learns what changed (the mirror
        still holds the nodes as before the write); and the type an entity was created with, before its first
        change (`deletions.record_created_types`), which its "entity created" line names."""
        stored = {record.id: record for record in self._graph.node_records([n.id for n in nodes])}
        properties: list[tuple[str, int, str]] = []
        types: list[tuple[str, int, str]] = []
        retyped: list[tuple[str, int, str]] = []  # (namespace, id, the type before)
        for node in nodes:
            before = stored.get(node.id)
            if changes := deletions.property_changes(node.name, node.type, before.properties if before else {},
                                                     node.properties):
                properties.append((node.namespace, node.id, changes))
            if before is not None and before.type != node.type:
                types.append((node.namespace, node.id, deletions.type_change(node.name, before.type, node.type)))
                retyped.append((node.namespace, node.id, before.type))
        for kind, labels in (("properties changed", properties), ("type changed", types)):
            if labels:
                rows, params = sql.rows(1, namespace=("VARCHAR", [a for a, _, _ in labels]),
                                        position=("BIGINT", [b for _, b, _ in labels]),
                                        label=("VARCHAR", [c for _, _, c in labels]))
                deletions.record(self.con, kind, f"SELECT namespace, position, label FROM {rows}", params, now, str)
        deletions.record_created_types(self.con, retyped, now)

    def _note_renamed_edges(self, nodes: list[NodeRecord]) -> None:
        """The edges of the nodes whose name the batch changes: their sentences name the node (the mirror still
        holds the names before this write)."""
        stored = {record.id: record.name for record in self._graph.node_records([n.id for n in nodes])}
        renamed = [n.id for n in nodes if n.id in stored and stored[n.id] != n.name]
        self._renamed.update(renamed)
        if renamed:
            self.changes.keywords["edge"].update(self._graph.touching(renamed).tolist())

    def mark_by_hand(self, node_ids: list[int], edge_ids: list[int]) -> None:
        """Record nodes and edges written by hand (`NodeRecord.by_hand`); a mark is never lifted."""
        for table, ids in (("nodes_by_hand", node_ids), ("edges_by_hand", edge_ids)):
            if ids:
                self.con.execute(f"INSERT OR IGNORE INTO {table} SELECT DISTINCT unnest({sql.JSON_IDS % 1})",
                                 [sql.json_list(ids)])

    def _link_node_sources(self, batch: WriteBatch, dimensions: int | None) -> None:
        pairs = {(chunk_id, node.id) for node in batch.nodes for chunk_id in node.source_chunk_ids}
        wanted = [(node, doc_id) for node in batch.nodes for doc_id in node.source_ids]
        read: set[int] = set()
        if wanted:
            # The keys as written, not their loose forms (`name_keys`), which are matched against the text as it is:
            # the loose "c" of "C++" would link every passage saying "written in C".
            cited = self._cited_passages("node", [
                (node.id, node.namespace, doc_id, [node.key, *map(entity_key, node.aliases)], node.embedding)
                for node, doc_id in wanted], dimensions)
            for (node, _), linked in zip(wanted, cited):
                pairs.update((chunk_id, node.id) for chunk_id in linked)
                if not node.source_chunk_ids:  # the host's write (an extractor's names its passage)
                    read.update(linked)
        sql.insert_pairs(self.con, "mentions", pairs)
        if pairs:
            self._note(self._graph.add_mentions, [c for c, _ in pairs], [n for _, n in pairs])
        self._mark_read_by_host(read)

    def _mark_read_by_host(self, chunk_ids: set[int]) -> None:
        """Mark the passages a host write linked its facts to through `source_ids` as read (`HOST_MARK`) unless
        already marked: the host LLM extracted the graph from them, so an extractor is not to read them again
        (`GraphStore.extracted_chunks`). Provenance moved by `keep_named` marks nothing: nobody read the new text."""
        mark_extracted(self.con, sorted(chunk_ids), HOST_MARK, unmarked_only=True)

    def _cited_passages(self, kind: str, facts: list[tuple[int, str, str, list[str], Any]],
                        dimensions: int | None) -> list[list[int]]:
        """For each (id, namespace, document id, name keys, vector or None) of a node or edge (`kind`) that cites a
        document (`source_ids`), the document's passages it is linked to: those that name it
        (`name_matching.naming`), else those nearest to it (`name_matching.nearest`, by the vector it carries or,
        written again unchanged, the stored one): not every passage, so that it goes with the passage it came from."""
        chunks = self._chunks_of_documents({(namespace, doc) for _, namespace, doc, _, _ in facts})
        linked = [naming(chunks[(namespace, doc)], names) for _, namespace, doc, names, _ in facts]
        unnamed = [i for i, found in enumerate(linked) if not found]
        if unnamed:
            passages = self._stored_vectors("chunk", [chunk_id for i in unnamed
                                                      for chunk_id, _ in chunks[(facts[i][1], facts[i][2])]],
                                            dimensions)
            stored = self._stored_vectors(kind, [facts[i][0] for i in unnamed if facts[i][4] is None], dimensions)
            for i in unnamed:
                fact_id, namespace, doc, _, vector = facts[i]
                linked[i] = nearest([chunk_id for chunk_id, _ in chunks[(namespace, doc)]], passages,
                                    vector if vector is not None else stored.get(fact_id))
        return linked

    def _stored_vectors(self, kind: str, ids: list[int], dimensions: int | None) -> dict[int, Any]:
        """The float32 vectors of the ids of a kind as this transaction sees them; none before an embedder is bound."""
        if not ids or dimensions is None or not self._has_vector_tables:
            return {}
        return {i: floats(v) for i, v in vector_tables.read_by_id(self.con, kind, sorted(set(ids)), dimensions).items()}

    def _chunks_of_documents(
        self, documents: set[tuple[str, str]]
    ) -> dict[tuple[str, str], list[tuple[int, str]]]:
        """(namespace, document id) -> (chunk id, text as `name_matching.naming` reads it) of each chunk, in order."""
        found: dict[tuple[str, str], list[tuple[int, str]]] = {doc: [] for doc in documents}
        rows = self.con.execute(
            "SELECT d.namespace, d.id, c.id, c.text FROM documents d "
            "LEFT JOIN chunks c ON c.namespace = d.namespace AND c.document_id = d.id "
            f"WHERE (d.namespace, d.id) IN (SELECT unnest({sql.JSON_NAMES % 1}), unnest({sql.JSON_NAMES % 2})) "
            "ORDER BY c.ordinal",
            [sql.json_list(ns for ns, _ in documents), sql.json_list(doc for _, doc in documents)],
        ).fetchall()
        present = set()
        for namespace, doc_id, chunk_id, text in rows:
            present.add((namespace, doc_id))
            if chunk_id is not None:
                found[(namespace, doc_id)].append((chunk_id, entity_key(text)))
        missing = sorted(doc for _, doc in documents - present)
        if missing:
            raise InvalidInputError(
                f"source_ids name documents that are not stored: {', '.join(missing)}; "
                "add them with add_documents first (or drop source_ids)"
            )
        return found

    def _upsert_edges(
        self, batch: WriteBatch, now: datetime, dimensions: int | None
    ) -> tuple[list[int], int, int, int, list[tuple[int, datetime | None]]]:
        """Insert or update the batch's edges; return each one's id, and how many edges were created, how many
        stored ones changed and how many were written again as stored, and the writes that began a new version of
        a fact (`WriteSummary.edges_versioned`). An edge named twice in the batch counts once: the second names the
        one the first created or matched."""
        if not batch.edges:
            return [], 0, 0, 0, []
        id_of = self._node_ids(batch, {(e.namespace, k) for e in batch.edges for k in (e.source_key, e.target_key)})
        for i, edge in enumerate(batch.edges):
            for key in (edge.source_key, edge.target_key):
                if (edge.namespace, key) not in id_of:
                    raise InvalidInputError(f"edges[{i}]: node {key!r} does not exist")
        resolved = [(e, id_of[(e.namespace, e.source_key)], id_of[(e.namespace, e.target_key)]) for e in batch.edges]
        stored = self._edges_between(batch, resolved)
        #: edge id -> [namespace, source, target, type, description, weight, properties (JSON), is new,
        #:             valid_from, valid_until]
        state: dict[int, list[Any]] = {}
        created = 0
        #: Ids of the edges stored before this write that it matches (each once, however often it is named).
        matched: set[int] = set()
        edge_id_of: list[int] = [0] * len(resolved)
        #: edge id -> (description, weight, properties, valid_from, valid_until) as stored before this write
        as_stored: dict[int, tuple[Any, ...]] = {}
        versions: list[tuple[int, datetime | None]] = []
        # Periods apart from now first: in one call, a past period and the fact written undated are then two
        # periods whatever their order (the undated one holds from now, as written after an ended period).
        apart = [periods.apart_from_now(e.valid_from, e.valid_until, now) for e in batch.edges]
        for index in sorted(range(len(resolved)), key=lambda i: not apart[i]):
            edge, source_id, target_id = resolved[index]
            rows = stored.setdefault((edge.namespace, source_id, target_id, edge.type), [])
            found = periods.matching_edge(rows, edge.valid_from, edge.valid_until, now)
            follows: list[Any] | None = None  # the period a new version of the fact ends (`starts_new_version`)
            if found is not None and periods.starts_new_version(found, edge.valid_from, json.dumps(
                    {**json.loads(found[3]), **edge.properties}), edge.description):
                follows, found = found, None
                ended = [*follows[:5], edge.valid_from]
                rows[:] = [r for r in rows if r[0] != ended[0]] + [ended]
                if ended[0] in state:  # written or matched earlier in this batch: only its end changes
                    state[ended[0]][9] = edge.valid_from
                else:
                    state[ended[0]] = [edge.namespace, source_id, target_id, edge.type, *ended[1:4], False, *ended[4:]]
                versions.append((index, ended[4]))
            if found is not None:
                edge_id, description, weight, props, valid_from, valid_until = found
                if edge_id >= 0 and self._renamed.isdisjoint((source_id, target_id)):  # stored before this batch
                    as_stored.setdefault(edge_id, (description, weight, json.loads(props), valid_from, valid_until))
                props = json.dumps({**json.loads(props), **edge.properties}) if edge.properties else props
                description = edge.description or description
                weight = edge.weight if edge.weight is not None else weight
                if (edge.valid_from or valid_from, edge.valid_until or valid_until) != (valid_from, valid_until):
                    valid_from, valid_until = edge.valid_from or valid_from, edge.valid_until or valid_until
                    periods.check_period(edge, edge_id, valid_from, valid_until, rows)
                is_new = state[edge_id][7] if edge_id in state else False
                if edge_id >= 0:
                    matched.add(edge_id)
            elif follows is not None:
                # The new version carries on from the period it ends: what the write does not say (the other
                # properties, the description, the weight, the end) stays as that period had it.
                edge_id, is_new = -1 - created, True
                description = edge.description or follows[1]
                weight = follows[2] if edge.weight is None else edge.weight
                props = json.dumps({**json.loads(follows[3]), **edge.properties})
                valid_from, valid_until = edge.valid_from, edge.valid_until or follows[5]
                periods.check_period(edge, edge_id, valid_from, valid_until, rows)
                created += 1
            else:
                edge_id = -1 - created  # numbered once the count of new edges is known
                description, is_new = edge.description, True
                props = json.dumps(edge.properties) if edge.properties else "{}"
                # The stored weight, not None: the same edge again in this batch keeps it.
                weight = 1.0 if edge.weight is None else edge.weight
                # A relation added again after it ended holds from now on, unless told since when.
                valid_from = edge.valid_from or (now if rows and edge.valid_until is None else None)
                valid_until = edge.valid_until
                periods.check_period(edge, edge_id, valid_from, valid_until, rows)
                created += 1
            row = [edge_id, description, weight, props, valid_from, valid_until]
            rows[:] = [r for r in rows if r[0] != edge_id] + [row]
            state[edge_id] = [edge.namespace, source_id, target_id, edge.type, description, weight, props, is_new,
                              valid_from, valid_until]
            edge_id_of[index] = edge_id
        # New ids in the batch's order, whatever order the edges were looked at in.
        fresh = dict(zip([i for i in dict.fromkeys(edge_id_of) if i < 0], (r[0] for r in self.con.execute(
            "SELECT nextval('edge_ids') FROM range(?)", [created]).fetchall())))
        state = {fresh.get(i, i): row for i, row in state.items()}
        edge_id_of = [fresh.get(i, i) for i in edge_id_of]
        # A relation written again as it is (word for word, its ends' names too) keeps its updated_at:
        # recent_changes does not list it as updated, nor do the communities count it as a change.
        unchanged = {i for i, (description, weight, props, valid_from, valid_until) in as_stored.items()
                     if (state[i][4], state[i][5], json.loads(state[i][6]), state[i][8], state[i][9])
                     == (description, weight, props, valid_from, valid_until)}
        for is_new in (True, False):
            ids = [i for i, row in state.items() if row[7] is is_new and i not in unchanged]
            if ids:
                self._store_edges(ids, state, is_new, now)
        with_vectors = {i: e.embedding for i, e in zip(edge_id_of, batch.edges) if e.embedding is not None}
        for is_new in (True, False):
            ids = [i for i in with_vectors if state[i][7] is is_new]
            if ids:  # a new edge has no vector yet: nothing to delete first
                self.write_vectors("edge", ids, [with_vectors[i] for i in ids], dimensions, replace=not is_new)
        self._link_edge_sources(batch, resolved, edge_id_of, dimensions)
        self.changes.keywords["edge"].update(edge_id_of)
        return edge_id_of, created, len(matched - unchanged), len(matched & unchanged), versions

    def _store_edges(self, ids: list[int], state: dict[int, list[Any]], is_new: bool, now: datetime) -> None:
        """Insert (`is_new`) or update the edges `ids` as `state` holds them (see `_upsert_edges`)."""
        column = {name: [state[i][position] for i in ids] for position, name in enumerate(
            ("namespace", "source_id", "target_id", "type", "description", "weight", "properties", "is_new",
             "valid_from", "valid_until"))}
        rows, params = sql.rows(
            2, id=("BIGINT", ids), namespace=("VARCHAR", column["namespace"]),
            source_id=("BIGINT", column["source_id"]), target_id=("BIGINT", column["target_id"]),
            type=("VARCHAR", column["type"]), description=("VARCHAR", column["description"]),
            weight=("DOUBLE", column["weight"]), properties=("VARCHAR", column["properties"]),
            valid_from=("TIMESTAMP", column["valid_from"]), valid_until=("TIMESTAMP", column["valid_until"]),
        )
        if is_new:
            self.con.execute(
                "INSERT INTO edges SELECT id, namespace, source_id, target_id, type, description, weight, "
                f"properties::JSON, valid_from, valid_until, $1, $1 FROM {rows}",
                [now, *params],
            )
            self._note(self._graph.put_edges, ids, column["namespace"], column["source_id"], column["target_id"],
                       column["type"], column["description"], column["weight"], column["properties"], now,
                       column["valid_from"], column["valid_until"])
        else:
            self.con.execute(
                "UPDATE edges SET description = w.description, weight = w.weight, properties = w.properties::JSON, "
                f"valid_from = w.valid_from, valid_until = w.valid_until, updated_at = $1 FROM {rows} "
                "WHERE edges.id = w.id",
                [now, *params],
            )
            self._note(self._graph.update_edges, ids, column["description"], column["weight"], column["properties"],
                       now, column["valid_from"], column["valid_until"])

    def end_edges(self, ids: list[int], ended_at: list[datetime], now: datetime) -> None:
        """Close the edges `ids` at `ended_at` (each stays, as history); their start of validity is kept."""
        rows, params = sql.rows(2, id=("BIGINT", ids), until=("TIMESTAMP", ended_at))
        self.con.execute(f"UPDATE edges SET valid_until = w.until, updated_at = $1 FROM {rows} WHERE edges.id = w.id",
                         [now, *params])
        starts = {record.id: record.valid_from for record in self._graph.get_edges(ids)}
        self._note(self._graph.set_validity, ids, [starts.get(i) for i in ids], ended_at, now)

    def write_vectors(self, kind: str, ids: Sequence[int], vectors: Sequence[Any], dimensions: int, *,
                       replace: bool = True) -> None:
        """`insert_vectors` into the kind's table, in the precision this file stores it in."""
        vector_tables.insert_vectors(self.con, VECTOR_TABLES[kind][0], ids, vectors, dimensions, replace=replace,
                                     precision=self._stored_precision[kind])

    def _node_ids(self, batch: WriteBatch, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """(namespace, key) -> node id of the given keys, as the transaction sees them (this batch's nodes
        included). Read from the graph mirror, unless the batch deletes or merges nodes."""
        if batch.merges or batch.delete_nodes:
            wanted, params = sql.rows(1, ns=("VARCHAR", [ns for ns, _ in keys]), key=("VARCHAR", [k for _, k in keys]))
            return {(ns, key): node_id for ns, key, node_id in self.con.execute(
                f"SELECT n.namespace, n.key, n.id FROM nodes n JOIN {wanted} ON n.namespace = w.ns AND n.key = w.key",
                params,
            ).fetchall()}
        found = {(n.namespace, n.key): n.id for n in batch.nodes}
        written = {n.id for n in batch.nodes}
        by_namespace: dict[str, list[str]] = {}
        for namespace, key in keys - found.keys():
            by_namespace.setdefault(namespace, []).append(key)
        for namespace, wanted in by_namespace.items():
            for key, node_id in self._graph.key_owners(namespace, wanted).items():
                if node_id not in written:  # a node of this batch may be renamed: it answers to its new key only
                    found[(namespace, key)] = node_id
        return found

    def _edges_between(self, batch: WriteBatch, resolved: list) -> dict[tuple, list[list[Any]]]:
        """(namespace, source, target, type) -> [id, description, weight, properties JSON, valid_from, valid_until]
        of the stored edges (ended ones too) among those the batch names. Read from the graph mirror, unless the
        batch merges or deletes."""
        if not (batch.merges or batch.delete_nodes or batch.delete_edges):
            return self._graph.edges_between([s for _, s, _ in resolved], [t for _, _, t in resolved])
        wanted, params = sql.rows(
            1, ns=("VARCHAR", [e.namespace for e, _, _ in resolved]), s=("BIGINT", [s for _, s, _ in resolved]),
            t=("BIGINT", [t for _, _, t in resolved]), type=("VARCHAR", [e.type for e, _, _ in resolved]),
        )
        found: dict[tuple, list[list[Any]]] = {}
        for edge_id, ns, s, t, ty, description, weight, props, valid_from, valid_until in self.con.execute(
            "SELECT e.id, e.namespace, e.source_id, e.target_id, e.type, e.description, e.weight, e.properties, "
            f"e.valid_from, e.valid_until FROM edges e JOIN (SELECT DISTINCT * FROM {wanted}) w ON e.namespace = w.ns "
            "AND e.source_id = w.s AND e.target_id = w.t AND e.type = w.type ORDER BY e.id",
            params,
        ).fetchall():
            found.setdefault((ns, s, t, ty), []).append([edge_id, description, weight, props, valid_from, valid_until])
        return found

    def _link_edge_sources(self, batch: WriteBatch, resolved: list, edge_ids: list[int],
                           dimensions: int | None) -> None:
        pairs = {(edge_id, chunk_id) for edge_id, (e, _, _) in zip(edge_ids, resolved) for chunk_id in e.source_chunk_ids}
        wanted = [(edge_id, e, doc) for edge_id, (e, _, _) in zip(edge_ids, resolved) for doc in e.source_ids]
        read: set[int] = set()
        if wanted:
            cited = self._cited_passages("edge", [
                (edge_id, edge.namespace, doc, [edge.source_key, edge.target_key], edge.embedding)
                for edge_id, edge, doc in wanted], dimensions)
            for (edge_id, edge, _), linked in zip(wanted, cited):
                pairs.update((edge_id, chunk_id) for chunk_id in linked)
                if not edge.source_chunk_ids:  # the host's write (an extractor's names its passage)
                    read.update(linked)
        sql.insert_pairs(self.con, "edge_evidence", pairs)
        self._mark_read_by_host(read)

    def replace_observations(self, nodes: list[NodeRecord], now: datetime) -> None:
        """Make each node's observations its `observations`: drop the others, append the missing in order."""
        if not nodes:
            return
        wanted = [(n.id, text) for n in nodes for text in dict.fromkeys(n.observations or ())]
        self._note(self._graph.replace_observations, [n.id for n in nodes],
                   [list(dict.fromkeys(n.observations or ())) for n in nodes])
        columns = {"node_id": ("BIGINT", [i for i, _ in wanted]), "text": ("VARCHAR", [t for _, t in wanted]),
                   "position": ("BIGINT", list(range(len(wanted))))}
        # The observations that go, one row per entity: "Ada [Person]: text; text".
        ids, id_params = sql.rows(1, id=("BIGINT", [n.id for n in nodes]))
        rows, params = sql.rows(2, **columns)
        deletions.record(
            self.con, "observations deleted", "SELECT n.namespace, n.id AS position, n.name, n.type, "
            "list(o.text ORDER BY o.created_at) AS texts FROM observations o JOIN nodes n ON n.id = o.node_id "
            f"WHERE o.node_id IN (SELECT id FROM {ids}) AND (o.node_id, o.text) NOT IN (SELECT node_id, text "
            f"FROM {rows}) GROUP BY n.namespace, n.id, n.name, n.type", [*id_params, *params], now,
            deletions.observations_label)
        self.con.execute(
            f"DELETE FROM observations WHERE node_id IN (SELECT id FROM {ids}) "
            f"AND (node_id, text) NOT IN (SELECT node_id, text FROM {rows})",
            [*id_params, *params],
        )
        if wanted:
            rows, params = sql.rows(2, **columns)
            self.con.execute(
                f"INSERT INTO observations SELECT w.node_id, w.text, $1 FROM {rows} WHERE NOT EXISTS "
                "(SELECT 1 FROM observations o WHERE o.node_id = w.node_id AND o.text = w.text) ORDER BY w.position",
                [now, *params],
            )


def mark_extracted(con: Any, ids: list[int], extractor_id: str, *, unmarked_only: bool = False) -> None:
    """`DuckDBStore.mark_extracted`: a chunk no longer stored has no row to mark, so it is passed over.
    `unmarked_only`: leave a chunk already marked as it is."""
    if ids:
        unmarked = "extracted_by IS NULL AND " if unmarked_only else ""
        con.execute(f"UPDATE chunks SET extracted_by = $1 WHERE {unmarked}id IN (SELECT unnest({sql.JSON_IDS % 2}))",
                    [extractor_id, sql.json_list(ids)])


def _chunk_namespaces(batch: WriteBatch) -> list[str]:
    """The namespace of each of the batch's chunks: its own, else that of its document in the batch. A document
    id alone names no document when the batch holds it in two namespaces (one folder ingested into two
    namespaces, then exported and imported): its chunks must say which, or they would all land in one."""
    held: dict[str, set[str]] = {}
    for doc in batch.documents:
        held.setdefault(doc.id, set()).add(doc.namespace)
    namespaces: list[str] = []
    for chunk in batch.chunks:
        among = held.get(chunk.document_id, set())
        if not among or (chunk.namespace is not None and chunk.namespace not in among):
            where = f" in namespace {chunk.namespace!r}" if chunk.namespace is not None else ""
            raise InvalidInputError(f"a chunk refers to document {chunk.document_id!r}{where}, which is not in the "
                                    "batch; nothing was written")
        if chunk.namespace is None and len(among) > 1:
            raise InvalidInputError(
                f"the batch holds document {chunk.document_id!r} in the namespaces {', '.join(sorted(among))}: "
                "give each of its chunks its namespace; nothing was written")
        namespaces.append(chunk.namespace if chunk.namespace is not None else next(iter(among)))
    return namespaces
