"""A failed `duckgraph import` (or `ingest`) into a database file the command itself created leaves no file behind:
an import is one transaction, so the file would be empty, and doctor and the next commands would take it, which
nobody asked for, for a memory. The command says the file was not created. A failure into a file that was there
changes nothing, as before. Run as the command a user runs (a subprocess), on real DuckDB files.

Also: `ingest --json` (and the other commands' output) on a standard output whose encoding lacks a character of a
stored file name or title (cp1252: PYTHONIOENCODING, a redirected Windows console) is written, not a crash."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_cli_interrupts import (  # noqa: F401 (env, memory: fixtures)
    WAIT, counts, env, exported, import_stalls, memory, signal_at, start,
)
from tests.integration.test_compact import CLI, duckgraph


@pytest.fixture
def broken(memory: Path, env: dict[str, str], tmp_path: Path) -> Path:
    """`duckgraph export` of the memory, its line 3 cut short: the import reads and writes lines 1 and 2 first."""
    lines = exported(memory, env, tmp_path).read_text(encoding="utf-8").splitlines()
    assert len(lines) > 3
    lines[2] = lines[2][: len(lines[2]) // 2]
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def left_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_failed_import_into_a_new_file_removes_it_and_the_folders_made_for_it(broken, env, tmp_path):
    target = tmp_path / "new" / "deeper" / "kb.duckdb"  # folders not there either
    before = left_in(tmp_path)

    done = duckgraph("import", str(broken), "--db", str(target), env=env, cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith(f"duckgraph: {broken}:3: not JSON (") and said.endswith(f"; {target} was not created")
    assert left_in(tmp_path) == before  # no kb.duckdb, kb.duckdb.wal, new/ nor new/deeper/
    # And the file is really not there for the next command, which says so.
    stats = duckgraph("stats", "--db", str(target), env=env, cwd=tmp_path)
    assert stats.returncode == 1 and "no memory at" in stats.stderr


def test_a_failed_import_from_standard_input_into_a_new_file_removes_it(broken, env, tmp_path):
    target = tmp_path / "piped.duckdb"

    done = duckgraph("import", "-", "--db", str(target), env=env, cwd=tmp_path,
                     input=broken.read_text(encoding="utf-8"))

    assert done.returncode == 1
    assert "<stdin>:3: not JSON" in done.stderr and done.stderr.rstrip().endswith(f"; {target} was not created")
    assert not target.exists() and not target.with_name("piped.duckdb.wal").exists()


def test_a_failed_import_into_an_existing_file_changes_nothing_and_keeps_it(broken, memory, env, tmp_path):
    before = counts(memory)

    done = duckgraph("import", str(broken), "--db", str(memory), env=env, cwd=tmp_path)

    assert done.returncode == 1 and f"{broken}:3: not JSON" in done.stderr
    assert "was not created" not in done.stderr
    assert memory.exists() and counts(memory) == before


def test_an_import_whose_embedder_fails_into_a_new_file_removes_it(memory, env, tmp_path):
    """The real default embedder, with a model that is not there (offline): it fails on the first passage."""
    source = exported(memory, env, tmp_path)  # no vectors: the import embeds
    target = tmp_path / "embedded.duckdb"
    failing = {**env, "DUCKGRAPH_EMBEDDER": "sentence-transformers",
               "DUCKGRAPH_EMBEDDER_OPTIONS": json.dumps({"model": "duckgraph-tests/no-such-model"})}

    done = duckgraph("import", str(source), "--db", str(target), env=failing, cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    assert "no-such-model" in done.stderr and done.stderr.rstrip().endswith(f"; {target} was not created")
    assert "Traceback" not in done.stderr
    assert not target.exists() and not target.with_name("embedded.duckdb.wal").exists()


def test_a_refused_namespace_into_a_new_file_leaves_no_file(broken, memory, env, tmp_path):
    """--namespace of a name the file cannot hold is refused before the file is opened: nothing made either."""
    target = tmp_path / "ns.duckdb"
    done = duckgraph("import", str(broken), "--db", str(target), "--namespace", "no such/ns!", env=env, cwd=tmp_path)
    assert done.returncode == 1 and "invalid namespace" in done.stderr
    assert not target.exists()


def test_ctrl_c_during_an_import_into_a_new_file_removes_it_and_says_so(memory, env, tmp_path):
    source = exported(memory, env, tmp_path)
    target = tmp_path / "fresh.duckdb"
    process = start("import", str(source), "--db", str(target), env=env, cwd=tmp_path, patch=import_stalls())

    code, out, err = signal_at(process, "STALLED", signal.SIGINT)

    assert code == 130, err
    assert err.splitlines()[-1] == (f"duckgraph: import interrupted: nothing was imported (an import is one "
                                    f"transaction) and {target} was not created: run it again")
    assert "Traceback" not in err and out == ""
    assert not target.exists() and not target.with_name("fresh.duckdb.wal").exists()


def test_a_successful_import_into_a_new_file_keeps_it(memory, env, tmp_path):
    source = exported(memory, env, tmp_path)
    target = tmp_path / "kept.duckdb"
    done = duckgraph("import", str(source), "--db", str(target), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert counts(target)["nodes"] == sum(json.loads(line)["kind"] == "node"
                                          for line in source.read_text(encoding="utf-8").splitlines()) > 0


def test_an_ingest_whose_embedder_fails_into_a_new_file_removes_it(env, tmp_path):
    """ingest is no one transaction, but one that stored nothing into the file it created leaves it empty too."""
    note = tmp_path / "note.md"
    note.write_text("Marie Curie discovered radium.\n", encoding="utf-8")
    target = tmp_path / "ingested" / "kb.duckdb"
    failing = {**env, "DUCKGRAPH_EMBEDDER": "sentence-transformers",
               "DUCKGRAPH_EMBEDDER_OPTIONS": json.dumps({"model": "duckgraph-tests/no-such-model"})}

    done = duckgraph("ingest", str(note), "--db", str(target), env=failing, cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    assert "no-such-model" in done.stderr and done.stderr.rstrip().endswith(f"; {target} was not created")
    assert not target.parent.exists()


def test_an_ingest_that_fails_into_an_existing_file_keeps_it(memory, env, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("Marie Curie discovered radium.\n", encoding="utf-8")
    before = counts(memory)
    failing = {**env, "DUCKGRAPH_EMBEDDER": "sentence-transformers",
               "DUCKGRAPH_EMBEDDER_OPTIONS": json.dumps({"model": "duckgraph-tests/no-such-model"})}

    done = duckgraph("ingest", str(note), "--db", str(memory), env=failing, cwd=tmp_path)

    assert done.returncode == 1
    assert "was not created" not in done.stderr
    assert memory.exists() and counts(memory) == before



def test_an_ingest_that_skips_every_file_into_a_new_file_removes_it(env, tmp_path):
    """Every file skipped (no text in any), the ingest succeeded and left an empty new file behind."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "empty.md").write_text("", encoding="utf-8")
    (notes / "blank.txt").write_text("  \n", encoding="utf-8")
    target = tmp_path / "ingested" / "kb.duckdb"

    done = duckgraph("ingest", str(notes), "--db", str(target), env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "0 documents stored" in done.stdout and "2 skipped" in done.stdout
    assert done.stderr.splitlines()[-1] == f"duckgraph: nothing was stored, so {target} was not created"
    assert not target.parent.exists()


def test_an_ingest_that_skips_every_file_into_an_existing_file_keeps_it(memory, env, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "empty.md").write_text("", encoding="utf-8")
    before = counts(memory)

    done = duckgraph("ingest", str(notes), "--db", str(memory), env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "was not created" not in done.stderr
    assert memory.exists() and counts(memory) == before

# -- output in an encoding that lacks characters of what is stored ------------------------------------------------

TITLE = "日本のメモ"  # cp1252 has none of these


@pytest.fixture
def odd_names(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "café-ü.md").write_text(f"---\ntitle: {TITLE}\n---\nTokyo is the capital of Japan.\n",
                                      encoding="utf-8")
    return folder


def test_ingest_json_on_a_cp1252_stdout_writes_every_line_as_ascii_json(odd_names, env, tmp_path):
    """It raised UnicodeEncodeError on the title (print(result.model_dump_json()), past for_stream)."""
    db = tmp_path / "kb.duckdb"
    done = subprocess.run([*CLI, "ingest", str(odd_names), "--db", str(db), "--json"],
                          env={**env, "PYTHONIOENCODING": "cp1252"}, cwd=tmp_path, capture_output=True,
                          timeout=WAIT, check=False)

    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    out = done.stdout.decode("ascii")  # the same JSON in any encoding
    batch, summary = [json.loads(line) for line in out.splitlines()]
    assert batch["documents"][0]["id"] == str(odd_names / "café-ü.md")
    assert batch["documents"][0]["title"] == TITLE
    assert summary["summary"]["stored"] == 1


def test_search_on_a_cp1252_stdout_shows_what_it_cannot_write_as_escapes(odd_names, env, tmp_path):
    db = tmp_path / "kb.duckdb"
    assert duckgraph("ingest", str(odd_names), "--db", str(db), env=env, cwd=tmp_path).returncode == 0
    cp1252 = {**env, "PYTHONIOENCODING": "cp1252"}

    as_json = subprocess.run([*CLI, "search", "capital of Japan", "--db", str(db), "--json"], env=cp1252,
                             cwd=tmp_path, capture_output=True, timeout=WAIT, check=False)
    text = subprocess.run([*CLI, "search", "capital of Japan", "--db", str(db)], env=cp1252, cwd=tmp_path,
                          capture_output=True, timeout=WAIT, check=False)

    assert as_json.returncode == 0, as_json.stderr.decode("utf-8", "replace")
    assert json.loads(as_json.stdout.decode("ascii"))["passages"][0]["title"] == TITLE
    assert text.returncode == 0, text.stderr.decode("utf-8", "replace")
    shown = text.stdout.decode("cp1252")
    assert "caf\xe9-\xfc.md" in shown  # what cp1252 has stays as it is
    assert "\\u65e5\\u672c" in shown  # the rest as escapes


def test_doctor_on_a_cp1252_stdout_shows_the_memory_path_it_cannot_write_as_escapes(odd_names, env, tmp_path):
    """doctor's text report raised UnicodeEncodeError on a path cp1252 lacks (its lines were print()ed as they
    were)."""
    folder = tmp_path / TITLE
    folder.mkdir()
    db = folder / "kb.duckdb"
    assert duckgraph("ingest", str(odd_names), "--db", str(db), env=env, cwd=tmp_path).returncode == 0

    done = subprocess.run([*CLI, "doctor", "--db", str(db)], env={**env, "PYTHONIOENCODING": "cp1252"},
                          cwd=tmp_path, capture_output=True, timeout=WAIT, check=False)

    assert "Traceback" not in done.stderr.decode("utf-8", "replace")
    shown = done.stdout.decode("cp1252")
    assert "\\u65e5\\u672c" in shown and "kb.duckdb" in shown
    assert "no problems found" in shown or "problem:" in shown or "warning:" in shown  # the whole report


def test_backup_restore_and_compact_on_a_cp1252_stdout_show_the_paths_it_cannot_write_as_escapes(odd_names, env,
                                                                                                 tmp_path):
    """Their lines printed the file paths as they were: UnicodeEncodeError once the work was done."""
    folder = tmp_path / TITLE
    folder.mkdir()
    db = folder / "kb.duckdb"
    assert duckgraph("ingest", str(odd_names), "--db", str(db), env=env, cwd=tmp_path).returncode == 0
    cp1252 = {**env, "PYTHONIOENCODING": "cp1252"}
    copy = folder / "copy.duckdb"

    for args in (["backup", str(copy)], ["compact"], ["restore", str(copy)]):
        done = subprocess.run([*CLI, *args, "--db", str(db)], env=cp1252, cwd=tmp_path, capture_output=True,
                              timeout=WAIT, check=False)
        assert done.returncode == 0, (args, done.stderr.decode("utf-8", "replace"))
        assert "\\u65e5\\u672c" in done.stdout.decode("cp1252"), args
