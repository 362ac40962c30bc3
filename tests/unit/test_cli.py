"""Small command-line behaviours: every `search` flag explained, a closed stdout ends quietly, and
`serve --http` on a port in use says so before announcing anything."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.core.cli import _parser

DUCKGRAPH = [sys.executable, "-m", "duckgraph.core.cli"]


@pytest.fixture
def environment(tmp_path: Path) -> dict[str, str]:
    """A child's environment: no user config, no DUCKGRAPH_* variables."""
    config = tmp_path / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if not name.startswith("DUCKGRAPH_")}
    env["DUCKGRAPH_CONFIG"] = str(config)
    return env


def test_every_search_flag_has_help() -> None:
    subcommands = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    search = subcommands.choices["search"]
    undocumented = [a.dest for a in search._actions if not a.help and a.dest != "help"]
    assert undocumented == []
    text = search.format_help()
    for flag in ("--hops", "--k-anchors", "--max-nodes", "--max-passages", "--token-budget", "--as-of",
                 "--include-history", "--after", "--before"):
        assert flag in text


def test_stats_into_a_closed_pipe_ends_quietly(tmp_path: Path, environment: dict[str, str]) -> None:
    """`duckgraph stats --json | head`: the reader is gone before the output is written."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([*DUCKGRAPH, "stats", "--json", "--db", str(tmp_path / "kb.duckdb")], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, env=environment)
    finally:
        os.close(write_end)
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert done.returncode == 141  # as a command ended by SIGPIPE


def test_serve_http_on_a_port_in_use_names_it_and_announces_nothing(tmp_path: Path,
                                                                      environment: dict[str, str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*DUCKGRAPH, "serve", "--http", "--port", str(port), "--db", str(tmp_path / "kb.duckdb")],
                              capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 1
    assert "serving MCP" not in done.stderr
    assert done.stderr.strip() == (
        f"duckgraph: cannot serve MCP on 127.0.0.1 port {port}: the port is in use (another `duckgraph serve "
        "--http`, or another program). Stop that program, or choose another port with --port")
    assert done.stdout == ""
    assert not (tmp_path / "kb.duckdb").exists()
