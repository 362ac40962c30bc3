"""End to end: the installed plugin, found by its entry point, chosen with DUCKGRAPH_EMBEDDER=openai in a real
`duckgraph serve` subprocess (and `duckgraph doctor`), embedding through the OpenAI-compatible server on 127.0.0.1;
driven by the official MCP client. The API key reaches the server and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from openai_fake import FakeOpenAI

KEY = "sk-e2e-0123456789abcdef-secret"
CLI = [sys.executable, "-m", "duckgraph.core.cli"]
TIMEOUT_SECONDS = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server():
    with FakeOpenAI(api_key=KEY) as fake:
        yield fake


def child_env(tmp_path: Path, base_url: str, key: str = KEY) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "DUCKGRAPH_WARM_UP": "0",
            "DUCKGRAPH_DB": str(tmp_path / "kb.duckdb"), "DUCKGRAPH_RELEVANCE_FLOOR": "0.2",
            "DUCKGRAPH_EMBEDDER": "openai",
            "DUCKGRAPH_EMBEDDER_OPTIONS": json.dumps({"base_url": base_url, "model": "text-embedding-3-small"}),
            "OPENAI_API_KEY": key}


@pytest.mark.anyio
async def test_serve_adds_and_searches_through_the_plugin(tmp_path, server):
    params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], "serve"], env=child_env(tmp_path, server.base_url))
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("w") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(stdio_client(params, errlog=stderr)) as client:
            added = await client.call_tool("add_knowledge_graph", {
                "nodes": [{"name": "Lisbon", "type": "City", "description": "Capital city of Portugal"},
                          {"name": "Maya Chen", "type": "Person", "description": "Engineer who lives in Lisbon"}],
                "edges": [{"source": "Maya Chen", "target": "Lisbon", "type": "LIVES_IN"}]})
            assert not added.is_error, added.content
            documents = await client.call_tool("add_documents", {"documents": [
                {"id": "note-1", "text": "Maya Chen moved to Lisbon in 2021 and works on tram software."}]})
            assert not documents.is_error, documents.content
            found = await client.call_tool("search", {"query": "Where does Maya Chen live?"})
            assert not found.is_error, found.content
            result = found.structured_content
            assert "Maya Chen" in [a["name"] for a in result["anchors"]]
            assert ("Maya Chen", "LIVES_IN", "Lisbon") in {(e["source"], e["type"], e["target"])
                                                           for e in result["edges"]}
            assert result["passages"][0]["document_id"] == "note-1"
    embedded = server.requests_to("/v1/embeddings")
    assert embedded and all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in embedded)
    assert KEY not in stderr_path.read_text()

    # The file remembers the plugin's vector space: doctor reports it, without the key.
    doctor = subprocess.run([*CLI, "doctor", "--json"], env=child_env(tmp_path, server.base_url),
                            capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["embedder"]["id"] == "openai:text-embedding-3-small"
    assert report["embedder"]["api key"] == "$OPENAI_API_KEY (set)"
    assert KEY not in doctor.stdout + doctor.stderr


def test_doctor_names_a_refused_key_without_showing_it(tmp_path, server):
    wrong = "sk-wrong-0123456789abcdef-secret"
    doctor = subprocess.run([*CLI, "doctor", "--json"], env=child_env(tmp_path, server.base_url, key=wrong),
                            capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
    assert doctor.returncode == 1
    [problem] = [p for p in json.loads(doctor.stdout)["problems"] if "embedder" in p]
    assert "refused the API key in $OPENAI_API_KEY (HTTP 401): set a valid key there" in problem
    assert wrong not in doctor.stdout + doctor.stderr


def test_a_bad_option_value_is_a_one_line_error_not_a_traceback(tmp_path, server):
    env = child_env(tmp_path, server.base_url)
    env["DUCKGRAPH_EMBEDDER_OPTIONS"] = json.dumps({"base_url": server.base_url, "timeout": "30"})
    search = subprocess.run([*CLI, "search", "anything"], env=env, capture_output=True, text=True,
                            timeout=TIMEOUT_SECONDS)
    assert search.returncode == 1
    assert search.stderr.strip() == ("duckgraph: bad options for embedder 'openai': timeout must be a number of "
                                     "seconds above 0, not '30'")
