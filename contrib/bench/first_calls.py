"""The first calls a freshly spawned `duckgraph serve` answers, and the memory it holds once warm, for embedder
options compared in the same run.

Each variant's server is spawned on a new file, alternately with the others, several times. Right after its
`tools/list` answer it gets a search (of the empty file: what it waits for is the query model and the file), then a
write (`--nodes` entities with `--edges` relations among them, through `add_knowledge_graph`), then a search; once
its warm-up has had `--settle` seconds, its resident memory (VmRSS) and peak (VmHWM) are read from /proc. Prints
min / median / max of each per variant. Usage:

    python contrib/bench/first_calls.py [--runs 3] [--variant onnx_batches='{}'] [--variant pytorch_batches=\
'{"onnx_batches": false}']

A variant is name=JSON, the embedder options (DUCKGRAPH_EMBEDDER_OPTIONS) it runs with; by default the two above.
The ONNX export must be cached already (any earlier server's warm-up leaves it) for the first write to be served
without PyTorch.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]
DEFAULT_VARIANTS = {"onnx_batches": "{}", "pytorch_batches": '{"onnx_batches": false}'}


class Session:
    """JSON-RPC over a spawned server's stdio, one request at a time."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.next_id = 1

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        ident, self.next_id = self.next_id, self.next_id + 1
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, **({"params": params} if params else {})})
        for line in self.process.stdout:
            reply = json.loads(line)
            if reply.get("id") == ident:
                if "result" not in reply or reply["result"].get("isError"):
                    raise RuntimeError(f"{method} failed: {str(reply)[:500]}")
                return reply["result"]
        raise RuntimeError(f"the server exited before answering {method}")

    def send(self, message: dict[str, Any]) -> None:
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()


def memory_mb(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return {"rss_mb": fields["VmRSS"], "peak_mb": fields["VmHWM"]}


def graph(nodes: int, edges: int) -> dict[str, Any]:
    people = [{"name": f"Person {i}", "type": "Person", "description": f"Person number {i}, who works on project "
               f"{i % 13} and lives in city {i % 7}."} for i in range(nodes)]
    kinds = ("works with", "reports to", "mentors", "knows")
    links = [{"source": f"Person {i % nodes}", "target": f"Person {(i * 7 + 3) % nodes}", "type": kinds[i % 4]}
             for i in range(edges) if i % nodes != (i * 7 + 3) % nodes]
    return {"nodes": people, "edges": links}


def one_run(options: str, folder: Path, arguments: dict[str, Any], settle: float) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKGRAPH_")}  # the defaults but the options
    env.update(DUCKGRAPH_EMBEDDER="sentence-transformers", DUCKGRAPH_EMBEDDER_OPTIONS=options, HF_HUB_OFFLINE="1")
    db = folder / f"kb-{time.monotonic_ns()}.duckdb"
    began = time.perf_counter()
    process = subprocess.Popen([*SERVE, "--db", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=env, text=True)
    session = Session(process)
    try:
        session.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "bench", "version": "0"}})
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        session.request("tools/list")
        ready = time.perf_counter()
        session.request("tools/call", {"name": "search", "arguments": {"query": "who works with Person 3?"}})
        first = time.perf_counter()
        session.request("tools/call", {"name": "add_knowledge_graph", "arguments": arguments})
        written = time.perf_counter()
        session.request("tools/call", {"name": "search", "arguments": {"query": "who works with Person 3?"}})
        searched = time.perf_counter()
        time.sleep(max(0.0, settle - (searched - began)))
        return {"tools_list_ms": (ready - began) * 1e3, "first_search_ms": (first - ready) * 1e3,
                "then_write_ms": (written - first) * 1e3, "then_search_ms": (searched - written) * 1e3,
                **memory_mb(process.pid)}
    finally:
        process.stdin.close()
        process.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--edges", type=int, default=100)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds from spawn before memory is read")
    parser.add_argument("--variant", action="append", help="name=JSON embedder options (repeatable)")
    args = parser.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) if args.variant else DEFAULT_VARIANTS
    arguments = graph(args.nodes, args.edges)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="duckgraph-first-calls-") as scratch:
        for run in range(args.runs):
            for name, options in variants.items():
                results[name].append(one_run(options, Path(scratch), arguments, args.settle))
                print(f"run {run + 1} {name}: " + ", ".join(f"{k} {v:,.0f}" for k, v in results[name][-1].items()),
                      file=sys.stderr, flush=True)
    print(f"a search right after tools/list, then {args.nodes} entities and {len(arguments['edges'])} relations "
          f"written, then a search; memory {args.settle:.0f} s after spawn; min / median / max of {args.runs} runs")
    for name, runs in results.items():
        print(f"{name} ({variants[name]}):")
        for key in runs[0]:
            values = [r[key] for r in runs]
            print(f"  {key:>16}: {min(values):8,.0f} {statistics.median(values):8,.0f} {max(values):8,.0f}")


if __name__ == "__main__":
    main()
