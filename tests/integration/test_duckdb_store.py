"""The DuckDB store on real files: schema, embedder binding, atomic writes, the derived vector index, crash
safety and the vss/HNSW path."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pytest

from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.mirror.hnsw import vss_extension_path
from duckgraph.plugins.duckdb.mirror.matrix import to_bfloat16
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION
from duckgraph.plugins.duckdb import settings
from duckgraph.plugins.duckdb.settings import default_memory_limit
from duckgraph.ports import (
    ChunkRecord,
    ConfigError,
    DocumentRecord,
    EdgeWrite,
    EmbedderMismatchError,
    InvalidInputError,
    NodeRecord,
    Snapshot,
    StoreError,
    WriteBatch,
    entity_key,
    normalize,
)
from tests.fakes import HashingEmbedder
from tests.stored import file_meta

REPO_ROOT = Path(__file__).resolve().parents[2]
DIMS = 8


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIMS, dtype=np.float32)
    vector[: len(values)] = values
    return normalize(vector)


def node(name: str, embedding: np.ndarray | None = None, namespace: str = "default") -> NodeRecord:
    return NodeRecord(namespace=namespace, key=entity_key(name), name=name, type="Thing", embedding=embedding)


@pytest.fixture
def store(db_path: Path):
    s = DuckDBStore(db_path)
    s.open()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def bound_store(store: DuckDBStore) -> DuckDBStore:
    store.bind_embedder("test:unit", DIMS)
    return store


# -- 1. schema ---------------------------------------------------------------------------------------------


def test_fresh_file_gets_meta_with_schema_version(db_path: Path):
    store = DuckDBStore(db_path)
    store.open()
    assert store.health()["schema_version"] == SCHEMA_VERSION
    store.close()
    store.close()  # safe twice

    meta = file_meta(db_path)
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert "created_at" in meta


def test_reopening_keeps_the_data(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])

    store = DuckDBStore(db_path)
    store.open()
    try:
        assert store.health()["schema_version"] == SCHEMA_VERSION
        assert store.embedder_info() == ("test:fake-hashing", 64)
        assert [n.name for n in store.find_nodes("default", ["ada lovelace"])] == ["Ada Lovelace"]
    finally:
        store.close()


def test_foreign_duckdb_file_is_refused_naming_the_file(tmp_path: Path):
    path = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE x (a INTEGER)")
    con.execute("INSERT INTO x VALUES (1)")
    con.close()

    with pytest.raises(StoreError) as err:
        DuckDBStore(path).open()
    message = str(err.value)
    assert str(path) in message
    assert "not a duckgraph knowledge base" in message

    # The failed open released the file and did not touch the foreign table.
    con = duckdb.connect(str(path))
    try:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert tables == {"x"}
    finally:
        con.close()


def test_newer_schema_version_asks_for_an_upgrade(db_path: Path):
    store = DuckDBStore(db_path)
    store.open()
    store.close()
    con = duckdb.connect(str(db_path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()

    with pytest.raises(StoreError) as err:
        DuckDBStore(db_path).open()
    message = str(err.value)
    assert str(db_path) in message
    assert str(SCHEMA_VERSION + 1) in message
    assert "upgrade" in message


def test_non_duckdb_file_is_refused(tmp_path: Path):
    path = tmp_path / "noise.duckdb"
    path.write_bytes(np.random.default_rng(7).bytes(16_384))

    with pytest.raises(StoreError) as err:
        DuckDBStore(path).open()
    assert path.name in str(err.value)


# -- 2. embedder binding -----------------------------------------------------------------------------------


def test_embedder_is_bound_once_and_survives_reopen(db_path: Path):
    store = DuckDBStore(db_path)
    store.open()
    assert store.embedder_info() is None
    store.bind_embedder("test:a", DIMS)
    store.bind_embedder("test:a", DIMS)  # the same embedder again is fine
    assert store.embedder_info() == ("test:a", DIMS)
    store.close()

    store.open()
    try:
        assert store.embedder_info() == ("test:a", DIMS)
        store.bind_embedder("test:a", DIMS)
        assert store.health()["embedder"] == {"id": "test:a", "dimensions": DIMS}
    finally:
        store.close()


def test_a_search_of_a_new_file_leaves_the_embedder_to_choose_with_the_first_write(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        found = kb.search("Who is Ada Lovelace?")
        assert (found.nodes, found.passages) == ([], []) and "holds nothing yet" in found.text
        assert kb.store.embedder_info() is None
    # Another embedder than the one that searched: the file held nothing, so it may still be chosen.
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(dimensions=32, name="other")) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        assert kb.store.embedder_info() == ("test:other", 32)
        assert [n.name for n in kb.search("Ada Lovelace").nodes] == ["Ada Lovelace"]


@pytest.mark.parametrize("other", [("other:b", DIMS), ("test:a", 2 * DIMS)], ids=["other-id", "other-dims"])
def test_reopening_with_another_embedder_is_refused(db_path: Path, other: tuple[str, int]):
    store = DuckDBStore(db_path)
    store.open()
    store.bind_embedder("test:a", DIMS)
    store.write(WriteBatch(nodes=[node("A", unit(1.0))]))  # a file without vectors may be bound again
    store.close()

    store = DuckDBStore(db_path)
    store.open()
    try:
        with pytest.raises(EmbedderMismatchError) as err:
            store.bind_embedder(*other)
        message = str(err.value)
        assert str(db_path) in message
        assert "'test:a'" in message and f"{DIMS}" in message
        assert repr(other[0]) in message and f"{other[1]} dimensions" in message
        # Actionable: says what to do about it (for one embedder that now gives another width, not to configure
        # what is configured already).
        if other[0] == "test:a":
            assert f"set it back to give {DIMS}" in message and "--re-embed" in message
            assert "Configure" not in message
        else:
            assert "Select the plugin that gives 'test:a' again" in message and "the id it registers" in message and "--db" in message
        assert store.embedder_info() == ("test:a", DIMS)
    finally:
        store.close()


def test_vector_of_the_wrong_width_is_refused(bound_store: DuckDBStore):
    with pytest.raises(EmbedderMismatchError, match=f"{DIMS}-dimensional"):
        bound_store.write(WriteBatch(nodes=[node("A", np.ones(DIMS + 1, dtype=np.float32))]))
    assert bound_store.stats()["nodes"] == 0


# -- 4. atomic batches (store level) -----------------------------------------------------------------------


def test_batch_with_a_missing_edge_endpoint_rolls_back_everything(bound_store: DuckDBStore):
    bound_store.write(WriteBatch(
        nodes=[node("Alpha", unit(1, 0)), node("Beta", unit(0, 1))],
        edges=[EdgeWrite("default", "alpha", "beta", "KNOWS")],
    ))
    query = unit(1, 1, 1)
    stats_before = bound_store.stats()
    search_before = bound_store.vector_search("node", query, 10, "default")
    vectors_before = bound_store.health()["vectors"]

    bad = WriteBatch(
        # Gamma is the best match for the query: if its vector leaked into the index, the search would change.
        nodes=[node("Gamma", query), node("Alpha", unit(0, 0, 1))],
        edges=[EdgeWrite("default", "alpha", "beta", "KNOWS"), EdgeWrite("default", "gamma", "nobody", "KNOWS")],
    )
    bad.nodes[1].id = bound_store.find_nodes("default", ["alpha"])[0].id
    with pytest.raises(InvalidInputError) as err:
        bound_store.write(bad)
    assert "edges[1]" in str(err.value) and "'nobody'" in str(err.value)

    assert bound_store.stats() == stats_before
    assert bound_store.find_nodes("default", ["gamma"]) == []
    assert bound_store.health()["vectors"] == vectors_before
    assert bound_store.vector_search("node", query, 10, "default") == search_before


def test_failed_batch_can_be_fixed_and_retried(bound_store: DuckDBStore):
    """Ids handed out inside a rolled-back transaction must not stick to the caller's records."""
    batch = WriteBatch(nodes=[node("Alpha", unit(1))], edges=[EdgeWrite("default", "alpha", "nobody", "KNOWS")])
    with pytest.raises(InvalidInputError):
        bound_store.write(batch)
    assert [n.id for n in batch.nodes] == [None]

    batch.edges = []
    summary = bound_store.write(batch)
    assert (summary.nodes_created, summary.nodes_updated) == (1, 0)
    stored = bound_store.find_nodes("default", ["alpha"])
    assert [n.id for n in stored] == [summary.node_ids["alpha"]]
    assert bound_store.health()["vectors"]["node"] == bound_store.stats()["nodes"] == 1
    assert bound_store.vector_search("node", unit(1), 5, "default")[0][0] == stored[0].id


def test_documents_are_replaced_and_deleted_before_any_embedder_is_bound(store: DuckDBStore):
    # No embedder bound: the file has no vector tables yet, and dropping the old passages must not need them.
    def document(text: str) -> WriteBatch:
        return WriteBatch(documents=[DocumentRecord(id="a", namespace="default", text=text, title="")],
                          chunks=[ChunkRecord(document_id="a", ordinal=0, text=text)])

    store.write(document("first text"))
    store.write(document("second text"))
    assert store.embedder_info() is None
    assert [c.text for c in store.document_chunks("default", ["a"])] == ["second text"]
    assert store.write(WriteBatch(delete_documents=[("default", "a")])).documents_deleted == 1
    assert store.stats()["chunks"] == 0


# -- 7. the vector index is derived data -------------------------------------------------------------------


def _snapshot(kb: KnowledgeBase, queries: list[str]) -> dict:
    out = {}
    for kind in ("node", "chunk", "edge"):
        for q in queries:
            hits = kb.store.vector_search(kind, kb.embedder.embed_query(q), 8, "default")
            out[(kind, q)] = [(i, round(s, 5)) for i, s in hits]
    return out


def test_vector_index_is_rebuilt_identically_on_reopen(db_path: Path):
    queries = ["curie radium", "einstein relativity", "cooking pasta", "volcano lava"]
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), chunk_chars=200, chunk_overlap=0) as kb:
        kb.add_documents([
            DocumentInput(id="d1", text="Marie Curie discovered radium and polonium. " * 8),
            DocumentInput(id="d2", text="Volcanoes erupt lava and ash over the island. " * 8),
        ])
        kb.add_knowledge_graph(
            [NodeInput(name="Marie Curie", type="Person", description="physicist who studied radium"),
             NodeInput(name="Albert Einstein", type="Person", description="relativity"),
             NodeInput(name="Radium", type="Element")],
            [EdgeInput(source="Marie Curie", target="Radium", type="discovered")],
        )
        # Replace d2: its old chunk vectors must not come back after reopening.
        kb.add_documents([DocumentInput(id="d2", text="Pasta is cooked in salted boiling water. " * 8)])
        kb.add_knowledge_graph([NodeInput(name="Radium", type="Element", description="radioactive metal")], [])
        before = _snapshot(kb, queries)
        health_before = kb.health()["vectors"]
        stats = kb.stats()
    assert health_before == {"node": stats["nodes"], "chunk": stats["chunks"], "edge": stats["edges"]}

    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert kb.health()["vectors"] == health_before
        assert _snapshot(kb, queries) == before


def test_open_reads_every_vector_back_exactly_across_read_blocks(db_path: Path):
    """Open reads the vectors in blocks of 65,536 rows, unnested into one flat column per block: every vector
    comes back bit for bit, whichever block it is in, and a vector whose node row is gone is skipped."""
    # The second block spans DuckDB's first two row groups (122,880 rows each), which a parallel scan reads apart;
    # the orphan sits in it, past that boundary.
    rows, orphan = 140_000, 125_000
    vectors = np.random.default_rng(3).standard_normal((rows, DIMS)).astype(np.float32)
    store = DuckDBStore(db_path)
    store.open()
    try:
        store.bind_embedder("test:unit", DIMS)
        store._con.execute(
            "INSERT INTO nodes (id, namespace, key, name, type, created_at, updated_at) SELECT i, 'default', "
            "'n' || i, 'N' || i, 'Thing', now(), now() FROM range(?) t(i) WHERE i <> ?", [rows, orphan])
        store._con.register("incoming", {"id": np.arange(rows), **{f"c{j}": vectors[:, j] for j in range(DIMS)}})
        components = ", ".join(f"c{j}" for j in range(DIMS))
        store._con.execute(f"INSERT INTO node_vectors SELECT id, list_value({components})::FLOAT[{DIMS}] FROM incoming")
    finally:
        store.close()

    reopened = DuckDBStore(db_path)
    reopened.open()
    try:
        assert reopened.health()["vectors"]["node"] == rows - 1
        back = reopened.get_vectors("node", range(rows))
        assert orphan not in back and len(back) == rows - 1
        for node_id in (0, 65_535, 65_536, 122_879, 122_880, orphan - 1, orphan + 1, 131_072, rows - 1):
            assert np.array_equal(back[node_id], vectors[node_id])
        stacked = np.stack([back[i] for i in range(rows) if i != orphan])
        assert np.array_equal(stacked, np.delete(vectors, orphan, axis=0))
    finally:
        reopened.close()


def _vector_compression(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {m for (m,) in con.execute(
            "SELECT DISTINCT compression FROM pragma_storage_info('node_vectors') WHERE column_name = 'embedding' "
            "AND segment_type = 'FLOAT'").fetchall()}
    finally:
        con.close()


@pytest.mark.parametrize("written_by", ["this version", "an older version"])
def test_vectors_are_written_without_alp_compression(db_path: Path, tmp_path: Path, written_by: str):
    """The store's writes leave DuckDB's ALP / ALPRD float compression out (it slows every checkpoint and read of
    embeddings, and bulk-loaded files came out larger with it): the file holds the vectors uncompressed, and they
    read back bit for bit. Vectors an older version wrote compressed stay readable, and a backup writes them
    uncompressed."""
    rows = 5_000
    vectors = normalize(np.random.default_rng(5).standard_normal((rows, DIMS)).astype(np.float32))
    store = DuckDBStore(db_path)
    store.open()
    try:
        if written_by == "an older version":  # DuckDB's default compression, as before the store turned it off
            store._con.execute("SET disabled_compression_methods = ''")
        store.bind_embedder("test:unit", DIMS)
        store.write(WriteBatch(nodes=[node(f"N{i}", vectors[i]) for i in range(rows)]))
        id_of = {n.key: n.id for n in store.find_nodes("default", [entity_key(f"N{i}") for i in range(rows)])}
        ids = [id_of[entity_key(f"N{i}")] for i in range(rows)]
    finally:
        store.close()  # checkpoints: the vectors go from the log into the file, compressed as the settings say
    assert _vector_compression(db_path) == {"Uncompressed" if written_by == "this version" else "ALPRD"}

    copy = tmp_path / "backup.duckdb"
    reopened = DuckDBStore(db_path)
    reopened.open()
    try:
        back = reopened.get_vectors("node", ids)
        assert all(np.array_equal(back[ids[i]], vectors[i]) for i in range(rows))
        reopened.backup(copy)
    finally:
        reopened.close()
    assert _vector_compression(copy) == {"Uncompressed"}


def test_written_vectors_are_stored_bit_for_bit(bound_store: DuckDBStore):
    vectors = np.random.default_rng(11).standard_normal((50, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = bound_store.write(WriteBatch(nodes=[node(f"N{i}", v) for i, v in enumerate(vectors)])).node_ids
    stored = dict(bound_store._con.execute("SELECT node_id, embedding FROM node_vectors").fetchall())
    assert len(stored) == len(vectors)
    for i, vector in enumerate(vectors):
        assert np.array_equal(np.asarray(stored[ids[entity_key(f"N{i}")]], dtype=np.float32), vector)


@pytest.mark.parametrize("file", ["new", "older"])
def test_relation_vectors_are_held_and_stored_in_bfloat16_and_an_older_file_s_float32_ones_are_kept(
        db_path: Path, file: str):
    """The relations' vectors are held in memory and stored in a new file rounded to bfloat16 (half the bytes), so
    their similarities move by at most a rounding. A file written before stores them as float32 (FLOAT[d]); it is
    read and written as it is, and `get_vectors` (what an export writes) gives its own floats."""
    rng = np.random.default_rng(12)
    vectors = normalize(rng.standard_normal((300, DIMS)).astype(np.float32))
    rounded = (to_bfloat16(vectors).astype(np.uint32) << 16).view(np.float32)
    query = vectors[7]
    store = DuckDBStore(db_path)
    store.open()
    try:
        if file == "older":  # as such a file was created when the embedder was bound
            store._con.execute(f"CREATE TABLE edge_vectors (edge_id BIGINT NOT NULL, embedding FLOAT[{DIMS}] NOT NULL)")
        store.bind_embedder("test:unit", DIMS)
        nodes = [node(f"N{i}", vectors[0]) for i in range(301)]
        edges = [EdgeWrite(namespace="default", source_key="n0", target_key=f"n{i + 1}", type="LINKS",
                           embedding=vectors[i]) for i in range(150)]
        node_ids = store.write(WriteBatch(nodes=nodes, edges=edges)).node_ids
        store.close()
        store.open()  # the first half read back from the file, the second written into what was read
        store.write(WriteBatch(edges=[EdgeWrite(namespace="default", source_key="n0", target_key=f"n{i + 1}",
                                                type="LINKS", embedding=vectors[i]) for i in range(150, 300)]))
        edge_of_target = dict(store._con.execute("SELECT target_id, id FROM edges").fetchall())
        edge_ids = [edge_of_target[node_ids[f"n{i + 1}"]] for i in range(300)]
        column = store._con.execute("SELECT data_type FROM duckdb_columns() WHERE table_name = 'edge_vectors' "
                                    "AND column_name = 'embedding'").fetchone()[0]
        health = store.health()
        back = store.get_vectors("edge", [*edge_ids, 99_999])
        held = store.similarity_array("edge", np.asarray(edge_ids), query)
    finally:
        store.close()
    assert "edge 0.0 in bfloat16" in health["vectors_in_memory"]
    assert sorted(back) == sorted(edge_ids)
    assert np.array_equal(np.vstack([back[edge_id] for edge_id in edge_ids]), vectors if file == "older" else rounded)
    assert np.allclose(held, rounded @ query, atol=1e-6)
    assert np.abs(held - vectors @ query).max() <= 2e-3 and not np.array_equal(held, vectors @ query)
    if file == "new":
        assert column == "BLOB" and health["vectors_in_file"] == "node float32, chunk float32, edge bfloat16"
    else:
        assert column == f"FLOAT[{DIMS}]"
        assert health["vectors_in_file"].startswith("node float32, chunk float32, edge float32; written before edge "
                                                    "vectors were stored in bfloat16")


def test_a_damaged_relation_vector_is_refused_at_open(db_path: Path):
    store = DuckDBStore(db_path)
    store.open()
    try:
        store.bind_embedder("test:unit", DIMS)
        store.write(WriteBatch(nodes=[node("Ada", unit(1)), node("Bob", unit(0, 1))],
                               edges=[EdgeWrite(namespace="default", source_key="ada", target_key="bob", type="KNOWS",
                                                embedding=unit(0, 0, 1))]))
        store._con.execute("UPDATE edge_vectors SET embedding = '\\x00\\x01'::BLOB")  # 2 bytes, not 2 a dimension
    finally:
        store.close()
    with pytest.raises(StoreError, match=f"edge_vectors: the vectors of 1 rows are not all of {DIMS} dimensions"):
        DuckDBStore(db_path).open()


@pytest.mark.parametrize("keyed", [False, True], ids=["new file", "file written with keyed vector tables"])
def test_a_rewritten_vector_replaces_the_stored_one(db_path: Path, keyed: bool):
    store = DuckDBStore(db_path)
    store.open()
    try:
        if keyed:  # files written before the vector tables lost their primary key have it
            for table, column in (("node_vectors", "node_id"), ("chunk_vectors", "chunk_id"),
                                  ("edge_vectors", "edge_id")):
                store._con.execute(
                    f"CREATE TABLE {table} ({column} BIGINT PRIMARY KEY, embedding FLOAT[{DIMS}] NOT NULL)")
        store.bind_embedder("test:unit", DIMS)
        ids = store.write(WriteBatch(nodes=[node("Ada", unit(1)), node("Bob", unit(0, 1))],
                                     edges=[EdgeWrite(namespace="default", source_key="ada", target_key="bob",
                                                      type="KNOWS", embedding=unit(0, 0, 1))])).node_ids
        ada = store.get_nodes([ids["ada"]])[0]
        ada.embedding = unit(0, 0, 0, 1)
        store.write(WriteBatch(nodes=[ada], edges=[EdgeWrite(namespace="default", source_key="ada", target_key="bob",
                                                             type="KNOWS", embedding=unit(0, 0, 0, 0, 1))]))
        counts = store._con.execute(
            "SELECT (SELECT count(*) FROM node_vectors), (SELECT count(*) FROM edge_vectors)").fetchone()
        assert counts == (2, 1)
        store.close()
        store.open()
        assert store.vector_search("node", unit(0, 0, 0, 1), 1, "default")[0] == (ids["ada"], pytest.approx(1.0))
        assert store.vector_search("edge", unit(0, 0, 0, 0, 1), 1, "default")[0][1] == pytest.approx(1.0)
        keys = store._con.execute("SELECT count(*) FROM duckdb_constraints() WHERE table_name = 'node_vectors' "
                                  "AND constraint_type = 'PRIMARY KEY'").fetchone()[0]
        assert keys == (1 if keyed else 0)
    finally:
        store.close()


CRASH_WRITER = textwrap.dedent("""
    import sys
    from duckgraph.core.domain.model import EdgeInput, NodeInput
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder

    path, size = sys.argv[1], int(sys.argv[2])
    kb = KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()

    def write(i):
        nodes = [NodeInput(name=f"entity {i} {j}", type="Thing", description=f"item {j} of batch {i}")
                 for j in range(size)]
        kb.add_knowledge_graph(nodes, [EdgeInput(source=f"entity {i} 0", target=f"entity {i} 1", type="next")])

    write(0)
    print("ready", flush=True)
    i = 1
    while True:
        write(i)
        i += 1
""")


def test_killed_writer_leaves_a_consistent_file(db_path: Path):
    batch_size = 7
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_WRITER, str(db_path), str(batch_size)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", f"writer did not start: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        time.sleep(1.0)
        assert proc.poll() is None, f"writer died on its own: {proc.stderr.read()}"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        stats = kb.stats()
        health = kb.health()
        assert stats["nodes"] >= batch_size
        assert stats["nodes"] % batch_size == 0, stats  # every batch all or nothing
        assert stats["edges"] == stats["nodes"] // batch_size  # one edge per batch
        assert health["vectors"]["node"] == stats["nodes"]
        assert health["vectors"]["edge"] == stats["edges"]
        hits = kb.store.vector_search("node", kb.embedder.embed_query("item 3 of batch 0"), 5, "default")
        assert len(hits) == 5
        names = {n.id: n.name for n in kb.store.get_nodes([i for i, _ in hits])}
        assert names[hits[0][0]] == "entity 0 3"
        # The file is still writable.
        kb.add_knowledge_graph([NodeInput(name="after the crash", type="Thing")], [])
        assert kb.stats()["nodes"] == stats["nodes"] + 1


# -- 8. vss and HNSW ---------------------------------------------------------------------------------------


def test_vss_is_loaded_by_default(bound_store: DuckDBStore):
    vss = bound_store.health()["vss"]
    assert vss["loaded"] is True
    assert vss["problem"] is None
    assert vss["path"] == str(vss_extension_path())
    assert "duckdb_extension_vss" in vss["path"] and Path(vss["path"]).is_file()
    mode = bound_store.health()["vector_search"]["node"]
    assert mode.startswith("exact scan") and "below ann_min_rows" in mode


def test_without_vss_search_is_an_exact_scan_and_still_works(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path, use_vss=False), HashingEmbedder()) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Marie Curie", type="Person", description="physicist"),
             NodeInput(name="Radium", type="Element")],
            [EdgeInput(source="Marie Curie", target="Radium", type="discovered")],
        )
        health = kb.health()
        assert health["vss"]["loaded"] is False
        assert health["vss"]["path"] is None
        for kind in ("node", "chunk", "edge"):
            mode = health["vector_search"][kind]
            assert mode.startswith("exact scan")
            assert "use_vss = false" in mode
        result = kb.search("Marie Curie")
        assert result.anchors[0].name == "Marie Curie"
        hits = kb.store.vector_search("node", kb.embedder.embed_query("Radium (Element)"), 2, "default")
        assert [n.name for n in kb.store.get_nodes([hits[0][0]])] == ["Radium"]


def _sentences(count: int, seed: int) -> list[str]:
    subjects = ["The old fisherman", "A young violinist", "My neighbour's cat", "The city council", "An astronaut",
                "The chemistry teacher", "A retired pilot", "The bakery owner", "A nervous student", "The museum guard"]
    verbs = ["repaired", "painted", "sold", "studied", "photographed", "lost", "borrowed", "described", "hid",
             "measured"]
    objects = ["a wooden boat", "the broken telescope", "three silver coins", "an ancient map", "the red bicycle",
               "a jar of honey", "the stone bridge", "a crate of oranges", "the antique clock", "a wool blanket"]
    places = ["near the harbour", "in the desert", "during the storm", "at the train station", "on the mountain",
              "before breakfast", "in the library", "under the bridge", "at midnight", "in the greenhouse"]
    combos = list(itertools.product(subjects, verbs, objects, places))
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(combos), size=count, replace=False)
    return [" ".join(combos[i]) + "." for i in picks]


def _write_vectors(store: DuckDBStore, names: list[str], vectors: np.ndarray) -> dict[str, int]:
    return store.write(WriteBatch(nodes=[node(n, v) for n, v in zip(names, vectors)])).node_ids


def _wait_for_hnsw(store: DuckDBStore, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.health()["vector_search"]["node"].startswith("hnsw"):
            return
        time.sleep(0.05)
    pytest.fail(f"the HNSW index was not ready after {timeout} s: {store.health()['vector_search']}")


@pytest.mark.model
def test_hnsw_recall_and_fresh_rows(db_path: Path, minilm):
    texts = _sentences(320, seed=1)
    stored, fresh_texts, queries = texts[:300], texts[300:], _sentences(20, seed=2)
    vectors = minilm.embed_documents(stored + fresh_texts)
    query_vectors = minilm.embed_documents(queries)

    hnsw = DuckDBStore(db_path, vector_index="hnsw", hnsw_min_rows=1)
    # The exact reference reads the same file: same data, same ids, searched by an exact scan.
    exact = DuckDBStore(db_path, use_vss=False)
    try:
        hnsw.open()
        hnsw.bind_embedder(minilm.id, minilm.dimensions)
        ids = _write_vectors(hnsw, stored, vectors[:300])
        _wait_for_hnsw(hnsw)
        exact.open()
        assert exact.health()["vector_search"]["node"].startswith("exact scan")
        assert exact.health()["vectors"]["node"] == 300
        # The mirror really answers through the vss index, not a scan.
        plan = hnsw._vectors._hnsw["node"]._con.execute(
            f"EXPLAIN SELECT id FROM v ORDER BY array_cosine_distance(e, $1::FLOAT[{minilm.dimensions}]) LIMIT 10",
            [query_vectors[0].tolist()],
        ).fetchall()
        assert "HNSW_INDEX_SCAN" in "".join(row[1] for row in plan)

        recalls = []
        for q in query_vectors:
            got = [i for i, _ in hnsw.vector_search("node", q, 10, "default")]
            want = [i for i, _ in exact.vector_search("node", q, 10, "default")]
            assert len(got) == len(want) == 10
            recalls.append(len(set(got) & set(want)) / 10)
        assert np.mean(recalls) >= 0.9, recalls

        # Rows written after the HNSW snapshot are searched exactly and merged in.
        ids.update(_write_vectors(hnsw, fresh_texts, vectors[300:]))
        assert hnsw.health()["vector_search"]["node"].startswith("hnsw")
        assert hnsw.health()["vectors"]["node"] == 320
        exact.close()
        exact.open()
        assert exact.health()["vectors"]["node"] == 320
        for text, vector in zip(fresh_texts, vectors[300:]):
            hits = hnsw.vector_search("node", vector, 10, "default")
            assert hits[0][0] == ids[entity_key(text)]
            assert hits[0][1] == pytest.approx(1.0, abs=1e-4)
            exact_hits = exact.vector_search("node", vector, 10, "default")
            assert len({i for i, _ in hits} & {i for i, _ in exact_hits}) >= 9
    finally:
        exact.close()
        hnsw.close()


def _buffer_pool_limit(con) -> float:
    """DuckDB's buffer pool limit in bytes, as its buffer manager reports it (not the setting's text)."""
    value, unit = con.execute("PRAGMA database_size").fetchall()[0][-1].split()
    return float(value) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def test_open_leaves_duckdb_the_store_memory_limit(db_path: Path):
    # Open lowers the limit for a moment so that DuckDB drops the pages it read; a buffer pool left at the low
    # limit makes a later commit fail once the indexes outgrow it.
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=f"Entity {i}", type="Thing") for i in range(50)],
                               [EdgeInput(source="Entity 0", target=f"Entity {i}", type="LINKS") for i in range(1, 50)])
    for option, expected in ((None, default_memory_limit()), ("1.5GiB", "1.5GiB")):
        store = DuckDBStore(db_path, memory_limit=option)
        store.open()
        try:
            assert _buffer_pool_limit(store._con) == pytest.approx(float(expected[:-3]) * 2**30, rel=0.02)
            assert store.health()["memory_limit"].startswith(f"{expected} for DuckDB's cache")
        finally:
            store.close()
    # The default leaves most of the machine to the vectors and the graph the store holds itself.
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert 2**30 <= float(default_memory_limit()[:-3]) * 2**30 <= max(2**30, 0.26 * total)


def test_health_says_what_the_vectors_take_in_memory(db_path: Path):
    store = DuckDBStore(db_path, ann_min_rows=40)
    with KnowledgeBase(store, HashingEmbedder(4096)) as kb:
        assert store.health()["vectors_in_memory"] == "none (no embedder bound yet)"
        kb.add_knowledge_graph([NodeInput(name=f"Entity {i}", type="Thing") for i in range(64)],
                               [EdgeInput(source="Entity 0", target=f"Entity {i}", type="LINKS") for i in range(1, 33)])
        # 64 node and 32 edge vectors of 4,096 dimensions: 1 MB in float32 and 0.25 MB in bfloat16; only the nodes
        # are past ann_min_rows.
        assert store.health()["vectors_in_memory"] == (
            "1.2 MB (node 1.0, chunk 0.0, edge 0.2 in bfloat16); building the node index holds 1.0 MB more while it "
            "runs")
    with KnowledgeBase(DuckDBStore(db_path, vector_index="exact"), HashingEmbedder(4096)) as kb:
        assert kb.store.health()["vectors_in_memory"] == "1.2 MB (node 1.0, chunk 0.0, edge 0.2 in bfloat16)"


@pytest.mark.parametrize("value", ["lots", "2", 2, "80%"])
def test_an_invalid_memory_limit_is_refused(db_path: Path, value):
    with pytest.raises(ConfigError, match="store option memory_limit must be a size such as"):
        DuckDBStore(db_path, memory_limit=value)
    assert not db_path.exists()


# -- passage texts in memory -----------------------------------------------------------------------------------


def _documents(kb: KnowledgeBase, texts: dict[str, str]) -> None:
    kb.add_documents([DocumentInput(id=doc_id, title=doc_id.upper(), text=text) for doc_id, text in texts.items()])


def _all_chunks(store: DuckDBStore) -> list:
    ids = [row[0] for row in store._db.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
    return sorted(store.get_chunks(ids), key=lambda c: c.id)


def test_passage_texts_are_read_from_memory_and_match_the_file(db_path: Path, tmp_path: Path):
    texts = {"a": "Ada Lovelace wrote the first program. " * 30, "b": "Ünïcödé text, and more of it. " * 5}
    in_memory = KnowledgeBase(DuckDBStore(db_path), HashingEmbedder())
    from_file = KnowledgeBase(DuckDBStore(tmp_path / "other.duckdb", passage_texts_mb=0), HashingEmbedder())
    with in_memory, from_file:
        for kb in (in_memory, from_file):
            _documents(kb, texts)
            _documents(kb, {"a": "Ada Lovelace, replaced."})  # the old chunks go, the new one comes
        assert in_memory.health()["passage_texts"].startswith("in memory (0.0 MB, up to passage_texts_mb=256)")
        assert from_file.health()["passage_texts"] == "read from the file (more than passage_texts_mb=0 MB of them)"
        held = _all_chunks(in_memory.store)
        assert [(c.document_id, c.ordinal, c.text) for c in held] == [
            (c.document_id, c.ordinal, c.text) for c in _all_chunks(from_file.store)]
        assert {c.document_id for c in held} == {"a", "b"} and "Ada Lovelace, replaced." in {c.text for c in held}
        in_memory.store._db.execute("UPDATE chunks SET text = 'changed in the file only'")
        assert "changed in the file only" not in {c.text for c in _all_chunks(in_memory.store)}  # from memory
        assert in_memory.store.get_chunks([10**9]) == []
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as reopened:
        assert {c.text for c in _all_chunks(reopened.store)} == {"changed in the file only"}


def test_passage_texts_beyond_the_budget_are_read_from_the_file(db_path: Path):
    budget_mb = 2_000 / 2**20  # 2,000 bytes
    with KnowledgeBase(DuckDBStore(db_path, passage_texts_mb=budget_mb), HashingEmbedder()) as kb:
        _documents(kb, {"small": "Short enough."})
        assert kb.health()["passage_texts"].startswith("in memory")
        _documents(kb, {"large": "Grace Hopper wrote a compiler. " * 100})  # 3,000 bytes: over the budget
        assert kb.health()["passage_texts"].startswith("read from the file")
        kb.store._db.execute("UPDATE chunks SET text = 'Changed in the file. ' || text")
        assert all(c.text.startswith("Changed in the file. ") for c in _all_chunks(kb.store))
        assert kb.search("compiler").passages[0].text.startswith("Changed in the file. ")
    with KnowledgeBase(DuckDBStore(db_path, passage_texts_mb=budget_mb), HashingEmbedder()) as kb:
        assert kb.health()["passage_texts"].startswith("read from the file")  # already over it at open


@pytest.mark.parametrize("budget", ["64", -1, True])
def test_a_passage_text_budget_that_is_not_a_size_is_refused(db_path: Path, budget):
    with pytest.raises(ConfigError, match="store option passage_texts_mb must be a number of megabytes"):
        DuckDBStore(db_path, passage_texts_mb=budget)
    assert not db_path.exists()


@pytest.mark.parametrize("option, value, allowed", [
    ("read_only", "yes", "true or false"), ("use_vss", 0, "true or false"),
    ("ann_min_rows", -5, "a whole number, 1 or more"), ("ann_min_rows", 0, "a whole number, 1 or more"),
    ("ann_min_rows", "20000", "a whole number, 1 or more"), ("hnsw_min_rows", 2.5, "a whole number, 1 or more"),
    ("ann_nprobe", 0, "a whole number, 1 or more"), ("ann_nprobe", True, "a whole number, 1 or more"),
])
def test_a_store_option_of_the_wrong_kind_is_refused_before_the_file_is_opened(db_path: Path, option, value,
                                                                                allowed):
    """Options come from a config file or a JSON variable: "yes" reached duckdb.connect as read_only, and a
    negative ann_min_rows numpy, as warnings."""
    with pytest.raises(ConfigError) as info:
        DuckDBStore(db_path, **{option: value})
    assert str(info.value) == f"store option {option} must be {allowed}, not {value!r}"
    assert not db_path.exists()


def test_open_builds_the_keyword_index_of_passages_bigger_than_the_lean_cache(tmp_path: Path, monkeypatch) -> None:
    """Open drops DuckDB's page cache to a lean limit after loading; the keyword build's join and sort of every
    passage need more working memory than that (a 1M-entity file's 200k passages failed to open with an
    out-of-memory error), so it must run under the store's own limit. Here the lean limit is made tiny instead."""
    rng = np.random.default_rng(0)
    words = [f"word{i}" for i in range(5_000)]
    store = DuckDBStore(tmp_path / "passages.duckdb")
    store.open()
    store.bind_embedder("test:unit", 8)
    for block in range(4):
        ids = [f"d{block}-{i}" for i in range(5_000)]
        store.write(WriteBatch(
            documents=[DocumentRecord(id=i, namespace="default", text="-", title="a long title " * 10) for i in ids],
            chunks=[ChunkRecord(document_id=i, ordinal=0, text=" ".join(rng.choice(words, 80)),
                                embedding=normalize(rng.standard_normal(8).astype(np.float32))) for i in ids]))
    store.close()
    monkeypatch.setattr(settings, "CACHE_AFTER_LOAD", "8MB")
    reopened = DuckDBStore(tmp_path / "passages.duckdb")
    reopened.open()
    try:
        assert reopened.keyword_search("chunk", "word7", 3, "default")
    finally:
        reopened.close()


@pytest.mark.parametrize("fails", [False, True])
def test_a_restore_stream_keeps_duckdb_to_a_transaction_cache_and_gives_the_limit_back(db_path: Path, fails: bool):
    # One transaction holds a whole import: under the store's limit its rows would stay in memory (~1.5 KB an
    # imported line); under the lower one DuckDB writes them to its temporary folder. Committed or rolled back, the
    # store's limit applies again.
    store = DuckDBStore(db_path, memory_limit="3GiB")
    store.open()
    try:
        store.bind_embedder("test:unit", 8)
        during = []
        with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
            with store.restore_stream() as restore:
                ada = NodeRecord(namespace="default", key=entity_key("Ada"), name="Ada", type="Person",
                                 embedding=normalize(np.ones(8, dtype=np.float32)))
                restore(Snapshot(nodes=[ada]))
                during.append(_buffer_pool_limit(store._con))
                if fails:
                    raise RuntimeError("the caller failed")
        assert settings.TRANSACTION_CACHE <= during[0] < 2 * settings.TRANSACTION_CACHE
        assert _buffer_pool_limit(store._con) == pytest.approx(3 * 2**30, rel=0.02)
        assert [n.name for n in store.list_nodes("default")] == ([] if fails else ["Ada"])
    finally:
        store.close()
