"""Test doubles for fast unit tests. Every feature also has a test on the real parts."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from duckgraph.ports import Embedder, hookimpl


class HashingEmbedder(Embedder):
    """Bag-of-words vectors from hashed words: texts sharing words are similar. Deterministic, instant."""

    def __init__(self, dimensions: int = 64, name: str = "fake-hashing") -> None:
        self._dimensions = dimensions
        self._name = name
        self.calls: list[int] = []

    @property
    def id(self) -> str:
        return f"test:{self._name}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.casefold()):
                seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row] += np.random.default_rng(seed).standard_normal(self._dimensions).astype(np.float32)
            if not out[row].any():
                out[row, 0] = 1.0
        return out


class FakeEmbedderPlugin:
    """A plugin object registering the hashing embedder under the id 'fake'."""

    @hookimpl
    def register_embedders(self, register):
        register("fake", HashingEmbedder)
