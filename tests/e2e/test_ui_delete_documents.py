"""The web page's tool endpoint runs delete_documents, as it runs the other curation tools: `duckgraph ui` as a child
process over a real DuckDB file, plain HTTP requests (the hashing embedder of tests/fakes.py)."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_security import request
from tests.e2e.ui_server import child_env, get_json, running_ui
from tests.fakes import HashingEmbedder


def test_the_page_deletes_a_document_and_search_no_longer_finds_it(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="hr-note-17", text="Priya Raman's salary is 184,000 dollars a year."),
                          DocumentInput(id="roadmap", text="Billing moves to Kafka in May, salary reviews in June.")])
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0")
    with running_ui(db, tmp_path / "ui.log", env) as url:
        assert "delete_documents" in get_json(f"{url}api/overview")["tools"]
        query = urllib.parse.quote("salary 184,000 dollars")
        assert "hr-note-17" in [p["document_id"] for p in get_json(f"{url}api/search?q={query}")["passages"]]

        status, _, body = request(url, "/api/tool/delete_documents", method="POST",
                                  body={"arguments": {"ids": ["hr-note-17", "nope"]}})
        assert status == 200, body
        answer = json.loads(body)
        assert (answer["deleted"], answer["not_found"]) == (["hr-note-17"], ["nope"])
        assert [p["document_id"] for p in get_json(f"{url}api/search?q={query}")["passages"]] == ["roadmap"]
        status, _, body = request(url, "/api/tool/delete_documents", method="POST", body={"arguments": {"ids": []}})
        assert status == 400 and json.loads(body)["error"] == "ids: needs at least 1 item"
        assert get_json(f"{url}api/overview")["stats"]["documents"] == 1


def test_a_namespace_among_the_tool_s_arguments_is_the_one_used(tmp_path: Path) -> None:
    # A script written for the MCP tools sends `namespace` inside `arguments`: it was replaced by the page's
    # default namespace, so the delete hit the same id in the other namespace.
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        for namespace in ("work", "personal"):
            kb.add_documents([DocumentInput(id="notes", text=f"Alex's {namespace} notes.")], namespace=namespace)
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0", DUCKGRAPH_NAMESPACE="work")
    with running_ui(db, tmp_path / "ui.log", env) as url:
        status, _, body = request(url, "/api/tool/delete_documents", method="POST",
                                  body={"arguments": {"ids": ["notes"], "namespace": "personal"},
                                        "namespace": "work"})
        assert status == 400 and "given twice" in json.loads(body)["error"], body
        status, _, body = request(url, "/api/tool/delete_documents", method="POST",
                                  body={"arguments": {"ids": ["notes"], "namespace": "personal"}})
        assert status == 200 and json.loads(body)["deleted"] == ["notes"], body
        assert get_json(f"{url}api/overview?namespace=work")["stats"]["documents"] == 1
        assert get_json(f"{url}api/overview?namespace=personal")["stats"]["documents"] == 0
