"""Reasoning before the answer, through the Ollama extractor against FakeOllama (tests/ollama_server.py), on a real
DuckDB file with the real default model: a reply holding only the end of its reasoning (the server's template
opened <think>) that quotes the schema gives the passage the answer's graph, not the empty one quoted; a reply cut
off inside <think> is an extraction error, so the passage is not marked read and a later run reads it again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaExtractor
from tests.ollama_server import FakeOllama

pytestmark = pytest.mark.model

ANSWER = json.dumps({"nodes": [{"name": "Acme Corp", "type": "Company"}, {"name": "Berlin", "type": "City"}],
                     "edges": [{"source": "Acme Corp", "target": "Berlin", "type": "HEADQUARTERED_IN"}]})
REASONING = 'The user wants {"nodes": [], "edges": []} filled in. Acme Corp is in Berlin.'
DOCUMENT = DocumentInput(id="hq.md", text="Acme Corp is headquartered in Berlin.")


def knowledge_base(path: Path, server: FakeOllama, embedder) -> KnowledgeBase:
    extractor = OllamaExtractor("qwen3:8b", base_url=server.base_url, max_attempts=2)
    return KnowledgeBase(DuckDBStore(path), embedder, extractor=extractor)


def test_reasoning_without_its_opening_tag_gives_the_passage_the_answer_s_graph(db_path, minilm):
    with FakeOllama(default_chat_reply=f"{REASONING}\n</think>\n\n{ANSWER}") as server, \
            knowledge_base(db_path, server, minilm) as kb:
        result = kb.add_documents([DOCUMENT], extract=True)
        assert [(e.nodes, e.error) for e in result.extractions] == [(2, None)]
        assert sorted(n.name for n in kb.store.list_nodes("default", limit=10)) == ["Acme Corp", "Berlin"]
        found = kb.search("Where is Acme Corp headquartered?")
        assert [(e.source, e.type, e.target) for e in found.edges] == [("Acme Corp", "HEADQUARTERED_IN", "Berlin")]
        assert [p.document_id for p in found.passages] == ["hq.md"]


def test_a_reply_cut_off_inside_its_reasoning_is_an_error_and_read_again(db_path, minilm):
    with FakeOllama(default_chat_reply=f"<think>\n{REASONING} So the") as server, \
            knowledge_base(db_path, server, minilm) as kb:
        first = kb.add_documents([DOCUMENT], extract=True)
        assert first.extraction_errors == 1 and "ended inside its <think> reasoning" in first.extractions[0].error
        assert len(server.requests_to("/api/chat")) == 2  # asked again once, as any unusable reply
        assert kb.store.list_nodes("default", limit=10) == []

        server.default_chat_reply = f"<think>\n{REASONING}\n</think>\n{ANSWER}"
        again = kb.add_documents([DOCUMENT], extract=True)  # the same text: only the extraction is retried
        assert [(e.skipped, e.nodes, e.error) for e in again.extractions] == [(False, 2, None)]
        assert len(server.requests_to("/api/chat")) == 3
