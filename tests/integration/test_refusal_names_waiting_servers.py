"""`duckgraph compact` and `duckgraph restore` refused while duckgraph servers hold the file name every one of them:
the owner, and the servers started on the same file after it, which wait to take it over (core/sharing/) and would
hold it next. Real `duckgraph serve` processes on a real DuckDB file; the commands run as a user runs them."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.files.backup import compact
from duckgraph.core.sharing import lock as lock_module
from duckgraph.core.sharing.lock import LockFile, holder, lock_path, supported, waiting
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError
from tests.fakes import HashingEmbedder
from tests.integration.test_backup import fill
from tests.integration.test_compact import CLI, command_env, duckgraph, files

pytestmark = pytest.mark.skipif(not supported(), reason="needs flock and Unix sockets")


def serve(db: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A `duckgraph serve` whose host never talks to it (stdin open): it owns the file, or waits to take it over."""
    with log.open("a", encoding="utf-8") as errlog:
        return subprocess.Popen([*CLI, "serve", "--db", str(db)], env=env, cwd=db.parent, stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=errlog)


def until(predicate, what: str, logs: Path, timeout: float = 300.0):
    """`predicate()` once true (a server starts in seconds, but in minutes on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            said = {log.name: log.read_text(encoding="utf-8") for log in sorted(logs.glob("*.log"))}
            raise AssertionError(f"timed out waiting for {what}; the servers logged {said}")
        time.sleep(0.1)
    return value


def owner(db: Path) -> int | None:
    return (holder(db) or {}).get("pid")


def stop(server: subprocess.Popen) -> None:
    """As its MCP host stops it: stdin closed (it hands the file over, if it owns it)."""
    if server.poll() is None:
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_owner_and_every_server_waiting_to_take_the_file_over_are_named(tmp_path: Path):
    env = {**command_env(tmp_path), "DUCKGRAPH_LOG_LEVEL": "INFO"}
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
        kb.backup(tmp_path / "backup.duckdb")
    logs = tmp_path / "logs"
    logs.mkdir()

    def refused(*args: str) -> str:
        before = files(tmp_path)
        done = duckgraph(*args, "--db", str(db), env=env, cwd=tmp_path)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert files(tmp_path) == before  # nothing was changed, nothing was kept aside
        return done.stderr

    first = serve(db, env, logs / "a.log")
    servers = [first]
    try:
        until(lambda: owner(db) == first.pid and first.poll() is None, "the first server to own the file", logs)
        servers += [serve(db, env, logs / "b.log"), serve(db, env, logs / "c.log")]
        second, third = servers[1:]
        until(lambda: sorted(waiting(db) or []) == sorted([second.pid, third.pid]),
              "the other two servers to wait for the file", logs)

        for command, action in ((["compact"], "compact"), (["restore", str(tmp_path / "backup.duckdb")], "restore")):
            said = refused(*command)
            assert (f"{db} is in use by `duckgraph serve` (pid {first.pid}), and 2 more duckgraph servers started on "
                    "it wait to take it over when that one stops: ") in said, said
            assert f"`duckgraph serve` (pid {second.pid})" in said and f"`duckgraph serve` (pid {third.pid})" in said
            assert (f"Stop all of them (and the MCP clients that start them), then {action}; nothing was changed"
                    in said), said

        # Stopping the owner alone hands the file to one of the others, which the next refusal names, with the
        # one still waiting: the first refusal had named both.
        stop(first)
        next_owner = until(lambda: owner(db) in (second.pid, third.pid) and owner(db), "a server to take over",
                           logs)
        still = third.pid if next_owner == second.pid else second.pid
        until(lambda: waiting(db) == [still], "the last server to wait", logs)
        said = refused("compact")
        assert (f"{db} is in use by `duckgraph serve` (pid {next_owner}), and 1 more duckgraph server started on it "
                f"waits to take it over when that one stops: `duckgraph serve` (pid {still}). Stop all of them") in said

        # The last one alone: named as before, with nothing more.
        stop(next(s for s in servers if s.pid == next_owner))
        until(lambda: owner(db) == still and waiting(db) == [], "the last server to own the file", logs)
        said = refused("compact")
        assert (f"{db} is in use by `duckgraph serve` (pid {still}): stop it (and the MCP clients that start it), "
                "then compact; nothing was changed") in said, said
    finally:
        for server in servers:
            stop(server)

    # Every server named was stopped: the file is free, and the compact works.
    done = duckgraph("compact", "--db", str(db), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_system_that_cannot_list_the_waiting_servers_says_they_may_wait(tmp_path: Path, monkeypatch):
    """Without /proc/locks (macOS), who waits for the lock cannot be known: the refusal says that servers started on
    the file may wait to take it over, so that the user stops those too."""
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
    before = files(tmp_path)
    held = LockFile(lock_path(db))
    assert held.acquire(blocking=False)
    held.describe({"pid": 4242, "command": "serve"})
    monkeypatch.setattr(lock_module, "PROC_LOCKS", tmp_path / "no-such-list")
    try:
        assert waiting(db) is None
        with pytest.raises(StoreError) as refused:
            compact(db, lambda path: KnowledgeBase(DuckDBStore(path), HashingEmbedder()))
    finally:
        held.release()
    assert str(refused.value) == (
        f"{db} is in use by `duckgraph serve` (pid 4242): stop it (and the MCP clients that start it), then compact; "
        "nothing was changed. Any other duckgraph server started on this file waits to take it over when that one "
        "stops (this system cannot list them): stop those too")
    assert files(tmp_path) == before
