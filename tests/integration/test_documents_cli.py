"""`duckgraph documents delete ID...`: a document stored by mistake deleted from the command line, with what only it
supported; ids that name nothing said on stderr (exit status 1); a bad id refused with nothing deleted. Real
`duckgraph` processes on a real DuckDB file, with the hashing embedder of tests/fakes.py as an entry-point plugin
(see tests/e2e/test_shared_file.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_shared_file import env  # noqa: F401 (the fixture)
from tests.fakes import HashingEmbedder

DUCKGRAPH = [sys.executable, "-m", "duckgraph.core.cli"]


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DUCKGRAPH, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_documents([
            DocumentInput(id="hr-note-17", text="Priya Raman's social security number is 123-45-6789."),
            DocumentInput(id="roadmap", text="The Payments Team migrates billing to Kafka in May.")])
        kb.add_knowledge_graph([NodeInput(name="Priya Raman", type="Person", source_ids=["hr-note-17"]),
                                NodeInput(name="Payments Team", type="Team", source_ids=["roadmap"])],
                               [EdgeInput(source="Priya Raman", target="Payments Team", type="MEMBER_OF",
                                          source_ids=["hr-note-17"])])
    return path


def stats(env: dict[str, str], db: Path) -> dict:
    return json.loads(run(env, "stats", "--json", "--db", str(db)).stdout)


def test_a_document_is_deleted_with_what_only_it_supported(db: Path, env: dict[str, str]) -> None:
    done = run(env, "documents", "delete", "hr-note-17", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("deleted 1 documents, with 1 entities and 1 relations only they supported\n"
                           "  hr-note-17\n")
    assert (stats(env, db)["documents"], stats(env, db)["nodes"]) == (1, 1)

    found = json.loads(run(env, "search", "social security number 123-45-6789", "--json", "--db", str(db)).stdout)
    assert "hr-note-17" not in [p["document_id"] for p in found["passages"]] and "123-45-6789" not in found["text"]
    changes = json.loads(run(env, "changes", "--json", "--db", str(db)).stdout)["changes"]
    assert [(c["change"], c["subject"]) for c in changes][:2] == [
        ("document deleted", "hr-note-17"), ("entity deleted", "Priya Raman [Person]")]


def test_ids_naming_nothing_are_said_and_a_bad_id_deletes_nothing(db: Path, env: dict[str, str]) -> None:
    missing = run(env, "documents", "delete", "road map", "--json", "--db", str(db))
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["not_found"] == ["road map"]
    assert "duckgraph: no document 'road map' in the namespace 'default'" in missing.stderr
    elsewhere = run(env, "documents", "delete", "roadmap", "--db", str(db), "--namespace", "work")
    assert elsewhere.returncode == 1 and "'roadmap' is a document of the namespace 'default'" in elsewhere.stderr

    refused = run(env, "documents", "delete", "roadmap", "hr\u200bnote", "--db", str(db))
    assert refused.returncode == 1
    assert "duckgraph: ids[1]: must not contain invisible characters" in refused.stderr
    assert "nothing was deleted" in refused.stderr
    assert stats(env, db)["documents"] == 2

    no_id = run(env, "documents", "delete", "--db", str(db))
    assert no_id.returncode == 2 and "ID" in no_id.stderr
    absent = run(env, "documents", "delete", "roadmap", "--db", str(db.parent / "absent.duckdb"))
    assert absent.returncode == 1 and not (db.parent / "absent.duckdb").exists()


def test_a_file_ingested_in_parts_is_deleted_whole(tmp_path: Path) -> None:
    """A long file is stored as `<id>`, `<id>#part-2`...: deleting the file's id deletes its parts, and only its."""
    from duckgraph.core.domain.documents import delete_documents

    with KnowledgeBase(DuckDBStore(tmp_path / "parts.duckdb"), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id=i, text=f"Text of {i}.") for i in (
            "notes/long.md", "notes/long.md#part-2", "notes/long.md#part-3", "notes/long.md.bak",
            "notes/long.md#part-two", "notes/other.md")])
        done = delete_documents(kb, ["notes/long.md"])
        assert done.deleted == ["notes/long.md", "notes/long.md#part-2", "notes/long.md#part-3"]
        left = sorted(d.id for d in kb.store.list_documents(kb.resolve_namespace(None), limit=100))
        assert left == ["notes/long.md#part-two", "notes/long.md.bak", "notes/other.md"]
