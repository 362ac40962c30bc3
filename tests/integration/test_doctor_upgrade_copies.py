"""The copies a schema upgrade keeps beside the file (NAME.schemaN.duckdb) stay there until the user deletes them, a
full copy of the memory each: `duckgraph doctor` lists those of its --db's file, with their size and date, says what
they are (the file as it was, for going back with an older duckgraph) and when they can be deleted. Before, it said
nothing of them.

Real DuckDB files upgraded by a real command (`stats`), the command line's `main`; the embedder is Ollama's stand-in,
as in test_schema_upgrade_and_space.py: what is checked is the files beside the knowledge file.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

from duckgraph.core.cli import main
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION
from tests.integration.test_schema_upgrade_and_space import as_schema_4, doctor, ollama, schema_of, written  # noqa: F401

WHEN = datetime(2024, 3, 5, 14, 30).timestamp()


def upgraded(db: Path, ollama) -> Path:  # noqa: F811 (the fixture's value)
    """`db` written at schema 4, then upgraded by `duckgraph stats`: the copy it kept, dated WHEN."""
    written(db, ollama)
    as_schema_4(db)
    assert main(["stats", "--db", str(db)]) == 0
    copy = db.with_name(f"{db.stem}.schema4.duckdb")
    assert schema_of(db)[0] == str(SCHEMA_VERSION) and schema_of(copy)[0] == "4"
    os.utime(copy, (WHEN, WHEN))
    return copy


def copy_warning(db: Path, copy: Path, version: int = 4, files: str | None = None) -> str:
    size = (copy.stat().st_size + (Path(files).stat().st_size if files else 0)) / 2**20
    named = f"{copy} and {files}" if files else str(copy)
    return (f"{named} ({size:.1f} MB, kept since 2024-03-05 14:30) is {db} as it was at schema version {version}, "
            f"kept by duckgraph before it upgraded the file: to go back, a duckgraph that knows only version {version} "
            f"(an older install, another MCP host's) opens it with --db {copy} (what was written to {db} since is not "
            "in it). Delete it once the upgraded file works and no older install uses it")


def test_doctor_lists_the_copy_an_upgrade_kept_with_its_size_and_date(ollama, tmp_path: Path, capsys):  # noqa: F811
    db = tmp_path / "kb.duckdb"
    copy = upgraded(db, ollama)
    capsys.readouterr()

    code, report = doctor(capsys, db)

    assert code == 0, report  # a warning: the file works
    assert report["warnings"] == [copy_warning(db, copy)]
    assert main(["doctor", "--db", str(db)]) == 0
    assert f"warning:   {copy_warning(db, copy)}\n" in capsys.readouterr().out
    assert schema_of(copy) == ("4", 1, False)  # only read: still there, as it was


def test_only_this_file_s_copies_are_listed(ollama, tmp_path: Path, capsys):  # noqa: F811
    """Each copy of the --db's file (a second one named -2, one an older duckgraph used, with its log), and nothing
    else: another file's copies in the same folder, names the pattern does not give, a folder of that name."""
    db = tmp_path / "kb.duckdb"
    copy = upgraded(db, ollama)
    second = tmp_path / "kb.schema5-2.duckdb"
    second.write_bytes(b"x" * 2**20)
    os.utime(second, (WHEN, WHEN))
    wal = tmp_path / "kb.schema5-2.duckdb.wal"
    wal.write_bytes(b"y" * 2**19)
    for name in ("other.schema4.duckdb", "kbx.schema4.duckdb", "xkb.schema4.duckdb", "kb.schema4.duckdb.bak",
                 "kb.schemaX.duckdb", "kb.schema4.db", "kb.schema.duckdb", "kb.schema4-.duckdb", "kb.duckdb.schema4"):
        (tmp_path / name).write_bytes(b"not a copy of kb.duckdb")
    (tmp_path / "kb.schema6.duckdb").mkdir()
    capsys.readouterr()

    code, report = doctor(capsys, db)

    assert code == 0, report
    assert report["warnings"] == [copy_warning(db, copy), copy_warning(db, second, 5, str(wal))]


def test_a_file_without_a_suffix_and_one_with_another_have_their_copies_found(ollama, tmp_path: Path,  # noqa: F811
                                                                              capsys):
    """The copy's name follows the store's: the file's own suffix, `.duckdb` when it has none."""
    plain = tmp_path / "memory"
    copy = upgraded(plain, ollama)
    assert copy.name == "memory.schema4.duckdb"
    other = tmp_path / "notes.db"
    other_copy = tmp_path / "notes.schema4.db"
    other_copy.write_bytes(b"z" * 1024)
    os.utime(other_copy, (WHEN, WHEN))
    capsys.readouterr()

    assert doctor(capsys, plain)[1]["warnings"] == [copy_warning(plain, copy)]
    assert doctor(capsys, other)[1]["warnings"] == [copy_warning(other, other_copy)]  # listed with no file yet


def test_a_file_never_upgraded_gets_no_such_warning(ollama, tmp_path: Path, capsys):  # noqa: F811
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    code, report = doctor(capsys, db)
    assert code == 0 and report["warnings"] == [], report
    assert json.dumps(report).count("schema4") == 0
