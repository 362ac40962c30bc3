"""End to end in Ollama-only mode: a real `duckgraph serve` subprocess configured with the Ollama embedder and
extractor, pointed at FakeOllama (tests/ollama_server.py) serving the real all-MiniLM-L6-v2 vectors and a scripted
chat model, driven over stdio by the MCP SDK's `Client`.

The child never loads a model itself (every vector comes over HTTP), so it starts in about a second.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from duckgraph.plugins.duckdb import DuckDBStore
from tests.ollama_server import FakeOllama, minilm_embed_fn

pytestmark = pytest.mark.model

TIMEOUT_SECONDS = 120
SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]
CHAT_MODEL = "qwen3:8b"

DOCUMENTS = [
    {"id": "doc-engine", "title": "The Analytical Engine",
     "text": "Charles Babbage designed the Analytical Engine, a mechanical general-purpose computer. "
             "Ada Lovelace wrote the first program for the Analytical Engine in 1843."},
    {"id": "doc-turing", "title": "Alan Turing",
     "text": "Alan Turing worked at Bletchley Park during the Second World War, breaking Enigma messages."},
]
FACTS = [
    ("Charles Babbage", "Person", "DESIGNED", "Analytical Engine", "Machine"),
    ("Ada Lovelace", "Person", "WROTE_PROGRAM_FOR", "Analytical Engine", "Machine"),
    ("Alan Turing", "Person", "WORKED_AT", "Bletchley Park", "Place"),
]


def scripted_model(body: dict[str, Any]) -> str:
    """A chat model that reads the passage in the user message and states the FACTS it names."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user").split("Text:\n", 1)[1]
    nodes: dict[str, dict[str, str]] = {}
    edges = []
    for source, source_type, relation, target, target_type in FACTS:
        if source in text and target in text:
            nodes.setdefault(source, {"name": source, "type": source_type})
            nodes.setdefault(target, {"name": target, "type": target_type})
            edges.append({"source": source, "target": target, "type": relation,
                          "description": f"{source} {relation.lower().replace('_', ' ')} the {target}."})
    return "<think>\nFind the entities.\n</think>\n```json\n" + json.dumps({"nodes": list(nodes.values()),
                                                                            "edges": edges}) + "\n```"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def minilm_fn(minilm):
    return minilm_embed_fn(minilm)


class StdoutWatch:
    """A Client message handler that records what the transport could not parse (garbage on stdout)."""

    def __init__(self) -> None:
        self.problems: list[Exception] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.problems.append(message)


def child_env(tmp_path: Path, base_url: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "DUCKGRAPH_WARM_UP": "0",
        "DUCKGRAPH_EMBEDDER": "ollama", "DUCKGRAPH_EMBEDDER_OPTIONS": json.dumps({"base_url": base_url}),
        "DUCKGRAPH_EXTRACTOR": "ollama",
        "DUCKGRAPH_EXTRACTOR_OPTIONS": json.dumps({"base_url": base_url, "model": CHAT_MODEL}),
    }


@pytest.mark.anyio
async def test_extract_search_and_ollama_going_away(tmp_path, db_path, minilm_fn):
    ollama = FakeOllama(embed_fn=minilm_fn, default_chat_reply=scripted_model).start()
    base_url = ollama.base_url
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(db_path)],
                                   env=child_env(tmp_path, base_url), cwd=tmp_path)
    watch = StdoutWatch()
    stderr_path = tmp_path / "stderr.log"
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    try:
        with stderr_path.open("w", encoding="utf-8") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
            async with Client(stdio_client(params, errlog=stderr), message_handler=watch) as client:
                tools = {t.name: t for t in (await client.list_tools()).tools}
                assert {"add_knowledge_graph", "add_documents", "search"} <= set(tools)
                assert "extract" in tools["add_documents"].input_schema["properties"]
                assert ollama.requests == []  # no warm-up, nothing asked of Ollama yet

                added = await client.call_tool("add_documents", {"documents": DOCUMENTS, "extract": True},
                                               progress_callback=on_progress)
                assert not added.is_error, added.content
                result = added.structured_content
                chunk_ids = {d["id"]: d["chunk_ids"] for d in result["documents"]}
                assert [len(ids) for ids in chunk_ids.values()] == [1, 1]
                assert result["extraction_errors"] == 0
                assert [(e["document_id"], e["chunk_id"], e["nodes"], e["edges"], e["error"])
                        for e in result["extractions"]] == [
                    ("doc-engine", chunk_ids["doc-engine"][0], 3, 2, None),
                    ("doc-turing", chunk_ids["doc-turing"][0], 2, 1, None),
                ]

                searched = await client.call_tool("search", {"query": "Who designed the Analytical Engine?"})
                assert not searched.is_error, searched.content
                found = searched.structured_content
                assert "Analytical Engine" in [a["name"] for a in found["anchors"]]
                facts = {(e["source"], e["type"], e["target"]) for e in found["edges"]}
                assert ("Charles Babbage", "DESIGNED", "Analytical Engine") in facts
                assert found["passages"][0]["document_id"] == "doc-engine"
                assert "Charles Babbage" in searched.content[0].text

                # Ollama goes away: tools say where it was expected and how to start it; the server lives on.
                ollama.stop()
                gone = await client.call_tool("search", {"query": "Where did Alan Turing work?"})
                assert gone.is_error
                message = gone.content[0].text
                assert base_url in message and "`ollama serve`" in message
                gone = await client.call_tool("add_documents", {"documents": [{"id": "doc-3", "text": "Grace "
                                                                "Hopper worked at Harvard University."}],
                                                                "extract": True})
                assert gone.is_error and "`ollama serve`" in gone.content[0].text
                listed = await client.list_tools(cache_mode="bypass")  # a real round trip, not the cache
                assert {t.name for t in listed.tools} == set(tools)
    finally:
        ollama.stop()

    assert watch.problems == [], "the server wrote something that is not a JSON-RPC message to stdout"
    chat = [r["body"] for r in ollama.requests_to("/api/chat")]
    assert len(chat) == 2 and all(b["model"] == CHAT_MODEL and b["stream"] is False for b in chat)

    embedding = [m for m in progress if m[2] == "embedding passages"]
    extracting = [m for m in progress if m[2] == "extracting entities and relationships"]
    assert embedding and embedding[-1][:2] == (2, 2)
    assert [m[:2] for m in extracting] == [(1, 2), (2, 2)]

    errors = stderr_path.read_text(encoding="utf-8")
    assert "Traceback" not in errors, errors
    store = DuckDBStore(db_path)
    store.open()
    try:
        stats = store.stats()
        assert (stats["documents"], stats["chunks"], stats["nodes"], stats["edges"]) == (2, 2, 5, 3)
        assert store.embedder_info() == ("ollama:all-minilm:latest", 384)
        assert store.get_documents(["doc-3"], "default") == []  # nothing written once Ollama was gone
    finally:
        store.close()
