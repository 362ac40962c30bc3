"""Embeddings and graph extraction through a local Ollama server (HTTP API, no PyTorch needed)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duckgraph.ports import Embedder, EmbedderError, ExtractionError, Extractor, GraphFragment, entity_key, hookimpl

if TYPE_CHECKING:
    import httpx
    import numpy as np

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://127.0.0.1:11434"
DEFAULT_EMBEDDING_MODEL = "all-minilm"
DEFAULT_CHAT_MODEL = "qwen3:8b"


def resolve_base_url(base_url: str | None) -> str:
    """The explicit option, else OLLAMA_HOST (which Ollama accepts without a scheme), else the default."""
    url = base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_BASE_URL
    if "://" not in url:
        url = f"http://{url}"
    host = url.split("://", 1)[1]
    if ":" not in host.split("/", 1)[0]:
        url = url.rstrip("/") + ":11434"
    return url.rstrip("/").replace("://0.0.0.0", "://127.0.0.1")


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
        self.timeout = timeout
        self._error = error

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        import anyio  # imported on first call: registering the plugin stays cheap
        import httpx

        url = f"{self.base_url}{path}"
        try:
            response = _run_async(self._post, path, body)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise self._error(
                f"Ollama at {url} did not answer within the {self.timeout:g} s deadline (the timeout option, for "
                "the whole request); the model may still be loading, the machine is busy or the server stalls: "
                "raise the timeout option or try again"
            ) from exc
        except httpx.ConnectError as exc:
            raise self._error(
                f"cannot reach Ollama at {self.base_url}: is it running? Start it with `ollama serve`, or point "
                "duckgraph at it with OLLAMA_HOST or the base_url option"
            ) from exc
        except (httpx.HTTPError, anyio.BrokenResourceError, OSError) as exc:
            raise self._error(f"request to {url} failed: {exc}") from exc
        message = _error_message(response)
        model = body.get("model", "")
        if response.status_code == 404 and "not found" in message:
            raise self._error(
                f"Ollama at {self.base_url} does not have the model {model!r}: run `ollama pull {model}`"
            )
        if response.status_code >= 400:
            raise self._error(f"Ollama at {self.base_url} answered {path} with HTTP {response.status_code}: {message}")
        try:
            return response.json()
        except ValueError as exc:
            raise self._error(f"Ollama at {self.base_url} sent a reply to {path} that is not JSON") from exc

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        import anyio
        import httpx

        # Cancellation interrupts any await, the reading of the headers included, so the deadline holds however
        # slowly the server sends; httpx's own timeout only bounds each read.
        with anyio.fail_after(self.timeout):
            async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout) as client:
                return await client.post(path, json=body)


def _run_async(function: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Run a coroutine function to completion from synchronous code, also from a thread with a running event
    loop (anyio.run refuses that one: the call then runs on a thread of its own)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import anyio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(function, *args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, function, *args).result()


def _error_message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", response.text))
    except ValueError:
        return response.text.strip()[:500]


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
    def dimensions(self) -> int:
        if self._dimensions is None:
            self._dimensions = len(self._request(["dimension probe"])[0])
        return self._dimensions

    def warm_up(self) -> None:
        self.dimensions  # one request loads the model in Ollama and tells the width

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np  # imported on use: the MCP handshake should not wait for it

        return np.asarray(self._request(list(texts)), dtype=np.float32)

    def _request(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "truncate": True}
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        reply = self._client.post("/api/embed", body)
        vectors = reply.get("embeddings")
        if not isinstance(vectors, list) or len(vectors) != len(texts):
            raise EmbedderError(
                f"Ollama at {self._client.base_url} returned {len(vectors) if isinstance(vectors, list) else 'no'} "
                f"embeddings for {len(texts)} texts"
            )
        return vectors


# -- extraction -------------------------------------------------------------------------------------------

# Built on first use (defer_build): a server that never extracts does not pay for them at start-up.
class _ExtractedNode(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    name: str = Field(min_length=1, max_length=300)
    type: str = Field(min_length=1, max_length=80)
    description: str = Field("", max_length=1_000)
    aliases: list[str] = Field(default_factory=list, max_length=20)


class _ExtractedEdge(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    source: str = Field(min_length=1, max_length=300)
    target: str = Field(min_length=1, max_length=300)
    type: str = Field(min_length=1, max_length=80)
    description: str = Field("", max_length=1_000)


class ExtractionResult(BaseModel):
    """What the chat model must answer; its JSON schema goes to Ollama as the `format`."""

    model_config = ConfigDict(defer_build=True)

    nodes: list[_ExtractedNode]
    edges: list[_ExtractedEdge]


EXTRACTION_INSTRUCTIONS = """\
You extract a knowledge graph from a text. Answer with JSON only: {"nodes": [...], "edges": [...]}.
Nodes are the named things the text is about: people, organisations, places, works, products, concepts,
events. Each node: name (as written in the text, full form), type (a specific class such as Person,
Organization, City, Drug, Paper), description (one short sentence from the text), aliases (other names used).
Edges are facts stated in the text between two nodes: source and target are node names exactly as in "nodes",
type is a specific relation in UPPER_SNAKE_CASE such as FOUNDED, EMPLOYED_BY, BORN_IN, LOCATED_IN, AUTHORED,
TREATS. Never use vague types such as RELATED_TO or ASSOCIATED_WITH. description is the fact as one sentence.
Extract only what the text states. When a known entity is mentioned, use its name exactly as given.
"""

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def parse_extraction(reply: str, known_entities: Sequence[str] = ()) -> ExtractionResult:
    """Validate a chat reply: <think> blocks and code fences removed, the schema checked, edge ends known."""
    text = _FENCE.sub("", _THINK.sub("", reply).strip()).strip()
    try:
        result = ExtractionResult.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors()[:5])
        raise ValueError(f"the reply does not match the schema ({problems})") from exc
    names = {entity_key(n.name) for n in result.nodes} | {entity_key(a) for n in result.nodes for a in n.aliases}
    names |= {entity_key(k) for k in known_entities}
    unknown = sorted({e.source for e in result.edges if entity_key(e.source) not in names}
                     | {e.target for e in result.edges if entity_key(e.target) not in names})
    if unknown:
        raise ValueError(f"edges name entities missing from nodes: {', '.join(unknown[:5])}")
    return result


class OllamaExtractor(Extractor):
    """Extracts entities and relationships with a local chat model and Ollama's structured outputs."""

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
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.model = model
        self.keep_alive = keep_alive
        self.max_attempts = max_attempts
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

    def extract(self, text: str, *, known_entities: Sequence[str] = ()) -> GraphFragment:
        messages = [{"role": "system", "content": EXTRACTION_INSTRUCTIONS}, {"role": "user", "content": _user_prompt(text, known_entities)}]
        problem = ""
        for attempt in range(1, self.max_attempts + 1):
            body: dict[str, Any] = {
                "model": self.model, "messages": messages, "stream": False,
                "format": ExtractionResult.model_json_schema(), "options": self.options,
            }
            if self.keep_alive is not None:
                body["keep_alive"] = self.keep_alive
            reply = str(self._client.post("/api/chat", body).get("message", {}).get("content", ""))
            try:
                result = parse_extraction(reply, known_entities)
            except ValueError as exc:
                problem = str(exc)
                log.info("extraction attempt %d/%d rejected: %s", attempt, self.max_attempts, problem)
                messages = [*messages, {"role": "assistant", "content": reply[:4_000]},
                            {"role": "user", "content": f"That answer was invalid: {problem}. Answer again with "
                             "JSON that follows the schema, and only that."}]
                continue
            return {"nodes": [n.model_dump() for n in result.nodes], "edges": [e.model_dump() for e in result.edges]}
        raise ExtractionError(f"{self.model} gave no valid extraction in {self.max_attempts} attempts: {problem}")


def _user_prompt(text: str, known_entities: Sequence[str]) -> str:
    known = ""
    if known_entities:
        known = "Known entities mentioned in the text (reuse these names exactly):\n" + "\n".join(
            f"- {name}" for name in known_entities[:100]
        ) + "\n\n"
    return f"{known}Text:\n{text}"


@hookimpl
def register_embedders(register):
    register("ollama", OllamaEmbedder)


@hookimpl
def register_extractors(register):
    register("ollama", OllamaExtractor)
