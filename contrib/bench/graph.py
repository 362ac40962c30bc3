"""Graph reads of the DuckDB store at scale: a capped 2-hop expansion through `neighbors()` (as core/domain/retrieval.py
and contrib/bench/scale.py walk), `links()`, `find_nodes`, `get_nodes`, `get_edges`, against the SQL the store used
before the in-memory graph mirror, on the same file in the same run.

    python contrib/bench/graph.py [--nodes 1M] [--edges 5M] [--db PATH] [--keep] [--runs 100]

The file is generated with SQL straight into the store's tables (no vectors): node ids 1..n, edges with a uniform
source and a heavy-tailed target (target = n * u^3, so low ids are hubs with thousands of edges), 1% of them
expired. A --db file that already holds the asked sizes is reused. Prints p50 / p95 in ms and the process's RSS.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import EdgeRecord

ANCHORS, HOPS, FRONTIER, LIMIT = 5, 2, 100, 2000
OLD_NEIGHBORS = (
    "SELECT id, source_id, target_id, type, description, weight, properties, valid_from, valid_until, created_at, "
    "updated_at FROM edges WHERE source_id IN (SELECT unnest($1)) AND namespace = $2 AND valid_until IS NULL UNION "
    "SELECT id, source_id, target_id, type, description, weight, properties, valid_from, valid_until, created_at, "
    "updated_at FROM edges WHERE target_id IN (SELECT unnest($1)) AND namespace = $2 AND valid_until IS NULL "
    f"ORDER BY weight DESC, id LIMIT {LIMIT}"
)


def parse_size(text: str) -> int:
    """'10k', '1M', '2_500' -> a count."""
    text = text.strip().lower().replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size in MB."""
    current = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            current = int(line.split()[1]) / 1024
    return round(current, 1), round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def generate(path: Path, nodes: int, edges: int) -> None:
    store = DuckDBStore(path)
    store.open()
    con = store._con
    began = time.perf_counter()
    con.execute("BEGIN")
    con.execute(
        "INSERT INTO nodes SELECT i, 'default', 'entity ' || i, 'Entity ' || i, ['Person', 'Company', 'Place'][i % 3 + 1], "
        "'', [], '{}', now()::TIMESTAMP, now()::TIMESTAMP FROM range(1, $1 + 1) r(i)", [nodes])
    con.execute("INSERT INTO node_names SELECT 'default', 'entity ' || i, i FROM range(1, $1 + 1) r(i)", [nodes])
    con.execute(
        "INSERT INTO edges SELECT i + 1, 'default', s, CASE WHEN t = s THEN s % $1 + 1 ELSE t END, "
        "['WORKS_AT', 'LIVES_IN', 'KNOWS', 'MAKES'][i % 4 + 1], '', 0.5 + (hash(i) % 100) / 200.0, '{}', "
        "now()::TIMESTAMP, CASE WHEN i % 100 = 0 THEN now()::TIMESTAMP END, now()::TIMESTAMP, now()::TIMESTAMP "
        "FROM (SELECT i, (hash(i) % $1) + 1 AS s, "
        "least($1, greatest(1, floor($1 * pow((hash(i * 7 + 3) % 1000003) / 1000003.0, 3))::BIGINT + 1)) AS t "
        "FROM range($2) r(i))", [nodes, edges])
    for sequence, start in (("node_ids", nodes + 1), ("edge_ids", edges + 1)):
        con.execute(f"DROP SEQUENCE {sequence}")
        con.execute(f"CREATE SEQUENCE {sequence} START {int(start)}")
    con.execute("COMMIT")
    store.close()
    print(f"generated {nodes:,} nodes and {edges:,} edges in {time.perf_counter() - began:.0f} s", flush=True)


def record_ends(edges) -> list[tuple[int, int]]:
    """The (source, target) of each edge record, as `neighbors()` returns them."""
    return [(edge.source_id, edge.target_id) for edge in edges]


def array_ends(ends) -> list[tuple[int, int]]:
    """The (source, target) of each edge of `neighbor_ends()`'s arrays."""
    return list(zip(ends[1].tolist(), ends[2].tolist()))


def expansion(fetch, anchors: list[int], ends=record_ends) -> int:
    """A capped expansion as core/domain/retrieval.py walks: HOPS hops, the first FRONTIER new nodes carried into the next
    (retrieval ranks them first). `fetch(frontier)` returns edges, `ends(edges)` their (source, target) pairs.
    Returns how many edges were fetched. Also used by contrib/bench/scale.py."""
    reached, frontier, count = set(anchors), list(anchors), 0
    for _ in range(HOPS):
        pairs = ends(fetch(frontier))
        count += len(pairs)
        new = []
        for pair in pairs:
            for end in pair:
                if end not in reached:
                    reached.add(end)
                    new.append(end)
        frontier = new[:FRONTIER]
        if not frontier:
            break
    return count


def timed(fn, runs: int) -> str:
    """Wall time p50 / p95, and the p50 of this thread's CPU time (steadier on a busy machine; the mirror's reads
    run on one thread)."""
    times, cpu = [], []
    for i in range(runs):
        began, began_cpu = time.perf_counter(), time.thread_time()
        fn(i)
        times.append((time.perf_counter() - began) * 1e3)
        cpu.append((time.thread_time() - began_cpu) * 1e3)
    return (f"p50 {statistics.median(times):8.2f} ms  p95 {np.percentile(times, 95):8.2f} ms  "
            f"(CPU p50 {statistics.median(cpu):7.2f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1M")
    parser.add_argument("--edges", default="5M")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--sql-runs", type=int, default=10, help="runs of the old SQL path (slow)")
    args = parser.parse_args()
    nodes, edges = parse_size(args.nodes), parse_size(args.edges)
    folder = None
    path = args.db
    if path is None:
        folder = Path(tempfile.mkdtemp(prefix="duckgraph-graph-bench-"))
        path = folder / "graph.duckdb"
    try:
        if not path.exists():
            generate(path, nodes, edges)
        print(f"RSS before open (MB, current / peak): {rss_mb()}")
        store = DuckDBStore(path)
        began = time.perf_counter()
        store.open()
        print(f"open (loads the graph mirror): {time.perf_counter() - began:.1f} s; RSS after open (MB, current / "
              f"peak): {rss_mb()}; {store.health()['graph_in_memory']}", flush=True)
        nodes = store._con.execute("SELECT max(id) FROM nodes").fetchone()[0]  # a reused file has its own size
        rng = np.random.default_rng(0)
        # Anchors for the timed runs; the ids-only runs and the "fresh anchors" runs use the last ones (records of
        # their edges not built yet: the cost of a cold EdgeRecord cache).
        anchor_sets = [rng.integers(1, nodes + 1, size=ANCHORS).tolist() for _ in range(3 * max(args.runs, args.sql_runs))]
        sizes = [expansion(lambda f: store.neighbors(f, "default", limit=LIMIT), a) for a in anchor_sets[:20]]
        print(f"edges returned per 2-hop expansion (median of 20): {statistics.median(sizes):.0f}")
        print("2-hop expansion, neighbors() (mirror):        ",
              timed(lambda i: expansion(lambda f: store.neighbors(f, "default", limit=LIMIT), anchor_sets[i]), args.runs))

        def ends_expansion(anchors: list[int]) -> int:
            return expansion(lambda f: store.neighbor_ends(f, "default", limit=LIMIT), anchors, ends=array_ends)

        print("2-hop expansion, neighbor_ends() (ids only):   ",
              timed(lambda i: ends_expansion(anchor_sets[-1 - i]), args.runs))
        print("2-hop expansion, neighbors(), fresh anchors:   ",
              timed(lambda i: expansion(lambda f: store.neighbors(f, "default", limit=LIMIT), anchor_sets[-1 - i]),
                    args.runs))

        def old_neighbors(frontier):
            rows = store._con.execute(OLD_NEIGHBORS, [list(frontier), "default"]).fetchall()
            return [EdgeRecord(*row[:6], {}, *row[7:]) for row in rows]

        print("2-hop expansion, the SQL neighbors() used before:",
              timed(lambda i: expansion(old_neighbors, anchor_sets[i]), args.sql_runs))
        hubs = list(range(1, 51))
        print("links() of 50 hub nodes:                      ", timed(lambda i: store.links(hubs, (), "default"), args.runs))
        some = [rng.integers(1, nodes + 1, size=50).tolist() for _ in range(args.runs)]
        print("links() of 50 random nodes:                   ", timed(lambda i: store.links(some[i], (), "default"), args.runs))
        print("find_nodes (40 candidate keys):               ",
              timed(lambda i: store.find_nodes("default", [f"entity {j}" for j in some[i][:20]] + [f"nothing {j}" for j in range(20)]), args.runs))
        print("get_nodes (30 ids):                           ", timed(lambda i: store.get_nodes(some[i][:30]), args.runs))
        print("get_edges (4 ids):                            ", timed(lambda i: store.get_edges(some[i][:4]), args.runs))
        print(f"RSS at the end (MB, current / peak): {rss_mb()}")
        store.close()
    finally:
        if folder is not None and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        elif folder is not None:
            print(f"kept {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
