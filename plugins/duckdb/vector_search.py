"""The choice of vector index, and each kind's vectors in memory (`VectorIndex`, derived from the vector tables).

The store option vector_index picks the search path: "ivf" (default; an exact scan below ann_min_rows vectors of a
kind, an IVF index in memory above, built in the background while the exact scan answers), "exact" (always an exact
scan) or "hnsw" (the vss HNSW index in memory above hnsw_min_rows: slow to build). The indexes are rebuilt from the
tables at every open, so a crash or an unclean close can never leave a stale one behind; an IVF build's layout is
saved in the file (`vector_layouts`) so that a reopen need not build it again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb import sql, vector_tables
from duckgraph.plugins.duckdb.connection import interrupted
from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.hnsw import HnswMirror, vss_extension_path
from duckgraph.plugins.duckdb.mirror.vectors import SavedLayout, VectorIndex
from duckgraph.plugins.duckdb.vector_tables import PRECISION, VECTOR_TABLES

log = logging.getLogger(__name__)

np: Any = NumpyOnFirstUse(globals())

#: The vector search paths `vector_index` chooses from.
VECTOR_INDEXES = ("ivf", "exact", "hnsw")
#: With vector_index = "hnsw": below this many vectors an exact scan answers while the HNSW index is not needed.
DEFAULT_HNSW_MIN_ROWS = 50_000
#: IVF layouts saved so that a reopen need not build the index again (`SavedLayout`): derived data, created on
#: the first save; a layout lost or refused costs a build.
_LAYOUTS = (
    "CREATE TABLE IF NOT EXISTS vector_layouts "
    "(kind VARCHAR PRIMARY KEY, saved_at TIMESTAMP NOT NULL, info JSON NOT NULL, layout BLOB NOT NULL)"
)
#: Kinds whose approximate index is built as soon as they have enough vectors. The built-in search reads edge
#: vectors by id only (a fact's similarity), so theirs, the largest (5 a node), waits for a search that asks.
_INDEXED_FROM_THE_START = frozenset({"node", "chunk"})


class VectorSearch:
    """Each kind's `VectorIndex`, the HNSW mirrors of vector_index = "hnsw", and the search through them.

    Shares the store's lock: the store calls it under that lock, except for searches, which hold it only to pick
    the index (the index guards its own rows, so that a search's graph reads and vector reads, or two searches,
    do not wait on each other)."""

    def __init__(self, lock: Any, path: Path, *, choice: str, ann_min_rows: int, ann_nprobe: int | None,
                 hnsw_min_rows: int, use_vss: bool) -> None:
        self._lock = lock
        self.path = path
        self.choice = choice
        self.ann_min_rows = ann_min_rows
        self.ann_nprobe = ann_nprobe
        self.hnsw_min_rows = hnsw_min_rows
        self.use_vss = use_vss
        self.indexes: dict[str, VectorIndex] = {}
        #: Kind -> "float32" (a FLOAT[d] column) or "bfloat16" (a BLOB column): how this file stores the vectors.
        self.stored_precision: dict[str, str] = {}
        self._hnsw: dict[str, HnswMirror] = {}
        #: Kinds whose index is kept (built when due): those indexed from the start and those searched since open.
        self._searched: set[str] = set(_INDEXED_FROM_THE_START)
        self._vss: Path | None = None
        self._vss_problem = "not tried"
        self._hnsw_problem = ""

    # -- lifecycle -------------------------------------------------------------------------------------

    def load_vss(self, con: Any) -> None:
        if not self.use_vss:
            self._vss_problem = "disabled by the store option use_vss = false"
            return
        path = vss_extension_path()
        if path is None:
            self._vss_problem = "the duckdb-extension-vss package is not installed for this DuckDB version"
            return
        try:
            con.execute(f"LOAD '{path}'")
        except Exception as exc:
            if interrupted(exc):  # Ctrl-C while loading: the command stops, it does not go on without vss
                raise
            self._vss_problem = f"loading {path} failed: {exc}"
            log.warning("vss could not be loaded, vector search uses an exact scan: %s", exc)
            return
        self._vss = path
        self._vss_problem = ""

    def new_indexes(self, con: Any, dimensions: int) -> None:
        """Empty vector indexes of every kind, and how the file stores each kind's vectors (see `PRECISION`)."""
        self.stored_precision = vector_tables.stored_precisions(con)
        self.indexes = {kind: self._new_index(kind, dimensions) for kind in VECTOR_TABLES}

    def _new_index(self, kind: str, dimensions: int) -> VectorIndex:
        return VectorIndex(dimensions, kind=kind, ann_min_rows=self.ann_min_rows if self.choice == "ivf" else None,
                           nprobe=self.ann_nprobe, precision=PRECISION[kind])

    def load(self, con: Any) -> None:
        """Every kind's vectors from the tables into its (new) index, its saved layout, and its build if due."""
        for kind in VECTOR_TABLES:
            vector_tables.read_into(con, self.indexes[kind], kind)
            self._restore_layout(con, kind)
            self._maybe_start_index(kind)

    def _restore_layout(self, con: Any, kind: str) -> None:
        """Take the IVF layout saved for a kind whose index is wanted from the start, if it fits its vectors."""
        import duckdb  # imported when a file is opened: registering the plugin stays cheap

        if self.choice != "ivf" or kind not in self._searched:
            return
        try:
            row = con.execute("SELECT info, layout FROM vector_layouts WHERE kind = ?", [kind]).fetchone()
        except duckdb.CatalogException:  # a file no layout was saved in yet
            return
        if row is None:
            return
        try:
            restored = self.indexes[kind].restore(SavedLayout.from_bytes(row[1], json.loads(row[0])))
        except Exception as exc:  # derived data: the index is built again instead
            log.warning("%s: the saved IVF layout of the %s vectors is unreadable (%s); building it again",
                        self.path, kind, exc)
            return
        if restored:
            log.info("%s: IVF layout of the %s vectors read from the file: %s", self.path, kind,
                     self.indexes[kind].build_info)
        else:
            log.info("%s: the saved IVF layout of the %s vectors does not fit them (another width, parts that "
                     "disagree, or fewer rows than ann_min_rows); the index is built as usual", self.path, kind)

    def save_layouts(self, transaction: Callable[[], AbstractContextManager[Any]]) -> None:
        """Save the layouts of the IVF builds finished since the last save, each in its own transaction."""
        for kind, index in self.indexes.items():
            layout = index.take_unsaved_layout()
            if layout is None:
                continue
            try:
                with transaction() as con:
                    con.execute(_LAYOUTS)
                    con.execute("INSERT OR REPLACE INTO vector_layouts VALUES (?, ?, ?, ?)",
                                [kind, sql.now(), json.dumps(layout.info), layout.to_bytes()])
            except Exception as exc:  # derived data: the next open builds the index again
                if interrupted(exc):  # Ctrl-C is no failure to log and go on from
                    raise
                log.warning("saving the IVF layout of the %s vectors in %s failed: %s", kind, self.path, exc)

    def close(self) -> None:
        """Stop the indexes' builds and the HNSW mirrors (at close)."""
        self._close_hnsw()
        for index in self.indexes.values():
            index.close()
        self._searched = set(_INDEXED_FROM_THE_START)

    def drop(self) -> None:
        """Close and forget the indexes (before they are loaded from the file again)."""
        self._close_hnsw()
        for index in self.indexes.values():
            index.close()
        self.indexes = {}

    def _close_hnsw(self) -> None:
        for mirror in self._hnsw.values():
            mirror.close()
        self._hnsw.clear()

    # -- building ----------------------------------------------------------------------------------------

    def _maybe_start_index(self, kind: str) -> None:
        """Start building the approximate index of a kind when it is due (in the background) and wanted."""
        if kind not in self._searched:
            return
        if self.choice == "hnsw":
            self._maybe_start_hnsw(kind)
        elif self.choice == "ivf":
            self.indexes[kind].maybe_build()

    def _index_due(self, kind: str) -> bool:
        """Whether an approximate index of the kind would start building now if it were wanted."""
        index = self.indexes[kind]
        if self.choice == "ivf":
            return index.needs_build()
        return (self.choice == "hnsw" and kind not in self._hnsw and len(index) >= self.hnsw_min_rows
                and self._vss is not None)

    def _maybe_start_hnsw(self, kind: str) -> None:
        index = self.indexes[kind]
        if not self._index_due(kind):
            return
        try:
            mirror = HnswMirror(kind, index.dimensions, self._vss)
        except Exception as exc:
            if interrupted(exc):  # Ctrl-C during its LOAD: the command stops, search does not degrade
                raise
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

    def apply(self, removed: dict[str, list[int]], written: dict[tuple[str, str], list[tuple[int, Any]]]) -> None:
        """A committed write's vectors: `removed` (kind -> ids), `written` ((kind, namespace) -> (id, vector))."""
        if not self.indexes:
            return
        for kind, ids in removed.items():
            self.indexes[kind].remove(ids)
        for (kind, namespace), items in written.items():
            items = [(item_id, vector) for item_id, vector in items if vector is not None]
            if not items:
                continue
            self.indexes[kind].upsert([i for i, _ in items], np.vstack([v for _, v in items]), namespace)
            if kind in self._hnsw:
                self._hnsw[kind].fresh.update(i for i, _ in items)
        if self.choice == "hnsw":  # an IVF index is (re)built on the next search that finds it due
            for kind in self.indexes:
                self._maybe_start_index(kind)

    # -- reads -------------------------------------------------------------------------------------------

    def search(self, kind: str, query: Any, k: int, namespace: str) -> list[tuple[int, float]]:
        with self._lock:
            index = self.indexes.get(kind)
            if index is not None and kind not in self._searched:
                self._searched.add(kind)
                self._maybe_start_index(kind)
            mirror = self._hnsw.get(kind)
        if index is None:
            return []
        if self.choice == "ivf":
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

    def similarity_array(self, kind: str, ids: Any, query: Any) -> Any:
        with self._lock:
            index = self.indexes.get(kind)
        return index.similarity_array(ids, query) if index is not None else np.full(len(ids), np.nan)

    def held_vectors(self, kind: str, ids: list[int]) -> dict[int, Any] | None:
        """The stored vectors of the ids, or None when the index holds them rounded (bfloat16) but the file, an
        older one, holds float32: then `file_vectors` reads the file's own floats."""
        index = self.indexes.get(kind)
        if index is None:
            return {}
        if index.precision == self.stored_precision[kind]:
            # The in-memory index holds exactly what the file holds (it is updated only after a commit).
            return index.vectors(ids)
        return None

    def file_vectors(self, con: Any, kind: str, ids: list[int]) -> dict[int, Any]:
        index = self.indexes[kind]
        ids = [i for i in ids if index.contains(i)]
        if not ids:
            return {}
        return vector_tables.read_by_id(con, kind, ids, index.dimensions)

    # -- health ------------------------------------------------------------------------------------------

    def sizes(self) -> dict[str, int]:
        return {kind: len(index) for kind, index in self.indexes.items()}

    def vss(self) -> dict[str, Any]:
        return {"loaded": self._vss is not None, "path": str(self._vss) if self._vss else None,
                "problem": self._vss_problem or None}

    def index_states(self) -> dict[str, Any]:
        """Kind -> the state of its index (health's "vector_index")."""
        states = {}
        for kind, index in self.indexes.items():
            states[kind] = {
                "path": self.choice if self.choice != "ivf" or index.active else "exact",
                "ivf_ready": index.ready, "ivf_building": index.building,
                "ivf_due": self.choice == "ivf" and index.needs_build(), "build": index.build_info or None,
                "problem": index.problem or None,
            }
        return states

    def modes(self) -> dict[str, str]:
        """Kind -> its search path in words (health's "vector_search")."""
        modes = {}
        vss_note = "" if self._vss is not None else f"; vss unavailable: {self._vss_problem}"
        for kind in VECTOR_TABLES:
            mirror = self._hnsw.get(kind)
            index = self.indexes.get(kind)
            if index is None:
                modes[kind] = "none (no embedder bound yet)"
            elif kind not in self._searched and self._index_due(kind):
                modes[kind] = (f"not indexed: no search has asked for {kind} vectors since open (they are read "
                               "by id); the first one scans exactly and starts the index")
            elif self.choice != "hnsw":
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
                modes[kind] = f"exact scan ({len(index)} vectors, below hnsw_min_rows={self.hnsw_min_rows})"
        return modes

    def in_file(self) -> str:
        """How the file stores each kind's vectors, and what an older file's float32 relations cost (for doctor)."""
        if not self.stored_precision:
            return "none (no embedder bound yet)"
        text = ", ".join(f"{kind} {precision}" for kind, precision in self.stored_precision.items())
        older = [kind for kind, precision in self.stored_precision.items() if precision != PRECISION[kind]]
        if older:
            text += (f"; written before {', '.join(older)} vectors were stored in {PRECISION[older[0]]}, which takes "
                     "half the space and writes them several times as fast: `duckgraph export --embeddings` and "
                     "`duckgraph import` into a new file convert them")
        return text

    def in_memory(self, info: tuple[str, int] | None) -> str:
        """What the vectors take in this process, and what an index build adds while it runs (for doctor)."""
        sizes = self.sizes()
        if info is None or not sizes:
            return "none (no embedder bound yet)"
        megabytes = {kind: count * self.indexes[kind].bytes_per_vector / 2**20 for kind, count in sizes.items()}
        held = {kind: "" if index.precision == "float32" else f" in {index.precision}"
                for kind, index in self.indexes.items()}
        text = f"{sum(megabytes.values()):,.1f} MB (" + ", ".join(
            f"{kind} {mb:,.1f}{held[kind]}" for kind, mb in megabytes.items()) + ")"
        reduced = {kind: index.reduced_bytes / 2**20 for kind, index in self.indexes.items() if index.reduced_bytes}
        if reduced:
            text += "; the IVF scan's reduced copies " + ", ".join(
                f"{kind} {mb:,.1f} MB" for kind, mb in reduced.items())
        largest = max((kind for kind in megabytes if kind in self._searched), key=megabytes.get)
        if self.choice == "ivf" and sizes[largest] >= (self.ann_min_rows or 0):
            text += f"; building the {largest} index holds {megabytes[largest]:,.1f} MB more while it runs"
        return text
