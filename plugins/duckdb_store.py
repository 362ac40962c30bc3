"""The DuckDB graph store: nodes, edges, documents, chunks and vectors in one file.

Vectors live in side tables created when the file is bound to an embedder (their width is the embedder's).
The nearest-neighbour index is derived data kept in memory and rebuilt from those tables at every open, so
a crash or an unclean close can never leave a stale index behind: below `ann_min_rows` vectors an exact scan
over a numpy matrix answers; above it an IVF index built in numpy (duckdb_memory.VectorIndex) does, built in
the background while the exact scan answers. The vss HNSW index is an option (vector_index = "hnsw").

The graph itself is mirrored in memory too (duckdb_memory.GraphMirror: node records and names, a CSR adjacency
of the edges, provenance links), so that a search never waits for DuckDB, which answers a lookup of a few
hundred rows by id with a scan of the table. The tables stay the truth: the mirror is loaded from them at open
and updated after each committed write.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from duckgraph.ports import (
    ChunkRecord,
    DocumentRecord,
    EdgeRecord,
    EdgeWrite,
    EmbedderMismatchError,
    GraphStore,
    InvalidInputError,
    Links,
    NodeRecord,
    Snapshot,
    StoreError,
    VectorKind,
    WriteBatch,
    WriteSummary,
    entity_key,
    hookimpl,
    isin_ids,
    loose_key,
)
from duckgraph.plugins.duckdb_memory import DEFAULT_ANN_MIN_ROWS, GraphMirror, SavedLayout, VectorIndex, to_bfloat16

log = logging.getLogger(__name__)


class _NumpyOnFirstUse:
    """Stands in for `numpy` until first used: registering the plugin must not cost the MCP handshake
    numpy's ~0.1 s import."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        globals()["np"] = numpy
        return getattr(numpy, name)


np: Any = _NumpyOnFirstUse()

SCHEMA_VERSION = 1
#: Version of the derived rows of `node_names`; files with an older one get them rebuilt at open.
NAME_KEYS_VERSION = "2"
#: With vector_index = "hnsw": below this many vectors an exact scan answers while the HNSW index is not needed.
DEFAULT_HNSW_MIN_ROWS = 50_000
#: Passage text kept in memory for searches, at most (MB): ~125,000 passages of 2 KB, whose vectors (1.5 KB each at
#: 384 dimensions) the store holds anyway. Above it each search reads its 5 passages from the file (~3.5 ms at
#: 200k passages, 108 MB of text, when the budget was 64 MB).
DEFAULT_PASSAGE_TEXTS_MB = 256
#: Write-ahead log size at which a commit folds the log into the file (DuckDB's default is 16MB). A checkpoint
#: rewrites the last, partly filled row group of every table it touches (up to 122,880 rows: ~190 MB of a
#: 384-float vector table), so at 16MB a bulk load of vectors checkpointed on every call, each time costlier as
#: the tables grew (100k nodes / 500k edges: 275 nodes/s). A crash leaves at most this much log to replay at open.
CHECKPOINT_THRESHOLD = "256MB"
#: Compression methods the store's writes leave out. DuckDB compresses FLOAT columns with ALP or ALPRD; on 384-float
#: embeddings it picks ALPRD, which saves ~11% of a file written in one checkpoint (10k entities: 97 against 109 MB)
#: but costs time at every checkpoint and read (150k vectors: checkpoint 3.4 against 2.1 s, read 1.4 against 1.0 s),
#: and files a bulk load grew through many checkpoints came out larger with it (100k entities: 1,657 against
#: 1,275 MB; 1M: 16.0 against 11.6 GB).
DISABLED_COMPRESSION = "alp,alprd"
#: What DuckDB may keep cached while open copies the vectors into memory, and after it has copied the graph
#: (see `_lean_cache`); the store's memory_limit applies again at once.
CACHE_AFTER_LOAD = "256MB"
#: DuckDB's own cache limit when the store option memory_limit is not given: this share of the machine's memory,
#: at least 1 GiB. DuckDB's default (80%) ignores what the store holds itself (every vector and the graph), and
#: its cache keeps pages of tables the store already holds in memory: a bulk load of 1M entities and 5M relations
#: would fill both (measured at 100k / 500k: 1.3 GB of DuckDB cache beside 0.9 GB of vectors).
DEFAULT_MEMORY_SHARE = 0.25
#: What DuckDB accepts as a memory size.
_MEMORY_SIZE = re.compile(r"\s*\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", re.IGNORECASE)
#: The vector search paths `vector_index` chooses from (see `DuckDBStore`).
VECTOR_INDEXES = ("ivf", "exact", "hnsw")

_SCHEMA = """
CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL);
CREATE SEQUENCE node_ids START 1;
CREATE SEQUENCE edge_ids START 1;
CREATE SEQUENCE chunk_ids START 1;
CREATE TABLE nodes (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    key VARCHAR NOT NULL,
    name VARCHAR NOT NULL,
    type VARCHAR NOT NULL,
    description VARCHAR NOT NULL DEFAULT '',
    aliases VARCHAR[] NOT NULL DEFAULT [],
    properties JSON NOT NULL DEFAULT '{}',
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    UNIQUE (namespace, key)
);
-- Every name a node answers to (its key and its alias keys), for exact name lookups.
CREATE TABLE node_names (namespace VARCHAR NOT NULL, key VARCHAR NOT NULL, node_id BIGINT NOT NULL);
CREATE INDEX node_names_key ON node_names (namespace, key);
CREATE INDEX node_names_node ON node_names (node_id);
CREATE TABLE observations (node_id BIGINT NOT NULL, text VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL);
CREATE TABLE edges (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    source_id BIGINT NOT NULL,
    target_id BIGINT NOT NULL,
    type VARCHAR NOT NULL,
    description VARCHAR NOT NULL DEFAULT '',
    weight DOUBLE NOT NULL DEFAULT 1.0,
    properties JSON NOT NULL DEFAULT '{}',
    valid_from TIMESTAMP,
    valid_until TIMESTAMP,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX edges_source ON edges (source_id);
CREATE INDEX edges_target ON edges (target_id);
CREATE TABLE documents (
    namespace VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    title VARCHAR NOT NULL DEFAULT '',
    text VARCHAR NOT NULL,
    metadata JSON NOT NULL DEFAULT '{}',
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (namespace, id)
);
CREATE TABLE chunks (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    document_id VARCHAR NOT NULL,
    ordinal INTEGER NOT NULL,
    text VARCHAR NOT NULL
);
CREATE INDEX chunks_document ON chunks (namespace, document_id);
-- Provenance: which chunks mention a node, which chunks support an edge.
CREATE TABLE mentions (chunk_id BIGINT NOT NULL, node_id BIGINT NOT NULL, PRIMARY KEY (chunk_id, node_id));
CREATE INDEX mentions_node ON mentions (node_id);
CREATE TABLE edge_evidence (edge_id BIGINT NOT NULL, chunk_id BIGINT NOT NULL, PRIMARY KEY (edge_id, chunk_id));
CREATE TABLE communities (
    id BIGINT PRIMARY KEY,
    namespace VARCHAR NOT NULL,
    level INTEGER NOT NULL,
    title VARCHAR NOT NULL DEFAULT '',
    summary VARCHAR NOT NULL DEFAULT ''
);
CREATE TABLE community_members (community_id BIGINT NOT NULL, node_id BIGINT NOT NULL);
"""
_EXPECTED_TABLES = {
    "meta", "nodes", "node_names", "observations", "edges", "documents", "chunks", "mentions", "edge_evidence",
    "communities", "community_members",
}
#: Vector kind -> (vector table, its id column, the table of the things it embeds).
_VECTOR_TABLES: dict[str, tuple[str, str, str]] = {
    "node": ("node_vectors", "node_id", "nodes"),
    "chunk": ("chunk_vectors", "chunk_id", "chunks"),
    "edge": ("edge_vectors", "edge_id", "edges"),
}
#: How each kind's vectors are held in memory and stored in a new file. The relations' are ~5 per entity, and only
#: scored against a query (a fact's similarity), never searched for recall: in bfloat16 they take half the memory
#: (at 5M relations, 3.8 GB instead of 7.7) and half the file, go into DuckDB ~7 times as fast (as BLOBs of 2 bytes
#: a dimension, not FLOAT[d]: 390k against 55k rows a second), and a similarity moves by at most ~3e-4. Files
#: written before they were stored so keep FLOAT[d] columns (float32), which the store reads and writes as they are.
_PRECISION = {"node": "float32", "chunk": "float32", "edge": "bfloat16"}
#: IVF layouts saved so that a reopen need not build the index again (`SavedLayout`): derived data, created on
#: the first save; a layout lost or refused costs a build.
_LAYOUTS = (
    "CREATE TABLE IF NOT EXISTS vector_layouts "
    "(kind VARCHAR PRIMARY KEY, saved_at TIMESTAMP NOT NULL, info JSON NOT NULL, layout BLOB NOT NULL)"
)
#: Kinds whose approximate index is built as soon as they have enough vectors. The built-in search reads edge
#: vectors by id only (a fact's similarity), so theirs, the largest (5 a node), waits for a search that asks.
_INDEXED_FROM_THE_START = frozenset({"node", "chunk"})


def _now() -> datetime:
    """Times are stored as naive UTC (TIMESTAMP): reading TIMESTAMPTZ back would need pytz."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def vss_extension_path() -> Path | None:
    """The vss extension file shipped by the duckdb-extension-vss package, if installed."""
    try:
        import duckdb_extension_vss  # a data-only package: its folder holds the extension binary
    except ImportError:
        return None
    import duckdb

    candidates = sorted(Path(duckdb_extension_vss.__file__).parent.glob(f"extensions/{duckdb.__version__}/*.duckdb_extension"))
    if not candidates:
        candidates = sorted(Path(duckdb_extension_vss.__file__).parent.glob("extensions/*/vss.duckdb_extension"))
    return candidates[0] if candidates else None


def default_memory_limit() -> str:
    """DEFAULT_MEMORY_SHARE of the machine's memory, at least 1 GiB, as a DuckDB size."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): DuckDB's default share of 8 GiB
        total = 8 * 2**30
    return f"{max(1.0, DEFAULT_MEMORY_SHARE * total / 2**30):.1f}GiB"


class HnswMirror:
    """An in-memory vss HNSW index over a snapshot of a VectorIndex, for large vector sets.

    Built in the background; rows written after the snapshot are searched exactly and merged in.
    """

    def __init__(self, kind: str, dimensions: int, extension: Path) -> None:
        import duckdb

        self.kind = kind
        self.dimensions = dimensions
        self._con = duckdb.connect(":memory:")
        self._con.execute(f"LOAD '{extension}'")
        self._con.execute(f"CREATE TABLE v (id BIGINT PRIMARY KEY, ns INTEGER, e FLOAT[{dimensions}])")
        self._lock = threading.Lock()
        self.ready = False
        #: Ids written since the snapshot was taken; searched exactly and merged with the HNSW hits.
        self.fresh: set[int] = set()

    def build(self, ids: np.ndarray, vectors: np.ndarray, namespaces: np.ndarray) -> None:
        with self._lock:
            _insert_vectors(self._con, "v", ids, vectors, self.dimensions, extra={"ns": namespaces}, replace=False)
            self._con.execute("CREATE INDEX v_hnsw ON v USING HNSW (e) WITH (metric = 'cosine')")
            self.ready = True

    def search(self, query: np.ndarray, k: int, namespace_code: int) -> list[tuple[int, float]]:
        with self._lock:
            # The vector goes in as a literal of our own floats: as a bound list parameter it costs ~75 ms.
            literal = "[" + ",".join(repr(float(x)) for x in query) + "]"
            rows = self._con.execute(
                f"SELECT id, ns, array_cosine_distance(e, {literal}::FLOAT[{self.dimensions}]) AS d "
                f"FROM v ORDER BY d LIMIT {int(k) * 4}"
            ).fetchall()
        return [(int(i), 1.0 - float(d)) for i, ns, d in rows if ns == namespace_code][:k]

    def close(self) -> None:
        self._con.close()


class DuckDBStore(GraphStore):
    """GraphStore on one DuckDB file. One connection, serialised by a lock (DuckDB connections are not
    thread-safe, and the MCP server calls tools from worker threads)."""

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
        if vector_index not in VECTOR_INDEXES:
            raise StoreError(f"vector_index must be one of {', '.join(VECTOR_INDEXES)}, not {vector_index!r}")
        if isinstance(passage_texts_mb, bool) or not isinstance(passage_texts_mb, int | float) or passage_texts_mb < 0:
            raise StoreError(f"passage_texts_mb must be a number of megabytes, 0 or more, not {passage_texts_mb!r}")
        if memory_limit is not None and not (isinstance(memory_limit, str) and _MEMORY_SIZE.fullmatch(memory_limit)):
            raise StoreError(f"memory_limit must be a size such as \"2GB\" or \"1.5GiB\", not {memory_limit!r}")
        self.path = Path(path).expanduser()
        self.read_only = read_only
        self._read_only_option = read_only
        #: Why the open file is read-only ("" when it is writable); see `open`.
        self.read_only_reason = "opened with the store option read_only = true" if read_only else ""
        self.hnsw_min_rows = hnsw_min_rows
        self.use_vss = use_vss
        self.vector_index = vector_index
        self.ann_min_rows = ann_min_rows
        self.ann_nprobe = ann_nprobe
        self.passage_texts_mb = passage_texts_mb
        self.memory_limit = memory_limit or default_memory_limit()
        self._graph = GraphMirror(lambda key, aliases: _name_keys(
            NodeRecord(namespace="", key=key, name=key, type="", aliases=tuple(aliases))),
            text_budget=int(passage_texts_mb * 2**20))
        #: Changes to the graph mirror made by the write in progress, applied once it commits.
        self._pending: list[Any] = []
        self._con: Any = None
        self._lock = threading.RLock()
        self._indexes: dict[str, VectorIndex] = {}
        #: Kind -> "float32" (a FLOAT[d] column) or "bfloat16" (a BLOB column): how this file stores the vectors.
        self._stored_precision: dict[str, str] = {}
        self._hnsw: dict[str, HnswMirror] = {}
        #: Kinds whose index is kept (built when due): those indexed from the start and those searched since open.
        self._searched: set[str] = set(_INDEXED_FROM_THE_START)
        self._vss: Path | None = None
        self._vss_problem = "not tried"
        self._hnsw_problem = ""

    # -- lifecycle -------------------------------------------------------------------------------------

    def open(self) -> None:
        import duckdb  # imported on open so that registering the plugin stays cheap

        with self._lock:
            if self._con is not None:
                return
            if not self._read_only_option:
                try:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"cannot create the folder for {self.path}: {exc}") from exc
                # A file (or folder) this user cannot write is opened read-only: reads work, writes say why not.
                self.read_only_reason = self._unwritable_reason()
                self.read_only = bool(self.read_only_reason)
                if self.read_only:
                    log.warning("%s is read-only (%s): opened for reading only", self.path, self.read_only_reason)
            try:
                try:
                    self._con = duckdb.connect(str(self.path), read_only=self.read_only)
                except duckdb.IOException as exc:
                    if self.read_only or _storage_problem(str(exc)) != "not writable" or not self.path.is_file():
                        raise
                    self._con = duckdb.connect(str(self.path), read_only=True)
                    self.read_only = True
                    self.read_only_reason = f"DuckDB cannot open it for writing: {_one_line(exc)}"
                    log.warning("%s is read-only (%s): opened for reading only", self.path, self.read_only_reason)
            except duckdb.IOException as exc:
                raise StoreError(_explain_open_error(self.path, exc)) from exc
            except duckdb.Error as exc:
                raise StoreError(f"{self.path} is not a usable DuckDB file: {exc}") from exc
            try:
                # Loading a big file takes seconds; DuckDB's progress bar would write to stdout (the stdio transport).
                self._con.execute("SET enable_progress_bar = false")
                self._con.execute(f"SET memory_limit = '{self.memory_limit}'")
                apply_write_settings(self._con)  # also for a read-only file: its backup is written with them
                self._load_vss()
                self._ensure_schema()
                self._load_vectors()
                self._graph.load(self._con)
                with self._lean_cache():  # drops what the graph's reads left cached
                    pass
            except BaseException:
                self._con.close()
                self._con = None
                raise

    def close(self) -> None:
        with self._lock:
            for mirror in self._hnsw.values():
                mirror.close()
            self._hnsw.clear()
            self._save_layouts()
            for index in self._indexes.values():
                index.close()
            self._searched = set(_INDEXED_FROM_THE_START)
            if self._con is not None:
                if not self.read_only:
                    try:
                        self._con.execute("CHECKPOINT")
                    except Exception as exc:  # closing must not fail; the WAL still holds the data
                        log.warning("checkpoint on close failed: %s", exc)
                self._con.close()
                self._con = None

    def _load_vss(self) -> None:
        if not self.use_vss:
            self._vss_problem = "disabled by the store option use_vss = false"
            return
        path = vss_extension_path()
        if path is None:
            self._vss_problem = "the duckdb-extension-vss package is not installed for this DuckDB version"
            return
        try:
            self._con.execute(f"LOAD '{path}'")
        except Exception as exc:
            self._vss_problem = f"loading {path} failed: {exc}"
            log.warning("vss could not be loaded, vector search uses an exact scan: %s", exc)
            return
        self._vss = path
        self._vss_problem = ""

    def _ensure_schema(self) -> None:
        tables = {row[0] for row in self._con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()}
        if not tables:
            if self.read_only:
                raise StoreError(f"{self.path} is empty and opened read-only; open it writable once to create it")
            with self._transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._con.execute(statement)
                now = _now().isoformat()
                self._con.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [["schema_version", str(SCHEMA_VERSION)], ["created_at", now], ["updated_at", now],
                     ["name_keys", NAME_KEYS_VERSION]],
                )
            return
        if "meta" not in tables or not _EXPECTED_TABLES <= tables:
            raise StoreError(
                f"{self.path} is a DuckDB file but not a duckgraph knowledge base "
                f"(tables: {', '.join(sorted(tables)[:8])}); choose another file with --db or DUCKGRAPH_DB"
            )
        version = self._meta("schema_version")
        if version is None or not version.isdigit():
            raise StoreError(f"{self.path} has no valid schema version; it was not written by duckgraph")
        if int(version) > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} uses schema version {version}, newer than this duckgraph understands "
                f"({SCHEMA_VERSION}); upgrade duckgraph"
            )
        if self._meta("name_keys") != NAME_KEYS_VERSION and not self.read_only:
            self._rebuild_name_keys()

    def _rebuild_name_keys(self) -> None:
        """Files written before loose name keys existed get them (derived rows, rebuilt in one transaction)."""
        nodes = self._con.execute("SELECT id, namespace, key, aliases FROM nodes").fetchall()
        rows = [(namespace, key, node_id) for node_id, namespace, key, aliases in nodes
                for key in _name_keys(NodeRecord(namespace=namespace, key=key, name=key, type="",
                                                 aliases=tuple(aliases or ())))]
        with self._transaction():
            self._con.execute("DELETE FROM node_names")
            if rows:
                # A registered columnar view: list parameters bind at ~0.2 ms per element in this client.
                self._con.register("_incoming_names", {
                    "namespace": np.array([r[0] for r in rows], dtype=object),
                    "key": np.array([r[1] for r in rows], dtype=object),
                    "node_id": np.array([r[2] for r in rows], dtype=np.int64),
                })
                try:
                    self._con.execute("INSERT INTO node_names SELECT namespace, key, node_id FROM _incoming_names")
                finally:
                    self._con.unregister("_incoming_names")
            self._con.execute("DELETE FROM meta WHERE key = 'name_keys'")
            self._con.execute("INSERT INTO meta VALUES ('name_keys', ?)", [NAME_KEYS_VERSION])
        log.info("%s: rebuilt the name index of %d nodes (loose keys added)", self.path, len(nodes))

    def _load_vectors(self) -> None:
        info = self.embedder_info()
        if info is None:
            return
        _, dimensions = info
        if not self.read_only:
            self._create_vector_tables(self._con, dimensions)  # files bound before edge vectors existed lack one
        self._new_indexes(dimensions)
        with self._lean_cache():  # streaming reads by rowid range: nothing to keep cached
            for kind, (table, id_column, owner) in _VECTOR_TABLES.items():
                self._read_vectors(self._indexes[kind], table, id_column, owner)
                self._restore_layout(kind)
                self._maybe_start_index(kind)

    def _restore_layout(self, kind: str) -> None:
        """Take the IVF layout saved for a kind whose index is wanted from the start, if it fits its vectors."""
        import duckdb  # see open

        if self.vector_index != "ivf" or kind not in self._searched:
            return
        try:
            row = self._con.execute("SELECT info, layout FROM vector_layouts WHERE kind = ?", [kind]).fetchone()
        except duckdb.CatalogException:  # a file no layout was saved in yet
            return
        if row is None:
            return
        try:
            restored = self._indexes[kind].restore(SavedLayout.from_bytes(row[1], json.loads(row[0])))
        except Exception as exc:  # derived data: the index is built again instead
            log.warning("%s: the saved IVF layout of the %s vectors is unreadable (%s); building it again",
                        self.path, kind, exc)
            return
        if restored:
            log.info("%s: IVF layout of the %s vectors read from the file: %s", self.path, kind,
                     self._indexes[kind].build_info)
        else:
            log.info("%s: the saved IVF layout of the %s vectors does not fit them (another width, parts that "
                     "disagree, or fewer rows than ann_min_rows); the index is built as usual", self.path, kind)

    def _save_layouts(self) -> None:
        """Save the layouts of the IVF builds finished since the last save, each in its own transaction."""
        if self.read_only or self._con is None:
            return
        for kind, index in self._indexes.items():
            layout = index.take_unsaved_layout()
            if layout is None:
                continue
            try:
                with self._transaction() as con:
                    con.execute(_LAYOUTS)
                    con.execute("INSERT OR REPLACE INTO vector_layouts VALUES (?, ?, ?, ?)",
                                [kind, _now(), json.dumps(layout.info), layout.to_bytes()])
            except Exception as exc:  # derived data: the next open builds the index again
                log.warning("saving the IVF layout of the %s vectors in %s failed: %s", kind, self.path, exc)

    @contextmanager
    def _lean_cache(self) -> Iterator[None]:
        """While inside, DuckDB keeps at most CACHE_AFTER_LOAD of table pages cached, and drops the rest on entry.

        Open reads every vector and the whole graph into this process's memory; the pages DuckDB would keep from
        those reads double the copies (at 100k entities, 1.3 GB of a 2.6 GB process). A lower memory limit makes
        it evict what no query holds; `memory_limit` applies again on the way out."""
        import duckdb  # see open

        try:
            self._con.execute(f"SET memory_limit = '{CACHE_AFTER_LOAD}'")
        except duckdb.Error as exc:  # pages still in use: nothing is lost but memory
            log.info("DuckDB kept its cache while loading %s: %s", self.path, exc)
        try:
            yield
        finally:
            # Not RESET: in DuckDB 1.5.5 that restores the setting but leaves the buffer pool at the lower limit,
            # and a later write fails to commit once the indexes outgrow it.
            self._con.execute(f"SET memory_limit = '{self.memory_limit}'")

    def _new_indexes(self, dimensions: int) -> None:
        """Empty vector indexes of every kind, and how the file stores each kind's vectors (see `_PRECISION`)."""
        column_types = dict(self._con.execute(
            "SELECT table_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND column_name = 'embedding'").fetchall())

        def stored(kind: str, table: str) -> str:
            if table not in column_types:  # not created yet (a read-only file): it would be as _PRECISION says
                return _PRECISION[kind]
            return "bfloat16" if column_types[table] == "BLOB" else "float32"

        self._stored_precision = {kind: stored(kind, table) for kind, (table, _, _) in _VECTOR_TABLES.items()}
        self._indexes = {kind: self._new_index(kind, dimensions) for kind in _VECTOR_TABLES}

    def _new_index(self, kind: str, dimensions: int) -> VectorIndex:
        return VectorIndex(dimensions, kind=kind, ann_min_rows=self.ann_min_rows if self.vector_index == "ivf" else None,
                           nprobe=self.ann_nprobe, precision=_PRECISION[kind])

    def _read_vectors(self, index: VectorIndex, table: str, id_column: str, owner: str) -> None:
        """Every stored vector of a kind into `index`, block by block (no copy of the whole set but the index).

        Blocks are ranges of rowids, each read once as Arrow: its ids, and its vectors as one flat buffer of floats.
        Fetched through numpy, a FLOAT[d] column arrives as one array object per row to stack (2-4 times slower),
        and the ids plus the floats unnested, as read before, took 1.2 against 0.64 s for 500k vectors, and the
        whole open of 1M entities / 5M relations 46-48 against 36-41 s (~0.2 GB more at its peak of ~12 GB).
        """
        namespaces = [row[0] for row in self._con.execute(f"SELECT DISTINCT namespace FROM {owner} ORDER BY 1").fetchall()]
        top = self._con.execute(f"SELECT max(id) FROM {owner}").fetchone()[0]
        code_of = np.full((top or 0) + 1, -1, dtype=np.int32)
        for code, namespace in enumerate(namespaces):
            ids = self._con.execute(f"SELECT id FROM {owner} WHERE namespace = ?", [namespace]).fetchnumpy()["id"]
            code_of[np.asarray(ids, dtype=np.int64)] = code
        count, last = self._con.execute(f"SELECT count(*), max(rowid) FROM {table}").fetchone()
        if last is None:
            return
        index.reserve(count)
        for start in range(0, last + 1, 65_536):
            ids, vectors = _arrow_vectors(self._con.execute(
                f"SELECT {id_column} AS id, embedding FROM {table} WHERE rowid >= ? AND rowid < ?",
                [start, start + 65_536],
            ), table, index.dimensions)
            if not len(ids):
                continue
            codes = code_of[ids]
            known = codes >= 0  # a vector without its row (never written so; skipped like the join did)
            if not known.all():
                ids, vectors, codes = ids[known], vectors[known], codes[known]
            index.append_new(ids, vectors, codes, namespaces)

    def _maybe_start_index(self, kind: str) -> None:
        """Start building the approximate index of a kind when it is due (in the background) and wanted."""
        if kind not in self._searched:
            return
        if self.vector_index == "hnsw":
            self._maybe_start_hnsw(kind)
        elif self.vector_index == "ivf":
            self._indexes[kind].maybe_build()

    def _index_due(self, kind: str) -> bool:
        """Whether an approximate index of the kind would start building now if it were wanted."""
        index = self._indexes[kind]
        if self.vector_index == "ivf":
            return index.needs_build()
        return (self.vector_index == "hnsw" and kind not in self._hnsw and len(index) >= self.hnsw_min_rows
                and self._vss is not None)

    def _maybe_start_hnsw(self, kind: str) -> None:
        index = self._indexes[kind]
        if not self._index_due(kind):
            return
        try:
            mirror = HnswMirror(kind, index.dimensions, self._vss)
        except Exception as exc:
            self._hnsw_problem = f"could not start the HNSW index: {exc}"
            log.warning("%s; vector search uses an exact scan", self._hnsw_problem)
            return
        self._hnsw[kind] = mirror
        ids, vectors, namespaces = (a.copy() for a in index.rows())

        def build() -> None:
            try:
                mirror.build(ids, vectors, namespaces)
                log.info("HNSW index over %d %s vectors ready", len(ids), kind)
            except Exception as exc:
                self._hnsw_problem = f"building the HNSW index failed: {exc}"
                log.warning("%s; vector search uses an exact scan", self._hnsw_problem)

        threading.Thread(target=build, name=f"duckgraph-hnsw-{kind}", daemon=True).start()

    @property
    def _db(self) -> Any:
        if self._con is None:
            raise StoreError(f"the store {self.path} is not open")
        return self._con

    @contextmanager
    def _transaction(self):
        with self._lock:
            self._db.execute("BEGIN TRANSACTION")
            try:
                yield self._con
            except BaseException as exc:
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

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    # -- embedder binding ------------------------------------------------------------------------------

    def embedder_info(self) -> tuple[str, int] | None:
        with self._lock:
            embedder_id, dimensions = self._meta("embedder_id"), self._meta("dimensions")
        if embedder_id is None or dimensions is None:
            return None
        return embedder_id, int(dimensions)

    def bind_embedder(self, embedder_id: str, dimensions: int) -> None:
        with self._lock:
            info = self.embedder_info()
            if info is not None:
                if info != (embedder_id, dimensions):
                    raise EmbedderMismatchError(
                        f"{self.path} was built with embedder {info[0]!r} ({info[1]} dimensions), but "
                        f"{embedder_id!r} ({dimensions} dimensions) is configured. Configure {info[0]!r} "
                        "again (DUCKGRAPH_EMBEDDER / [embedder] in the config) or use another --db file."
                    )
                return
            if self.read_only:
                raise StoreError(self.read_only_message() + " It has no embedder recorded yet: it holds no vectors.")
            with self._transaction() as con:
                self._create_vector_tables(con, dimensions)
                con.executemany(
                    "INSERT INTO meta VALUES (?, ?)", [["embedder_id", embedder_id], ["dimensions", str(dimensions)]]
                )
            self._new_indexes(dimensions)

    @staticmethod
    def _create_vector_tables(con: Any, dimensions: int) -> None:
        # No primary key: the store writes an id's vector once (a new id plainly, another after deleting the old
        # vector, `_insert_vectors`), and the key's index halved the insert rate (measured with the checkpoint:
        # 7.9k against 14.7k rows of 384 floats a second). Files written with the key keep it; both work.
        for kind, (table, id_column, _) in _VECTOR_TABLES.items():
            column = "BLOB" if _PRECISION[kind] == "bfloat16" else f"FLOAT[{int(dimensions)}]"
            con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({id_column} BIGINT NOT NULL, embedding {column} NOT NULL)")

    # -- writes ----------------------------------------------------------------------------------------

    def write(self, batch: WriteBatch) -> WriteSummary:
        if self.read_only:
            raise StoreError(self.read_only_message())
        with self._lock:
            dimensions = self._require_dimensions(batch)
            # Ids handed out inside a transaction that rolls back must not stick to the caller's records.
            ids_before = [(item, item.id) for item in [*batch.nodes, *batch.chunks]]
            self._pending = []
            try:
                with self._transaction() as con:
                    now = _now()
                    removed_chunks = self._replace_documents(con, batch, now)
                    chunk_ids = self._insert_chunks(con, batch, dimensions)
                    collapsed = self._apply_merges(con, batch)
                    deleted_nodes = self._delete_nodes(con, [*batch.delete_nodes, *(s for _, ss in batch.merges for s in ss)])
                    node_ids, created, updated = self._upsert_nodes(con, batch, now, dimensions)
                    self._write_observations(con, batch, now)
                    self._link_node_sources(con, batch, node_ids)
                    edge_ids, edges_created, edges_updated = self._upsert_edges(con, batch, now, dimensions)
                    dropped_edges = self._delete_edges(con, [*collapsed, *batch.delete_edges, *deleted_nodes[1]])
                    con.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", [now.isoformat()])
            except BaseException:
                self._pending = []
                for item, item_id in ids_before:
                    item.id = item_id
                raise
            # Only after the commit: the in-memory index must never hold what the file does not.
            self._apply_pending()
            removed = {"node": deleted_nodes[0], "chunk": removed_chunks, "edge": dropped_edges}
            self._update_indexes(batch, removed, edge_ids)
            self._save_layouts()  # of builds finished since the last write: a reopen then need not build them
        return WriteSummary(
            nodes_created=created, nodes_updated=updated, edges_created=edges_created, edges_updated=edges_updated,
            documents_written=len(batch.documents), chunks_written=len(batch.chunks),
            nodes_deleted=len(deleted_nodes[0]), edges_deleted=len(dropped_edges), node_ids=node_ids,
            chunk_ids=chunk_ids,
        )

    def _mirror(self, change: Any, *args: Any) -> None:
        """Note a change to the graph mirror, made once the write in progress commits (`_apply_pending`)."""
        self._pending.append((change, args))

    def _apply_pending(self) -> None:
        pending, self._pending = self._pending, []
        try:
            for change, args in pending:
                change(*args)
        except Exception:  # the file is the truth: rebuild the mirror from it rather than serve a wrong graph
            log.exception("updating the in-memory graph failed; reloading it from %s", self.path)
            self._graph.load(self._db)

    def _apply_merges(self, con: Any, batch: WriteBatch) -> list[int]:
        """Re-point the sources' edges and mentions at the target; return the ids of edges that collapsed."""
        collapsed: list[int] = []
        for target, sources in batch.merges:
            if not sources:
                continue
            for column in ("source_id", "target_id"):
                con.execute(f"UPDATE edges SET {column} = $1 WHERE {column} IN (SELECT unnest({_JSON_IDS % 2}))",
                            [target, _json_list(sources)])
            con.execute(
                "INSERT OR IGNORE INTO mentions SELECT chunk_id, $1 FROM mentions WHERE node_id IN "
                f"(SELECT unnest({_JSON_IDS % 2}))",
                [target, _json_list(sources)],
            )
            self._mirror(self._graph.copy_mentions, target, list(sources))
            self._mirror(self._graph.repoint, target, list(sources))
            # A self-loop made by the merge, and all but the oldest of edges that became identical, go.
            rows = con.execute(
                "SELECT id FROM edges WHERE source_id = $1 AND target_id = $1 UNION "
                "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY namespace, source_id, target_id, type "
                "ORDER BY id) AS n FROM edges WHERE (source_id = $1 OR target_id = $1) AND valid_until IS NULL) "
                "WHERE n > 1",
                [target],
            ).fetchall()
            collapsed += [r[0] for r in rows]
        return collapsed

    def _delete_nodes(self, con: Any, ids: list[int]) -> tuple[list[int], list[int]]:
        """Delete nodes and what hangs on them except their edges, whose ids are returned for _delete_edges."""
        ids = sorted(set(ids))
        if not ids:
            return [], []
        listed = [_json_list(ids)]
        existing = [r[0] for r in con.execute(
            f"SELECT id FROM nodes WHERE id IN (SELECT unnest({_JSON_IDS % 1}))", listed).fetchall()]
        edges = [r[0] for r in con.execute(
            f"SELECT id FROM edges WHERE source_id IN (SELECT unnest({_JSON_IDS % 1})) UNION "
            f"SELECT id FROM edges WHERE target_id IN (SELECT unnest({_JSON_IDS % 1}))", listed
        ).fetchall()]
        for table, column in (("mentions", "node_id"), ("node_names", "node_id"), ("observations", "node_id"),
                              ("community_members", "node_id"), ("node_vectors", "node_id")):
            if table == "node_vectors" and not self._indexes:
                continue  # no vector tables before an embedder is bound
            con.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest({_JSON_IDS % 1}))", listed)
        con.execute(f"DELETE FROM nodes WHERE id IN (SELECT unnest({_JSON_IDS % 1}))", listed)
        self._mirror(self._graph.delete_nodes, existing)
        return existing, edges

    def _delete_edges(self, con: Any, ids: list[int]) -> list[int]:
        ids = sorted(set(ids))
        if not ids:
            return []
        listed = [_json_list(ids)]
        existing = [r[0] for r in con.execute(
            f"SELECT id FROM edges WHERE id IN (SELECT unnest({_JSON_IDS % 1}))", listed).fetchall()]
        con.execute(f"DELETE FROM edge_evidence WHERE edge_id IN (SELECT unnest({_JSON_IDS % 1}))", listed)
        if self._indexes:
            con.execute(f"DELETE FROM edge_vectors WHERE edge_id IN (SELECT unnest({_JSON_IDS % 1}))", listed)
        con.execute(f"DELETE FROM edges WHERE id IN (SELECT unnest({_JSON_IDS % 1}))", listed)
        self._mirror(self._graph.delete_edges, existing)
        return existing

    def _write_observations(self, con: Any, batch: WriteBatch, now: datetime) -> None:
        # Two statements for the whole batch: per-node statements cost ~10 ms a node (list parameters bind slowly).
        self._replace_observations(con, [n for n in batch.nodes if n.observations is not None], now)

    def _require_dimensions(self, batch: WriteBatch) -> int | None:
        has_vectors = any(item.embedding is not None for item in [*batch.nodes, *batch.chunks, *batch.edges])
        info = self.embedder_info()
        if has_vectors and info is None:
            raise StoreError("no embedder is bound to this file yet; call bind_embedder first")
        if info is None:
            return None
        for item in [*batch.nodes, *batch.chunks, *batch.edges]:
            if item.embedding is not None and len(item.embedding) != info[1]:
                raise EmbedderMismatchError(
                    f"a vector of {len(item.embedding)} dimensions cannot be stored in {self.path}, "
                    f"which holds {info[1]}-dimensional vectors of {info[0]!r}"
                )
        return info[1]

    def _replace_documents(self, con: Any, batch: WriteBatch, now: datetime) -> list[int]:
        """Store the batch's documents, dropping the chunks (and what hangs on them) of those they replace; return
        the dropped chunks' ids. A few statements for the whole batch: four per document cost ~5 ms each."""
        documents = list({(doc.namespace, doc.id): doc for doc in batch.documents}.values())  # the last one wins
        if not documents:
            return []
        namespaces, ids = [d.namespace for d in documents], [d.id for d in documents]
        keys, key_params = _rows(1, ns=("VARCHAR", namespaces), id=("VARCHAR", ids))
        removed = [row[0] for row in con.execute(
            f"SELECT c.id FROM chunks c JOIN {keys} ON c.namespace = w.ns AND c.document_id = w.id", key_params
        ).fetchall()]
        if removed:
            listed = [_json_list(removed)]
            for table, column in (("mentions", "chunk_id"), ("edge_evidence", "chunk_id"),
                                  ("chunk_vectors", "chunk_id"), ("chunks", "id")):
                con.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest({_JSON_IDS % 1}))", listed)
            self._mirror(self._graph.drop_chunks, removed)
        con.execute(f"DELETE FROM documents USING {keys} WHERE documents.namespace = w.ns AND documents.id = w.id",
                    key_params)
        rows, params = _rows(
            1, ns=("VARCHAR", namespaces), id=("VARCHAR", ids), title=("VARCHAR", [d.title for d in documents]),
            text=("VARCHAR", [d.text for d in documents]),
            metadata=("VARCHAR", [json.dumps(d.metadata) for d in documents]),
            created=("TIMESTAMP", [_naive_utc(d.created_at) or now for d in documents]),
        )
        con.execute(f"INSERT INTO documents SELECT ns, id, title, text, metadata::JSON, created FROM {rows}", params)
        self._mirror(self._graph.put_documents, namespaces, ids, [d.title for d in documents])
        return removed

    def _insert_chunks(self, con: Any, batch: WriteBatch, dimensions: int | None) -> dict[str, list[int]]:
        if not batch.chunks:
            return {}
        namespace_of = {doc.id: doc.namespace for doc in batch.documents}
        missing = sorted({c.document_id for c in batch.chunks} - namespace_of.keys())
        if missing:
            raise InvalidInputError(f"chunks refer to documents not in the batch: {', '.join(missing)}")
        ids = [r[0] for r in con.execute(
            "SELECT nextval('chunk_ids') FROM range(?)", [len(batch.chunks)]
        ).fetchall()]
        rows, params = _rows(1, id=("BIGINT", ids), ns=("VARCHAR", [namespace_of[c.document_id] for c in batch.chunks]),
                             doc=("VARCHAR", [c.document_id for c in batch.chunks]),
                             ordinal=("BIGINT", [c.ordinal for c in batch.chunks]),
                             text=("VARCHAR", [c.text for c in batch.chunks]))
        con.execute(f"INSERT INTO chunks SELECT id, ns, doc, ordinal, text FROM {rows}", params)
        with_vectors = [(i, c.embedding) for i, c in zip(ids, batch.chunks) if c.embedding is not None]
        if with_vectors:
            self._write_vectors(con, "chunk", [i for i, _ in with_vectors], [v for _, v in with_vectors], dimensions,
                                replace=False)  # new ids
        self._mirror(self._graph.add_chunks, ids, [namespace_of[c.document_id] for c in batch.chunks],
                     [c.document_id for c in batch.chunks], [c.ordinal for c in batch.chunks],
                     [c.text for c in batch.chunks])
        by_document: dict[str, list[int]] = {}
        for chunk_id, chunk in zip(ids, batch.chunks):
            chunk.id = chunk_id
            by_document.setdefault(chunk.document_id, []).append(chunk_id)
        return by_document

    def _upsert_nodes(
        self, con: Any, batch: WriteBatch, now: datetime, dimensions: int | None
    ) -> tuple[dict[str, int], int, int]:
        node_ids: dict[str, int] = {}
        new = [n for n in batch.nodes if n.id is None]
        old = [n for n in batch.nodes if n.id is not None]
        if new:
            ids = [r[0] for r in con.execute("SELECT nextval('node_ids') FROM range(?)", [len(new)]).fetchall()]
            for node, node_id in zip(new, ids):
                node.id = node_id
        # Every column bound as one JSON array (`_rows`): list parameters bind at ~0.2 ms per element.
        for nodes, is_new in ((new, True), (old, False)):
            if not nodes:
                continue
            rows, params = _rows(
                2, id=("BIGINT", [n.id for n in nodes]), namespace=("VARCHAR", [n.namespace for n in nodes]),
                key=("VARCHAR", [n.key for n in nodes]), name=("VARCHAR", [n.name for n in nodes]),
                type=("VARCHAR", [n.type for n in nodes]), description=("VARCHAR", [n.description for n in nodes]),
                aliases=("VARCHAR[]", [list(n.aliases) for n in nodes]),
                properties=("VARCHAR", [json.dumps(n.properties) if n.properties else "{}" for n in nodes]),
            )
            if is_new:
                try:
                    con.execute(
                        "INSERT INTO nodes SELECT id, namespace, key, name, type, description, aliases, "
                        f"properties::JSON, $1, $1 FROM {rows}",
                        [now, *params],
                    )
                except Exception as exc:
                    if "Duplicate key" in str(exc) or "unique" in str(exc).lower():
                        raise InvalidInputError(f"a node with one of these names already exists: {exc}") from exc
                    raise
            else:
                con.execute(
                    "UPDATE nodes SET key = w.key, name = w.name, type = w.type, description = w.description, "
                    f"aliases = w.aliases, properties = w.properties::JSON, updated_at = $1 FROM {rows} "
                    "WHERE nodes.id = w.id",
                    [now, *params],
                )
        if old:
            touched, params = _rows(1, id=("BIGINT", [n.id for n in old]))
            con.execute(f"DELETE FROM node_names WHERE node_id IN (SELECT id FROM {touched})", params)
        if batch.nodes:
            keys_of = {n.id: _name_keys(n) for n in batch.nodes}
            names = [(n.namespace, key, n.id) for n in batch.nodes for key in keys_of[n.id]]
            rows, params = _rows(1, ns=("VARCHAR", [a for a, _, _ in names]), key=("VARCHAR", [b for _, b, _ in names]),
                                 id=("BIGINT", [c for _, _, c in names]))
            con.execute(f"INSERT INTO node_names SELECT ns, key, id FROM {rows}", params)
            self._mirror(self._graph.put_nodes, list(batch.nodes), now, keys_of)
        for nodes, is_new in ((new, True), (old, False)):
            with_vectors = [n for n in nodes if n.embedding is not None]
            if with_vectors:  # a new id has no vector yet: nothing to delete first
                self._write_vectors(con, "node", [n.id for n in with_vectors], [n.embedding for n in with_vectors],
                                    dimensions, replace=not is_new)
        for node in batch.nodes:
            node_ids[node.key] = node.id
        return node_ids, len(new), len(old)

    def _link_node_sources(self, con: Any, batch: WriteBatch, node_ids: dict[str, int]) -> None:
        pairs = {(chunk_id, node.id) for node in batch.nodes for chunk_id in node.source_chunk_ids}
        wanted = [(node.id, node.namespace, doc_id) for node in batch.nodes for doc_id in node.source_ids]
        if wanted:
            chunks = self._chunks_of_documents(con, {(ns, doc) for _, ns, doc in wanted})
            names_of = {node.id: _name_keys(node) for node in batch.nodes}
            for node_id, namespace, doc_id in wanted:
                pairs.update((chunk_id, node_id) for chunk_id in _mentioning(chunks[(namespace, doc_id)], names_of[node_id]))
        _insert_pairs(con, "mentions", pairs)
        if pairs:
            self._mirror(self._graph.add_mentions, [c for c, _ in pairs], [n for _, n in pairs])

    def _chunks_of_documents(
        self, con: Any, documents: set[tuple[str, str]]
    ) -> dict[tuple[str, str], list[tuple[int, str]]]:
        found: dict[tuple[str, str], list[tuple[int, str]]] = {doc: [] for doc in documents}
        rows = con.execute(
            "SELECT d.namespace, d.id, c.id, c.text FROM documents d "
            "LEFT JOIN chunks c ON c.namespace = d.namespace AND c.document_id = d.id "
            f"WHERE (d.namespace, d.id) IN (SELECT unnest({_JSON_NAMES % 1}), unnest({_JSON_NAMES % 2})) "
            "ORDER BY c.ordinal",
            [_json_list(ns for ns, _ in documents), _json_list(doc for _, doc in documents)],
        ).fetchall()
        present = set()
        for namespace, doc_id, chunk_id, text in rows:
            present.add((namespace, doc_id))
            if chunk_id is not None:
                found[(namespace, doc_id)].append((chunk_id, text))
        missing = sorted(doc for _, doc in documents - present)
        if missing:
            raise InvalidInputError(
                f"source_ids name documents that are not stored: {', '.join(missing)}; "
                "add them with add_documents first (or drop source_ids)"
            )
        return found

    def _upsert_edges(
        self, con: Any, batch: WriteBatch, now: datetime, dimensions: int | None
    ) -> tuple[list[int], int, int]:
        if not batch.edges:
            return [], 0, 0
        id_of = self._node_ids(con, batch, {(e.namespace, k) for e in batch.edges for k in (e.source_key, e.target_key)})
        for i, edge in enumerate(batch.edges):
            for key in (edge.source_key, edge.target_key):
                if (edge.namespace, key) not in id_of:
                    raise InvalidInputError(f"edges[{i}]: node {key!r} does not exist")
        resolved = [(e, id_of[(e.namespace, e.source_key)], id_of[(e.namespace, e.target_key)]) for e in batch.edges]
        existing = self._holding_edges(con, batch, resolved)
        identities = [(e.namespace, s, t, e.type) for e, s, t in resolved]
        fresh_count = len({identity for identity in identities if identity not in existing})
        fresh = iter(r[0] for r in con.execute("SELECT nextval('edge_ids') FROM range(?)", [fresh_count]).fetchall())
        #: edge id -> [namespace, source, target, type, description, weight, properties (JSON), is new]
        state: dict[int, list[Any]] = {}
        created = updated = 0
        edge_id_of: list[int] = []
        for (edge, source_id, target_id), identity in zip(resolved, identities):
            found = existing.get(identity)
            if found is not None:
                edge_id, description, weight, props = found
                merged = json.dumps({**json.loads(props), **edge.properties}) if edge.properties else props
                description = edge.description or description
                weight = edge.weight if edge.weight is not None else weight
                is_new = state[edge_id][7] if edge_id in state else False
                updated += 1
            else:
                edge_id = next(fresh)
                description, is_new = edge.description, True
                merged = json.dumps(edge.properties) if edge.properties else "{}"
                # The stored weight, not None: the same edge again in this batch keeps it.
                weight = 1.0 if edge.weight is None else edge.weight
                created += 1
            state[edge_id] = [edge.namespace, source_id, target_id, edge.type, description, weight, merged, is_new]
            existing[identity] = (edge_id, description, weight, merged)
            edge_id_of.append(edge_id)
        for is_new in (True, False):
            ids = [i for i, row in state.items() if row[7] is is_new]
            if not ids:
                continue
            rows, params = _rows(
                2, id=("BIGINT", ids), namespace=("VARCHAR", [state[i][0] for i in ids]),
                source_id=("BIGINT", [state[i][1] for i in ids]), target_id=("BIGINT", [state[i][2] for i in ids]),
                type=("VARCHAR", [state[i][3] for i in ids]), description=("VARCHAR", [state[i][4] for i in ids]),
                weight=("DOUBLE", [state[i][5] for i in ids]), properties=("VARCHAR", [state[i][6] for i in ids]),
            )
            if is_new:
                con.execute(
                    "INSERT INTO edges SELECT id, namespace, source_id, target_id, type, description, weight, "
                    f"properties::JSON, $1, NULL, $1, $1 FROM {rows}",
                    [now, *params],
                )
                self._mirror(self._graph.put_edges, ids, [state[i][0] for i in ids], [state[i][1] for i in ids],
                             [state[i][2] for i in ids], [state[i][3] for i in ids], [state[i][4] for i in ids],
                             [state[i][5] for i in ids], [state[i][6] for i in ids], now)
            else:
                con.execute(
                    "UPDATE edges SET description = w.description, weight = w.weight, "
                    f"properties = w.properties::JSON, updated_at = $1 FROM {rows} WHERE edges.id = w.id",
                    [now, *params],
                )
                self._mirror(self._graph.update_edges, ids, [state[i][4] for i in ids], [state[i][5] for i in ids],
                             [state[i][6] for i in ids], now)
        with_vectors = {i: e.embedding for i, e in zip(edge_id_of, batch.edges) if e.embedding is not None}
        for is_new in (True, False):
            ids = [i for i in with_vectors if state[i][7] is is_new]
            if ids:  # a new edge has no vector yet: nothing to delete first
                self._write_vectors(con, "edge", ids, [with_vectors[i] for i in ids], dimensions, replace=not is_new)
        self._link_edge_sources(con, batch, resolved, edge_id_of)
        return edge_id_of, created, updated

    def _write_vectors(self, con: Any, kind: str, ids: Sequence[int], vectors: Sequence[Any], dimensions: int, *,
                       replace: bool = True) -> None:
        """`_insert_vectors` into the kind's table, in the precision this file stores it in."""
        _insert_vectors(con, _VECTOR_TABLES[kind][0], ids, vectors, dimensions, replace=replace,
                        precision=self._stored_precision[kind])

    def _node_ids(self, con: Any, batch: WriteBatch, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """(namespace, key) -> node id of the given keys, as the transaction sees them (this batch's nodes
        included). Read from the graph mirror, unless the batch deletes or merges nodes."""
        if batch.merges or batch.delete_nodes:
            wanted, params = _rows(1, ns=("VARCHAR", [ns for ns, _ in keys]), key=("VARCHAR", [k for _, k in keys]))
            return {(ns, key): node_id for ns, key, node_id in con.execute(
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

    def _holding_edges(self, con: Any, batch: WriteBatch, resolved: list) -> dict[tuple, tuple[int, str, float, str]]:
        """(namespace, source, target, type) -> (id, description, weight, properties JSON) of the edges that still
        hold among those the batch names. Read from the graph mirror, unless the batch merges or deletes."""
        if batch.merges or batch.delete_nodes or batch.delete_edges:
            wanted, params = _rows(
                1, ns=("VARCHAR", [e.namespace for e, _, _ in resolved]), s=("BIGINT", [s for _, s, _ in resolved]),
                t=("BIGINT", [t for _, _, t in resolved]), type=("VARCHAR", [e.type for e, _, _ in resolved]),
            )
            return {
                (ns, s, t, ty): (edge_id, description, weight, props)
                for edge_id, ns, s, t, ty, description, weight, props in con.execute(
                    "SELECT e.id, e.namespace, e.source_id, e.target_id, e.type, e.description, e.weight, e.properties "
                    f"FROM edges e JOIN (SELECT DISTINCT * FROM {wanted}) w ON e.namespace = w.ns AND "
                    "e.source_id = w.s AND e.target_id = w.t AND e.type = w.type WHERE e.valid_until IS NULL",
                    params,
                ).fetchall()
            }
        graph = self._graph
        sources = np.unique(np.asarray([s for _, s, _ in resolved], dtype=np.int64))
        owners, edges = graph.out_edges.gather(sources)
        edges = edges[graph.e_src[edges] == owners]
        edges = edges[isin_ids(graph.e_dst[edges], np.asarray([t for _, _, t in resolved], dtype=np.int64))]
        edges = graph.holding(np.unique(edges), None)
        return {
            (graph.namespace_names[ns], s, t, graph.type_names[ty]): (edge_id, desc or "", weight, props or "{}")
            for edge_id, ns, s, t, ty, desc, weight, props in zip(
                edges.tolist(), graph.e_ns[edges].tolist(), graph.e_src[edges].tolist(), graph.e_dst[edges].tolist(),
                graph.e_type[edges].tolist(), graph.e_desc[edges], graph.e_weight[edges].tolist(), graph.e_props[edges],
            )
        }

    def _link_edge_sources(self, con: Any, batch: WriteBatch, resolved: list, edge_ids: list[int]) -> None:
        pairs = {(edge_id, chunk_id) for edge_id, (e, _, _) in zip(edge_ids, resolved) for chunk_id in e.source_chunk_ids}
        wanted = [(edge_id, e.namespace, doc) for edge_id, (e, _, _) in zip(edge_ids, resolved) for doc in e.source_ids]
        if wanted:
            chunks = self._chunks_of_documents(con, {(ns, doc) for _, ns, doc in wanted})
            names = {edge_id: [e.source_key, e.target_key] for edge_id, (e, _, _) in zip(edge_ids, resolved)}
            pairs.update(
                (edge_id, chunk_id)
                for edge_id, namespace, doc in wanted
                for chunk_id in _mentioning(chunks[(namespace, doc)], names[edge_id])
            )
        _insert_pairs(con, "edge_evidence", pairs)

    def _update_indexes(self, batch: WriteBatch, removed: dict[str, list[int]], edge_ids: list[int]) -> None:
        if not self._indexes:
            return
        for kind, ids in removed.items():
            self._indexes[kind].remove(ids)
        namespace_of = {doc.id: doc.namespace for doc in batch.documents}
        written: dict[tuple[str, str], list[tuple[int, Any]]] = {}
        for node in batch.nodes:
            written.setdefault(("node", node.namespace), []).append((node.id, node.embedding))
        for chunk in batch.chunks:
            written.setdefault(("chunk", namespace_of[chunk.document_id]), []).append((chunk.id, chunk.embedding))
        for edge_id, edge in zip(edge_ids, batch.edges):
            written.setdefault(("edge", edge.namespace), []).append((edge_id, edge.embedding))
        for (kind, namespace), items in written.items():
            items = [(item_id, vector) for item_id, vector in items if vector is not None]
            if not items:
                continue
            self._indexes[kind].upsert([i for i, _ in items], np.vstack([v for _, v in items]), namespace)
            if kind in self._hnsw:
                self._hnsw[kind].fresh.update(i for i, _ in items)
        if self.vector_index == "hnsw":  # an IVF index is (re)built on the next search that finds it due
            for kind in self._indexes:
                self._maybe_start_index(kind)

    # -- reads -----------------------------------------------------------------------------------------

    def find_nodes(self, namespace: str, keys: Iterable[str]) -> list[NodeRecord]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return self._graph.node_records(self._graph.find(namespace, set(keys)))

    def get_nodes(self, ids: Iterable[int]) -> list[NodeRecord]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return self._graph.node_records(ids)

    def list_nodes(self, namespace: str, *, offset: int = 0, limit: int = 100) -> list[NodeRecord]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_NODE_COLUMNS} FROM nodes WHERE namespace = $1 ORDER BY id LIMIT $2 OFFSET $3",
                [namespace, limit, offset],
            ).fetchall()
        return [_node(row) for row in rows]

    def get_observations(self, node_ids: Iterable[int]) -> dict[int, list[str]]:
        ids = list(set(node_ids))
        if not ids:
            return {}
        with self._lock:
            rows = self._db.execute(
                "SELECT node_id, list(text ORDER BY created_at, rowid) FROM observations "
                f"WHERE node_id IN (SELECT unnest({_JSON_IDS % 1})) GROUP BY node_id",
                [_json_list(ids)],
            ).fetchall()
        return {node_id: texts for node_id, texts in rows}

    def edges_among(
        self, node_ids: Sequence[int], namespace: str, *, include_expired: bool = False
    ) -> list[EdgeRecord]:
        if not node_ids:
            return []
        with self._lock:
            graph = self._graph
            nodes = np.asarray(list(node_ids), dtype=np.int64)
            edges = graph.holding(graph.touching(nodes), namespace, include_expired=include_expired)
            edges = edges[isin_ids(graph.e_src[edges], nodes) & isin_ids(graph.e_dst[edges], nodes)]
            return graph.edge_records(edges)

    def list_edges(
        self, namespace: str, *, offset: int = 0, limit: int = 100, include_expired: bool = False
    ) -> list[EdgeRecord]:
        holding = "" if include_expired else "AND valid_until IS NULL "
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_EDGE_COLUMNS} FROM edges WHERE namespace = $1 {holding}"
                "ORDER BY id LIMIT $2 OFFSET $3",
                [namespace, limit, offset],
            ).fetchall()
        return [_edge(row) for row in rows]

    def get_documents(self, ids: Iterable[str], namespace: str) -> list[DocumentRecord]:
        ids = list(set(ids))
        if not ids:
            return []
        with self._lock:
            if len(ids) <= _POINT_LOOKUPS:  # (what a search asks): index probes, not a scan of the table
                rows = self._db.execute(" UNION ALL ".join(
                    f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE namespace = $1 AND id = ${i + 2}"
                    for i in range(len(ids))), [namespace, *ids]).fetchall()
            else:
                rows = self._db.execute(
                    f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE namespace = $1 AND id IN "
                    f"(SELECT unnest({_JSON_NAMES % 2}))",
                    [namespace, _json_list(ids)],
                ).fetchall()
        return [_document(row) for row in rows]

    def get_chunks(self, ids: Iterable[int]) -> list[ChunkRecord]:
        ids = list({int(i) for i in ids})
        if not ids:
            return []
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            held = self._graph.chunk_records(ids)
            if held is not None:
                return held
            if len(ids) <= _POINT_LOOKUPS:  # (what a search asks): index probes, not a scan of the table
                rows = self._db.execute(" UNION ALL ".join(
                    f"SELECT id, document_id, ordinal, text FROM chunks WHERE id = {i}" for i in ids)).fetchall()
            else:
                rows = self._db.execute(
                    f"SELECT id, document_id, ordinal, text FROM chunks WHERE id IN (SELECT unnest({_JSON_IDS % 1}))",
                    [_json_list(ids)],
                ).fetchall()
        return [ChunkRecord(id=r[0], document_id=r[1], ordinal=r[2], text=r[3]) for r in rows]

    def chunk_documents(self, ids: Iterable[int]) -> dict[int, str]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return self._graph.chunk_documents(list(ids))

    def document_titles(self, ids: Iterable[str], namespace: str) -> dict[str, str]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return self._graph.document_titles(namespace, ids)

    def document_chunks(self, namespace: str, document_ids: Iterable[str]) -> list[ChunkRecord]:
        ids = list(dict.fromkeys(document_ids))
        if not ids:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT id, document_id, ordinal, text FROM chunks WHERE namespace = $1 AND document_id IN "
                f"(SELECT unnest({_JSON_NAMES % 2})) ORDER BY list_position({_JSON_NAMES % 2}, document_id), ordinal",
                [namespace, _json_list(ids)],
            ).fetchall()
        return [ChunkRecord(id=r[0], document_id=r[1], ordinal=r[2], text=r[3]) for r in rows]

    def neighbors(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None, limit: int = 1000
    ) -> list[EdgeRecord]:
        if not node_ids:
            return []
        with self._lock:
            graph = self._graph
            return graph.edge_records(graph.best_touching(list(node_ids), namespace, _naive_utc(as_of), int(limit)))

    def neighbor_ends(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None, limit: int = 1000
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        with self._lock:
            graph = self._graph
            edges = graph.best_touching(list(node_ids), namespace, _naive_utc(as_of), int(limit))
            return (edges.astype(np.int64, copy=False), graph.e_src[edges].astype(np.int64, copy=False),
                    graph.e_dst[edges].astype(np.int64, copy=False), graph.e_weight[edges].astype(np.float64))

    def mentioned_chunks(self, chunk_ids: Iterable[int]) -> set[int]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return set(self._graph.chunk_node_pairs(list(set(chunk_ids)))[0].tolist())

    def chunks_mentioning(self, node_ids: Sequence[int], *, limit: int = 1000) -> list[tuple[int, int]]:
        if not node_ids:
            return []
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            nodes, chunks = self._graph.node_chunk_pairs(list(node_ids))
            return list(zip(chunks.tolist(), nodes.tolist()))[: max(int(limit), 0)]

    def links(
        self, node_ids: Sequence[int], chunk_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None
    ) -> Links:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            graph = self._graph
            return Links(node_neighbors=graph.neighbour_pairs(list(node_ids), namespace, _naive_utc(as_of)),
                         node_chunks=graph.node_chunk_pairs(list(node_ids)),
                         chunk_nodes=graph.chunk_node_pairs(list(chunk_ids)))

    def passage_links(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None
    ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return self._graph.passage_links(node_ids, namespace, _naive_utc(as_of))

    def get_edges(self, ids: Iterable[int]) -> list[EdgeRecord]:
        with self._lock:
            self._db  # noqa: B018 - raises when the store is not open
            return self._graph.edge_records(self._graph.existing_edges(ids))

    def vector_search(self, kind: VectorKind, query: np.ndarray, k: int, namespace: str) -> list[tuple[int, float]]:
        with self._lock:
            index = self._indexes.get(kind)
            if index is not None and kind not in self._searched:
                self._searched.add(kind)
                self._maybe_start_index(kind)
            mirror = self._hnsw.get(kind)
        if index is None:
            return []
        if self.vector_index == "ivf":
            index.maybe_build()  # (re)builds in the background when due; the current layout answers meanwhile
            return index.search(query, k, namespace)
        if mirror is not None and mirror.ready:
            hits = mirror.search(query, k, index.namespace_code(namespace))
            with self._lock:
                # Rows written after the snapshot are scored exactly; rows deleted since are dropped.
                fresh = index.similarities(list(mirror.fresh), query, namespace)
                hits = [(i, s) for i, s in hits if index.contains(i) and i not in fresh]
            hits = sorted([*hits, *fresh.items()], key=lambda hit: -hit[1])[:k]
            if len(hits) >= min(k, len(index)):
                return hits
        with self._lock:
            return index.search(query, k, namespace)

    # The index guards its own rows (as in vector_search): the store's lock is not held while rows are gathered, so
    # that a search's graph reads and vector reads, or two searches, do not wait on each other.

    def similarities(self, kind: VectorKind, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        with self._lock:
            index = self._indexes.get(kind)
        return index.similarities(ids, query) if index is not None else {}

    def similarity_array(self, kind: VectorKind, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        with self._lock:
            index = self._indexes.get(kind)
        return index.similarity_array(ids, query) if index is not None else np.full(len(ids), np.nan)

    def stats(self, namespace: str | None = None) -> dict[str, Any]:
        where = "" if namespace is None else "WHERE namespace = $1"
        params = [] if namespace is None else [namespace]
        with self._lock:
            counts = {
                table: self._db.execute(f"SELECT count(*) FROM {table} {where}", params).fetchone()[0]
                for table in ("nodes", "documents", "chunks")
            }
            counts["edges"] = self._db.execute(
                f"SELECT count(*) FROM edges {where or 'WHERE'} {'AND' if where else ''} valid_until IS NULL",
                params,
            ).fetchone()[0]
            node_types = dict(self._db.execute(
                f"SELECT type, count(*) FROM nodes {where} GROUP BY type ORDER BY count(*) DESC LIMIT 50", params
            ).fetchall())
            edge_types = dict(self._db.execute(
                f"SELECT type, count(*) FROM edges {where} GROUP BY type ORDER BY count(*) DESC LIMIT 50", params
            ).fetchall())
        return {**counts, "node_types": node_types, "edge_types": edge_types}

    def type_examples(self, namespace: str, *, limit: int = 50) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            nodes = self._db.execute(
                "SELECT type, count(*), arg_min(name, id) FROM nodes WHERE namespace = $1 "
                "GROUP BY type ORDER BY count(*) DESC, type LIMIT $2",
                [namespace, limit],
            ).fetchall()
            edges = self._db.execute(
                "SELECT e.type, count(*), arg_min(s.name, e.id), arg_min(t.name, e.id) FROM edges e "
                "JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id "
                "WHERE e.namespace = $1 AND e.valid_until IS NULL GROUP BY e.type ORDER BY count(*) DESC, e.type "
                "LIMIT $2",
                [namespace, limit],
            ).fetchall()
        return {
            "node_types": [{"type": t, "count": n, "example": name} for t, n, name in nodes],
            "edge_types": [{"type": t, "count": n, "example": {"source": s, "target": o}} for t, n, s, o in edges],
        }

    # -- bulk reads and restore (export and import) ------------------------------------------------------

    def namespaces(self) -> list[str]:
        with self._lock:
            rows = self._db.execute(
                "SELECT namespace FROM nodes UNION SELECT namespace FROM edges UNION SELECT namespace FROM documents "
                "ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

    def list_documents(self, namespace: str, *, offset: int = 0, limit: int = 100) -> list[DocumentRecord]:
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE namespace = $1 ORDER BY id LIMIT $2 OFFSET $3",
                [namespace, limit, offset],
            ).fetchall()
        return [_document(row) for row in rows]

    def edge_evidence(self, edge_ids: Iterable[int]) -> list[tuple[int, int]]:
        ids = list(set(edge_ids))
        if not ids:
            return []
        wanted, params = _rows(1, id=("BIGINT", ids))
        with self._lock:
            rows = self._db.execute(
                f"SELECT edge_id, chunk_id FROM edge_evidence WHERE edge_id IN (SELECT id FROM {wanted}) "
                "ORDER BY edge_id, chunk_id",
                params,
            ).fetchall()
        return [(int(e), int(c)) for e, c in rows]

    def get_vectors(self, kind: VectorKind, ids: Iterable[int]) -> dict[int, np.ndarray]:
        with self._lock:
            index = self._indexes.get(kind)
            if index is None:
                return {}
            if index.precision == self._stored_precision[kind]:
                # The in-memory index holds exactly what the file holds (it is updated only after a commit).
                return index.vectors(ids)
            # Held rounded in memory, float32 in an older file: the file's own floats. The range lets DuckDB skip the
            # row groups without them.
            ids = [i for i in ids if index.contains(i)]
            if not ids:
                return {}
            table, id_column, _ = _VECTOR_TABLES[kind]
            wanted, params = _rows(3, id=("BIGINT", ids))
            found, vectors = _arrow_vectors(self._db.execute(
                f"SELECT {id_column} AS id, embedding FROM {table} WHERE {id_column} BETWEEN $1 AND $2 "
                f"AND {id_column} IN (SELECT id FROM {wanted})", [min(ids), max(ids), *params]), table, index.dimensions)
            return dict(zip(found.tolist(), vectors))

    def restore(self, snapshot: Snapshot) -> WriteSummary:
        if self.read_only:
            raise StoreError(self.read_only_message())
        batch = WriteBatch(nodes=snapshot.nodes, edges=snapshot.edges, documents=snapshot.documents,
                           chunks=snapshot.chunks)
        with self._lock:
            dimensions = self._require_dimensions(batch)
            ids_before = [(item, item.id) for item in [*snapshot.nodes, *snapshot.chunks]]
            self._pending = []  # a restore reloads the graph mirror from the file instead
            try:
                with self._transaction() as con:
                    now = _now()
                    self._replace_documents(con, batch, now)
                    chunk_ids = self._insert_chunks(con, batch, dimensions)
                    created, updated = self._restore_nodes(con, snapshot.nodes, now, dimensions)
                    edges_created, edges_updated = self._restore_edges(con, snapshot.edges, now, dimensions)
                    mentions, evidence = self._restore_provenance(con, snapshot)
                    if batch.documents or batch.nodes or batch.edges or mentions or evidence:
                        con.execute("INSERT OR REPLACE INTO meta VALUES ('updated_at', ?)", [now.isoformat()])
            except BaseException:
                self._pending = []
                for item, item_id in ids_before:
                    item.id = item_id
                raise
            self._pending = []
            if batch.documents or batch.nodes or batch.edges or mentions or evidence:
                self._graph.load(self._db)
            if batch.documents or batch.nodes or batch.edges:
                self._reload_vectors()
        return WriteSummary(
            nodes_created=created, nodes_updated=updated, edges_created=edges_created, edges_updated=edges_updated,
            documents_written=len(batch.documents), chunks_written=len(batch.chunks),
            node_ids={n.key: n.id for n in snapshot.nodes}, chunk_ids=chunk_ids, mentions_added=mentions,
            evidence_added=evidence,
        )

    # Restoring binds every column as one JSON array (see `_rows`): DuckDB 1.5.5 binds a Python list parameter at
    # ~0.2 ms per element, so the statements below cost the same for ten rows or ten thousand.

    def _restore_nodes(
        self, con: Any, nodes: list[NodeRecord], now: datetime, dimensions: int | None
    ) -> tuple[int, int]:
        """Insert or replace nodes by (namespace, key), with their times, names and observations."""
        if not nodes:
            return 0, 0
        keys = [(n.namespace, n.key) for n in nodes]
        if len(set(keys)) != len(keys):
            raise InvalidInputError("a snapshot holds the same node twice")
        wanted, params = _rows(1, ns=("VARCHAR", [ns for ns, _ in keys]), key=("VARCHAR", [k for _, k in keys]))
        existing = {(ns, key): node_id for ns, key, node_id in con.execute(
            f"SELECT n.namespace, n.key, n.id FROM nodes n JOIN {wanted} ON n.namespace = w.ns AND n.key = w.key",
            params,
        ).fetchall()}
        new = [n for n in nodes if (n.namespace, n.key) not in existing]
        fresh = iter(r[0] for r in con.execute("SELECT nextval('node_ids') FROM range(?)", [len(new)]).fetchall())
        for node in nodes:
            node.id = existing[(node.namespace, node.key)] if (node.namespace, node.key) in existing else next(fresh)
        rows, params = _rows(
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
        ids, params = _rows(1, id=("BIGINT", [n.id for n in nodes]))
        con.execute(f"DELETE FROM node_names WHERE node_id IN (SELECT id FROM {ids})", params)
        names = [(n.namespace, key, n.id) for n in nodes for key in _name_keys(n)]
        rows, params = _rows(1, ns=("VARCHAR", [a for a, _, _ in names]), key=("VARCHAR", [b for _, b, _ in names]),
                             id=("BIGINT", [c for _, _, c in names]))
        con.execute(f"INSERT INTO node_names SELECT ns, key, id FROM {rows}", params)
        self._replace_observations(con, [n for n in nodes if n.observations is not None], now)
        with_vectors = [n for n in nodes if n.embedding is not None]
        if with_vectors:
            self._write_vectors(con, "node", [n.id for n in with_vectors], [n.embedding for n in with_vectors],
                                dimensions)
        return len(new), len(nodes) - len(new)

    @staticmethod
    def _replace_observations(con: Any, nodes: list[NodeRecord], now: datetime) -> None:
        """Make each node's observations its `observations`: drop the others, append the missing in order."""
        if not nodes:
            return
        wanted = [(n.id, text) for n in nodes for text in dict.fromkeys(n.observations or ())]
        columns = {"node_id": ("BIGINT", [i for i, _ in wanted]), "text": ("VARCHAR", [t for _, t in wanted]),
                   "position": ("BIGINT", list(range(len(wanted))))}
        ids, id_params = _rows(1, id=("BIGINT", [n.id for n in nodes]))
        rows, params = _rows(2, **columns)
        con.execute(
            f"DELETE FROM observations WHERE node_id IN (SELECT id FROM {ids}) "
            f"AND (node_id, text) NOT IN (SELECT node_id, text FROM {rows})",
            [*id_params, *params],
        )
        if wanted:
            rows, params = _rows(2, **columns)
            con.execute(
                f"INSERT INTO observations SELECT w.node_id, w.text, $1 FROM {rows} WHERE NOT EXISTS "
                "(SELECT 1 FROM observations o WHERE o.node_id = w.node_id AND o.text = w.text) ORDER BY w.position",
                [now, *params],
            )

    def _restore_edges(
        self, con: Any, edges: list[EdgeWrite], now: datetime, dimensions: int | None
    ) -> tuple[int, int]:
        """Insert or replace edges: one that still holds replaces the one with the same ends and type that
        still holds; one that no longer holds, the one with the same ends, type and validity."""
        if not edges:
            return 0, 0
        keys = sorted({(e.namespace, k) for e in edges for k in (e.source_key, e.target_key)})
        wanted, params = _rows(1, ns=("VARCHAR", [ns for ns, _ in keys]), key=("VARCHAR", [k for _, k in keys]))
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
        wanted, params = _rows(1, ns=("VARCHAR", [a for a, _, _, _ in ends]), s=("BIGINT", [b for _, b, _, _ in ends]),
                               t=("BIGINT", [c for _, _, c, _ in ends]), type=("VARCHAR", [d for _, _, _, d in ends]))
        stored: dict[tuple[Any, ...], int] = {}
        for edge_id, ns, source, target, type_, valid_from, valid_until in con.execute(
            "SELECT e.id, e.namespace, e.source_id, e.target_id, e.type, e.valid_from, e.valid_until FROM edges e "
            f"JOIN (SELECT DISTINCT * FROM {wanted}) d ON e.namespace = d.ns AND e.source_id = d.s "
            "AND e.target_id = d.t AND e.type = d.type ORDER BY e.id",
            params,
        ).fetchall():
            stored.setdefault((ns, source, target, type_, valid_until, valid_from if valid_until else None), edge_id)
        is_new = [identity not in stored for identity in identities]
        fresh = iter(r[0] for r in con.execute(
            "SELECT nextval('edge_ids') FROM range(?)", [is_new.count(True)]
        ).fetchall())
        ids = [next(fresh) if new else stored[identity] for identity, new in zip(identities, is_new)]
        rows, params = _rows(
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
            self._write_vectors(con, "edge", list(vectors), list(vectors.values()), dimensions)
        return created, len(edges) - created

    def _restore_provenance(self, con: Any, snapshot: Snapshot) -> tuple[int, int]:
        """Add the snapshot's mentions and evidence, resolved by natural keys; return how many were new."""
        mentions, mention_params = _rows(
            1, ns=("VARCHAR", [m[0] for m in snapshot.mentions]), key=("VARCHAR", [m[1] for m in snapshot.mentions]),
            doc=("VARCHAR", [m[2] for m in snapshot.mentions]), ordinal=("BIGINT", [m[3] for m in snapshot.mentions]),
        )
        evidence, evidence_params = _rows(
            1, ns=("VARCHAR", [e[0] for e in snapshot.evidence]), s=("VARCHAR", [e[1] for e in snapshot.evidence]),
            t=("VARCHAR", [e[2] for e in snapshot.evidence]), type=("VARCHAR", [e[3] for e in snapshot.evidence]),
            valid_from=("TIMESTAMP", [e[4] for e in snapshot.evidence]),
            valid_until=("TIMESTAMP", [e[5] for e in snapshot.evidence]),
            doc=("VARCHAR", [e[6] for e in snapshot.evidence]), ordinal=("BIGINT", [e[7] for e in snapshot.evidence]),
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
                f"(SELECT row_number() OVER () AS i, * FROM {evidence}) w "
                "LEFT JOIN nodes s ON s.namespace = w.ns AND s.key = w.s "
                "LEFT JOIN nodes t ON t.namespace = w.ns AND t.key = w.t "
                "LEFT JOIN edges e ON e.namespace = w.ns AND e.source_id = s.id AND e.target_id = t.id "
                "AND e.type = w.type AND e.valid_until IS NOT DISTINCT FROM w.valid_until "
                "AND (w.valid_until IS NULL OR e.valid_from IS NOT DISTINCT FROM w.valid_from) "
                f"{chunk} GROUP BY w.i",
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
        return added[0], added[1]

    def _reload_vectors(self) -> None:
        """Rebuild the in-memory vector indexes from the file (after a restore touched many rows)."""
        for mirror in self._hnsw.values():
            mirror.close()
        self._hnsw.clear()
        for index in self._indexes.values():
            index.close()
        self._indexes = {}
        self._load_vectors()

    def health(self) -> dict[str, Any]:
        with self._lock:
            info = self.embedder_info()
            sizes = {kind: len(index) for kind, index in self._indexes.items()}
            modes = {}
            indexes: dict[str, Any] = {}
            vss_note = "" if self._vss is not None else f"; vss unavailable: {self._vss_problem}"
            for kind in _VECTOR_TABLES:
                mirror = self._hnsw.get(kind)
                index = self._indexes.get(kind)
                if index is not None:
                    indexes[kind] = {
                        "path": self.vector_index if self.vector_index != "ivf" or index.active else "exact",
                        "ivf_ready": index.ready, "ivf_building": index.building,
                        "ivf_due": self.vector_index == "ivf" and index.needs_build(), "build": index.build_info or None,
                        "problem": index.problem or None,
                    }
                if kind not in self._indexes:
                    modes[kind] = "none (no embedder bound yet)"
                elif kind not in self._searched and self._index_due(kind):
                    modes[kind] = (f"not indexed: no search has asked for {kind} vectors since open (they are read "
                                   "by id); the first one scans exactly and starts the index")
                elif self.vector_index != "hnsw":
                    mode = index.mode()
                    modes[kind] = mode[:-1] + vss_note + ")" if mode.startswith("exact scan") and vss_note else mode
                elif mirror is not None and mirror.ready:
                    modes[kind] = "hnsw (vss, in memory)"
                elif mirror is not None:
                    modes[kind] = "exact scan while the HNSW index builds"
                elif self._vss is None:
                    modes[kind] = f"exact scan (vss unavailable: {self._vss_problem})"
                elif self._hnsw_problem:
                    modes[kind] = f"exact scan ({self._hnsw_problem})"
                else:
                    modes[kind] = f"exact scan ({sizes[kind]} vectors, below hnsw_min_rows={self.hnsw_min_rows})"
            return {
                "path": str(self.path),
                "schema_version": int(self._meta("schema_version") or 0),
                "embedder": None if info is None else {"id": info[0], "dimensions": info[1]},
                "vss": {"loaded": self._vss is not None, "path": str(self._vss) if self._vss else None,
                        "problem": self._vss_problem or None},
                "vector_search": modes,
                "vector_index": indexes,
                "vectors": sizes,
                "graph_in_memory": {"nodes": self._graph.node_count, "edges": self._graph.edge_count,
                                    "adjacency_pending": self._graph.out_edges.delta_count},
                "passage_texts": (
                    f"in memory ({self._graph.text_bytes / 2**20:.1f} MB, up to passage_texts_mb="
                    f"{self.passage_texts_mb:g})" if self._graph.chunk_text is not None else
                    f"read from the file (more than passage_texts_mb={self.passage_texts_mb:g} MB of them)"),
                "read_only": self.read_only_reason or None,
                "memory_limit": f"{self.memory_limit} for DuckDB's cache and indexes (store option memory_limit)",
                "vectors_in_memory": self._vectors_in_memory(sizes, info),
                "vectors_in_file": self._vectors_in_file(),
            }

    def _vectors_in_file(self) -> str:
        """How the file stores each kind's vectors, and what an older file's float32 relations cost (for doctor)."""
        if not self._stored_precision:
            return "none (no embedder bound yet)"
        text = ", ".join(f"{kind} {precision}" for kind, precision in self._stored_precision.items())
        older = [kind for kind, precision in self._stored_precision.items() if precision != _PRECISION[kind]]
        if older:
            text += (f"; written before {', '.join(older)} vectors were stored in {_PRECISION[older[0]]}, which takes "
                     "half the space and writes them several times as fast: `duckgraph export --embeddings` and "
                     "`duckgraph import` into a new file convert them")
        return text

    def _vectors_in_memory(self, sizes: dict[str, int], info: tuple[str, int] | None) -> str:
        """What the vectors take in this process, and what an index build adds while it runs (for doctor)."""
        if info is None or not sizes:
            return "none (no embedder bound yet)"
        megabytes = {kind: count * self._indexes[kind].bytes_per_vector / 2**20 for kind, count in sizes.items()}
        held = {kind: "" if index.precision == "float32" else f" in {index.precision}"
                for kind, index in self._indexes.items()}
        text = f"{sum(megabytes.values()):,.1f} MB (" + ", ".join(
            f"{kind} {mb:,.1f}{held[kind]}" for kind, mb in megabytes.items()) + ")"
        reduced = {kind: index.reduced_bytes / 2**20 for kind, index in self._indexes.items() if index.reduced_bytes}
        if reduced:
            text += "; the IVF scan's reduced copies " + ", ".join(
                f"{kind} {mb:,.1f} MB" for kind, mb in reduced.items())
        largest = max((kind for kind in megabytes if kind in self._searched), key=megabytes.get)
        if self.vector_index == "ivf" and sizes[largest] >= (self.ann_min_rows or 0):
            text += f"; building the {largest} index holds {megabytes[largest]:,.1f} MB more while it runs"
        return text

    # -- backup, read-only files, failed writes ------------------------------------------------------------

    def backup(self, destination: Path) -> None:
        """Copy the database into a fresh file with ATTACH + COPY FROM DATABASE.

        The copy is one statement under the store lock, so it is one consistent snapshot even while a server
        uses the store (its writes wait); it carries the tables, sequences (with their current values), indexes
        and constraints, leaves out free blocks, and works on a file opened read-only. The copy is checkpointed,
        its row counts are compared with the original's table by table, and it is detached.
        """
        import duckdb

        destination = Path(destination)
        alias = "duckgraph_backup"
        with self._lock:
            con = self._db
            try:
                try:
                    source = con.execute("SELECT current_database()").fetchone()[0]
                    literal = str(destination).replace("'", "''")
                    con.execute(f"ATTACH '{literal}' AS {alias} (READ_WRITE)")
                    try:
                        con.execute(f"COPY FROM DATABASE {_quoted(source)} TO {alias}")
                        con.execute(f"CHECKPOINT {alias}")
                        self._compare_copy(con, source, alias, destination)
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
                        self._reopen_after_fatal()
                    problem = _storage_problem(str(exc)) or "DuckDB failed"
                    raise StoreError(f"could not write the copy {destination}: {problem} ({_one_line(exc)})") from exc
            except BaseException:
                for leftover in (destination, destination.with_name(destination.name + ".wal")):
                    try:
                        leftover.unlink(missing_ok=True)
                    except OSError as failure:
                        log.warning("could not remove the partial backup %s: %s", leftover, failure)
                raise

    def _compare_copy(self, con: Any, source: str, alias: str, destination: Path) -> None:
        def counts(database: str) -> dict[str, int]:
            tables = [row[0] for row in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'", [database]
            ).fetchall()]
            return {t: con.execute(f"SELECT count(*) FROM {_quoted(database)}.main.{_quoted(t)}").fetchone()[0]
                    for t in tables}

        original, copied = counts(source), counts(alias)
        if original != copied:
            differ = sorted(t for t in original.keys() | copied.keys() if original.get(t) != copied.get(t))
            raise StoreError(
                f"the copy {destination} does not match {self.path} (tables {', '.join(differ)} differ); "
                "nothing was kept"
            )

    def read_only_message(self) -> str:
        """What a refused write says when the file is open read-only."""
        return (
            f"this knowledge file is read-only: {self.path} ({self.read_only_reason or 'opened read-only'}). "
            "Searches and reads work; to add or change knowledge, make the file and its folder writable by this "
            "user, or copy it somewhere writable (duckgraph backup) and point --db / DUCKGRAPH_DB at the copy."
        )

    def _unwritable_reason(self) -> str:
        """Why this user cannot write the database (file, its WAL or folder), or "" when it can.

        Raises StoreError when the file does not exist and cannot be created. (root passes every access check.)
        """
        import os

        folder = self.path.parent
        wal = self.path.with_name(self.path.name + ".wal")
        try:
            read_only_fs = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            read_only_fs = False
        if not self.path.exists():
            if read_only_fs or not os.access(folder, os.W_OK | os.X_OK):
                raise StoreError(
                    f"cannot create {self.path}: the folder {folder} is "
                    f"{'on a read-only file system' if read_only_fs else 'not writable by this user'}. "
                    "Choose another file with --db or DUCKGRAPH_DB."
                )
            return ""
        if read_only_fs:
            return f"it is on a read-only file system ({folder})"
        if not os.access(self.path, os.W_OK):
            return "the file is not writable by this user"
        if wal.exists() and not os.access(wal, os.W_OK):
            return f"its write-ahead log {wal.name} is not writable by this user"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"its folder {folder} is not writable by this user (DuckDB keeps its write-ahead log there)"
        return ""

    def _raise_storage_error(self, exc: BaseException) -> None:
        """Raise a StoreError naming the file when `exc` is DuckDB failing to write it (disk full, permissions).

        DuckDB rolls a failed commit back. When a checkpoint fails it invalidates the database instead (what was
        committed is safe in the write-ahead log): the store then reopens the file, which also rebuilds the
        in-memory indexes from what the file holds.
        """
        import duckdb

        if not isinstance(exc, duckdb.Error):
            return
        message = str(exc)
        fatal = isinstance(exc, duckdb.FatalException)
        problem = _storage_problem(message)
        if problem is None and not fatal:
            return
        reopened = self._reopen_after_fatal() if fatal else ""
        if "COMMIT succeeded" in message:
            outcome = (
                f"The change itself was saved (in {self.path.name}.wal), but DuckDB could not fold it into the "
                f"file{reopened}. Free some disk space; nothing is lost."
            )
        else:
            outcome = f"Nothing of this change was saved; everything stored before is intact{reopened}."
            if problem in ("disk full", "disk full or file size limit reached"):
                outcome += " Free some disk space and try again."
            elif problem == "not writable":
                outcome += " Make the file and its folder writable by this user."
        raise StoreError(
            f"could not write to {self.path}: {problem or 'DuckDB failed'} ({_one_line(exc)}). {outcome}"
        ) from exc

    def _reopen_after_fatal(self) -> str:
        """Close and open the file again after DuckDB invalidated it; say how that went (for an error message)."""
        try:
            self.close()
        except Exception as failure:
            log.warning("closing %s after a fatal error failed: %s", self.path, failure)
            self._con = None
        self._indexes = {}
        try:
            self.open()
        except Exception as failure:
            log.error("reopening %s failed: %s", self.path, failure)
            return f"; reopening it failed ({_one_line(failure)}): restart duckgraph once the problem is fixed"
        return "; duckgraph reopened the file"


_NODE_COLUMNS = "id, namespace, key, name, type, description, aliases, properties, created_at, updated_at"
#: Up to this many ids, rows are fetched by one probe of the primary key each (UNION ALL of `id = ...`): DuckDB
#: answers `id IN (list)` with a scan of the whole table (measured at 5M rows: 5 ids 2.8 ms against 4.1 ms,
#: 30 ids 14 ms against 46 ms, on a busy machine).
_POINT_LOOKUPS = 64
_EDGE_COLUMNS = (
    "id, source_id, target_id, type, description, weight, properties, valid_from, valid_until, created_at, updated_at"
)
_DOCUMENT_COLUMNS = "id, namespace, text, title, metadata, created_at"


def _naive_utc(moment: datetime | None) -> datetime | None:
    """Times are compared as naive UTC, as they are stored."""
    if moment is not None and moment.tzinfo is not None:
        return moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def _edge(row: tuple) -> EdgeRecord:
    return EdgeRecord(id=row[0], source_id=row[1], target_id=row[2], type=row[3], description=row[4], weight=row[5],
                      properties=json.loads(row[6]), valid_from=row[7], valid_until=row[8], created_at=row[9],
                      updated_at=row[10])


def _document(row: tuple) -> DocumentRecord:
    return DocumentRecord(id=row[0], namespace=row[1], text=row[2], title=row[3], metadata=json.loads(row[4]),
                          created_at=row[5])


def _node(row: tuple) -> NodeRecord:
    return NodeRecord(
        id=row[0], namespace=row[1], key=row[2], name=row[3], type=row[4], description=row[5],
        aliases=tuple(row[6]), properties=json.loads(row[7]), created_at=row[8], updated_at=row[9],
    )


def _name_keys(node: NodeRecord) -> list[str]:
    """What `find_nodes` finds a node by: its key, its aliases' keys, and the loose forms of both."""
    keys = [node.key, *(entity_key(alias) for alias in node.aliases)]
    return list(dict.fromkeys([*keys, *filter(None, map(loose_key, keys))]))


def _mentioning(chunks: list[tuple[int, str]], names: list[str]) -> list[int]:
    """Chunks whose text names one of `names`; all of them when none does (the fact came from the document)."""
    hits = [chunk_id for chunk_id, text in chunks if any(name in text.casefold() for name in names)]
    return hits or [chunk_id for chunk_id, _ in chunks]


def apply_write_settings(con: Any, checkpoint_threshold: str = CHECKPOINT_THRESHOLD) -> None:
    """The DuckDB settings the store writes with (see CHECKPOINT_THRESHOLD and DISABLED_COMPRESSION); benchmarks
    may try another threshold."""
    con.execute(f"SET checkpoint_threshold = '{checkpoint_threshold}'")
    con.execute(f"SET disabled_compression_methods = '{DISABLED_COMPRESSION}'")


def _insert_vectors(
    con: Any, table: str, ids: Sequence[int], vectors: Sequence[Any], dimensions: int,
    extra: dict[str, Any] | None = None, *, replace: bool = True, precision: str = "float32",
) -> None:
    """Insert rows of (id, [extra columns,] vector) from numpy arrays; with `replace`, the ids' stored vectors
    are deleted first (a vector table has no key to replace by). Rows of ids known to be new should go in with
    replace=False, which skips that delete. The table's vector column is FLOAT[d] for `precision` "float32", a BLOB
    of bfloat16 bit patterns (2 bytes a dimension, little-endian) for "bfloat16".

    Vectors go in as one Arrow fixed-size-list column, which DuckDB reads as FLOAT[d] without converting: binding
    them as Python list parameters costs ~0.2 ms per float in DuckDB 1.5.5 (300 x 384 floats: 20 s), and a
    columnar view of one column per component put together with list_value took twice the time of this (60,000
    vectors in calls of 600: 57-75 against 28-30 us of CPU per vector). bfloat16 ones go in as one Arrow
    fixed-size-binary column over the rounded matrix's bytes.
    """
    # Imported here: ~80 ms, which only writes need.
    import pyarrow as pa

    id_array = np.asarray(ids, dtype=np.int64)
    if len(vectors) != len(id_array) or len(np.unique(id_array)) != len(id_array):
        raise ValueError(f"{len(vectors)} vectors for {len(id_array)} ids, which must be distinct")
    matrix = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(id_array), dimensions)
    columns: dict[str, Any] = {"id": pa.array(id_array)}
    for name, values in (extra or {}).items():
        columns[name] = pa.array(np.asarray(values))
    if precision == "bfloat16":
        bits = to_bfloat16(matrix).astype("<u2", copy=False)
        columns["vector"] = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(2 * int(dimensions)), len(bits), [None, pa.py_buffer(bits)])
    else:
        columns["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), int(dimensions))
    view = f"_incoming_{table}"
    con.register(view, pa.table(columns))
    try:
        if replace:
            id_column = next(column for name, column, _ in _VECTOR_TABLES.values() if name == table)
            con.execute(f"DELETE FROM {table} WHERE {id_column} IN (SELECT id FROM {view})")
        selected = "".join(f"{name}, " for name in (extra or {}))
        con.execute(f"INSERT INTO {table} SELECT id, {selected}vector FROM {view}")
    finally:
        con.unregister(view)


#: A list parameter bound as JSON text and unpacked in SQL (`_JSON_IDS % n` for $n): DuckDB binds a Python list
#: at ~0.5 ms per element here (it looks for pandas on each one), JSON text at once.
_JSON_IDS = "from_json($%d, '[\"BIGINT\"]')"
_JSON_NAMES = "from_json($%d, '[\"VARCHAR\"]')"


def _json_list(values: Iterable[Any]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _arrow_vectors(result: Any, table: str, dimensions: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of a query's `id` and `embedding` columns, read as Arrow (see `_read_vectors`): float32
    vectors from a FLOAT[d] column, bfloat16 bit patterns (uint16) from a BLOB one (see `_insert_vectors`)."""
    # Imported here, once there are vectors to read: ~80 ms.
    import pyarrow as pa

    block = result.to_arrow_table()
    ids = block.column("id").to_numpy().astype(np.int64, copy=False)
    if not len(ids):
        return ids, np.zeros((0, dimensions), dtype=np.float32)
    embeddings = pa.concat_arrays(block.column("embedding").chunks)
    if pa.types.is_binary(embeddings.type) or pa.types.is_large_binary(embeddings.type):
        offsets = np.frombuffer(embeddings.buffers()[1], dtype=np.int64 if pa.types.is_large_binary(embeddings.type)
                                else np.int32)[embeddings.offset : embeddings.offset + len(ids) + 1]
        whole = embeddings.null_count == 0 and bool((np.diff(offsets) == 2 * dimensions).all())
        flat = np.frombuffer(embeddings.buffers()[2], dtype="<u2", count=len(ids) * dimensions,
                             offset=int(offsets[0])).astype(np.uint16, copy=False) if whole else None
    else:
        flat = np.asarray(embeddings.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
        whole = embeddings.null_count == 0 and len(flat) == len(ids) * dimensions
    if not whole:
        raise StoreError(f"{table}: the vectors of {len(ids)} rows are not all of {dimensions} dimensions; the file "
                         "may be damaged")
    return ids, flat.reshape(len(ids), dimensions)


def _rows(first: int, **columns: tuple[str, list[Any]]) -> tuple[str, list[str]]:
    """A subquery `w` yielding the given columns row by row, and its parameters ($first, $first+1, ...).

    Each column is bound as one JSON array and unnested in SQL: one parameter per column, not per value.
    Times are naive UTC datetimes (or None).
    """
    selects, params = [], []
    for position, (name, (sql_type, values)) in enumerate(columns.items(), start=first):
        if sql_type == "TIMESTAMP":
            values = [None if v is None else v.isoformat(timespec="microseconds") for v in values]
        element = f'["{sql_type[:-2]}"]' if sql_type.endswith("[]") else f'"{sql_type}"'
        selects.append(f"unnest(from_json(${position}, '[{element}]')) AS {name}")
        params.append(json.dumps(values, ensure_ascii=False, allow_nan=False))
    return f"(SELECT {', '.join(selects)}) w", params


def _insert_pairs(con: Any, table: str, pairs: set[tuple[int, int]]) -> None:
    if pairs:
        rows, params = _rows(1, a=("BIGINT", [a for a, _ in pairs]), b=("BIGINT", [b for _, b in pairs]))
        con.execute(f"INSERT OR IGNORE INTO {table} SELECT a, b FROM {rows}", params)


def _explain_open_error(path: Path, exc: Exception) -> str:
    message = str(exc)
    if "lock" in message.lower():
        import re

        # DuckDB names the holder: '... Conflicting lock is held in /usr/bin/python3.11 (PID 1081) by user ...'
        held = re.search(r"held in (?P<program>.+?) \(PID (?P<pid>\d+)\)", message)
        holder = (f"another program, {held['program']} (PID {held['pid']}), holds it"
                  if held else f"another process holds it ({message.strip()})")
        return (
            f"{path} is locked: {holder}, and DuckDB lets only one process open a file for writing. duckgraph "
            "servers share a file among themselves, but not with other programs: close that program (or its "
            "connection to the file), or point duckgraph at another file with --db / DUCKGRAPH_DB."
        )
    if "permission" in message.lower() or "read-only" in message.lower():
        return f"cannot open {path}: {message.strip()} (check the file and folder permissions)"
    return f"cannot open {path}: {message.strip()}"


#: OS error texts in DuckDB's messages -> what went wrong, in words the user can act on.
_STORAGE_PROBLEMS = (
    ("no space left on device", "disk full"),
    ("disk quota exceeded", "disk full"),
    ("file too large", "disk full or file size limit reached"),
    ("permission denied", "not writable"),
    ("read-only file system", "not writable"),
)


def _storage_problem(message: str) -> str | None:
    """'disk full', 'not writable', 'I/O error' when a DuckDB message is about writing a file, else None."""
    lowered = message.lower()
    for needle, problem in _STORAGE_PROBLEMS:
        if needle in lowered:
            return problem
    if "could not write file" in lowered or "io error" in lowered:
        return "I/O error"
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400]


def _quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


@hookimpl
def register_stores(register):
    register("duckdb", DuckDBStore)
