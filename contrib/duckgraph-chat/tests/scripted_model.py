"""A scripted chat model on 127.0.0.1 for the bridge's tests, speaking both APIs with tools, streamed:

    POST /api/chat              Ollama: JSON lines; tool calls as {"function": {"name", "arguments": {...}}}
    POST /v1/chat/completions   OpenAI: server-sent events; each tool call's arguments sent as a JSON text in two
                                pieces after its id and name; `data: [DONE]` at the end

`script(messages, tools) -> Turn` decides each answer (tools is None when the request offers none). An unknown
model is answered 404 as each server does; `fail_next(status)` injects an error. Requests are kept in `requests`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Turn:
    content: str = ""
    #: (tool name, arguments): a dict, or a str sent as it is (for arguments that are not valid JSON)
    calls: list[tuple[str, Any]] = field(default_factory=list)


class ScriptedModel:
    def __init__(self, script: Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], Turn],
                 models: tuple[str, ...] = ("qwen3:8b",)) -> None:
        self.script = script
        self.models = set(models)
        self.requests: list[dict[str, Any]] = []
        self._faults: list[int] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.scripted = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_next(self, status: int) -> None:
        self._faults.append(status)


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)] if text else []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        scripted: ScriptedModel = self.server.scripted  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        scripted.requests.append({"path": self.path, "body": body})
        ollama = self.path == "/api/chat"
        if self.path not in ("/api/chat", "/v1/chat/completions"):
            return self._send(404, b"404 page not found", "text/plain")
        if scripted._faults:
            status = scripted._faults.pop(0)
            error = "injected failure" if ollama else {"message": "injected failure", "type": "server_error"}
            return self._send(status, json.dumps({"error": error}).encode(), "application/json")
        if body.get("model") not in scripted.models:
            error = (f'model "{body.get("model")}" not found, try pulling it first' if ollama else
                     {"message": f"The model `{body.get('model')}` does not exist.", "code": "model_not_found"})
            return self._send(404, json.dumps({"error": error}).encode(), "application/json")
        turn = scripted.script(body["messages"], body.get("tools"))
        if ollama:
            self._send(200, self._ollama(body["model"], turn), "application/x-ndjson")
        else:
            self._send(200, self._openai(body["model"], turn), "text/event-stream")

    def _ollama(self, model: str, turn: Turn) -> bytes:
        chunks = [{"model": model, "message": {"role": "assistant", "content": p}, "done": False}
                  for p in _pieces(turn.content)]
        if turn.calls:
            chunks.append({"model": model, "done": False, "message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": name, "arguments": arguments}} for name, arguments in turn.calls]}})
        chunks.append({"model": model, "message": {"role": "assistant", "content": ""}, "done": True,
                       "done_reason": "stop"})
        return b"".join(json.dumps(c).encode() + b"\n" for c in chunks)

    def _openai(self, model: str, turn: Turn) -> bytes:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": p}) for p in _pieces(turn.content)]
        for index, (name, arguments) in enumerate(turn.calls):
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            half = len(text) // 2
            events.append(chunk({"tool_calls": [{"index": index, "id": f"call_{index}_x", "type": "function",
                                                 "function": {"name": name, "arguments": text[:half]}}]}))
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": text[half:]}}]}))
        events.append(chunk({}, "tool_calls" if turn.calls else "stop"))
        return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
