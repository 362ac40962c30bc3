"""A first write that fails after the file was bound (a mistyped model given with its `dimensions`, which skips
the probe; a width the server ignores) stores nothing: the file then holds no vectors, and the corrected embedder
binds it instead of being refused for good. A file that holds vectors still refuses another embedder, and the
refusal says what to do: for the same plugin with another model, set the model back (not "select the plugin").

Ollama is the HTTP stand-in of tests/ollama_server.py (real sockets on 127.0.0.1, Ollama's 404 for a model it does
not have); the files are real DuckDB files.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaEmbedder
from duckgraph.ports import EmbedderError, EmbedderMismatchError, NodeRecord, WriteBatch, entity_key
from tests.fakes import HashingEmbedder
from tests.integration.test_doctor import env  # noqa: F401 (a fixture: no user config, no DUCKGRAPH_*)
from tests.ollama_server import FakeOllama

NOTE = "Ada Lovelace wrote the first program for the Analytical Engine."


@pytest.fixture
def ollama():
    with FakeOllama(models=("all-minilm", "nomic-embed-text")) as server:
        yield server


def use_ollama(env: pytest.MonkeyPatch, **options) -> None:
    env.setenv("DUCKGRAPH_EMBEDDER", "ollama")
    env.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps(options))


def test_a_mistyped_model_does_not_bind_an_empty_file_for_good(ollama, env, tmp_path, capsys, caplog):
    """The tester's case through the command line: `ingest` with model "embb" (a typo) and its dimensions fails
    and stores nothing; with the model corrected, the same file takes the note."""
    db, note = tmp_path / "kb.duckdb", tmp_path / "note.txt"
    note.write_text(NOTE, encoding="utf-8")
    use_ollama(env, model="embb", base_url=ollama.base_url, dimensions=384)
    store = DuckDBStore(db)  # a file there before (an earlier command's): the failed ingest keeps it, bound
    store.open()
    store.close()
    assert main(["ingest", str(note), "--db", str(db)]) != 0
    assert "does not have the model 'embb'" in capsys.readouterr().err
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder(dimensions=384)) as kb:
        assert (kb.stats()["nodes"], kb.stats()["chunks"]) == (0, 0)
        assert kb.store.embedder_info() == ("ollama:embb:latest", 384)  # what the failed write recorded

    use_ollama(env, model="all-minilm", base_url=ollama.base_url, dimensions=384)
    assert main(["doctor", "--db", str(db), "--json"]) == 0  # nothing to refuse: a warning says what comes
    report = json.loads(capsys.readouterr().out)
    assert report["problems"] == []
    assert ("the file records the embedder 'ollama:embb:latest' (384 dimensions) but holds no vectors (a first write "
            "that failed after recording it, or everything deleted): the next write records the configured "
            "'ollama:all-minilm:latest' instead") in report["warnings"]
    with caplog.at_level(logging.WARNING):
        assert main(["ingest", str(note), "--db", str(db)]) == 0
    assert [r.getMessage() for r in caplog.records if "held no vectors" in r.getMessage()] == [
        f"{db} held no vectors: bound to 'ollama:all-minilm:latest' (384 dimensions) instead of 'ollama:embb:latest' "
        "(384 dimensions), which it recorded (a first write that failed after recording it, or everything deleted)"]
    assert not [r for r in caplog.records if "embedder mismatch" in r.getMessage()]  # nothing to warn of
    with KnowledgeBase(DuckDBStore(db), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        assert kb.store.embedder_info() == ("ollama:all-minilm:latest", 384)
        assert kb.stats()["chunks"] == 1
        assert [p.text for p in kb.search("Who wrote the first program?").passages] == [NOTE]


def test_a_width_the_server_ignores_does_not_bind_an_empty_file_for_good(ollama, db_path, caplog):
    """`dimensions` 768 while the model gives 384: the write fails, then the embedder without it binds the file."""
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url, dimensions=768)) as kb:
        with pytest.raises(EmbedderError, match="384-dimensional vectors, expected 768"):
            kb.add_documents([DocumentInput(id="note", text=NOTE)])
        assert kb.store.embedder_info() == ("ollama:all-minilm:latest", 768)
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        with caplog.at_level(logging.WARNING):
            kb.add_documents([DocumentInput(id="note", text=NOTE)])
        assert kb.store.embedder_info() == ("ollama:all-minilm:latest", 384)
        assert "held no vectors: bound to 'ollama:all-minilm:latest' (384 dimensions)" in caplog.text
        assert [p.text for p in kb.search("Who wrote the first program?").passages] == [NOTE]
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:  # reopened
        assert [p.text for p in kb.search("Who wrote the first program?").passages] == [NOTE]


def test_a_search_of_an_empty_file_bound_to_another_embedder_finds_nothing_and_binds_nothing(db_path):
    store = DuckDBStore(db_path)
    store.open()
    store.bind_embedder("test:mistyped", 8)
    store.close()
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        found = kb.search("Ada Lovelace")
        assert (found.nodes, found.passages) == ([], [])
        assert kb.store.embedder_info() == ("test:mistyped", 8)  # a read changes nothing
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        assert kb.store.embedder_info() == ("test:fake-hashing", 64)
        assert [n.name for n in kb.search("Ada Lovelace").nodes] == ["Ada Lovelace"]


def test_a_file_that_holds_vectors_is_still_refused_and_unchanged(db_path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    for other in (HashingEmbedder(name="other"), HashingEmbedder(dimensions=32)):
        with KnowledgeBase(DuckDBStore(db_path), other) as kb:
            with pytest.raises(EmbedderMismatchError):
                kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
            assert kb.store.embedder_info() == ("test:fake-hashing", 64)
            assert kb.stats()["nodes"] == 1


def test_the_store_binds_again_only_a_file_without_vectors(db_path):
    store = DuckDBStore(db_path)
    store.open()
    try:
        store.bind_embedder("test:a", 8)
        store.bind_embedder("other:b", 4)  # held nothing: the vector tables take the new width
        assert store.embedder_info() == ("other:b", 4)
        vector = np.array([1, 0, 0, 0], dtype=np.float32)
        store.write(WriteBatch(nodes=[NodeRecord(namespace="default", key=entity_key("Ada"), name="Ada",
                                                 type="Thing", embedding=vector)]))
        with pytest.raises(EmbedderMismatchError, match="was built with embedder 'other:b'"):
            store.bind_embedder("test:a", 8)
        assert store.embedder_info() == ("other:b", 4)
        assert store.vector_search("node", vector, 1, "default")[0][1] == pytest.approx(1.0)
    finally:
        store.close()


# -- the refusal's words: the same plugin with another model -------------------------------------------------


def test_another_model_of_the_same_plugin_is_told_to_set_the_model_back(ollama, env, db_path, capsys):
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    said = ("the configured embedder gives 'ollama:nomic-embed-text:latest' while {file} holds vectors of "
            "'ollama:all-minilm:latest' (384 dimensions): set its model and options (DUCKGRAPH_EMBEDDER_OPTIONS, "
            "options in [embedder]) back to those that gave 'ollama:all-minilm:latest', or move the knowledge to a "
            f"new file with the new embedder: duckgraph export -o kb.jsonl --db {db_path}, then duckgraph import "
            "--re-embed kb.jsonl --db NEW.duckdb")
    before = len(ollama.requests)
    with KnowledgeBase(DuckDBStore(db_path), OllamaEmbedder("nomic-embed-text", base_url=ollama.base_url)) as kb:
        with pytest.raises(EmbedderMismatchError) as err:
            kb.search("Ada Lovelace")
    assert str(err.value) == said.format(file=db_path)
    assert "select" not in str(err.value)  # its plugin is the one selected
    assert len(ollama.requests) == before  # refused before asking the server

    # doctor says the same, and its check of the file does not say ok above that problem.
    use_ollama(env, model="nomic-embed-text", base_url=ollama.base_url)
    code = main(["doctor", "--db", str(db_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["problems"] == [said.format(file="the file")]
    [database] = [check for check in report["checks"] if check["check"] == "database"]
    assert database["ok"] is False
    assert "its vectors do not fit the configured embedder: see the problem below" in database["detail"]
    main(["doctor", "--db", str(db_path)])
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("check database:")][0].startswith("check database: FAILED: ")


def test_the_store_names_the_model_not_the_plugin_for_the_same_plugin(db_path):
    store = DuckDBStore(db_path)
    store.open()
    try:
        store.bind_embedder("ollama:emb:latest", 4)
        store.write(WriteBatch(nodes=[NodeRecord(namespace="default", key=entity_key("Ada"), name="Ada",
                                                 type="Thing", embedding=np.ones(4, dtype=np.float32) / 2)]))
        with pytest.raises(EmbedderMismatchError) as err:
            store.bind_embedder("ollama:nomic-embed-text:latest", 8)
        assert str(err.value) == (
            f"{db_path} holds vectors of 'ollama:emb:latest' (4 dimensions), but the configured embedder gives "
            "'ollama:nomic-embed-text:latest' (8 dimensions): set its model and options back to those that gave "
            "'ollama:emb:latest', or move the knowledge to a new file (duckgraph export, then duckgraph import "
            "--re-embed into another --db).")
    finally:
        store.close()
