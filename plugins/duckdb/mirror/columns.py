"""Growable numpy columns and times as numpy values: what the graph mirror's columns share."""

from __future__ import annotations

from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse

np: Any = NumpyOnFirstUse(globals())


def grow(array: Any, size: int, fill: Any) -> Any:
    if size <= len(array):
        return array
    grown = np.empty(max(size, int(1.5 * len(array)) + 1024), dtype=array.dtype)
    grown[: len(array)] = array
    grown[len(array) :] = fill
    return grown


def nat() -> Any:
    return np.datetime64("NaT", "us")


def time_value(value: Any) -> Any:
    """A naive UTC datetime (or None) as numpy datetime64[us]."""
    return nat() if value is None else np.datetime64(value, "us")
