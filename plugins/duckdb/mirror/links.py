"""int -> ints link tables of the graph mirror (node -> edges, node -> chunks, chunk -> nodes): a CSR built from
pairs, plus the pairs added since in a dict, rebuilt once those grow."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse

np: Any = NumpyOnFirstUse(globals())

#: A CSR (adjacency, mentions) is rebuilt once more pairs than this, and than half the pairs it was built from,
#: were added since: until then they sit in a dict, read key by key.
LINKS_REBUILD_MIN = 100_000


class LinkTable:
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
