"""Health (what `duckgraph doctor` reports of the store) and backup (a consistent copy of the file)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb import schema, sql
from duckgraph.plugins.duckdb.connection import one_line, storage_problem
from duckgraph.plugins.duckdb.mirror.graph import GraphMirror
from duckgraph.plugins.duckdb.mirror.keywords import KeywordIndex
from duckgraph.plugins.duckdb.vector_search import VectorSearch
from duckgraph.ports import StoreError

log = logging.getLogger(__name__)


def health(con: Any, path: Path, vectors: VectorSearch, graph: GraphMirror, keywords: KeywordIndex, *,
           read_only_reason: str, memory_limit: str, passage_texts_mb: float) -> dict[str, Any]:
    """The store's state in one dictionary (called under the store's lock)."""
    info = schema.embedder_info(con)
    held = graph.held_text_megabytes()
    return {
        "path": str(path),
        "schema_version": int(schema.meta(con, "schema_version") or 0),
        "embedder": None if info is None else {"id": info[0], "dimensions": info[1]},
        "vss": vectors.vss(),
        "vector_search": vectors.modes(),
        "vector_index": vectors.index_states(),
        "vectors": vectors.sizes(),
        "graph_in_memory": graph.sizes(),
        "keyword_index": keywords.describe(),
        "passage_texts": (
            f"in memory ({held:.1f} MB, up to passage_texts_mb={passage_texts_mb:g})" if held is not None else
            f"read from the file (more than passage_texts_mb={passage_texts_mb:g} MB of them)"),
        "read_only": read_only_reason or None,
        "memory_limit": f"{memory_limit} for DuckDB's cache and indexes (store option memory_limit)",
        "vectors_in_memory": vectors.in_memory(info),
        "vectors_in_file": vectors.in_file(),
    }


def backup(con: Any, path: Path, destination: Path, reopen: Callable[[], str]) -> None:
    """Copy the database into a fresh file with ATTACH + COPY FROM DATABASE.

    The copy is one statement under the store lock, so it is one consistent snapshot even while a server
    uses the store (its writes wait); it carries the tables, sequences (with their current values), indexes
    and constraints, leaves out free blocks, and works on a file opened read-only. The copy is checkpointed,
    its row counts are compared with the original's table by table, and it is detached. `reopen` opens the file
    again when DuckDB invalidated it.
    """
    import duckdb

    alias = "duckgraph_backup"
    try:
        try:
            source = con.execute("SELECT current_database()").fetchone()[0]
            literal = str(destination).replace("'", "''")
            con.execute(f"ATTACH '{literal}' AS {alias} (READ_WRITE)")
            try:
                con.execute(f"COPY FROM DATABASE {sql.quoted(source)} TO {alias}")
                con.execute(f"CHECKPOINT {alias}")
                _compare_copy(con, source, alias, path, destination)
            except BaseException:
                for statement in ("ROLLBACK", f"DETACH {alias}"):  # a failed COPY leaves a transaction open
                    try:
                        con.execute(statement)
                    except Exception as failure:
                        log.debug("%s after a failed backup: %s", statement, failure)
                raise
            con.execute(f"DETACH {alias}")
        except duckdb.Error as exc:
            if isinstance(exc, duckdb.FatalException):
                reopen()
            problem = storage_problem(str(exc)) or "DuckDB failed"
            raise StoreError(f"could not write the copy {destination}: {problem} ({one_line(exc)})") from exc
    except BaseException:
        for leftover in (destination, destination.with_name(destination.name + ".wal")):
            try:
                leftover.unlink(missing_ok=True)
            except OSError as failure:
                log.warning("could not remove the partial backup %s: %s", leftover, failure)
        raise


def _compare_copy(con: Any, source: str, alias: str, path: Path, destination: Path) -> None:
    def counts(database: str) -> dict[str, int]:
        tables = [row[0] for row in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'", [database]
        ).fetchall()]
        return {t: con.execute(f"SELECT count(*) FROM {sql.quoted(database)}.main.{sql.quoted(t)}").fetchone()[0]
                for t in tables}

    original, copied = counts(source), counts(alias)
    if original != copied:
        differ = sorted(t for t in original.keys() | copied.keys() if original.get(t) != copied.get(t))
        raise StoreError(
            f"the copy {destination} does not match {path} (tables {', '.join(differ)} differ); "
            "nothing was kept"
        )
