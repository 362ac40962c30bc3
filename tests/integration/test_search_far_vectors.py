"""Search with an embedder whose vectors for the query are orthogonal or opposite to every passage's: a plugin
embedder (a hashing one, a model that knows none of the query's words) gives such vectors, and has no relevance
floor unless its author sets one. Search must answer, not divide by the best passage's similarity of 0."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder


class AxisEmbedder(HashingEmbedder):
    """Every text on the first axis, except texts holding `odd_word`: on the second axis, or opposite the first."""

    def __init__(self, odd_word: str, odd: Sequence[float]) -> None:
        super().__init__(dimensions=8, name="axis")
        self.odd_word, self.odd = odd_word, np.asarray(odd, dtype=np.float32)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self.odd if self.odd_word in text else np.eye(8, dtype=np.float32)[0]
        return out


@pytest.mark.parametrize("odd", [np.eye(8)[1], -np.eye(8)[0]], ids=["orthogonal", "opposite"])
@pytest.mark.parametrize("graph", [False, True], ids=["passages", "passages-and-entities"])
def test_a_query_far_from_everything_gets_an_answer(tmp_path: Path, odd, graph: bool) -> None:
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), AxisEmbedder("xylophone", odd)) as kb:
        kb.add_documents([DocumentInput(id="a", text="Alice works at Acme."),
                          DocumentInput(id="b", text="Bob lives in Berlin.")])
        if graph:
            kb.add_knowledge_graph([NodeInput(name="Alice", type="Person"), NodeInput(name="Acme", type="Company")],
                                   [EdgeInput(source="Alice", target="Acme", type="WORKS_AT", source_ids=["a"])])
        result = kb.search("xylophone")
        assert all(p.score <= 0.0 for p in result.passages)  # nothing near: no passage scores above 0
        assert result.text  # an answer the model can read
