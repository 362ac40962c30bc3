"""`duckgraph compact` on real DuckDB files, run as the command a user runs (a subprocess): a file grown by a deleted
namespace shrinks and keeps its rows, counts and search results; the old file is removed, or kept with --keep-old;
a crash's write-ahead log is folded in; the command is refused, changing nothing, while another process has the
file and for bad paths; a compact killed midway leaves the file whole; a copy that does not hold the same counts is
never put in place."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.core.files.backup import compact
from duckgraph.core.sharing.lock import LockFile, holder, lock_path
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError
from tests.fakes import HashingEmbedder
from tests.integration.test_backup import REPO_ROOT, digest, fill, table_contents
from tests.integration.test_restore import NOTE, crash_after_a_write, notes

CLI = [sys.executable, "-m", "duckgraph.core.cli"]
QUERY = "who discovered radium"


def command_env(folder: Path) -> dict[str, str]:
    """The commands' environment: offline, a private HOME, no config, and the hashing embedder the files are
    written with as the plugin "fake" (so that `search` embeds its query as the file's vectors were)."""
    site = folder / "site"
    dist_info = site / "duckgraph_test_fake-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: duckgraph-test-fake\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[duckgraph]\nfake = tests.fake_embedder_plugin\n")
    home = folder / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(site), str(REPO_ROOT)]), "DUCKGRAPH_CONFIG": "",
            "DUCKGRAPH_EMBEDDER": "fake", "DUCKGRAPH_WARM_UP": "0"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return command_env(tmp_path)


def duckgraph(*args: str, env: dict[str, str], cwd: Path, **options: Any) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False, **options)


@pytest.fixture(scope="module")
def grown_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file of two small namespaces (7 MiB: DuckDB gives each table blocks of its own), grown by a third of 200
    long documents to twice that, then deleted with `duckgraph namespaces delete`. Written once: each test
    compacts a copy."""
    folder = tmp_path_factory.mktemp("grown")
    db = folder / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
        for start in range(0, 200, 50):
            kb.add_documents([DocumentInput(id=f"scratch-{i}", title=f"Scratch {i}",
                                            text=f"Scratch note {i} about topic {i % 37} and its details. " * 300)
                              for i in range(start, start + 50)], namespace="scratch")
    done = duckgraph("namespaces", "delete", "scratch", "--confirm", "scratch", "--db", str(db),
                     env=command_env(folder), cwd=folder)
    assert done.returncode == 0, done.stderr
    assert not db.with_name("kb.duckdb.wal").exists()  # closed and whole: a plain copy of it is the same file
    return db


def held(db: Path) -> dict[str, int]:
    """What compact reports and checks: relations with the ended ones (none here), and the namespaces."""
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        stats = kb.store.stats()
        return {"nodes": stats["nodes"], **kb.store.relation_counts(datetime.now(timezone.utc)),
                "documents": stats["documents"], "chunks": stats["chunks"], "namespaces": len(kb.store.namespaces())}


def search(db: Path, env: dict[str, str]) -> dict:
    done = duckgraph("search", QUERY, "--json", "--db", str(db), env=env, cwd=db.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def files(folder: Path) -> dict[str, str]:
    """Every file in `folder` with its digest (but the lock file, which taking the lock creates)."""
    return {p.name: digest(p) for p in folder.iterdir() if p.is_file() and p.suffix != ".lock"}


def test_a_file_grown_by_a_deleted_namespace_shrinks_and_keeps_everything(tmp_path: Path, env, grown_file):
    db = tmp_path / "kb.duckdb"
    shutil.copyfile(grown_file, db)
    before, counts, rows, found = db.stat().st_size, held(db), table_contents(db), search(db, env)
    assert counts == {"nodes": 6, "edges": 3, "edges_ended": 0, "documents": 3, "chunks": counts["chunks"],
                      "namespaces": 2}
    assert found["passages"] and "Radium" in json.dumps(found)

    done = duckgraph("compact", "--db", str(db), "--json", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    after = db.stat().st_size
    assert result == {"path": str(db), "bytes_before": before, "bytes": after, "kept": [], **counts}
    assert after < 0.6 * before, (before, after)
    assert held(db) == counts and table_contents(db) == rows and search(db, env) == found
    # The old file went with the rename: no second copy, no temporary file, no log (the lock file stays, as
    # every duckgraph lock file does).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".kb", "kb"))) == ["kb.duckdb",
                                                                                             "kb.duckdb.lock"]


def test_keep_old_keeps_the_file_as_it_was_and_the_permissions_are_kept(tmp_path: Path, env, grown_file):
    db = tmp_path / "kb.duckdb"
    shutil.copyfile(grown_file, db)
    db.chmod(0o640)
    before, rows = db.stat().st_size, table_contents(db)

    done = duckgraph("compact", "--keep-old", "--db", str(db), env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    [kept] = [p for p in tmp_path.iterdir() if ".before-compact-" in p.name]
    assert re.fullmatch(r"kb\.duckdb\.before-compact-\d{8}-\d{6}", kept.name)
    after = db.stat().st_size
    assert done.stdout.splitlines() == [
        f"compacted {db} from {before:,} to {after:,} bytes ({before / 2**20:.1f} MiB to {after / 2**20:.1f} MiB): "
        "6 entities, 3 relations, 3 documents, "
        f"{held(db)['chunks']} passages, 2 namespaces, as before",
        f"the file as it was is kept as {kept} (open it with --db to read it; delete it once the compacted file "
        "works)"]
    assert kept.stat().st_size == before and after < 0.6 * before
    assert table_contents(kept) == rows == table_contents(db)
    assert oct(db.stat().st_mode & 0o777) == oct(0o640)


def test_a_symbolic_link_stays_a_link_to_the_compacted_file(tmp_path: Path, env, grown_file):
    real = tmp_path / "data" / "kb.duckdb"
    real.parent.mkdir()
    shutil.copyfile(grown_file, real)
    link = tmp_path / "memory.duckdb"
    link.symlink_to(real)
    before = real.stat().st_size

    done = duckgraph("compact", "--db", str(link), "--json", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["path"] == str(real)
    assert link.is_symlink() and link.resolve() == real and real.stat().st_size < 0.6 * before


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_file_compacted_by_root_stays_its_owners(tmp_path: Path, env):
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
    os.chown(db, 4321, 4322)
    db.chmod(0o600)

    done = duckgraph("compact", "--db", str(db), env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    info = db.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (4321, 4322, 0o600)


def test_the_write_ahead_log_of_a_crash_is_folded_in(tmp_path: Path, env):
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=n, type="Person") for n in ("Alice", "Bob")], [])
    crash_after_a_write(db, Path(env["HOME"]))  # Bob's note lies in kb.duckdb.wal only

    done = duckgraph("compact", "--db", str(db), "--json", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert not db.with_name("kb.duckdb.wal").exists()
    assert notes(db) == [("Bob", NOTE)]
    assert json.loads(done.stdout)["nodes"] == 2


def test_refused_while_a_server_or_another_process_has_the_file(tmp_path: Path, env):
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
    before = files(tmp_path)

    def refused(message: str) -> None:
        done = duckgraph("compact", "--db", str(db), env=env, cwd=tmp_path)
        assert done.returncode == 1 and message in done.stderr, done.stderr
        assert files(tmp_path) == before

    # A real `duckgraph serve` owns the file (it holds the lock until it ends; with no warm-up it has not opened
    # the file yet, so the file's bytes stay comparable).
    server = subprocess.Popen([*CLI, "serve", "--db", str(db)], env=env, cwd=tmp_path, stdin=subprocess.PIPE,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while (holder(db) or {}).get("pid") != server.pid:
            assert server.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        refused(f"{db} is in use by `duckgraph serve` (pid {server.pid}): stop it (and the MCP clients that start "
                "it), then compact; nothing was changed")
    finally:
        server.kill()
        server.wait()

    # Another program has it open in DuckDB.
    hold = f"import duckdb, sys; c = duckdb.connect({str(db)!r}); print('open', flush=True); sys.stdin.read()"
    other = subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "open"
        refused(f"{db} is open in another process (a duckgraph command such as ingest or import, or a program using "
                "DuckDB): let it finish or close it, then compact; nothing was changed")
    finally:
        other.communicate("", timeout=30)
    assert held(db)["nodes"] == 6


def test_bad_paths_are_refused_and_change_nothing(tmp_path: Path, env):
    folder = tmp_path / "folder"
    folder.mkdir()
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n")
    sqlite = tmp_path / "other.db"
    sqlite.write_bytes(b"SQLite format 3\x00" + b"\x00" * 4080)
    before = files(tmp_path)

    for path, message in [
        (tmp_path / "missing.duckdb", f"no memory at {tmp_path / 'missing.duckdb'}: check --db"),
        (folder, f"{folder} is a folder, not a file: give --db"),
        (text, f"{text} is not a DuckDB file (or not readable): give --db the memory's file; nothing was changed"),
        (sqlite, f"{sqlite} is not a DuckDB file (or not readable)"),
    ]:
        done = duckgraph("compact", "--db", str(path), env=env, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert done.stderr.startswith("duckgraph: ") and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
        assert files(tmp_path) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "folder", "home", "site"])


#: Runs a compact and is killed just before the copy is renamed over the file.
KILLED_COMPACT = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.files.backup import compact
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder

    os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    compact(sys.argv[1], lambda path: KnowledgeBase(DuckDBStore(path), HashingEmbedder()))
""")


def test_a_killed_compact_leaves_the_file_whole_and_the_next_one_removes_its_copy(tmp_path: Path, env, grown_file):
    db = tmp_path / "kb.duckdb"
    shutil.copyfile(grown_file, db)
    before, rows = db.stat().st_size, table_contents(db)

    killed = subprocess.run([sys.executable, "-c", KILLED_COMPACT, str(db)], env=env, cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300, check=False)

    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [left] = [p for p in tmp_path.iterdir() if p.name.startswith(".kb.duckdb.")]
    assert left.name.endswith(".partial") and left.stat().st_size > 0
    assert db.stat().st_size == before and table_contents(db) == rows  # the file, whole and as it was

    done = duckgraph("compact", "--db", str(db), env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert f"removed {left}, left by a backup, restore or compact that was interrupted" in done.stderr
    assert not left.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".kb.duckdb.")]
    assert table_contents(db) == rows and db.stat().st_size < 0.6 * before


def test_a_copy_that_does_not_hold_the_same_counts_is_not_put_in_place(tmp_path: Path):
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
    rows = table_contents(db)

    def opened(path: Path) -> KnowledgeBase:
        kb = KnowledgeBase(DuckDBStore(path), HashingEmbedder())
        if path != db:  # the copy: it gains an entity the file does not have
            with kb:
                kb.add_knowledge_graph([NodeInput(name="Intruder", type="Thing")], [])
        return kb

    with pytest.raises(StoreError) as refused:
        compact(db, opened)

    assert str(refused.value) == (
        f"could not compact {db}: the compact copy holds 7 entities, 3 relations, 3 documents, "
        f"{held(db)['chunks']} passages, 2 namespaces, the file 6 entities, 3 relations, 3 documents, "
        f"{held(db)['chunks']} passages, 2 namespaces; {db} is unchanged")
    assert table_contents(db) == rows
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix != ".lock") == ["kb.duckdb"]
    lock = LockFile(lock_path(db))
    assert lock.acquire(blocking=False)  # released: a server can start on the file
    lock.release()
