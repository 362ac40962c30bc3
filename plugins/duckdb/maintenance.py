"""Health (what `duckgraph doctor` reports of the store) and backup (a consistent copy of the file)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb import aliases_apart, connection, reads, schema, sql
from duckgraph.plugins.duckdb.connection import one_line, storage_problem
from duckgraph.plugins.duckdb.mirror.graph import GraphMirror
from duckgraph.plugins.duckdb.mirror.keywords import KeywordIndex
from duckgraph.plugins.duckdb.vector_search import VectorSearch
from duckgraph.ports import StoreError

log = logging.getLogger(__name__)


def health(con: Any, path: Path, vectors: VectorSearch, graph: GraphMirror, keywords: KeywordIndex, *,
           read_only_reason: str, memory_limit: str, passage_texts_mb: float,
           with_space: bool = True) -> dict[str, Any]:
    """The store's state in one dictionary (called under the store's lock); its "space" None without `with_space`."""
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
        "space": space(con, path) if with_space else None,
        "namespaces": reads.namespaces(con),  # those that hold something: doctor says when the configured one does not
        # Aliases an older name rule merged and this one keeps apart, while their entities have them: doctor lists them.
        "aliases_apart": aliases_apart.held(con, schema.meta(con, aliases_apart.META_KEY)),
    }


def space(con: Any, path: Path) -> dict[str, int]:
    """The file's size and DuckDB's count of its blocks, free ones included: a file does not shrink when rows are
    deleted or replaced (its freed blocks are reused by later writes), so doctor says when a compact copy would
    give much back."""
    block_size, total, free = con.execute(
        "SELECT block_size, total_blocks, free_blocks FROM pragma_database_size() "
        "WHERE database_name = current_database()").fetchone()
    wal = path.with_name(path.name + ".wal")
    return {"bytes": path.stat().st_size, "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "block_size": block_size, "total_blocks": total, "free_blocks": free}


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
            except BaseException as exc:
                connection.cancel_if_interrupted(con, exc)  # else the ROLLBACK waits for the whole copy
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


def copy_before_upgrade(con: Any, path: Path, version: int) -> Path | None:
    """Keep a copy of the file as it is, before its schema (version `version`) is upgraded: see `schema.ensure`.

    The copy is a backup (consistent, checkpointed, compared table by table), written under a temporary name and
    renamed, so a copy under its final name is always whole. Returns its path; None for a restore's temporary copy
    of a backup (core/files/backup.py, `.NAME.PID-….partial`), whose backup stays as it was and would otherwise
    leave a second, hidden copy behind. A copy that cannot be written stops the upgrade: nothing is changed."""
    if path.name.startswith(".") and path.name.endswith(".partial"):
        return None
    destination = schema.upgrade_copy(path, version)
    partial = destination.with_name(f".{destination.name}.partial")
    try:
        for leftover in (partial, partial.with_name(partial.name + ".wal")):  # of an upgrade that was killed
            leftover.unlink(missing_ok=True)
        backup(con, path, partial, lambda: "")
        partial.replace(destination)
    except (StoreError, OSError) as exc:
        with contextlib.suppress(OSError):  # a rename that failed leaves the whole copy under its temporary name
            partial.unlink(missing_ok=True)
        raise StoreError(
            f"{path} uses schema version {version} and must be upgraded to {schema.SCHEMA_VERSION} to be opened, but "
            f"the copy of it kept before an upgrade could not be written ({exc}); nothing was changed. Make room "
            f"(or write access) in {path.parent} and open it again, or open it with the duckgraph that wrote it"
        ) from exc
    return destination


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
