"""The DuckDB store's in-memory access paths against the tables they are derived from: the graph mirror (CSR
adjacency, names, mentions) after writes, deletes, merges and expiry, and the IVF vector index (recall on real
MiniLM vectors, rows written or deleted while it builds, what health() says)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import mmap
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

import duckgraph.plugins.duckdb.mirror.links as mirror_links
from duckgraph.plugins.duckdb.mirror.ivf import REDUCTION_RECALL
from duckgraph.plugins.duckdb.mirror.matrix import mapping_of, to_bfloat16
from duckgraph.plugins.duckdb.mirror.vectors import SavedLayout, VectorIndex
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import (
    ChunkRecord,
    DocumentRecord,
    EdgeRecord,
    EdgeWrite,
    GraphStore,
    NodeRecord,
    Snapshot,
    StoreError,
    WriteBatch,
    entity_key,
    normalize,
)

DIMS = 8
EDGE_COLUMNS = (
    "id, source_id, target_id, type, description, weight, properties, valid_from, valid_until, created_at, updated_at"
)


def vector(seed: int) -> np.ndarray:
    return normalize(np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32))


def node(name: str, namespace: str = "default", aliases: tuple[str, ...] = ()) -> NodeRecord:
    return NodeRecord(namespace=namespace, key=entity_key(name), name=name, type="Thing", aliases=aliases,
                      embedding=vector(hash(name) % 1000))


def edge(source: str, target: str, type_: str = "LINKS", namespace: str = "default", weight: float | None = None,
         **extra) -> EdgeWrite:
    return EdgeWrite(namespace=namespace, source_key=entity_key(source), target_key=entity_key(target), type=type_,
                     weight=weight, embedding=vector(hash((source, target, type_)) % 1000), **extra)


# -- the truth, read from the tables -------------------------------------------------------------------------


def sql_edges(store: DuckDBStore, where: str, params: list) -> list[EdgeRecord]:
    rows = store._con.execute(f"SELECT {EDGE_COLUMNS} FROM edges WHERE {where}", params).fetchall()
    return [EdgeRecord(*row[:6], json.loads(row[6]), *row[7:]) for row in rows]


def sql_neighbors(store, nodes, namespace, as_of=None, limit=1000) -> list[EdgeRecord]:
    validity = ("valid_until IS NULL" if as_of is None
                else "(valid_from IS NULL OR valid_from <= $3) AND (valid_until IS NULL OR valid_until > $3)")
    params = [list(nodes), namespace] + ([as_of] if as_of is not None else [])
    return sql_edges(store, f"(source_id IN (SELECT unnest($1)) OR target_id IN (SELECT unnest($1))) AND namespace = $2 "
                            f"AND {validity} ORDER BY weight DESC, id LIMIT {limit}", params)


def pairs(links_field) -> list[tuple[int, int]]:
    owners, others = links_field
    assert len(owners) == len(others)
    return sorted(zip(map(int, owners), map(int, others)))


def check_graph(store: DuckDBStore, rng: np.random.Generator, *, as_of: datetime | None = None) -> None:
    """Every graph read the mirror answers equals what the tables say, for random and hub node sets."""
    con = store._con
    node_ids = [r[0] for r in con.execute("SELECT id FROM nodes ORDER BY id").fetchall()]
    chunk_ids = [r[0] for r in con.execute("SELECT id FROM chunks ORDER BY id").fetchall()]
    namespaces = [r[0] for r in con.execute("SELECT DISTINCT namespace FROM nodes").fetchall()] + ["nowhere"]
    hubs = [r[0] for r in con.execute(
        "SELECT n, count(*) c FROM (SELECT source_id n FROM edges UNION ALL SELECT target_id FROM edges) "
        "GROUP BY n ORDER BY c DESC, n LIMIT 3").fetchall()]
    samples = [hubs, *(sorted(rng.choice(node_ids, size=min(len(node_ids), k), replace=False).tolist())
                       for k in (1, 3, 8, 20))] if node_ids else []
    for nodes, namespace, limit in itertools.product(samples, namespaces, (2, 5, 1000)):
        got = store.neighbors(nodes, namespace, as_of=as_of, limit=limit)
        assert got == sql_neighbors(store, nodes, namespace, as_of, limit), (nodes, namespace, limit)
        expected = [[e.id for e in got], [e.source_id for e in got], [e.target_id for e in got],
                    [e.weight for e in got]]
        ends = store.neighbor_ends(nodes, namespace, as_of=as_of, limit=limit)
        assert [column.tolist() for column in ends] == expected
        assert [column.dtype for column in ends] == [np.int64, np.int64, np.int64, np.float64]
    for nodes in samples:
        for namespace in namespaces:
            assert store.edges_among(nodes, namespace) == sql_edges(
                store, "namespace = $2 AND valid_until IS NULL AND source_id IN (SELECT unnest($1)) "
                       "AND target_id IN (SELECT unnest($1)) ORDER BY id", [nodes, namespace])
            assert store.edges_among(nodes, namespace, include_expired=True) == sql_edges(
                store, "namespace = $2 AND source_id IN (SELECT unnest($1)) AND target_id IN (SELECT unnest($1)) "
                       "ORDER BY id", [nodes, namespace])
            links = store.links(nodes, chunk_ids[:5], namespace, as_of=as_of)
            want_neighbors, want_chunks, want_nodes = [], [], []
            for n in nodes:
                want_neighbors += [(n, e.target_id if e.source_id == n else e.source_id)
                                   for e in sql_neighbors(store, [n], namespace, as_of, 10**9)]
                want_chunks += [(n, r[0]) for r in con.execute(
                    "SELECT DISTINCT chunk_id FROM mentions WHERE node_id = ?", [n]).fetchall()]
            for c in chunk_ids[:5]:
                want_nodes += [(c, r[0]) for r in con.execute(
                    "SELECT DISTINCT node_id FROM mentions WHERE chunk_id = ?", [c]).fetchall()]
            assert pairs(links.node_neighbors) == sorted(want_neighbors)
            # The degrees kept since the CSRs were built answer as counting what `links` lists does.
            degrees, mentions = store.passage_links(nodes, namespace, as_of=as_of)
            want_degrees, want_mentions = GraphStore.passage_links(store, nodes, namespace, as_of=as_of)
            assert degrees.tolist() == want_degrees.tolist() and pairs(mentions) == pairs(want_mentions)
            assert pairs(links.node_chunks) == sorted(want_chunks)
            assert pairs(links.chunk_nodes) == sorted(want_nodes)
        assert sorted(store.chunks_mentioning(nodes)) == sorted(con.execute(
            "SELECT chunk_id, node_id FROM mentions WHERE node_id IN (SELECT unnest($1))", [nodes]).fetchall())
        got_nodes = store.get_nodes(nodes)
        assert [n.id for n in got_nodes] == sorted(nodes)
        for record in got_nodes:
            row = con.execute("SELECT namespace, key, name, type, description, aliases, properties, created_at, "
                              "updated_at FROM nodes WHERE id = ?", [record.id]).fetchone()
            assert (record.namespace, record.key, record.name, record.type, record.description, list(record.aliases),
                    record.properties, record.created_at, record.updated_at) == (*row[:6], json.loads(row[6]), *row[7:])
    documents = dict(con.execute("SELECT id, document_id FROM chunks").fetchall())
    assert store.chunk_documents([*chunk_ids, 10**6]) == documents
    assert GraphStore.chunk_documents(store, [*chunk_ids, 10**6]) == documents  # the port's default, through SQL
    for namespace in namespaces:
        titles = dict(con.execute("SELECT id, coalesce(title, '') FROM documents WHERE namespace = ?",
                                  [namespace]).fetchall())
        assert store.document_titles([*titles, "no such document"], namespace) == titles
        assert GraphStore.document_titles(store, [*titles, "no such document"], namespace) == titles
        adjacent = GraphStore.adjacent_chunks(store, [*chunk_ids, 10**6], namespace)  # the port's default, SQL
        assert store.adjacent_chunks([*chunk_ids, 10**6], namespace) == adjacent
    all_edges = [r[0] for r in con.execute("SELECT id FROM edges").fetchall()]
    assert store.get_edges([*all_edges, 10**6]) == sql_edges(store, "true ORDER BY id", [])
    assert store.mentioned_chunks([*chunk_ids, 10**6]) == {r[0] for r in con.execute(
        "SELECT DISTINCT chunk_id FROM mentions").fetchall()}
    for namespace, key in con.execute("SELECT namespace, key FROM node_names").fetchall():
        want = [r[0] for r in con.execute(
            "SELECT DISTINCT node_id FROM node_names WHERE namespace = ? AND key = ? ORDER BY 1", [namespace, key]
        ).fetchall()]
        assert [n.id for n in store.find_nodes(namespace, [key, "no such name"])] == want


@pytest.fixture(params=[False, True], ids=["dict-delta", "rebuilt-every-write"])
def store(request, db_path: Path, monkeypatch):
    if request.param:  # the CSRs rebuilt after every change instead of holding a delta
        monkeypatch.setattr(mirror_links, "LINKS_REBUILD_MIN", 0)
    s = DuckDBStore(db_path)
    s.open()
    s.bind_embedder("test:unit", DIMS)
    try:
        yield s
    finally:
        s.close()


def test_graph_mirror_matches_the_tables_through_writes_deletes_merges_and_expiry(store: DuckDBStore, db_path: Path):
    rng = np.random.default_rng(7)
    names = [f"n{i}" for i in range(40)]
    store.write(WriteBatch(
        nodes=[node(n) for n in names] + [node("other a", "other"), node("other b", "other", aliases=("alias b",))],
        documents=[DocumentRecord(id="d1", namespace="default", text="n1 and n2 and n3 met.", title="Meeting"),
                   DocumentRecord(id="d2", namespace="default", text="n4 met n5.")],
        chunks=[ChunkRecord(document_id="d1", ordinal=0, text="n1 and n2"), ChunkRecord(document_id="d1", ordinal=1,
                text="and n3 met."), ChunkRecord(document_id="d2", ordinal=0, text="n4 met n5.")],
    ))
    # A hub (n0) with many edges of random weights, and a random sprinkle.
    edges = [edge("n0", n, weight=float(rng.uniform(0.1, 2))) for n in names[1:]]
    edges += [edge(names[a], names[b], type_=t, weight=float(w))
              for a, b, t, w in zip(rng.integers(1, 40, 60), rng.integers(1, 40, 60),
                                    rng.choice(["KNOWS", "MAKES"], 60), rng.choice([0.5, 1.0, 1.5], 60)) if a != b]
    edges += [edge("other a", "other b", namespace="other"), edge("n3", "n3", type_="CITES")]  # and a self-loop
    store.write(WriteBatch(edges=edges))
    store.write(WriteBatch(documents=[DocumentRecord(id="d1", namespace="other", text="other a.", title="Other")],
                           chunks=[ChunkRecord(document_id="d1", ordinal=0, text="other a.")]))
    sourced = store.find_nodes("default", ["n1", "n4", "n5"])
    for record, document in zip(sourced, ("d1", "d2", "d2")):
        record.source_ids = (document,)
    store.write(WriteBatch(nodes=sourced))
    assert store._con.execute("SELECT count(*) FROM mentions").fetchone()[0] >= 3
    check_graph(store, rng)

    # Re-weighting existing edges (the same edge again), with properties and descriptions.
    store.write(WriteBatch(edges=[edge("n0", "n5", weight=0.01), edge("n0", "n6", weight=5.0, description="strong"),
                                  edge("n2", "n3", weight=3.0, properties={"since": 1999})]))
    check_graph(store, rng)

    # Deleting edges and nodes.
    doomed = [r[0] for r in store._con.execute("SELECT id FROM edges WHERE source_id = (SELECT id FROM nodes "
                                               "WHERE key = 'n0') ORDER BY id LIMIT 4").fetchall()]
    store.write(WriteBatch(delete_edges=doomed))
    ids = {n.key: n.id for n in store.find_nodes("default", names)}
    store.write(WriteBatch(delete_nodes=[ids["n7"], ids["n8"]]))
    check_graph(store, rng)

    # Merging: n9 and n10 into n0 (edges move, self-loops and duplicates collapse, mentions move).
    store.write(WriteBatch(merges=[(ids["n0"], [ids["n9"], ids["n10"]]), (ids["n4"], [ids["n1"]])]))
    check_graph(store, rng)

    # Expiry: edges that stopped holding (restored with their validity), as of now and as of the past.
    past, now = datetime(2020, 1, 1), datetime.now().replace(microsecond=0)
    store.restore(Snapshot(edges=[
        EdgeWrite(namespace="default", source_key="n0", target_key="n11", type="USED_TO", valid_from=past,
                  valid_until=past + timedelta(days=400)),
        EdgeWrite(namespace="default", source_key="n12", target_key="n0", type="USED_TO", valid_from=past,
                  valid_until=now - timedelta(days=1), weight=9.0),
    ]))
    check_graph(store, rng)
    check_graph(store, rng, as_of=past + timedelta(days=10))
    check_graph(store, rng, as_of=now - timedelta(days=30))

    # Replacing a document drops its chunks' mentions (and a new title replaces the old).
    store.write(WriteBatch(documents=[DocumentRecord(id="d1", namespace="default", text="new text", title="New")],
                           chunks=[ChunkRecord(document_id="d1", ordinal=0, text="new text")]))
    check_graph(store, rng)

    # Renaming a node (an update with new aliases) moves its names.
    record = store.find_nodes("default", ["n13"])[0]
    record.key, record.name, record.aliases, record.embedding = "n13b", "n13b", ("thirteen",), vector(13)
    store.write(WriteBatch(nodes=[record]))
    assert store.find_nodes("default", ["n13"]) == []
    assert [n.id for n in store.find_nodes("default", ["thirteen"])] == [record.id]
    check_graph(store, rng)

    # What was kept in memory is what a fresh open loads from the file.
    def graph_reads():
        links = store.links(list(ids.values()), [1, 2, 3], "default")
        degrees, _ = store.passage_links(list(ids.values()), "default")
        return (store.neighbors(list(ids.values()), "default", limit=10**6), store.get_edges(range(1, 200)),
                [pairs(field) for field in (links.node_neighbors, links.node_chunks, links.chunk_nodes)],
                degrees.tolist(),
                store.chunk_documents(range(1, 10)), store.document_titles(["d1", "d2"], "default"))

    before = graph_reads()
    store.close()
    store.open()
    assert graph_reads() == before
    check_graph(store, rng)


def test_a_failed_write_leaves_the_mirror_as_it_was(store: DuckDBStore):
    store.write(WriteBatch(nodes=[node("a"), node("b")], edges=[edge("a", "b")]))
    before = (store.neighbors([1, 2], "default"), store.find_nodes("default", ["a", "b", "c"]))
    with pytest.raises(Exception):
        store.write(WriteBatch(nodes=[node("c")], edges=[edge("a", "c"), edge("a", "missing")]))
    assert (store.neighbors([1, 2], "default"), store.find_nodes("default", ["a", "b", "c"])) == before


def test_the_mirror_is_not_read_through_a_closed_store(store: DuckDBStore):
    """Every read of the in-memory graph says the store is closed rather than answer from what it last held."""
    store.write(WriteBatch(nodes=[node("a"), node("b")], edges=[edge("a", "b")]))
    assert store.edges_among([1, 2], "default") and len(store.neighbor_ends([1], "default")[0]) == 1
    store.close()
    for read in (lambda: store.edges_among([1, 2], "default"), lambda: store.neighbor_ends([1], "default"),
                 lambda: store.get_nodes([1]), lambda: store.adjacent_chunks([1], "default"),
                 lambda: store.keyword_search("node", "a", 5, "default")):
        with pytest.raises(StoreError, match="is not open"):
            read()


def test_shared_edge_records_are_read_only(store: DuckDBStore):
    store.write(WriteBatch(nodes=[node("a"), node("b")], edges=[edge("a", "b", properties={"x": 1})]))
    record = store.neighbors([1], "default")[0]
    assert record.properties == {"x": 1} and json.dumps(record.properties) == '{"x": 1}'
    with pytest.raises(TypeError):
        record.properties["x"] = 2
    assert dict(record.properties) == {"x": 1}


# -- the IVF vector index ----------------------------------------------------------------------------------


def clustered(n: int, dims: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(2, n // 200), dims)).astype(np.float32)
    data = centres[rng.integers(0, len(centres), n)] + 0.4 * rng.standard_normal((n, dims)).astype(np.float32)
    return normalize(data)


def low_rank(n: int, dims: int, seed: int, rank: int = 32) -> np.ndarray:
    """Clustered vectors in a `rank`-dimensional subspace (plus a little noise), as sentence embeddings mostly are:
    a scan in a third of the dimensions loses next to nothing on them."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((rank, dims)).astype(np.float32)
    z = clustered(n, rank, seed)
    return normalize(z @ basis + 0.02 * rng.standard_normal((n, dims)).astype(np.float32))


@pytest.mark.parametrize("dims, reduced", [(32, False), (384, True)], ids=["full-vectors", "reduced-scan"])
def test_ivf_index_finds_every_row_written_or_deleted_while_it_builds(dims: int, reduced: bool):
    vectors = low_rank(30_000, dims, seed=1) if reduced else clustered(30_000, dims, seed=1)
    index = VectorIndex(dims, ann_min_rows=1_000)
    ids = np.arange(1, 20_001)
    index.upsert(ids, vectors[:20_000], "default")
    index.maybe_build()
    assert index.building or index.ready
    # Meanwhile: new rows, rewritten rows (listed or not), deleted rows, another namespace.
    index.upsert(np.arange(20_001, 25_001), vectors[20_000:25_000], "default")
    index.upsert(np.arange(1, 1_001), vectors[25_000:26_000], "default")
    index.remove(range(1_001, 3_001))
    index.upsert(np.arange(25_001, 26_001), vectors[26_000:27_000], "other")
    assert index.wait(120) and index.ready
    assert (index.build_info["reduced_to"] is not None) == reduced  # 32 dimensions are below REDUCE_FROM
    # And after the build: more of each.
    index.upsert(np.arange(26_001, 27_001), vectors[27_000:28_000], "default")
    index.remove([5, 20_002, 26_005])
    expected = {i: vectors[i - 1] for i in range(1, 25_001)}
    expected.update({i: vectors[25_000 + i - 1] for i in range(1, 1_001)})
    expected.update({i: vectors[i + 999] for i in range(25_001, 27_001)})
    for gone in [*range(1_001, 3_001), 5, 20_002, 26_005]:
        del expected[gone]
    other = {i for i in range(25_001, 26_001)} - {26_005}
    assert len(index) == len(expected)
    index.nprobe = len(index._centroids) // 2  # half the lists: a row's own list is always among them
    assert index.active
    rng = np.random.default_rng(3)
    for item in rng.choice(sorted(expected), size=300, replace=False).tolist():
        namespace = "other" if item in other else "default"
        hits = index.search(expected[item], 3, namespace)
        assert hits[0][0] == item and hits[0][1] == pytest.approx(1.0, abs=1e-5)
        assert all((h in other) == (namespace == "other") for h, _ in hits)
    for gone in (5, 1_500, 20_002):
        assert not index.contains(gone)
        assert all(h != gone for h, _ in index.search(vectors[gone - 1], 10, "default"))
    assert np.allclose(index.vectors([10])[10], expected[10])
    assert index.similarities([10, 5, 99_999], expected[10]) == {10: pytest.approx(1.0, abs=1e-5)}
    aligned = index.similarity_array(np.array([10, 5, 99_999, -1, 20_001, 10]), expected[10])
    assert aligned[0] == pytest.approx(1.0, abs=1e-5) and aligned[5] == aligned[0]
    assert np.isnan(aligned[[1, 2, 3]]).all()
    assert aligned[4] == pytest.approx(float(expected[20_001] @ expected[10]), abs=1e-5)
    # Enough changes since the build make it due again; the rebuild holds the same rows.
    index.upsert(np.arange(30_001, 33_001), vectors[:3_000], "default")
    assert index.needs_build()
    index.maybe_build(background=False)
    assert not index.needs_build() and len(index) == len(expected) + 3_000


def test_a_reduced_scan_finds_the_exact_neighbours_and_is_refused_where_it_would_miss_them():
    vectors = low_rank(20_000, 384, seed=2)
    index = VectorIndex(384, ann_min_rows=1_000)
    index.upsert(np.arange(1, 20_001), vectors, "default")
    index.maybe_build(background=False)
    assert index.build_info["reduced_to"] == 128 and "in 128 of 384 dimensions" in index.mode()
    index.nprobe = len(index._centroids) // 2  # still an IVF search, through most of the lists
    rng = np.random.default_rng(4)
    queries = normalize(sum(vectors[rng.integers(0, 20_000, 40)] for _ in range(3)))
    for k in (10, 100):
        for query in queries:
            hits = index.search(query, k, "default")
            exact = np.argsort(-(vectors @ query))[:k] + 1
            assert len(set(exact.tolist()) - {i for i, _ in hits}) <= k // 50  # at most 2 of 100 missed
            # The scores returned are the full vectors' (rescored), not the reduced ones.
            assert all(score == pytest.approx(float(vectors[i - 1] @ query), abs=1e-5) for i, score in hits)

    # Vectors spread evenly over all directions: a third of them would miss most neighbours (and lists do not
    # pay either, which the mode says).
    spread = VectorIndex(384, ann_min_rows=1_000)
    spread.upsert(np.arange(1, 20_001), normalize(rng.standard_normal((20_000, 384)).astype(np.float32)), "default")
    spread.maybe_build(background=False)
    assert spread.build_info["reduced_to"] is None
    assert spread.build_info["reduction_kept"] < REDUCTION_RECALL
    assert spread.mode().startswith("exact scan (the IVF index of") and "too little cluster structure" in spread.mode()


@pytest.mark.parametrize("dims, reduced", [(32, False), (384, True)], ids=["full-vectors", "reduced-scan"])
def test_a_saved_layout_keeps_the_rows_it_listed_and_scans_the_rest(dims: int, reduced: bool):
    vectors = low_rank(10_400, dims, seed=6) if reduced else clustered(10_400, dims, seed=6)
    built = VectorIndex(dims, ann_min_rows=1_000)
    built.upsert(np.arange(1, 10_001), vectors[:10_000], "default")
    built.maybe_build(background=False)
    saved = built.take_unsaved_layout()
    assert saved is not None and built.take_unsaved_layout() is None  # handed out once
    layout = SavedLayout.from_bytes(saved.to_bytes(), saved.info)
    assert (layout.projection is not None) == reduced

    # The rows as a reopen reads them: in another order, one rewritten, a hundred deleted, two hundred new.
    current = {i: vectors[i - 1] for i in range(1, 10_001)}
    current[7] = vectors[10_300]
    for gone in range(100, 200):
        del current[gone]
    current.update({i: vectors[i - 1] for i in range(10_001, 10_201)})
    order = np.random.default_rng(7).permutation(sorted(current))
    reopened = VectorIndex(dims, ann_min_rows=1_000)
    reopened.upsert(order, np.stack([current[i] for i in order.tolist()]), "default")
    assert reopened.restore(layout)
    assert reopened.ready and not reopened.building and not reopened.needs_build()
    assert reopened.build_info["restored_from_file"] and reopened.nprobe == built.nprobe
    assert (reopened.build_info["reduced_to"] is not None) == reduced
    assert reopened._listed == 10_000 - 100 - 1  # the rewritten row left its list for the tail, with the new ones
    assert reopened._size - reopened._listed == 200 + 1 and len(reopened) == len(current)
    assert not reopened.restore(layout)  # an index already in place is kept

    # Unchanged rows are where the build put them: the same answers as the built index, whenever neither holds a
    # row changed since.
    changed = {7, *range(100, 200), *range(10_001, 10_201)}
    rng = np.random.default_rng(8)
    compared = 0
    for query in normalize(sum(vectors[rng.integers(0, 10_000, 200)] for _ in range(3))):
        before, after = built.search(query, 10, "default"), reopened.search(query, 10, "default")
        if not changed & {i for i, _ in [*before, *after]}:
            assert after == before
            compared += 1
    assert compared >= 100
    reopened.nprobe = len(reopened._centroids) // 2  # a row's own list is then always probed
    for item in (7, 10_001, 10_200, 5, 9_999):
        assert reopened.search(current[item], 1, "default")[0][0] == item
    assert all(hit not in range(100, 200) for hit, _ in reopened.search(vectors[150], 10, "default"))

    # A layout of another dimension count, or one whose parts disagree, is refused and changes nothing.
    other = VectorIndex(dims + 8, ann_min_rows=1_000)
    other.upsert(np.arange(1, 2_001), normalize(rng.standard_normal((2_000, dims + 8)).astype(np.float32)), "default")
    assert not other.restore(layout) and not other.ready
    fresh = VectorIndex(dims, ann_min_rows=1_000)
    fresh.upsert(np.arange(1, 10_001), vectors[:10_000], "default")
    assert not fresh.restore(dataclasses.replace(layout, checks=layout.checks[:-1])) and not fresh.ready
    assert fresh.restore(layout) and fresh._listed == 10_000


def test_a_reopen_takes_the_saved_ivf_layout_instead_of_building_again(db_path: Path, caplog):
    vectors = clustered(1_301, DIMS, seed=9)
    store = DuckDBStore(db_path, ann_min_rows=500)
    store.open()
    try:
        store.bind_embedder("test:unit", DIMS)
        nodes = [NodeRecord(namespace="default", key=f"thing {i}", name=f"thing {i}", type="Thing",
                            embedding=vectors[i]) for i in range(1_200)]
        ids = store.write(WriteBatch(nodes=nodes)).node_ids
        _wait_ready(store, "node")
        # Saved by the next write already (a process killed before its close keeps it), and again at close.
        store.write(WriteBatch(nodes=[NodeRecord(namespace="default", key="late", name="late", type="Thing",
                                                 embedding=vectors[1_250])]))
        assert store._con.execute("SELECT kind FROM vector_layouts").fetchall() == [("node",)]
        queries = normalize(vectors[1_200:1_300] + 0.3 * vectors[:100])
        before = [store.vector_search("node", q, 10, "default") for q in queries]
        store.close()
        assert [row[0] for row in duckdb_rows(db_path, "SELECT kind FROM vector_layouts")] == ["node"]

        store.open()  # ready at once: nothing builds
        health = store.health()
        assert health["vector_index"]["node"]["ivf_ready"] and not health["vector_index"]["node"]["ivf_building"]
        assert health["vector_index"]["node"]["build"]["restored_from_file"]
        assert "layout read from the file" in health["vector_search"]["node"]
        assert [store.vector_search("node", q, 10, "default") for q in queries] == before

        # A vector rewritten after the save is not found in its old list: it is scanned as a row written since.
        moved = store.get_nodes([ids["thing 3"]])[0]
        moved.embedding = vectors[1_300]
        store.write(WriteBatch(nodes=[moved]))
        store.close()
        store.open()
        assert store.health()["vector_index"]["node"]["build"]["restored_from_file"]
        assert "2 rows written since the build" in store.health()["vector_search"]["node"]  # and "late"
        assert store.vector_search("node", vectors[1_300], 1, "default")[0][0] == ids["thing 3"]
        store.close()

        # A layout that cannot be read is left aside (logged) and the index built again.
        with duckdb.connect(str(db_path)) as con:
            con.execute("UPDATE vector_layouts SET layout = 'not a layout'::BLOB")
        with caplog.at_level(logging.WARNING, logger="duckgraph.plugins.duckdb.vector_search"):
            store.open()
        assert "the saved IVF layout of the node vectors is unreadable" in caplog.text
        _wait_ready(store, "node")
        assert not store.health()["vector_index"]["node"]["build"].get("restored_from_file")
        assert store.vector_search("node", vectors[1_300], 1, "default")[0][0] == ids["thing 3"]
    finally:
        store.close()


def duckdb_rows(path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_bfloat16_index_takes_half_the_memory_and_answers_as_a_float32_one_within_its_rounding():
    vectors = low_rank(20_400, 384, seed=13)
    ids = np.arange(1, 20_001)
    full, half = VectorIndex(384, ann_min_rows=1_000), VectorIndex(384, ann_min_rows=1_000, precision="bfloat16")
    for index in (full, half):
        index.upsert(ids, vectors[:20_000], "default")
    assert (full.bytes_per_vector, half.bytes_per_vector) == (1_536, 768)
    assert half._matrix.nbytes * 2 == full._matrix.nbytes
    held = half.vectors(range(1, 101))
    assert all(np.abs(held[i] - vectors[i - 1]).max() <= np.abs(vectors[i - 1]).max() * 2**-8 for i in held)
    rng = np.random.default_rng(14)
    queries = normalize(sum(vectors[rng.integers(0, 20_000, 30)] for _ in range(3)))
    some = rng.choice(ids, 500, replace=False)
    for query in queries[:5]:
        difference = np.abs(half.similarity_array(some, query) - full.similarity_array(some, query))
        assert 0 < difference.max() <= 2e-3
    # Exact scans (no index yet), then IVF searches over the reduced scan: as many of the exact neighbours.
    exact = [set((np.argsort(-(vectors[:20_000] @ query))[:10] + 1).tolist()) for query in queries]
    for _ in range(2):
        found = {index.precision: np.mean([len(truth & {i for i, _ in index.search(query, 10, "default")}) / 10
                                           for query, truth in zip(queries, exact)]) for index in (full, half)}
        assert found["bfloat16"] >= found["float32"] - 0.02
        for index in (full, half):
            index.maybe_build(background=False)
        assert half.ready and half.build_info["reduced_to"] == full.build_info["reduced_to"] == 128
    # Rows written, rewritten and deleted after the build; then its layout restored into a reopened index.
    half.upsert(np.arange(20_001, 20_401), vectors[20_000:], "default")
    rewritten = normalize(rng.standard_normal((1, 384)).astype(np.float32))
    half.upsert([5], rewritten, "default")
    half.remove([6])
    assert half.search(rewritten[0], 1, "default")[0][0] == 5
    assert not half.contains(6) and half.search(vectors[20_350], 1, "default")[0][0] == 20_351
    reopened = VectorIndex(384, ann_min_rows=1_000, precision="bfloat16")
    reopened.upsert(ids, vectors[:20_000], "default")
    assert reopened.restore(half.take_unsaved_layout()) and reopened._listed == 20_000  # every row's check held
    # Rows loaded as a file stores the relations' vectors (bfloat16 bit patterns): held as they are, or widened.
    bits = to_bfloat16(vectors[:100])
    for index in (VectorIndex(384, ann_min_rows=None), VectorIndex(384, ann_min_rows=None, precision="bfloat16")):
        index.append_new(ids[:100], bits, np.zeros(100, dtype=np.int32), ["default"])
        assert all(np.array_equal(vector, held[i]) for i, vector in index.vectors(ids[:100]).items())
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16"):
        VectorIndex(8, precision="float16")


@pytest.mark.skipif(not hasattr(mmap, "MAP_ANONYMOUS"), reason="no anonymous mappings on this platform")
def test_the_vector_matrix_grows_in_place_unless_a_build_still_reads_it():
    rng = np.random.default_rng(5)
    vectors = normalize(rng.standard_normal((5_000, 8)).astype(np.float32))
    index = VectorIndex(8, ann_min_rows=None)
    index.upsert(np.arange(1_000), vectors[:1_000], "default")
    mapping = mapping_of(index._matrix)
    assert mapping is not None
    index.upsert(np.arange(1_000, 3_000), vectors[1_000:3_000], "default")  # past the first capacity
    assert mapping_of(index._matrix) is mapping and len(index._matrix) >= 3_000  # the same mapping, grown

    snapshot = index._matrix  # what a build thread holds while it reads the rows
    index.upsert(np.arange(3_000, 5_000), vectors[3_000:], "default")
    assert mapping_of(index._matrix) is not mapping  # copied: the build's rows stay where they are
    assert np.array_equal(snapshot[:3_000], vectors[:3_000])
    stored = index.vectors(range(5_000))
    assert len(stored) == 5_000 and all(np.array_equal(stored[i], vectors[i]) for i in range(0, 5_000, 7))
    assert index.search(vectors[4_321], 1, "default")[0][0] == 4_321


def _sentences(count: int, seed: int) -> list[str]:
    subjects = ["The old fisherman", "A young violinist", "My neighbour's cat", "The city council", "An astronaut",
                "The chemistry teacher", "A retired pilot", "The bakery owner", "A nervous student", "The museum guard",
                "A famous chef", "The night nurse"]
    verbs = ["repaired", "painted", "sold", "studied", "photographed", "lost", "borrowed", "described", "hid",
             "measured", "found", "carried"]
    objects = ["a wooden boat", "the broken telescope", "three silver coins", "an ancient map", "the red bicycle",
               "a jar of honey", "the stone bridge", "a crate of oranges", "the antique clock", "a wool blanket",
               "a violin case", "the mayor's hat"]
    places = ["near the harbour", "in the desert", "during the storm", "at the train station", "on the mountain",
              "before breakfast", "in the library", "under the bridge", "at midnight", "in the greenhouse",
              "at the market", "in the museum"]
    combos = list(itertools.product(subjects, verbs, objects, places))
    picks = np.random.default_rng(seed).choice(len(combos), size=count, replace=False)
    return [" ".join(combos[i]) + "." for i in picks]


def _wait_ready(store: DuckDBStore, kind: str = "node", timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if store.health()["vector_index"][kind]["ivf_ready"] and not store.health()["vector_index"][kind]["ivf_building"]:
            return
        store.vector_search(kind, np.ones(store.embedder_info()[1], dtype=np.float32), 1, "default")  # starts it
        time.sleep(0.1)
    pytest.fail(f"the IVF index was not ready after {timeout} s: {store.health()['vector_search']}")


def test_the_edge_index_waits_for_a_search_of_edge_vectors(db_path: Path):
    # The built-in search reads edge vectors by id only; at 5 edges a node, indexing them at open cost most of the
    # open and twice their memory while it ran.
    store = DuckDBStore(db_path, ann_min_rows=500)
    store.open()
    try:
        store.bind_embedder("fake", DIMS)
        names = [f"thing {i}" for i in range(600)]
        store.write(WriteBatch(nodes=[node(name) for name in names],
                               edges=[edge(a, b) for a, b in zip(names, names[1:] + names[:1])]))
        store.close()
        store.open()
        _wait_ready(store, "node")
        health = store.health()
        assert health["vector_search"]["edge"].startswith("not indexed: no search has asked for edge vectors")
        assert not health["vector_index"]["edge"]["ivf_ready"] and not health["vector_index"]["edge"]["ivf_building"]
        assert "building the node index holds" in health["vectors_in_memory"]
        assert store.similarity_array("edge", np.arange(1, 4), vector(1)).shape == (3,)  # reads need no index
        assert not store.health()["vector_index"]["edge"]["ivf_building"]
        _wait_ready(store, "edge")  # searching starts the build
        assert store.health()["vector_search"]["edge"].startswith("ivf (")
        store.close()
        store.open()  # a new open waits for a search again
        assert store.health()["vector_search"]["edge"].startswith("not indexed")
    finally:
        store.close()


@pytest.mark.model
def test_ivf_recall_on_real_minilm_vectors(db_path: Path, minilm):
    texts = _sentences(2_080, seed=11)
    stored, fresh, queries = texts[:2_000], texts[2_000:2_030], texts[2_030:]
    vectors = minilm.embed_documents(stored + fresh)
    query_vectors = minilm.embed_documents(queries)
    ivf = DuckDBStore(db_path, ann_min_rows=1_000)
    exact = DuckDBStore(db_path, vector_index="exact")
    try:
        ivf.open()
        ivf.bind_embedder(minilm.id, minilm.dimensions)
        ivf.write(WriteBatch(nodes=[NodeRecord(namespace="default", key=entity_key(t), name=t, type="Thing",
                                               embedding=v) for t, v in zip(stored, vectors[:2_000])]))
        assert ivf.health()["vector_index"]["node"]["ivf_due"]
        ivf.vector_search("node", query_vectors[0], 10, "default")  # the first search starts the build
        mode = ivf.health()["vector_search"]["node"]
        assert mode.startswith("ivf") or "IVF index is building" in mode
        _wait_ready(ivf)
        health = ivf.health()
        assert health["vector_search"]["node"].startswith("ivf (")
        assert health["vector_index"]["node"]["path"] == "ivf" and health["vector_index"]["node"]["build"]["lists"] > 1
        assert health["vector_index"]["chunk"]["path"] == "exact"  # no chunks: below ann_min_rows
        # Sentence vectors keep their neighbours in a third of their dimensions: lists are scanned in those.
        assert health["vector_index"]["node"]["build"]["reduced_to"] == 128, health["vector_index"]["node"]["build"]
        assert "in 128 of 384 dimensions" in health["vector_search"]["node"]
        assert "the IVF scan's reduced copies node 1.0 MB" in health["vectors_in_memory"]
        exact.open()
        assert exact.health()["vector_search"]["node"].startswith("exact scan")
        assert exact.health()["vector_index"]["node"]["path"] == "exact"

        def recall() -> float:
            found = []
            for q in query_vectors:
                got = [i for i, _ in ivf.vector_search("node", q, 10, "default")]
                want = [i for i, _ in exact.vector_search("node", q, 10, "default")]
                assert len(got) == len(want) == 10
                found.append(len(set(got) & set(want)) / 10)
            return float(np.mean(found))

        assert recall() >= 0.95
        # Rows written after the build are scanned exactly; deleted ones are gone.
        ids = ivf.write(WriteBatch(nodes=[NodeRecord(namespace="default", key=entity_key(t), name=t, type="Thing",
                                                     embedding=v) for t, v in zip(fresh, vectors[2_000:])])).node_ids
        for text, v in zip(fresh, vectors[2_000:]):
            top = ivf.vector_search("node", v, 1, "default")[0]
            assert top[0] == ids[entity_key(text)] and top[1] == pytest.approx(1.0, abs=1e-4)
        gone = ivf.find_nodes("default", [entity_key(stored[0])])[0].id
        ivf.write(WriteBatch(delete_nodes=[gone]))
        assert gone not in [i for i, _ in ivf.vector_search("node", vectors[0], 10, "default")]
        exact.close()
        exact.open()
        assert recall() >= 0.95
    finally:
        exact.close()
        ivf.close()


def test_similarity_array_agrees_with_the_ports_default(fake_kb):
    fake_kb.add_knowledge_graph(
        [NodeInput(name=f"Entity {i}", type="Thing", description=f"number {i}") for i in range(6)],
        [EdgeInput(source="Entity 0", target=f"Entity {i}", type="LINKS") for i in range(1, 6)],
    )
    store = fake_kb.store
    query = fake_kb.embedder.embed_query("number 3")
    for kind in ("node", "edge"):
        stored = sorted(store.similarities(kind, list(range(1, 20)), query))
        ids = np.array([stored[2], 999, stored[0], stored[2], -4], dtype=np.int64)
        fast = store.similarity_array(kind, ids, query)
        assert store.similarities(kind, list(ids), query) == {
            i: s for i, s in zip(ids.tolist(), fast.tolist()) if not np.isnan(s)}
        assert np.isnan(fast[[1, 4]]).all() and not np.isnan(fast[[0, 2, 3]]).any()
    assert np.isnan(store.similarity_array("chunk", np.array([1, 2]), query)).all()  # no passages stored
