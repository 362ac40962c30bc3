"""The hashing embedder of tests/fakes.py as an entry-point plugin (embedder id "fake"), for server subprocesses.

A test makes a child process see it by putting a dist-info folder with the entry point, and the repository root,
on the child's PYTHONPATH (see `fake_embedder_env` in tests/e2e/test_shared_file.py). Like the real embedders it
is cheap to construct: tests/fakes.py (and numpy) is imported on the first embedding, so a server that never
embeds never imports numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duckgraph.ports import Embedder, hookimpl


class LazyHashingEmbedder(Embedder):
    """tests.fakes.HashingEmbedder, created on first use."""

    def __init__(self, dimensions: int = 64, name: str = "fake-hashing") -> None:
        self._dimensions = dimensions
        self._name = name
        self._inner: Any = None

    @property
    def id(self) -> str:
        return f"test:{self._name}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed_batch(self, texts: Sequence[str]) -> Any:
        if self._inner is None:
            from tests.fakes import HashingEmbedder

            self._inner = HashingEmbedder(self._dimensions, self._name)
        return self._inner.embed_batch(texts)


@hookimpl
def register_embedders(register):
    register("fake", LazyHashingEmbedder)
