"""`duckgraph import`, run as the command a user runs (a subprocess) on a real file: the file's values win over a
stored entity's, and the command says which stored values that replaced; a file whose relation periods overlap the
stored ones is refused with the line, and nothing is written."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.files.import_ import import_lines
from duckgraph.core.files.import_summary import MAX_REPLACED_LISTED
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_compact import command_env, duckgraph

META = {"kind": "meta", "format": "duckgraph", "version": 1}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "env"
    folder.mkdir()
    return command_env(folder)


def _write(path: Path, objects: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


def test_the_import_says_which_stored_values_the_file_replaced(tmp_path, env) -> None:
    db = tmp_path / "host2.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([
            NodeInput(name="Maya Chen", type="Person", description="lives in Lisbon", aliases=["MC"],
                      properties={"phone": "+351 555"}),
            NodeInput(name="Priya Raman", type="Person"),  # blank fields: the file fills them in, losing nothing
        ], [])
    file = _write(tmp_path / "host1.jsonl", [
        META,
        {"kind": "node", "id": 1, "name": "Maya Chen", "type": "Person", "description": "staff engineer",
         "aliases": ["M. Chen"], "properties": {"role": "staff engineer"}},
        {"kind": "node", "id": 2, "name": "Priya Raman", "type": "Person", "description": "from host 1",
         "aliases": ["Priya R."]},
    ])
    done = duckgraph("import", str(file), "--db", str(db), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0 entities created, 2 updated" in done.stdout
    assert ("duckgraph: 1 entity had stored values replaced by the file's: Maya Chen (description, aliases, "
            "properties)") in done.stderr
    assert "Priya" not in done.stderr
    with duckdb.connect(str(db), read_only=True) as con:  # the file's values won, as documented
        assert con.execute("SELECT description, aliases FROM nodes WHERE name = 'Maya Chen'").fetchone() == (
            "staff engineer", ["M. Chen"])

    again = duckgraph("import", str(file), "--db", str(db), "--json", env=env, cwd=tmp_path)
    summary = json.loads(again.stdout)
    assert (summary["nodes_unchanged"], summary["nodes_values_replaced"], summary["values_replaced"]) == (2, 0, [])
    assert "replaced" not in again.stderr


def test_the_entities_listed_are_capped_and_the_rest_counted(tmp_path) -> None:
    count = MAX_REPLACED_LISTED + 3
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=f"Person {i:02}", type="Person", description="stored")
                                for i in range(count)], [])
        summary = import_lines(kb, [json.dumps(META)] + [
            json.dumps({"kind": "node", "name": f"Person {i:02}", "type": "Person", "description": "the file's"})
            for i in range(count)])
    assert summary.nodes_values_replaced == count
    assert summary.values_replaced == [f"Person {i:02} (description)" for i in range(MAX_REPLACED_LISTED)]


def test_an_overlapping_period_is_refused_by_the_command_and_nothing_is_written(tmp_path, env) -> None:
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Tom Reyes", type="Person"),
                                NodeInput(name="Acme Corp", type="Organization")],
                               [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                          valid_from=datetime(2023, 1, 15))])
    file = _write(tmp_path / "other.jsonl", [
        META,
        {"kind": "node", "id": 1, "name": "Acme Corp", "type": "Organization", "description": "new words"},
        {"kind": "node", "id": 2, "name": "Tom Reyes", "type": "Person"},
        {"kind": "edge", "source_id": 2, "target_id": 1, "type": "WORKS_AT", "valid_from": "2022-01-01T00:00:00Z",
         "valid_until": "2024-06-01T00:00:00Z"},
    ])
    done = duckgraph("import", str(file), "--db", str(db), env=env, cwd=tmp_path)
    assert done.returncode != 0
    assert (f"{file}:4: the relation Tom Reyes -WORKS_AT-> Acme Corp would hold from 2022-01-01 00:00:00 UTC to "
            "2024-06-01 00:00:00 UTC, which overlaps its stored period from 2023-01-15 00:00:00 UTC to no end") \
        in done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT valid_from, valid_until FROM edges").fetchall() == [(datetime(2023, 1, 15), None)]
        assert con.execute("SELECT description FROM nodes WHERE name = 'Acme Corp'").fetchone() == ("",)


def test_a_name_respelled_and_a_document_replaced_by_the_file_are_said(tmp_path, env) -> None:
    """The probe's merge of a home memory into a work memory: the stored "Maya Chen" is spelt "maya chen" by the
    file (the same entity: names are compared ignoring case), and its notes.md holds another text. Both are the
    file's now, as its values win, and the command says so."""
    from duckgraph.core.domain.model import DocumentInput
    from duckgraph.core.files.export import export_jsonl

    work, home = tmp_path / "work.duckdb", tmp_path / "home.duckdb"
    with KnowledgeBase(DuckDBStore(work), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="notes.md", title="Notes", text="Maya Chen leads payments at Acme.")])
        kb.add_documents([DocumentInput(id="same.md", text="The same in both.")])
        kb.add_knowledge_graph([NodeInput(name="Maya Chen", type="Person")], [])
    with KnowledgeBase(DuckDBStore(home), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="notes.md", title="Notes", text="Shopping list: milk.")])
        kb.add_documents([DocumentInput(id="same.md", text="The same in both.")])
        kb.add_knowledge_graph([NodeInput(name="maya chen", type="Person")], [])
        file = tmp_path / "home.jsonl"
        with file.open("w", encoding="utf-8") as out:
            export_jsonl(kb, out)

    done = duckgraph("import", str(file), "--db", str(work), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "1 documents written (1 unchanged)" in done.stdout
    assert "duckgraph: 1 stored document was replaced by the file's of the same id: notes.md (text)" in done.stderr
    assert ("duckgraph: 1 entity had stored values replaced by the file's: Maya Chen (name: 'maya chen')"
            in done.stderr)
    with duckdb.connect(str(work), read_only=True) as con:
        assert con.execute("SELECT name FROM nodes").fetchall() == [("maya chen",)]

    again = duckgraph("import", str(file), "--db", str(work), "--json", env=env, cwd=tmp_path)
    summary = json.loads(again.stdout)
    assert (summary["documents_unchanged"], summary["documents_values_replaced"], summary["documents_replaced"],
            summary["nodes_values_replaced"]) == (2, 0, [], 0)
    assert summary["complete"] is True and "replaced" not in again.stderr
