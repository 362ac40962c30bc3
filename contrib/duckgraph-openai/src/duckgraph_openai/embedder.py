"""Embeddings from any OpenAI-compatible /v1/embeddings endpoint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from duckgraph.ports import Embedder, EmbedderError

from duckgraph_openai.client import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, OpenAIClient, check_options

if TYPE_CHECKING:
    import numpy as np

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"


class OpenAIEmbedder(Embedder):
    """Embeds through POST {base_url}/embeddings. With `dimensions` the server is asked for vectors of that
    width (models such as text-embedding-3 shorten theirs); without it the width is probed once."""

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        base_url: str = DEFAULT_BASE_URL,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        api_key_env: str = DEFAULT_API_KEY_ENV,
    ) -> None:
        check_options("embedder 'openai'", model=model, base_url=base_url, dimensions=dimensions,
                      batch_size=batch_size, timeout=timeout, max_retries=max_retries, backoff=backoff,
                      api_key_env=api_key_env)
        self.model = model
        self.batch_size = batch_size
        self._requested = dimensions
        self._dimensions = dimensions
        self._client = OpenAIClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                                    api_key_env=api_key_env, error=EmbedderError,
                                    rate_limit_advice="lower batch_size, or raise max_retries or backoff")

    @property
    def id(self) -> str:
        # A shortened vector is another space than the full one: the width asked for is part of the identity.
        return f"openai:{self.model}" + (f"@{self._requested}" if self._requested else "")

    def warm_up(self) -> None:
        self.dimensions  # one request reaches the server and tells the width

    def describe(self) -> dict[str, str]:
        return {"endpoint": f"{self._client.shown_url}/embeddings", "api key": self._client.key_status()}

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        return self._request(list(texts))

    def _request(self, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._requested:
            body["dimensions"] = self._requested
        data = self._client.post("/embeddings", body).get("data")
        if not isinstance(data, list) or len(data) != len(texts):
            raise EmbedderError(f"{self._client.shown_url}/embeddings returned "
                                f"{len(data) if isinstance(data, list) else 'no'} embeddings for {len(texts)} texts")
        try:  # the answer carries each vector's position; servers need not keep the order
            rows = sorted(data, key=lambda item: item["index"])
            vectors = [row["embedding"] for row in rows]
        except (KeyError, TypeError) as exc:
            raise EmbedderError(f"{self._client.shown_url}/embeddings sent items without index or embedding: "
                                "is it an OpenAI-compatible API?") from exc
        if [row["index"] for row in rows] != list(range(len(texts))):
            raise EmbedderError(f"{self._client.shown_url}/embeddings numbered its embeddings wrongly")
        checked = self.vectors_from_json(vectors, len(texts), source=f"{self._client.shown_url}/embeddings")
        if self._dimensions is None:  # the first answer tells the width: no probe needed
            self._dimensions = checked.shape[1]
        return checked
