"""core/sharing/lock.py and handover.py: where a client finds the owner's socket, and what a lock file that no server
can use says.

- The socket of a database whose path is too long for AF_UNIX lies in a runtime folder that each process picks from
  its own environment (XDG_RUNTIME_DIR, TMPDIR). The owner writes where it listens into the lock file, and clients
  connect there: two hosts whose environments differ share the file (the servers of two real hosts:
  tests/e2e/test_shared_file_environments.py).
- A lock file of another user's: held or not by a process (read from /proc/locks), with what to do.
- A lock file this user cannot create (a folder it cannot write): one clear error for every caller.
- As root on another user's memory: the lock file and socket made for that user, and theirs used.
- A stopping owner removes only the socket it made, not a newer owner's at the same path.

Two FileShare objects in one process behave as two processes would (a flock belongs to an open file description).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core import sharing
from duckgraph.core.sharing import FileShare, NoOwnerError
from duckgraph.core.sharing.lock import MAX_SOCKET_PATH_BYTES, LockFile, LockFileError

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

NOBODY = 65534
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def echo(method: str, params: dict[str, Any], progress) -> Any:
    return {"method": method, "params": params, "pid": os.getpid()}


@pytest.fixture
def shares():
    made: list[FileShare] = []

    def make(db: Path, handler=echo) -> FileShare:
        share = FileShare(db, handler)
        share.start()
        made.append(share)
        return share

    yield make
    for share in reversed(made):
        share.close(drain_seconds=1)


@pytest.fixture
def short_folders() -> Iterator[tuple[Path, Path]]:
    """Two runtime folders with short paths (pytest's tmp_path may be too long for a socket path in it)."""
    folders = (Path(tempfile.mkdtemp(prefix="dg-a-", dir="/tmp")), Path(tempfile.mkdtemp(prefix="dg-b-", dir="/tmp")))
    yield folders
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def long_db(tmp_path: Path) -> Path:
    folder = tmp_path / ("a-rather-long-folder-name-for-notes/" * 3)
    folder.mkdir(parents=True)
    db = folder / "memory.duckdb"
    assert len(os.fsencode(db.with_name(db.name + ".sock"))) > MAX_SOCKET_PATH_BYTES
    return db


def as_host(monkeypatch: pytest.MonkeyPatch, runtime: Path | None, temp: Path) -> None:
    """This process's environment as one host's: its XDG_RUNTIME_DIR (None: unset, as under cron or ssh) and TMPDIR."""
    if runtime is None:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    else:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # what gettempdir() returns from now on


def describe(db: Path, **changes: Any) -> None:
    """Rewrite the description in the lock file of `db` as its owner (this process) holds it."""
    path = sharing.lock_path(db)
    info = {**json.loads(path.read_text()), **changes}
    info = {key: value for key, value in info.items() if value is not None}
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
    finally:
        os.close(fd)


# -- where the owner listens -------------------------------------------------------------------------------


def test_a_client_whose_environment_differs_connects_to_the_socket_the_owner_announced(
        tmp_path, shares, monkeypatch, short_folders):
    db = long_db(tmp_path)
    runtime, temp = short_folders
    as_host(monkeypatch, runtime, temp)  # host A: XDG_RUNTIME_DIR set
    owner = shares(db)
    announced = runtime / "duckgraph" / sharing.socket_path(db).name
    assert owner.is_owner and sharing.socket_path(db) == announced and announced.is_socket()
    assert json.loads(sharing.lock_path(db).read_text())["socket"] == str(announced)

    as_host(monkeypatch, None, temp)  # host B: no XDG_RUNTIME_DIR, so it would look in TMPDIR/duckgraph-UID
    computed = sharing.socket_path(db)
    assert computed == temp / f"duckgraph-{os.getuid()}" / announced.name != announced
    client = shares(db)
    assert client.role == "client"
    assert client.call("echo", {"n": 1}, repeatable=True, wait=5) == {"method": "echo", "params": {"n": 1},
                                                                       "pid": os.getpid()}
    assert client.status()["socket"] == str(announced)
    assert sharing.call_owner(db, "echo", {"n": 2}, wait=5)["params"] == {"n": 2}  # doctor's and backup's way
    assert not computed.exists()

    # An owner of an older duckgraph says nothing of where it listens: the error says so, not that it is stuck.
    describe(db, socket=None, version="0.0.9")
    with pytest.raises(NoOwnerError) as caught:
        shares(db).call("echo", {}, repeatable=True, wait=1)
    assert str(caught.value) == (
        f"{db} is held by duckgraph pid {os.getpid()}, which did not answer on {computed} within 1 s. It is a "
        "duckgraph of another version (version 0.0.9), which does not say where it listens, and may listen in another "
        "folder (its XDG_RUNTIME_DIR or TMPDIR): run the same duckgraph version in every MCP host's configuration, or "
        "restart that server")


def test_an_owner_that_announces_no_socket_is_looked_for_where_this_process_would_listen(tmp_path, shares):
    """An owner of an older duckgraph writes no socket path: the client computes it, as before."""
    db = tmp_path / "kb.duckdb"
    shares(db)
    describe(db, socket=None)
    assert "socket" not in json.loads(sharing.lock_path(db).read_text())
    assert shares(db).call("echo", {}, repeatable=True, wait=5)["method"] == "echo"


def test_the_socket_the_lock_file_names_is_checked_as_the_owners_socket(tmp_path, shares):
    """The announced path gets the checks a socket always gets: a socket others can open is refused before anything
    is sent to it, and a path with no socket says where the owner announced it instead of advising to stop it."""
    db, other = tmp_path / "kb.duckdb", tmp_path / "other.duckdb"
    calls: list[str] = []
    shares(db, lambda method, params, progress: calls.append(method) or "ran")
    client = shares(db)
    elsewhere = shares(other, lambda method, params, progress: calls.append("elsewhere") or "wrong owner")
    sock = sharing.socket_path(other)
    sock.chmod(0o666)
    describe(db, socket=str(sock))
    with pytest.raises(sharing.ForeignFileError,
                       match=rf"{sock} \(the owner's socket\) can be opened by other users \(mode 0666\)"):
        client.call("echo", {}, repeatable=True, wait=2)
    assert calls == [] and elsewhere.is_owner

    missing = tmp_path / "nowhere" / "owner.sock"
    describe(db, socket=str(missing))
    with pytest.raises(NoOwnerError) as caught:
        client.call("echo", {}, repeatable=True, wait=1)
    message = str(caught.value)
    assert f"is held by duckgraph pid {os.getpid()}, which announced its socket at {missing}, but this process " \
           "sees no such file" in message, message
    assert "If that process is stuck" not in message
    assert calls == []


def test_a_lock_file_without_a_holder_names_no_socket(tmp_path, shares):
    """An owner killed with SIGKILL leaves its description: no process holds the lock, so its socket is no one's."""
    from duckgraph.core.sharing.lock import announced_socket

    db = tmp_path / "kb.duckdb"
    assert announced_socket(db) is None
    owner = shares(db)
    assert announced_socket(db) == sharing.socket_path(db)
    stale = sharing.lock_path(db).read_bytes()
    owner.close()
    sharing.lock_path(db).write_bytes(stale)  # as a killed owner leaves it
    assert announced_socket(db) is None


# -- a lock file of another user's ---------------------------------------------------------------------------


@pytest.fixture
def nobodys_lock(tmp_path: Path) -> tuple[Path, Path]:
    """A lock file of user nobody's, mode 0600, that no process holds (as one run of a server as root leaves
    its lock file to the user: here the roles are swapped, since the tests run as root)."""
    db = tmp_path / "kb.duckdb"
    lock = sharing.lock_path(db)
    lock.touch(mode=0o600)
    os.chown(lock, NOBODY, NOBODY)
    return db, lock


@AS_ROOT
def test_another_users_lock_file_that_no_process_holds_says_so_and_how_to_delete_it(nobodys_lock, shares):
    db, lock = nobodys_lock
    with pytest.raises(sharing.ForeignFileError) as caught:
        FileShare(db, echo).start()
    message = str(caught.value)
    assert message == (
        f"{lock} (the lock file) belongs to nobody (uid 65534), not to you, root (uid 0), and no process holds it: a "
        "duckgraph server or command run as that user (with sudo, say) left it, and duckgraph uses no lock file of "
        f"another user's. You can delete it, as you may write to its folder: `rm {lock}`; duckgraph then makes a new "
        "one of yours")
    assert sharing.lock_file_problem(db) == message  # what doctor reports
    assert lock.stat().st_uid == NOBODY and lock.read_bytes() == b""  # left as it was
    subprocess.run(message.split("`")[1], shell=True, check=True)  # the command given, as the user would run it
    assert shares(db).role == "owner"
    assert sharing.lock_file_problem(db) is None


@AS_ROOT
def test_another_users_lock_file_that_a_process_holds_may_be_someone_posing_as_the_owner(nobodys_lock):
    db, lock = nobodys_lock
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.flock(fd, "
         "fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(sharing.ForeignFileError) as caught:
            FileShare(db, echo).start()
    finally:
        holder.kill()
        holder.wait()
    message = str(caught.value)
    assert (f"{lock} (the lock file) belongs to nobody (uid 65534), not to you, root (uid 0), and process "
            f"{holder.pid} holds it: another user may be posing as the duckgraph server of this database, so nothing "
            "was sent to it. Have that user or an administrator remove it") in message, message
    assert "rm " not in message


# -- a lock file this user cannot create ---------------------------------------------------------------------


@pytest.fixture
def immutable_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody, root included, can create a file in (chattr +i): root passes every permission check."""
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("an immutable folder needs chattr and root")
    folder = tmp_path / "immutable"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False).returncode != 0:
        pytest.skip("this file system has no immutable files")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_lock_file_that_cannot_be_created_is_one_clear_error(immutable_folder):
    lock = sharing.lock_path(immutable_folder / "kb.duckdb")
    with pytest.raises(LockFileError) as caught:
        LockFile(lock).acquire(blocking=False)
    assert str(caught.value) == (
        f"cannot create the lock file {lock}: its folder {immutable_folder} is not writable by this user, root (uid "
        "0). duckgraph keeps kb.duckdb.lock beside the database to know which process uses it: make the folder "
        "writable by this user, or keep the database in a folder this user can write to")
    assert not lock.exists()


def test_a_lock_file_of_ones_own_that_cannot_be_opened_is_a_problem_with_the_fix(tmp_path, shares):
    db = tmp_path / "kb.duckdb"
    lock = sharing.lock_path(db)
    assert sharing.lock_file_problem(db) is None  # none yet: the first server makes it
    lock.touch(mode=0o600)
    assert sharing.lock_file_problem(db) is None
    lock.chmod(0o644)
    assert sharing.lock_file_problem(db) == (f"{lock} (the lock file) can be opened by other users (mode 0644), who "
                                             f"could take the database over: run `chmod 600 {lock}`")
    lock.chmod(0o600)
    with open(lock, "w") as held:  # a server holding it is no problem
        fcntl.flock(held, fcntl.LOCK_EX)
        assert sharing.lock_file_problem(db) is None


# -- as root, on another user's memory ---------------------------------------------------------------------------


@AS_ROOT
def test_as_root_on_another_users_memory_the_lock_file_and_socket_are_that_users(tmp_path, shares):
    """`sudo duckgraph compact`, a root cron job: files of root's beside the memory would keep its owner's servers
    from ever taking the lock. Root's own servers on it still share it between them."""
    db = tmp_path / "kb.duckdb"
    db.touch(mode=0o600)
    os.chown(db, NOBODY, NOBODY + 1)
    owner = shares(db)
    lock, sock = sharing.lock_path(db), sharing.socket_path(db)
    for made in (lock, sock):
        info = made.lstat()
        assert (info.st_uid, info.st_gid, info.st_mode & 0o777) == (NOBODY, NOBODY + 1, 0o600), made
    assert owner.is_owner and sharing.lock_file_problem(db) is None  # what root's doctor reports: nothing

    client = shares(db)  # accepts nobody's lock file and socket, and root's process on it
    assert client.role == "client" and client.call("echo", {}, repeatable=True, wait=5)["pid"] == os.getpid()
    assert sharing.call_owner(db, "echo", wait=5)["method"] == "echo"
    owner.close(drain_seconds=1)
    deadline = time.monotonic() + 10
    while not client.is_owner and time.monotonic() < deadline:
        time.sleep(0.02)
    assert client.is_owner and sock.lstat().st_uid == NOBODY and lock.stat().st_uid == NOBODY


@AS_ROOT
def test_as_root_the_lock_file_of_the_memorys_owner_is_used_not_refused(tmp_path, shares):
    """The lock file the user's own servers made: root's doctor reports no problem (it used to advise its `rm`, after
    which root made one of its own), and root's server takes the lock, leaving the file the user's."""
    db = tmp_path / "kb.duckdb"
    db.touch(mode=0o600)
    lock = sharing.lock_path(db)
    lock.touch(mode=0o600)
    for made in (db, lock):
        os.chown(made, NOBODY, NOBODY)
    assert sharing.lock_file_problem(db) is None
    sharing.check_lock_file(db)
    assert shares(db).is_owner
    assert (lock.stat().st_uid, lock.stat().st_mode & 0o777) == (NOBODY, 0o600)


@AS_ROOT
def test_as_root_a_lock_file_there_already_keeps_its_owner(tmp_path, shares):
    """Only the files root creates are given away: one of root's own (an older duckgraph's) is left as it is."""
    db = tmp_path / "kb.duckdb"
    db.touch(mode=0o600)
    os.chown(db, NOBODY, NOBODY)
    lock = sharing.lock_path(db)
    lock.touch(mode=0o600)
    assert shares(db).is_owner
    assert (lock.stat().st_uid, lock.stat().st_mode & 0o777) == (0, 0o600)


# -- the socket a stopping owner removes -------------------------------------------------------------------------


def test_an_owner_whose_folder_was_made_again_leaves_the_newer_owners_socket(tmp_path, shares):
    """The folder deleted under a running owner and made again: a new server owns the new lock file and listens at
    the same path. The old owner, stopping, removes only the socket it made, not the newer one."""
    folder = tmp_path / "notes"
    folder.mkdir()
    db = folder / "kb.duckdb"
    old = shares(db, lambda method, params, progress: "old")
    shutil.rmtree(folder)
    folder.mkdir()
    new = shares(db, lambda method, params, progress: "new")
    assert old.is_owner and new.is_owner  # each holds the lock of its own lock file
    old.close(drain_seconds=1)
    assert sharing.socket_path(db).is_socket()
    client = shares(db)
    assert client.call("echo", {}, repeatable=True, wait=5) == "new"
    client.close(drain_seconds=1)
    new.close(drain_seconds=1)
    assert not sharing.socket_path(db).exists()  # its own is removed
