"""Durability around the file on real DuckDB files: `duckgraph restore` over a file a crash left with its
write-ahead log, the leftovers of a killed backup, a failed write seen on the server's log, the lock message naming
duckgraph's own commands, and which writes mark an entity as written by hand."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from duckgraph.core.cli import main
from duckgraph.core.domain import memory_server
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, NodeInput, ObservationAddition
from duckgraph.core.files.paths import _posix_locked
from duckgraph.core.sharing.lock import LockFile, lock_path
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError

from tests.fakes import HashingEmbedder
from tests.integration.test_backup import REPO_ROOT, digest, table_contents

NOTE = "Bob's private medical note"

#: Writes to the file and is killed before anything checkpoints it: the write is only in PATH.wal.
CRASH = textwrap.dedent("""
    import os, signal, sys
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import NodeInput
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder

    kb = KnowledgeBase(DuckDBStore(sys.argv[1]), HashingEmbedder()).open()
    kb.add_knowledge_graph([NodeInput(name="Bob", type="Person", description="Bob edited",
                                      observations=[sys.argv[2]])], [])
    os.kill(os.getpid(), signal.SIGKILL)
""")


def child_env(home: Path) -> dict[str, str]:
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO_ROOT), "DUCKGRAPH_CONFIG": ""}


def make_file(path: Path, names: list[str]) -> None:
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=n, type="Person") for n in names], [])


def crash_after_a_write(path: Path, home: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CRASH, str(path), NOTE], env=child_env(home), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert path.with_name(path.name + ".wal").stat().st_size > 0  # the write lies in the log only


def notes(path: Path) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute("SELECT n.name, o.text FROM nodes n JOIN observations o ON o.node_id = n.id "
                           "ORDER BY ALL").fetchall()
    finally:
        con.close()


@pytest.fixture
def cli_env(tmp_path: Path, no_settings):
    no_settings.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(exist_ok=True)
    return no_settings


# -- 1. restore --------------------------------------------------------------------------------------------


def test_restore_over_a_crashed_file_gives_exactly_the_backup(tmp_path: Path, cli_env, capsys):
    live, backup = tmp_path / "live.duckdb", tmp_path / "backup.duckdb"
    make_file(live, ["Alice", "Bob", "Carol"])
    make_file(backup, ["Xavier", "Yolanda", "Zed"])  # another memory's backup: Yolanda has Bob's id
    expected = table_contents(backup)
    crash_after_a_write(live, tmp_path / "home")

    # Why a copy by hand is unsafe: DuckDB replays the crashed file's log onto the copy, and nothing can tell.
    by_hand = tmp_path / "by-hand"
    by_hand.mkdir()
    shutil.copy(live.with_name("live.duckdb.wal"), by_hand / "live.duckdb.wal")
    shutil.copy(backup, by_hand / "live.duckdb")
    assert notes(by_hand / "live.duckdb") == [("Bob", NOTE)]

    assert main(["restore", str(backup), "--db", str(live)]) == 0
    out = capsys.readouterr().out
    assert table_contents(live) == expected
    assert notes(live) == [] and not live.with_name("live.duckdb.wal").exists()
    kept = sorted(p.name for p in tmp_path.iterdir() if ".before-restore-" in p.name)
    assert len(kept) == 2 and kept[1] == kept[0] + ".wal"  # the old file and its log, kept as a pair
    assert f"restored {live} from {backup}" in out and "3 entities" in out and kept[0] in out
    assert notes(tmp_path / kept[0]) == [("Bob", NOTE)]  # the old file opens with its last write
    assert not [p for p in tmp_path.iterdir() if p.name.endswith((".partial", ".partial.wal"))]
    with KnowledgeBase(DuckDBStore(live), HashingEmbedder()) as kb:
        assert sorted(n.name for n in kb.store.list_nodes("default")) == ["Xavier", "Yolanda", "Zed"]


def test_restore_through_a_symbolic_link_replaces_the_file_it_points_to(tmp_path: Path, cli_env, capsys):
    # Two hosts, one configured with the link and one with the file's own path, must go on sharing one file.
    real, backup = tmp_path / "sync" / "memory.duckdb", tmp_path / "backup.duckdb"
    real.parent.mkdir()
    make_file(real, ["Alice"])
    make_file(backup, ["Xavier"])
    link = tmp_path / "link.duckdb"
    link.symlink_to(real)

    assert main(["restore", str(backup), "--db", str(link)]) == 0
    assert f"restored {real} from {backup}" in capsys.readouterr().out
    assert link.is_symlink() and link.resolve() == real
    with KnowledgeBase(DuckDBStore(real), HashingEmbedder()) as kb:
        assert [n.name for n in kb.store.list_nodes("default")] == ["Xavier"]
    kept = [p for p in real.parent.iterdir() if ".before-restore-" in p.name]
    assert len(kept) == 1 and not kept[0].is_symlink()  # the old file itself, beside it


def test_restore_refuses_what_it_cannot_do_safely_and_changes_nothing(tmp_path: Path, cli_env, capsys):
    live, backup = tmp_path / "live.duckdb", tmp_path / "backup.duckdb"
    make_file(live, ["Alice"])
    make_file(backup, ["Xavier"])

    def files() -> dict[str, str]:  # but the lock file, which taking the lock creates
        return {p.name: digest(p) for p in tmp_path.iterdir() if p.is_file() and p.suffix != ".lock"}

    def refused(args: list[str], message: str) -> None:
        before = files()
        assert main(["restore", *args, "--db", str(live)]) == 1
        assert message in capsys.readouterr().err
        assert files() == before

    export = tmp_path / "export.jsonl"
    export.write_text('{"kind": "meta"}\n')
    refused([str(export)], "is not a DuckDB file (or not readable), so not a backup made by `duckgraph backup`")
    refused([str(tmp_path / "missing.duckdb")], "there is no backup file at")
    refused([str(live)], "is the knowledge file")
    damaged = tmp_path / "damaged.duckdb"
    damaged.write_bytes(backup.read_bytes()[:20_000])  # DuckDB's header, then cut short
    refused([str(damaged)], f"{damaged} cannot be restored (")

    # A duckgraph server owns the file (its lock), or a process has it open in DuckDB.
    lock = LockFile(lock_path(live))
    assert lock.acquire(blocking=False)
    lock.describe({"pid": 4242, "command": "serve"})
    try:
        refused([str(backup)], f"{live} is in use by `duckgraph serve` (pid 4242): stop it")
    finally:
        lock.release()
    hold = f"import duckdb, sys; c = duckdb.connect({str(live)!r}); print('open', flush=True); sys.stdin.read()"
    holder = subprocess.Popen([sys.executable, "-c", hold],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        refused([str(backup)], f"{live} is open in another process (a duckgraph command such as ingest")
    finally:
        holder.communicate("", timeout=30)
    assert "Alice" in table_contents(live)["nodes"][0]


# -- 3. a killed backup's leftovers ------------------------------------------------------------------------

#: Runs a backup and is killed just before the copy is renamed into place: its temporary copy is left.
KILLED_BACKUP = textwrap.dedent("""
    import os, signal, sys
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder

    kb = KnowledgeBase(DuckDBStore(sys.argv[1]), HashingEmbedder()).open()
    os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
    kb.backup(sys.argv[2])
""")


def test_a_killed_backup_leaves_a_copy_the_next_backup_removes(tmp_path: Path, db_path: Path, cli_env, capsys):
    make_file(db_path, ["Alice", "Bob"])
    target = tmp_path / "nightly.duckdb"
    done = subprocess.run([sys.executable, "-c", KILLED_BACKUP, str(db_path), str(target)],
                          env=child_env(tmp_path / "home"), cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".nightly.duckdb.")]
    assert len(left) == 1 and left[0].name.endswith(".partial") and left[0].stat().st_size > 0
    # One being written by a process that runs (here: one that sleeps) is never touched.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    live_partial = tmp_path / f".nightly.duckdb.{sleeper.pid}-0123456789ab.partial"
    live_partial.write_bytes(b"being written")
    try:
        assert main(["doctor", "--db", str(db_path), "--json"]) in (0, 1)
        warnings = json.loads(capsys.readouterr().out)["warnings"]
        assert any(f"temporary files left by a backup to {target} that was interrupted" in w and str(left[0]) in w
                   and str(live_partial) not in w for w in warnings), warnings

        assert main(["backup", "--db", str(db_path), str(target)]) == 0
        assert sorted(p.name for p in tmp_path.iterdir() if "nightly" in p.name) == [live_partial.name,
                                                                                     "nightly.duckdb"]
    finally:
        sleeper.kill()
        sleeper.wait()


def test_doctor_reports_a_log_left_without_its_file(tmp_path: Path, db_path: Path, cli_env, capsys):
    make_file(db_path, ["Alice"])
    crash_after_a_write(db_path, tmp_path / "home")
    db_path.rename(tmp_path / "moved.duckdb")  # the file moved away; its log stayed
    assert main(["doctor", "--db", str(db_path), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    assert any(f"{db_path}.wal is a write-ahead log without its file" in p for p in problems), problems
    assert not db_path.exists()  # doctor never creates the file


def test_a_log_that_cannot_be_replayed_onto_the_file_says_to_move_it_aside(tmp_path: Path, db_path: Path):
    """A new file's log (it creates the tables) left by a crash, then a copy put over the file by hand."""
    crash_after_a_write(db_path, tmp_path / "home")
    make_file(tmp_path / "backup.duckdb", ["Xavier"])
    shutil.copy(tmp_path / "backup.duckdb", db_path)
    with pytest.raises(StoreError, match=r"Failure while replaying WAL.*move kb\.duckdb\.wal aside .*"
                                         r"`duckgraph restore` does this"):
        DuckDBStore(db_path).open()


def test_a_damaged_file_says_how_to_restore_it(tmp_path: Path, db_path: Path):
    make_file(db_path, ["Alice"])
    data = db_path.read_bytes()
    db_path.write_bytes(data[:12_288] + b"\xff" * (len(data) - 12_288))
    with pytest.raises(StoreError, match=rf"Restore it from a backup with `duckgraph restore BACKUP --db {db_path}`"):
        KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()).open()


# -- 2. a failed write on the server's log -----------------------------------------------------------------


def test_a_failed_write_is_logged_once_and_eperm_is_not_writable(db_path: Path, caplog):
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("making the log immutable needs chattr and root")
    wal = db_path.with_name(db_path.name + ".wal")
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Alpha", type="Thing")], [])
        if subprocess.run(["chattr", "+i", str(wal)], capture_output=True, check=False).returncode != 0:
            pytest.skip("this file system has no immutable files")
        try:
            caplog.clear()
            with caplog.at_level(logging.WARNING), pytest.raises(StoreError) as caught:
                kb.add_knowledge_graph([NodeInput(name="Bravo", type="Thing")], [])
        finally:
            subprocess.run(["chattr", "-i", str(wal)], check=True)
        message = str(caught.value)
        assert message.startswith(f"could not write to {db_path}: not writable (")
        assert "Operation not permitted" in message and "Nothing of this change was saved" in message
        logged = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert [r.getMessage() for r in logged] == [message]
        kb.add_knowledge_graph([NodeInput(name="Charlie", type="Thing")], [])
        assert sorted(n.name for n in kb.store.list_nodes("default")) == ["Alpha", "Charlie"]


# -- 4. the lock message names duckgraph's own commands ----------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a command line is read from /proc")
def test_a_file_held_by_a_duckgraph_command_names_it(tmp_path: Path, db_path: Path):
    make_file(db_path, ["Alice"])
    # `import -` opens the file, then waits for its lines on standard input: a duckgraph command holding the file.
    command = subprocess.Popen([sys.executable, "-m", "duckgraph.core.cli", "import", "-", "--db", str(db_path)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=child_env(tmp_path / "home"), cwd=REPO_ROOT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _posix_locked(db_path):
            assert command.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(StoreError) as caught:
            DuckDBStore(db_path).open()
        assert str(caught.value) == (
            f"{db_path} is locked: duckgraph's own command `duckgraph import` (PID {command.pid}) is using it, and "
            "DuckDB lets only one process open a file for writing: wait for it to finish (or stop it), then try "
            "again.")
    finally:
        command.kill()
        command.wait()


# -- 5. what marks an entity as written by hand -----------------------------------------------------------


def test_observations_mark_an_entity_by_hand_only_without_sources(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="doc1", text="Zara Quinn works at Zenith Labs. " * 5)])
        kb.add_knowledge_graph([NodeInput(name="Zara Quinn", type="Person", source_ids=["doc1"],
                                          observations=["works at Zenith Labs"])], [])
        zara = next(n.id for n in kb.store.list_nodes("default") if n.name == "Zara Quinn")
        assert kb.store.written_by_hand("node", [zara]) == set()
        memory_server.add_observations(kb, [ObservationAddition(entityName="Zara Quinn", contents=["likes tea"])])
        assert kb.store.written_by_hand("node", [zara]) == {zara}
