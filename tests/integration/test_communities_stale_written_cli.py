"""`duckgraph communities write` writes again a model's report that went stale between builds (an entity it names
changed), from the graph as it is now, and the report is then current: a real DuckDB file, the command line's own
services, the configured Ollama extractor and embedder answered by FakeOllama (tests/ollama_server.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from duckgraph.plugins.ollama import OllamaEmbedder
from tests.integration.test_communities_current import add_groups
from tests.ollama_server import FakeOllama

MODEL = "qwen3:8b"
NEW_DESCRIPTION = "Leads the Nightjar team."


class ReportModel:
    """Writes a numbered report, and keeps the material of each request."""

    def __init__(self) -> None:
        self.materials: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        self.materials.append(body["messages"][-1]["content"])
        return json.dumps({"title": f"Report {len(self.materials)}",
                           "summary": "A team of people and companies around one project."})


@pytest.fixture
def model():
    return ReportModel()


@pytest.fixture
def server(model):
    with FakeOllama(default_chat_reply=model) as fake:
        yield fake


@pytest.fixture
def cli_env(no_settings, server) -> pytest.MonkeyPatch:
    no_settings.setenv("DUCKGRAPH_EMBEDDER", "ollama")
    no_settings.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps({"base_url": server.base_url}))
    no_settings.setenv("DUCKGRAPH_EXTRACTOR", "ollama")
    no_settings.setenv("DUCKGRAPH_EXTRACTOR_OPTIONS", json.dumps({"base_url": server.base_url, "model": MODEL}))
    return no_settings


def knowledge_base(path: Path, server: FakeOllama) -> KnowledgeBase:
    """The file as the command line opens it (the same embedder), with no background rebuild."""
    kb = KnowledgeBase(DuckDBStore(path), OllamaEmbedder(base_url=server.base_url),
                       community_detector=LeidenDetector())
    kb.communities.keeper.stop()
    return kb


def written(capsys) -> int:
    out = capsys.readouterr().out
    return int(next(line for line in out.splitlines() if line.startswith("written: ")).split(": ")[1])


def test_communities_write_writes_a_stale_model_report_again(db_path, server, model, cli_env, capsys):
    with knowledge_base(db_path, server) as kb:
        add_groups(kb)
        communities = len(kb.store.communities("default"))
    assert main(["communities", "write", "--db", str(db_path), "--limit", "50"]) == 0
    assert written(capsys) == communities == len(model.materials)
    assert main(["communities", "write", "--db", str(db_path)]) == 0
    assert written(capsys) == 0  # nothing changed: nothing to write

    with knowledge_base(db_path, server) as kb:
        kb.curation.update_entity("Priya Raman", "default", description=NEW_DESCRIPTION)
        found = kb.communities.global_search("projects", "default", token_budget=5_000)
        (stale,) = [r for r in found.reports if r.stale]
        assert "Priya Raman" in {e.name for e in stale.key_entities}

    assert main(["communities", "write", "--db", str(db_path)]) == 0
    assert written(capsys) == 1
    # Written from the graph as it is now.
    assert f"- Priya Raman (Thing): {NEW_DESCRIPTION}" in model.materials[-1]
    assert f"Community {stale.id} " in model.materials[-1]
    with knowledge_base(db_path, server) as kb:
        found = kb.communities.global_search("projects", "default", token_budget=5_000)
        now = next(r for r in found.reports if r.id == stale.id)
        assert (now.title, now.author, now.stale) == (f"Report {communities + 1}", "model", False)
        assert kb.communities.to_write("default").communities == []
