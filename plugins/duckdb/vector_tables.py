"""The vector side tables (node_vectors, chunk_vectors, edge_vectors): created when the file is bound to an
embedder (their width is the embedder's), how each kind is stored, and vectors in and out of them as Arrow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.plugins.duckdb.mirror.matrix import to_bfloat16
from duckgraph.plugins.duckdb.mirror.vectors import VectorIndex
from duckgraph.ports import StoreError

np: Any = NumpyOnFirstUse(globals())

#: Vector kind -> (vector table, its id column, the table of the things it embeds).
VECTOR_TABLES: dict[str, tuple[str, str, str]] = {
    "node": ("node_vectors", "node_id", "nodes"),
    "chunk": ("chunk_vectors", "chunk_id", "chunks"),
    "edge": ("edge_vectors", "edge_id", "edges"),
}
#: How each kind's vectors are held in memory and stored in a new file. The relations' are ~5 per entity, and only
#: scored against a query (a fact's similarity), never searched for recall: in bfloat16 they take half the memory
#: and half the file, go into DuckDB several times as fast (BLOBs of 2 bytes a dimension, not FLOAT[d]; measured
#: by contrib/bench/write.py), and a similarity moves by at most ~3e-4. Files written before they were stored so
#: keep FLOAT[d] columns (float32), which the store reads and writes as they are.
PRECISION = {"node": "float32", "chunk": "float32", "edge": "bfloat16"}


def create(con: Any, dimensions: int) -> None:
    """The vector tables of a file bound to an embedder of `dimensions` (those missing)."""
    # No primary key: the store writes an id's vector once (a new id plainly, another after deleting the old
    # vector, `insert_vectors`), and the key's index halved the insert rate. Files written with the key keep it.
    for kind, (table, id_column, _) in VECTOR_TABLES.items():
        column = "BLOB" if PRECISION[kind] == "bfloat16" else f"FLOAT[{int(dimensions)}]"
        con.execute(f"CREATE TABLE IF NOT EXISTS {table} ({id_column} BIGINT NOT NULL, embedding {column} NOT NULL)")


def stored_precisions(con: Any) -> dict[str, str]:
    """Kind -> "float32" (a FLOAT[d] column) or "bfloat16" (a BLOB column): how this file stores the vectors."""
    column_types = dict(con.execute(
        "SELECT table_name, data_type FROM duckdb_columns() WHERE database_name = current_database() "
        "AND schema_name = 'main' AND column_name = 'embedding'").fetchall())

    def stored(kind: str, table: str) -> str:
        if table not in column_types:  # not created yet (a read-only file): it would be as PRECISION says
            return PRECISION[kind]
        return "bfloat16" if column_types[table] == "BLOB" else "float32"

    return {kind: stored(kind, table) for kind, (table, _, _) in VECTOR_TABLES.items()}


def insert_vectors(
    con: Any, table: str, ids: Sequence[int], vectors: Sequence[Any], dimensions: int,
    extra: dict[str, Any] | None = None, *, replace: bool = True, precision: str = "float32",
) -> None:
    """Insert rows of (id, [extra columns,] vector) from numpy arrays; with `replace`, the ids' stored vectors
    are deleted first (a vector table has no key to replace by). Rows of ids known to be new should go in with
    replace=False, which skips that delete. The table's vector column is FLOAT[d] for `precision` "float32", a BLOB
    of bfloat16 bit patterns (2 bytes a dimension, little-endian) for "bfloat16".

    Vectors go in as one Arrow fixed-size-list column, which DuckDB reads as FLOAT[d] without converting: Python
    list parameters bind float by float, and a columnar view of one column per component put together with
    list_value takes twice the time (contrib/bench/write.py). bfloat16 ones go in as one Arrow fixed-size-binary
    column over the rounded matrix's bytes.
    """
    # Imported here: a slow import, which only writes need.
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
    if replace:
        id_column = next(column for name, column, _ in VECTOR_TABLES.values() if name == table)
        con.execute(f"DELETE FROM {table} WHERE {id_column} IN (SELECT unnest({sql.JSON_IDS % 1}))",
                    [sql.json_list(id_array.tolist())])
    # A relation, not a registered view: a view registered inside a transaction keeps its Arrow table alive until
    # the transaction ends (DuckDB's catalog keeps the dropped entry), so an import's vectors piled up.
    con.from_arrow(pa.table(columns)).insert_into(table)


def arrow_vectors(result: Any, table: str, dimensions: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of a query's `id` and `embedding` columns, read as Arrow (see `read_into`): float32
    vectors from a FLOAT[d] column, bfloat16 bit patterns (uint16) from a BLOB one (see `insert_vectors`)."""
    # Imported here, once there are vectors to read (a slow import).
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


def read_into(con: Any, index: VectorIndex, kind: str) -> None:
    """Every stored vector of a kind into `index`, block by block (no copy of the whole set but the index).

    Blocks are ranges of rowids, each read once as Arrow: its ids, and its vectors as one flat buffer of floats
    (fetched through numpy, a FLOAT[d] column arrives as one array object per row to stack, several times slower).
    """
    table, id_column, owner = VECTOR_TABLES[kind]
    namespaces = [row[0] for row in con.execute(f"SELECT DISTINCT namespace FROM {owner} ORDER BY 1").fetchall()]
    top = con.execute(f"SELECT max(id) FROM {owner}").fetchone()[0]
    code_of = np.full((top or 0) + 1, -1, dtype=np.int32)
    for code, namespace in enumerate(namespaces):
        ids = con.execute(f"SELECT id FROM {owner} WHERE namespace = ?", [namespace]).fetchnumpy()["id"]
        code_of[np.asarray(ids, dtype=np.int64)] = code
    count, last = con.execute(f"SELECT count(*), max(rowid) FROM {table}").fetchone()
    if last is None:
        return
    index.reserve(count)
    for start in range(0, last + 1, 65_536):
        ids, vectors = arrow_vectors(con.execute(
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


def read_by_id(con: Any, kind: str, ids: list[int], dimensions: int) -> dict[int, Any]:
    """The stored vectors of the given ids of a kind (float32 or bfloat16 bit patterns, as the file holds them).
    The range lets DuckDB skip the row groups without them."""
    table, id_column, _ = VECTOR_TABLES[kind]
    wanted, params = sql.rows(3, id=("BIGINT", ids))
    found, vectors = arrow_vectors(con.execute(
        f"SELECT {id_column} AS id, embedding FROM {table} WHERE {id_column} BETWEEN $1 AND $2 "
        f"AND {id_column} IN (SELECT id FROM {wanted})", [min(ids), max(ids), *params]), table, dimensions)
    return dict(zip(found.tolist(), vectors))
