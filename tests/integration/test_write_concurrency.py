"""Vectors are computed outside the write lock: a long embedding holds no other writer back, and a write that
another one overtook while it embedded reads and decides again before it commits (one transaction still).

A gated embedder makes the order exact: it blocks on texts holding a marker until the test opens the gate.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core.domain.chunking import chunk_text
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import entity_key
from tests.fakes import HashingEmbedder

MARK = "slowmarker"
WAIT = 30.0


class GatedEmbedder(HashingEmbedder):
    """HashingEmbedder that, for a batch holding MARK, says so (`embedding`) and waits for `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = threading.Event()
        self.gate = threading.Event()

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        if any(MARK in text for text in texts):
            self.embedding.set()
            assert self.gate.wait(WAIT), "the test never opened the gate"
        return super().embed_batch(texts)


class Call(threading.Thread):
    """A use case on a thread of its own, keeping its result or error."""

    def __init__(self, function, *args, **kwargs) -> None:
        super().__init__(daemon=True)
        self._call = (function, args, kwargs)
        self.result = self.error = None

    def run(self) -> None:
        function, args, kwargs = self._call
        try:
            self.result = function(*args, **kwargs)
        except BaseException as exc:  # reported by the test
            self.error = exc


@pytest.fixture
def gated(db_path: Path):
    embedder = GatedEmbedder()
    with KnowledgeBase(DuckDBStore(db_path), embedder) as kb:
        yield kb, embedder
        embedder.gate.set()  # a failed test must not leave a thread waiting


def started(call: Call, embedder: GatedEmbedder) -> Call:
    call.start()
    assert embedder.embedding.wait(WAIT), "the long write never started embedding"
    return call


def finished(call: Call) -> Call:
    call.join(WAIT)
    assert not call.is_alive(), "the call did not finish"
    assert call.error is None, call.error
    return call


def big_document(words: int = 4_000) -> str:
    return " ".join(f"{MARK} word{i} about the Analytical Engine." for i in range(words))


def test_a_long_add_documents_does_not_block_a_small_add_knowledge_graph(gated):
    kb, embedder = gated
    big = started(Call(kb.add_documents, [DocumentInput(id="big", text=big_document())]), embedder)

    small = Call(kb.add_knowledge_graph, [NodeInput(name="Ada Lovelace", type="Person"),
                                          NodeInput(name="Analytical Engine", type="Machine")],
                 [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="WROTE_PROGRAM_FOR")])
    small.start()
    small.join(WAIT / 3)
    assert not small.is_alive(), "the small write waited for the long one's embedding"
    assert big.is_alive() and not embedder.gate.is_set()  # the long one is still embedding
    assert small.error is None and small.result.nodes_created == 2

    embedder.gate.set()
    finished(big)
    stats = kb.stats()
    assert (stats["nodes"], stats["edges"], stats["documents"]) == (2, 1, 1)
    assert stats["chunks"] == len(chunk_text(big_document(), kb.chunk_chars, kb.chunk_overlap)) > 1
    assert big.result.documents[0].chunk_ids and big.result.chunks_written == stats["chunks"]


def test_an_entity_stored_while_a_graph_was_embedded_is_merged_not_duplicated(gated):
    kb, embedder = gated
    slow = started(Call(kb.add_knowledge_graph, [NodeInput(name="Ada Lovelace", type="Person",
                                                           description=f"Mathematician {MARK}.")], []), embedder)
    kb.add_knowledge_graph([NodeInput(name="ada lovelace", type="Person", description="Wrote the first program.",
                                      observations=["Born in 1815."])], [])
    embedder.gate.set()
    finished(slow)

    nodes = [n for n in kb.store.find_nodes(kb.namespace, [entity_key("Ada Lovelace")])]
    assert len(nodes) == 1 and kb.stats()["nodes"] == 1
    assert "Wrote the first program." in nodes[0].description and MARK in nodes[0].description
    assert slow.result.nodes_created == 0 and slow.result.nodes_updated == 1
    assert slow.result.nodes[0].created is False
    assert kb.store.get_observations([nodes[0].id])[nodes[0].id] == ["Born in 1815."]


def test_an_entity_deleted_while_an_edge_to_it_was_embedded_is_refused_and_nothing_is_written(gated):
    kb, embedder = gated
    kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person"),
                            NodeInput(name="Analytical Engine", type="Machine")], [])
    before = kb.stats()
    slow = started(Call(kb.add_knowledge_graph, [NodeInput(name="Charles Babbage", type="Person",
                                                           description=f"Engineer {MARK}.")],
                        [EdgeInput(source="Charles Babbage", target="Analytical Engine", type="DESIGNED")]), embedder)
    kb.curation.delete_entities(["Analytical Engine"], kb.namespace)
    embedder.gate.set()
    slow.join(WAIT)
    assert slow.error is not None and "Analytical Engine" in str(slow.error) and "does not exist" in str(slow.error)
    stats = kb.stats()
    assert (stats["nodes"], stats["edges"]) == (before["nodes"] - 1, 0)


def test_a_document_stored_while_it_was_embedded_is_not_written_twice(gated):
    kb, embedder = gated
    text = big_document(600)
    slow = started(Call(kb.add_documents, [DocumentInput(id="notes", text=text)]), embedder)
    embedder.gate.set()  # the second call embeds the same text too
    kb.add_documents([DocumentInput(id="notes", text=text)])
    finished(slow)
    chunks = len(chunk_text(text, kb.chunk_chars, kb.chunk_overlap))
    assert kb.stats()["documents"] == 1 and kb.stats()["chunks"] == chunks


def test_a_document_replaced_while_another_version_was_embedded_ends_as_the_last_commit(gated):
    kb, embedder = gated
    text = big_document(600)
    slow = started(Call(kb.add_documents, [DocumentInput(id="notes", text=text)]), embedder)
    kb.add_documents([DocumentInput(id="notes", text="A short other version.")])
    embedder.gate.set()
    finished(slow)
    assert slow.result.documents[0].unchanged is False
    [stored] = kb.store.get_documents(["notes"], kb.namespace)
    assert stored.text == text
    chunks = kb.store.document_chunks(kb.namespace, ["notes"])
    assert [c.text for c in chunks] == chunk_text(text, kb.chunk_chars, kb.chunk_overlap)


def test_with_the_real_model_a_small_write_completes_while_a_long_document_embeds(real_kb, minilm, monkeypatch):
    kb = real_kb
    monkeypatch.setattr(minilm, "batch_size", 16)  # progress after every 16 passages: the test sees it start
    kb.add_knowledge_graph([NodeInput(name="Warm Up", type="Thing")], [])  # the model loaded and the file bound
    embedding = threading.Event()
    text = " ".join(f"Paragraph {i}: the Analytical Engine had a mill and a store, punched cards and a printer."
                    for i in range(1_000))
    big = Call(kb.add_documents, [DocumentInput(id="long", text=text)],
               progress=lambda done, total, message: embedding.set())
    big.start()
    assert embedding.wait(120), "the long document never started embedding"
    small = Call(kb.add_knowledge_graph, [NodeInput(name="Ada Lovelace", type="Person")], [])
    small.start()
    small.join(60)
    assert not small.is_alive() and small.error is None
    assert big.is_alive(), "the long document finished before the small write: make it longer"
    finished(big)
    stats = kb.stats()
    assert (stats["nodes"], stats["documents"]) == (2, 1)
    assert stats["chunks"] == len(chunk_text(text, kb.chunk_chars, kb.chunk_overlap))
