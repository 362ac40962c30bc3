"""`duckgraph serve` over stdio, driven with raw bytes: every message gets an answer (the MCP SDK's own stdio
transport drops what it cannot parse and the client waits for its timeout), and SIGTERM or Ctrl-C stop the server
once the calls under way have answered, with the file closed."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core.mcp.server import STOP_GRACE_SECONDS
from tests.e2e.pipes import StdoutLines
from tests.e2e.test_mcp_stdio import SERVE, TIMEOUT_SECONDS, store_stats

pytestmark = pytest.mark.model

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "duckgraph-e2e", "version": "0"}}}
#: How long an answer to a bad message may take: it needs no model, a hang is what this guards against.
ANSWER_SECONDS = 10


class RawServer:
    """A `duckgraph serve` child written to in bytes; every stdout line is kept and must be JSON-RPC."""

    def __init__(self, tmp_path: Path, db_path: Path, env: dict[str, str]) -> None:
        self.stderr_path = tmp_path / "stderr.log"
        with self.stderr_path.open("w", encoding="utf-8") as stderr:
            self.process = subprocess.Popen([*SERVE, "--db", str(db_path)], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=tmp_path)
        self.lines: list[bytes] = []
        assert self.process.stdout is not None
        self._out = StdoutLines(self.process.stdout)

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.process.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode())

    def next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout} s\n{self.errors()}") from None
        if line is None:
            raise AssertionError(f"stdout closed\n{self.errors()}")
        self.lines.append(line)
        message = json.loads(line)
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line
        return message

    def answer(self, request_id: int | str | None, timeout: float = TIMEOUT_SECONDS) -> dict[str, Any]:
        """The next answer (response or error) to `request_id`, skipping notifications."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(max(deadline - time.monotonic(), 0.01))
            if "method" not in message:
                assert message["id"] == request_id, f"expected the answer to {request_id!r}, got {message}"
                return message

    def rest(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (line := self._out.get(timeout=max(deadline - time.monotonic(), 0.01))) is not None:
            self.lines.append(line)
            json.loads(line)

    def start_session(self) -> None:
        self.send(INITIALIZE)
        assert self.answer(1)["result"]["serverInfo"]["name"] == "duckgraph"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def errors(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8")

    def wait_for_log(self, text: str, timeout: float = 5) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.errors():
            assert time.monotonic() < deadline, f"{text!r} not logged within {timeout} s\n{self.errors()}"
            time.sleep(0.02)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def raw_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_LOG_LEVEL": "INFO"}


def call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}


def test_every_message_the_server_cannot_read_gets_an_error_with_its_id(tmp_path, db_path, raw_env):
    server = RawServer(tmp_path, db_path, raw_env)
    try:
        server.start_session()

        server.write(b"hello")  # not JSON, no id to read
        error = server.answer(None, ANSWER_SECONDS)["error"]
        assert error["code"] == -32700 and "Parse error" in error["message"]

        # Deeper than the parser goes (~250 levels): the id is read all the same, before or after the params
        # (a JavaScript client writes "id" last), even 100,000 levels deep.
        deep = "[" * 300 + "]" * 300
        server.write(f'{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"x":{deep}}}}}'.encode())
        error = server.answer(2, ANSWER_SECONDS)["error"]
        assert error["code"] == -32700 and "nested too deeply" in error["message"]
        deeper = "[" * 100_000 + "]" * 100_000
        server.write(f'{{"method":"ping","params":{{"x":{deeper}}},"jsonrpc":"2.0","id":"deep"}}'.encode())
        assert server.answer("deep", ANSWER_SECONDS)["error"]["code"] == -32700

        server.write(b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":"all"}')
        error = server.answer(3, ANSWER_SECONDS)["error"]
        assert error["code"] == -32602 and '"params" must be a JSON object, not a string' in error["message"]

        server.write(b'{"jsonrpc":"2.0","id":4,"params":{}}')  # no method
        assert server.answer(4, ANSWER_SECONDS)["error"]["code"] == -32600
        server.write(b'[{"jsonrpc":"2.0","id":5,"method":"ping"}]')  # a batch: not in MCP
        assert server.answer(None, ANSWER_SECONDS)["error"]["code"] == -32600
        # An id that is no string or integer: the SDK took the request for a notification, ran nothing and
        # answered nothing. The call is not run either.
        for bad_id in (b"null", b"1.5", b"true", b'{"a":1}'):
            server.write(b'{"jsonrpc":"2.0","id":' + bad_id + b',"method":"tools/call","params":{"name":'
                         b'"add_knowledge_graph","arguments":{"nodes":[{"name":"Ghost","type":"Person"}]}}}')
            error = server.answer(None, ANSWER_SECONDS)["error"]
            assert error["code"] == -32600 and '"id" must be a string or an integer' in error["message"]

        # A text cut inside an emoji: the lone surrogate becomes U+FFFD and the call runs.
        server.write(json.dumps(call(6, "add_knowledge_graph", {"nodes": [
            {"name": "Smiling Ada", "type": "Person", "description": "smiles a lot \ud83d"}]})).encode())
        written = server.answer(6)["result"]
        assert not written.get("isError"), written
        assert written["structuredContent"]["nodes_created"] == 1
        # Bytes that are not UTF-8 are replaced too, as the SDK does.
        server.write(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"note":"\xff\xfe"}}')
        assert server.answer(7, ANSWER_SECONDS)["result"] == {}

        server.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list"})  # the session goes on
        assert len(server.answer(8, ANSWER_SECONDS)["result"]["tools"]) > 5
        server.send(call(9, "get_entities", {"names": ["Smiling Ada"]}))
        entity = server.answer(9, ANSWER_SECONDS)["result"]
        assert not entity.get("isError"), entity
        assert "smiles a lot \ufffd" in json.dumps(entity, ensure_ascii=False)
        server.send(call(10, "get_entities", {"names": ["Ghost"]}))
        assert server.answer(10, ANSWER_SECONDS)["result"]["structuredContent"]["not_found"] == ["Ghost"]

        server.process.stdin.close()
        server.rest(30)
        assert server.process.wait(timeout=30) == 0
    finally:
        server.close()
    assert "Traceback" not in server.errors(), server.errors()
    assert server.errors().count("not valid JSON-RPC") == 10  # each one logged, at WARNING


def test_sigterm_lets_the_call_under_way_answer_then_closes_the_file(tmp_path, db_path, raw_env):
    server = RawServer(tmp_path, db_path, raw_env)
    text = " ".join(f"Sentence {i} tells of the comet seen over the harbour in the year {1600 + i}."
                    for i in range(80))  # ~6k characters: under a second of embedding, more on a busy machine
    try:
        server.start_session()
        server.send(call(2, "add_knowledge_graph", {"nodes": [{"name": "Halley", "type": "Person"}]}))
        assert not server.answer(2)["result"].get("isError")  # the model is loaded now

        server.send(call(3, "add_documents", {"documents": [{"id": "comets", "text": text}]}))
        time.sleep(0.1)
        stopped = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.wait_for_log("stopping on SIGTERM")
        server.send({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})  # after the signal: refused
        answers: dict[Any, dict[str, Any]] = {}
        while len(answers) < 2:
            message = server.next(STOP_GRACE_SECONDS + 5)
            if "method" not in message:
                answers[message["id"]] = message
        code = server.process.wait(timeout=STOP_GRACE_SECONDS + 5)
        took = time.monotonic() - stopped
    finally:
        server.close()

    errors = server.errors()
    assert answers[4]["error"]["code"] == -32000 and "stopping" in answers[4]["error"]["message"]
    # Usually still embedding when the signal came ("finishing 1 call(s)" in the log); answered either way.
    added = answers[3]
    assert "result" in added and not added["result"].get("isError"), (added, errors)
    assert added["result"]["structuredContent"]["chunks_written"] > 0
    assert code == 0, errors  # a service manager's stop is a normal exit
    assert took < STOP_GRACE_SECONDS + 3, f"{took:.1f} s to stop\n{errors}"
    assert "Traceback" not in errors, errors
    assert not Path(f"{db_path}.wal").exists() and not Path(f"{db_path}.sock").exists()
    stats = store_stats(db_path)  # the acknowledged write is in the file
    assert (stats["documents"], stats["nodes"]) == (1, 1)


def test_ctrl_c_stops_an_idle_server_at_once_with_the_file_closed(tmp_path, db_path, raw_env):
    server = RawServer(tmp_path, db_path, raw_env)
    try:
        server.start_session()
        server.send(call(2, "add_knowledge_graph", {"nodes": [{"name": "Halley", "type": "Person"}]}))
        assert not server.answer(2)["result"].get("isError")
        stopped = time.monotonic()
        server.process.send_signal(signal.SIGINT)  # stdin stays open: the signal alone must stop it
        code = server.process.wait(timeout=STOP_GRACE_SECONDS + 5)
        took = time.monotonic() - stopped
        server.rest(5)
    finally:
        server.close()
    assert code == 130, server.errors()  # an interruption, as for any command
    assert took < 3, f"{took:.1f} s to stop"
    assert "Traceback" not in server.errors(), server.errors()
    assert not Path(f"{db_path}.wal").exists() and not Path(f"{db_path}.sock").exists()
    assert store_stats(db_path)["nodes"] == 1
