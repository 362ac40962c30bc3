"""Imperfect extraction replies over real HTTP (FakeOllama, tests/ollama_server.py) into a real DuckDB file: a reply
in prose or a code fence, null for optional fields, a description over the limit and an edge naming no node each
cost a passage its whole graph before; now the passage stores the valid part, what was left out is reported, and
a reply with nothing usable still fails its passage."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaExtractor
from duckgraph.ports import entity_key
from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama

ADA = {"nodes": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "Analytical Engine", "type": "Machine"}],
       "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "PROGRAMMED"}]}
#: What the scripted model answers to a passage that starts with the key (every attempt).
REPLIES = {
    "PROSE": f"Here is the knowledge graph:\n```json\n{json.dumps(ADA)}\n```\nLet me know if you need more.",
    "TRAILING": json.dumps(ADA) + "\n\nNote: I only extracted stated facts.",
    "DANGLING": json.dumps({
        "nodes": [{"name": "Grace Hopper", "type": "Person"}, {"name": "COBOL", "type": "Language"},
                  {"name": "Harvard", "type": "University"}, {"name": "Navy", "type": "Organization"}],
        "edges": [{"source": "Grace Hopper", "target": "COBOL", "type": "INFLUENCED"},
                  {"source": "Grace Hopper", "target": "Harvard", "type": "WORKED_AT"},
                  {"source": "Grace Hopper", "target": "Mark I", "type": "PROGRAMMED"},
                  {"source": "Grace Hopper", "target": "Navy", "type": "SERVED_IN"}]}),
    "NULLS": json.dumps({"nodes": [{"name": "Rust", "type": "Language", "description": None, "aliases": None}],
                         "edges": []}),
    "LONG": json.dumps({"nodes": [{"name": "Python", "type": "Language", "description": "A language. " * 100}],
                        "edges": []}),
    "PARTIAL": json.dumps(ADA)[:60],
}
ATTEMPTS = 2


def passage_of(body: dict[str, Any]) -> str:
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return first_user.split("Text:\n", 1)[1]


def scripted(body: dict[str, Any]) -> str:
    return REPLIES[passage_of(body).split(":", 1)[0]]


@pytest.fixture
def ollama():
    with FakeOllama(default_chat_reply=scripted) as server:
        yield server


def chats_about(server: FakeOllama, key: str) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests_to("/api/chat") if passage_of(r["body"]).startswith(key)]


def test_each_passage_stores_its_valid_part_and_what_was_left_out_is_reported(ollama, db_path, caplog):
    extractor = OllamaExtractor("qwen3:8b", base_url=ollama.base_url, max_attempts=ATTEMPTS)
    docs = [DocumentInput(id=key.lower(), text=f"{key}: a passage about what the model answers.") for key in REPLIES]
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), extractor=extractor) as kb, \
            caplog.at_level(logging.WARNING, logger="duckgraph.ports.extractor"):
        result = kb.add_documents(docs, extract=True)
        found = {e.document_id: (e.nodes, e.edges, e.error) for e in result.extractions}

        assert found["prose"] == found["trailing"] == (2, 1, None)
        assert found["nulls"] == found["long"] == (1, 0, None)
        assert found["dangling"] == (4, 3, None)
        # A reply cut off has nothing usable: the passage fails as before, after its attempts.
        nodes, edges, error = found["partial"]
        assert (nodes, edges) == (0, 0) and f"gave no valid extraction in {ATTEMPTS} attempts" in error
        assert result.extraction_errors == 1

        # Repairs need no second request; the edge naming no node was shown to the model each time first.
        assert all(len(chats_about(ollama, key)) == 1 for key in ("PROSE", "TRAILING", "NULLS", "LONG"))
        dangling = chats_about(ollama, "DANGLING")
        assert len(dangling) == ATTEMPTS
        assert "edges name entities missing from nodes: Mark I" in dangling[-1]["messages"][-1]["content"]

        stored = {n.name: n for n in kb.store.find_nodes(kb.namespace, [entity_key(k) for k in (
            "Grace Hopper", "Mark I", "Rust", "Python")])}
        assert set(stored) == {"Grace Hopper", "Rust", "Python"}  # no "Mark I" was made up
        assert stored["Rust"].description == "" and stored["Rust"].aliases == ()
        python, given = stored["Python"].description, "A language. " * 100
        assert len(python) <= 1_000 and python.endswith("…")  # cut where a word ends
        assert given.startswith(python[:-1]) and given[len(python) - 1] == " "
        assert kb.stats()["edges"] == 1 + 3  # Ada's (stored by PROSE, updated by TRAILING) and Grace Hopper's

    reported = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(reported) == 2, reported
    dropped = next(m for m in reported if "DANGLING" in m)
    assert dropped.startswith("ollama:qwen3:8b kept the valid part of its reply for the passage 'DANGLING:")
    assert f"dropped 1 edge naming entities missing from nodes, not fixed in {ATTEMPTS} attempts" in dropped
    assert "(Grace Hopper PROGRAMMED Mark I)" in dropped
    shortened = next(m for m in reported if "LONG" in m)
    assert "shortened 1 description of 1200 characters to the limit of 1000" in shortened
