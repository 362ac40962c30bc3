"""The DuckDB store plugin: a knowledge base in one DuckDB file (`DuckDBStore`, store.py), with an in-memory
mirror of it (mirror/) that searches read."""

from duckgraph.plugins.duckdb.store import DuckDBStore
from duckgraph.ports import hookimpl

__all__ = ["DuckDBStore", "register_stores"]


@hookimpl
def register_stores(register):
    register("duckdb", DuckDBStore)
