"""Spawn-to-`tools/list` time of `duckgraph serve` against an empty server on the same MCP SDK.

Both are spawned alternately, several times, in the same run; the script prints min / median / max for each
and the difference of the medians. Usage:

    python contrib/bench/startup.py [--runs 10]
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

EMPTY_SERVER = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("empty")

@server.tool()
def ping() -> str:
    \"\"\"Answer pong.\"\"\"
    return "pong"

server.run()
"""


def time_to_tools_list(command: list[str], env: dict[str, str]) -> float:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=env, text=True)
    assert process.stdin and process.stdout
    process.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
    process.stdin.flush()
    try:
        for line in process.stdout:
            reply = json.loads(line)
            if reply.get("id") == 2:
                if "result" not in reply:
                    raise RuntimeError(f"tools/list failed: {reply}")
                return time.perf_counter() - start
        raise RuntimeError(f"{command} exited without answering tools/list")
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def compiling_note() -> str | None:
    """A warning when every spawn will compile duckgraph's modules: bytecode writing is off (PYTHONDONTWRITEBYTECODE,
    which the spawned servers inherit) and the package has no compiled files, as in an editable install (pip
    byte-compiles a wheel as it installs it, so the README's install does not pay this)."""
    import importlib.util

    if not sys.dont_write_bytecode:
        return None
    spec = importlib.util.find_spec("duckgraph.core.server")
    if spec is None or spec.origin is None or os.path.exists(importlib.util.cache_from_source(spec.origin)):
        return None
    return ("note: PYTHONDONTWRITEBYTECODE is set and duckgraph's modules have no compiled bytecode (an editable "
            "install?): every spawn of duckgraph compiles them, which an installed wheel does not")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        empty = Path(folder) / "empty_server.py"
        empty.write_text(EMPTY_SERVER)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "DUCKGRAPH_DB": str(Path(folder) / "kb.duckdb")}
        commands = {
            "empty MCPServer": [sys.executable, str(empty)],
            "duckgraph serve": [sys.executable, "-m", "duckgraph.core.cli", "serve"],
        }
        timings: dict[str, list[float]] = {name: [] for name in commands}
        time_to_tools_list(commands["duckgraph serve"], env)  # creates the file and warms the OS caches
        for _ in range(args.runs):
            for name, command in commands.items():
                timings[name].append(time_to_tools_list(command, env))
    print(f"{'server':<18}{'min ms':>9}{'median ms':>11}{'max ms':>9}")
    for name, values in timings.items():
        print(f"{name:<18}{min(values) * 1e3:>9.0f}{statistics.median(values) * 1e3:>11.0f}{max(values) * 1e3:>9.0f}")
    delta = statistics.median(timings["duckgraph serve"]) - statistics.median(timings["empty MCPServer"])
    print(f"duckgraph - empty (medians): {delta * 1e3:+.0f} ms")
    if note := compiling_note():
        print(note)


if __name__ == "__main__":
    main()
