"""What search's time filters cost: `search` p50 with `as_of`, with a window (`after`/`before`) and with
`include_history`, against plain `search`, in the same run on the same file.

    python contrib/bench/time_filters.py [--size 100k] [--queries 100] [--rounds 3] [--workdir DIR] [--reuse]

The file is scale.py's generated graph (entities, ~5 relations each, a passage per 5 entities; vectors
precomputed, embedding excluded). Once built, a share of its relations (--timed, default 30%) gets a validity in
SQL, half of those ended, and every document a time spread over 2020-2025: a benchmark's setup, not the write
path. Queries are pre-embedded; each query runs every variant in turn (plain first), --rounds times, so that all
variants meet the same caches. Prints p50 / p95 per variant and its ratio to plain; --json-out keeps them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import duckdb  # noqa: E402

import _data  # noqa: E402
import scale  # noqa: E402
from duckgraph.core.domain.knowledge_base import KnowledgeBase  # noqa: E402

VARIANTS = {
    "plain": {},
    "as_of 2023-01-01": {"as_of": datetime(2023, 1, 1)},
    "window 2023": {"after": datetime(2023, 1, 1), "before": datetime(2024, 1, 1)},
    "include_history": {"include_history": True},
}


def add_time(db: Path, share: float, seed: int) -> dict[str, int]:
    """Give `share` of the relations a validity (half of them ended) and every document a time, in SQL."""
    con = duckdb.connect(str(db))
    try:
        con.execute("SELECT setseed(?)", [seed / 1000])
        con.execute(
            "UPDATE edges SET valid_from = TIMESTAMP '2020-01-01' + to_days(CAST(random() * 1500 AS INTEGER)) "
            "WHERE random() < ?", [share])
        con.execute("UPDATE edges SET valid_until = valid_from + to_days(CAST(30 + random() * 700 AS INTEGER)) "
                    "WHERE valid_from IS NOT NULL AND random() < 0.5")
        con.execute("UPDATE documents SET time = TIMESTAMP '2020-01-01' + to_days(CAST(random() * 2000 AS INTEGER))")
        timed = con.execute("SELECT count(*) FILTER (WHERE valid_from IS NOT NULL), "
                            "count(*) FILTER (WHERE valid_until IS NOT NULL), count(*) FROM edges").fetchone()
    finally:
        con.close()
    return {"edges_with_validity": timed[0], "edges_ended": timed[1], "edges": timed[2]}


def measure(db: Path, n: int, queries: int, rounds: int, seed: int) -> dict[str, dict[str, float]]:
    texts = _data.questions(_data.entities(n, seed), queries, seed)
    embedder = scale.PrecomputedEmbedder(scale.default_embedder().id, _data.base_vectors())
    embedder.prepare(texts)
    kb = KnowledgeBase(scale.default_store(db), embedder)
    kb.open()
    try:
        scale.wait_for_index(kb.store, time.perf_counter(), 3600.0)
        for text in texts[:5]:  # warm up every path before timing
            for options in VARIANTS.values():
                kb.search(text, **options)
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        returned: dict[str, list[int]] = {name: [] for name in VARIANTS}
        for _ in range(rounds):
            for text in texts:
                for name, options in VARIANTS.items():
                    began = time.perf_counter()
                    found = kb.search(text, **options)
                    seconds[name].append(time.perf_counter() - began)
                    returned[name].append(len(found.edges) + len(found.passages))
    finally:
        kb.close()
    result = {name: {**scale.percentiles(times), "facts_and_passages_mean": round(sum(returned[name]) /
                                                                                  len(returned[name]), 2)}
              for name, times in seconds.items()}
    plain = result["plain"]["p50_ms"]
    for entry in result.values():
        entry["p50_vs_plain"] = round(entry["p50_ms"] / plain, 3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="100k", help="entities (10k, 100k, 1M)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timed", type=float, default=0.3, help="share of relations given a validity")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, help="where the file is built (default: a temporary folder)")
    parser.add_argument("--reuse", action="store_true", help="measure the file already in --workdir")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    n = scale.parse_size(args.size)
    workdir = args.workdir or Path(__import__("tempfile").mkdtemp(prefix="duckgraph-time-"))
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / f"time-{scale.size_label(n)}.duckdb"
    result: dict = {"size": n, "machine": scale.machine()}
    if not args.reuse:
        scale.remove_database(db)
        scale.progress(f"building {scale.size_label(n)} entities in {db}")
        result["build"] = scale.measure_build(db, n, seed=args.seed)
        result["time_setup"] = add_time(db, args.timed, args.seed)
    scale.progress("searching")
    result["search"] = measure(db, n, args.queries, args.rounds, args.seed)
    print(f"search at {scale.size_label(n)} entities ({args.queries} queries x {args.rounds} rounds, same run):")
    print(f"{'variant':<20} {'p50 ms':>8} {'p95 ms':>8} {'p50/plain':>10} {'facts+passages':>15}")
    for name, entry in result["search"].items():
        print(f"{name:<20} {entry['p50_ms']:>8} {entry['p95_ms']:>8} {entry['p50_vs_plain']:>10} "
              f"{entry['facts_and_passages_mean']:>15}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
