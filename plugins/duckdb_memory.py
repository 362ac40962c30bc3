"""What the DuckDB store keeps in memory to answer a search without asking DuckDB: the vectors, with an
inverted-file (IVF) index over them above a size, and a mirror of the graph (node records and names, edges with
a CSR adjacency in both directions, provenance links between nodes and passages).

DuckDB answers a lookup of a few hundred rows by id in tens of milliseconds (a scan, not an index probe) and
binds a Python list parameter at ~0.2 ms per element, so every read on the search path is served from here.
Everything here is derived data: it is built from the tables at open and updated after each committed write.
The one part written back is an IVF index's layout (`SavedLayout`), which the store keeps in a table of its own
so that a reopen takes it instead of building the index again.
"""

from __future__ import annotations

import io
import logging
import math
import mmap
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from duckgraph.ports import isin_ids, link_counts

log = logging.getLogger(__name__)


class _NumpyOnFirstUse:
    """Stands in for `numpy` until first used (the plugin module imports this one; registering must stay cheap)."""

    def __getattr__(self, name: str) -> Any:
        import numpy

        globals()["np"] = numpy
        return getattr(numpy, name)


np: Any = _NumpyOnFirstUse()

#: From this many vectors of one kind on, an IVF index is built (in the background) and searched; below it an
#: exact scan is exact and fast enough (memory-bound: 20k x 384 floats 3-4 ms here). IVF at 20k answered in
#: ~1 ms but its misses (recall@10 ~0.95) cost MuSiQue R@5 0.6 and all-gold@5 1.0 point.
DEFAULT_ANN_MIN_ROWS = 20_000
#: The index is rebuilt (in the background, on the next search) once rows written or deleted since the last
#: build exceed this share of the indexed rows: until then they are scanned exactly (or skipped, if deleted).
REBUILD_SHARE = 0.1
#: Above this many lists, the k-means and the assignment go through sqrt(lists) coarse centroids first, a vector
#: being compared with the fine centroids under its COARSE_PROBES nearest coarse ones.
TWO_LEVEL_FROM = 512
COARSE_PROBES = 3
#: k-means iterations and training sample per list.
KMEANS_ITERATIONS = 8
SAMPLE_PER_LIST = 24
MAX_SAMPLE = 100_000
#: Recall@10 the probe count is tuned for at build time, on queries made from stored vectors, and the margin
#: added to the count found (queries that are questions sit between topics: see `_tune_nprobe`).
TARGET_RECALL = 0.95
NPROBE_MARGIN = 1.25
#: Vectors of at least REDUCE_FROM dimensions have their lists scanned in a third of them (their principal
#: directions), and the best RERANK per result asked (at least MIN_RERANK) rescored on the full vectors. The scan
#: is memory-bound: at 1M MiniLM-shaped vectors a search (k=100) read ~20 MB of list rows, and took 2.6 ms so
#: against 3.7 (recall@10 0.980 against 0.978: the probes are tuned on the reduced centroids).
#: Used only when, on the tuning queries, the reduced scan of the lists probed keeps among its best MIN_RERANK rows
#: at least REDUCTION_RECALL of the exact top 10 those lists hold (otherwise the full vectors are scanned). Those
#: queries are harder than questions: at 1M they kept 97.6% with 200 rows, 98.5% with 400, real questions 99.5%
#: and 99.9%.
REDUCE_FROM = 192
RERANK = 8
MIN_RERANK = 400
REDUCTION_RECALL = 0.98
#: Rows of the sample the principal directions are computed from.
REDUCTION_SAMPLE = 20_000
#: How an index holds its vectors: "float32", or "bfloat16" (each float's upper half, rounded to nearest even: half
#: the memory; a cosine moves by at most ~3e-4, 7e-5 on average, on MiniLM vectors). bfloat16 rows are widened
#: back to float32 WIDEN_ROWS at a time for the arithmetic, never a whole matrix at once.
PRECISIONS = ("float32", "bfloat16")
WIDEN_ROWS = 65_536


_BUILDS = threading.Lock()


@dataclass(frozen=True)
class _Reduction:
    """The listed rows and the centroids projected onto the principal directions of the rows (`projection`:
    dimensions x width), for scanning lists at a fraction of the full vectors' memory traffic."""

    projection: Any
    matrix: Any
    centroids: Any

    @property
    def width(self) -> int:
        return self.projection.shape[1]

    def project(self, vectors: Any) -> Any:
        return vectors @ self.projection


@dataclass(frozen=True)
class SavedLayout:
    """An IVF index as the store saves it in the file: the lists (centroids, and the ids of their rows in list
    order, `offsets` delimiting each list), a check of each listed row's vector (`_row_checks`), the reduction's
    projection (or None) and the build's figures (`info`, the probe count among them). At open, rows whose vector
    is still the one checked keep their list; the others are scanned as rows written since the build."""

    centroids: Any
    ids: Any
    offsets: Any
    checks: Any
    projection: Any
    info: dict[str, Any]

    def to_bytes(self) -> bytes:
        arrays = {"centroids": self.centroids, "ids": self.ids, "offsets": self.offsets, "checks": self.checks}
        if self.projection is not None:
            arrays["projection"] = self.projection
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, info: dict[str, Any]) -> SavedLayout:
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return cls(centroids=arrays["centroids"], ids=arrays["ids"], offsets=arrays["offsets"],
                       checks=arrays["checks"], projection=arrays["projection"] if "projection" in arrays else None,
                       info=info)


def ivf_lists(rows: int) -> int:
    """How many inverted lists an IVF index over `rows` vectors gets: ~4 sqrt(rows), from 16 to 4096. More lists
    make a query scan a smaller share of the rows for the same recall (measured on MiniLM vectors: 8% of them
    with 2 sqrt(n) lists, 5% with 4 sqrt(n)), at the price of a longer k-means."""
    return int(min(4096, max(16, round(4 * math.sqrt(rows)))))


class VectorIndex:
    """Unit vectors of one kind (nodes, chunks or edges) held in memory, searched by dot product.

    Layout: rows [0, listed) are grouped by IVF list once an index is built (list l is the contiguous block
    offsets[l]:offsets[l+1], so probing a list is one matrix-vector product over contiguous memory); rows
    [listed, size) are the tail: written since the last build and always scanned. Without an index every row is
    in the tail (an exact scan). Deleting or rewriting a listed row leaves a hole (id -1) until the next build;
    deleting a tail row moves the last row into its place. Ids map to rows through a dense array (ids come from
    sequences, so they are small and dense).

    An index is built in a background thread from a snapshot (k-means on a sample, then every row assigned to
    its nearest centroid and copied in list order into a new matrix); rows written meanwhile are noted and
    moved to the tail when the new layout is installed. The number of lists probed per query is tuned at build
    time to reach TARGET_RECALL against the exact answer, and widened at query time until k rows of the asked
    namespace have been seen. Thread-safe.
    """

    def __init__(
        self, dimensions: int, *, kind: str = "node", ann_min_rows: int | None = DEFAULT_ANN_MIN_ROWS,
        nprobe: int | None = None, precision: str = "float32",
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        self.dimensions = dimensions
        self.kind = kind
        self.precision = precision
        #: None: never build an index (exact scan only).
        self.ann_min_rows = ann_min_rows
        #: Fixed probe count; None tunes it at build time.
        self.fixed_nprobe = nprobe
        self._lock = threading.RLock()
        self._matrix = np.zeros((0, dimensions), dtype=np.float32 if precision == "float32" else np.uint16)
        self._ids = np.zeros(0, dtype=np.int64)
        self._namespaces = np.zeros(0, dtype=np.int32)
        self._size = 0
        self._live = 0
        self._row_by_id = np.full(0, -1, dtype=np.int64)
        self._namespace_codes: dict[str, int] = {}
        # The IVF index, when built.
        self._centroids: Any = None
        self._offsets: Any = None
        self._listed = 0
        self._holes = 0
        self.nprobe = 0
        self._reduction: _Reduction | None = None
        # The build in progress (or the last one's outcome).
        self._dirty: set[int] | None = None
        self._thread: threading.Thread | None = None
        self._generation = 0
        self.problem = ""
        self.build_info: dict[str, Any] = {}
        #: The last build's layout until the store has saved it (`take_unsaved_layout`).
        self._unsaved_layout: SavedLayout | None = None

    def __len__(self) -> int:
        return self._live

    @property
    def bytes_per_vector(self) -> int:
        return self.dimensions * self._matrix.itemsize

    # -- state -----------------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._centroids is not None

    @property
    def active(self) -> bool:
        """Whether searches go through the IVF index (built, and worth it for these vectors)."""
        return self._centroids is not None and self.nprobe * 2 <= len(self._centroids)

    @property
    def reduced_bytes(self) -> int:
        """Memory held by the reduced copy of the listed rows (0 without a reduction)."""
        reduction = self._reduction
        return 0 if reduction is None else reduction.matrix.nbytes

    @property
    def building(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def mode(self) -> str:
        """The search path in words, for `health()`."""
        with self._lock:
            if self.ready and not self.active:
                return (f"exact scan (the IVF index of {len(self._centroids)} lists needs {self.nprobe} probes for "
                        "its recall: these vectors have too little cluster structure for it to pay)")
            if self.ready:
                text = f"ivf ({len(self._centroids)} lists, {self.nprobe} probed per query"
                if self._reduction is not None:
                    text += (f" in {self._reduction.width} of {self.dimensions} dimensions, the best candidates "
                             "rescored in all")
                text += f", {self._size - self._listed} rows written since the build scanned exactly"
                if self.build_info.get("restored_from_file"):
                    text += "; layout read from the file"
                if self.building:
                    text += "; a rebuild is building"
                return text + ")"
            if self.building:
                return f"exact scan while the IVF index is building ({self._live} vectors)"
            if self.problem:
                return f"exact scan ({self.problem})"
            if self.ann_min_rows is None:
                return f"exact scan ({self._live} vectors, vector_index = exact)"
            return f"exact scan ({self._live} vectors, below ann_min_rows={self.ann_min_rows})"

    def namespace_code(self, namespace: str) -> int:
        with self._lock:
            return self._namespace_codes.setdefault(namespace, len(self._namespace_codes))

    def close(self) -> None:
        """Abandon a build in progress (its result is dropped when it finishes)."""
        with self._lock:
            self._generation += 1
            self._dirty = None

    # -- writes ----------------------------------------------------------------------------------------

    def upsert(self, ids: Sequence[int], vectors: Any, namespace: str) -> None:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if not len(ids):
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimensions)
        if len(np.unique(ids)) != len(ids):  # the same id twice: the last vector wins
            _, last = np.unique(ids[::-1], return_index=True)
            keep = np.sort(len(ids) - 1 - last)
            ids, vectors = ids[keep], vectors[keep]
        vectors = self._held(vectors)
        with self._lock:
            code = self.namespace_code(namespace)
            self._grow_lookup(int(ids.max()))
            rows = self._row_by_id[ids]
            in_tail = rows >= self._listed
            overwrite = rows[in_tail]
            self._matrix[overwrite] = vectors[in_tail]
            self._namespaces[overwrite] = code
            self._punch(rows[(rows >= 0) & ~in_tail])
            fresh = ~in_tail
            self._append(ids[fresh], vectors[fresh], code)
            if self._dirty is not None:
                self._dirty.update(ids.tolist())

    def append_new(self, ids: Any, vectors: Any, codes: Any, namespaces: Sequence[str]) -> None:
        """Append rows for ids not stored yet (loading at open): `codes` index into `namespaces`, row by row;
        `vectors` in float32 or as bfloat16 bit patterns (uint16)."""
        with self._lock:
            ids = np.asarray(ids, dtype=np.int64)
            if not len(ids):
                return
            local = np.asarray([self.namespace_code(name) for name in namespaces], dtype=np.int32)
            self._grow_lookup(int(ids.max()))
            start = self._size
            self._append(ids, self._held(vectors), 0)
            self._namespaces[start : self._size] = local[np.asarray(codes)]

    def reserve(self, rows: int) -> None:
        with self._lock:
            if rows > len(self._ids):
                self._grow(rows)

    def remove(self, ids: Iterable[int]) -> None:
        ids = np.asarray(list(ids) if not hasattr(ids, "__len__") else ids, dtype=np.int64).reshape(-1)
        with self._lock:
            ids = ids[(ids >= 0) & (ids < len(self._row_by_id))]
            rows = np.unique(self._row_by_id[ids])
            rows = rows[rows >= 0]
            if not len(rows):
                return
            if self._dirty is not None:
                self._dirty.update(self._ids[rows].tolist())
            self._punch(rows[rows < self._listed])
            for row in sorted(rows[rows >= self._listed].tolist(), reverse=True):
                last = self._size - 1
                self._row_by_id[self._ids[row]] = -1
                if row != last:
                    moved = int(self._ids[last])
                    self._matrix[row] = self._matrix[last]
                    self._ids[row] = moved
                    self._namespaces[row] = self._namespaces[last]
                    self._row_by_id[moved] = row
                    if self._dirty is not None:
                        self._dirty.add(moved)
                self._size -= 1
                self._live -= 1

    def _punch(self, rows: Any) -> None:
        """Turn listed rows into holes."""
        if not len(rows):
            return
        self._row_by_id[self._ids[rows]] = -1
        self._ids[rows] = -1
        self._namespaces[rows] = -1
        self._holes += len(rows)
        self._live -= len(rows)

    def _held(self, vectors: Any) -> Any:
        """`vectors` (float32, or bfloat16 bit patterns as uint16) as this index holds them."""
        if vectors.dtype == np.uint16:
            return vectors if self.precision == "bfloat16" else _floats(vectors)
        return vectors if self.precision == "float32" else to_bfloat16(vectors)

    def _append(self, ids: Any, vectors: Any, code: int) -> None:
        """Append rows (`vectors` already as held)."""
        count = len(ids)
        if not count:
            return
        start = self._size
        if start + count > len(self._ids):
            self._grow(max(1024, int(1.5 * len(self._ids)), start + count))
        self._matrix[start : start + count] = vectors
        self._ids[start : start + count] = ids
        self._namespaces[start : start + count] = code
        self._row_by_id[ids] = np.arange(start, start + count)
        self._size += count
        self._live += count

    def _grow(self, rows: int) -> None:
        """Room for `rows` rows, the first `_size` kept (under the lock). The matrix lives in an anonymous private
        mapping, which grows in place (mremap moves its pages: no copy, never two copies resident, and rows not
        yet written take no memory); while a build's snapshot still reads it, or where mremap is missing, the
        rows are copied into a new mapping instead."""
        mapping = _mapping_of(self._matrix)
        if mapping is not None:
            dtype = self._matrix.dtype
            self._matrix = None  # its only other holder is a build's snapshot: then the resize refuses
            try:
                mapping.resize(rows * self.dimensions * dtype.itemsize)
                _ask_for_huge_pages(mapping)  # for the part mremap added
            except (BufferError, OSError, SystemError):
                pass  # the mapping keeps its size: copied below
            self._matrix = _matrix_view(mapping, self.dimensions, dtype)
        if len(self._matrix) < rows:
            self._matrix = _copied_matrix(self._matrix, rows, self._size)
        self._ids = _resized(self._ids, rows)
        self._namespaces = _resized(self._namespaces, rows)

    def _grow_lookup(self, max_id: int) -> None:
        if max_id >= len(self._row_by_id):
            grown = np.full(max(max_id + 1, int(1.5 * len(self._row_by_id)), 1024), -1, dtype=np.int64)
            grown[: len(self._row_by_id)] = self._row_by_id
            self._row_by_id = grown

    # -- reads -----------------------------------------------------------------------------------------

    def contains(self, item_id: int) -> bool:
        with self._lock:
            return 0 <= item_id < len(self._row_by_id) and self._row_by_id[item_id] >= 0

    def _aligned_rows(self, ids: Sequence[int]) -> tuple[Any, Any]:
        """`ids` as an array, and the row of each, aligned with them (-1 where it is not stored)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        rows = np.full(len(ids), -1, dtype=np.int64)
        known = (ids >= 0) & (ids < len(self._row_by_id))
        rows[known] = self._row_by_id[ids[known]]
        return ids, rows

    def _rows_of(self, ids: Sequence[int]) -> tuple[Any, Any]:
        """(ids, rows) of those of `ids` that are stored, in the given order."""
        ids, rows = self._aligned_rows(ids)
        present = rows >= 0
        return ids[present], rows[present]

    def similarities(self, ids: Sequence[int], query: Any, namespace: str | None = None) -> dict[int, float]:
        if not len(ids):
            return {}
        with self._lock:
            ids, rows = self._rows_of(ids)
            if namespace is not None:
                keep = self._namespaces[rows] == self._namespace_codes.get(namespace, -2)
                ids, rows = ids[keep], rows[keep]
            if not len(rows):
                return {}
            scores = _rows_dot(self._matrix, rows, query)
        return dict(zip(ids.tolist(), scores.tolist()))

    def similarity_array(self, ids: Any, query: Any) -> Any:
        """Cosine similarity of `query` to the vector of each of `ids`, aligned with them; NaN where none."""
        with self._lock:
            ids, rows = self._aligned_rows(ids)
            result = np.full(len(ids), np.nan)
            present = rows >= 0
            if present.any():
                result[present] = _rows_dot(self._matrix, rows[present], query)
        return result

    def vectors(self, ids: Iterable[int]) -> dict[int, Any]:
        """Copies of the stored vectors of the given ids (ids not in the index are left out)."""
        with self._lock:
            ids, rows = self._rows_of(list(ids))
            return dict(zip(ids.tolist(), _floats(self._matrix[rows])))

    def rows(self) -> tuple[Any, Any, Any]:
        """(ids, vectors, namespace codes) of every stored row (copies)."""
        with self._lock:
            live = np.flatnonzero(self._ids[: self._size] >= 0)
            return self._ids[live], _floats(self._matrix[live]), self._namespaces[live]

    def search(self, query: Any, k: int, namespace: str) -> list[tuple[int, float]]:
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            code = self._namespace_codes.get(namespace)
            if code is None or k <= 0 or self._live == 0:
                return []
            if not self.active:
                # No index, or one that must read most lists for its recall (vectors without cluster structure):
                # a scan of everything costs less than list after list.
                scores = _matvec(self._matrix[: self._size], query)
                rows = None
                if len(self._namespace_codes) > 1 or self._holes:
                    scores[self._namespaces[: self._size] != code] = -np.inf
                return self._top(scores, rows, k)
            nprobe = max(1, self.nprobe)
            lists = len(self._centroids)
            reduction = self._reduction
            scan_query = query if reduction is None else reduction.project(query)
            closeness = _matvec(self._centroids if reduction is None else reduction.centroids, scan_query)
            filtered = len(self._namespace_codes) > 1 or self._holes > 0
            while True:
                probed = np.arange(lists) if nprobe >= lists else np.argpartition(-closeness, nprobe - 1)[:nprobe]
                scores, rows = self._scan(probed, query, scan_query, k, code if filtered else None)
                if not filtered:
                    break
                wanted = self._namespaces[rows] == code
                if wanted.sum() >= k or nprobe >= lists:
                    scores[~wanted] = -np.inf
                    break
                nprobe = min(lists, nprobe * 4)
            return self._top(scores, rows, k)

    def _scan(self, lists: Any, query: Any, scan_query: Any, k: int, code: int | None) -> tuple[Any, Any]:
        """Scores and rows of the given lists and of the tail. With a reduction, the lists' rows are scored on
        their reduced vectors (`scan_query`: the query reduced) and only the best of them (of namespace `code`, if
        given) rescored on the full ones; the tail is always scored on the full vectors."""
        lists = np.sort(lists)  # in memory order
        starts, ends = self._offsets[lists], self._offsets[lists + 1]
        if len(lists) > 1:  # neighbouring lists are read in one product
            breaks = starts[1:] != ends[:-1]
            starts = starts[np.concatenate([[True], breaks])]
            ends = ends[np.concatenate([breaks, [True]])]
        tail = (np.array([self._listed]), np.array([self._size]))
        if self._reduction is None:
            return _products(self._matrix, np.append(starts, tail[0]), np.append(ends, tail[1]), query)
        scores, rows = _products(self._reduction.matrix, starts, ends, scan_query)
        if code is not None:
            scores[self._namespaces[rows] != code] = -np.inf
        keep = max(RERANK * k, MIN_RERANK)
        if keep < len(scores):
            rows = rows[np.argpartition(-scores, keep - 1)[:keep]]
        tail_scores, tail_rows = _products(self._matrix, *tail, query)
        return (np.concatenate([_rows_dot(self._matrix, rows, query), tail_scores]),
                np.concatenate([rows, tail_rows]))

    def _top(self, scores: Any, rows: Any, k: int) -> list[tuple[int, float]]:
        k = min(k, len(scores))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.isfinite(scores[top])]
        ids = self._ids[top if rows is None else rows[top]]
        order = np.lexsort((ids, -scores[top]))  # ties by id: the same order after a reopen
        return list(zip(ids[order].tolist(), scores[top][order].tolist()))

    # -- building the IVF index -------------------------------------------------------------------------

    def needs_build(self) -> bool:
        if self.ann_min_rows is None or self._live < self.ann_min_rows or self.building:
            return False
        if self._centroids is None:
            return True
        changed = (self._size - self._listed) + self._holes
        return changed > max(1_000, REBUILD_SHARE * self._listed)

    def maybe_build(self, *, background: bool = True) -> None:
        """Start building (or rebuilding) the IVF index when it is due; with background=False, build now."""
        with self._lock:
            if not self.needs_build():
                return
            self._generation += 1
            generation = self._generation
            self._dirty = set()
            snapshot = (self._matrix, self._ids[: self._size].copy(), self._namespaces[: self._size].copy())
            thread = threading.Thread(target=self._build, args=(generation, *snapshot),
                                      name=f"duckgraph-ivf-{self.kind}", daemon=True)
            self._thread = thread
            self.problem = ""
        if background:
            thread.start()
        else:
            thread.run()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a build in progress; True when none is running any more."""
        thread = self._thread
        if thread is not None and thread.ident is not None:
            thread.join(timeout)
        return not self.building

    def _build(self, generation: int, matrix: Any, ids: Any, namespaces: Any) -> None:
        # One build at a time in the process: each holds a second copy of its matrix while it reorders it.
        with _BUILDS:
            self._build_now(generation, matrix, ids, namespaces)

    def _build_now(self, generation: int, matrix: Any, ids: Any, namespaces: Any) -> None:
        if generation != self._generation:
            return  # closed while waiting for another build
        began = time.perf_counter()
        try:
            live = np.flatnonzero(ids >= 0)
            lists = min(ivf_lists(len(live)), max(1, len(live) // 8))
            rng = np.random.default_rng(len(live))
            sample_rows = np.sort(rng.choice(live, size=min(len(live), MAX_SAMPLE, lists * SAMPLE_PER_LIST),
                                             replace=False))
            sample = _floats(matrix[sample_rows])
            # Its own random numbers: the k-means draws the same ones with or without it.
            directions = (_principal_directions(sample, np.random.default_rng([len(live), 1]))
                          if self.dimensions >= REDUCE_FROM else None)
            if lists > TWO_LEVEL_FROM:
                centroids, coarse, groups = _kmeans_two_level(sample, lists, rng)
                lists = len(centroids)
            else:
                centroids, coarse, groups = _kmeans(sample, lists, KMEANS_ITERATIONS, rng), None, None
            del sample
            trained = time.perf_counter()
            assignment = _assign(matrix, live, centroids, coarse, groups)
            order = np.argsort(assignment, kind="stable")
            offsets = _list_offsets(assignment, lists)
            source = live[order]
            del order, assignment
            new_matrix, new_ids, new_namespaces = _in_list_order(matrix, ids, namespaces, source, len(source))
            listed = new_matrix[: len(source)]
            reduction = None if directions is None else _reduce(listed, centroids, directions)
            nprobe, reduction, reduction_kept = _tune(listed, centroids, offsets, reduction, self.fixed_nprobe, rng)
            checks = _row_checks(listed)
            assigned = time.perf_counter()
            with self._lock:
                if generation != self._generation or self._dirty is None:
                    return  # closed, or superseded
                listed_ids = new_ids[: len(source)].copy()  # before the install punches rows changed meanwhile
                self._install(new_matrix, new_ids, new_namespaces, len(source), centroids, offsets, nprobe)
                self._reduction = reduction
                self.build_info = {
                    "rows": len(source), "lists": lists, "nprobe": nprobe,
                    "reduced_to": reduction and reduction.width, "reduction_kept": reduction_kept,
                    "train_seconds": round(trained - began, 2), "seconds": round(time.perf_counter() - began, 2),
                    "assign_seconds": round(assigned - trained, 2),
                }
                self._unsaved_layout = SavedLayout(
                    centroids=centroids, ids=listed_ids, offsets=offsets, checks=checks,
                    projection=reduction and reduction.projection, info=dict(self.build_info))
            log.info("IVF index over %d %s vectors: %s", len(source), self.kind, self.build_info)
        except Exception as exc:  # searches keep using the exact scan
            with self._lock:
                if generation == self._generation:
                    self.problem = f"building the IVF index failed: {exc}"
                    self._dirty = None
            log.exception("building the IVF index over %s vectors failed", self.kind)

    def _install(self, matrix: Any, ids: Any, namespaces: Any, listed: int, centroids: Any, offsets: Any,
                 nprobe: int) -> None:
        """Swap the new layout in (under the lock): rows changed during the build become holes in it and their
        current versions go to its tail."""
        dirty = np.fromiter(self._dirty, dtype=np.int64, count=len(self._dirty))
        self._dirty = None
        holes = 0
        if len(dirty):
            stale = np.isin(ids[:listed], dirty)
            holes = int(stale.sum())
            ids[:listed][stale] = -1
            namespaces[:listed][stale] = -1
        carried_ids, carried_rows = self._rows_of(dirty)
        size = listed + len(carried_rows)
        if size > len(ids):
            capacity = int(1.5 * size) + 1024
            matrix = _copied_matrix(matrix, capacity, listed)
            ids, namespaces = _resized(ids, capacity), _resized(namespaces, capacity)
            ids[listed:] = -1
        matrix[listed:size] = self._matrix[carried_rows]
        ids[listed:size] = carried_ids
        namespaces[listed:size] = self._namespaces[carried_rows]
        self._matrix, self._ids, self._namespaces = matrix, ids, namespaces
        self._size, self._listed, self._holes = size, listed, holes
        self._live = size - holes
        self._centroids, self._offsets, self.nprobe = centroids, offsets, nprobe
        self._row_by_id[:] = -1
        present = np.flatnonzero(ids[:size] >= 0)
        self._row_by_id[ids[present]] = present

    def take_unsaved_layout(self) -> SavedLayout | None:
        """The last build's layout, once: for the store to save (None when there is nothing new to save)."""
        with self._lock:
            layout, self._unsaved_layout = self._unsaved_layout, None
            return layout

    def restore(self, layout: SavedLayout) -> bool:
        """Take a saved layout as the index, at open once every vector is in: a row keeps its list when its vector
        is the one the layout checked; rows written since (or never listed) become the tail, scanned exactly, and
        a rebuild follows when they are due one. False, with nothing changed, when the layout does not fit."""
        began = time.perf_counter()
        with self._lock:
            if self.ann_min_rows is None or self._live < self.ann_min_rows or self.ready or self.building:
                return False
            lists = len(layout.centroids)
            if (layout.centroids.shape[1:] != (self.dimensions,) or len(layout.offsets) != lists + 1
                    or not len(layout.ids) == len(layout.checks) == layout.offsets[-1]
                    or (layout.projection is not None and layout.projection.shape[0] != self.dimensions)):
                return False
            _, rows = self._aligned_rows(layout.ids)
            same = rows >= 0
            same[same] = _row_checks(self._matrix, rows[same]) == layout.checks[same]
            offsets = _list_offsets(np.repeat(np.arange(lists), np.diff(layout.offsets))[same], lists)
            source = rows[same]  # in list order, as saved
            matrix, new_ids, new_namespaces = _in_list_order(self._matrix, self._ids, self._namespaces, source,
                                                             self._size)
            centroids = np.ascontiguousarray(layout.centroids, dtype=np.float32)
            reduction = (None if layout.projection is None else
                         _projected(matrix[: len(source)], centroids, np.asarray(layout.projection, dtype=np.float32)))
            unlisted = np.ones(self._size, dtype=bool)
            unlisted[source] = False
            unlisted &= self._ids[: self._size] >= 0
            self._dirty = set(self._ids[: self._size][unlisted].tolist())  # `_install` moves them to the tail
            self._install(matrix, new_ids, new_namespaces, len(source), centroids, offsets,
                          self.fixed_nprobe or int(layout.info["nprobe"]))
            self._reduction = reduction
            self.build_info = {**layout.info, "rows": len(source), "restored_from_file": True,
                               "restore_seconds": round(time.perf_counter() - began, 2)}
            return True


def _list_offsets(list_of_row: Any, lists: int) -> Any:
    """Where each list starts (and, last, where the final one ends) when rows are grouped by their list."""
    offsets = np.zeros(lists + 1, dtype=np.int64)
    np.cumsum(np.bincount(list_of_row, minlength=lists), out=offsets[1:])
    return offsets


def _in_list_order(matrix: Any, ids: Any, namespaces: Any, source: Any, rows: int) -> tuple[Any, Any, Any]:
    """A new matrix (with its ids and namespace codes) holding the `source` rows in that order, with room for
    `rows` rows and a tenth more; the rows after the copied ones are empty (id -1)."""
    capacity = max(1024, int(1.1 * rows) + 1024)
    new_matrix = _mapped_matrix(capacity, matrix.shape[1], matrix.dtype)
    for start in range(0, len(source), 65_536):
        block = source[start : start + 65_536]
        new_matrix[start : start + len(block)] = matrix[block]
    new_ids = np.full(capacity, -1, dtype=np.int64)
    new_ids[: len(source)] = ids[source]
    new_namespaces = np.full(capacity, -1, dtype=np.int32)
    new_namespaces[: len(source)] = namespaces[source]
    return new_matrix, new_ids, new_namespaces


def _row_checks(matrix: Any, rows: Any = None) -> Any:
    """A 32-bit check of each row's vector (of the given rows, or all): a weighted sum of its float bits, so that
    a layout saved with the index can tell, at open, the rows whose vector is still the one it listed."""
    rows = np.arange(len(matrix)) if rows is None else np.asarray(rows)
    # Odd weights, and arithmetic modulo 2**32 (uint32 wraps): ten times faster than summing in 64 bits.
    weights = (np.arange(matrix.shape[1], dtype=np.uint32) * np.uint32(2_654_435_761) + np.uint32(1)) | np.uint32(1)
    checks = np.empty(len(rows), dtype=np.uint32)
    for start in range(0, len(rows), 16_384):
        bits = _floats(matrix[rows[start : start + 16_384]]).view(np.uint32)
        checks[start : start + 16_384] = (bits * weights).sum(axis=1, dtype=np.uint32)
    return checks


def _matvec(matrix: Any, vector: Any, out: Any = None) -> Any:
    """matrix @ vector (float32, into `out` if given) without BLAS: a query's products are memory-bound, and
    OpenBLAS's threads (woken for every mid-sized product) cost more than the product on a busy machine (measured:
    1,264 x 384 centroids, 16 ms through BLAS against 0.13 ms through einsum while other jobs ran)."""
    if matrix.dtype == np.float32:
        return np.einsum("ij,j->i", matrix, vector, out=out)
    out = np.empty(len(matrix), dtype=np.float32) if out is None else out
    for start in range(0, len(matrix), WIDEN_ROWS):
        np.einsum("ij,j->i", _floats(matrix[start : start + WIDEN_ROWS]), vector, out=out[start : start + WIDEN_ROWS])
    return out


def _products(matrix: Any, starts: Any, ends: Any, vector: Any) -> tuple[Any, Any]:
    """matrix[start:end] @ vector for each block, one product per block into one preallocated array; and the rows."""
    lengths = ends - starts
    total = int(lengths.sum())
    scores = np.empty(total, dtype=np.float32)
    position = 0
    for start, end in zip(starts.tolist(), ends.tolist()):
        if end > start:
            _matvec(matrix[start:end], vector, out=scores[position : position + end - start])
            position += end - start
    rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
    return scores, rows


def _rows_dot(matrix: Any, rows: Any, vector: Any) -> Any:
    """matrix[rows] @ vector. np.take gathers scattered rows faster than fancy indexing (measured: 1,500 random rows
    of 3M x 384, 0.95 against 1.17 ms), and the gather, not the product, is most of a search's similarity work."""
    return _matvec(np.take(matrix, rows, axis=0), np.asarray(vector, dtype=np.float32))


def _mapped_matrix(rows: int, dimensions: int, dtype: Any = None) -> Any:
    """A zeroed matrix (float32 unless told) in an anonymous private mapping (see `VectorIndex._grow`); a plain
    array where the platform has no such mappings."""
    dtype = np.dtype(np.float32 if dtype is None else dtype)
    if rows == 0 or not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.zeros((rows, dimensions), dtype=dtype)
    mapping = mmap.mmap(-1, rows * dimensions * dtype.itemsize, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    _ask_for_huge_pages(mapping)
    return _matrix_view(mapping, dimensions, dtype)


def _ask_for_huge_pages(mapping: mmap.mmap) -> None:
    """Transparent huge pages for a vector matrix, where the kernel offers them: a search reads thousands of rows
    scattered over gigabytes, and with 4 KB pages nearly every row costs a TLB miss (measured: 1,500 random rows of
    3M x 384, 0.94 against 1.02 ms). At most one 2 MB page past the last row written is allocated early."""
    try:
        mapping.madvise(mmap.MADV_HUGEPAGE)
    except (AttributeError, OSError):
        pass  # not Linux, or a kernel without them: 4 KB pages work the same, a little slower


def _copied_matrix(matrix: Any, rows: int, keep: int) -> Any:
    """A new mapped matrix of `rows` rows holding the first `keep` rows of `matrix`."""
    grown = _mapped_matrix(rows, matrix.shape[1], matrix.dtype)
    grown[:keep] = matrix[:keep]
    return grown


def _matrix_view(mapping: mmap.mmap, dimensions: int, dtype: Any) -> Any:
    return np.frombuffer(mapping, dtype=dtype).reshape(-1, dimensions)


def to_bfloat16(vectors: Any) -> Any:
    """float32 vectors as bfloat16 bit patterns (uint16), rounded to nearest even (the vectors are finite)."""
    bits = np.ascontiguousarray(vectors, dtype=np.float32).view(np.uint32)
    rounded = bits >> 16  # in place from here on: a third less time than a new array per step
    rounded &= 1
    rounded += bits
    rounded += 0x7FFF
    rounded >>= 16
    return rounded.astype(np.uint16)


def _floats(rows: Any) -> Any:
    """Held rows as float32: float32 rows as they are, bfloat16 ones widened (exactly)."""
    if rows.dtype == np.float32:
        return rows
    # One pass into a fresh array: half the time of a copy to uint32 shifted in place (2,000 rows of 384).
    return np.left_shift(rows, 16, out=np.empty(rows.shape, dtype=np.uint32), dtype=np.uint32).view(np.float32)


def _mapping_of(matrix: Any) -> mmap.mmap | None:
    base = matrix.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # what np.frombuffer keeps of the mapping
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def _resized(array: Any, rows: int) -> Any:
    """A copy of `array` with `rows` rows (the first rows kept; new rows uninitialised)."""
    grown = np.empty((rows, *array.shape[1:]), dtype=array.dtype)
    count = min(rows, len(array))
    grown[:count] = array[:count]
    return grown


def _nearest(x: Any, centroids: Any) -> Any:
    out = np.empty(len(x), dtype=np.int32)
    for start in range(0, len(x), 8192):
        out[start : start + 8192] = np.argmax(x[start : start + 8192] @ centroids.T, axis=1)
    return out


def _assign(matrix: Any, rows: Any, centroids: Any, coarse: Any = None, groups: Any = None) -> Any:
    """The nearest centroid of each of the given rows; with `coarse` centroids and `groups` (the range of fine
    centroids under each coarse one), the nearest fine centroid under the row's COARSE_PROBES nearest coarse ones
    (almost always the nearest of all: a vector near a coarse border is compared with both sides)."""
    assignment = np.empty(len(rows), dtype=np.int32)
    if coarse is None:
        for start in range(0, len(rows), 8192):
            assignment[start : start + 8192] = np.argmax(_floats(matrix[rows[start : start + 8192]]) @ centroids.T,
                                                         axis=1)
        return assignment
    probes = min(COARSE_PROBES, len(coarse))
    top = np.empty((len(rows), probes), dtype=np.int32)
    for start in range(0, len(rows), 8192):
        scores = _floats(matrix[rows[start : start + 8192]]) @ coarse.T
        top[start : start + 8192] = np.argpartition(-scores, probes - 1, axis=1)[:, :probes]
    best = np.full(len(rows), -np.inf, dtype=np.float32)
    for group, (first, last) in enumerate(groups):
        if last <= first:
            continue
        members = np.flatnonzero((top == group).any(axis=1))
        fine = centroids[first:last]
        for start in range(0, len(members), 8192):
            chosen = members[start : start + 8192]
            scores = _floats(matrix[rows[chosen]]) @ fine.T
            nearest = np.argmax(scores, axis=1)
            value = scores[np.arange(len(chosen)), nearest]
            better = value > best[chosen]
            assignment[chosen[better]] = first + nearest[better]
            best[chosen[better]] = value[better]
    return assignment


def _kmeans_two_level(sample: Any, lists: int, rng: Any) -> tuple[Any, Any, list[tuple[int, int]]]:
    """About `lists` centroids as sqrt(lists) coarse ones, each split by its own k-means over its share of the
    sample: k-means and assignment cost ~sqrt(lists) dot products per vector instead of `lists`."""
    top = max(2, int(round(math.sqrt(lists))))
    coarse = _kmeans(sample, top, KMEANS_ITERATIONS, rng)
    nearest = _nearest(sample, coarse)
    parts, groups, first = [], [], 0
    for group in range(top):
        members = sample[nearest == group]
        k = min(len(members), max(1, int(round(lists * len(members) / len(sample)))))
        if k == 0:
            groups.append((first, first))
            continue
        parts.append(_kmeans(members, k, KMEANS_ITERATIONS, rng))
        groups.append((first, first + k))
        first += k
    return np.ascontiguousarray(np.vstack(parts), dtype=np.float32), coarse, groups


def _kmeans(x: Any, k: int, iterations: int, rng: Any) -> Any:
    """Spherical k-means (cosine): k unit centroids of the rows of x."""
    centroids = x[rng.choice(len(x), size=k, replace=False)].copy()
    for _ in range(iterations):
        assignment = _nearest(x, centroids)
        counts = np.bincount(assignment, minlength=k)
        order = np.argsort(assignment, kind="stable")
        starts = np.zeros(k, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        filled = counts > 0
        sums = np.add.reduceat(x[order], starts[filled], axis=0)
        centroids[filled] = sums
        empty = np.flatnonzero(~filled)
        if len(empty):  # an empty list restarts at a random row
            centroids[empty] = x[rng.choice(len(x), size=len(empty), replace=False)]
        norms = np.linalg.norm(centroids, axis=1, keepdims=True)
        centroids /= np.where(norms == 0, 1, norms)
    return np.ascontiguousarray(centroids, dtype=np.float32)


#: Queries the probe count (and a reduction) is tuned on, and the neighbours each must find.
TUNING_QUERIES = 128
TUNING_K = 10


def _tuning_queries(matrix: Any, rng: Any) -> Any:
    """Queries made from stored vectors: each the normalised sum of three random rows. A stored row moved by random
    noise makes too easy a query (its neighbours stay in its list); real questions embedded by MiniLM sit between
    topics, and sums of three rows need about as many lists as they do (measured: 71 vs 69 of 1,265 lists)."""
    q = sum(_floats(matrix[rng.integers(0, len(matrix), size=TUNING_QUERIES)]) for _ in range(3))
    return q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)


def _best_rows(matrix: Any, queries: Any, k: int) -> Any:
    """The rows of the k best scores of each query (queries x k, in no order), block by block over the matrix."""
    k = min(k, len(matrix))
    best_rows = np.empty((len(queries), 0), dtype=np.int64)
    best = np.empty((len(queries), 0), dtype=np.float32)
    for start in range(0, len(matrix), WIDEN_ROWS):
        block = queries @ _floats(matrix[start : start + WIDEN_ROWS]).T
        scores = np.concatenate([best, block], axis=1)
        rows = np.concatenate([best_rows, np.broadcast_to(np.arange(start, start + block.shape[1]), block.shape)], axis=1)
        if scores.shape[1] > k:
            keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            scores, rows = np.take_along_axis(scores, keep, axis=1), np.take_along_axis(rows, keep, axis=1)
        best, best_rows = scores, rows
    return best_rows


def _tune(matrix: Any, centroids: Any, offsets: Any, reduction: _Reduction | None, fixed_nprobe: int | None,
          rng: Any) -> tuple[int, _Reduction | None, float | None]:
    """The lists to probe, and the reduction if it keeps REDUCTION_RECALL of the neighbours (and that share)."""
    queries = _tuning_queries(matrix, rng)
    exact = _best_rows(matrix, queries, TUNING_K)
    kept = None
    if reduction is not None:
        order = np.argsort(-(reduction.project(queries) @ reduction.centroids.T), axis=1)
        nprobe = fixed_nprobe or _tune_nprobe(order, exact, offsets)
        kept = _reduction_kept(reduction, queries, exact, order[:, :nprobe], offsets)
        if kept >= REDUCTION_RECALL:
            return nprobe, reduction, kept
    order = np.argsort(-(queries @ centroids.T), axis=1)
    return fixed_nprobe or _tune_nprobe(order, exact, offsets), None, kept


def _tune_nprobe(order: Any, exact: Any, offsets: Any) -> int:
    """The lists to probe for TARGET_RECALL of the `exact` neighbours of the tuning queries (times NPROBE_MARGIN),
    each query probing lists in its `order`."""
    lists = order.shape[1]
    list_of_row = np.repeat(np.arange(lists), np.diff(offsets))
    # For each exact hit the rank of its list in its query's order.
    rank_of_list = np.empty_like(order)
    np.put_along_axis(rank_of_list, order, np.arange(lists)[None, :].repeat(len(order), 0), axis=1)
    needed = np.take_along_axis(rank_of_list, list_of_row[exact], axis=1)
    ranks = np.sort(needed.ravel())
    found = int(ranks[math.ceil(TARGET_RECALL * len(ranks)) - 1] + 1)
    return int(min(lists, math.ceil(found * NPROBE_MARGIN)))


def _principal_directions(sample: Any, rng: Any) -> Any:
    """The sample's principal directions (rows of unit vectors, the strongest first)."""
    rows = sample[rng.choice(len(sample), size=min(len(sample), REDUCTION_SAMPLE), replace=False)]
    centred = rows - rows.mean(axis=0)
    # The covariance's eigenvectors: the same directions as an SVD of the rows, at a fraction of its time.
    _, vectors = np.linalg.eigh(centred.T @ centred)
    return vectors[:, ::-1].T


def _reduce(matrix: Any, centroids: Any, directions: Any) -> _Reduction:
    """The rows and centroids projected onto a third of the principal `directions`. Scores are not centred: a
    query's product with the mean is the same for every row, so the ranking stays."""
    width = min(len(directions), -(-matrix.shape[1] // 24) * 8)  # a third, in whole 8-float steps
    return _projected(matrix, centroids, np.ascontiguousarray(directions[:width].T, dtype=np.float32))


def _projected(matrix: Any, centroids: Any, projection: Any) -> _Reduction:
    """The rows and centroids projected by `projection` (dimensions x width)."""
    reduced = _mapped_matrix(len(matrix), projection.shape[1])
    for start in range(0, len(matrix), WIDEN_ROWS):
        reduced[start : start + WIDEN_ROWS] = _floats(matrix[start : start + WIDEN_ROWS]) @ projection
    return _Reduction(projection, reduced, np.ascontiguousarray(centroids @ projection))


def _reduction_kept(reduction: _Reduction, queries: Any, exact: Any, probed: Any, offsets: Any) -> float:
    """Of the `exact` neighbours of the tuning queries that lie in the lists each query probes, the share among
    the MIN_RERANK best of those lists' rows by the reduced scores: those a search (k=10) rescores, and finds."""
    held = kept = 0
    for query, wanted, lists in zip(reduction.project(queries), exact, probed):
        scores, rows = _products(reduction.matrix, offsets[lists], offsets[lists + 1], query)
        wanted = wanted[np.isin(wanted, rows)]
        bar = -np.inf if len(scores) <= MIN_RERANK else np.partition(scores, -MIN_RERANK)[-MIN_RERANK]
        held += len(wanted)
        kept += int((reduction.matrix[wanted] @ query >= bar).sum())
    return round(kept / held, 4) if held else 1.0


# -- the graph -----------------------------------------------------------------------------------------------


#: Rows read per query when the graph is loaded.
LOAD_BLOCK = 500_000
#: A CSR (adjacency, mentions) is rebuilt once more pairs than this, and than half the pairs it was built from,
#: were added since: until then they sit in a dict, read key by key.
LINKS_REBUILD_MIN = 100_000


class _Links:
    """int -> ints (node -> edge ids, node -> chunk ids, ...): a CSR built from pairs, plus the pairs added since
    in a dict. Entries are never removed one by one: callers check what they read against the current state
    (an edge that moved to other ends, a deleted chunk) and a rebuild drops what is stale."""

    def __init__(self) -> None:
        self.ptr = np.zeros(1, dtype=np.int64)
        self.values = np.zeros(0, dtype=np.int64)
        self.delta: dict[int, list[int]] = {}
        self.delta_count = 0
        self.built = 0

    def build(self, keys: Any, values: Any, rank: Any = None) -> None:
        """`rank`: optional sort key; each key's values are then in ascending rank (else in the given order)."""
        keys = np.asarray(keys, dtype=np.int64)
        order = np.argsort(keys, kind="stable") if rank is None else np.lexsort((rank, keys))
        self.values = np.asarray(values, dtype=np.int64)[order]
        counts = np.bincount(keys, minlength=1) if len(keys) else np.zeros(1, dtype=np.int64)
        self.ptr = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.ptr[1:])
        self.delta = {}
        self.delta_count = 0
        self.built = len(keys)

    def add(self, keys: Iterable[int], values: Iterable[int]) -> None:
        delta = self.delta
        for key, value in zip(keys, values):
            found = delta.get(key)
            if found is None:
                delta[key] = [value]
            else:
                found.append(value)
            self.delta_count += 1

    def stale(self) -> bool:
        return self.delta_count > max(LINKS_REBUILD_MIN, self.built // 2)

    def pairs(self) -> tuple[Any, Any]:
        """Every (key, value) held, stale ones included."""
        keys = np.repeat(np.arange(len(self.ptr) - 1, dtype=np.int64), np.diff(self.ptr))
        if not self.delta:
            return keys, self.values
        extra_keys = np.fromiter((k for k, vs in self.delta.items() for _ in vs), dtype=np.int64, count=self.delta_count)
        extra_values = np.fromiter((v for vs in self.delta.values() for v in vs), dtype=np.int64, count=self.delta_count)
        return np.concatenate([keys, extra_keys]), np.concatenate([self.values, extra_values])

    def gather(self, keys: Any, first: int | None = None) -> tuple[Any, Any]:
        """(key, value) pairs of the given keys (unique keys): the owners repeated, and the values. With `first`,
        only the first `first` values of each key's built list (all of the ones added since)."""
        keys = np.asarray(keys, dtype=np.int64)
        inside = keys[(keys >= 0) & (keys < len(self.ptr) - 1)]
        starts = self.ptr[inside]
        lengths = self.ptr[inside + 1] - starts
        if first is not None:
            lengths = np.minimum(lengths, first)
        total = int(lengths.sum())
        if total:
            index = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
            owners, values = np.repeat(inside, lengths), self.values[index]
        else:
            owners, values = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if self.delta:
            extra = [(key, self.delta[key]) for key in keys.tolist() if key in self.delta]
            if extra:
                owners = np.concatenate([owners, np.fromiter((k for k, vs in extra for _ in vs), dtype=np.int64)])
                values = np.concatenate([values, np.fromiter((v for _, vs in extra for v in vs), dtype=np.int64)])
        return owners, values


def _grow(array: Any, size: int, fill: Any) -> Any:
    if size <= len(array):
        return array
    grown = np.empty(max(size, int(1.5 * len(array)) + 1024), dtype=array.dtype)
    grown[: len(array)] = array
    grown[len(array) :] = fill
    return grown


def _nat() -> Any:
    return np.datetime64("NaT", "us")


def _time(value: Any) -> Any:
    """A naive UTC datetime (or None) as numpy datetime64[us]."""
    return _nat() if value is None else np.datetime64(value, "us")


#: EdgeRecords kept built (see `GraphMirror.edge_records`): ~200 bytes each (emptied when full).
EDGE_CACHE_SIZE = 500_000


class _FrozenDict(dict):
    """The properties of a cached, shared EdgeRecord: a dict that refuses changes."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("the properties of a stored edge record are read-only; copy them with dict(...) to change")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> dict[str, Any]:
        import copy

        return copy.deepcopy(dict(self), memo)


def _properties(text: str | None) -> dict[str, Any]:
    import json

    return {} if text is None else json.loads(text)


class GraphMirror:
    """The graph as the search path reads it, in memory: node records and their names, edges with a CSR
    adjacency in both directions, and mentions (chunk <-> node) in both directions.

    Columns are numpy arrays indexed by id (node, edge and chunk ids come from sequences: small and dense);
    texts are object arrays (None for an empty description or '{}' properties, so millions of rows share one
    object). Built from the tables at open; the store applies each committed write to it (`put_nodes`,
    `put_edges`, ...). Not locked by itself: the store calls it under its own lock.
    """

    def __init__(self, name_keys: Any = None, text_budget: int = 0) -> None:
        #: (key, aliases) -> the keys `find` finds a node by (the store's rule); default: key and alias keys.
        self.name_keys = name_keys or _default_name_keys
        #: Bytes of passage text held in memory at most: a search returns a few passages, and reading them from
        #: the file costs ~2-3 ms of SQL; beyond this the texts stay in the file only.
        self.text_budget = text_budget
        # The arrays are made by `load` at open: making them here would import numpy when a server starts.

    def _reset(self) -> None:
        self.namespace_codes: dict[str, int] = {}
        self.namespace_names: list[str] = []
        self.type_codes: dict[str, int] = {}
        self.type_names: list[str] = []
        # nodes, by id (n_ns -1: no such node)
        self.n_ns = np.full(0, -1, dtype=np.int32)
        self.n_type = np.zeros(0, dtype=np.int32)
        self.n_key = np.empty(0, dtype=object)
        self.n_name = np.empty(0, dtype=object)
        self.n_desc = np.empty(0, dtype=object)
        self.n_aliases = np.empty(0, dtype=object)
        self.n_props = np.empty(0, dtype=object)
        self.n_created = np.zeros(0, dtype="datetime64[us]")
        self.n_updated = np.zeros(0, dtype="datetime64[us]")
        #: namespace code -> name key -> node id, or a tuple of ids when several nodes answer to it
        self.names: dict[int, dict[str, Any]] = {}
        self.node_count = 0
        # edges, by id (e_src -1: no such edge)
        self.e_src = np.full(0, -1, dtype=np.int64)
        self.e_dst = np.full(0, -1, dtype=np.int64)
        self.e_ns = np.full(0, -1, dtype=np.int32)
        self.e_type = np.zeros(0, dtype=np.int32)
        self.e_weight = np.zeros(0, dtype=np.float64)
        self.e_from = np.zeros(0, dtype="datetime64[us]")
        self.e_until = np.zeros(0, dtype="datetime64[us]")
        self.e_created = np.zeros(0, dtype="datetime64[us]")
        self.e_updated = np.zeros(0, dtype="datetime64[us]")
        self.e_desc = np.empty(0, dtype=object)
        self.e_props = np.empty(0, dtype=object)
        self.edge_count = 0
        self._edge_cache: dict[int, Any] = {}
        #: Edges whose weight changed since the CSRs were built: out of order in their nodes' lists.
        self._reweighted: set[int] = set()
        #: Per node, its edges that hold now in its namespace (a self-loop once), counted when the CSRs were built;
        #: `_degree_stale` marks the nodes an edge written, deleted or repointed since then ends at.
        self._degrees = np.zeros(0, dtype=np.int64)
        self._degree_stale = np.zeros(0, dtype=bool)
        self.out_edges = _Links()  # node -> edges leaving it
        self.in_edges = _Links()  # node -> edges entering it
        # mentions
        self.chunk_live = np.zeros(0, dtype=bool)
        # chunk -> its document (a code into documents) and documents' titles: a search picks one passage per
        # document among dozens of candidates and shows titles, and SQL takes milliseconds for a handful of rows
        self.chunk_document = np.full(0, -1, dtype=np.int32)
        self.chunk_ordinal = np.zeros(0, dtype=np.int32)
        #: chunk id -> its text while they fit `text_budget` (decided at open, given up when writes outgrow it)
        self.chunk_text: dict[int, str] | None = {}
        self.text_bytes = 0  # UTF-8 bytes of the chunks' texts held (of all of them, when over the budget at open)
        self.document_codes: dict[tuple[str, str], int] = {}  # (namespace, document id) -> code
        self.documents: list[tuple[str, str]] = []  # code -> (document id, title)
        self.chunks_of = _Links()  # node -> chunks mentioning it
        self.nodes_of = _Links()  # chunk -> nodes it mentions

    # -- codes ---------------------------------------------------------------------------------------------

    def namespace_code(self, namespace: str) -> int:
        code = self.namespace_codes.get(namespace)
        if code is None:
            code = self.namespace_codes[namespace] = len(self.namespace_names)
            self.namespace_names.append(namespace)
        return code

    def type_code(self, type_: str) -> int:
        code = self.type_codes.get(type_)
        if code is None:
            code = self.type_codes[type_] = len(self.type_names)
            self.type_names.append(type_)
        return code

    # -- loading ---------------------------------------------------------------------------------------------

    def load(self, con: Any) -> None:
        """Read the whole graph from the tables (at open, and after a restore), block by block of rowids, with
        namespaces and types turned into codes by DuckDB (millions of repeated strings never reach Python)."""
        self._reset()
        for name in (r[0] for r in con.execute(
            "SELECT namespace FROM nodes UNION SELECT namespace FROM edges UNION SELECT namespace FROM node_names"
        ).fetchall()):
            self.namespace_code(name)
        for name in (r[0] for r in con.execute("SELECT type FROM nodes UNION SELECT type FROM edges").fetchall()):
            self.type_code(name)
        con.register("_mirror_namespaces", {"name": np.array(self.namespace_names or [""], dtype=object),
                                            "code": np.arange(max(1, len(self.namespace_names)), dtype=np.int32)})
        con.register("_mirror_types", {"name": np.array(self.type_names or [""], dtype=object),
                                       "code": np.arange(max(1, len(self.type_names)), dtype=np.int32)})
        try:
            self._load_nodes(con)
            self._load_edges(con)
        finally:
            con.unregister("_mirror_namespaces")
            con.unregister("_mirror_types")
        self._finish_load(con)

    def _blocks(self, con: Any, table: str) -> Any:
        last = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
        return range(0, -1 if last is None else last + 1, LOAD_BLOCK)

    def _load_nodes(self, con: Any) -> None:
        top = con.execute("SELECT max(id) FROM nodes").fetchone()[0]
        self._grow_nodes((top or 0) + 1)
        empty: tuple[str, ...] = ()
        for start in self._blocks(con, "nodes"):
            nodes = con.execute(
                "SELECT n.id, s.code AS ns, t.code AS ty, n.key, n.name, NULLIF(n.description, '') AS description, "
                "n.aliases, NULLIF(n.properties::VARCHAR, '{}') AS properties, n.created_at, n.updated_at FROM nodes n "
                "JOIN _mirror_namespaces s ON s.name = n.namespace JOIN _mirror_types t ON t.name = n.type "
                "WHERE n.rowid >= $1 AND n.rowid < $2", [start, start + LOAD_BLOCK],
            ).fetchnumpy()
            ids = np.asarray(nodes["id"], dtype=np.int64)
            if not len(ids):
                continue
            self.n_ns[ids] = nodes["ns"]
            self.n_type[ids] = nodes["ty"]
            self.n_key[ids] = nodes["key"]
            self.n_name[ids] = nodes["name"]
            self.n_desc[ids] = _filled(nodes["description"])
            self.n_aliases[ids] = [tuple(a) if len(a) else empty for a in nodes["aliases"]]
            self.n_props[ids] = _filled(nodes["properties"])
            self.n_created[ids] = _filled(nodes["created_at"])
            self.n_updated[ids] = _filled(nodes["updated_at"])
            self.node_count += len(ids)
        for start in self._blocks(con, "node_names"):
            names = con.execute(
                "SELECT s.code, n.key, n.node_id FROM node_names n JOIN _mirror_namespaces s ON s.name = n.namespace "
                "WHERE n.rowid >= $1 AND n.rowid < $2", [start, start + LOAD_BLOCK],
            ).fetchall()
            for code, key, node_id in names:
                self._add_name(code, key, node_id)

    def _load_edges(self, con: Any) -> None:
        top = con.execute("SELECT max(id) FROM edges").fetchone()[0]
        self._grow_edges((top or 0) + 1)
        for start in self._blocks(con, "edges"):
            edges = con.execute(
                "SELECT e.id, s.code AS ns, t.code AS ty, e.source_id, e.target_id, "
                "NULLIF(e.description, '') AS description, e.weight, NULLIF(e.properties::VARCHAR, '{}') AS properties, "
                "e.valid_from, e.valid_until, e.created_at, e.updated_at FROM edges e "
                "JOIN _mirror_namespaces s ON s.name = e.namespace JOIN _mirror_types t ON t.name = e.type "
                "WHERE e.rowid >= $1 AND e.rowid < $2", [start, start + LOAD_BLOCK],
            ).fetchnumpy()
            ids = np.asarray(edges["id"], dtype=np.int64)
            if not len(ids):
                continue
            self.e_ns[ids] = edges["ns"]
            self.e_type[ids] = edges["ty"]
            self.e_src[ids] = edges["source_id"]
            self.e_dst[ids] = edges["target_id"]
            self.e_weight[ids] = edges["weight"]
            self.e_desc[ids] = _filled(edges["description"])
            self.e_props[ids] = _filled(edges["properties"])
            for column, name in ((self.e_from, "valid_from"), (self.e_until, "valid_until"),
                                 (self.e_created, "created_at"), (self.e_updated, "updated_at")):
                column[ids] = _filled(edges[name])
            self.edge_count += len(ids)

    def _finish_load(self, con: Any) -> None:
        """The adjacency, the live chunks and the mentions, once nodes and edges are in."""
        self._rebuild_adjacency()
        self.chunk_live[:] = False
        documents = con.execute("SELECT namespace, id, title FROM documents").fetchnumpy()
        self.put_documents(documents["namespace"], documents["id"], documents["title"])
        self.text_bytes = con.execute("SELECT coalesce(sum(strlen(text)), 0) FROM chunks").fetchone()[0]
        held = self.text_bytes <= self.text_budget
        text = "text" if held else "NULL AS text"
        chunks = con.execute(f"SELECT id, namespace, document_id, ordinal, {text} FROM chunks").fetchnumpy()
        ids = np.asarray(chunks["id"], dtype=np.int64)
        self.chunk_text = None  # filled below at once: the sum above already counted the texts' bytes
        self.add_chunks(ids, chunks["namespace"], chunks["document_id"], chunks["ordinal"], chunks["text"])
        self.chunk_text = dict(zip(ids.tolist(), chunks["text"])) if held else None
        mentions = con.execute("SELECT chunk_id, node_id FROM mentions").fetchnumpy()
        chunks = np.asarray(mentions["chunk_id"], dtype=np.int64)
        nodes = np.asarray(mentions["node_id"], dtype=np.int64)
        self.chunks_of.build(nodes, chunks)
        self.nodes_of.build(chunks, nodes)

    def _rebuild_adjacency(self) -> None:
        """Both CSRs from the edge columns, each node's edges by weight (highest first), then id: the order
        `neighbors` returns, so a node's best edges are the first ones of its list (see `touching`)."""
        live = np.flatnonzero(self.e_src >= 0)
        # One rank for (weight desc, id asc): the position in that order.
        rank = np.empty(len(live), dtype=np.int64)
        rank[np.lexsort((live, -self.e_weight[live]))] = np.arange(len(live))
        self.out_edges.build(self.e_src[live], live, rank)
        self.in_edges.build(self.e_dst[live], live, rank)
        self._reweighted: set[int] = set()
        self._count_degrees()

    def _count_degrees(self) -> None:
        holding = np.flatnonzero((self.e_src >= 0) & np.isnat(self.e_until))
        sources, targets, namespaces = self.e_src[holding], self.e_dst[holding], self.e_ns[holding]
        size = len(self.n_ns)
        self._degrees = np.zeros(size, dtype=np.int64)
        for ends, others, incoming in ((sources, targets, False), (targets, sources, True)):
            known = ends < size
            ends, others, edge_ns = ends[known], others[known], namespaces[known]
            keep = self.n_ns[ends] == edge_ns
            if incoming:  # a self-loop counts once, as its source
                keep &= ends != others
            self._degrees += np.bincount(ends[keep], minlength=size)
        self._degree_stale = np.zeros(size, dtype=bool)

    def _mark_degrees_stale(self, *node_arrays: Any) -> None:
        for nodes in node_arrays:
            nodes = np.asarray(nodes, dtype=np.int64)
            self._degree_stale[nodes[(nodes >= 0) & (nodes < len(self._degree_stale))]] = True

    def _grow_nodes(self, size: int) -> None:
        if size <= len(self.n_ns):
            return
        self.n_ns = _grow(self.n_ns, size, -1)
        capacity = len(self.n_ns)
        self.n_type = _grow(self.n_type, capacity, 0)
        for name in ("n_key", "n_name", "n_desc", "n_aliases", "n_props"):
            setattr(self, name, _grow(getattr(self, name), capacity, None))
        self.n_created = _grow(self.n_created, capacity, _nat())
        self.n_updated = _grow(self.n_updated, capacity, _nat())

    def _grow_edges(self, size: int) -> None:
        if size <= len(self.e_src):
            return
        self.e_src = _grow(self.e_src, size, -1)
        capacity = len(self.e_src)
        self.e_dst = _grow(self.e_dst, capacity, -1)
        self.e_ns = _grow(self.e_ns, capacity, -1)
        self.e_type = _grow(self.e_type, capacity, 0)
        self.e_weight = _grow(self.e_weight, capacity, 0.0)
        for name in ("e_from", "e_until", "e_created", "e_updated"):
            setattr(self, name, _grow(getattr(self, name), capacity, _nat()))
        self.e_desc = _grow(self.e_desc, capacity, None)
        self.e_props = _grow(self.e_props, capacity, None)

    # -- names -----------------------------------------------------------------------------------------------

    def _add_name(self, code: int, key: str, node_id: int) -> None:
        names = self.names.get(code)
        if names is None:
            names = self.names[code] = {}
        found = names.get(key)
        if found is None:
            names[key] = node_id
        elif isinstance(found, tuple):
            if node_id not in found:
                names[key] = (*found, node_id)
        elif found != node_id:
            names[key] = (found, node_id)

    def _drop_name(self, code: int, key: str, node_id: int) -> None:
        names = self.names.get(code, {})
        found = names.get(key)
        if found == node_id:
            del names[key]
        elif isinstance(found, tuple) and node_id in found:
            rest = tuple(i for i in found if i != node_id)
            names[key] = rest[0] if len(rest) == 1 else rest

    def _name_keys(self, node_id: int) -> list[str]:
        return self.name_keys(self.n_key[node_id], self.n_aliases[node_id])

    # -- writes (after the commit) ---------------------------------------------------------------------------

    def put_nodes(self, nodes: Sequence[Any], now: Any, keys_of: dict[int, list[str]] | None = None) -> None:
        """Insert or replace nodes from their records (ids set); a replaced node keeps its created_at.
        `keys_of`: node id -> its name keys, when the caller has them already."""
        if not nodes:
            return
        self._grow_nodes(max(n.id for n in nodes) + 1)
        stamp = _time(now)
        empty: tuple[str, ...] = ()
        import json

        for node in nodes:
            node_id = node.id
            if self.n_ns[node_id] >= 0:
                old_code = int(self.n_ns[node_id])
                for key in self._name_keys(node_id):
                    self._drop_name(old_code, key, node_id)
            else:
                self.n_created[node_id] = stamp
                self.node_count += 1
            code = self.namespace_code(node.namespace)
            self.n_ns[node_id] = code
            self.n_type[node_id] = self.type_code(node.type)
            self.n_key[node_id] = node.key
            self.n_name[node_id] = node.name
            self.n_desc[node_id] = node.description or None
            self.n_aliases[node_id] = tuple(node.aliases) if node.aliases else empty
            self.n_props[node_id] = json.dumps(node.properties) if node.properties else None
            self.n_updated[node_id] = stamp
            for key in keys_of[node_id] if keys_of and node_id in keys_of else self._name_keys(node_id):
                self._add_name(code, key, node_id)

    def delete_nodes(self, ids: Iterable[int]) -> None:
        for node_id in ids:
            if node_id >= len(self.n_ns) or self.n_ns[node_id] < 0:
                continue
            code = int(self.n_ns[node_id])
            for key in self._name_keys(node_id):
                self._drop_name(code, key, node_id)
            self.n_ns[node_id] = -1
            for column in (self.n_key, self.n_name, self.n_desc, self.n_aliases, self.n_props):
                column[node_id] = None
            self.node_count -= 1

    def put_edges(self, ids: Sequence[int], namespaces: Sequence[str], sources: Sequence[int],
                  targets: Sequence[int], types: Sequence[str], descriptions: Sequence[str], weights: Sequence[float],
                  properties: Sequence[str | None], now: Any, *, valid_from: Any = None) -> None:
        """New edges (that still hold: valid_from = now unless given, valid_until NULL)."""
        if not len(ids):
            return
        ids = np.asarray(ids, dtype=np.int64)
        self._grow_edges(int(ids.max()) + 1)
        fresh = int((self.e_src[ids] < 0).sum())
        self._forget_edges(ids.tolist())
        sources = np.asarray(sources, dtype=np.int64)
        targets = np.asarray(targets, dtype=np.int64)
        self._mark_degrees_stale(self.e_src[ids], self.e_dst[ids], sources, targets)
        self.e_src[ids] = sources
        self.e_dst[ids] = targets
        namespace_codes = {x: self.namespace_code(x) for x in set(namespaces)}
        type_codes = {x: self.type_code(x) for x in set(types)}
        self.e_ns[ids] = [namespace_codes[x] for x in namespaces]
        self.e_type[ids] = [type_codes[x] for x in types]
        self.e_weight[ids] = weights
        self.e_desc[ids] = [d or None for d in descriptions]
        self.e_props[ids] = [None if p in (None, "{}") else p for p in properties]
        stamp = _time(now)
        self.e_from[ids] = stamp if valid_from is None else _time(valid_from)
        self.e_until[ids] = _nat()
        self.e_created[ids] = stamp
        self.e_updated[ids] = stamp
        self.edge_count += fresh
        self.out_edges.add(sources.tolist(), ids.tolist())
        self.in_edges.add(targets.tolist(), ids.tolist())
        self._maybe_rebuild()

    def update_edges(self, ids: Sequence[int], descriptions: Sequence[str], weights: Sequence[float],
                     properties: Sequence[str | None], now: Any) -> None:
        if not len(ids):
            return
        ids = np.asarray(ids, dtype=np.int64)
        self._forget_edges(ids.tolist())
        self.e_desc[ids] = [d or None for d in descriptions]
        changed = ids[self.e_weight[ids] != np.asarray(weights, dtype=np.float64)]
        self.e_weight[ids] = weights
        if len(changed):
            # Out of order in their CSR lists now: read whole from the delta, and flagged where met in the lists.
            self._reweighted.update(changed.tolist())
            self.out_edges.add(self.e_src[changed].tolist(), changed.tolist())
            self.in_edges.add(self.e_dst[changed].tolist(), changed.tolist())
            self._maybe_rebuild()
        self.e_props[ids] = [None if p in (None, "{}") else p for p in properties]
        self.e_updated[ids] = _time(now)

    def delete_edges(self, ids: Iterable[int]) -> None:
        ids = np.asarray(list(ids), dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < len(self.e_src))]
        ids = ids[self.e_src[ids] >= 0]
        if not len(ids):
            return
        self._forget_edges(ids.tolist())
        self._mark_degrees_stale(self.e_src[ids], self.e_dst[ids])
        self.e_src[ids] = -1
        self.e_dst[ids] = -1
        self.e_ns[ids] = -1
        self.e_desc[ids] = None
        self.e_props[ids] = None
        self.edge_count -= len(ids)

    def repoint(self, target: int, sources: Sequence[int]) -> None:
        """What merging `sources` into `target` does to the edges: every end at a source moves to the target."""
        sources = np.asarray(sorted(set(sources)), dtype=np.int64)
        if not len(sources):
            return
        self._mark_degrees_stale(sources, [target])
        for links, column in ((self.out_edges, self.e_src), (self.in_edges, self.e_dst)):
            owners, edges = links.gather(sources)
            moved = np.unique(edges[column[edges] == owners])
            self._forget_edges(moved.tolist())
            column[moved] = target
            links.add([target] * len(moved), moved.tolist())
        self._maybe_rebuild()

    def _maybe_rebuild(self) -> None:
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()

    def put_documents(self, namespaces: Sequence[str], ids: Sequence[str], titles: Sequence[str | None]) -> None:
        for key, title in zip(zip(namespaces, ids), titles):
            self.documents.append((key[1], title or ""))
            self.document_codes[key] = len(self.documents) - 1  # a replaced document's old entry is left unused

    def add_chunks(self, ids: Sequence[int], namespaces: Sequence[str], document_ids: Sequence[str],
                   ordinals: Sequence[int], texts: Sequence[str]) -> None:
        """Chunks of documents already given to `put_documents`."""
        if len(ids):
            ids = np.asarray(ids, dtype=np.int64)
            size = int(ids.max()) + 1
            self.chunk_live = _grow(self.chunk_live, size, False)
            self.chunk_live[ids] = True
            self.chunk_document = _grow(self.chunk_document, size, -1)
            codes = self.document_codes
            self.chunk_document[ids] = [codes.get(key, -1) for key in zip(namespaces, document_ids)]
            self.chunk_ordinal = _grow(self.chunk_ordinal, size, 0)
            self.chunk_ordinal[ids] = ordinals
            if self.chunk_text is not None:
                self.chunk_text.update(zip(ids.tolist(), texts))
                self.text_bytes += sum(len(text.encode()) for text in texts)
                if self.text_bytes > self.text_budget:
                    self.chunk_text = None
                    log.info("passage texts outgrew the %d MB kept in memory: searches read them from the file",
                             self.text_budget // 2**20)

    def drop_chunks(self, ids: Sequence[int]) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[ids < len(self.chunk_live)]
        self.chunk_live[ids] = False
        if self.chunk_text is not None:
            self.text_bytes -= sum(len(self.chunk_text.pop(i, "").encode()) for i in ids.tolist())

    def add_mentions(self, chunk_ids: Sequence[int], node_ids: Sequence[int]) -> None:
        chunk_ids, node_ids = list(chunk_ids), list(node_ids)
        if not chunk_ids:
            return
        self.chunks_of.add(node_ids, chunk_ids)
        self.nodes_of.add(chunk_ids, node_ids)
        if self.chunks_of.stale() or self.nodes_of.stale():
            self._compact_mentions()

    def copy_mentions(self, target: int, sources: Sequence[int]) -> None:
        _, chunks = self.node_chunk_pairs(list(sources))
        self.add_mentions(chunks.tolist(), [target] * len(chunks))

    def _compact_mentions(self) -> None:
        nodes, chunks = self.chunks_of.pairs()
        live = self._node_live(nodes) & self._chunk_live(chunks)
        pairs = np.unique(np.stack([nodes[live], chunks[live]], axis=1), axis=0) if live.any() else np.zeros((0, 2), np.int64)
        self.chunks_of.build(pairs[:, 0], pairs[:, 1])
        self.nodes_of.build(pairs[:, 1], pairs[:, 0])

    # -- reads -----------------------------------------------------------------------------------------------

    def _node_live(self, ids: Any) -> Any:
        inside = (ids >= 0) & (ids < len(self.n_ns))
        result = np.zeros(len(ids), dtype=bool)
        result[inside] = self.n_ns[ids[inside]] >= 0
        return result

    def _chunk_live(self, ids: Any) -> Any:
        inside = (ids >= 0) & (ids < len(self.chunk_live))
        result = np.zeros(len(ids), dtype=bool)
        result[inside] = self.chunk_live[ids[inside]]
        return result

    def _stored_chunks(self, ids: Sequence[int]) -> tuple[Any, Any]:
        """(ids, document codes) of the stored ones of the chunk `ids`."""
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[self._chunk_live(ids)]
        codes = self.chunk_document[ids]
        return ids[codes >= 0], codes[codes >= 0]

    def chunk_documents(self, ids: Sequence[int]) -> dict[int, str]:
        """The document id of each stored one of the chunk `ids`."""
        ids, codes = self._stored_chunks(ids)
        return {i: self.documents[c][0] for i, c in zip(ids.tolist(), codes.tolist())}

    def chunk_records(self, ids: Sequence[int]) -> list[Any] | None:
        """ChunkRecords of the stored ones of `ids`, or None while the texts are not held in memory."""
        from duckgraph.ports import ChunkRecord

        if self.chunk_text is None:
            return None
        ids, codes = self._stored_chunks(ids)
        return [ChunkRecord(id=i, document_id=self.documents[code][0], ordinal=ordinal, text=self.chunk_text[i])
                for i, code, ordinal in zip(ids.tolist(), codes.tolist(), self.chunk_ordinal[ids].tolist())]

    def document_titles(self, namespace: str, ids: Iterable[str]) -> dict[str, str]:
        found = ((i, self.document_codes.get((namespace, i))) for i in ids)
        return {i: self.documents[code][1] for i, code in found if code is not None}

    def node_records(self, ids: Any) -> list[Any]:
        """NodeRecords (without embeddings) of the stored ones of `ids`, by id."""
        from duckgraph.ports import NodeRecord

        ids = np.unique(np.asarray(list(ids), dtype=np.int64))
        ids = ids[self._node_live(ids)]
        if not len(ids):
            return []
        namespaces = self.namespace_names
        types = self.type_names
        return [
            NodeRecord(namespace=namespaces[ns], key=key, name=name, type=types[ty], description=desc or "",
                       aliases=aliases, properties=_properties(props), id=node_id, created_at=created,
                       updated_at=updated)
            for node_id, ns, key, name, ty, desc, aliases, props, created, updated in zip(
                ids.tolist(), self.n_ns[ids].tolist(), self.n_key[ids], self.n_name[ids], self.n_type[ids].tolist(),
                self.n_desc[ids], self.n_aliases[ids], self.n_props[ids], self.n_created[ids].tolist(),
                self.n_updated[ids].tolist(),
            )
        ]

    def _answering(self, namespace: str, keys: Iterable[str]) -> Iterator[tuple[str, tuple[int, ...]]]:
        """(key, the nodes of `namespace` answering to it by name or alias) for those of `keys` that some do."""
        code = self.namespace_codes.get(namespace)
        names = self.names.get(code) if code is not None else None
        if not names:
            return
        for key in keys:
            hit = names.get(key)
            if hit is not None:
                yield key, hit if isinstance(hit, tuple) else (hit,)

    def find(self, namespace: str, keys: Iterable[str]) -> list[int]:
        return sorted({node_id for _, nodes in self._answering(namespace, keys) for node_id in nodes})

    def key_owners(self, namespace: str, keys: Iterable[str]) -> dict[str, int]:
        """key -> the node whose own key (not an alias's) it is, for those of `keys` that have one (a write
        resolving its edges' ends: one dict lookup per key)."""
        n_key = self.n_key
        return {key: node_id for key, nodes in self._answering(namespace, keys)
                for node_id in sorted(nodes) if n_key[node_id] == key}

    def edge_records(self, ids: Any) -> list[Any]:
        """EdgeRecords of the given (existing) edge ids, in that order.

        Building a record costs microseconds (a frozen dataclass of 11 fields), so records are kept in a bounded
        cache, dropped when their edge changes. They are shared: their `properties` is a read-only dict.
        """
        cache = self._edge_cache
        ids = np.asarray(ids, dtype=np.int64)
        found = [cache.get(edge_id) for edge_id in ids.tolist()]
        missing = np.asarray([i for i, record in zip(ids.tolist(), found) if record is None], dtype=np.int64)
        if len(missing):
            from duckgraph.ports import EdgeRecord

            types = self.type_names
            if len(cache) + len(missing) > EDGE_CACHE_SIZE:
                cache.clear()
            for record in (
                EdgeRecord(edge_id, source, target, types[ty], desc or "", weight, _FrozenDict(_properties(props)),
                           valid_from, valid_until, created, updated)
                for edge_id, source, target, ty, desc, weight, props, valid_from, valid_until, created, updated in zip(
                    missing.tolist(), self.e_src[missing].tolist(), self.e_dst[missing].tolist(),
                    self.e_type[missing].tolist(), self.e_desc[missing], self.e_weight[missing].tolist(),
                    self.e_props[missing], self.e_from[missing].tolist(), self.e_until[missing].tolist(),
                    self.e_created[missing].tolist(), self.e_updated[missing].tolist(),
                )
            ):
                cache[record.id] = record
            found = [cache[edge_id] for edge_id in ids.tolist()]
        return found

    def _forget_edges(self, ids: Iterable[int]) -> None:
        cache = self._edge_cache
        if cache:
            for edge_id in ids:
                cache.pop(edge_id, None)

    def existing_edges(self, ids: Iterable[int]) -> Any:
        ids = np.unique(np.asarray(list(ids), dtype=np.int64))
        ids = ids[(ids >= 0) & (ids < len(self.e_src))]
        return ids[self.e_src[ids] >= 0]

    def touching(self, node_ids: Any) -> Any:
        """Ids of the edges with an end among `node_ids` (any namespace, any validity), sorted."""
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()
        parts = []
        for links, column in ((self.out_edges, self.e_src), (self.in_edges, self.e_dst)):
            owners, edges = links.gather(nodes)
            parts.append(edges[column[edges] == owners])
        return _sorted_unique(np.concatenate(parts))

    def best_touching(self, node_ids: Any, namespace: str, as_of: Any, limit: int) -> Any:
        """The first `limit` edges by weight (then id) among those that hold at `as_of` in `namespace` and have
        an end among `node_ids`: what `neighbors` returns, in that order.

        Each node's lists are in that order already, so only their first `limit` entries are read (a hub's
        50,000 edges cost as much as its best 2,000): an edge among the first `limit` overall is among the
        first `limit` holding edges of each of its ends. A node whose first `limit` entries are not all holding
        edges of the namespace (or whose weights changed since the build) is read whole instead.
        """
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        if limit <= 0 or not len(nodes):
            return nodes[:0]
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()
        parts, whole = [], []
        for links, column in ((self.out_edges, self.e_src), (self.in_edges, self.e_dst)):
            owners, edges = links.gather(nodes, limit)
            current = column[edges] == owners
            parts.append(edges[current])
            # A list cut at `limit` must be all good for the cut to be exact.
            cut = nodes[(nodes < len(links.ptr) - 1)]
            cut = cut[(links.ptr[np.minimum(cut + 1, len(links.ptr) - 1)] - links.ptr[cut]) > limit]
            if len(cut):
                good = current & isin_ids(edges, self.holding(edges[current], namespace, as_of))
                if self._reweighted:
                    good &= ~np.isin(edges, np.fromiter(self._reweighted, dtype=np.int64))
                bad_owners = np.unique(owners[~good])
                whole.append(cut[isin_ids(cut, bad_owners)])
        if whole:
            again = np.unique(np.concatenate(whole))
            if len(again):
                parts.append(self.touching(again))
        edges = self.holding(_sorted_unique(np.concatenate(parts)), namespace, as_of)
        return self.by_weight(edges, limit)

    def holding(self, edges: Any, namespace: str | None, as_of: Any = None, *, include_expired: bool = False) -> Any:
        """Those of `edges` in `namespace` (None: any) that hold at `as_of` (None: now, i.e. valid_until NULL)."""
        keep = np.ones(len(edges), dtype=bool)
        if namespace is not None:
            keep &= self.e_ns[edges] == self.namespace_codes.get(namespace, -2)
        if include_expired:
            return edges[keep]
        if as_of is None:
            keep &= np.isnat(self.e_until[edges])
        else:
            moment = np.datetime64(as_of, "us")
            valid_from, valid_until = self.e_from[edges], self.e_until[edges]
            keep &= (np.isnat(valid_from) | (valid_from <= moment)) & (np.isnat(valid_until) | (valid_until > moment))
        return edges[keep]

    def by_weight(self, edges: Any, limit: int | None = None) -> Any:
        """The edges ordered by weight (highest first), then id; the first `limit` of them."""
        weights = self.e_weight[edges]
        if limit is not None and len(edges) > 2 * limit:
            if limit <= 0:
                return edges[:0]
            # Only the first `limit` are ordered: those above the limit-th weight, then ties at it by id.
            threshold = -np.partition(-weights, limit - 1)[limit - 1]
            above = weights > threshold
            ties = np.flatnonzero(weights == threshold)[: max(0, limit - int(above.sum()))]  # edges are sorted by id
            chosen = np.concatenate([np.flatnonzero(above), ties])
            edges, weights = edges[chosen], weights[chosen]
        ordered = edges[np.lexsort((edges, -weights))]
        return ordered if limit is None else ordered[:limit]

    def neighbour_pairs(self, node_ids: Sequence[int], namespace: str, as_of: Any) -> tuple[Any, Any]:
        """(node, neighbour) arrays: each of the nodes with the other end of each of its edges that hold, one pair
        per edge (two facts joining the same nodes are two pairs), in no particular order."""
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        if self.out_edges.stale() or self.in_edges.stale():
            self._rebuild_adjacency()
        owners, others = [], []
        for links, here, there in ((self.out_edges, self.e_src, self.e_dst), (self.in_edges, self.e_dst, self.e_src)):
            owner, edges = links.gather(nodes)
            # a list may still hold an edge repointed to another node since it was built, and an edge written
            # again since then twice; a self-loop is in both of its node's lists and counts once
            current = here[edges] == owner
            if links is self.in_edges:
                current &= there[edges] != owner
            edges = edges[current]
            edges = self.holding(_sorted_unique(edges) if links.delta else edges, namespace, as_of)
            owners.append(here[edges])
            others.append(there[edges])
        return np.concatenate(owners), np.concatenate(others)

    def passage_links(self, node_ids: Sequence[int], namespace: str, as_of: Any) -> tuple[Any, tuple[Any, Any]]:
        """The degree of each of the (distinct) nodes as `neighbour_pairs` and `node_chunk_pairs` count it, in
        their order, and their (node, chunk) pairs. A node's neighbours are counted when the CSRs are built; they
        are listed again only for a node an edge written since ends at, or for another moment than now."""
        nodes = np.asarray(node_ids, dtype=np.int64)
        mentions = self.node_chunk_pairs(nodes)
        degrees = link_counts(nodes, mentions[0])
        counted = np.zeros(len(nodes), dtype=bool)
        if as_of is None:
            inside = (nodes >= 0) & (nodes < len(self._degrees))
            known = nodes[inside]
            counted[inside] = ~self._degree_stale[known] & (self.n_ns[known] == self.namespace_codes.get(namespace, -2))
            degrees[counted] += self._degrees[nodes[counted]]
        again = nodes[~counted]
        if len(again):
            degrees[~counted] += link_counts(again, self.neighbour_pairs(again, namespace, as_of)[0])
        return degrees, mentions

    def node_chunk_pairs(self, node_ids: Sequence[int]) -> tuple[Any, Any]:
        """(node, chunk) arrays: the mentions of the given nodes, distinct, by node then chunk."""
        nodes = np.unique(np.asarray(node_ids, dtype=np.int64))
        nodes = nodes[self._node_live(nodes)]
        owners, chunks = self.chunks_of.gather(nodes)
        return _distinct_pairs(owners, chunks, self._chunk_live(chunks))

    def chunk_node_pairs(self, chunk_ids: Sequence[int]) -> tuple[Any, Any]:
        """(chunk, node) arrays: the mentions in the given chunks, distinct, by chunk then node."""
        chunks = np.unique(np.asarray(chunk_ids, dtype=np.int64))
        chunks = chunks[self._chunk_live(chunks)]
        owners, nodes = self.nodes_of.gather(chunks)
        return _distinct_pairs(owners, nodes, self._node_live(nodes))


def _distinct_pairs(owners: Any, values: Any, keep: Any) -> tuple[Any, Any]:
    """The kept (owner, value) pairs, distinct, sorted by owner then value (ids are non-negative)."""
    owners, values = owners[keep], values[keep]
    if not len(owners):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    width = int(values.max()) + 1  # one int64 key per pair: 1-d unique is far faster than unique(axis=0)
    keys = _sorted_unique(owners * width + values)
    return keys // width, keys % width


def _sorted_unique(values: Any) -> Any:
    """np.unique for int arrays, by sorting (faster than numpy 2's hashing for the sizes met here)."""
    if len(values) < 2:
        return values
    values = np.sort(values)
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _default_name_keys(key: str, aliases: Sequence[str]) -> list[str]:
    from duckgraph.ports import entity_key

    return list(dict.fromkeys([key, *(entity_key(a) for a in aliases)]))


def _filled(column: Any) -> Any:
    """A fetched column with NULLs (a masked array) as a plain array: None / NaT where NULL."""
    if isinstance(column, np.ma.MaskedArray):
        if column.dtype == object:
            data = column.data.copy()
            data[np.ma.getmaskarray(column)] = None
            return data
        if column.dtype.kind == "M":
            return column.filled(np.datetime64("NaT", "us"))
        return column.filled()
    return column
