"""`duckgraph ingest` and `search` with third-party plugins that misbehave, as a user meets them: a faulty or
unbuildable converter costs its files only (one bad file never stops the others), an extractor's graph of the
wrong shape is a failed passage reported once (never "extracted" with nothing stored), and an embedder's bug is
one `duckgraph:` line, not a traceback. Real DuckDB file; the real default model where passages are embedded."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from duckgraph.core import bootstrap as bootstrap_module
from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import Embedder, ExtractionError, Extractor, hookimpl
from duckgraph.ports.converter import ConvertedDocument, DocumentConverter
from tests.integration.test_ingest_documents import run


class RaisesKey(DocumentConverter):
    suffixes = (".k",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        raise KeyError("priority")


class ReturnsText(DocumentConverter):
    suffixes = (".s",)

    def convert(self, data: bytes, name: str):
        return data.decode()


class CannotBeBuilt(DocumentConverter):
    suffixes = (".b",)

    def __init__(self) -> None:
        raise RuntimeError("converter init boom")

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        raise AssertionError("never built")


class WrongKeys(Extractor):
    id = "wrongkeys:v1"

    def extract(self, text, *, known_entities=()):
        if "Bletchley" in text:
            raise ExtractionError("the rules file is missing: set rules_path")
        return {"entities": [{"name": "Ada Lovelace", "type": "Person"}], "relations": []}


class Exploding(Embedder):
    id = "exploding:v1"

    def embed_batch(self, texts):
        raise RuntimeError("model server exploded")


class Plugins:
    @hookimpl
    def register_converters(self, register):
        register("raises-key", RaisesKey)
        register("returns-text", ReturnsText)
        register("cannot-be-built", CannotBeBuilt)

    @hookimpl
    def register_extractors(self, register):
        register("wrongkeys", WrongKeys)

    @hookimpl
    def register_embedders(self, register):
        register("exploding", Exploding)


@pytest.fixture
def env(no_settings: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    def plugin_manager():
        pm = build_plugin_manager(load_entry_points=False)
        pm.register(Plugins(), name="test-plugins")
        return pm

    no_settings.setattr(bootstrap_module, "build_plugin_manager", plugin_manager)
    return tmp_path


def stored(db: Path) -> tuple[list[str], int]:
    store = DuckDBStore(db)
    store.open()
    try:
        return [d.id for d in store.list_documents("default", limit=100)], store.stats("default")["nodes"]
    finally:
        store.close()


@pytest.mark.model
def test_faulty_converters_cost_their_files_only(env):
    folder = env / "docs"
    folder.mkdir()
    for name in ("a.k", "b.s", "c.b"):
        (folder / name).write_text("[ ] water the roses\n", encoding="utf-8")
    (folder / "ok.md").write_text("# Notes\n\nThe kettle whistles twice.\n", encoding="utf-8")
    db = env / "kb.duckdb"
    code, summary, err = run(db, "ingest", str(folder))  # before the fix: a KeyError traceback, nothing stored
    assert (code, summary) == (0, "1 documents stored, 0 unchanged, 3 skipped, 1 passages")
    assert f"skipped {folder / 'a.k'}: converter 'raises-key' failed: KeyError: 'priority'" in err
    assert f"skipped {folder / 'b.s'}: converter 'returns-text' returned a str, not a ConvertedDocument" in err
    assert (f"skipped {folder / 'c.b'}: converter 'cannot-be-built' (tests.integration.test_plugin_failures_cli."
            "CannotBeBuilt) cannot be built: RuntimeError: converter init boom") in err
    assert "Traceback" not in err
    assert stored(db)[0] == [str(folder / "ok.md")]


@pytest.mark.model
def test_an_extractor_s_graph_of_the_wrong_shape_fails_its_passage_and_each_failure_is_printed_once(
        env, caplog, monkeypatch):
    monkeypatch.setenv("DUCKGRAPH_EXTRACTOR", "wrongkeys")
    folder = env / "docs"
    folder.mkdir()
    (folder / "ada.md").write_text("Ada Lovelace wrote the first program.\n", encoding="utf-8")
    (folder / "turing.md").write_text("Alan Turing worked at Bletchley Park.\n", encoding="utf-8")
    db = env / "kb.duckdb"
    with caplog.at_level(logging.WARNING):
        code, summary, err = run(db, "ingest", str(folder), "--extract")
    # Before the fix: "2 passages extracted, 0 failed" with no entity stored.
    assert code == 1 and summary.endswith("0 passages extracted, 2 failed")
    wrong = (f"extraction failed for {folder / 'ada.md'}#1: the extractor wrongkeys:v1 returned a mapping with the "
             "keys 'entities', 'relations'; it must return a GraphFragment")
    assert err.count(wrong) == 1
    assert err.count("the rules file is missing: set rules_path") == 1
    assert not [r for r in caplog.records if "extraction" in r.getMessage()]  # no second, logged copy
    assert stored(db)[1] == 0


def test_an_embedder_s_bug_is_one_line_naming_it_not_a_traceback(env, monkeypatch):
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER", "exploding")
    (env / "a.md").write_text("Ada Lovelace wrote the first program.\n", encoding="utf-8")
    said = ("duckgraph: embedder 'exploding:v1' failed: RuntimeError: model server exploded; check the embedder "
            "plugin and its settings\n")
    store = DuckDBStore(env / "kb.duckdb")  # a memory there before: search needs one, and ingest keeps it
    store.open()
    store.close()
    for command in (["ingest", str(env / "a.md")], ["search", "who wrote the first program?"]):
        code, _, err = run(env / "kb.duckdb", *command)  # before the fix: RuntimeError out of main
        assert code == 1 and err.endswith(said) and "Traceback" not in err, command
