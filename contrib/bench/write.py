"""Bulk insert through `KnowledgeBase.add_knowledge_graph`, embedding excluded: nodes/s and edges/s per call, and
where a call's time goes (--profile).

    python contrib/bench/write.py [--nodes 50k] [--per-node 2] [--dims 384] [--batch 5000] [--profile]

Entities are generated ("Entity 17", typed, with a short description); each call adds `--batch` new entities and
about `--per-node` relations per entity, each naming entities stored so far (at most 10,000 per call, the tool's
limit). The embedder returns precomputed unit vectors looked up by text (computed before the timer starts), so the
numbers are the cost of validation, name resolution and the store's write. Prints per-call rates and the total,
and the time the close takes to checkpoint what the write-ahead log still holds (not in the rates).

Then, in the same run, the ceiling DuckDB sets: the same calls' vectors alone (one per node and one per edge),
written into the store's vector tables of a fresh file in one transaction per call, the way the store writes
them (its checkpoint threshold too), with nothing else (no graph rows, no validation): the rate
add_knowledge_graph could not pass here.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from duckgraph.core.domain.model import MAX_EDGES_PER_CALL, EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.texts import edge_text, node_text
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.settings import CHECKPOINT_THRESHOLD, apply_write_settings
from duckgraph.plugins.duckdb.vector_tables import PRECISION, VECTOR_TABLES, create as create_vector_tables, insert_vectors
from duckgraph.ports import Embedder, EdgeWrite, NodeRecord, entity_key, relation_type


class TableEmbedder(Embedder):
    """Vectors by text from a table filled before timing; a text not in it gets a vector on the spot."""

    batch_size = 4096

    def __init__(self, dimensions: int) -> None:
        self._dimensions = dimensions
        self.table: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(0)

    @property
    def id(self) -> str:
        return f"bench:table-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def fill(self, texts: Sequence[str]) -> None:
        vectors = self.rng.standard_normal((len(texts), self._dimensions)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        self.table.update(zip(texts, vectors))

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return np.vstack([self.table[t] if t in self.table else self._one(t) for t in texts])

    def _one(self, text: str) -> np.ndarray:
        self.fill([text])
        return self.table[text]


def parse_size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def calls(total: int, batch: int, per_node: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    types = ("Person", "Company", "Place", "Product")
    relations = ("works at", "lives in", "knows", "makes")
    for start in range(0, total, batch):
        stop = min(total, start + batch)
        nodes = [NodeInput(name=f"Entity {i}", type=types[i % 4], description=f"Generated entity number {i}.")
                 for i in range(start, stop)]
        count = min(MAX_EDGES_PER_CALL, int(per_node * (stop - start)))
        sources = rng.integers(start, stop, count)
        targets = rng.integers(0, stop, count)
        edges = [EdgeInput(source=f"Entity {s}", target=f"Entity {t}", type=relations[(s + t) % 4])
                 for s, t in zip(sources.tolist(), targets.tolist()) if s != t]
        yield nodes, edges


def texts_of(nodes: Sequence[NodeInput], edges: Sequence[EdgeInput]) -> list[str]:
    names = {entity_key(n.name): n.name for n in nodes}
    out = [node_text(NodeRecord(namespace="", key=entity_key(n.name), name=n.name, type=n.type,
                                description=n.description or "")) for n in nodes]
    for e in edges:
        names.setdefault(entity_key(e.source), e.source)
        names.setdefault(entity_key(e.target), e.target)
        out.append(edge_text(EdgeWrite(namespace="", source_key=entity_key(e.source), target_key=entity_key(e.target),
                                       type=relation_type(e.type)), names))
    return out


def vectors_alone(folder: Path, counts: Sequence[tuple[int, int]], dimensions: int,
                  checkpoint_threshold: str = CHECKPOINT_THRESHOLD) -> tuple[float, float]:
    """Seconds to write (nodes, edges) vectors per call into the vector tables of a fresh file, one transaction
    per call, and then to checkpoint at close."""
    import duckdb

    rng = np.random.default_rng(1)
    calls = [tuple(rng.standard_normal((count, dimensions)).astype(np.float32) for count in pair) for pair in counts]
    con = duckdb.connect(str(folder / "vectors-alone.duckdb"))
    apply_write_settings(con, checkpoint_threshold)  # as the store writes
    create_vector_tables(con, dimensions)
    next_id = {"node": 1, "edge": 1}
    began = time.perf_counter()
    for node_vectors, edge_vectors in calls:
        con.execute("BEGIN")
        for kind, vectors in (("node", node_vectors), ("edge", edge_vectors)):
            ids = range(next_id[kind], next_id[kind] + len(vectors))
            insert_vectors(con, VECTOR_TABLES[kind][0], ids, vectors, dimensions, replace=False,
                           precision=PRECISION[kind])
            next_id[kind] += len(vectors)
        con.execute("COMMIT")
    writing = time.perf_counter() - began
    began = time.perf_counter()
    con.close()
    return writing, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="50k")
    parser.add_argument("--per-node", type=float, default=2.0)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--checkpoint-threshold", default=CHECKPOINT_THRESHOLD,
                        help=f"DuckDB's checkpoint_threshold for the run (default: the store's {CHECKPOINT_THRESHOLD})")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sort", default="cumtime", help="profile order: cumtime or tottime")
    args = parser.parse_args()
    total = parse_size(args.nodes)
    embedder = TableEmbedder(args.dims)
    plan = list(calls(total, args.batch, args.per_node))
    for nodes, edges in plan:
        embedder.fill(texts_of(nodes, edges))
    folder = Path(tempfile.mkdtemp(prefix="duckgraph-write-bench-"))
    try:
        kb = KnowledgeBase(DuckDBStore(folder / "kb.duckdb"), embedder)
        kb.open()
        apply_write_settings(kb.store._con, args.checkpoint_threshold)  # the store's own unless the flag says
        profile = cProfile.Profile() if args.profile else None
        seconds, node_count, edge_count = [], 0, 0
        began = time.perf_counter()
        for nodes, edges in plan:
            start = time.perf_counter()
            if profile:
                profile.enable()
            kb.add_knowledge_graph(nodes, edges)
            if profile:
                profile.disable()
            seconds.append(time.perf_counter() - start)
            node_count += len(nodes)
            edge_count += len(edges)
        elapsed = time.perf_counter() - began
        per_call = [len(n) / s for (n, _), s in zip(plan, seconds)]
        print(f"{node_count:,} nodes and {edge_count:,} edges ({args.dims}-d vectors for both) in {len(plan)} calls: "
              f"{elapsed:.1f} s = {node_count / elapsed:,.0f} nodes/s ({(node_count + edge_count) / elapsed:,.0f} "
              f"nodes+edges/s); per call median {statistics.median(per_call):,.0f} nodes/s, last {per_call[-1]:,.0f}")
        began = time.perf_counter()
        kb.close()  # the checkpoint of what the log still holds
        print(f"close (final checkpoint): {time.perf_counter() - began:.1f} s")
        writing, closing = vectors_alone(folder, [(len(n), len(e)) for n, e in plan], args.dims,
                                         args.checkpoint_threshold)
        vector_count = node_count + edge_count
        print(f"the same calls' vectors alone through DuckDB: {writing:.1f} s = {node_count / writing:,.0f} nodes/s "
              f"({vector_count / writing:,.0f} vectors/s; add_knowledge_graph's time is {elapsed / writing:.1f}x "
              f"this), close {closing:.1f} s")
        if profile:
            pstats.Stats(profile).sort_stats(args.sort).print_stats(30)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
