"""Spawn-to-`tools/list` time of `duckgraph serve` against an empty server on the same MCP SDK.

Both are spawned alternately, several times, in the same run; the script prints min / median / max for each
and the difference of the medians. Usage:

    python contrib/bench/startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import importlib.util
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
    """A warning when spawns will compile duckgraph's modules: bytecode writing is off (PYTHONDONTWRITEBYTECODE,
    which the spawned servers inherit) and some module has no up-to-date compiled file, as in an editable install
    or a checkout edited since (pip byte-compiles a wheel as it installs it: the README's install pays nothing)."""
    if not sys.dont_write_bytecode:
        return None
    stale = 0
    for package in ("duckgraph.core", "duckgraph.plugins", "duckgraph.ports"):
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            stale += sum(not _compiled(source) for source in Path(folder).glob("*.py"))
    if not stale:
        return None
    return (f"note: PYTHONDONTWRITEBYTECODE is set and {stale} of duckgraph's modules have no up-to-date "
            "compiled bytecode (an editable install?): every spawn of duckgraph compiles them, which an installed "
            "wheel does not")


def _compiled(source: Path) -> bool:
    """Whether `source` has a compiled file Python would use as it is (its header records this source's
    modification time and size, or it is checked by hash)."""
    try:
        header = Path(importlib.util.cache_from_source(str(source))).read_bytes()[:16]
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") & 1:  # hash-based: valid until the source changes its hash
        return True
    stat = source.stat()
    return (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


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
