"""An export written by an older duckgraph, imported by `duckgraph import` (a subprocess, on real DuckDB files, the
real default model offline): it comes in as the same file upgraded in place would be.

- an export of schema 4 or older has no `by_hand` marks: the import infers them as the upgrade to schema 5 infers a
  file's (plugins/duckdb/schema.py, MIGRATIONS[5]), so deleting a document afterwards keeps the hand-curated
  entities it mentions (it took Maya Chen with her properties and observations), whatever batch the provenance
  comes in;
- an export of schema 1 stored a relation's creation time as its start: the import drops a start equal to
  `created_at`, as the upgrade to schema 2 does (MIGRATIONS[2]), so the fact is not dated from when it was written.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.files import import_
from duckgraph.core.files.export import export_jsonl
from duckgraph.plugins.duckdb import DuckDBStore
from tests.integration.test_compact import command_env, duckgraph


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "env"
    folder.mkdir()
    found = command_env(folder)
    del found["DUCKGRAPH_EMBEDDER"]  # the default model, offline
    return found


@pytest.fixture
def curated(tmp_path: Path, minilm) -> Path:
    """A memo, what was read from it, and what was curated by hand on top."""
    db = tmp_path / "source.duckdb"
    with KnowledgeBase(DuckDBStore(db), minilm) as kb:
        kb.add_documents([DocumentInput(id="launch-memo", text=(
            "Maya Chen announced Project Kestrel. Bob Ortiz builds the Kestrel drone."))])
        kb.add_knowledge_graph([
            NodeInput(name="Maya Chen", type="Person", properties={"role": "CTO"}, source_ids=["launch-memo"]),
            NodeInput(name="Bob Ortiz", type="Person", observations=["Owns a red kayak"],
                      source_ids=["launch-memo"]),
            NodeInput(name="Project Kestrel", type="Project", description="A warehouse drone.",
                      source_ids=["launch-memo"]),
            NodeInput(name="Lisbon", type="City"),
            NodeInput(name="Quince", type="unknown"),  # the placeholder of a relation's end
        ], [
            EdgeInput(source="Maya Chen", target="Project Kestrel", type="LEADS", source_ids=["launch-memo"]),
            EdgeInput(source="Bob Ortiz", target="Project Kestrel", type="BUILDS", properties={"share": 0.5},
                      source_ids=["launch-memo"]),
            EdgeInput(source="Maya Chen", target="Lisbon", type="LIVES_IN"),
            EdgeInput(source="Bob Ortiz", target="Quince", type="DISLIKES"),
        ])
    return db


def as_schema(lines: list[str], version: int) -> list[str]:
    """An export as a duckgraph of that schema wrote it: format version 1 (no end line), no marks."""
    old = []
    for line in lines:
        obj = json.loads(line)
        if obj["kind"] == "end":
            continue
        if obj["kind"] == "meta":
            obj.update(version=1, schema_version=version)
        for field in ("by_hand", "extracted_by"):
            obj.pop(field, None)
        old.append(json.dumps(obj) + "\n")
    return old


def exported(db: Path, minilm) -> list[str]:
    with KnowledgeBase(DuckDBStore(db), minilm) as kb:
        out = io.StringIO()
        export_jsonl(kb, out)
    return out.getvalue().splitlines()


def marks(db: Path) -> tuple[set[str], set[str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        nodes = {row[0] for row in con.execute(
            "SELECT name FROM nodes WHERE id IN (SELECT node_id FROM nodes_by_hand)").fetchall()}
        edges = {row[0] for row in con.execute(
            "SELECT s.name || ' ' || e.type || ' ' || t.name FROM edges e JOIN nodes s ON s.id = e.source_id "
            "JOIN nodes t ON t.id = e.target_id WHERE e.id IN (SELECT edge_id FROM edges_by_hand)").fetchall()}
    return nodes, edges


def upgraded_in_place(db: Path, minilm) -> Path:
    """A copy of `db` taken back to schema 4 (no marks), then opened: the upgrade infers its marks."""
    copy = db.with_name("inplace.duckdb")
    shutil.copy(db, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("DROP TABLE nodes_by_hand")
        con.execute("DROP TABLE edges_by_hand")
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with KnowledgeBase(DuckDBStore(copy), minilm) as kb:
        kb.open()
    return copy


WHAT_THE_UPGRADE_MARKS = (
    {"Maya Chen", "Bob Ortiz", "Lisbon"},  # properties, observations, no provenance; not the placeholder Quince
    {"Bob Ortiz BUILDS Project Kestrel", "Maya Chen LIVES_IN Lisbon", "Bob Ortiz DISLIKES Quince"},
)


def test_an_older_export_imports_the_marks_the_upgrade_infers_and_a_delete_keeps_what_was_curated(
        curated, minilm, env, tmp_path):
    old = tmp_path / "old.jsonl"
    old.write_text("".join(as_schema(exported(curated, minilm), 4)), encoding="utf-8")
    assert "by_hand" not in old.read_text(encoding="utf-8")
    assert marks(upgraded_in_place(curated, minilm)) == WHAT_THE_UPGRADE_MARKS

    db = tmp_path / "imported.duckdb"
    done = duckgraph("import", str(old), "--db", str(db), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert marks(db) == WHAT_THE_UPGRADE_MARKS

    done = duckgraph("documents", "delete", "launch-memo", "--db", str(db), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # Only what was read from the memo and never curated goes with it (Maya Chen's LEADS); Project Kestrel stays
    # as the end of a relation curated by hand (Bob Ortiz BUILDS it, with properties), and the command says so.
    assert "deleted 1 documents, with 0 entities and 1 relations only they supported" in done.stdout
    assert "kept for the relation written by hand Bob Ortiz builds Project Kestrel" in done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        assert {row[0] for row in con.execute("SELECT name FROM nodes").fetchall()} == {
            "Maya Chen", "Bob Ortiz", "Lisbon", "Quince", "Project Kestrel"}
        assert con.execute("SELECT count(*) FROM observations").fetchone() == (1,)


@pytest.mark.parametrize("batch", [2, 5])
def test_the_marks_are_inferred_whatever_batch_the_provenance_comes_in(curated, minilm, tmp_path, monkeypatch,
                                                                       batch):
    old = as_schema(exported(curated, minilm), 4)
    monkeypatch.setattr(import_, "BATCH_LINES", batch)
    db = tmp_path / "imported.duckdb"
    with KnowledgeBase(DuckDBStore(db), minilm) as kb:
        import_.import_lines(kb, old)
        import_.import_lines(kb, old)  # again: changes nothing
    assert marks(db) == WHAT_THE_UPGRADE_MARKS


def test_an_export_with_marks_is_imported_with_its_own(curated, minilm, tmp_path):
    lines = exported(curated, minilm)
    db = tmp_path / "imported.duckdb"
    with KnowledgeBase(DuckDBStore(db), minilm) as kb:
        import_.import_lines(kb, lines)
    # As written by the tools: by hand is what was stated without a document, whatever it holds.
    assert marks(db) == ({"Lisbon", "Quince"}, {"Maya Chen LIVES_IN Lisbon", "Bob Ortiz DISLIKES Quince"})


def test_a_schema_1_export_s_relations_are_not_dated_from_when_they_were_written(minilm, env, tmp_path):
    written = "2026-11-29T03:36:00.000000"
    edge = {"kind": "edge", "source_id": 1, "target_id": 2, "type": "LEADS", "created_at": written}
    lines = [
        {"kind": "meta", "format": "duckgraph", "version": 1, "schema_version": 1},
        {"kind": "node", "id": 1, "name": "Maya Chen", "type": "Person"},
        {"kind": "node", "id": 2, "name": "Project Kestrel", "type": "Project"},
        {"kind": "node", "id": 3, "name": "Acme", "type": "Organization"},
        {**edge, "valid_from": written},  # what schema 1 stored: its creation time
        {**edge, "target_id": 3, "type": "WORKED_AT", "valid_from": "2020-01-01T00:00:00",
         "valid_until": "2024-01-01T00:00:00"},  # a start given: kept
    ]
    for version, start in ((1, None), (2, written)):
        lines[0]["schema_version"] = version
        old = tmp_path / f"schema{version}.jsonl"
        old.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        db = tmp_path / f"schema{version}.duckdb"
        done = duckgraph("import", str(old), "--db", str(db), env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        with duckdb.connect(str(db), read_only=True) as con:
            assert {str(row[0]): row[1] for row in con.execute(
                "SELECT type, strftime(valid_from, '%Y-%m-%dT%H:%M:%S.%f') FROM edges").fetchall()} == {
                "LEADS": start, "WORKED_AT": "2020-01-01T00:00:00.000000"}
    # Searched as of before it was written, the fact of schema 1 holds (its start is unknown).
    done = duckgraph("search", "Who leads Project Kestrel?", "--as-of", "2026-06-01", "--db",
                     str(tmp_path / "schema1.duckdb"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Maya Chen leads Project Kestrel" in done.stdout
