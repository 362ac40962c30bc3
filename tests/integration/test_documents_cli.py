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


def test_an_entity_a_relation_written_by_hand_needs_stays_and_is_said(db: Path, env: dict[str, str]) -> None:
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:  # Priya Raman: only the HR note supports her
        kb.add_knowledge_graph([NodeInput(name="Ada Park", type="Person")],
                               [EdgeInput(source="Ada Park", target="Priya Raman", type="MENTORS")])
    done = run(env, "documents", "delete", "hr-note-17", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("deleted 1 documents, with 0 entities and 1 relations only they supported\n")
    assert done.stderr == ("duckgraph: entity: Priya Raman [Person] (no passage supports it now; kept for the relation "
                           "written by hand Ada Park mentors Priya Raman)\n")
    assert stats(env, db)["nodes"] == 3


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


# -- documents show ---------------------------------------------------------------------------------------------

def test_show_reads_a_document_around_a_passage_as_the_tool_does(tmp_path: Path, env: dict[str, str]) -> None:
    """`documents show ID --around CHUNK_ID`: the passages before and after it, in order, with their places, and
    the command that reads on; each passage after the first without the sentences it repeats of the one before it;
    from the start without --around; the tool's structured result with --json."""
    path = tmp_path / "report.duckdb"
    paragraphs = [f"Paragraph {i} says something of its own. " + "More words fill the paragraph out. " * 22
                  for i in range(8)]
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        [stored] = kb.add_documents([DocumentInput(id="my report.md", title="Report",
                                                   text="# Findings\n\n" + "\n\n".join(paragraphs))]).documents
    ids = stored.chunk_ids
    assert len(ids) == 8

    shown = run(env, "documents", "show", "my report.md", "--around", str(ids[4]), "--before", "1", "--after", "1",
                "--db", str(path))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:2] == ["Document my report.md: Report. Shown: passages 4 to 6 of 8.",
                         f"(Passages 1 to 3 come before: read back with duckgraph documents show 'my report.md' "
                         f"--around {ids[2]} --after 0.)"]
    assert [line.split(":")[0] for line in lines[2:5]] == [
        f"[my report.md#{ids[3]}] passage 4 of 8 § Findings", f"[my report.md#{ids[4]}] passage 5 of 8",
        f"[my report.md#{ids[5]}] passage 6 of 8"]
    # Passage 5 starts with the last sentences of passage 4 (the overlap chunking keeps): shown after it, without;
    # passage 4, shown first, whole.
    assert lines[3] == (f"[my report.md#{ids[4]}] passage 5 of 8: " + paragraphs[4].strip())
    assert lines[2].endswith(paragraphs[3].strip()) and lines[2].split(": ", 1)[1].startswith("More words fill")
    assert lines[5] == (f"(Passages 7 to 8 follow: read on with duckgraph documents show 'my report.md' --around "
                        f"{ids[6]} --before 0.)")

    start = json.loads(run(env, "documents", "show", "my report.md", "--json", "--db", str(path)).stdout)
    assert [p["chunk_id"] for p in start["passages"]] == ids[:6] and start["next_chunk_id"] == ids[6]
    assert start["passages"][0]["repeats"] == 0 and all(p["repeats"] > 0 for p in start["passages"][1:])
    assert [p["text"] for p in start["passages"]] == [p.strip() for p in paragraphs[:6]]


def test_show_refuses_what_it_cannot_read_and_delete_its_options(db: Path, env: dict[str, str]) -> None:
    elsewhere = run(env, "documents", "show", "roadmap", "--db", str(db), "--namespace", "work")
    assert elsewhere.returncode == 1 and elsewhere.stdout == ""
    assert elsewhere.stderr == ("duckgraph: 'roadmap' is a document of the namespace 'default', not of 'work': give "
                                "that namespace to read it there\n")
    stray = run(env, "documents", "show", "roadmap", "--around", "999", "--db", str(db))
    assert stray.returncode == 1 and "duckgraph: no passage has chunk_id 999 in the namespace 'default'" in stray.stderr

    for args, said in ((["show", "roadmap", "hr-note-17"], "documents show takes one ID, not 2"),
                       (["show", "roadmap", "--after", "101"], "--after must be from 0 to 100, not 101"),
                       (["delete", "roadmap", "--around", "3"], "documents delete takes no --around: they go with "
                                                                "show; nothing was deleted")):
        refused = run(env, "documents", *args, "--db", str(db))
        assert refused.returncode == 2 and said in refused.stderr, (args, refused.stderr)
    assert stats(env, db)["documents"] == 2
