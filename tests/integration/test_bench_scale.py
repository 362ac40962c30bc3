"""Keeps contrib/bench/scale.py and its generator _data.py from rotting: every measuring function runs at a tiny
size on a real DuckDB file, with a fake embedder and a random vector base (no model, no npx, a few seconds).
Nothing here checks a speed."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core.domain.chunking import chunk_text
from duckgraph.ports import entity_key
from tests.fakes import HashingEmbedder

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import _data  # noqa: E402
import scale  # noqa: E402

N = 300
DIMENSIONS = 384


@pytest.fixture(scope="module")
def base() -> np.ndarray:
    vectors = np.random.default_rng(0).standard_normal((64, DIMENSIONS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_generated_graph_is_deterministic_unique_and_loadable_in_order():
    ents, rels = _data.entities(N, seed=3), _data.relations(N, seed=3)
    assert ents[:5] == _data.entities(N, seed=3)[:5]
    assert len({entity_key(e["name"]) for e in ents}) == N
    assert {e["type"] for e in ents} == {t for t, _ in _data.ENTITY_TYPES}
    assert 4 * N <= len(rels) <= 5 * N
    assert not (rels.source == rels.target).any()
    assert len({(int(s), int(t), int(k)) for s, t, k in zip(rels.source, rels.target, rels.kind)}) == len(rels)
    assert (np.diff(rels.later_end()) >= 0).all()
    first = rels[0]
    assert first["source"] == ents.name(int(rels.source[0])) and first["type"] == _data.RELATION_TYPES[rels.kind[0]][0]
    names = [ents.name(i) for i in range(N)]
    assert all(any(name in q for name in names) for q in _data.questions(ents, 3))


def test_passages_name_what_they_are_about_and_are_added_before_anything_names_them():
    rels = _data.relations(N, seed=3)
    passages = _data.passages(rels)
    assert len(passages) == N // 5 and passages[7] == _data.passages(_data.relations(N, seed=3))[7]
    assert all(chunk_text(p["text"]) == [p["text"]] for p in passages)  # one chunk each with the defaults
    names = [rels.entities.name(i) for i in range(N)]
    text_of = {p["id"]: p["text"] for p in passages}
    assert all(names[i] in text_of[passages.document_of_entity(i)] for i in range(N))
    stated = [j for j in range(len(rels)) if passages.document_of_relation(j)]
    assert 0.3 * len(rels) < len(stated) < 0.5 * len(rels)  # the first two of each entity's ~5
    assert all(_data.relation_text(rels[j]) in text_of[passages.document_of_relation(j)] for j in stated)

    added: set[str] = set()
    for batch in scale.plan_batches(N, rels.later_end(), max_nodes=40, max_edges=25):
        added |= {doc.id for doc in scale.batch_documents(passages, batch)}
        nodes, edges = scale.batch_inputs(rels.entities, rels, batch, passages)
        assert {doc for item in [*nodes, *edges] for doc in item.source_ids} <= added
    assert added == set(text_of)
    plain_nodes, plain_edges = scale.batch_inputs(rels.entities, rels, scale.Batch(range(N), range(len(rels))))
    assert not any(item.source_ids for item in [*plain_nodes, *plain_edges])


def test_embeddings_are_unit_vectors_fixed_per_text(base):
    texts = ["Ada K. Ashby works at Norvex", "a second text", "a third"]
    vectors = _data.embeddings(texts, base=base)
    assert vectors.shape == (3, DIMENSIONS) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    assert np.array_equal(_data.embeddings(texts[1:2], base=base)[0], vectors[1])
    assert np.array_equal(_data.embeddings(5, base=base), _data.embeddings(5, base=base))


def test_batches_cover_every_node_and_edge_once_in_loading_order():
    rels = _data.relations(N, seed=1)
    later = rels.later_end()
    batches = list(scale.plan_batches(N, later, max_nodes=40, max_edges=25))
    nodes = [i for b in batches for i in b.nodes]
    edges = [i for b in batches for i in b.edges]
    assert nodes == list(range(N)) and edges == list(range(len(rels)))
    loaded = 0
    for b in batches:
        loaded = max(loaded, b.nodes.stop)
        assert len(b.nodes) <= 40 and len(b.edges) <= 25
        assert all(later[i] < loaded for i in b.edges)


def test_the_suite_runs_at_a_tiny_size(tmp_path, base):
    db = tmp_path / "kb.duckdb"
    fake = HashingEmbedder(DIMENSIONS)
    build = scale.measure_build(db, N, embedder_id=fake.id, base=base)
    assert build["nodes_created"] == N and build["edges_created"] == build["edges"]
    assert build["passages"] == build["chunks_written"] == N // 5 and build["passages_per_second"] > 0
    assert build["embedder_misses"] == 0 and build["file_mb"] > 0

    real = scale.measure_build(tmp_path / "real.duckdb", 60, embedder=HashingEmbedder(DIMENSIONS))
    assert real["nodes_created"] == 60 and real["chunks_written"] == 12
    plain = scale.measure_build(tmp_path / "plain.duckdb", 60, entities_per_passage=0, embedder_id=fake.id, base=base)
    assert plain["nodes_created"] == 60 and plain["passages"] == plain["chunks_written"] == 0

    serve = scale.measure_serve(db, N, queries=5, real=fake, base=base, index_timeout=30)
    assert serve["search_query_pre_embedded"]["count"] == 5 and serve["search_query_embedded"]["count"] == 5
    assert serve["expansion_2_hops"]["edges_mean"] > 0 and serve["expansion_2_hops_records"]["count"] == 5
    # Every search ranked passages (the graph's passages are linked to what the questions name).
    assert serve["searches_with_passages"] == 5 and serve["search_passages_returned_mean"] >= 1
    store = scale.default_store(db)
    store.open()
    try:  # the ids the search walks and the full records reach the same edges
        anchors = [node_id for node_id, _ in store.vector_search("node", base[0], scale.ANCHORS, scale.NAMESPACE)]
        assert scale.expansion(store, anchors)[1] == scale.expansion(store, anchors, records=True)[1] > 0
        stats = store.stats(scale.NAMESPACE)
        assert stats["documents"] == stats["chunks"] == N // 5
        # Each entity mentioned by its passage's chunk, each relation a passage states backed by it.
        node_ids = [node.id for node in store.list_nodes(scale.NAMESPACE, limit=N)]
        assert len({node_id for _, node_id in store.chunks_mentioning(node_ids, limit=10 * N)}) == N
        edge_ids = [edge.id for edge in store.list_edges(scale.NAMESPACE, limit=len(_data.relations(N)))]
        stated = _data.passages(_data.relations(N)).document_of_relation
        assert len({edge_id for edge_id, _ in store.edge_evidence(edge_ids)}) == sum(
            1 for j in range(len(edge_ids)) if stated(j))
    finally:
        store.close()
    assert serve["recall"]["vectors"] == N and 0 <= serve["recall"]["recall_at_10"] <= 1
    assert serve["embedder_misses"] == 0 and not serve["index_timed_out"]

    embedding = scale.measure_embedding(scale.sample_texts(60), fake, fake.embed_documents, repeats=1)
    assert embedding["texts"] == 60 and embedding["min_cosine_to_raw"] == pytest.approx(1.0, abs=1e-6)
    passage_texts = scale.sample_passage_texts(6)
    embedding["passages"] = scale.measure_embedding(passage_texts, fake, fake.embed_documents, repeats=1)
    assert embedding["passages"]["texts"] == 6 and embedding["passages"]["mean_chars"] > 5 * embedding["mean_chars"]
    extrapolated = scale.extrapolate_embedding(build, embedding)
    assert extrapolated["seconds"] > build["seconds"] and extrapolated["documents_seconds"] > build["documents_seconds"]
    assert "passages_per_second" not in scale.extrapolate_embedding(plain, embedding)

    results = {
        "machine": scale.machine(), "embedding": embedding,
        "sizes": {scale.size_label(N): {"nodes": N, "edges": build["edges"], "passages": build["passages"],
                                        "build": {**build, "peak_rss_mb": 1.0},
                                        "build_with_embedding": real, "build_with_embedding_extrapolated": extrapolated,
                                        "serve": {**serve, "peak_rss_mb": 1.0},
                                        "serve_spawn_to_tools_list": {"median_ms": 1.0}}},
        "memory_servers": {"error": "not run in tests"},
    }
    table = scale.render(results)
    assert "search p50/p95 ms, query pre-embedded" in table and "recall@10" in table
    assert "expansion 2 hops p50/p95 ms (neighbor_ends)" in table and "through neighbors() (full records)" in table
    assert "passages returned per search (mean)" in table and "passages, embedding included" in table
    json.dumps(results, default=str)

    session = {"spawn_to_ready_ms": 1.0, "first_call_ms": 1.0, "create_seconds": 1.0,
               "search_nodes": {**scale.percentiles([0.001]), "entities_returned_mean": 1.0},
               "open_nodes": {**scale.percentiles([0.001]), "entities_returned_mean": 5.0}}
    results["memory_servers"] = {
        "batch": 100, "queries": 1, "spawn_to_tools_list": {"reference (npx)": {"median_ms": 1.0},
                                                            "duckgraph --tools memory": {"median_ms": 2.0}},
        "1k": {"entities": 1000, "relations": 5000, "reference": session, "duckgraph": session,
               "ratio_duckgraph_over_reference": {"spawn_to_ready": 1, "create": 1, "search_nodes_p50": 1,
                                                  "open_nodes_p50": 1}},
    }
    assert "create entities + relations s" in scale.render(results)


def test_reuse_measures_the_kept_file_without_building_it(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(scale, "run_worker", lambda phase, **arguments: calls.append((phase, arguments)) or {})
    args = argparse.Namespace(reuse=True, keep=False, seed=0, queries=5, index_timeout=1, startup_runs=0)
    with pytest.raises(SystemExit, match="there is no .*scale-1k.duckdb; build it first with --workdir"):
        scale.measure_size(1_000, args, tmp_path, None)
    kept = tmp_path / "scale-1k.duckdb"
    kept.write_bytes(b"a kept file")
    row = scale.measure_size(1_000, args, tmp_path, None)
    assert [phase for phase, _ in calls] == ["serve"] and calls[0][1]["db"] == str(kept)
    assert row["reused"] == str(kept) and "build" not in row
    assert kept.read_bytes() == b"a kept file"  # neither rebuilt nor deleted afterwards


def test_sizes_parse_and_print():
    assert [scale.parse_size(s) for s in ("10k", "100K", "1M", "2500")] == [10_000, 100_000, 1_000_000, 2_500]
    assert [scale.size_label(n) for n in (10_000, 1_000_000, 2_500)] == ["10k", "1M", "2500"]


def test_startup_notes_a_package_every_spawn_would_compile(tmp_path, monkeypatch):
    """With bytecode writing off, modules without an up-to-date compiled file (an editable install, or one edited
    since) are compiled at each spawn: the start-up figures then carry a note; not once they are compiled, nor
    with writing on."""
    import importlib.machinery
    import importlib.util
    import py_compile

    import startup

    package = tmp_path / "core"
    package.mkdir()
    (package / "server.py").write_text("SERVED = True\n")
    (package / "tools.py").write_text("TOOLS = ()\n")
    spec = importlib.machinery.ModuleSpec("duckgraph.core", None, is_package=True)
    spec.submodule_search_locations = [str(package)]
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: spec if name == "duckgraph.core" else None if name.startswith("duckgraph.")
                        else real_find_spec(name, *a))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert "2 of duckgraph's modules have no up-to-date compiled bytecode" in startup.compiling_note()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert startup.compiling_note() is None
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for module in ("server.py", "tools.py"):
        py_compile.compile(str(package / module))
    assert startup.compiling_note() is None
    (package / "tools.py").write_text("TOOLS = ('edited since',)\n")  # another size: its compiled file is stale
    assert "1 of duckgraph's modules" in startup.compiling_note()


def test_the_targets_table_judges_what_the_run_measured():
    serve = {"search_query_pre_embedded": {"p50_ms": 10.4}, "expansion_2_hops": {"p50_ms": 5.0},
             "recall": {"recall_at_10": 0.95}}
    results = {
        "sizes": {"100k": {"build": {"nodes_per_second": 50_000.0}, "serve": serve},
                  "1M": {"build": {"nodes_per_second": 1_500.0},
                         "serve": {**serve, "search_query_pre_embedded": {"p50_ms": 25.0},
                                   "recall": {"recall_at_10": 0.949}}}},
        "embedding": {"duckgraph_over_raw": 0.79},
        "startup": {"duckgraph_minus_empty_ms": 100.0},
        "memory_servers": {"10k": {"ratio_duckgraph_over_reference": {"create": 4.5, "search_nodes_p50": 0.34,
                                                                      "open_nodes_p50": 1.0}}},
    }
    verdicts = {name: (measured, verdict) for name, measured, verdict in scale.target_rows(results)}
    assert verdicts["search p50 at 100k <= 10 ms (query pre-embedded)"] == ("10.4", "NOT met")
    assert verdicts["search p50 at 1M <= 25 ms (query pre-embedded)"] == ("25.0", "met")
    assert verdicts["2-hop expansion p50 at 1M <= 5 ms"] == ("5.0", "met")
    assert verdicts["bulk insert at 100k >= 50,000 nodes/s (embedding excluded)"] == ("50,000", "met")
    assert verdicts["bulk insert at 1M >= 50,000 nodes/s (embedding excluded)"] == ("1,500", "NOT met")
    assert verdicts["recall@10 at 100k >= 0.95"][1] == "met" and verdicts["recall@10 at 1M >= 0.95"][1] == "NOT met"
    assert verdicts["embedding throughput >= 0.8 x raw encode"] == ("0.79", "NOT met")
    assert verdicts["spawn -> tools/list <= empty server + 100 ms"] == ("100", "met")
    assert [verdicts[f"10k: {op}, duckgraph / reference < 1"][1] for op in ("create", "search_nodes", "open_nodes")] \
        == ["NOT met", "met", "NOT met"]
    del results["startup"], results["memory_servers"]
    verdicts = {name: verdict for name, _, verdict in scale.target_rows(results)}
    assert verdicts["spawn -> tools/list <= empty server + 100 ms"] == "not measured"
    assert verdicts["10k: create, duckgraph / reference < 1"] == "not measured"
