"""An OpenAI-compatible server for the plugin's tests: real HTTP on 127.0.0.1, OpenAI's JSON and error shapes.

    GET  /v1/models             the served models
    POST /v1/embeddings         deterministic vectors: words hashed into `dimensions` buckets (texts that share
                                words are near), shortened to the request's `dimensions`
    POST /v1/chat/completions   replies from `chat_reply(body) -> str` (non-streaming)

With `api_key` set, every request must carry `Authorization: Bearer <api_key>`; a wrong key is answered 401 with
the key echoed back in full (the worst a server can do, to test that the plugin never repeats it). Faults:
`fail_next(status, count, retry_after=None)`, `delay_seconds`, and `edit_vectors(vectors) -> vectors` to send
malformed embeddings. `lists_only`: as llama-server, list only these names (its .gguf path) and answer any model
name. Every request is kept in `requests`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WORD = re.compile(r"\w+")


def hashed_vector(text: str, dimensions: int) -> list[float]:
    vector = [0.0] * dimensions
    for word in WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        vector[int.from_bytes(digest[:4], "big") % dimensions] += 1.0 if digest[4] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


class FakeOpenAI:
    def __init__(self, *, models: tuple[str, ...] = ("text-embedding-3-small", "gpt-4o-mini"), dimensions: int = 64,
                 api_key: str | None = None, chat_reply: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.models = set(models)
        #: As llama-server: /v1/models lists these (the .gguf path it loaded) and every model name is answered.
        self.lists_only: list[str] | None = None
        self.dimensions = dimensions
        self.api_key = api_key
        self.chat_reply = chat_reply or (lambda body: '{"nodes": [], "edges": []}')
        self.delay_seconds = 0.0
        self.edit_vectors: Callable[[list[list[float]]], list[Any]] = lambda vectors: vectors
        self.requests: list[dict[str, Any]] = []
        self._faults: list[tuple[int, float | None]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(self, status: int, count: int = 1, retry_after: float | None = None) -> None:
        with self._lock:
            self._faults += [(status, retry_after)] * count

    def requests_to(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == path]

    def _take_fault(self) -> tuple[int, float | None] | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # nothing printed
        pass

    def do_GET(self) -> None:
        self._handle(None)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self._handle(json.loads(raw) if raw else None)
        except json.JSONDecodeError:
            self._send(400, _error("We could not parse the JSON body of your request.", "invalid_request_error"))

    def _handle(self, body: Any) -> None:
        fake: FakeOpenAI = self.server.fake  # type: ignore[attr-defined]
        fake.requests.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                              "body": body})
        if fake.delay_seconds:
            time.sleep(fake.delay_seconds)
        if fake.api_key is not None:
            given = self.headers.get("Authorization", "").removeprefix("Bearer ")
            if given != fake.api_key:
                return self._send(401, _error(f"Incorrect API key provided: {given}.", "invalid_request_error",
                                              "invalid_api_key"))
        if fault := fake._take_fault():
            status, retry_after = fault
            headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
            kind = "rate_limit_exceeded" if status == 429 else "server_error"
            return self._send(status, _error(f"injected {status}", kind), headers)
        routes = {("GET", "/v1/models"): self._models, ("POST", "/v1/embeddings"): self._embeddings,
                  ("POST", "/v1/chat/completions"): self._chat}
        route = routes.get((self.command, self.path))
        if route is None:
            return self._send(404, _error(f"Invalid URL ({self.command} {self.path})", "invalid_request_error"))
        answered = fake.models if fake.lists_only is None else {body.get("model")} if isinstance(body, dict) else set()
        if self.command == "POST" and (not isinstance(body, dict) or body.get("model") not in answered):
            model = body.get("model") if isinstance(body, dict) else None
            return self._send(404, _error(f"The model `{model}` does not exist or you do not have access to it.",
                                          "invalid_request_error", "model_not_found"))
        route(fake, body)

    def _models(self, fake: FakeOpenAI, body: Any) -> None:
        listed = sorted(fake.models) if fake.lists_only is None else fake.lists_only
        self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "tests"}
                                                    for m in listed]})

    def _embeddings(self, fake: FakeOpenAI, body: dict[str, Any]) -> None:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return self._send(400, _error("'input' must be a string or a non-empty array of strings",
                                          "invalid_request_error"))
        width = body.get("dimensions") or fake.dimensions
        vectors = fake.edit_vectors([hashed_vector(t, fake.dimensions)[:width] for t in texts])
        data = [{"object": "embedding", "index": i, "embedding": vector} for i, vector in enumerate(vectors)]
        data.reverse()  # a server may answer out of order: the index is what counts
        self._send(200, {"object": "list", "data": data, "model": body["model"],
                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})

    def _chat(self, fake: FakeOpenAI, body: dict[str, Any]) -> None:
        content = fake.chat_reply(body)
        self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                         "model": body["model"], "choices": [{"index": 0, "finish_reason": "stop",
                                                              "message": {"role": "assistant", "content": content}}]})

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self._write(status, data, headers or {})
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its deadline): nothing to answer
            self.close_connection = True

    def _write(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
