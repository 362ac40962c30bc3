"""Embeddings and graph extraction through a local Ollama server (HTTP API, no PyTorch needed)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from duckgraph.ports import (
    ALL_MINILM_L6_V2_FLOOR, ChatExtractor, Embedder, EmbedderError, ExtractionError, ReplyFormat, hookimpl, json_kind,
)
from duckgraph.ports.http import redact_urls, request

if TYPE_CHECKING:
    import httpx
    import numpy as np

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_EMBEDDING_MODEL = "all-minilm"
DEFAULT_CHAT_MODEL = "qwen3:8b"


def resolve_base_url(base_url: str | None) -> str:
    """The explicit option, else OLLAMA_HOST, else the default, read by Ollama's own rule (envconfig.Host): a bare
    host (no scheme) is http on port 11434 unless it names one ("host", "host:port", "[::1]", "::1"); a URL with
    a scheme keeps its own default port (http 80, https 443: an Ollama behind a proxy at https://ollama.example.com
    works). 0.0.0.0, what a server listens on, means this host."""
    url = (base_url or os.environ.get("OLLAMA_HOST") or "").strip() or DEFAULT_BASE_URL
    if "://" not in url:
        hostport, slash, path = url.partition("/")
        url = f"http://{_with_ollama_port(hostport)}{slash}{path}"
    return url.rstrip("/").replace("://0.0.0.0", "://127.0.0.1")


def _with_ollama_port(hostport: str) -> str:
    """A bare host with Ollama's port, 11434, unless it gives one; an IPv6 address in brackets."""
    if hostport.startswith("["):  # [::1] or [::1]:port
        return hostport if "]:" in hostport else f"{hostport}:11434"
    if hostport.count(":") > 1:  # an IPv6 address without brackets, which cannot carry a port
        return f"[{hostport}]:11434"
    host, colon, port = hostport.partition(":")
    return f"{host or '127.0.0.1'}:{port or '11434'}"


_ALL_MINILM_L6_V2_TAGS = {"all-minilm:latest", "all-minilm:22m", "all-minilm:l6-v2"}


def _with_tag(model: str) -> str:
    return model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"


class OllamaClient:
    """The few Ollama API calls duckgraph makes, with errors that say what to do.

    `timeout` is a deadline for the whole request (connecting, sending, waiting, reading every byte), not for
    each read: a server that sends a byte now and then must not keep a caller (and the write it is part of)
    waiting without end. Each call gets its own deadline; a caller that repeats a call (the extractor's attempts)
    gives each attempt a fresh one."""

    def __init__(self, base_url: str | None, timeout: float, error: type[Exception]) -> None:
        self.base_url = resolve_base_url(base_url)
        #: The server as messages show it: a password in base_url or OLLAMA_HOST stays out of errors and doctor.
        self.shown_url = redact_urls(self.base_url)
        self.timeout = timeout
        self._error = error

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import anyio  # imported on first call: registering the plugin stays cheap
        import httpx  # (for its errors)

        url, shown = f"{self.base_url}{path}", f"{self.shown_url}{path}"
        try:
            response = request("POST", url, timeout=self.timeout, json=body)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise self._error(
                f"Ollama at {shown} did not answer within the {self.timeout:g} s deadline (the timeout option, for "
                "the whole request); the model may still be loading, the machine is busy or the server stalls: "
                "raise the timeout option or try again"
            ) from exc
        except httpx.ConnectError as exc:
            raise self._error(
                f"cannot reach Ollama at {self.shown_url}: is it running? Start it with `ollama serve`, or point "
                "duckgraph at it with OLLAMA_HOST or the base_url option"
            ) from exc
        except (httpx.HTTPError, anyio.BrokenResourceError, OSError) as exc:
            raise self._error(redact_urls(f"request to {shown} failed: {exc}")) from exc
        error = _ollama_error(response)
        if response.status_code == 404 and error is not None and "model" in error and "not found" in error:
            model = body.get("model", "")
            raise self._error(
                f"Ollama at {self.shown_url} does not have the model {model!r}: run `ollama pull {model}`"
            )
        if response.status_code == 404:
            # Not Ollama's JSON about a model: its plain-text route 404 ("404 page not found"), or a proxy's.
            raise self._error(
                f"Ollama at {self.shown_url} has no {path} (HTTP 404): check base_url (the server's root, such as "
                f"{DEFAULT_BASE_URL}, without /v1) or upgrade Ollama"
            )
        if response.status_code >= 400:
            message = error if error is not None else response.text.strip()[:500]
            raise self._error(f"Ollama at {self.shown_url} answered {path} with HTTP {response.status_code}: "
                              f"{redact_urls(message)}")
        try:
            reply = response.json()
        except ValueError as exc:
            raise self._error(f"Ollama at {self.shown_url} sent a reply to {path} that is not JSON") from exc
        if not isinstance(reply, dict):
            raise self._error(f"Ollama at {self.shown_url} sent a reply to {path} that is JSON but not an object "
                              f"({json_kind(reply)})")
        return reply


def _ollama_error(response: httpx.Response) -> str | None:
    """Ollama's own error message ({"error": "..."}), or None when the body is something else (a proxy's page)."""
    try:
        body = response.json()
    except ValueError:
        return None
    return str(body["error"]) if isinstance(body, dict) and body.get("error") is not None else None


class OllamaEmbedder(Embedder):
    """Embeds through Ollama's /api/embed. The width is probed once, unless given as `dimensions`."""

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        base_url: str | None = None,
        timeout: float = 60.0,
        keep_alive: str | int | None = None,
        batch_size: int = 64,
        dimensions: int | None = None,
    ) -> None:
        self.model = model
        self.keep_alive = keep_alive
        self.batch_size = batch_size
        self._dimensions = dimensions
        self._client = OllamaClient(base_url, timeout, EmbedderError)

    @property
    def id(self) -> str:
        return f"ollama:{_with_tag(self.model)}"

    @property
    def relevance_floor(self) -> float | None:  # type: ignore[override]
        # Ollama's all-minilm (tags latest, 22m, l6-v2) is all-MiniLM-L6-v2, the local default's model, so its
        # floor holds; its 33m tag is the L12 model, which has none.
        return ALL_MINILM_L6_V2_FLOOR if _with_tag(self.model) in _ALL_MINILM_L6_V2_TAGS else None

    def warm_up(self) -> None:
        self.dimensions  # one request loads the model in Ollama and tells the width

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model, "input": list(texts), "truncate": True}
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        reply = self._client.post("/api/embed", body)
        return self.vectors_from_json(reply.get("embeddings"), len(texts),
                                      source=f"{self._client.shown_url}/api/embed")


# -- extraction -------------------------------------------------------------------------------------------

class OllamaExtractor(ChatExtractor):
    """Extracts entities and relationships, and writes community reports, with a local chat model and Ollama's
    structured outputs (the reply's JSON schema as the `format`)."""

    def __init__(
        self,
        model: str = DEFAULT_CHAT_MODEL,
        *,
        base_url: str | None = None,
        timeout: float = 300.0,
        keep_alive: str | int | None = None,
        max_attempts: int = 3,
        temperature: float = 0.0,
        num_ctx: int | None = None,
    ) -> None:
        super().__init__(model, max_attempts=max_attempts)
        self.keep_alive = keep_alive
        self.options: dict[str, Any] = {"temperature": temperature}
        if num_ctx is not None:
            self.options["num_ctx"] = num_ctx
        self._client = OllamaClient(base_url, timeout, ExtractionError)

    @property
    def id(self) -> str:
        return f"ollama:{_with_tag(self.model)}"

    def check(self) -> None:
        # /api/show answers at once, without loading the model: whether it is pulled and what it can do.
        shown = self._client.post("/api/show", {"model": self.model})
        capabilities = shown.get("capabilities")
        if isinstance(capabilities, list) and "completion" not in capabilities:
            raise ExtractionError(
                f"{self.model} cannot chat ({', '.join(map(str, capabilities)) or 'no capabilities'}): configure a "
                f"chat model for extraction, e.g. {DEFAULT_CHAT_MODEL} (`ollama pull {DEFAULT_CHAT_MODEL}`)"
            )

    def complete(self, messages: list[dict[str, str]], reply: ReplyFormat) -> str:
        body: dict[str, Any] = {
            "model": self.model, "messages": messages, "stream": False,
            "format": reply.json_schema(), "options": self.options,
        }
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        message = self._client.post("/api/chat", body).get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):  # a broken server or proxy, not a model's answer to retry
            raise ExtractionError(f"Ollama at {self._client.shown_url} answered /api/chat without a message's "
                                  f"text (message: {json_kind(message)}, content: {json_kind(content)})")
        return content


@hookimpl
def register_embedders(register):
    register("ollama", OllamaEmbedder)


@hookimpl
def register_extractors(register):
    register("ollama", OllamaExtractor)
