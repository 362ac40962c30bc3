"""The hashing embedder of tests/fake_embedder_plugin.py, slowed down (embedder "slow"): each batch takes
`SLOW_EMBEDDER_SECONDS` (default 0.5), so that a test can act while a server subprocess embeds (e.g.
cancel a long add_documents). Registered for children as tests/fake_embedder_plugin.py is."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from duckgraph.ports import hookimpl
from tests.fake_embedder_plugin import LazyHashingEmbedder


class SlowHashingEmbedder(LazyHashingEmbedder):
    def __init__(self) -> None:
        super().__init__(name="slow-hashing")
        self._seconds = float(os.environ.get("SLOW_EMBEDDER_SECONDS", "0.5"))

    def embed_batch(self, texts: Sequence[str]) -> Any:
        time.sleep(self._seconds)
        return super().embed_batch(texts)


@hookimpl
def register_embedders(register):
    register("slow", SlowHashingEmbedder)
