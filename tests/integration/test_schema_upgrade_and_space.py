"""A file of an older schema: `duckgraph doctor` reports its upgrade and leaves it as it was; the commands that open
it upgrade it (one way) after keeping a copy of it as it was, and say where. And the space a file holds: doctor
gives its size and free blocks, and says how to compact a file that is mostly free blocks, which works.

Real DuckDB files, the command line's `main`; the embedder is Ollama's stand-in (tests/ollama_server.py), as in
test_doctor.py: what is checked here is the file, not the vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION
from duckgraph.plugins.ollama import OllamaEmbedder
from duckgraph.ports import StoreError
from tests.ollama_server import FakeOllama


@pytest.fixture
def ollama(no_settings):
    """Ollama's stand-in, configured as the embedder of every command."""
    with FakeOllama() as server:
        no_settings.delenv("OLLAMA_HOST", raising=False)
        no_settings.setenv("DUCKGRAPH_EMBEDDER", "ollama")
        no_settings.setenv("DUCKGRAPH_EMBEDDER_OPTIONS",
                           json.dumps({"base_url": server.base_url, "model": "all-minilm"}))
        yield server


def written(path: Path, ollama: FakeOllama) -> None:
    with KnowledgeBase(DuckDBStore(path), OllamaEmbedder(base_url=ollama.base_url)) as kb:
        kb.add_documents([DocumentInput(id="note", text="Ada Lovelace wrote the first program.")])
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])


def as_schema_4(path: Path) -> None:
    """The file as schema 4 wrote it: no marks of what was written by hand, no marks of extraction."""
    con = duckdb.connect(str(path))
    try:
        con.execute("DROP TABLE nodes_by_hand")
        con.execute("DROP TABLE edges_by_hand")
        con.execute("DROP INDEX chunks_document")  # DuckDB drops no column of an indexed table
        con.execute("ALTER TABLE chunks DROP COLUMN extracted_by")
        con.execute("CREATE INDEX chunks_document ON chunks (namespace, document_id)")
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    finally:
        con.close()


def schema_of(path: Path) -> tuple[str, int, bool]:
    """(schema version, nodes, whether it has the tables of schema 5)"""
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = {row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        return (con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0],
                con.execute("SELECT count(*) FROM nodes").fetchone()[0], "nodes_by_hand" in tables)
    finally:
        con.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def doctor(capsys, db: Path) -> tuple[int, dict]:
    code = main(["doctor", "--db", str(db), "--json"])
    return code, json.loads(capsys.readouterr().out)


# -- an older schema ---------------------------------------------------------------------------------------------


def test_doctor_reports_an_older_file_and_leaves_it_as_it_was(ollama, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    as_schema_4(db)
    before, names = digest(db), sorted(p.name for p in tmp_path.iterdir())

    code, report = doctor(capsys, db)

    assert code == 0, report
    assert digest(db) == before and schema_of(db) == ("4", 1, False)  # not upgraded
    assert sorted(p.name for p in tmp_path.iterdir()) == names  # no copy either: nothing was upgraded
    copy = tmp_path / "kb.schema4.duckdb"
    assert report["store"]["upgrade"] == {"from": 4, "to": SCHEMA_VERSION, "copy": str(copy),
                                          "embedder": {"id": "ollama:all-minilm:latest", "dimensions": 384}}
    assert [c["detail"] for c in report["checks"] if c["check"] == "database"] == [
        f"{db} read without changing it (schema version 4, older than this duckgraph's {SCHEMA_VERSION}: see the "
        "warning below)"]
    assert report["warnings"] == [
        f"{db} uses schema version 4: the next duckgraph command that opens it (serve, ingest, search, stats, "
        f"export...; doctor does not) upgrades it to version {SCHEMA_VERSION}, after keeping a copy of it as it is "
        f"now: {copy}. The upgrade is one way: a duckgraph that knows only version 4 (an older install, another MCP "
        "host's) cannot open the file afterwards; point that one at the copy, or upgrade it too"]
    # The text report says it too, and the binding to the embedder is still checked from the file's meta.
    assert main(["doctor", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"schema:    version 4 (this duckgraph's is {SCHEMA_VERSION}: see the warning below)" in out
    assert "built with: ollama:all-minilm:latest (384 dimensions)" in out
    assert digest(db) == before


def test_a_command_that_opens_an_older_file_keeps_a_copy_of_it_and_says_where(ollama, tmp_path: Path, capsys,
                                                                               caplog):
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    as_schema_4(db)
    copy = tmp_path / "kb.schema4.duckdb"

    with caplog.at_level(logging.WARNING):
        assert main(["stats", "--db", str(db)]) == 0

    assert schema_of(db) == (str(SCHEMA_VERSION), 1, True)
    assert schema_of(copy) == ("4", 1, False)  # the file as it was, for a duckgraph that knows only version 4
    assert not copy.with_name(copy.name + ".wal").exists()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"{db}: schema upgraded from version 4 to {SCHEMA_VERSION}; a duckgraph that knows only version 4 cannot "
        f"open it any more. The file as it was is kept as {copy}: point such a duckgraph (--db, DUCKGRAPH_DB) at "
        "that copy (what is written to one file is not in the other), or upgrade it; delete the copy when no "
        "longer needed"]
    assert capsys.readouterr().out.startswith("1 nodes, 0 edges, 1 documents, 1 passages")


def test_an_earlier_copy_is_never_overwritten(ollama, tmp_path: Path):
    db, earlier = tmp_path / "kb.duckdb", tmp_path / "kb.schema4.duckdb"
    written(db, ollama)
    as_schema_4(db)
    earlier.write_bytes(b"an earlier copy, kept by the user")
    store = DuckDBStore(db)
    assert store.schema_upgrade()["copy"] == str(tmp_path / "kb.schema4-2.duckdb")
    store.open()
    store.close()
    assert earlier.read_bytes() == b"an earlier copy, kept by the user"
    assert schema_of(tmp_path / "kb.schema4-2.duckdb") == ("4", 1, False)


def test_a_copy_that_cannot_be_written_stops_the_upgrade_and_changes_nothing(ollama, tmp_path: Path):
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    as_schema_4(db)
    (tmp_path / ".kb.schema4.duckdb.partial").mkdir()  # where the copy is written first: taken by a folder
    before = digest(db)

    with pytest.raises(StoreError) as refused:
        DuckDBStore(db).open()

    assert str(refused.value).startswith(
        f"{db} uses schema version 4 and must be upgraded to {SCHEMA_VERSION} to be opened, but the copy of it kept "
        "before an upgrade could not be written (")
    assert str(refused.value).endswith(
        f"); nothing was changed. Make room (or write access) in {tmp_path} and open it again, or open it with the "
        "duckgraph that wrote it")
    assert digest(db) == before and schema_of(db) == ("4", 1, False)
    assert not (tmp_path / "kb.schema4.duckdb").exists()


def test_restoring_an_older_backup_upgrades_it_without_leaving_a_second_copy(ollama, tmp_path: Path, capsys):
    """The backup is the file as it was: the restore's temporary copy needs no copy of its own."""
    db, old_backup = tmp_path / "kb.duckdb", tmp_path / "old-backup.duckdb"
    written(old_backup, ollama)
    as_schema_4(old_backup)
    written(db, ollama)

    assert main(["restore", str(old_backup), "--db", str(db)]) == 0

    assert schema_of(db) == (str(SCHEMA_VERSION), 1, True)
    assert schema_of(old_backup) == ("4", 1, False)
    left = sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock")
    assert [name for name in left if "schema4" in name or name.startswith(".")] == []
    assert "old-backup.duckdb" in left and any(name.startswith("kb.duckdb.before-restore-") for name in left)


def test_a_file_opened_read_only_is_not_upgraded_and_no_copy_is_made(ollama, tmp_path: Path):
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    as_schema_4(db)
    with pytest.raises(StoreError, match="open it writable once to upgrade it"):
        DuckDBStore(db, read_only=True).open()
    assert schema_of(db) == ("4", 1, False)
    assert not (tmp_path / "kb.schema4.duckdb").exists()


# -- space -------------------------------------------------------------------------------------------------------


def test_doctor_gives_the_file_size_and_free_blocks(ollama, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    code, report = doctor(capsys, db)
    assert code == 0, report
    space = report["store"]["space"]
    assert space["bytes"] == db.stat().st_size
    assert space["block_size"] == 262144 and space["total_blocks"] * 262144 <= space["bytes"]
    assert 0 <= space["free_blocks"] <= space["total_blocks"]
    detail = next(c["detail"] for c in report["checks"] if c["check"] == "database")
    assert detail == (f"{db} read (schema version {SCHEMA_VERSION}; {space['bytes'] / 2**20:.1f} MiB, "
                      f"{space['free_blocks']} of {space['total_blocks']} blocks free "
                      f"({space['free_blocks'] / space['total_blocks']:.0%}))")
    assert not any("compact" in warning for warning in report["warnings"])  # a small file is not nagged


def test_a_file_mostly_of_free_blocks_gets_the_way_to_compact_it_which_works(ollama, tmp_path: Path, capsys):
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    # ~100 MB of rows written, then deleted: what deleting a namespace or replacing documents leaves, faster.
    con = duckdb.connect(str(db))
    try:
        con.execute("CREATE TABLE scratch AS SELECT md5(i::VARCHAR) || md5((i * 7)::VARCHAR) AS text "
                    "FROM range(3000000) t(i)")
        con.execute("CHECKPOINT")
        # Rows written after them (a document added later) hold the end of the file: without them DuckDB cuts the
        # free blocks off the end, and nothing is left to compact.
        con.execute("CREATE TABLE later AS SELECT md5(i::VARCHAR) AS text FROM range(20000) t(i)")
        con.execute("CHECKPOINT")
        con.execute("DROP TABLE scratch")
        con.execute("CHECKPOINT")
    finally:
        con.close()
    grown = db.stat().st_size
    assert grown > 80 * 2**20

    code, report = doctor(capsys, db)

    assert code == 0, report
    space = report["store"]["space"]
    assert space["free_blocks"] / space["total_blocks"] > 0.9
    assert report["warnings"] == [
        f"{db} is {grown / 2**20:.0f} MiB, {space['free_blocks'] * space['block_size'] / 2**20:.0f} MiB of it free "
        "blocks left by deleted or replaced rows (DuckDB reuses them for later writes, but the file never shrinks). "
        f"To compact it, stop the servers that use it, then: duckgraph compact --db {db}"]
    # The advice, followed: a file of a few MB holding the same, and no other file left.
    assert main(["compact", "--db", str(db)]) == 0
    capsys.readouterr()
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".kb", "kb")))
    assert left == ["kb.duckdb", "kb.duckdb.lock"]
    assert db.stat().st_size < 8 * 2**20
    assert schema_of(db) == (str(SCHEMA_VERSION), 1, True)
    code, report = doctor(capsys, db)
    assert code == 0 and report["warnings"] == [], report
