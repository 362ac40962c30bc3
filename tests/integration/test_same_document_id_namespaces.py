"""The same document id in two namespaces (one folder ingested into two namespaces: a file's id is its absolute
path) stays two documents through a write, an export and an import: each namespace keeps its own passages, and
search in one never returns the other's text. Real DuckDB files; the real default model where search is involved."""

from __future__ import annotations

import io
from pathlib import Path

import duckdb
import numpy as np
import pytest
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.folder import find_files, ingest
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import ChunkRecord, DocumentRecord, InvalidInputError, WriteBatch

SECRET = "Team A private: the launch code word is marmalade."
PUBLIC = "Team B's version of the note: nothing secret here about the launch."


def export(kb: KnowledgeBase) -> list[str]:
    out = io.StringIO()
    export_jsonl(kb, out)
    return out.getvalue().splitlines()


def passages(kb: KnowledgeBase, query: str, namespace: str) -> list[str]:
    return [p.text for p in kb.search(query, namespace=namespace).passages]


def chunk_rows(path: Path) -> list[tuple[str, str]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT namespace, text FROM chunks ORDER BY namespace, text").fetchall()
    finally:
        con.close()


@pytest.mark.model
def test_a_folder_ingested_into_two_namespaces_moves_whole_through_export_and_import(tmp_path, minilm):
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "a.md"
    (folder / "b.md").write_text("Quarterly numbers are fine.\n", encoding="utf-8")
    kb = KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm).open()
    for namespace, text in (("team-a", SECRET), ("team-b", PUBLIC)):
        note.write_text(text + "\n", encoding="utf-8")
        ingest(kb, find_files([str(folder)]), extract=False, namespace=namespace)
        # An entity linked to the passages: its provenance names the document by namespace and id.
        kb.add_knowledge_graph([NodeInput(name=f"Launch of {namespace}", type="Event",
                                          source_ids=[note.resolve().as_posix()])], [], namespace=namespace)
    lines = export(kb)
    kb.close()

    moved = KnowledgeBase(DuckDBStore(tmp_path / "moved.duckdb"), minilm).open()
    import_lines(moved, lines)
    try:
        assert export(moved) == lines
        assert SECRET in passages(moved, "marmalade launch code word", "team-a")
        for query in ("marmalade launch code word", "launch"):
            assert SECRET not in passages(moved, query, "team-b")
        assert PUBLIC in passages(moved, "version of the note", "team-b")
        assert PUBLIC not in passages(moved, "version of the note", "team-a")
    finally:
        moved.close()
    assert chunk_rows(tmp_path / "moved.duckdb") == chunk_rows(tmp_path / "kb.duckdb")


def two_namespaces(chunk_namespaces: tuple[str | None, str | None]) -> WriteBatch:
    vectors = np.eye(4, dtype=np.float32)
    return WriteBatch(
        documents=[DocumentRecord(id="notes", namespace="a", text="alpha kumquat"),
                   DocumentRecord(id="notes", namespace="b", text="beta invoice")],
        chunks=[ChunkRecord("notes", 0, "alpha kumquat", embedding=vectors[0], namespace=chunk_namespaces[0]),
                ChunkRecord("notes", 0, "beta invoice", embedding=vectors[1], namespace=chunk_namespaces[1])])


def test_a_write_puts_each_chunk_in_its_own_document_s_namespace(tmp_path):
    store = DuckDBStore(tmp_path / "kb.duckdb")
    store.open()
    try:
        store.bind_embedder("test:unit", 4)
        summary = store.write(two_namespaces(("a", "b")))
        assert [c.text for c in store.document_chunks("a", ["notes"])] == ["alpha kumquat"]
        assert [c.text for c in store.document_chunks("b", ["notes"])] == ["beta invoice"]
        alpha, beta = summary.chunk_ids["notes"]
        # The vector and keyword indexes, updated after the commit, hold each chunk in its namespace only.
        assert [i for i, _ in store.vector_search("chunk", np.eye(4, dtype=np.float32)[0], 5, "a")] == [alpha]
        assert [i for i, _ in store.vector_search("chunk", np.eye(4, dtype=np.float32)[0], 5, "b")] == [beta]
        assert [i for i, _ in store.keyword_search("chunk", "kumquat", 5, "a")] == [alpha]
        assert store.keyword_search("chunk", "kumquat", 5, "b") == []
    finally:
        store.close()
    assert chunk_rows(tmp_path / "kb.duckdb") == [("a", "alpha kumquat"), ("b", "beta invoice")]


@pytest.mark.parametrize("chunk_namespaces, message", [
    ((None, None), "holds document 'notes' in the namespaces a, b: give each of its chunks its namespace"),
    (("a", "c"), "document 'notes' in namespace 'c', which is not in the batch"),
])
def test_a_chunk_whose_document_is_ambiguous_or_absent_is_refused_and_nothing_is_written(
        tmp_path, chunk_namespaces, message):
    store = DuckDBStore(tmp_path / "kb.duckdb")
    store.open()
    try:
        store.bind_embedder("test:unit", 4)
        with pytest.raises(InvalidInputError, match=message):
            store.write(two_namespaces(chunk_namespaces))
        assert store.stats()["chunks"] == 0 and store.namespaces() == []
    finally:
        store.close()
