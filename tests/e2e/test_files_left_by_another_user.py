"""Files beside a memory that another user left, as one run of duckgraph as root (with sudo) leaves them: a lock
file (mode 0600, that user's, held by no process), a write-ahead log (a root server killed with SIGKILL), and a
restore into a folder this user cannot write.

- Root on a user's memory makes its lock file and socket for that user, so that user's later runs take the lock
  (a root server killed with SIGKILL included), and its server answers none of that user's processes.
- `serve` and `ui` refuse a lock file of root's (an older duckgraph's) in one line that says no process holds it and
  gives the exact `rm`; `ui` refuses before it prints its address; `doctor` reports it as a problem with the same
  advice.
- A write refused because only the write-ahead log is another user's names the log and its owner, not "make the
  file and its folder writable" (both are).
- `restore` into a folder this user cannot write is one line, and changes nothing.

Real parts: real `duckgraph` commands in subprocesses, run as root and as the unprivileged user `nobody` (setpriv),
on real DuckDB files; the hashing embedder as a plugin (tests/e2e/test_shared_file.py). Root ignores file
permissions, so the cases where they must bite run as `nobody`, and are skipped where that cannot be done (not
root, no setpriv, or a Python that `nobody` cannot run, such as one under /root).
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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from duckgraph.core import sharing
from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_shared_file import (  # noqa: F401 (env is a fixture)
    ROOT,
    SERVE,
    TIMEOUT_SECONDS,
    env,
    idle_server,
    owner_pid,
    stop,
)
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

NOBODY = 65534
CLI = SERVE[:-1]  # python -m duckgraph.core.cli
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


def make_memory(path: Path, names: list[str]) -> None:
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=name, type="Person") for name in names], [])


def fingerprint(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_uid, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file()}


def refusal(lock: Path, owner: str, me: str) -> str:
    """The one line a lock file of `owner`'s that no process holds gets, for user `me`, who may write its folder."""
    return (f"{lock} (the lock file) belongs to {owner}, not to you, {me}, and no process holds it: a duckgraph "
            "server or command run as that user (with sudo, say) left it, and duckgraph uses no lock file of another "
            f"user's. You can delete it, as you may write to its folder: `rm {lock}`; duckgraph then makes a new one "
            "of yours")


def check_refused(run, db: Path, lock: Path, message: str) -> None:
    """`serve` and `ui` refuse in one line (`ui` before it prints its address), `doctor` reports the problem, and
    nothing is changed."""
    before = fingerprint(db.parent)
    served = run([*SERVE, "--db", str(db)])
    assert served.returncode == 1 and served.stdout == "", served.stderr
    assert served.stderr == f"duckgraph: {message}\n", served.stderr
    ui = run([*CLI, "ui", "--db", str(db), "--port", "0"])
    assert ui.returncode == 1, ui.stderr
    assert ui.stderr == f"duckgraph: {message}\n", ui.stderr  # no "the web UI is at http://..." before it
    doctor = run([*CLI, "doctor", "--json", "--db", str(db)])
    report = json.loads(doctor.stdout)
    assert message in report["problems"], report["problems"]
    assert "Traceback" not in served.stderr + ui.stderr + doctor.stderr
    assert fingerprint(db.parent) == before


# -- as root: a lock file of another user's ---------------------------------------------------------------------


@AS_ROOT
def test_a_lock_file_of_another_user_that_no_process_holds_is_refused_with_the_rm_to_run(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    make_memory(db, ["Ada"])
    lock = sharing.lock_path(db)
    lock.touch(mode=0o600)
    os.chown(lock, NOBODY, NOBODY)

    def run(command: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(command, input="", capture_output=True, text=True, env=env, timeout=TIMEOUT_SECONDS)

    message = refusal(lock, "nobody (uid 65534)", "root (uid 0)")
    check_refused(run, db, lock, message)

    subprocess.run(message.split("`")[1], shell=True, check=True)  # the advice, as given
    server = idle_server(db, env, tmp_path / "serve.log")
    try:
        wait_for_owner(db, server, tmp_path / "serve.log")
        assert lock.stat().st_uid == 0
    finally:
        stop(server)


# -- as the user `nobody`, with the files root left ---------------------------------------------------------------


@dataclass
class Nobody:
    ids: tuple[int, int]
    env: dict[str, str]
    public: Path

    @property
    def setpriv(self) -> list[str]:
        return ["setpriv", f"--reuid={self.ids[0]}", f"--regid={self.ids[1]}", "--clear-groups"]

    def run(self, command: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([*self.setpriv, *command], input="", capture_output=True, text=True, env=self.env,
                              cwd=self.public, timeout=TIMEOUT_SECONDS, **kwargs)

    def folder(self, name: str, *, theirs: bool = True) -> Path:
        """A folder under the public one: nobody's own (writable), or root's (mode 0755, which nobody cannot
        write)."""
        folder = self.public / name
        folder.mkdir(mode=0o755)
        if theirs:
            os.chown(folder, *self.ids)
        return folder


@pytest.fixture
def nobody() -> Iterator[Nobody]:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv, to run commands as the unprivileged user nobody")
    try:
        entry = pwd.getpwuid(NOBODY)
    except KeyError:
        pytest.skip("no user nobody (uid 65534) to run commands as")
    public = Path(tempfile.mkdtemp(prefix="duckgraph-another-user-"))
    public.chmod(0o755)  # outside pytest's tmp_path (0700), so that nobody reaches it
    try:
        site = public / "site" / "duckgraph_test_fake-0.1.dist-info"
        site.mkdir(parents=True)
        (site / "METADATA").write_text("Metadata-Version: 2.1\nName: duckgraph-test-fake\nVersion: 0.1\n")
        (site / "entry_points.txt").write_text("[duckgraph]\nfake = tests.fake_embedder_plugin\n")
        home = public / "home"
        home.mkdir()
        os.chown(home, entry.pw_uid, entry.pw_gid)
        user = Nobody((entry.pw_uid, entry.pw_gid), {
            "PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": os.pathsep.join([str(public / "site"), str(ROOT)]), "PYTHONDONTWRITEBYTECODE": "1",
            "DUCKGRAPH_EMBEDDER": "fake", "DUCKGRAPH_WARM_UP": "0"}, public)
        probe = user.run([sys.executable, "-c", "import os, duckgraph.core.cli, tests.fake_embedder_plugin; "
                                                "print(os.getuid())"])
        if probe.returncode != 0 or probe.stdout.strip() != str(NOBODY):
            pytest.skip(f"nobody cannot run this Python and the repository: {probe.stderr.strip()[-300:]}")
        yield user
    finally:
        shutil.rmtree(public, ignore_errors=True)


def nobodys_memory(nobody: Nobody) -> Path:
    folder = nobody.folder("notes")
    db = folder / "kb.duckdb"
    make_memory(db, ["Ada"])
    os.chown(db, *nobody.ids)
    return db


def compact_as_root(db: Path, nobody: Nobody) -> Path:
    """One run as root of a command that takes the lock (compact keeps the file its owner's); its lock file."""
    compacted = subprocess.run([*CLI, "compact", "--db", str(db)], capture_output=True, text=True, env=nobody.env,
                               timeout=TIMEOUT_SECONDS)
    assert compacted.returncode == 0, compacted.stderr
    return sharing.lock_path(db)


def wait_for_owner(db: Path, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while owner_pid(db) != server.pid and time.monotonic() < deadline:
        assert server.poll() is None, log.read_text()
        time.sleep(0.05)
    assert owner_pid(db) == server.pid, log.read_text()


def test_a_root_compact_on_a_users_memory_leaves_the_lock_file_to_that_user(nobody: Nobody):
    db = nobodys_memory(nobody)
    lock = compact_as_root(db, nobody)
    assert (lock.stat().st_uid, lock.stat().st_gid, lock.stat().st_mode & 0o777) == (*nobody.ids, 0o600)

    doctor = nobody.run([*CLI, "doctor", "--json", "--db", str(db)])
    assert not [p for p in json.loads(doctor.stdout)["problems"] if "lock file" in p], doctor.stdout
    again = nobody.run([*CLI, "compact", "--db", str(db)])  # the user's own run takes the lock
    assert again.returncode == 0, again.stderr
    stats = nobody.run([*CLI, "stats", "--db", str(db)])
    assert stats.returncode == 0 and stats.stdout.startswith("1 nodes"), stats.stdout + stats.stderr


def test_a_root_server_killed_on_a_users_memory_leaves_files_that_user_takes_over(nobody: Nobody):
    db = nobodys_memory(nobody)
    log = nobody.public / "serve.log"
    server = idle_server(db, nobody.env, log)  # as root
    try:
        wait_for_owner(db, server, log)
        lock, sock = sharing.lock_path(db), sharing.socket_path(db)
        assert [(p.lstat().st_uid, p.lstat().st_mode & 0o777) for p in (lock, sock)] == [(NOBODY, 0o600)] * 2
        # The socket is nobody's now, so nobody may connect: root's server sends them nothing, closing at once.
        probe = nobody.run([sys.executable, "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                                                  "s.settimeout(10); s.connect(sys.argv[1]); print(s.recv(100))",
                            str(sock)])
        assert probe.returncode == 0 and probe.stdout == "b''\n", probe.stdout + probe.stderr
        assert "refused a connection from nobody (uid 65534)" in log.read_text()
    finally:
        server.kill()
        server.wait()
    assert sock.is_socket() and sock.lstat().st_uid == NOBODY  # left behind, as SIGKILL leaves it

    with log.open("a", encoding="utf-8") as errlog:
        theirs = subprocess.Popen([*nobody.setpriv, *SERVE, "--db", str(db)], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=errlog, env=nobody.env, cwd=nobody.public)
    try:
        wait_for_owner(db, theirs, log)
        assert sock.lstat().st_uid == NOBODY
    finally:
        stop(theirs)
    assert theirs.returncode == 0, log.read_text()
    assert not sock.exists()


def test_a_lock_file_root_left_is_refused_for_its_owner_with_the_rm_to_run(nobody: Nobody):
    db = nobodys_memory(nobody)
    lock = compact_as_root(db, nobody)
    os.chown(lock, 0, 0)  # root's, as an older duckgraph run as root (compact, serve) left it

    message = refusal(lock, "root (uid 0)", "nobody (uid 65534)")
    check_refused(nobody.run, db, lock, message)

    removed = nobody.run(["sh", "-c", message.split("`")[1]])  # the advice, run by the file's owner
    assert removed.returncode == 0 and not lock.exists(), removed.stderr
    doctor = nobody.run([*CLI, "doctor", "--json", "--db", str(db)])
    assert not [p for p in json.loads(doctor.stdout)["problems"] if "lock file" in p], doctor.stdout
    stats = nobody.run([*CLI, "stats", "--db", str(db)])
    assert stats.returncode == 0 and stats.stdout.startswith("1 nodes"), stats.stdout + stats.stderr


#: Writes to the file as root and is killed before anything checkpoints it: the write lies in a root-owned .wal.
CRASH = textwrap.dedent("""
    import os, signal, sys
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import NodeInput
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder

    kb = KnowledgeBase(DuckDBStore(sys.argv[1]), HashingEmbedder()).open()
    kb.add_knowledge_graph([NodeInput(name="Crash Victim", type="Person")], [])
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_write_refused_for_a_log_another_user_left_names_the_log_and_its_owner(nobody: Nobody):
    folder = nobody.folder("notes")
    db = folder / "kb.duckdb"
    make_memory(db, ["Ada"])
    crashed = subprocess.run([sys.executable, "-c", CRASH, str(db)], capture_output=True, text=True,
                             env=nobody.env, cwd=ROOT, timeout=TIMEOUT_SECONDS)
    assert crashed.returncode == -9, crashed.stderr
    os.chown(db, *nobody.ids)
    wal = db.with_name(db.name + ".wal")
    assert wal.stat().st_uid == 0 and wal.stat().st_size > 0
    note = nobody.public / "note.txt"
    note.write_text("Grace Hopper wrote the first compiler.")
    before = fingerprint(folder)

    ingest = nobody.run([*CLI, "ingest", "--no-extract", "--db", str(db), str(note)])
    assert ingest.returncode == 1, ingest.stderr
    refused = ingest.stderr.strip().splitlines()[-1]
    assert refused == (
        f"duckgraph: this knowledge file is read-only: {db} (its write-ahead log kb.duckdb.wal is not writable by "
        "this user: it belongs to root (uid 0)). Searches and reads work; to add or change knowledge, have root (uid "
        f"0) or an administrator give kb.duckdb.wal to this user (`chown nobody {wal}`; do not delete it: it holds the "
        "last changes, not yet in the file), or copy it somewhere writable (duckgraph backup) and point --db / "
        "DUCKGRAPH_DB at the copy."), refused
    assert "make the file and its folder writable" not in ingest.stderr
    assert fingerprint(folder) == before
    search = nobody.run([*CLI, "search", "--db", str(db), "Crash Victim"])  # reads still see the log's write
    assert search.returncode == 0 and "Crash Victim" in search.stdout, search.stdout + search.stderr


def test_a_restore_into_a_folder_the_user_cannot_write_is_one_line_and_changes_nothing(nobody: Nobody):
    folder = nobody.folder("root-folder", theirs=False)  # root's, as /srv or a shared folder may be
    db = folder / "kb.duckdb"
    make_memory(db, ["Ada"])
    os.chown(db, *nobody.ids)  # the file is nobody's (writable), the folder is not
    backup = nobody.folder("backups") / "bk.duckdb"
    make_memory(backup, ["Xavier"])
    os.chown(backup, *nobody.ids)
    before = fingerprint(folder)

    restored = nobody.run([*CLI, "restore", str(backup), "--db", str(db)])
    assert restored.returncode == 1, restored.stderr
    assert restored.stderr == (f"duckgraph: cannot write the restored copy beside {db}: the folder {folder} is not "
                               "writable by this user; nothing was changed\n"), restored.stderr
    assert fingerprint(folder) == before


# -- as root: a folder no one may write (immutable) ----------------------------------------------------------------


@pytest.fixture
def immutable(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a memory, which no one, root included, may then create a file in (chattr +i)."""
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("an immutable folder needs chattr and root")
    folder = tmp_path / "immutable"
    folder.mkdir()
    make_memory(folder / "kb.duckdb", ["Ada"])
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False).returncode != 0:
        pytest.skip("this file system has no immutable files")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_restore_into_a_folder_no_one_may_write_is_one_line(tmp_path: Path, immutable: Path, no_settings, capsys):
    no_settings.setenv("HOME", str(tmp_path))
    db, backup = immutable / "kb.duckdb", tmp_path / "bk.duckdb"
    make_memory(backup, ["Xavier"])
    before = fingerprint(immutable)
    assert main(["restore", str(backup), "--db", str(db)]) == 1
    assert capsys.readouterr().err == (f"duckgraph: cannot write the restored copy beside {db}: the folder "
                                       f"{immutable} is not writable by this user; nothing was changed\n")
    assert fingerprint(immutable) == before
