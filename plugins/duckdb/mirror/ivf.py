"""Building an IVF layout over a vector matrix: spherical k-means (two-level above TWO_LEVEL_FROM lists), the
assignment of every row to its list, the probe count tuned for TARGET_RECALL, and the reduction of the lists' rows
to their principal directions. Pure functions over numpy arrays; `VectorIndex` runs them in a background thread."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.matrix import WIDEN_ROWS, floats, mapped_matrix, products

np: Any = NumpyOnFirstUse(globals())

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
#: directions), and the best RERANK per result asked (at least MIN_RERANK) rescored on the full vectors: the scan is
#: memory-bound, so a third of the bytes is most of a third of the time (contrib/bench/vectors.py measures it).
#: Used only when, on the tuning queries, the reduced scan of the lists probed keeps among its best MIN_RERANK rows
#: at least REDUCTION_RECALL of the exact top 10 those lists hold (otherwise the full vectors are scanned); the
#: tuning queries are harder than real questions, so this errs on the safe side.
REDUCE_FROM = 192
RERANK = 8
MIN_RERANK = 400
REDUCTION_RECALL = 0.98
#: Rows of the sample the principal directions are computed from.
REDUCTION_SAMPLE = 20_000


@dataclass(frozen=True)
class Reduction:
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


def ivf_lists(rows: int) -> int:
    """How many inverted lists an IVF index over `rows` vectors gets: ~4 sqrt(rows), from 16 to 4096. More lists
    make a query scan a smaller share of the rows for the same recall, at the price of a longer k-means."""
    return int(min(4096, max(16, round(4 * math.sqrt(rows)))))


def list_offsets(list_of_row: Any, lists: int) -> Any:
    """Where each list starts (and, last, where the final one ends) when rows are grouped by their list."""
    offsets = np.zeros(lists + 1, dtype=np.int64)
    np.cumsum(np.bincount(list_of_row, minlength=lists), out=offsets[1:])
    return offsets


def in_list_order(matrix: Any, ids: Any, namespaces: Any, source: Any, rows: int) -> tuple[Any, Any, Any]:
    """A new matrix (with its ids and namespace codes) holding the `source` rows in that order, with room for
    `rows` rows and a tenth more; the rows after the copied ones are empty (id -1)."""
    capacity = max(1024, int(1.1 * rows) + 1024)
    new_matrix = mapped_matrix(capacity, matrix.shape[1], matrix.dtype)
    for start in range(0, len(source), 65_536):
        block = source[start : start + 65_536]
        new_matrix[start : start + len(block)] = matrix[block]
    new_ids = np.full(capacity, -1, dtype=np.int64)
    new_ids[: len(source)] = ids[source]
    new_namespaces = np.full(capacity, -1, dtype=np.int32)
    new_namespaces[: len(source)] = namespaces[source]
    return new_matrix, new_ids, new_namespaces


def row_checks(matrix: Any, rows: Any = None) -> Any:
    """A 32-bit check of each row's vector (of the given rows, or all): a weighted sum of its float bits, so that
    a layout saved with the index can tell, at open, the rows whose vector is still the one it listed."""
    rows = np.arange(len(matrix)) if rows is None else np.asarray(rows)
    # Odd weights, and arithmetic modulo 2**32 (uint32 wraps): ten times faster than summing in 64 bits.
    weights = (np.arange(matrix.shape[1], dtype=np.uint32) * np.uint32(2_654_435_761) + np.uint32(1)) | np.uint32(1)
    checks = np.empty(len(rows), dtype=np.uint32)
    for start in range(0, len(rows), 16_384):
        bits = floats(matrix[rows[start : start + 16_384]]).view(np.uint32)
        checks[start : start + 16_384] = (bits * weights).sum(axis=1, dtype=np.uint32)
    return checks


def _nearest(x: Any, centroids: Any) -> Any:
    out = np.empty(len(x), dtype=np.int32)
    for start in range(0, len(x), 8192):
        out[start : start + 8192] = np.argmax(x[start : start + 8192] @ centroids.T, axis=1)
    return out


def assign(matrix: Any, rows: Any, centroids: Any, coarse: Any = None, groups: Any = None) -> Any:
    """The nearest centroid of each of the given rows; with `coarse` centroids and `groups` (the range of fine
    centroids under each coarse one), the nearest fine centroid under the row's COARSE_PROBES nearest coarse ones
    (almost always the nearest of all: a vector near a coarse border is compared with both sides)."""
    assignment = np.empty(len(rows), dtype=np.int32)
    if coarse is None:
        for start in range(0, len(rows), 8192):
            assignment[start : start + 8192] = np.argmax(floats(matrix[rows[start : start + 8192]]) @ centroids.T,
                                                         axis=1)
        return assignment
    probes = min(COARSE_PROBES, len(coarse))
    top = np.empty((len(rows), probes), dtype=np.int32)
    for start in range(0, len(rows), 8192):
        scores = floats(matrix[rows[start : start + 8192]]) @ coarse.T
        top[start : start + 8192] = np.argpartition(-scores, probes - 1, axis=1)[:, :probes]
    best = np.full(len(rows), -np.inf, dtype=np.float32)
    for group, (first, last) in enumerate(groups):
        if last <= first:
            continue
        members = np.flatnonzero((top == group).any(axis=1))
        fine = centroids[first:last]
        for start in range(0, len(members), 8192):
            chosen = members[start : start + 8192]
            scores = floats(matrix[rows[chosen]]) @ fine.T
            nearest = np.argmax(scores, axis=1)
            value = scores[np.arange(len(chosen)), nearest]
            better = value > best[chosen]
            assignment[chosen[better]] = first + nearest[better]
            best[chosen[better]] = value[better]
    return assignment


def kmeans_two_level(sample: Any, lists: int, rng: Any) -> tuple[Any, Any, list[tuple[int, int]]]:
    """About `lists` centroids as sqrt(lists) coarse ones, each split by its own k-means over its share of the
    sample: k-means and assignment cost ~sqrt(lists) dot products per vector instead of `lists`."""
    top = max(2, int(round(math.sqrt(lists))))
    coarse = kmeans(sample, top, KMEANS_ITERATIONS, rng)
    nearest = _nearest(sample, coarse)
    parts, groups, first = [], [], 0
    for group in range(top):
        members = sample[nearest == group]
        k = min(len(members), max(1, int(round(lists * len(members) / len(sample)))))
        if k == 0:
            groups.append((first, first))
            continue
        parts.append(kmeans(members, k, KMEANS_ITERATIONS, rng))
        groups.append((first, first + k))
        first += k
    return np.ascontiguousarray(np.vstack(parts), dtype=np.float32), coarse, groups


def kmeans(x: Any, k: int, iterations: int, rng: Any) -> Any:
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
    topics, and sums of three rows need about as many lists as they do."""
    q = sum(floats(matrix[rng.integers(0, len(matrix), size=TUNING_QUERIES)]) for _ in range(3))
    return q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)


def _best_rows(matrix: Any, queries: Any, k: int) -> Any:
    """The rows of the k best scores of each query (queries x k, in no order), block by block over the matrix."""
    k = min(k, len(matrix))
    best_rows = np.empty((len(queries), 0), dtype=np.int64)
    best = np.empty((len(queries), 0), dtype=np.float32)
    for start in range(0, len(matrix), WIDEN_ROWS):
        block = queries @ floats(matrix[start : start + WIDEN_ROWS]).T
        scores = np.concatenate([best, block], axis=1)
        rows = np.concatenate([best_rows, np.broadcast_to(np.arange(start, start + block.shape[1]), block.shape)], axis=1)
        if scores.shape[1] > k:
            keep = np.argpartition(-scores, k - 1, axis=1)[:, :k]
            scores, rows = np.take_along_axis(scores, keep, axis=1), np.take_along_axis(rows, keep, axis=1)
        best, best_rows = scores, rows
    return best_rows


def tune(matrix: Any, centroids: Any, offsets: Any, reduction: Reduction | None, fixed_nprobe: int | None,
          rng: Any) -> tuple[int, Reduction | None, float | None]:
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


def principal_directions(sample: Any, rng: Any) -> Any:
    """The sample's principal directions (rows of unit vectors, the strongest first)."""
    rows = sample[rng.choice(len(sample), size=min(len(sample), REDUCTION_SAMPLE), replace=False)]
    centred = rows - rows.mean(axis=0)
    # The covariance's eigenvectors: the same directions as an SVD of the rows, at a fraction of its time.
    _, vectors = np.linalg.eigh(centred.T @ centred)
    return vectors[:, ::-1].T


def reduction_of(matrix: Any, centroids: Any, directions: Any) -> Reduction:
    """The rows and centroids projected onto a third of the principal `directions`. Scores are not centred: a
    query's product with the mean is the same for every row, so the ranking stays."""
    width = min(len(directions), -(-matrix.shape[1] // 24) * 8)  # a third, in whole 8-float steps
    return projected(matrix, centroids, np.ascontiguousarray(directions[:width].T, dtype=np.float32))


def projected(matrix: Any, centroids: Any, projection: Any) -> Reduction:
    """The rows and centroids projected by `projection` (dimensions x width)."""
    reduced = mapped_matrix(len(matrix), projection.shape[1])
    for start in range(0, len(matrix), WIDEN_ROWS):
        reduced[start : start + WIDEN_ROWS] = floats(matrix[start : start + WIDEN_ROWS]) @ projection
    return Reduction(projection, reduced, np.ascontiguousarray(centroids @ projection))


def _reduction_kept(reduction: Reduction, queries: Any, exact: Any, probed: Any, offsets: Any) -> float:
    """Of the `exact` neighbours of the tuning queries that lie in the lists each query probes, the share among
    the MIN_RERANK best of those lists' rows by the reduced scores: those a search (k=10) rescores, and finds."""
    held = kept = 0
    for query, wanted, lists in zip(reduction.project(queries), exact, probed):
        scores, rows = products(reduction.matrix, offsets[lists], offsets[lists + 1], query)
        wanted = wanted[np.isin(wanted, rows)]
        bar = -np.inf if len(scores) <= MIN_RERANK else np.partition(scores, -MIN_RERANK)[-MIN_RERANK]
        held += len(wanted)
        kept += int((reduction.matrix[wanted] @ query >= bar).sum())
    return round(kept / held, 4) if held else 1.0

