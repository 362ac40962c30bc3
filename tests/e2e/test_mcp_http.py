"""End-to-end tests of `duckgraph serve --http`: the real server process on a real port, driven by the MCP
SDK's streamable HTTP client, as a remote host would use it.

The first test embeds (the child loads the real model, about ten seconds); the token tests only list tools
and read a resource, which load no model.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.scenario import DOCUMENTS, EDGES, NODES

SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve", "--http"]
#: Generous: the child imports torch and loads the model on first use.
TIMEOUT_SECONDS = 180
TOKEN = "s3cret-token-for-tests"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "duckgraph-e2e", "version": "0"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def child_env(tmp_path: Path, db_path: Path) -> dict[str, str]:
    """The child's whole environment: offline, no warm-up, a private HOME and database."""
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_DB": str(db_path)}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    def __init__(self, process: subprocess.Popen, port: int, stderr: Path) -> None:
        self.process, self.port, self.stderr = process, port, stderr
        self.url = f"http://127.0.0.1:{port}/mcp"

    def errors(self) -> str:
        return self.stderr.read_text(encoding="utf-8")


def start(tmp_path: Path, env: dict[str, str], *args: str) -> Iterator[Served]:
    port = free_port()
    stderr_path = tmp_path / f"stderr-{port}.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen([*SERVE, "--port", str(port), *args], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=tmp_path)
    served = Served(process, port, stderr_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"the server exited with {process.returncode}: {served.errors()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the server did not listen on {port}: {served.errors()}") from None
                time.sleep(0.1)
        yield served
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        process.stdout.close()


@pytest.fixture
def server(tmp_path, child_env) -> Iterator[Served]:
    yield from start(tmp_path, child_env)


@pytest.fixture
def token_server(tmp_path, child_env) -> Iterator[Served]:
    yield from start(tmp_path, {**child_env, "DUCKGRAPH_HTTP_TOKEN": TOKEN})


def stop(served: Served, how: signal.Signals = signal.SIGTERM) -> int:
    served.process.send_signal(how)
    return served.process.wait(timeout=60)


def counts_on_disk(path: Path) -> dict[str, int]:
    store = DuckDBStore(path)
    store.open()
    try:
        stats = store.stats()
    finally:
        store.close()
    return {key: stats[key] for key in ("nodes", "edges", "documents")}


@pytest.mark.model
@pytest.mark.anyio
async def test_a_graph_added_over_http_can_be_searched(server: Served, db_path: Path):
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(server.url) as client:
            assert "add_knowledge_graph" in {t.name for t in (await client.list_tools()).tools}
            docs = await client.call_tool("add_documents", {"documents": DOCUMENTS})
            assert not docs.is_error, docs.content
            graph = await client.call_tool("add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
            assert not graph.is_error, graph.content
            assert graph.structured_content["nodes_created"] == len(NODES)

            found = await client.call_tool("search", {"query": "Which institution employed Vera Rubin?"})
            assert not found.is_error, found.content
            result = found.structured_content
            assert result["anchors"][0]["name"] == "Vera Rubin"
            assert any(e["type"] == "EMPLOYED_BY" and e["target"] == "Carnegie Institution for Science"
                       for e in result["edges"])
            assert result["passages"][0]["document_id"] == "doc-rubin"

    # A service manager's stop (SIGTERM) is a clean exit that closes the file; stdout stays empty (logs go to
    # stderr).
    assert stop(server) == 0
    assert server.process.stdout.read() == b""
    assert "Traceback" not in server.errors()
    assert f"http://127.0.0.1:{server.port}/mcp" in server.errors()
    assert counts_on_disk(db_path) == {"nodes": len(NODES), "edges": len(EDGES), "documents": len(DOCUMENTS)}


@pytest.mark.anyio
async def test_with_a_token_every_request_needs_it(token_server: Served):
    async with httpx.AsyncClient(timeout=30) as http:
        for headers in ({}, {"authorization": "Bearer wrong-token"}, {"authorization": TOKEN},
                        {"authorization": f"Basic {TOKEN}"}):
            refused = await http.post(token_server.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
            assert refused.status_code == 401, (headers, refused.text)
            assert refused.headers["www-authenticate"].startswith("Bearer")
        # Every method and path, not just the MCP endpoint.
        assert (await http.get(token_server.url)).status_code == 401
        assert (await http.get(token_server.url.replace("/mcp", "/other"))).status_code == 401

        accepted = await http.post(token_server.url, json=INITIALIZE,
                                   headers={**MCP_HEADERS, "authorization": f"Bearer {TOKEN}"})
        assert accepted.status_code == 200, accepted.text

    # The SDK client with the header on its HTTP client: tools, prompt and resources all answer.
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        async with Client(streamable_http_client(token_server.url, http_client=http)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"add_knowledge_graph", "add_documents", "search"} <= tools
            assert "extract_knowledge" in {p.name for p in (await client.list_prompts()).prompts}
            stats = await client.read_resource("duckgraph://stats")
            assert '"nodes": 0' in stats.contents[0].text

    # Without the header the SDK client cannot even start a session.
    with pytest.raises(Exception):
        with anyio.fail_after(30):
            async with Client(token_server.url) as client:
                await client.list_tools()

    assert stop(token_server, signal.SIGINT) == 130  # Ctrl-C, as for any command
    assert TOKEN not in token_server.errors(), "the token must never be logged"


def test_listening_beyond_loopback_without_a_token_is_refused(tmp_path, child_env):
    for host in ("0.0.0.0", "192.0.2.10", "example.org"):
        finished = subprocess.run([*SERVE, "--host", host, "--port", str(free_port())], capture_output=True,
                                  text=True, env=child_env, cwd=tmp_path, timeout=60)
        assert finished.returncode != 0, host
        assert finished.stdout == ""
        assert f"refusing to listen on {host} without a token" in finished.stderr
        assert "DUCKGRAPH_HTTP_TOKEN" in finished.stderr
        assert "Traceback" not in finished.stderr


def test_host_and_port_need_http(tmp_path, child_env):
    finished = subprocess.run([sys.executable, "-m", "duckgraph.core.cli", "serve", "--port", "9999"],
                              capture_output=True, text=True, env=child_env, cwd=tmp_path, timeout=60,
                              stdin=subprocess.DEVNULL)
    assert finished.returncode == 2
    assert "--http" in finished.stderr


@pytest.mark.anyio
async def test_a_body_over_the_limit_gets_a_413_naming_it_and_one_under_reaches_the_tools(server: Served):
    from duckgraph.core.mcp.transports import HTTP_MAX_BODY_BYTES

    with anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(server.url) as client:
            # 5 MB: over the SDK's default (4 MiB), so it used to fail as "Server returned an error response";
            # now the tool itself answers (a query of 2,000 characters at most).
            answered = await client.call_tool("search", {"query": "comet " * 1_000_000})
            assert answered.is_error and "query: may have at most 2,000 characters" in answered.content[0].text, answered.content
            with pytest.raises(Exception) as refused:
                await client.call_tool("search", {"query": "x" * (HTTP_MAX_BODY_BYTES + 1)})
            assert f"at most {HTTP_MAX_BODY_BYTES} bytes" in str(refused.value)
            assert (await client.list_tools()).tools  # the session goes on

    async with httpx.AsyncClient(timeout=60) as http:
        body = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"x" * HTTP_MAX_BODY_BYTES + b'"}}'
        refused = await http.post(server.url, content=body, headers=MCP_HEADERS)
    assert refused.status_code == 413
    error = refused.json()["error"]
    assert error["code"] == -32600
    assert f"request body too large: {len(body)} bytes" in error["message"]
    assert "Split the call" in error["message"]


def answer_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a response: a JSON body, or the data of a server-sent event."""
    assert response.status_code == 200, (response.status_code, response.text)
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line.removeprefix("data:").strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(next(d for d in data if d))


@pytest.mark.model
@pytest.mark.anyio
async def test_a_lone_surrogate_and_bytes_not_utf8_are_read_as_over_stdio(server: Served):
    # Raw bytes, as a JavaScript client sends a text cut inside an emoji: the SDK answered -32700; now, as over
    # stdio (tests/e2e/test_raw_stdio.py), the lone surrogate becomes U+FFFD and the call runs.
    def call(number: int, tool: str, arguments: str) -> bytes:
        return (f'{{"jsonrpc":"2.0","id":{number},"method":"tools/call",'
                f'"params":{{"name":"{tool}","arguments":{arguments}}}}}').encode()

    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as http:
        started = await http.post(server.url, json=INITIALIZE, headers=MCP_HEADERS)
        assert started.status_code == 200, started.text
        headers = {**MCP_HEADERS, "mcp-session-id": started.headers["mcp-session-id"],
                   "mcp-protocol-version": INITIALIZE["params"]["protocolVersion"]}
        await http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)

        cut = call(2, "add_knowledge_graph",
                   '{"nodes":[{"name":"Smiling Ada","type":"Person","description":"smiles a lot \\ud83d"}]}')
        assert b"\\ud83d" in cut
        written = answer_of(await http.post(server.url, content=cut, headers=headers))["result"]
        assert not written.get("isError"), written
        assert written["structuredContent"]["nodes_created"] == 1
        # A whole pair stays what it is.
        pair = call(3, "get_entities", '{"names":["Smiling Ada \\ud83d\\ude00"]}')
        found = answer_of(await http.post(server.url, content=pair, headers=headers))["result"]
        assert found["structuredContent"]["not_found"] == ["Smiling Ada \U0001f600"]
        # Bytes that are not UTF-8 become U+FFFD too.
        ping = b'{"jsonrpc":"2.0","id":4,"method":"ping","params":{"note":"\xff\xfe"}}'
        assert answer_of(await http.post(server.url, content=ping, headers=headers))["result"] == {}

        read = answer_of(await http.post(server.url, content=call(5, "get_entities", '{"names":["Smiling Ada"]}'),
                                         headers=headers))["result"]
        assert "smiles a lot \ufffd" in json.dumps(read, ensure_ascii=False)
        # What no reading can mend is still a parse error.
        broken = await http.post(server.url, content=b'{"jsonrpc":"2.0","id":6,', headers=headers)
        assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
        # An id that is no string or integer: the SDK took the request for a notification (202, nothing run).
        for bad_id in (b"null", b"[7]"):
            ghost = (b'{"jsonrpc":"2.0","id":' + bad_id + b',"method":"tools/call","params":{"name":'
                     b'"add_knowledge_graph","arguments":{"nodes":[{"name":"Ghost","type":"Person"}]}}}')
            refused = await http.post(server.url, content=ghost, headers=headers)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600, refused.text
        unknown = answer_of(await http.post(server.url, content=call(7, "get_entities", '{"names":["Ghost"]}'),
                                            headers=headers))["result"]
        assert unknown["structuredContent"]["not_found"] == ["Ghost"]
    assert "Traceback" not in server.errors()


@pytest.mark.model
@pytest.mark.anyio
async def test_sigterm_lets_the_call_under_way_answer_then_closes_the_file(server: Served, db_path: Path):
    from duckgraph.core.mcp.server import STOP_GRACE_SECONDS

    text = " ".join(f"Sentence {i} tells of the comet seen over the harbour in the year {1600 + i}."
                    for i in range(80))
    outcome: dict[str, Any] = {}
    try:
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with Client(server.url) as client:
                warm = await client.call_tool("add_knowledge_graph",
                                              {"nodes": [{"name": "Halley", "type": "Person"}]})
                assert not warm.is_error, warm.content  # the model is loaded now

                async def add() -> None:
                    outcome["added"] = await client.call_tool(
                        "add_documents", {"documents": [{"id": "comets", "text": text}]})
                    # Once the server is stopping, a new request is refused (503), or finds it gone: no hang.
                    async with httpx.AsyncClient(timeout=10) as http:
                        try:
                            outcome["after"] = (await http.post(server.url, json=INITIALIZE,
                                                                headers=MCP_HEADERS)).status_code
                        except httpx.TransportError:
                            outcome["after"] = "gone"

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(add)
                    await anyio.sleep(0.1)
                    stopped = time.monotonic()
                    server.process.send_signal(signal.SIGTERM)
    except Exception:  # leaving the session of a server that has gone may fail; what it answered is checked below
        if "after" not in outcome:
            raise
    added = outcome["added"]
    assert not added.is_error, (added.content, server.errors())
    assert added.structured_content["chunks_written"] > 0
    assert outcome["after"] in (503, "gone"), outcome["after"]

    code = server.process.wait(timeout=STOP_GRACE_SECONDS + 10)
    took = time.monotonic() - stopped
    assert code == 0, server.errors()
    assert took < STOP_GRACE_SECONDS + 5, f"{took:.1f} s to stop\n{server.errors()}"
    assert "Traceback" not in server.errors(), server.errors()
    assert not Path(f"{db_path}.wal").exists() and not Path(f"{db_path}.sock").exists()
    assert counts_on_disk(db_path) == {"nodes": 1, "edges": 0, "documents": 1}
