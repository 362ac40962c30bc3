"""Vector search paths of the DuckDB store, measured on real-shaped embeddings: build time, recall@10 against an
exact scan, and query time, for the exact numpy scan, the IVF index (duckgraph.plugins.duckdb.mirror.vectors) and,
optionally, vss HNSW with given build parameters.

    python contrib/bench/vectors.py [--sizes 100k,1M] [--queries 200] [--hnsw 100k] [--hnsw-m 16]
                                    [--hnsw-ef-construction 64] [--nprobe-sweep]

Stored vectors: `_data.synthetic(n)` (the real MiniLM vectors of the MuSiQue texts, then mixtures of two of them
plus noise). Queries: real MiniLM embeddings of held-out texts (`_data.queries`), never stored. Numbers are
medians over the queries, in one process, on whatever else the machine runs: compare rows of the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

import _data  # noqa: E402
from duckgraph.plugins.duckdb.mirror.vectors import VectorIndex  # noqa: E402


def parse_size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    out = np.empty((len(queries), k), dtype=np.int64)
    for i in range(0, len(queries), 32):
        scores = queries[i : i + 32] @ matrix.T
        out[i : i + 32] = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return out


CPU: list[float] = []


def timed(fn, queries):
    """(p50 ms, p95 ms, results) of wall time; the p50 of this thread's CPU time goes to CPU[-1] (steadier than
    wall time on a busy machine: a query runs on one core)."""
    times, cpu, results = [], [], []
    for q in queries:
        began, began_cpu = time.perf_counter(), time.thread_time()
        results.append(fn(q))
        times.append(time.perf_counter() - began)
        cpu.append(time.thread_time() - began_cpu)
    CPU.append(statistics.median(cpu) * 1e3)
    return statistics.median(times) * 1e3, float(np.percentile(np.asarray(times) * 1e3, 95)), results


def recall(results, truth_ids) -> float:
    return float(np.mean([len({i for i, _ in got} & set(want.tolist())) / len(want)
                          for got, want in zip(results, truth_ids)]))


def measure_ivf(n: int, queries: np.ndarray, sweep: bool) -> None:
    matrix = _data.synthetic(n)
    ids = np.arange(1, n + 1, dtype=np.int64)
    truth = ids[exact_top(matrix, queries, 10)]
    exact = VectorIndex(matrix.shape[1], ann_min_rows=None)
    exact.upsert(ids, matrix, "default")
    p50, p95, results = timed(lambda q: exact.search(q, 10, "default"), queries)
    print(f"{n:>9,} exact numpy scan   query p50 {p50:7.2f} ms (CPU {CPU[-1]:.2f} ms)  p95 {p95:7.2f} ms  "
          f"recall@10 {recall(results, truth):.3f}", flush=True)
    del matrix  # the index holds the only copy from here on (the build holds a second one while it reorders)
    index = exact
    index.ann_min_rows = 1
    began = time.perf_counter()
    index.maybe_build(background=False)
    seconds = time.perf_counter() - began
    info = index.build_info
    p50, p95, results = timed(lambda q: index.search(q, 10, "default"), queries)
    print(f"{n:>9,} ivf build {seconds:6.1f} s (train {info['train_seconds']} s, assign+copy+tune "
          f"{info['assign_seconds']} s), {info['lists']} lists, tuned nprobe {info['nprobe']}: query p50 {p50:6.2f} ms "
          f"(CPU {CPU[-1]:.2f} ms) p95 {p95:6.2f} ms  recall@10 {recall(results, truth):.3f}  (peak RSS so far "
          f"{rss_mb()} MB)", flush=True)
    print(f"{n:>9,} ivf path: {index.mode()}; the projected scan kept {info['reduction_kept']} of the tuning "
          "queries' neighbours", flush=True)
    p50, _, _ = timed(lambda q: index.search(q, 20, "default"), queries)
    print(f"{n:>9,} ivf k=20 (what retrieval asks for anchors) query p50 {p50:6.2f} ms (CPU {CPU[-1]:.2f} ms)",
          flush=True)
    if sweep:
        tuned = index.nprobe
        for nprobe in sorted({max(1, tuned // 4), max(1, tuned // 2), tuned, tuned * 2, tuned * 4}):
            index.nprobe = nprobe
            p50, _, results = timed(lambda q: index.search(q, 10, "default"), queries)
            print(f"{n:>9,}   nprobe {nprobe:5d}: query p50 {p50:6.2f} ms (CPU {CPU[-1]:.2f} ms)  recall@10 "
                  f"{recall(results, truth):.3f}", flush=True)
        index.nprobe = tuned


def measure_hnsw(n: int, queries: np.ndarray, m: int, ef_construction: int, ef_search: int) -> None:
    import duckdb

    from duckgraph.plugins.duckdb.mirror.hnsw import vss_extension_path
    from duckgraph.plugins.duckdb.vector_tables import insert_vectors

    matrix = _data.synthetic(n)
    d = matrix.shape[1]
    ids = np.arange(1, n + 1, dtype=np.int64)
    truth = ids[exact_top(matrix, queries, 10)]
    con = duckdb.connect(":memory:")
    con.execute(f"LOAD '{vss_extension_path()}'")
    con.execute(f"CREATE TABLE v (id BIGINT PRIMARY KEY, e FLOAT[{d}])")
    for start in range(0, n, 20_000):
        insert_vectors(con, "v", ids[start : start + 20_000], matrix[start : start + 20_000], d, replace=False)
    began = time.perf_counter()
    con.execute(f"CREATE INDEX v_hnsw ON v USING HNSW (e) WITH (metric = 'cosine', M = {m}, "
                f"ef_construction = {ef_construction}, ef_search = {ef_search})")
    seconds = time.perf_counter() - began

    def search(q):
        literal = "[" + ",".join(repr(float(x)) for x in q) + "]"
        rows = con.execute(f"SELECT id, array_cosine_distance(e, {literal}::FLOAT[{d}]) AS dist FROM v "
                           "ORDER BY dist LIMIT 10").fetchall()
        return [(int(i), 1 - dist) for i, dist in rows]

    p50, p95, results = timed(search, queries)
    print(f"{n:>9,} vss hnsw M={m} ef_construction={ef_construction} ef_search={ef_search}: build {seconds:6.1f} s "
          f"({n / seconds:,.0f} vectors/s), query p50 {p50:6.2f} ms (CPU {CPU[-1]:.2f} ms) p95 {p95:6.2f} ms  "
          f"recall@10 {recall(results, truth):.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100k,1M")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--nprobe-sweep", action="store_true")
    parser.add_argument("--hnsw", default="", help="sizes to build vss HNSW indexes for (slow: ~500 vectors/s)")
    parser.add_argument("--hnsw-m", type=int, default=16)
    parser.add_argument("--hnsw-ef-construction", type=int, default=128)
    parser.add_argument("--hnsw-ef-search", type=int, default=64)
    args = parser.parse_args()
    queries = _data.queries(args.queries)
    print(f"{len(queries)} real held-out queries; stored vectors: _data.synthetic(n); {os.cpu_count()} CPUs")
    for size in [parse_size(s) for s in args.sizes.split(",") if s]:
        measure_ivf(size, queries, args.nprobe_sweep)
    for size in [parse_size(s) for s in args.hnsw.split(",") if s]:
        measure_hnsw(size, queries, args.hnsw_m, args.hnsw_ef_construction, args.hnsw_ef_search)


if __name__ == "__main__":
    main()
