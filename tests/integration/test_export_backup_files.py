"""The files `export` and `backup` write, and the streams `import -` and `export` read and write, on real DuckDB
files through real `duckgraph` processes:

- JSON Lines on standard input and output are UTF-8 whatever the locale's encoding (PYTHONIOENCODING stands in for
  a latin-1 server locale, or Windows' cp1252 when output is redirected), as in a file given by name;
- a backup or an export of a private memory is private, from the moment its temporary file exists, and one written
  over an existing file keeps that file's mode (and owner);
- `export -o LINK` and `backup --force LINK` write the link's target and keep the link;
- `export -o nodir/x.jsonl` names the missing folder, not the temporary file.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_hostile_environment import nobody  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "duckgraph.core.cli"]
NAMES = ["Łukasz Nowak", "Bob Müller", "东京大学"]  # not in cp1252, in latin-1 but as other bytes, not in either


def memory(path: Path, mode: int = 0o600) -> Path:
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=n, type="person", observations=[f"{n} likes café"]) for n in NAMES],
                               [])
    path.chmod(mode)
    return path


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(ROOT), "DUCKGRAPH_CONFIG": "", "DUCKGRAPH_WARM_UP": "0", **extra}


def run(args: list[str], tmp_path: Path, *, umask: int = 0o022, stdin: bytes | None = None,
        **extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], env=env(tmp_path, **extra), cwd=tmp_path, input=stdin,
                          capture_output=True, timeout=180, preexec_fn=lambda: os.umask(umask), check=False)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def names_in(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as con:
        return sorted(row[0] for row in con.execute("SELECT name FROM nodes").fetchall())


# -- standard input and output are UTF-8 ------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1"])
def test_export_to_standard_output_is_utf8_whatever_the_locale(tmp_path: Path, encoding: str):
    db = memory(tmp_path / "kb.duckdb")
    assert run(["export", "--db", str(db), "-o", "by-name.jsonl"], tmp_path).returncode == 0
    done = run(["export", "--db", str(db)], tmp_path, PYTHONIOENCODING=encoding)
    # Before: cp1252 wrote half a file and failed on "Ł"; latin-1 wrote "Müller" as one byte, no UTF-8 reader's.
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout == (tmp_path / "by-name.jsonl").read_bytes()
    text = done.stdout.decode("utf-8")
    assert all(name in text for name in NAMES) and "\r\n" not in text


def test_import_from_standard_input_is_utf8_whatever_the_locale(tmp_path: Path):
    lines = "".join(json.dumps({"type": "entity", "name": n, "entityType": "person",
                                "observations": [f"{n} likes café"]}, ensure_ascii=False) + "\n" for n in NAMES)
    db = tmp_path / "kb.duckdb"
    done = run(["import", "-", "--db", str(db), "--json"], tmp_path, stdin=lines.encode("utf-8"),
               PYTHONIOENCODING="latin-1")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert names_in(db) == sorted(NAMES)  # before: "Bob MÃ¼ller", stored without a word
    assert json.loads(done.stdout)["nodes_created"] == 3
    done.stdout.decode("ascii")  # --json escapes what is not ASCII: the same JSON in any encoding

    # A file that is not UTF-8 is refused, nothing imported, as a file given by name is.
    latin = json.dumps({"type": "entity", "name": "Bob Müller", "entityType": "person", "observations": ["café"]},
                       ensure_ascii=False).encode("latin-1")
    refused = run(["import", "-", "--db", str(db)], tmp_path, stdin=latin, PYTHONIOENCODING="utf-8")
    assert refused.returncode == 1
    err = refused.stderr.decode()
    assert "duckgraph: standard input is not UTF-8 text (" in err and "nothing was imported" in err, err
    assert "Traceback" not in err and names_in(db) == sorted(NAMES)


# -- permissions: a private memory's copies are private ---------------------------------------------------------


def test_backup_and_export_of_a_private_memory_are_private(tmp_path: Path):
    db = memory(tmp_path / "kb.duckdb", 0o600)
    assert run(["backup", "--db", str(db), "bk.duckdb"], tmp_path).returncode == 0
    assert run(["export", "--db", str(db), "-o", "kb.jsonl"], tmp_path).returncode == 0
    assert (mode(tmp_path / "bk.duckdb"), mode(tmp_path / "kb.jsonl")) == (0o600, 0o600)  # before: 0o644 both

    # Written over, a file keeps the mode the user gave it (a nightly job must not undo a chmod), wider or not.
    (tmp_path / "bk.duckdb").chmod(0o640)
    (tmp_path / "kb.jsonl").chmod(0o604)
    assert run(["backup", "--db", str(db), "bk.duckdb", "--force"], tmp_path).returncode == 0
    assert run(["export", "--db", str(db), "-o", "kb.jsonl"], tmp_path).returncode == 0
    assert (mode(tmp_path / "bk.duckdb"), mode(tmp_path / "kb.jsonl")) == (0o640, 0o604)
    assert names_in(tmp_path / "bk.duckdb") == sorted(NAMES)

    # A new copy of a memory others may read is as readable as the memory, and the umask still narrows it.
    db.chmod(0o640)
    assert run(["export", "--db", str(db), "-o", "shared.jsonl"], tmp_path).returncode == 0
    assert run(["export", "--db", str(db), "-o", "narrow.jsonl"], tmp_path, umask=0o077).returncode == 0
    assert (mode(tmp_path / "shared.jsonl"), mode(tmp_path / "narrow.jsonl")) == (0o640, 0o600)


#: Starts writing the export or the backup of a 0600 memory under umask 022, and is killed there: what its
#: temporary file's mode is while it is written.
KILLED = textwrap.dedent("""
    import os, signal, sys
    os.umask(0o022)
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.files import export
    from duckgraph.plugins.duckdb import DuckDBStore, maintenance
    from tests.fakes import HashingEmbedder

    kill = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    db, what, target = sys.argv[1:]
    if what == "export":
        from duckgraph.core.cli import main

        export._write = kill  # at its first line
        main(["export", "--db", db, "-o", target])
    else:
        maintenance._compare_copy = kill  # DuckDB has written the whole copy
        KnowledgeBase(DuckDBStore(db), HashingEmbedder()).open().backup(target)
""")


@pytest.mark.parametrize("what", ["export", "backup"])
def test_the_temporary_file_is_private_from_the_start(tmp_path: Path, what: str):
    db = memory(tmp_path / "kb.duckdb", 0o600)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", KILLED, str(db), what, str(out / "copy")], env=env(tmp_path),
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    [partial] = list(out.iterdir())
    assert partial.name.endswith(".partial") and (what == "export" or partial.stat().st_size > 0)
    assert mode(partial) == 0o600  # before: 0o644 while the memory was being written into it


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_written_over_a_file_keeps_its_owner(tmp_path: Path):
    db = memory(tmp_path / "kb.duckdb", 0o600)
    assert run(["backup", "--db", str(db), "bk.duckdb"], tmp_path).returncode == 0
    (tmp_path / "kb.jsonl").write_text("old")
    for name in ("kb.jsonl", "bk.duckdb"):
        os.chown(tmp_path / name, 4321, 4321)  # a user's files, replaced by root's nightly job
    assert run(["export", "--db", str(db), "-o", "kb.jsonl"], tmp_path).returncode == 0
    assert run(["backup", "--db", str(db), "bk.duckdb", "--force"], tmp_path).returncode == 0
    for name in ("kb.jsonl", "bk.duckdb"):
        info = (tmp_path / name).stat()
        assert (info.st_uid, info.st_gid) == (4321, 4321), name


def test_a_file_of_another_user_is_not_silently_taken_over(tmp_path: Path, nobody):  # noqa: F811
    """Written over by another user, the file would change hands and, its 0600 kept, lock its owner out."""
    folder = nobody.home / "shared"
    folder.mkdir()
    os.chmod(folder, 0o777)
    db = memory(folder / "kb.duckdb", 0o644)
    os.chown(db, *nobody.ids)
    theirs = folder / "kb.jsonl"
    theirs.write_text("root's export\n")
    theirs.chmod(0o600)
    code = ("import sys; from duckgraph.core.cli import main; "
            "sys.exit(main(['export', '--db', sys.argv[1], '-o', sys.argv[2]]))")
    done = nobody(code, str(db), str(theirs))
    assert done.returncode == 1, done.stderr
    assert f"duckgraph: cannot write {theirs}: the file it would replace belongs to uid 0, gid 0" in done.stderr
    assert theirs.read_text() == "root's export\n" and theirs.stat().st_uid == 0
    assert not [p for p in folder.iterdir() if p.name.endswith(".partial")]


# -- symbolic links are written through --------------------------------------------------------------------------


def test_export_and_backup_through_a_symbolic_link_write_its_target(tmp_path: Path):
    db = memory(tmp_path / "kb.duckdb")
    synced = tmp_path / "synced"
    synced.mkdir()
    (synced / "kb.jsonl").write_text("OLD\n")
    (tmp_path / "kb.jsonl").symlink_to(synced / "kb.jsonl")
    assert run(["export", "--db", str(db), "-o", "kb.jsonl"], tmp_path).returncode == 0
    assert (tmp_path / "kb.jsonl").is_symlink()  # before: replaced by a file, the synced one kept "OLD"
    assert '"name":"Łukasz Nowak"' in (synced / "kb.jsonl").read_text(encoding="utf-8")
    assert [p.name for p in synced.iterdir()] == ["kb.jsonl"]  # the partial was beside the target, and is gone

    with KnowledgeBase(DuckDBStore(synced / "latest.duckdb"), HashingEmbedder()) as older:
        older.add_knowledge_graph([NodeInput(name="Someone Older", type="person")], [])
    (tmp_path / "latest.duckdb").symlink_to(synced / "latest.duckdb")
    done = run(["backup", "--db", str(db), "latest.duckdb", "--force"], tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert (tmp_path / "latest.duckdb").is_symlink()
    assert names_in(synced / "latest.duckdb") == sorted(NAMES)


# -- a missing folder is named ---------------------------------------------------------------------------------


def test_export_into_a_missing_folder_names_it(tmp_path: Path):
    db = memory(tmp_path / "kb.duckdb")
    (tmp_path / "afile").write_text("")
    env(tmp_path)  # its home folder made first
    before = sorted(p.name for p in tmp_path.iterdir())
    done = run(["export", "--db", str(db), "-o", "nodir/x.jsonl"], tmp_path)
    assert done.returncode == 1
    # Before: "cannot write nodir/x.jsonl: [Errno 2] No such file or directory: 'nodir/x.jsonl.partial'".
    assert done.stderr.decode().endswith("duckgraph: cannot write nodir/x.jsonl: the folder nodir does not exist; "
                                         "create it first or choose another file; nothing was written\n")
    done = run(["export", "--db", str(db), "-o", "afile/x.jsonl"], tmp_path)
    assert "duckgraph: cannot write afile/x.jsonl: afile is not a folder; create it first" in done.stderr.decode()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
