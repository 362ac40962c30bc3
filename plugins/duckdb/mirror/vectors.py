"""Vectors of one kind held in memory and searched by dot product: an exact scan below a size, an inverted-file
(IVF) index above it, built in the background (`ivf.py`) and kept while rows are written and deleted.

Derived data, like the rest of the mirror: built from the vector tables at open and updated after each committed
write. The one part written back is an IVF index's layout (`SavedLayout`), which the store keeps in a table of its
own so that a reopen takes it instead of building the index again.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.ivf import (
    KMEANS_ITERATIONS,
    MAX_SAMPLE,
    MIN_RERANK,
    REDUCE_FROM,
    RERANK,
    SAMPLE_PER_LIST,
    TWO_LEVEL_FROM,
    Reduction,
    assign,
    in_list_order,
    ivf_lists,
    kmeans,
    kmeans_two_level,
    list_offsets,
    principal_directions,
    projected,
    reduction_of,
    row_checks,
    tune,
)
from duckgraph.plugins.duckdb.mirror.matrix import (
    PRECISIONS,
    ask_for_huge_pages,
    copied_matrix,
    floats,
    mapping_of,
    matrix_view,
    matvec,
    products,
    resized,
    rows_dot,
    to_bfloat16,
)

log = logging.getLogger(__name__)

np: Any = NumpyOnFirstUse(globals())

#: From this many vectors of one kind on, an IVF index is built (in the background) and searched; below it an
#: exact scan is fast enough, and the IVF index's misses would cost retrieval quality (contrib/bench/musique.py).
DEFAULT_ANN_MIN_ROWS = 20_000
#: The index is rebuilt (in the background, on the next search) once rows written or deleted since the last
#: build exceed this share of the indexed rows: until then they are scanned exactly (or skipped, if deleted).
REBUILD_SHARE = 0.1
#: Held by the IVF build in progress (see `VectorIndex._build`).
_BUILDS = threading.Lock()


@dataclass(frozen=True)
class SavedLayout:
    """An IVF index as the store saves it in the file: the lists (centroids, and the ids of their rows in list
    order, `offsets` delimiting each list), a check of each listed row's vector (`row_checks`), the reduction's
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
        self._reduction: Reduction | None = None
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
            return vectors if self.precision == "bfloat16" else floats(vectors)
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
        mapping = mapping_of(self._matrix)
        if mapping is not None:
            dtype = self._matrix.dtype
            self._matrix = None  # its only other holder is a build's snapshot: then the resize refuses
            try:
                mapping.resize(rows * self.dimensions * dtype.itemsize)
                ask_for_huge_pages(mapping)  # for the part mremap added
            except (BufferError, OSError, SystemError):
                pass  # the mapping keeps its size: copied below
            self._matrix = matrix_view(mapping, self.dimensions, dtype)
        if len(self._matrix) < rows:
            self._matrix = copied_matrix(self._matrix, rows, self._size)
        self._ids = resized(self._ids, rows)
        self._namespaces = resized(self._namespaces, rows)

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
            scores = rows_dot(self._matrix, rows, query)
        return dict(zip(ids.tolist(), scores.tolist()))

    def similarity_array(self, ids: Any, query: Any) -> Any:
        """Cosine similarity of `query` to the vector of each of `ids`, aligned with them; NaN where none."""
        with self._lock:
            ids, rows = self._aligned_rows(ids)
            result = np.full(len(ids), np.nan)
            present = rows >= 0
            if present.any():
                result[present] = rows_dot(self._matrix, rows[present], query)
        return result

    def vectors(self, ids: Iterable[int]) -> dict[int, Any]:
        """Copies of the stored vectors of the given ids (ids not in the index are left out)."""
        with self._lock:
            ids, rows = self._rows_of(list(ids))
            return dict(zip(ids.tolist(), floats(self._matrix[rows])))

    def rows(self) -> tuple[Any, Any, Any]:
        """(ids, vectors, namespace codes) of every stored row (copies)."""
        with self._lock:
            live = np.flatnonzero(self._ids[: self._size] >= 0)
            return self._ids[live], floats(self._matrix[live]), self._namespaces[live]

    def search(self, query: Any, k: int, namespace: str) -> list[tuple[int, float]]:
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            code = self._namespace_codes.get(namespace)
            if code is None or k <= 0 or self._live == 0:
                return []
            if not self.active:
                # No index, or one that must read most lists for its recall (vectors without cluster structure):
                # a scan of everything costs less than list after list.
                scores = matvec(self._matrix[: self._size], query)
                rows = None
                if len(self._namespace_codes) > 1 or self._holes:
                    scores[self._namespaces[: self._size] != code] = -np.inf
                return self._top(scores, rows, k)
            nprobe = max(1, self.nprobe)
            lists = len(self._centroids)
            reduction = self._reduction
            scan_query = query if reduction is None else reduction.project(query)
            closeness = matvec(self._centroids if reduction is None else reduction.centroids, scan_query)
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
            return products(self._matrix, np.append(starts, tail[0]), np.append(ends, tail[1]), query)
        scores, rows = products(self._reduction.matrix, starts, ends, scan_query)
        if code is not None:
            scores[self._namespaces[rows] != code] = -np.inf
        keep = max(RERANK * k, MIN_RERANK)
        if keep < len(scores):
            rows = rows[np.argpartition(-scores, keep - 1)[:keep]]
        tail_scores, tail_rows = products(self._matrix, *tail, query)
        return (np.concatenate([rows_dot(self._matrix, rows, query), tail_scores]),
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
            sample = floats(matrix[sample_rows])
            # Its own random numbers: the k-means draws the same ones with or without it.
            directions = (principal_directions(sample, np.random.default_rng([len(live), 1]))
                          if self.dimensions >= REDUCE_FROM else None)
            if lists > TWO_LEVEL_FROM:
                centroids, coarse, groups = kmeans_two_level(sample, lists, rng)
                lists = len(centroids)
            else:
                centroids, coarse, groups = kmeans(sample, lists, KMEANS_ITERATIONS, rng), None, None
            del sample
            trained = time.perf_counter()
            assignment = assign(matrix, live, centroids, coarse, groups)
            order = np.argsort(assignment, kind="stable")
            offsets = list_offsets(assignment, lists)
            source = live[order]
            del order, assignment
            new_matrix, new_ids, new_namespaces = in_list_order(matrix, ids, namespaces, source, len(source))
            listed = new_matrix[: len(source)]
            reduction = None if directions is None else reduction_of(listed, centroids, directions)
            nprobe, reduction, reduction_kept = tune(listed, centroids, offsets, reduction, self.fixed_nprobe, rng)
            checks = row_checks(listed)
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
            matrix = copied_matrix(matrix, capacity, listed)
            ids, namespaces = resized(ids, capacity), resized(namespaces, capacity)
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
            same[same] = row_checks(self._matrix, rows[same]) == layout.checks[same]
            offsets = list_offsets(np.repeat(np.arange(lists), np.diff(layout.offsets))[same], lists)
            source = rows[same]  # in list order, as saved
            matrix, new_ids, new_namespaces = in_list_order(self._matrix, self._ids, self._namespaces, source,
                                                             self._size)
            centroids = np.ascontiguousarray(layout.centroids, dtype=np.float32)
            reduction = (None if layout.projection is None else
                         projected(matrix[: len(source)], centroids, np.asarray(layout.projection, dtype=np.float32)))
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

