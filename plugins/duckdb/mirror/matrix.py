"""Vector matrices as the mirror holds them: growable in place (anonymous memory mappings), in float32 or as
bfloat16 bit patterns, and the products a search computes over them (memory-bound, without BLAS)."""

from __future__ import annotations

import mmap
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse

np: Any = NumpyOnFirstUse(globals())

#: How an index holds its vectors: "float32", or "bfloat16" (each float's upper half, rounded to nearest even: half
#: the memory, and a cosine moves by at most ~3e-4). bfloat16 rows are widened back to float32 WIDEN_ROWS at a time
#: for the arithmetic, never a whole matrix at once.
PRECISIONS = ("float32", "bfloat16")
WIDEN_ROWS = 65_536


def matvec(matrix: Any, vector: Any, out: Any = None) -> Any:
    """matrix @ vector (float32, into `out` if given) without BLAS: a query's products are memory-bound, and
    OpenBLAS's threads (woken for every mid-sized product) cost more than the product on a busy machine."""
    if matrix.dtype == np.float32:
        return np.einsum("ij,j->i", matrix, vector, out=out)
    out = np.empty(len(matrix), dtype=np.float32) if out is None else out
    for start in range(0, len(matrix), WIDEN_ROWS):
        np.einsum("ij,j->i", floats(matrix[start : start + WIDEN_ROWS]), vector, out=out[start : start + WIDEN_ROWS])
    return out


def products(matrix: Any, starts: Any, ends: Any, vector: Any) -> tuple[Any, Any]:
    """matrix[start:end] @ vector for each block, one product per block into one preallocated array; and the rows."""
    lengths = ends - starts
    total = int(lengths.sum())
    scores = np.empty(total, dtype=np.float32)
    position = 0
    for start, end in zip(starts.tolist(), ends.tolist()):
        if end > start:
            matvec(matrix[start:end], vector, out=scores[position : position + end - start])
            position += end - start
    rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
    return scores, rows


def rows_dot(matrix: Any, rows: Any, vector: Any) -> Any:
    """matrix[rows] @ vector. np.take gathers scattered rows faster than fancy indexing, and the gather, not the
    product, is most of a search's similarity work."""
    return matvec(np.take(matrix, rows, axis=0), np.asarray(vector, dtype=np.float32))


def mapped_matrix(rows: int, dimensions: int, dtype: Any = None) -> Any:
    """A zeroed matrix (float32 unless told) in an anonymous private mapping (see `VectorIndex._grow`); a plain
    array where the platform has no such mappings."""
    dtype = np.dtype(np.float32 if dtype is None else dtype)
    if rows == 0 or not hasattr(mmap, "MAP_ANONYMOUS"):
        return np.zeros((rows, dimensions), dtype=dtype)
    mapping = mmap.mmap(-1, rows * dimensions * dtype.itemsize, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    ask_for_huge_pages(mapping)
    return matrix_view(mapping, dimensions, dtype)


def ask_for_huge_pages(mapping: mmap.mmap) -> None:
    """Transparent huge pages for a vector matrix, where the kernel offers them: a search reads thousands of rows
    scattered over gigabytes, and with 4 KB pages nearly every row costs a TLB miss. At most one 2 MB page past
    the last row written is allocated early."""
    try:
        mapping.madvise(mmap.MADV_HUGEPAGE)
    except (AttributeError, OSError):
        pass  # not Linux, or a kernel without them: 4 KB pages work the same, a little slower


def copied_matrix(matrix: Any, rows: int, keep: int) -> Any:
    """A new mapped matrix of `rows` rows holding the first `keep` rows of `matrix`."""
    grown = mapped_matrix(rows, matrix.shape[1], matrix.dtype)
    grown[:keep] = matrix[:keep]
    return grown


def matrix_view(mapping: mmap.mmap, dimensions: int, dtype: Any) -> Any:
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


def floats(rows: Any) -> Any:
    """Held rows as float32: float32 rows as they are, bfloat16 ones widened (exactly)."""
    if rows.dtype == np.float32:
        return rows
    # One pass into a fresh array: half the time of a copy to uint32 shifted in place.
    return np.left_shift(rows, 16, out=np.empty(rows.shape, dtype=np.uint32), dtype=np.uint32).view(np.float32)


def mapping_of(matrix: Any) -> mmap.mmap | None:
    base = matrix.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):  # what np.frombuffer keeps of the mapping
        base = base.obj
    return base if isinstance(base, mmap.mmap) else None


def resized(array: Any, rows: int) -> Any:
    """A copy of `array` with `rows` rows (the first rows kept; new rows uninitialised)."""
    grown = np.empty((rows, *array.shape[1:]), dtype=array.dtype)
    count = min(rows, len(array))
    grown[:count] = array[:count]
    return grown
