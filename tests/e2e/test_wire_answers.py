"""What `duckgraph serve` answers on the wire, the same over stdio and HTTP: a client's error reply to a request
of the server (a declined sampling or roots request) reaches the session, JSON that is no JSON-RPC 2.0 message
gets the same -32600/-32602 on both transports, and refused params say which field is wrong."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import INVALID_REQUEST, ErrorData

from duckgraph.core.mcp.json_text import NOT_JSON_RPC
from tests.e2e.test_mcp_http import INITIALIZE, MCP_HEADERS, Served, answer_of, start
from tests.e2e.test_mcp_stdio import SERVE, TIMEOUT_SECONDS
from tests.e2e.test_raw_stdio import ANSWER_SECONDS, RawServer, call

@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_LOG_LEVEL": "INFO"}


@pytest.mark.model
@pytest.mark.anyio
async def test_a_host_that_declines_sampling_and_roots_gets_the_documented_answers(tmp_path, db_path, env):
    """The official client over a real `duckgraph serve`, declining what the server asks (as a host does when
    the user clicks Reject): the server reads the error replies, the calls answer. The stdio transport sent
    them back to the client, and build_communities never answered."""
    declined: list[str] = []

    async def decline_sampling(context: Any, params: Any) -> ErrorData:
        declined.append("sampling")
        return ErrorData(code=INVALID_REQUEST, message="User rejected sampling request")

    async def decline_roots(context: Any) -> ErrorData:
        declined.append("roots")
        return ErrorData(code=-32601, message="roots not available")

    stderr = tmp_path / "stderr.log"
    parameters = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(db_path)], cwd=str(tmp_path),
                                       env={**env, "DUCKGRAPH_NAMESPACE": "@roots",
                                            "DUCKGRAPH_COMMUNITY_REPORTS_BY_SAMPLING": "1"})
    with stderr.open("w", encoding="utf-8") as errlog, anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(stdio_client(parameters, errlog=errlog), mode="legacy",
                          sampling_callback=decline_sampling, list_roots_callback=decline_roots) as client:
            added = await client.call_tool("add_knowledge_graph", {
                "nodes": [{"name": name, "type": "Person"} for name in "ABCD"],
                "edges": [{"source": "A", "target": "B", "type": "KNOWS"},
                          {"source": "C", "target": "D", "type": "KNOWS"}]})
            assert not added.is_error, added
            built = await client.call_tool("build_communities", {})
    assert not built.is_error, built
    assert built.structured_content["communities"] >= 1
    sampling = built.structured_content["sampling"]
    assert "refused" in sampling and "User rejected sampling request" in sampling, sampling
    assert declined.count("sampling") == 1 and "roots" in declined
    log = stderr.read_text(encoding="utf-8")
    assert "listing the client's roots failed" in log and "not valid JSON-RPC" not in log, log


def test_an_error_reply_is_never_sent_back_as_an_answer_to_the_clients_own_request(tmp_path, db_path, env):
    """The client's error reply to the server's roots/list went back to the client, where it answered the
    client's own call of the same id (the server's first request has id 1, as a client's often does), and the
    call itself never answered."""
    server = RawServer(tmp_path, db_path, {**env, "DUCKGRAPH_NAMESPACE": "@roots"})
    try:
        server.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": False}},
            "clientInfo": {"name": "duckgraph-e2e", "version": "0"}}})
        assert server.answer("init")["result"]["serverInfo"]["name"] == "duckgraph"
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send(call(1, "graph_stats", {}))
        asked = server.next(ANSWER_SECONDS)
        assert asked["method"] == "roots/list", asked
        server.send({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -32601, "message": "no roots"}})
        answered = server.answer(1, ANSWER_SECONDS)
        assert "result" in answered and answered["result"]["structuredContent"]["nodes"] == 0, answered
        server.process.stdin.close()
        server.rest(30)
    finally:
        server.close()
    assert "not valid JSON-RPC" not in server.errors(), server.errors()
    assert "listing the client's roots failed" in server.errors()


#: Params the SDK refuses with "Invalid request parameters" and empty data, and what the answer must now say.
REFUSED_PARAMS = [
    ({"name": 5, "arguments": {}}, "params.name: input should be a valid string"),
    ({"name": "graph_stats", "arguments": [1]}, "params.arguments: must be a JSON object"),
    ({"name": "graph_stats", "arguments": {}, "_meta": {"progressToken": 1.5}}, "params._meta.progressToken"),
]


def test_over_stdio_refused_params_say_which_field_is_wrong(tmp_path, db_path, env):
    server = RawServer(tmp_path, db_path, env)
    try:
        server.send({"jsonrpc": "2.0", "id": "early", "method": "tools/list"})
        error = server.answer("early", ANSWER_SECONDS)["error"]
        assert error["code"] == -32602 and "tools/list came before the session was initialized" in error["message"]
        server.start_session()
        for number, (params, said) in enumerate(REFUSED_PARAMS):
            server.send({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": params})
            error = server.answer(number, ANSWER_SECONDS)["error"]
            assert error["code"] == -32602 and error["message"].startswith("Invalid params for tools/call: ")
            assert said in error["message"], error
    finally:
        server.close()


@pytest.fixture
def http_server(tmp_path, db_path, env) -> Iterator[Served]:
    yield from start(tmp_path, {**env, "DUCKGRAPH_DB": str(db_path)})


@pytest.mark.anyio
async def test_over_http_what_is_no_json_rpc_message_gets_the_answer_stdio_gives(http_server: Served):
    """The SDK answered -32602 with its validation dump ("11 validation errors for union[...]")."""
    url = http_server.url
    async with httpx.AsyncClient(timeout=ANSWER_SECONDS) as http:
        early = await http.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=MCP_HEADERS)
        started = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        assert started.status_code == 200, started.text
        headers = {**MCP_HEADERS, "mcp-session-id": started.headers["mcp-session-id"],
                   "mcp-protocol-version": INITIALIZE["params"]["protocolVersion"]}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        for body, request_id in (({"hello": "world"}, None),
                                 ([{"jsonrpc": "2.0", "id": 10, "method": "ping"}], None),  # a batch: not in MCP
                                 ({"jsonrpc": "1.0", "id": 12, "method": "ping"}, 12),
                                 ({"jsonrpc": "2.0", "id": "no method"}, "no method")):
            refused = await http.post(url, json=body, headers=headers)
            assert refused.status_code == 400, refused.text
            assert refused.json() == {"jsonrpc": "2.0", "id": request_id,
                                      "error": {"code": -32600, "message": NOT_JSON_RPC}}
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 21, "method": "tools/list", "params": [1]},
                                  headers=headers)
        assert refused.status_code == 400 and refused.json()["id"] == 21
        assert refused.json()["error"] == {"code": -32602,
                                           "message": 'Invalid params: "params" must be a JSON object, not a list'}
        for number, (params, said) in enumerate(REFUSED_PARAMS):
            error = answer_of(await http.post(url, json={"jsonrpc": "2.0", "id": number, "method": "tools/call",
                                                         "params": params}, headers=headers))["error"]
            assert error["code"] == -32602 and said in error["message"], error
        # A client's error reply (to no request of the server's here) is a valid message: accepted, not refused.
        reply = await http.post(url, json={"jsonrpc": "2.0", "id": 998, "error": {"code": 1, "message": "x"}},
                                headers=headers)
        assert reply.status_code == 202, reply.text
    assert early.status_code == 400  # no session yet: the SDK's own answer, which says so
    assert "Traceback" not in http_server.errors()


@pytest.mark.model
def test_a_cancelled_write_stores_nothing_and_the_log_says_so(tmp_path, db_path, env):
    """A call on a worker thread cannot be stopped midway: the cancelled write was stored seconds later, and the
    client, which gets no answer to a cancelled request, could only send it again. Now its commit is refused."""
    server = RawServer(tmp_path, db_path, env)
    text = " ".join(f"Sentence {i} is about the zeppelin hangar number {i} and its caretaker." for i in range(300))
    try:
        server.start_session()
        server.send(call(2, "add_documents", {"documents": [{"id": "doc-slow", "title": "Zeppelins", "text": text}]}))
        time.sleep(0.5)  # under way: the model is still loading
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 2, "reason": "the user pressed stop"}})
        server.wait_for_log("call 2 (add_documents) was cancelled before it committed: nothing was stored",
                            ANSWER_SECONDS)
        server.wait_for_log("the cancelled call 2 (add_documents) stopped before it committed: nothing was stored",
                            TIMEOUT_SECONDS)
        server.send(call(3, "graph_stats", {}))
        assert server.answer(3)["result"]["structuredContent"]["documents"] == 0  # and no answer to call 2
    finally:
        server.close()
