"""End-to-end tests of the real server process: `duckgraph serve` spawned over stdio, as an MCP host runs it.

Each spawn that embeds something loads the real model in the child (about ten seconds), so the number of
spawns is kept small: two full sessions through the SDK's `Client` (with and without the background
warm-up), one raw JSON-RPC session that checks stdout byte by byte, and two cheap ones for broken setups.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.pipes import StdoutLines
from tests.e2e.scenario import DOCUMENTS, EDGES, NODES
from tests.e2e.test_mcp_inmemory import TOOLS as GRAPHRAG_TOOLS

pytestmark = pytest.mark.model

#: Generous: the child imports torch and loads the model on first use.
TIMEOUT_SECONDS = 180
SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]

RUBIN_DOCUMENTS = [d for d in DOCUMENTS if d["id"] == "doc-rubin"]
RUBIN_NODES = [n for n in NODES if n["source_ids"] == ["doc-rubin"]]
RUBIN_EDGES = [e for e in EDGES if e["source_ids"] == ["doc-rubin"]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    """The child's whole environment: offline, and a private HOME so no user config or data leaks in or out."""
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def console_script() -> str:
    """The installed `duckgraph` script of this interpreter's environment."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which("duckgraph", path=folder)
        if found:
            return found
    raise AssertionError("the duckgraph console script is not installed next to this Python")


def store_stats(path: Path) -> dict[str, Any]:
    store = DuckDBStore(path)
    store.open()
    try:
        return store.stats()
    finally:
        store.close()


class StdoutWatch:
    """A Client message handler that records what the transport could not parse (garbage on stdout)."""

    def __init__(self) -> None:
        self.problems: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.problems.append(message)


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


# -- full sessions through the SDK client --------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("warm_up", [False, True], ids=["no-warm-up", "warm-up"])
async def test_serve_over_stdio(tmp_path, db_path, child_env, warm_up):
    if warm_up:
        # The default; and the installed console script, as a host's config would name it.
        command, args = console_script(), ["serve", "--db", str(db_path)]
    else:
        child_env["DUCKGRAPH_WARM_UP"] = "0"
        command, args = SERVE[0], [*SERVE[1:], "--db", str(db_path)]
    params = StdioServerParameters(command=command, args=args, env=child_env, cwd=tmp_path)
    watch = StdoutWatch()
    stderr_path = tmp_path / "stderr.log"

    with stderr_path.open("w", encoding="utf-8") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(stdio_client(params, errlog=stderr), message_handler=watch) as client:
            assert client.server_info is None or client.server_info.name == "duckgraph"
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == GRAPHRAG_TOOLS

            docs = await call_ok(client, "add_documents", {"documents": RUBIN_DOCUMENTS})
            [stored] = docs["documents"]
            assert stored["id"] == "doc-rubin" and stored["chunk_ids"]
            graph = await call_ok(client, "add_knowledge_graph", {"nodes": RUBIN_NODES, "edges": RUBIN_EDGES})
            assert graph["nodes_created"] == len(RUBIN_NODES)
            assert graph["edges_created"] == len(RUBIN_EDGES)

            result = await client.call_tool("search", {"query": "Where did Vera Rubin work?"})
            assert not result.is_error, result.content
            found = result.structured_content

    assert watch.problems == [], "the server wrote something that is not a JSON-RPC message to stdout"
    assert found["anchors"][0]["name"] == "Vera Rubin"
    assert "Carnegie Institution for Science" in [n["name"] for n in found["nodes"]]
    top = found["passages"][0]
    assert (top["document_id"], top["chunk_id"]) == ("doc-rubin", stored["chunk_ids"][0])
    assert "Carnegie Institution" in top["text"] and isinstance(top["score"], float)
    assert result.content[0].text == found["text"]
    assert result.content[0].text.startswith("Relations:\n") and "\n- Vera Rubin [Person]" in result.content[0].text

    errors = stderr_path.read_text(encoding="utf-8")
    assert "Traceback" not in errors, errors
    stats = store_stats(db_path)
    assert (stats["nodes"], stats["edges"], stats["documents"]) == (len(RUBIN_NODES), len(RUBIN_EDGES), 1)


# -- stdout carries protocol messages only -------------------------------------------------------------


class RawSession:
    """Line-oriented JSON-RPC over a child's pipes, with every stdout line kept for inspection."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        assert self.process.stdout is not None
        self._out = StdoutLines(self.process.stdout)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        # json.dumps writes a float NaN as the bare token NaN, as some clients do.
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def response(self, request_id: int, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
        while True:
            try:
                line = self._out.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no response to request {request_id} within {timeout} s") from None
            if line is None:
                raise AssertionError(f"stdout closed before the response to request {request_id}")
            self.lines.append(line)
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    def rest(self, timeout: float = TIMEOUT_SECONDS) -> None:
        while (line := self._out.get(timeout=timeout)) is not None:
            self.lines.append(line)


def test_stdout_carries_only_json_rpc_messages(tmp_path, db_path, child_env):
    """Warm-up on (the default), so anything the model libraries print while loading would show up here."""
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            [*SERVE, "--db", str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env=child_env, cwd=tmp_path, text=True, encoding="utf-8",
        )
        try:
            session = RawSession(process)
            session.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "duckgraph-e2e", "version": "0"}}})
            init = session.response(1)
            assert init["result"]["protocolVersion"] == "2025-06-18"
            assert init["result"]["serverInfo"]["name"] == "duckgraph"
            assert "tools" in init["result"]["capabilities"]

            session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            session.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            tools = session.response(2)["result"]["tools"]
            assert {t["name"] for t in tools} == GRAPHRAG_TOOLS

            # NaN is not JSON, but Python clients send it as a bare token: it must be refused, not stored.
            session.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "add_knowledge_graph", "arguments": {
                    "nodes": [{"name": "Vera Rubin", "type": "Person"}, {"name": "Kent Ford", "type": "Person"}],
                    "edges": [{"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH",
                               "weight": float("nan")}]}}})
            refused = session.response(3)["result"]
            assert refused["isError"] is True
            assert "weight" in refused["content"][0]["text"] and "finite" in refused["content"][0]["text"]

            # A search embeds the query: by its answer the model is loaded, so the warm-up has had its say.
            session.send({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                          "params": {"name": "search", "arguments": {"query": "Who worked with Kent Ford?"}}})
            searched = session.response(4)["result"]
            assert not searched.get("isError"), searched
            assert searched["structuredContent"]["nodes"] == []  # the refused graph left nothing behind

            process.stdin.close()
            session.rest()
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

    assert len(session.lines) >= 4
    for line in session.lines:
        assert line.endswith("\n")
        message = json.loads(line)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line
    errors = stderr_path.read_text(encoding="utf-8")
    assert "Traceback" not in errors, errors
    stats = store_stats(db_path)
    assert (stats["nodes"], stats["edges"]) == (0, 0)


# -- broken setups -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_file_that_is_not_a_database_is_reported_by_the_tools(tmp_path, child_env):
    """The handshake and tools/list still work; every tool call says which file is wrong and why."""
    garbage = bytes(range(256)) * 256
    bad = tmp_path / "notes.duckdb"
    bad.write_bytes(garbage)
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(bad)], env=child_env,
                                   cwd=tmp_path)
    watch = StdoutWatch()
    stderr_path = tmp_path / "stderr.log"

    with stderr_path.open("w", encoding="utf-8") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(stdio_client(params, errlog=stderr), message_handler=watch) as client:
            tools = (await client.list_tools()).tools
            assert {t.name for t in tools} == GRAPHRAG_TOOLS
            calls = [
                ("search", {"query": "Vera Rubin"}),
                ("add_documents", {"documents": RUBIN_DOCUMENTS}),
                ("add_knowledge_graph", {"nodes": RUBIN_NODES[:1]}),
            ]
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, result.structured_content)
                message = result.content[0].text
                assert str(bad) in message, message
                assert "not a valid DuckDB database" in message, message
                assert "internal error" not in message
            # Still serving after the failures.
            assert {t.name for t in (await client.list_tools()).tools} == GRAPHRAG_TOOLS

    assert watch.problems == []
    assert bad.read_bytes() == garbage, "the server must not modify a file it cannot read"
    assert "Traceback" not in stderr_path.read_text(encoding="utf-8")


def test_a_configuration_error_stops_the_server_before_the_handshake_with_a_message(tmp_path, child_env):
    """Settings errors are not left for the handshake to trip over: the process says what is wrong and exits."""
    child_env["DUCKGRAPH_EMBEDDER"] = "no-such-embedder"
    initialize = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "duckgraph-e2e", "version": "0"}}})
    finished = subprocess.run(
        [*SERVE, "--db", str(tmp_path / "kb.duckdb")], input=initialize + "\n", capture_output=True, text=True,
        env=child_env, cwd=tmp_path, timeout=TIMEOUT_SECONDS,
    )
    assert finished.returncode == 1
    assert finished.stdout == ""
    assert "no embedder plugin with id 'no-such-embedder'" in finished.stderr
    assert "sentence-transformers" in finished.stderr  # the ids that would work
    assert "Traceback" not in finished.stderr


#: When stdin closes, by the warm-up's log: (the line to wait for, then how long to wait after it).
MOMENTS = {
    "at once": (None, 0.0),
    "while it opens the file": (None, 0.55),  # just after WARM_UP_DELAY_SECONDS
    "while it imports PyTorch": ("owns", 2.0),  # the import takes seconds after the file is open
    "right after the model loaded": ("loaded sentence-transformers model", 0.0),
    "while it exports the model": ("loaded sentence-transformers model", 1.0),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_a_server_closed_while_it_warms_up_exits_cleanly_within_two_seconds(tmp_path, db_path, child_env, moment):
    """The host may go away at any moment of the warm-up, and MCP clients kill the server ~2 s after closing its
    stdin: the server exits by itself before that, with status 0, its file checkpointed and closed and its socket
    removed, even in the middle of PyTorch's import or the ONNX export (no abort in native code)."""
    marker, delay = MOMENTS[moment]
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen([*SERVE, "--db", str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=stderr, env={**child_env, "DUCKGRAPH_LOG_LEVEL": "INFO"}, cwd=tmp_path,
                                   text=True, encoding="utf-8")
        session = RawSession(process)
        session.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "duckgraph-e2e", "version": "0"}}})
        session.response(1)
        session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if marker is not None:  # no export is cached in this HOME: the warm-up exports once the model is loaded
            deadline = time.monotonic() + TIMEOUT_SECONDS
            while marker not in stderr_path.read_text() and time.monotonic() < deadline:
                time.sleep(0.01)
        time.sleep(delay)
        before = stderr_path.read_text()
        closed = time.monotonic()
        process.stdin.close()
        status = process.wait(timeout=120)
        took = time.monotonic() - closed
        session.rest()
    log = stderr_path.read_text()
    assert status == 0, log
    assert took < 2.0, f"exited {took:.2f} s after stdin closed\n{log}"
    assert "Traceback" not in log and "terminate called" not in log
    if "loaded sentence-transformers model" in before and "ONNX export is ready" not in before:
        assert "the model's ONNX export is ready" not in log  # the export was under way: cut short, not waited for
    left = {p.name for p in tmp_path.iterdir()}
    assert not left & {"kb.duckdb.wal", "kb.duckdb.sock"}, left
    if db_path.exists():  # opened by the warm-up (unless it stopped first), and closed: another process opens it
        with duckdb.connect(str(db_path)) as con:
            assert con.execute("SELECT count(*) FROM meta").fetchone()[0] > 0
