"""The DuckDB graph store: nodes, edges, documents, chunks and vectors in one file (see `DuckDBStore`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from duckgraph.plugins.duckdb import (
    communities, connection, file_identity, keyword_texts, maintenance, reads, saved_keywords, schema, settings,
    vector_tables, writes,
)
from duckgraph.plugins.duckdb.mirror.graph import GraphMirror
from duckgraph.plugins.duckdb.mirror.keywords import KINDS, KeywordIndex
from duckgraph.plugins.duckdb.mirror.vectors import DEFAULT_ANN_MIN_ROWS
from duckgraph.plugins.duckdb.restore import restore_snapshot
from duckgraph.plugins.duckdb.sql import naive_utc
from duckgraph.plugins.duckdb.vector_search import DEFAULT_HNSW_MIN_ROWS, VECTOR_INDEXES, VectorSearch
from duckgraph.plugins.duckdb.writes import MirrorChanges, Writer
from duckgraph.ports import (
    ChunkRecord,
    ConfigError,
    DocumentRecord,
    EdgeRecord,
    GraphStore,
    Links,
    NodeRecord,
    Snapshot,
    StoreError,
    VectorKind,
    WriteBatch,
    WriteSummary,
    terms,
)

log = logging.getLogger(__name__)

#: Passage text kept in memory for searches, at most (MB): ~125,000 passages of 2 KB, whose vectors the store holds
#: anyway. Above it each search reads its few passages from the file, which costs milliseconds.
DEFAULT_PASSAGE_TEXTS_MB = 256


class DuckDBStore(GraphStore):
    """GraphStore on one DuckDB file. One connection, serialised by a lock (DuckDB connections are not
    thread-safe, and the MCP server calls tools from worker threads).

    The file is the truth; the mirror never runs ahead of a commit. A search never waits for DuckDB (which answers
    a lookup of a few hundred rows by id with a scan of the table): it reads the mirror, the graph (`GraphMirror`:
    node records and names, a CSR adjacency of the edges, provenance links) and each kind's vectors
    (`VectorSearch`), all held in memory. The mirror is derived from the tables: loaded at open, and changed only
    by `_committing`, after a write's transaction has committed. A write that fails leaves it as it was; a change
    that fails to apply reloads the graph from the file. An unclean close leaves nothing stale behind: the next
    open loads it from the file again. After a restore (an import: many rows at once) the mirror is loaded from
    the file again, lazily: by the first read or write that needs it (`_fresh`), so an `import` that ends there
    never holds the whole graph beside its transaction.

    The work is done by the modules beside this one: schema.py (tables, migrations, the embedder binding),
    writes.py and restore.py (the statements of a write), reads.py (reads answered by SQL), vector_search.py (the
    choice of vector index), settings.py (DuckDB's memory and checkpoints), connection.py (opening the file, and
    what a failure says) and maintenance.py (health, backup).
    """

    def __init__(
        self, path: str | Path, *, read_only: bool = False, hnsw_min_rows: int = DEFAULT_HNSW_MIN_ROWS,
        use_vss: bool = True, vector_index: str = "ivf", ann_min_rows: int = DEFAULT_ANN_MIN_ROWS,
        ann_nprobe: int | None = None, passage_texts_mb: float = DEFAULT_PASSAGE_TEXTS_MB,
        memory_limit: str | None = None,
    ) -> None:
        """`vector_index`: "ivf" (default; an exact scan below `ann_min_rows` vectors of a kind, an IVF index in
        memory above, probing `ann_nprobe` lists or as many as its build measured for recall@10 >= 0.95),
        "exact" (always an exact scan) or "hnsw" (the vss HNSW index above `hnsw_min_rows`: slow to build).
        Passages' texts are kept in memory while they hold at most `passage_texts_mb` (checked at open), so that
        searches do not read them from the file. `memory_limit` bounds DuckDB's own cache and indexes (a size
        such as "2GB"; default: a quarter of the machine's memory, at least 1 GiB)."""
        # The options come from a config file or a JSON variable: checked here, before DuckDB or numpy see them.
        if vector_index not in VECTOR_INDEXES:
            raise ConfigError(f"store option vector_index must be one of {', '.join(VECTOR_INDEXES)}, not "
                              f"{vector_index!r}")
        if isinstance(passage_texts_mb, bool) or not isinstance(passage_texts_mb, int | float) or passage_texts_mb < 0:
            raise ConfigError(f"store option passage_texts_mb must be a number of megabytes, 0 or more, not "
                              f"{passage_texts_mb!r}")
        if memory_limit is not None and not (
                isinstance(memory_limit, str) and settings.MEMORY_SIZE.fullmatch(memory_limit)):
            raise ConfigError(f"store option memory_limit must be a size such as \"2GB\" or \"1.5GiB\", not "
                              f"{memory_limit!r}")
        for name, flag in (("read_only", read_only), ("use_vss", use_vss)):
            if not isinstance(flag, bool):
                raise ConfigError(f"store option {name} must be true or false, not {flag!r}")
        counts = {"ann_min_rows": ann_min_rows, "hnsw_min_rows": hnsw_min_rows, "ann_nprobe": ann_nprobe}
        for name, count in counts.items():
            if (count is not None or name != "ann_nprobe") and (
                    isinstance(count, bool) or not isinstance(count, int) or count < 1):
                raise ConfigError(f"store option {name} must be a whole number, 1 or more, not {count!r}")
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._read_only_option = read_only
        #: Why the open file is read-only ("" when it is writable); see `open`.
        self.read_only_reason = "opened with the store option read_only = true" if read_only else ""
        self.passage_texts_mb = passage_texts_mb
        self.memory_limit = memory_limit or settings.default_memory_limit()
        self._con: Any = None
        #: The identity of the file opened (file_identity.py): a commit is refused once the path names another.
        self._identity: file_identity.Identity | None = None
        self._lock = threading.RLock()
        #: When the last write committed, when the first one the file lacks did (None: none since the timer's last
        #: checkpoint), and the timer that folds the log into the file once writes pause (`_checkpoint_when_quiet`).
        self._last_commit = 0.0
        self._unfolded_since: float | None = None
        self._quiet_timer: threading.Timer | None = None
        self._graph = GraphMirror(lambda key, aliases: schema.name_keys(
            NodeRecord(namespace="", key=key, name=key, type="", aliases=tuple(aliases))),
            text_budget=int(passage_texts_mb * 2**20))
        self._vectors = VectorSearch(self._lock, self.path, choice=vector_index, ann_min_rows=ann_min_rows,
                                     ann_nprobe=ann_nprobe, hnsw_min_rows=hnsw_min_rows, use_vss=use_vss)
        self._keywords = KeywordIndex()
        self._reports = communities.ReportIndex()
        #: Parts of the mirror ("graph", "vectors") a restore left to load from the file again (see `_fresh`).
        self._stale: set[str] = set()

    # -- lifecycle -------------------------------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self._con is not None:
                return
            if not self._read_only_option:
                self.read_only_reason = connection.why_read_only(self.path)
                self.read_only = bool(self.read_only_reason)
            self._con, refused = connection.connect(self.path, self.read_only)
            try:
                self._identity = file_identity.identity(self.path)  # DuckDB has created a new file by now
                if self._identity is None:
                    raise FileNotFoundError(f"{self.path} was removed as it was opened")
            except OSError as exc:
                self._con.close()
                self._con = None
                raise StoreError(f"cannot open {self.path}: {exc}") from exc
            if refused:
                self.read_only, self.read_only_reason = True, refused
            try:
                settings.apply_session_settings(self._con, self.memory_limit)
                self._vectors.load_vss(self._con)
                schema.ensure(self._con, self.path, self.read_only, self._transaction,
                              lambda version: maintenance.copy_before_upgrade(self._con, self.path, version))
                self._stale.clear()
                self._load_vectors()
                self._graph.load(self._con)
                # The keyword build's join and sort need working memory (a 1M-entity file's passages overflowed the
                # lean limit): it runs under the store's limit, and what its and the graph's reads left cached goes.
                self._load_keywords()
                settings.drop_cache(self._con, self.memory_limit, self.path)
            except BaseException as exc:
                connection.cancel_if_interrupted(self._con, exc)
                self._con.close()
                self._con = None
                if damage := connection.damaged(self.path, exc):  # DuckDB reads most blocks only now
                    raise damage from exc
                raise

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                # A query that Ctrl-C interrupted may still run (DuckDB only stops waiting for it), and the
                # statements below would wait for its end. None other runs: every query holds the lock.
                self._con.interrupt()
            moved = self._moved()
            try:
                if moved is None:  # else their writes would be refused (derived data: the next open builds them)
                    self._save_layouts()
                    self._save_keywords()
            finally:  # also after Ctrl-C in it: the file is still closed
                self._stop_quiet_timer()  # the checkpoint below does its work
                self._vectors.close()
                self._reports.forget()
                if self._con is not None:
                    if moved is not None:
                        # DuckDB's checkpoint, explicit or at shutdown, deletes the write-ahead log at the path by
                        # name: the log of another file, if one is there now. Without it nothing is lost: the log
                        # of the file opened keeps its last writes, replayed when that file is opened again.
                        log.warning("closed without a checkpoint: %s is no longer the file this server opened",
                                    self.path)
                        self._disable_checkpoint_on_shutdown()
                    elif not self.read_only:
                        self._checkpoint("on close")  # closing must not fail for it
                    self._con.close()
                    self._con = None

    def _moved(self) -> str | None:
        """Why the open file must not be written (deleted, moved or replaced: see file_identity.py), or None."""
        if self._con is None or self._identity is None:
            return None
        return file_identity.moved_message(self.path, self._identity)

    def _checkpoint(self, when: str) -> Exception | None:
        """Fold DuckDB's write-ahead log into the file. A failure is logged and returned, never raised: the log
        keeps what was committed, and the next checkpoint (or open) folds it."""
        try:
            self._con.execute("CHECKPOINT")
        except Exception as exc:
            log.warning("checkpoint %s failed (%s); what was written stays in %s.wal", when,
                        connection.one_line(exc), self.path)
            return exc
        return None

    def _checkpoint_later(self) -> None:
        """After a commit: fold the log into the file once no write has committed for QUIET_CHECKPOINT_SECONDS (or
        CHECKPOINT_LATEST_SECONDS after the first write it lacks)."""
        self._last_commit = time.monotonic()
        if self._unfolded_since is None:
            self._unfolded_since = self._last_commit
        if self._quiet_timer is None:
            self._start_quiet_timer(min(settings.QUIET_CHECKPOINT_SECONDS, settings.CHECKPOINT_LATEST_SECONDS))

    def _start_quiet_timer(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self._checkpoint_when_quiet)
        timer.daemon = True  # never keeps the process alive: a close checkpoints anyway, a crash leaves the log
        self._quiet_timer = timer
        timer.start()

    def _stop_quiet_timer(self) -> None:
        if self._quiet_timer is not None:
            self._quiet_timer.cancel()
            self._quiet_timer = None
        self._unfolded_since = None

    def _checkpoint_when_quiet(self) -> None:
        """The timer's work (see settings.QUIET_CHECKPOINT_SECONDS): a checkpoint under the store's lock once writes
        have paused (or the first unfolded one is CHECKPOINT_LATEST_SECONDS old), else the timer again for the rest of
        the wait. Not after close, nor on a file that moved."""
        import duckdb  # imported when a file is opened: registering the plugin stays cheap

        with self._lock:
            if self._quiet_timer is not threading.current_thread():  # stopped by close while it waited for the lock
                return
            self._quiet_timer = None
            if self._con is None or self.read_only:
                return
            now, paused_at = time.monotonic(), self._last_commit + settings.QUIET_CHECKPOINT_SECONDS
            due = min(paused_at, (self._unfolded_since or now) + settings.CHECKPOINT_LATEST_SECONDS)
            if due > now:
                self._start_quiet_timer(due - now)
                return
            self._unfolded_since = None
            if (moved := self._moved()) is not None:  # its checkpoint would delete the log now at the path: see close
                log.warning("the write-ahead log was not folded into the file: %s", moved)
                return
            when = "after writes paused" if paused_at <= now else "of writes that did not pause"
            if isinstance(self._checkpoint(when), duckdb.FatalException):
                # An invalidated database fails every read until the file is opened again (as a write does).
                log.warning("DuckDB gave up on %s after the failed checkpoint%s", self.path, self._reopen_after_fatal())

    def _disable_checkpoint_on_shutdown(self) -> None:
        try:
            self._con.execute("PRAGMA disable_checkpoint_on_shutdown")
        except Exception as exc:  # closing must not fail; the log says what may follow
            log.warning("could not turn off DuckDB's checkpoint on closing %s: %s", self.path, exc)

    def _load_vectors(self) -> None:
        info = self.embedder_info()
        if info is None:
            return
        if not self.read_only:
            vector_tables.create(self._con, info[1])  # files bound before edge vectors existed lack one
        self._vectors.new_indexes(self._con, info[1])
        with self._lean_cache():  # streaming reads by rowid range: nothing to keep cached
            self._vectors.load(self._con)

    def _load_keywords(self) -> None:
        """Read the keyword index saved in the file, or build it from the tables (at open, after a restore)."""
        saved = saved_keywords.read(self._con, self.path)
        if saved is not None:
            self._keywords = saved
            return
        self._keywords = KeywordIndex()
        self._keywords.build({kind: keyword_texts.all_rows(self._con, self._graph, kind) for kind in KINDS})

    def _save_keywords(self) -> None:
        """Save the keyword index when it changed (derived data: a reopen need not build it again)."""
        if self.read_only or self._con is None:
            return
        if "graph" in self._stale:
            # An import left it stale: built now, at the end of the import, rather than by the next open (a command
            # that only reads would otherwise build it and write it to the file).
            try:
                self._graph.load(self._db)
                self._load_keywords()
            except Exception as exc:  # derived data: closing must not fail for it
                if connection.interrupted(exc):
                    raise
                log.warning("building the keyword index of %s after the import failed (%s); the next open builds "
                            "it", self.path, exc)
                return
            self._stale.discard("graph")
        saved_keywords.save(self._keywords, self._transaction, self.path)

    def _save_layouts(self) -> None:
        """Save the IVF layouts built since the last save (derived data: a reopen need not build them again)."""
        if self.read_only or self._con is None:
            return
        self._vectors.save_layouts(self._transaction)

    def _lean_cache(self) -> AbstractContextManager[None]:
        return settings.lean_cache(self._con, self.memory_limit, self.path)

    @property
    def _db(self) -> Any:
        if self._con is None:
            raise StoreError(f"the store {self.path} is not open")
        return self._con

    @property
    def _current(self) -> Any:
        """The connection, once the mirror is up to date with the file (see `_fresh`)."""
        con = self._db
        self._fresh()
        return con

    def _mirror(self) -> Any:
        """The in-memory graph, up to date with the file (see `_fresh`); raises when the store is not open. Read it
        under the store's lock."""
        self._current  # noqa: B018 - raises when the store is not open
        return self._graph

    def _fresh(self) -> None:
        """Load what a restore left stale of the mirror (see `_apply`) before it is read or changed."""
        if not self._stale:
            return
        with self._lock:
            if "graph" in self._stale:
                self._graph.load(self._db)
                self._load_keywords()
            if "vectors" in self._stale:
                self._load_vectors()
            self._stale.clear()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self._lock:
            self._db.execute("BEGIN TRANSACTION")
            try:
                yield self._con
                # Just before the commit, so that a file deleted or replaced during a long write (an import) is
                # caught too: one stat() per transaction, whatever its size. The rollback below drops the write.
                if (moved := self._moved()) is not None:
                    log.error("write refused: %s", moved)  # the caller is told; whoever runs the server too
                    raise StoreError(moved)
            except BaseException as exc:
                connection.cancel_if_interrupted(self._con, exc)  # else the ROLLBACK waits for the query's end
                try:
                    self._con.execute("ROLLBACK")
                except Exception as failure:  # the failed statement may have ended the transaction already
                    log.debug("rollback after %s: %s", type(exc).__name__, failure)
                self._raise_storage_error(exc)
                raise
            else:
                try:
                    self._con.execute("COMMIT")
                except Exception as exc:  # DuckDB rolls a failed commit back itself
                    self._raise_storage_error(exc)
                    raise
                self._checkpoint_later()

    # -- embedder binding ------------------------------------------------------------------------------

    def embedder_info(self) -> tuple[str, int] | None:
        with self._lock:
            return schema.embedder_info(self._db)

    def bind_embedder(self, embedder_id: str, dimensions: int) -> None:
        """Record the embedder of a file that holds no vectors: a fresh one, or one bound to another embedder by a
        write that stored nothing (a mistyped model, a width the server ignores). Such a binding would otherwise
        refuse the corrected embedder for good; the new one is logged. A file with vectors refuses another."""
        with self._lock:
            info = self.embedder_info()
            if info == (embedder_id, dimensions):
                return
            if info is not None and (self.read_only or schema.holds_vectors(self._db)):
                schema.check_embedder(self.path, info, embedder_id, dimensions)
                return
            if self.read_only:
                raise StoreError(self.read_only_message() + " It has no embedder recorded yet: it holds no vectors.")
            with self._transaction() as con:  # the lock keeps every write out until the file is bound
                schema.bind_embedder(con, embedder_id, dimensions, replacing=info is not None)
            if info is not None:
                log.warning("%s held no vectors: bound to %r (%d dimensions) instead of %r (%d dimensions), which it "
                            "recorded (a first write that failed after recording it, or everything deleted)",
                            self.path, embedder_id, dimensions, info[0], info[1])
            self._vectors.new_indexes(self._con, dimensions)

    # -- writes: the one place the mirror changes --------------------------------------------------------

    def write(self, batch: WriteBatch) -> WriteSummary:
        if self.read_only:
            raise StoreError(self.read_only_message())
        with self._lock:
            self._fresh()  # a write reads the mirror (the ids of names) and changes it
            dimensions = writes.require_dimensions(batch, self.embedder_info(), self.path)
            with self._committing([*batch.nodes, *batch.chunks]) as writer:
                summary = writer.write(batch, dimensions)
            for namespace in batch.drop_communities:  # after the commit, as the mirror (see `_committing`)
                self._reports.forget(namespace)
            self._save_layouts()  # of builds finished since the last write: a reopen then need not build them
        return summary

    def restore(self, snapshot: Snapshot) -> WriteSummary:
        if self.read_only:
            raise StoreError(self.read_only_message())
        batch = WriteBatch(nodes=snapshot.nodes, edges=snapshot.edges, documents=snapshot.documents,
                           chunks=snapshot.chunks)
        with self._lock:
            self._fresh()
            dimensions = writes.require_dimensions(batch, self.embedder_info(), self.path)
            with self._committing([*snapshot.nodes, *snapshot.chunks]) as writer:
                summary = restore_snapshot(writer, snapshot, batch, dimensions)
        return summary

    @contextmanager
    def restore_stream(self) -> Iterator[Callable[[Snapshot], WriteSummary]]:
        if self.read_only:
            raise StoreError(self.read_only_message())
        reload: set[str] = set()
        with self._lock:
            self._fresh()  # before the writer: it asks whether the file has vector tables
        try:
            with self._lock, self._committing([]) as writer:
                # No records to take ids back from on a rollback: the caller drops each snapshot once written.

                def restore(snapshot: Snapshot) -> WriteSummary:
                    batch = WriteBatch(nodes=snapshot.nodes, edges=snapshot.edges, documents=snapshot.documents,
                                       chunks=snapshot.chunks)
                    dimensions = writes.require_dimensions(batch, self.embedder_info(), self.path)
                    # One transaction for the whole stream: its rows go to DuckDB's temporary folder, not memory.
                    settings.bound_transaction_cache(self._db, self.memory_limit)
                    summary = restore_snapshot(writer, snapshot, batch, dimensions)
                    # The mirror is loaded again from the file after the commit, so the changes noted for it
                    # (ids, vectors) need not be kept from one snapshot to the next: only what to load again.
                    reload.update(writer.changes.reload or ())
                    writer.changes = MirrorChanges(reload=frozenset(reload))
                    return summary

                yield restore
        finally:
            with self._lock:
                if self._con is not None:
                    settings.set_limit(self._con, self.memory_limit)

    @contextmanager
    def _committing(self, records: list[Any]) -> Iterator[Writer]:
        """One write transaction, then the mirror brought up to it: the mirror never runs ahead of a commit.

        The writer notes the changes its statements make to the mirror; they are applied once the transaction has
        committed. If it rolls back, nothing is applied, and the ids the transaction gave `records` (the batch's
        nodes and chunks) are taken back from them."""
        ids_before = [(record, record.id) for record in records]
        writer = Writer(self._db, self._graph, self._vectors.stored_precision, bool(self._vectors.indexes))
        try:
            with self._transaction():
                yield writer
        except BaseException:
            for record, record_id in ids_before:
                record.id = record_id
            raise
        self._apply(writer.changes)

    def _apply(self, changes: MirrorChanges) -> None:
        """A committed write's changes to the mirror (see `_committing`); what a restore changed is loaded from
        the file again when next needed (`_fresh`)."""
        if changes.reload is not None:
            if "vectors" in changes.reload:
                self._vectors.drop()  # now: they take the most memory
            self._stale.update(changes.reload)
            return
        try:
            for change, args in changes.graph:
                change(*args)
        except Exception:  # the file is the truth: rebuild the mirror from it rather than serve a wrong graph
            log.exception("updating the in-memory graph failed; reloading it from %s", self.path)
            self._graph.load(self._db)
        self._vectors.apply(changes.removed_vectors, changes.written_vectors)
        try:
            for kind, ids in changes.keywords.items():
                if ids:
                    self._keywords.replace(kind, ids, keyword_texts.rows_of(self._db, self._graph, kind, sorted(ids)))
        except Exception as exc:  # as for the graph: rebuild from the file rather than miss or invent matches
            if connection.interrupted(exc):  # Ctrl-C during its read: stop, not rebuild the whole index
                raise
            log.exception("updating the keyword index failed; building it again from %s", self.path)
            self._load_keywords()

    # -- reads from the mirror (the search path) -------------------------------------------------------

    def find_nodes(self, namespace: str, keys: Iterable[str]) -> list[NodeRecord]:
        with self._lock:
            graph = self._mirror()
            return graph.node_records(graph.find(namespace, set(keys)))

    def get_nodes(self, ids: Iterable[int]) -> list[NodeRecord]:
        with self._lock:
            return self._mirror().node_records(ids)

    def edges_among(
        self, node_ids: Sequence[int], namespace: str, *, include_expired: bool = False
    ) -> list[EdgeRecord]:
        if not node_ids:
            return []
        with self._lock:
            return self._mirror().edges_among(node_ids, namespace, include_expired=include_expired)

    def get_edges(self, ids: Iterable[int]) -> list[EdgeRecord]:
        with self._lock:
            return self._mirror().get_edges(ids)

    def edge_types(self, ids: Iterable[int]) -> dict[int, str]:
        with self._lock:
            return self._mirror().edge_types(ids)

    def get_chunks(self, ids: Iterable[int]) -> list[ChunkRecord]:
        ids = list({int(i) for i in ids})
        if not ids:
            return []
        with self._lock:
            con = self._current
            held = self._graph.chunk_records(ids)
            return held if held is not None else reads.chunks(con, ids)

    def chunk_documents(self, ids: Iterable[int]) -> dict[int, str]:
        with self._lock:
            return self._mirror().chunk_documents(list(ids))

    def get_observations(self, node_ids: Iterable[int]) -> dict[int, list[str]]:
        with self._lock:
            return self._mirror().observations(node_ids)

    def nodes_containing(self, namespace: str, text: str, *, limit: int = 1_000) -> list[int]:
        # From the mirror's folded texts: ignoring accents as names do, without folding every text per query.
        with self._lock:
            return self._mirror().nodes_containing(namespace, text, limit)

    def adjacent_chunks(self, ids: Iterable[int], namespace: str) -> dict[int, tuple[int | None, int | None]]:
        with self._lock:
            return self._mirror().adjacent_chunks(list(ids), namespace)

    def chunk_times(self, ids: Iterable[int], namespace: str) -> dict[int, datetime]:
        with self._lock:
            return self._mirror().chunk_times(ids)

    def timed_chunks(self, namespace: str, after: datetime | None, before: datetime | None) -> Any:
        with self._lock:
            return self._mirror().timed_chunks(namespace, naive_utc(after), naive_utc(before))

    def changes(self, namespace: str, since: datetime | None, until: datetime | None, limit: int) -> list[Any]:
        with self._lock:
            return reads.changes(self._db, namespace, naive_utc(since), naive_utc(until), limit)

    def document_titles(self, ids: Iterable[str], namespace: str) -> dict[str, str]:
        with self._lock:
            return self._mirror().document_titles(namespace, ids)

    def neighbor_ends(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None, limit: int = 1000
    ) -> tuple[Any, Any, Any, Any]:
        with self._lock:
            return self._mirror().neighbor_ends(node_ids, namespace, naive_utc(as_of), limit)

    def mentioned_chunks(self, chunk_ids: Iterable[int]) -> set[int]:
        with self._lock:
            return self._mirror().mentioned_chunks(chunk_ids)

    def extraction_marks(self, chunk_ids: Iterable[int]) -> dict[int, str]:
        with self._lock:
            return reads.extraction_marks(self._db, list(dict.fromkeys(chunk_ids)))

    def mark_extracted(self, chunk_ids: Iterable[int], extractor_id: str) -> None:
        if self.read_only:
            raise StoreError(self.read_only_message())
        with self._lock:
            with self._transaction() as con:
                writes.mark_extracted(con, list(dict.fromkeys(chunk_ids)), extractor_id)

    def chunks_mentioning(self, node_ids: Sequence[int], *, limit: int = 1000) -> list[tuple[int, int]]:
        if not node_ids:
            return []
        with self._lock:
            return self._mirror().chunks_mentioning(node_ids, limit)

    def links(
        self, node_ids: Sequence[int], chunk_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None
    ) -> Links:
        with self._lock:
            return self._mirror().links(node_ids, chunk_ids, namespace, naive_utc(as_of))

    def passage_links(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None
    ) -> tuple[Any, tuple[Any, Any]]:
        with self._lock:
            return self._mirror().passage_links(node_ids, namespace, naive_utc(as_of))

    def vector_search(self, kind: VectorKind, query: Any, k: int, namespace: str) -> list[tuple[int, float]]:
        self._fresh()
        return self._vectors.search(kind, query, k, namespace)

    def keyword_search(self, kind: VectorKind, query: str, k: int, namespace: str) -> list[tuple[int, float]]:
        words = terms(query)
        with self._lock:
            self._current  # noqa: B018 - raises when the store is not open
            return self._keywords.search(kind, words, k, namespace)

    def keyword_scores(self, kind: VectorKind, query: str, ids: Sequence[int], namespace: str) -> dict[int, float]:
        words = terms(query)
        with self._lock:
            self._current  # noqa: B018 - raises when the store is not open
            return self._keywords.scores(kind, words, list(ids), namespace)

    def similarity_array(self, kind: VectorKind, ids: Any, query: Any) -> Any:
        self._fresh()
        return self._vectors.similarity_array(kind, ids, query)

    def get_vectors(self, kind: VectorKind, ids: Iterable[int]) -> dict[int, Any]:
        ids = list(ids)
        with self._lock:
            con = self._current
            held = self._vectors.held_vectors(kind, ids)
            return held if held is not None else self._vectors.file_vectors(con, kind, ids)

    # -- reads answered by SQL -------------------------------------------------------------------------

    def list_nodes(self, namespace: str, *, offset: int = 0, limit: int = 100) -> list[NodeRecord]:
        with self._lock:
            return reads.list_nodes(self._db, namespace, offset, limit)

    def list_edges(
        self, namespace: str, *, offset: int = 0, limit: int = 100, include_expired: bool = False
    ) -> list[EdgeRecord]:
        with self._lock:
            return reads.list_edges(self._db, namespace, offset, limit, include_expired)

    def edges_from(self, node_ids: Iterable[int], namespace: str, *, limit: int = 1000) -> list[EdgeRecord]:
        with self._lock:
            return reads.edges_from(self._db, sorted({int(i) for i in node_ids}), namespace, limit)

    def get_documents(self, ids: Iterable[str], namespace: str) -> list[DocumentRecord]:
        with self._lock:
            return reads.documents(self._db, ids, namespace)

    def document_chunks(self, namespace: str, document_ids: Iterable[str]) -> list[ChunkRecord]:
        with self._lock:
            return reads.document_chunks(self._db, namespace, document_ids)

    def document_chunk_window(self, namespace: str, document_id: str, start: int, stop: int
                              ) -> tuple[list[ChunkRecord], int]:
        with self._lock:
            return reads.document_chunk_window(self._db, namespace, document_id, start, stop)

    def stats(self, namespace: str | None = None) -> dict[str, Any]:
        with self._lock:
            return reads.stats(self._db, namespace)

    def relation_counts(self, at: datetime) -> dict[str, int]:
        with self._lock:
            return reads.relation_counts(self._db, naive_utc(at))

    def type_examples(self, namespace: str, *, limit: int | None = 50) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return reads.type_examples(self._db, namespace, limit)

    def most_connected(self, namespace: str, *, limit: int = 20) -> list[tuple[int, int]]:
        with self._lock:
            return reads.most_connected(self._db, namespace, limit)

    def types_held_many(self, namespace: str, types: Iterable[str]) -> set[str]:
        with self._lock:
            return reads.types_held_many(self._db, namespace, sorted(set(types)))

    def namespaces(self) -> list[str]:
        with self._lock:
            return reads.namespaces(self._db)

    def namespace_summaries(self) -> list[dict[str, Any]]:
        with self._lock:
            return reads.namespace_summaries(self._db)

    def list_documents(self, namespace: str, *, offset: int = 0, limit: int = 100) -> list[DocumentRecord]:
        with self._lock:
            return reads.list_documents(self._db, namespace, offset, limit)

    def edge_evidence(self, edge_ids: Iterable[int]) -> list[tuple[int, int]]:
        with self._lock:
            return reads.edge_evidence(self._db, edge_ids)

    def written_by_hand(self, kind: Literal["node", "edge"], ids: Iterable[int]) -> set[int]:
        with self._lock:
            return reads.written_by_hand(self._db, kind, ids)

    # -- communities (derived data: see communities.py) --------------------------------------------------

    def edge_arrays(self, namespace: str, at: datetime) -> tuple[Any, Any, Any, Any]:
        with self._lock:
            return communities.edge_arrays(self._db, namespace, naive_utc(at))

    def replace_communities(self, namespace: str, found: Sequence[Any], build: Any) -> None:
        if self.read_only:
            raise StoreError(self.read_only_message())
        with self._lock:
            with self._transaction() as con:
                communities.replace(con, namespace, found, build)
            self._reports.forget(namespace)

    def save_reports(self, found: Sequence[Any]) -> None:
        if self.read_only:
            raise StoreError(self.read_only_message())
        with self._lock:
            with self._transaction() as con:
                communities.save_reports(con, found)
            self._reports.forget()

    def communities(self, namespace: str, ids: Sequence[int] | None = None, *, members: bool = True,
                    vectors: bool = False) -> list[Any]:
        with self._lock:
            return communities.read(self._db, namespace, ids, members=members, vectors=vectors)

    def community_build(self, namespace: str) -> Any:
        with self._lock:
            return self._reports.build(self._db, namespace)

    def changed_since_build(self, namespace: str, since: datetime, now: datetime) -> int:
        with self._lock:
            return communities.changed_since(self._db, namespace, naive_utc(since), naive_utc(now))

    def periods_passed(self, namespace: str, since: datetime, until: datetime, limit: int) -> dict[int, datetime]:
        with self._lock:
            return communities.periods_passed(self._db, namespace, naive_utc(since), naive_utc(until), limit)

    def next_period_boundary(self, namespace: str, after: datetime) -> datetime | None:
        with self._lock:
            return communities.next_period_boundary(self._db, namespace, naive_utc(after))

    def node_communities(self, node_ids: Sequence[int], namespace: str) -> dict[int, list[tuple[int, int, str]]]:
        with self._lock:
            return communities.node_communities(self._db, list(node_ids), namespace)

    def search_reports(self, namespace: str, vector: Any, query: str, candidates: Sequence[int]
                       ) -> tuple[dict[int, float], dict[int, float]]:
        with self._lock:
            return self._reports.search(self._db, namespace, vector, query, candidates)

    # -- health, backup, failures ------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        with self._lock:
            moved = self._moved()
            # doctor's place for "writes are refused, and why"; the file's size cannot be read at a path it left.
            return maintenance.health(self._current, self.path, self._vectors, self._graph, self._keywords,
                                      read_only_reason=moved or self.read_only_reason,
                                      memory_limit=self.memory_limit, passage_texts_mb=self.passage_texts_mb,
                                      with_space=moved is None)

    def schema_upgrade(self) -> dict[str, Any] | None:
        """What the next writable open would upgrade (schema versions, where the copy of the file is kept), or None;
        asked before `open`, and changes nothing (`duckgraph doctor` reports it rather than upgrade the file)."""
        with self._lock:
            return None if self._con is not None else schema.upgrade_due(self.path)

    def backup(self, destination: Path) -> None:
        destination = Path(destination)
        with self._lock:
            maintenance.backup(self._db, self.path, destination, self._reopen_after_fatal)

    def read_only_message(self) -> str:
        """What a refused write says when the file is open read-only."""
        return connection.read_only_message(self.path, self.read_only_reason)

    def _raise_storage_error(self, exc: BaseException) -> None:
        """Raise a StoreError naming the file when `exc` is DuckDB failing to write it (see `write_failure`)."""
        error = connection.write_failure(self.path, exc, self._reopen_after_fatal)
        if error is not None:
            raise error from exc

    def _reopen_after_fatal(self) -> str:
        """Close and open the file again after DuckDB invalidated it; say how that went (for an error message)."""
        try:
            self.close()
        except Exception as failure:
            log.warning("closing %s after a fatal error failed: %s", self.path, failure)
            self._con = None
        self._vectors.drop()
        try:
            self.open()
        except Exception as failure:
            log.error("reopening %s failed: %s", self.path, failure)
            return (f"; reopening it failed ({connection.one_line(failure)}): restart duckgraph once the problem "
                    "is fixed")
        return "; duckgraph reopened the file"
