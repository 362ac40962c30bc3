"""core/sharing/ on its own: the ownership lock, the socket protocol, hand-over and the in-flight rule.

Two FileShare objects in one process behave as two processes would (a flock belongs to an open file
description, not to a process). Where the owner has to die abruptly, it runs in a child process killed with
SIGKILL.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core import sharing
from duckgraph.core.sharing import FileShare, NoOwnerError, OwnerLostError, RemoteError, RunLocally
from duckgraph.core.sharing.lock import MAX_SOCKET_PATH_BYTES
from duckgraph.ports import InvalidInputError, NotFoundError

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")


def echo(method: str, params: dict[str, Any], progress) -> Any:
    if method == "echo":
        return {"method": method, "params": params, "pid": os.getpid()}
    if method == "progress":
        for step in range(3):
            progress(step + 1, 3, f"step {step + 1}")
        return "done"
    if method == "invalid":
        raise InvalidInputError("edges[0]: the target entity 'Nobody' does not exist")
    if method == "missing":
        raise NotFoundError("no entity named 'Nobody'")
    if method == "crash":
        raise KeyError("boom")
    raise InvalidInputError(f"unknown request {method!r}")


@pytest.fixture
def shares():
    made: list[FileShare] = []

    def make(db: Path, handler=echo, **kwargs: Any) -> FileShare:
        share = FileShare(db, handler, **kwargs)
        share.start()
        made.append(share)
        return share

    yield make
    for share in reversed(made):
        share.close(drain_seconds=1)


def wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def test_the_first_share_owns_the_file_and_the_second_forwards_to_it(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    owner = shares(db, info={"namespace": "default"})
    client = shares(db)
    assert (owner.role, client.role) == ("owner", "client")
    assert sharing.holder(db)["pid"] == os.getpid()
    assert sharing.holder(db)["namespace"] == "default"
    assert oct(sharing.socket_path(db).stat().st_mode & 0o777) == "0o600"

    assert client.call("echo", {"x": [1, "é", None]}, repeatable=True) == {
        "method": "echo", "params": {"x": [1, "é", None]}, "pid": os.getpid()}
    with pytest.raises(RunLocally):
        owner.call("echo", {}, repeatable=True)
    assert owner.status()["role"] == "owner" and owner.status()["client_pids"] == [os.getpid()]
    assert client.status() | {"owner_pid": os.getpid()} == client.status()
    # NaN travels as the bare token, as MCP clients send it: the owner sees the NaN and refuses it itself.
    result = client.call("echo", {"weight": float("nan")}, repeatable=True)
    assert result["params"]["weight"] != result["params"]["weight"]


def test_the_lock_file_names_the_command_the_owner_runs(tmp_path, shares, monkeypatch):
    """So that a command refused the file can say whether the web UI or an MCP client's server holds it."""
    from duckgraph.core.sharing import handover

    monkeypatch.setattr(handover, "_command", None)
    shares(tmp_path / "plain.duckdb")
    assert "command" not in sharing.holder(tmp_path / "plain.duckdb")
    sharing.set_command("ui")
    shares(tmp_path / "kb.duckdb")
    assert sharing.holder(tmp_path / "kb.duckdb")["command"] == "ui"


def test_errors_keep_their_class_and_message(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    shares(db)
    client = shares(db)
    with pytest.raises(InvalidInputError, match=r"^edges\[0\]: the target entity 'Nobody' does not exist$"):
        client.call("invalid", {}, repeatable=False)
    with pytest.raises(NotFoundError, match="^no entity named 'Nobody'$"):
        client.call("missing", {}, repeatable=True)
    with pytest.raises(RemoteError) as crashed:
        client.call("crash", {}, repeatable=True)
    assert crashed.value.kind == "KeyError"
    # The connection is still usable after errors.
    assert client.call("echo", {}, repeatable=True)["method"] == "echo"


def test_progress_comes_back_to_the_client(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    shares(db)
    client = shares(db)
    seen: list[tuple] = []
    assert client.call("progress", {}, repeatable=False, progress=lambda *a: seen.append(a)) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


def test_concurrent_calls_from_one_client(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    shares(db)
    client = shares(db)
    results: list[Any] = []

    def work(n: int) -> None:
        for i in range(20):
            results.append(client.call("echo", {"n": n, "i": i}, repeatable=n % 2 == 0)["params"])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted((r["n"], r["i"]) for r in results) == [(n, i) for n in range(8) for i in range(20)]


def test_no_call_goes_to_an_owner_that_serves_other_tools(tmp_path, shares, caplog):
    """Its tools would answer the calls that the client's own MCP client checks against the client's listing."""
    db = tmp_path / "kb.duckdb"
    ran: list[str] = []
    shares(db, lambda method, params, progress: ran.append(method), info={"tools": "aaaa"})
    same, other = shares(db, info={"tools": "aaaa"}), shares(db, info={"tools": "bbbb"})
    assert same.call("echo", {}, repeatable=True) is None and ran == ["echo"]
    for _ in range(2):
        with pytest.raises(sharing.OtherVersionError) as refused:
            other.call("echo", {}, repeatable=False)
    assert str(refused.value) == (
        f"the duckgraph server that owns {db} (pid {os.getpid()}, version 0.1.0) runs another duckgraph version, "
        "which serves other tools than this one (version 0.1.0; tools aaaa, here bbbb). No call is sent to it, since "
        "its answers may not fit the tools that a server of this version lists: stop that server (a duckgraph server "
        "of this version waiting on the file then takes it over), or run the same duckgraph version in every MCP "
        "client configuration and restart them")
    assert ran == ["echo"]
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [str(refused.value)]  # once


def test_no_call_goes_to_an_owner_of_an_older_protocol(tmp_path, shares, monkeypatch):
    """A duckgraph of protocol 1 does not say which tools it serves (and every one announced version 0.1.0): no
    client of this one sends it a call, nor a command its request."""
    from duckgraph.core.sharing import handover

    db = tmp_path / "kb.duckdb"
    ran: list[str] = []
    monkeypatch.setattr(handover, "PROTOCOL", 1)  # greets as an older duckgraph: protocol 1, no "tools"
    shares(db, lambda method, params, progress: ran.append(method), info={"namespace": "default"})
    monkeypatch.undo()
    client = shares(db, info={"tools": "aaaa"})
    older = "(pid {}, version 0.1.0) is an older duckgraph (sharing protocol 1; this one, version 0.1.0, speaks 2)"
    with pytest.raises(sharing.OtherVersionError, match=re.escape(older.format(os.getpid()))):
        client.call("echo", {}, repeatable=True)
    with pytest.raises(sharing.OtherVersionError, match=re.escape(older.format(os.getpid()))):
        sharing.call_owner(db, "status")
    assert ran == []


def test_a_normal_stop_hands_the_file_over(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    finalized: list[str] = []
    owner = FileShare(db, echo)
    owner.start()
    took_over = threading.Event()
    client = shares(db, on_takeover=took_over.set)
    assert client.call("echo", {}, repeatable=True)
    owner.close(finalize=lambda: finalized.append("closed"))
    assert finalized == ["closed"]
    assert took_over.wait(10)
    wait_for(lambda: client.is_owner)
    with pytest.raises(RunLocally):
        client.call("echo", {}, repeatable=False)
    assert sharing.holder(db)["pid"] == os.getpid()
    assert client.status()["role"] == "owner"


def test_a_stopping_owner_finishes_running_calls_and_refuses_new_ones(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    release = threading.Event()
    running = threading.Event()

    def slow(method, params, progress):
        running.set()
        release.wait(10)
        return "finished"

    owner = FileShare(db, slow)
    owner.start()
    client = shares(db)
    outcome: list[Any] = []
    caller = threading.Thread(target=lambda: outcome.append(client.call("write", {}, repeatable=False)))
    caller.start()
    assert running.wait(10)
    closer = threading.Thread(target=owner.close)
    closer.start()
    time.sleep(0.2)
    assert closer.is_alive(), "the owner must wait for the call it is running"
    release.set()
    closer.join(10)
    caller.join(10)
    assert outcome == ["finished"]
    wait_for(lambda: client.is_owner)


@pytest.fixture
def short_runtime_dir():
    """A runtime folder with a path short enough for sockets (pytest's tmp_path is too long for some)."""
    folder = Path(tempfile.mkdtemp(prefix="dg-run-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_socket_path_falls_back_to_a_runtime_folder_for_long_paths(tmp_path, shares, monkeypatch, short_runtime_dir):
    runtime = short_runtime_dir
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    db = deep / "knowledge.duckdb"
    path = sharing.socket_path(db)
    assert path.parent == runtime / "duckgraph"
    assert len(os.fsencode(path)) <= MAX_SOCKET_PATH_BYTES
    # A runtime folder whose own path is too long is passed over for one in the temporary folder.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("r" * 80)))
    assert len(os.fsencode(sharing.socket_path(db))) <= MAX_SOCKET_PATH_BYTES
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert sharing.socket_path(deep / ".." / deep.name / "knowledge.duckdb") == path  # one name per file
    short = tmp_path / "kb.duckdb"
    assert sharing.socket_path(short) == tmp_path / "kb.duckdb.sock"
    shares(db)
    assert shares(db).call("echo", {}, repeatable=True)["method"] == "echo"
    assert path.exists() and oct(path.parent.stat().st_mode & 0o777) == "0o700"


def test_holder_and_call_owner(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    assert sharing.holder(db) is None
    with pytest.raises(NoOwnerError, match="no duckgraph server holds"):
        sharing.call_owner(db, "echo")
    owner = shares(db)
    assert sharing.call_owner(db, "echo", {"a": 1})["params"] == {"a": 1}
    with pytest.raises(InvalidInputError, match="unknown request"):
        sharing.call_owner(db, "nope")
    owner.close()
    assert sharing.holder(db) is None
    assert not sharing.socket_path(db).exists()


# -- an owner killed while calls are in flight -------------------------------------------------------------

OWNER_SCRIPT = textwrap.dedent("""
    import sys, time, threading
    from duckgraph.core.sharing import FileShare

    def handler(method, params, progress):
        print("running", params["n"], flush=True)
        time.sleep(60)  # killed before it answers

    FileShare(sys.argv[1], handler).start()
    print("owner", flush=True)
    sys.stdin.read()
""")


def test_a_killed_owner_fails_the_write_it_was_running_and_nothing_else(tmp_path, shares):
    """The write that was running may or may not have been applied: OwnerLostError. The write waiting for its
    turn never ran and the read can run twice: both run again, here (this process took the file over)."""
    db = tmp_path / "kb.duckdb"
    child = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, str(db)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "owner"
        client = shares(db)
        assert client.role == "client"
        outcomes: dict[str, Any] = {}

        def call(label: str, n: int, repeatable: bool) -> None:
            try:
                outcomes[label] = client.call("write", {"n": n}, repeatable=repeatable)
            except BaseException as exc:  # noqa: BLE001
                outcomes[label] = exc

        first = threading.Thread(target=call, args=("running write", 1, False))
        first.start()
        assert child.stdout.readline().split() == ["running", "1"]
        others = [threading.Thread(target=call, args=("queued write", 2, False)),
                  threading.Thread(target=call, args=("read", 3, True))]
        for thread in others:
            thread.start()
        assert child.stdout.readline().split() == ["running", "3"]  # the read runs beside the write
        time.sleep(0.2)  # the queued write has reached the owner and waits for its turn
        os.kill(child.pid, signal.SIGKILL)
        for thread in [first, *others]:
            thread.join(20)
    finally:
        child.kill()
        child.wait()
    assert isinstance(outcomes["running write"], OwnerLostError), outcomes
    assert "unknown whether the change was stored" in str(outcomes["running write"])
    assert isinstance(outcomes["queued write"], RunLocally), outcomes
    assert isinstance(outcomes["read"], RunLocally), outcomes
    assert client.is_owner
    assert json.loads(sharing.lock_path(db).read_text())["pid"] == os.getpid()


# -- files that are not this user's own (another user posing as the owner: tests/e2e/test_impostor_owner.py) --

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
NOBODY = 65534


def test_a_lock_file_others_can_open_or_a_symlink_is_refused_naming_it(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    lock = sharing.lock_path(db)
    lock.touch()
    lock.chmod(0o644)
    with pytest.raises(sharing.ForeignFileError,
                       match=rf"{lock} \(the lock file\) can be opened by other users \(mode 0644\).*chmod 600 {lock}"):
        FileShare(db, echo).start()
    lock.unlink()
    (tmp_path / "elsewhere").write_text("a file of the user's that must never be truncated")
    lock.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(sharing.ForeignFileError, match=rf"{lock} \(the lock file\) is a symbolic link"):
        FileShare(db, echo).start()
    assert (tmp_path / "elsewhere").read_text() == "a file of the user's that must never be truncated"
    lock.unlink()
    assert shares(db).role == "owner"  # once it is gone, all is as before


def test_a_socket_others_can_write_is_refused_before_anything_is_sent(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    calls: list[str] = []
    shares(db, lambda method, params, progress: calls.append(method) or "ran")
    client = shares(db)
    sock = sharing.socket_path(db)
    sock.chmod(0o666)
    with pytest.raises(sharing.ForeignFileError,
                       match=rf"{sock} \(the owner's socket\) can be opened by other users \(mode 0666\)"):
        client.call("echo", {}, repeatable=True, wait=2)
    with pytest.raises(sharing.ForeignFileError, match="the owner's socket"):
        sharing.call_owner(db, "status", wait=2)
    assert calls == []
    sock.chmod(0o600)
    assert client.call("echo", {}, repeatable=True) == "ran"


@AS_ROOT
def test_lock_and_socket_files_of_another_user_are_refused_naming_their_owner(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    lock = sharing.lock_path(db)
    lock.touch(mode=0o600)
    os.chown(lock, NOBODY, NOBODY)
    # No process holds it (held, it may be someone posing as the owner: test_sharing_lock_file_and_socket.py).
    with pytest.raises(sharing.ForeignFileError, match=rf"{lock} \(the lock file\) belongs to nobody \(uid 65534\),"
                                                       r" not to you, root \(uid 0\), and no process holds it"):
        FileShare(db, echo).start()
    assert lock.stat().st_uid == NOBODY and lock.read_bytes() == b""  # left as it was
    lock.unlink()

    # A socket another user left where the owner's goes: the new owner says so (it cannot remove it in /tmp).
    sock = sharing.socket_path(db)
    sock.touch()
    os.chown(sock, NOBODY, NOBODY)
    with pytest.raises(sharing.ForeignFileError, match=rf"{sock} \(the owner's socket\) belongs to nobody"):
        FileShare(db, echo).start()
    assert sharing.holder(db) is None  # the lock was released again
    sock.unlink()
    assert shares(db).role == "owner"


def test_only_runtime_folders_must_be_private(tmp_path, monkeypatch) -> None:
    from duckgraph.core.sharing.lock import private_folder
    from duckgraph.ports import DuckgraphError

    shared = tmp_path / "duckgraph-notes"  # a database's folder that merely starts with the name
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    private_folder(shared)  # not refused: where a user keeps a database is theirs to decide
    runtime = tmp_path / "run"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    (runtime / "duckgraph").mkdir(parents=True)
    (runtime / "duckgraph").chmod(0o777)
    with pytest.raises(DuckgraphError, match="others can write"):
        private_folder(runtime / "duckgraph")
