"""Paths the user gives never name a database's files (issue 29, defect 2): `export -o`, `import`'s source and
`--db` are checked like `backup`'s destination (tests/integration/test_backup.py), by every name the file has
(relative, through a symlink, a hard link), whether a server has the database open or not. Real DuckDB files, the
real command line in this process (the hashing embedder, as in test_transfer.py)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.core.files import paths
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder
from tests.integration.test_transfer import cli_env  # noqa: F401 (a fixture)


def contents(folder: Path) -> dict[str, str]:
    """Every file under `folder` and a digest of its bytes (symlinks as where they point)."""
    return {str(p.relative_to(folder)): (f"-> {os.readlink(p)}" if p.is_symlink() else
                                         hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir")
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def db(tmp_path: Path, monkeypatch) -> Path:
    """A knowledge file with one entity, a leftover write-ahead log beside it, and names for both."""
    path = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link-to-db").symlink_to("kb.duckdb")
    (tmp_path / "link-to-wal").symlink_to("kb.duckdb.wal")
    os.link(path, tmp_path / "hard-link.duckdb")
    return path


#: Every name of one of the knowledge file's own files, and what the refusal calls it.
OWN_NAMES = {
    "kb.duckdb": "the knowledge file", "./sub/../kb.duckdb": "the knowledge file",
    "link-to-db": "the knowledge file", "hard-link.duckdb": "the knowledge file",
    "kb.duckdb.wal": "the knowledge file's write-ahead log", "link-to-wal": "the knowledge file's write-ahead log",
    "kb.duckdb.lock": "the knowledge file's lock file", "sub/../kb.duckdb.sock": "the knowledge file's socket",
}


def test_export_never_writes_over_a_file_of_a_database(cli_env, db, tmp_path, capsys):
    other = tmp_path / "other.duckdb"
    store = DuckDBStore(other)
    store.open()
    store.close()
    before = contents(tmp_path)
    targets = {**OWN_NAMES, "other.duckdb": "a DuckDB database",  # export replaces none, in use or not
               "other.duckdb.wal": f"the write-ahead log of the database {other}",
               "other.duckdb.lock": f"the lock file of the database {other}"}
    for target, reason in targets.items():
        assert main(["export", "--db", str(db), "-o", target]) == 1, target
        error = capsys.readouterr().err
        assert f"duckgraph: {target} is " in error and reason in error and "nothing was written" in error, error
    assert contents(tmp_path) == before  # nothing written, no .partial left

    assert main(["export", "--db", str(db), "-o", "kb.jsonl"]) == 0  # an ordinary file is fine
    assert "Ada Lovelace" in (tmp_path / "kb.jsonl").read_text()


def test_import_never_reads_the_knowledge_files_own_files(cli_env, db, tmp_path, capsys):
    before = contents(tmp_path)
    for source, reason in OWN_NAMES.items():
        assert main(["import", source, "--db", str(db)]) == 1, source
        error = capsys.readouterr().err
        assert f"duckgraph: {source} is {reason}" in error and "give an export file" in error, error
    assert contents(tmp_path) == before


def test_db_never_names_another_databases_write_ahead_log_lock_or_socket(cli_env, db, tmp_path, capsys):
    (tmp_path / "kb.duckdb.lock").write_text("")  # an empty lock file DuckDB would make a new database of
    before = contents(tmp_path)
    for name, what in (("kb.duckdb.wal", "write-ahead log"), ("kb.duckdb.lock", "lock file")):
        assert main(["stats", "--db", name]) == 1
        error = capsys.readouterr().err
        assert f"{name} is the {what} of the database {db}, not a knowledge file" in error, error
    assert contents(tmp_path) == before


def test_what_each_name_is():
    """The checks as a library: nothing is reported for ordinary paths, missing or not."""
    assert paths.database_file("/no/such/file.jsonl") is None
    assert paths.database_file("/no/such/kb.duckdb.wal") is None  # no database beside it
    assert paths.own_file("/no/such/kb.duckdb.wal", "/no/such/kb.duckdb") == (
        "the knowledge file's write-ahead log (of /no/such/kb.duckdb)")


def test_short_names_are_ordinary_files(cli_env, db, tmp_path, capsys):
    """A name no longer than a companion's suffix (".wal", ".lock", ".sock") has no database beside it: "kb",
    "k.db" or "out" are ordinary files for every command, not a crash (probe bug 1)."""
    for name in ("kb", "k.db", ".wal", "a"):
        assert paths.database_file(tmp_path / name) is None, name
    with KnowledgeBase(DuckDBStore(tmp_path / "kb"), HashingEmbedder()):
        pass  # stats refuses a file that is not there
    assert main(["stats", "--db", "kb"]) == 0
    assert main(["export", "--db", str(db), "-o", "out"]) == 0
    assert "Ada Lovelace" in (tmp_path / "out").read_text()
    assert main(["backup", "b.db", "--db", str(db)]) == 0
    assert (tmp_path / "b.db").is_file()
    capsys.readouterr()


def test_a_folder_or_a_blank_name_is_refused_clearly(cli_env, db, tmp_path, capsys):
    before = contents(tmp_path)
    for name in (".", "sub", " "):
        for argv, advice in ((["export", "--db", str(db), "-o", name], "give an export a file name"),
                             (["backup", name, "--db", str(db)], "give a backup a file name")):
            assert main(argv) == 1, argv
            error = capsys.readouterr().err
            assert ("is a folder, not a file" if name != " " else "is blank") in error and advice in error, error
        assert main(["stats", "--db", name]) == 1  # the settings may refuse a blank name first
        error = capsys.readouterr().err
        assert error.startswith("duckgraph: ") and "knowledge file" in error, error
    with pytest.raises(InvalidInputError, match="sub is a folder, not a file: give --db"):
        paths.refuse_as_database("sub")
    with pytest.raises(InvalidInputError, match="the file name ' ' is blank: give --db"):
        paths.refuse_as_database(" ")
    assert contents(tmp_path) == before
