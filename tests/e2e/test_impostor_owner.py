"""Another local user posing as the owner of a database (issue 29, defect 1): the database sits in a folder others
can write to, and user `nobody` holds `<db>.lock` and listens on `<db>.sock` before the user's `duckgraph serve`
starts. No server may forward anything to it.

Real parts: a real second user (the fake owner is a process that drops to uid 65534 with setuid), real
`duckgraph serve` subprocesses driven over stdio by the MCP SDK's client, the real `duckgraph backup` and
`duckgraph doctor`. Needs root, to be two users.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from duckgraph.core import sharing
from duckgraph.core.sharing import FileShare
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_shared_file import SERVE, TIMEOUT_SECONDS, env, session  # noqa: F401 (env is a fixture)

NOBODY = 65534


def _has_nobody() -> bool:
    try:
        return pwd.getpwuid(NOBODY).pw_name == "nobody"
    except KeyError:
        return False


pytestmark = [
    pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets"),
    pytest.mark.skipif(os.geteuid() != 0 or not _has_nobody(), reason="needs root, to run a process as nobody"),
]

#: The fake owner. `files_by` says who creates the lock file and the socket: "nobody" (the attack of the issue:
#: the files are nobody's), or "root", the victim, whose files it opens and binds before it drops to nobody (so
#: the files look right and only the credentials of the process on the socket give it away). It holds the lock,
#: listens as nobody, greets as a duckgraph owner would, and answers every request with a forged result,
#: recording what it was sent.
FAKE_OWNER = textwrap.dedent("""
    import fcntl, json, os, socket, sys
    db, record, files_by = sys.argv[1:4]
    received = open(record, "ab", buffering=0)

    def become_nobody():
        os.setgroups([]); os.setgid(65534); os.setuid(65534)

    if files_by == "nobody":
        become_nobody()
    lock = os.open(db + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.pwrite(lock, json.dumps({"pid": os.getpid(), "protocol": 1}).encode(), 0)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(db + ".sock")
    os.chmod(db + ".sock", 0o600)
    if os.getuid() == 0:
        become_nobody()
    server.listen(8)  # the kernel records the listener's credentials now: nobody's
    print("ready", os.getuid(), flush=True)
    while True:
        conn, _ = server.accept()
        hello = {"pid": os.getpid(), "protocol": 1, "version": "0", "instance": "fake", "db": db}
        try:
            conn.sendall(json.dumps({"hello": hello}).encode() + b"\\n")
            for line in conn.makefile("rb"):
                received.write(line)
                request = json.loads(line)
                answer = {"id": request.get("id"), "result": f"FAKE ANSWER from uid {os.getuid()}"}
                conn.sendall(json.dumps(answer).encode() + b"\\n")
        except OSError:  # a client that hung up on it
            pass
        conn.close()
""")


@pytest.fixture
def world_writable() -> Iterator[Path]:
    """A folder like /tmp: anyone may create files in it, the sticky bit keeps them from removing others'."""
    folder = Path(tempfile.mkdtemp(prefix="shared-folder-", dir="/tmp"))
    folder.chmod(0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def new_database(folder: Path) -> Path:
    db = folder / "kb.duckdb"
    store = DuckDBStore(db)
    store.open()
    store.close()
    return db


@contextmanager
def fake_owner(db: Path, files_by: str) -> Iterator[Path]:
    """Run the fake owner until the block ends; yields the file where it records what it received."""
    record = db.with_name("received")
    record.touch()
    process = subprocess.Popen([sys.executable, "-c", FAKE_OWNER, str(db), str(record), files_by],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().split() == ["ready", str(NOBODY)]
        yield record
    finally:
        process.kill()
        process.wait()


def refused(message: str, path: Path) -> bool:
    return str(path) in message and "nobody (uid 65534)" in message and "nothing was sent" in message


def test_a_server_refuses_lock_and_socket_files_that_another_user_created(world_writable, env, tmp_path):
    db = new_database(world_writable)
    before = db.read_bytes()
    lock = sharing.lock_path(db)
    with fake_owner(db, files_by="nobody") as received:
        assert lock.stat().st_uid == NOBODY and sharing.socket_path(db).stat().st_uid == NOBODY

        with pytest.raises(sharing.ForeignFileError) as caught:
            FileShare(db, lambda *a: None).start()
        assert refused(str(caught.value), lock), caught.value
        assert "an administrator remove it" in str(caught.value)

        # The real server: it does not start, and says why (one line, no traceback).
        served = subprocess.run([*SERVE, "--db", str(db)], input="", capture_output=True, text=True, env=env,
                                timeout=TIMEOUT_SECONDS)
        assert served.returncode == 1, served.stderr
        assert served.stdout == ""
        assert refused(served.stderr, lock) and "Traceback" not in served.stderr, served.stderr

        # Nor do the commands that go through the owner send it anything.
        backup = subprocess.run([*SERVE[:-1], "backup", str(tmp_path / "copy.duckdb"), "--db", str(db)],
                                capture_output=True, text=True, env=env, timeout=TIMEOUT_SECONDS)
        assert backup.returncode == 1 and refused(backup.stderr, lock), backup.stderr
        assert "FAKE ANSWER" not in backup.stdout + backup.stderr
        assert not (tmp_path / "copy.duckdb").exists()
        doctor = subprocess.run([*SERVE[:-1], "doctor", "--json", "--db", str(db)], capture_output=True, text=True,
                                env=env, timeout=TIMEOUT_SECONDS)
        assert refused(json.dumps(json.loads(doctor.stdout)["sharing"]), lock), doctor.stdout
        assert received.read_bytes() == b""
    assert db.read_bytes() == before


@pytest.mark.anyio
async def test_a_client_refuses_an_owner_process_that_runs_as_another_user(world_writable, env, tmp_path):
    """The lock file and socket are the user's own, but the process holding and listening on them is nobody's:
    only its credentials on the socket give it away."""
    db = new_database(world_writable)
    before = db.read_bytes()
    sock = sharing.socket_path(db)
    with fake_owner(db, files_by="root") as received:
        assert sock.stat().st_uid == 0 and sharing.lock_path(db).stat().st_uid == 0

        share = FileShare(db, lambda *a: None)
        try:
            assert share.start() == "client"
            with pytest.raises(sharing.ForeignFileError) as caught:
                share.call("health", {}, repeatable=True, wait=5)
        finally:
            share.close(drain_seconds=0)
        message = str(caught.value)
        assert f"the process listening on {sock}" in message and "runs as nobody (uid 65534)" in message, message

        # The real server starts as a client and answers every call with that error: nothing forged comes back.
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with session(db, env, tmp_path / "serve.log") as client:
                for tool, arguments in (("search", {"query": "Ada"}),
                                        ("add_knowledge_graph", {"nodes": [{"name": "Ada", "type": "Person"}]})):
                    result = await client.call_tool(tool, arguments)
                    assert result.is_error, (tool, result.content)
                    text = result.content[0].text
                    assert "runs as nobody (uid 65534)" in text and "FAKE ANSWER" not in text, text
        assert received.read_bytes() == b""
    assert db.read_bytes() == before
