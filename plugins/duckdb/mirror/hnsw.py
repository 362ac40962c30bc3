"""The HNSW mirror (store option vector_index = "hnsw"): a vss HNSW index in an in-memory DuckDB, built in the
background over a snapshot of a VectorIndex, for large vector sets."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.vector_tables import insert_vectors

np: Any = NumpyOnFirstUse(globals())


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


class HnswMirror:
    """An in-memory vss HNSW index over a snapshot of a VectorIndex.

    Built in the background; rows written after the snapshot are searched exactly and merged in (`VectorSearch`).
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
            insert_vectors(self._con, "v", ids, vectors, self.dimensions, extra={"ns": namespaces}, replace=False)
            self._con.execute("CREATE INDEX v_hnsw ON v USING HNSW (e) WITH (metric = 'cosine')")
            self.ready = True

    def search(self, query: np.ndarray, k: int, namespace_code: int) -> list[tuple[int, float]]:
        with self._lock:
            # The vector goes in as a literal of our own floats: a bound list parameter binds slowly.
            literal = "[" + ",".join(repr(float(x)) for x in query) + "]"
            rows = self._con.execute(
                f"SELECT id, ns, array_cosine_distance(e, {literal}::FLOAT[{self.dimensions}]) AS d "
                f"FROM v ORDER BY d LIMIT {int(k) * 4}"
            ).fetchall()
        return [(int(i), 1.0 - float(d)) for i, ns, d in rows if ns == namespace_code][:k]

    def close(self) -> None:
        self._con.close()

