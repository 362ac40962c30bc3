"""A running store's writes reach the file itself once they pause, not only its write-ahead log. DuckDB folds the
log into the file at 256 MB of it (CHECKPOINT_THRESHOLD), which a server of an agent's calls reaches after hours,
so the store checkpoints once no write has committed for a few seconds (settings.QUIET_CHECKPOINT_SECONDS,
shortened here): a copy of the `.duckdb` alone (a sync or backup tool's) then holds what was written. Not on a file
moved away while it was open; a failed checkpoint is logged and fails nothing; the timer stops at close and never
keeps a process alive. Writes that never pause are folded after a while all the same. And `duckgraph doctor` gives
the size of a log that holds writes not yet in the file.

Real parts: DuckDB files in a temporary folder, the store and the knowledge base with the hashing embedder of
tests/fakes.py; `duckgraph doctor` through the command line's `main` with Ollama's stand-in, as in
test_schema_upgrade_and_space.py. The waits poll with a generous deadline: nothing here measures a speed."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore, settings
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION
from tests.fakes import HashingEmbedder
from tests.fresh_interpreter import run_python
from tests.integration.test_schema_upgrade_and_space import doctor, ollama, written  # noqa: F401 - a fixture

#: How long a test waits for the timer's checkpoint (it comes after QUIET seconds: a loaded machine may be slow).
DEADLINE_SECONDS = 60
QUIET = 0.2


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "QUIET_CHECKPOINT_SECONDS", QUIET)


def node(name: str) -> NodeInput:
    return NodeInput(name=name, type="Person")


def wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not after {DEADLINE_SECONDS} s"
        time.sleep(0.05)


def names_in_copy(path: Path) -> set[str]:
    with duckdb.connect(str(path), read_only=True) as con:
        return {row[0] for row in con.execute("SELECT name FROM nodes").fetchall()}


def test_writes_reach_the_file_itself_once_they_pause(quiet, tmp_path: Path) -> None:
    path = tmp_path / "notes" / "kb.duckdb"
    copy = tmp_path / "backup" / "kb.duckdb"
    copy.parent.mkdir()
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([node("Ada Lovelace"), node("Charles Babbage")], [])
        wait_until(lambda: not wal(path).exists(), "the log folded into the file")  # DuckDB deletes it then
        shutil.copyfile(path, copy)  # the .duckdb alone, while the store has it open, as a sync tool copies it
        kb.add_knowledge_graph([node("Grace Hopper")], [])  # the store goes on writing, and folds again
        wait_until(lambda: not wal(path).exists(), "the next write folded into the file")
        assert {n.name for n in kb.store.list_nodes(kb.namespace)} == {"Ada Lovelace", "Charles Babbage",
                                                                        "Grace Hopper"}
    assert names_in_copy(copy) == {"Ada Lovelace", "Charles Babbage"}


def test_writes_that_never_pause_are_folded_at_the_latest_after_a_while(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Several agents on one server may never pause for long: their writes are folded CHECKPOINT_LATEST_SECONDS
    after the first one the file lacks (shortened here; the pause it would wait for, made an hour, never comes)."""
    monkeypatch.setattr(settings, "QUIET_CHECKPOINT_SECONDS", 3600.0)
    monkeypatch.setattr(settings, "CHECKPOINT_LATEST_SECONDS", QUIET)
    path = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([node("Ada Lovelace")], [])
        wait_until(lambda: not wal(path).exists(), "the log folded into the file")
        copy = tmp_path / "copy.duckdb"
        shutil.copyfile(path, copy)
    assert names_in_copy(copy) == {"Ada Lovelace"}


def test_a_file_moved_away_while_open_is_not_checkpointed(quiet, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """DuckDB's checkpoint deletes the log at the path by name (see test_memory_file_moved.py): the timer leaves a
    file that is no longer at its path, and its log, alone, and says so."""
    path = tmp_path / "notes" / "kb.duckdb"
    moved = tmp_path / "elsewhere"
    kb = KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()
    try:
        with kb.store._lock:  # the timer cannot checkpoint between the write and the move: it waits for the lock
            kb.add_knowledge_graph([node("Before")], [])
            path.parent.rename(moved)
        wait_until(lambda: any("was not folded into the file" in r.getMessage() for r in caplog.records),
                   "the timer's warning")
        warning = next(r for r in caplog.records if "was not folded into the file" in r.getMessage())
        assert warning.levelname == "WARNING"
        assert warning.getMessage() == (f"the write-ahead log was not folded into the file: the memory file {path} "
                                        f"was moved to {moved / path.name} while this server ran; nothing was "
                                        f"written. Everything written before is in {moved / path.name}: move it "
                                        f"back to {path} (then writes work again), or restart the server with --db "
                                        f"{moved / path.name} (DUCKGRAPH_DB)")
        assert wal(moved / path.name).exists()  # not checkpointed: the write is in the moved file's log
    finally:
        kb.close()
    assert not path.parent.exists()
    with KnowledgeBase(DuckDBStore(moved / path.name), HashingEmbedder()) as kb:
        assert [n.name for n in kb.store.list_nodes(kb.namespace)] == ["Before"]


def test_a_failed_checkpoint_is_logged_and_fails_nothing(tmp_path: Path) -> None:
    """A real EFBIG in a subprocess (RLIMIT_FSIZE, as in test_hostile_environment.py): the commit's few bytes of log
    fit under the limit, the checkpoint's new blocks do not. DuckDB then gives up on the database: the store opens
    the file again, and reads and writes go on; what was committed is in the log."""
    path = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([node(f"Person {n}") for n in range(50)], [])
    report = json.loads(run_python(f"""
        import json, logging, os, resource, signal, sys, time
        from duckgraph.core.domain.knowledge_base import KnowledgeBase
        from duckgraph.core.domain.model import NodeInput
        from duckgraph.plugins.duckdb import DuckDBStore, settings
        from tests.fakes import HashingEmbedder

        class Kept(logging.Handler):
            def __init__(self):
                super().__init__(logging.WARNING)
                self.messages = []

            def emit(self, record):
                self.messages.append(record.getMessage())

        kept = Kept()
        logging.getLogger("duckgraph").addHandler(kept)
        settings.QUIET_CHECKPOINT_SECONDS = {QUIET}
        path = sys.argv[1]
        kb = KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 64_000, resource.RLIM_INFINITY))
        kb.add_knowledge_graph([NodeInput(name="Written before the pause", type="Person")], [])
        deadline = time.monotonic() + {DEADLINE_SECONDS}
        while not any("reopened" in m for m in kept.messages) and time.monotonic() < deadline:
            time.sleep(0.05)
        report = {{"warnings": list(kept.messages), "nodes_after_the_pause": kb.stats()["nodes"]}}
        kb.add_knowledge_graph([NodeInput(name="Written after it", type="Person")], [])
        report["nodes_after_a_write"] = kb.stats()["nodes"]
        kb.close()  # its checkpoint fails too: logged, the log keeps the data
        print(json.dumps(report))
    """, str(path)))
    failed = next((w for w in report["warnings"] if w.startswith("checkpoint after writes paused failed (")), None)
    assert failed is not None, report["warnings"]
    assert "File too large" in failed and failed.endswith(f"); what was written stays in {path}.wal")
    assert f"DuckDB gave up on {path} after the failed checkpoint; duckgraph reopened the file" in report["warnings"]
    assert report["nodes_after_the_pause"] == 51 and report["nodes_after_a_write"] == 52
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:  # without the limit: the log is folded now
        assert kb.stats()["nodes"] == 52
    assert not wal(path).exists()


def test_the_timer_stops_at_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "QUIET_CHECKPOINT_SECONDS", 3600.0)
    kb = KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), HashingEmbedder()).open()
    kb.add_knowledge_graph([node("Ada Lovelace")], [])
    timer = kb.store._quiet_timer
    assert timer is not None and timer.is_alive() and timer.daemon
    kb.close()
    timer.join(DEADLINE_SECONDS)
    assert not timer.is_alive() and kb.store._quiet_timer is None


def test_a_pending_checkpoint_does_not_keep_a_process_alive(tmp_path: Path) -> None:
    """A process that ends without closing its store (a script, a crash in it) exits at once: its log keeps the
    writes, folded into the file by the next open. (run_python fails after 120 s; the timer here waits an hour.)"""
    path = tmp_path / "kb.duckdb"
    said = run_python("""
        import sys
        from duckgraph.core.domain.knowledge_base import KnowledgeBase
        from duckgraph.core.domain.model import NodeInput
        from duckgraph.plugins.duckdb import DuckDBStore, settings
        from tests.fakes import HashingEmbedder

        settings.QUIET_CHECKPOINT_SECONDS = 3600.0
        kb = KnowledgeBase(DuckDBStore(sys.argv[1]), HashingEmbedder()).open()
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        print("pending" if kb.store._quiet_timer.is_alive() else "no timer")
    """, str(path))
    assert said == "pending"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        assert [n.name for n in kb.store.list_nodes(kb.namespace)] == ["Ada Lovelace"]


def test_doctor_gives_the_size_of_the_log_that_holds_writes_not_yet_in_the_file(ollama, tmp_path: Path,  # noqa: F811
                                                                                   capsys) -> None:
    """The log a writer killed before its writes paused left (a running server's, before its checkpoint, reads
    the same way through `call_owner`): `check database` says how much of the memory is only in it."""
    db = tmp_path / "kb.duckdb"
    written(db, ollama)
    run_python("""
        import os, sys
        from duckgraph.core.domain.knowledge_base import KnowledgeBase
        from duckgraph.core.domain.model import NodeInput
        from duckgraph.plugins.duckdb import DuckDBStore
        from duckgraph.plugins.ollama import OllamaEmbedder

        kb = KnowledgeBase(DuckDBStore(sys.argv[1]), OllamaEmbedder(base_url=sys.argv[2])).open()
        kb.add_knowledge_graph([NodeInput(name=f"Person {n}", type="Person") for n in range(200)], [])
        os._exit(0)  # killed: no close, no checkpoint
    """, str(db), ollama.base_url)
    assert wal(db).stat().st_size > 0
    code, report = doctor(capsys, db)
    assert code == 0, report
    space = report["store"]["space"]
    assert space["wal_bytes"] > 0
    detail = next(c["detail"] for c in report["checks"] if c["check"] == "database")
    assert detail == (f"{db} read (schema version {SCHEMA_VERSION}; {space['bytes'] / 2**20:.1f} MiB, "
                      f"{space['free_blocks']} of {space['total_blocks']} blocks free "
                      f"({space['free_blocks'] / space['total_blocks']:.0%}); {space['wal_bytes'] / 2**20:.1f} MiB "
                      "of writes in its write-ahead log (.wal), not yet in the file)")
