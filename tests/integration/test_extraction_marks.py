"""What extraction remembers of its passages, on real DuckDB files against FakeOllama (tests/ollama_server.py):

- a passage the extractor read is marked (`chunks.extracted_by`), even when it found nothing, so re-running an
  ingest sends the model nothing it read before; a failed passage is read again, a changed document's new passages
  are extracted; files of schema 5 are upgraded (their passages without entities are read once more);
- a document replaced while the model still reads its old text keeps nothing of that text: the old passage's graph
  is refused under the write lock and reported as that passage's error, never stored without provenance (which
  would look written by hand, so that no later replacement or prune would remove it).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.ingest import PASSAGE_GONE
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION
from duckgraph.plugins.ollama import OllamaExtractor
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama

MODEL = "qwen3:8b"
#: A passage with this word makes the scripted model answer garbage, every time.
GARBLE = "GARBLED"


def passage_of(body: dict[str, Any]) -> str:
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return first_user.split("Text:\n", 1)[1]


def located(company: str, city: str) -> str:
    return json.dumps({"nodes": [{"name": company, "type": "Company"}, {"name": city, "type": "City"}],
                       "edges": [{"source": company, "target": city, "type": "HEADQUARTERED_IN"}]})


def scripted_model(body: dict[str, Any]) -> str:
    """Ada Lovelace in a passage is a Person; a city named in it is Acme's headquarters; anything else: nothing."""
    text = passage_of(body)
    if GARBLE in text:
        return "Sorry, no JSON today."
    if "Ada Lovelace" in text:
        return json.dumps({"nodes": [{"name": "Ada Lovelace", "type": "Person"}], "edges": []})
    for city in ("Berlin", "Munich"):
        if city in text:
            return located("Acme Corp", city)
    return json.dumps({"nodes": [], "edges": []})


@pytest.fixture
def ollama():
    with FakeOllama(default_chat_reply=scripted_model) as server:
        yield server


def chats(server: FakeOllama) -> int:
    return len(server.requests_to("/api/chat"))


def knowledge_base(path: Path, server: FakeOllama) -> KnowledgeBase:
    extractor = OllamaExtractor(MODEL, base_url=server.base_url, max_attempts=1)
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder(), extractor=extractor)


def names(kb: KnowledgeBase) -> set[str]:
    return {n.name for n in kb.store.list_nodes("default", limit=100)}


def dangling_provenance(path: Path) -> tuple[int, int]:
    """Mentions and evidence that name a passage not stored, read from the closed file."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return tuple(con.execute(f"SELECT count(*) FROM {table} WHERE chunk_id NOT IN (SELECT id FROM chunks)")
                     .fetchone()[0] for table in ("mentions", "edge_evidence"))
    finally:
        con.close()


def as_schema_5(db_path) -> None:
    """Make the file as version 5 wrote it: passages without extraction marks."""
    con = duckdb.connect(str(db_path))
    try:
        con.execute("DROP INDEX chunks_document")  # DuckDB drops no column of an indexed table
        con.execute("ALTER TABLE chunks DROP COLUMN extracted_by")
        con.execute("CREATE INDEX chunks_document ON chunks (namespace, document_id)")
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    finally:
        con.close()


# -- a passage found empty is not sent to the model again --------------------------------------------------------


def test_a_passage_that_found_nothing_is_not_extracted_again_but_a_failed_one_is(ollama, db_path):
    docs = [DocumentInput(id="ada", text="Ada Lovelace wrote the first program."),
            DocumentInput(id="todo", text="- buy milk\n- water the plants"),
            DocumentInput(id="bad", text=f"{GARBLE}: nothing readable here.")]
    with knowledge_base(db_path, ollama) as kb:
        first = kb.add_documents(docs, extract=True)
        assert [(e.document_id, e.nodes, e.error is None, e.skipped) for e in first.extractions] == [
            ("ada", 1, True, False), ("todo", 0, True, False), ("bad", 0, False, False)]
        assert chats(ollama) == 3

        again = kb.add_documents(docs, extract=True)
        assert all(d.unchanged for d in again.documents)
        # Only the failed passage goes to the model again.
        assert [(e.document_id, e.skipped) for e in again.extractions] == [
            ("ada", True), ("todo", True), ("bad", False)]
        assert chats(ollama) == 4 and again.extraction_errors == 1

        # A deleted entity is not extracted back by a re-run: its passage was read.
        kb.curation.delete_entities(["Ada Lovelace"], "default")
        assert kb.add_documents(docs, extract=True).extractions[0].skipped
        assert "Ada Lovelace" not in names(kb)

        # A changed document's passages are new: read again.
        changed = kb.add_documents([DocumentInput(id="todo", text="- buy bread\n- call Ada Lovelace")], extract=True)
        assert [(e.skipped, e.nodes) for e in changed.extractions] == [(False, 1)]
        assert chats(ollama) == 6


@pytest.fixture
def ingest_env(tmp_path: Path, monkeypatch, ollama) -> Path:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    for name in ("DUCKGRAPH_DB", "DUCKGRAPH_NAMESPACE", "DUCKGRAPH_STORE", "DUCKGRAPH_STORE_OPTIONS", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER", "ollama")
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps({"base_url": ollama.base_url}))
    monkeypatch.setenv("DUCKGRAPH_EXTRACTOR", "ollama")
    monkeypatch.setenv("DUCKGRAPH_EXTRACTOR_OPTIONS", json.dumps({"base_url": ollama.base_url, "model": MODEL}))
    return tmp_path / "ingested.duckdb"


def test_rerunning_an_ingest_of_a_folder_of_boilerplate_costs_no_model_time(tmp_path, ingest_env, ollama, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ada.md").write_text("Ada Lovelace wrote the first program.\n", encoding="utf-8")
    for i in range(3):
        (notes / f"todo-{i}.md").write_text(f"- buy milk\n- water plants ({i})\n", encoding="utf-8")

    assert main(["ingest", str(notes), "--db", str(ingest_env)]) == 0
    assert capsys.readouterr().out.strip().endswith("4 passages extracted, 0 failed")
    assert chats(ollama) == 4
    for _ in range(2):
        assert main(["ingest", str(notes), "--db", str(ingest_env)]) == 0
        assert capsys.readouterr().out.strip() == (
            "0 documents stored, 4 unchanged, 0 skipped, 0 passages, 0 passages extracted (4 had been already), "
            "0 failed")
        assert chats(ollama) == 4

    con = duckdb.connect(str(ingest_env), read_only=True)
    try:
        assert con.execute("SELECT DISTINCT extracted_by FROM chunks").fetchall() == [(f"ollama:{MODEL}",)]
    finally:
        con.close()


def test_a_file_of_schema_5_is_upgraded_and_reads_its_empty_passages_once_more(ollama, db_path):
    docs = [DocumentInput(id="ada", text="Ada Lovelace wrote the first program."),
            DocumentInput(id="todo", text="- buy milk\n- water the plants")]
    with knowledge_base(db_path, ollama) as kb:
        kb.add_documents(docs, extract=True)
    as_schema_5(db_path)

    before = chats(ollama)
    with knowledge_base(db_path, ollama) as kb:
        assert kb.store.health()["schema_version"] == SCHEMA_VERSION >= 6
        # Ada's passage has an entity linked to it: skipped. The empty one cannot be told from one never
        # extracted: read once more, then marked.
        assert [e.skipped for e in kb.add_documents(docs, extract=True).extractions] == [True, False]
        assert [e.skipped for e in kb.add_documents(docs, extract=True).extractions] == [True, True]
    assert chats(ollama) == before + 1


# -- a document replaced while it is extracted ---------------------------------------------------------------------


def test_a_document_replaced_during_its_extraction_keeps_nothing_of_the_old_text(db_path):
    reading_berlin, release = threading.Event(), threading.Event()

    def slow_on_berlin(body: dict[str, Any]) -> str:
        if "Berlin" in passage_of(body):
            reading_berlin.set()
            release.wait(20)  # a slow local model, still reading the old text
        return scripted_model(body)

    with FakeOllama(default_chat_reply=slow_on_berlin) as server, knowledge_base(db_path, server) as kb:
        results: dict[str, Any] = {}
        old = threading.Thread(target=lambda: results.update(old=kb.add_documents(
            [DocumentInput(id="hq.md", text="Acme Corp is headquartered in Berlin.")], extract=True)))
        old.start()
        assert reading_berlin.wait(20)
        new = kb.add_documents([DocumentInput(id="hq.md", text="Acme Corp is headquartered in Munich.")], extract=True)
        release.set()
        old.join(20)

        [entry] = results["old"].extractions
        assert (entry.error, entry.nodes, entry.edges) == (PASSAGE_GONE, 0, 0)
        assert results["old"].extraction_errors == 1
        assert [(e.error, e.nodes, e.edges) for e in new.extractions] == [(None, 2, 1)]
        assert names(kb) == {"Acme Corp", "Munich"}
        assert kb.store.written_by_hand("node", [n.id for n in kb.store.list_nodes("default")]) == set()

        # Replaced again, without extraction: nothing of either text is left behind but Acme Corp, which the new
        # text still names (nobody reads it to find it again).
        replaced = kb.add_documents([DocumentInput(id="hq.md", text="Acme Corp moved to Hamburg.")])
        assert (replaced.entities_removed, replaced.relations_removed) == (1, 1)
        assert names(kb) == {"Acme Corp"}
    assert dangling_provenance(db_path) == (0, 0)


def test_provenance_naming_a_passage_not_stored_is_refused_and_writes_nothing(ollama, db_path):
    with knowledge_base(db_path, ollama) as kb:
        [stored] = kb.add_documents([DocumentInput(id="hq.md", text="Acme Corp is in Berlin.")]).documents
        kb.add_documents([DocumentInput(id="hq.md", text="Acme Corp is in Munich.")])  # the old passage is gone
        for chunk_ids in ([stored.chunk_ids[0]], [10_000]):
            with pytest.raises(InvalidInputError, match="passages that are not stored .*replaced or deleted"):
                kb.add_knowledge_graph([NodeInput(name="Berlin", type="City")], [], source_chunk_ids=chunk_ids)
        assert names(kb) == set()
    assert dangling_provenance(db_path) == (0, 0)
