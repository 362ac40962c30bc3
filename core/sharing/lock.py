"""Which process owns a database file: an exclusive `flock` on `<db>.lock`, and where the lock and the owner's socket
are.

- Ownership is an exclusive `flock` on `<db>.lock`, taken before the database is opened. The kernel drops it
  when the owner exits, however it exits (SIGKILL included), so it can never go stale. The owner writes its pid
  into the lock file, for messages and `duckgraph doctor`. The lock file stays next to the database (removing it
  would let two processes lock two different files).
- The owner listens on a Unix socket, `<db>.sock`, or, when that path is too long for AF_UNIX, a socket named
  after a hash of the database path in a private runtime folder. It is created with mode 0600.
- Both stay next to the database, so every process of the user finds them whatever its environment. That folder
  may be one others can write to (`/tmp`, a shared folder), where another user can create them first and pose as
  the owner. So neither is used unless it is this user's own and private to them (`check_private`), and a client
  sends nothing until the process on the socket proves, by its credentials, to run as this user
  (protocol.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

from duckgraph.ports import DuckgraphError

try:
    import fcntl
except ImportError:  # Windows: no flock; each server opens the file itself, as before
    fcntl = None  # type: ignore[assignment]

#: AF_UNIX socket paths hold 108 bytes on Linux and 104 on macOS, the terminating NUL included.
MAX_SOCKET_PATH_BYTES = 100


def supported() -> bool:
    """Whether this platform can share a file between servers (flock and Unix sockets)."""
    return fcntl is not None and hasattr(socket, "AF_UNIX")


# -- where things are --------------------------------------------------------------------------------------


def _resolved(db: str | Path) -> Path:
    """One name per file: `./kb.duckdb`, `~/kb.duckdb` and a symlink to it all lock the same lock file."""
    return Path(db).expanduser().resolve()


def lock_path(db: str | Path) -> Path:
    path = _resolved(db)
    return path.with_name(path.name + ".lock")


def socket_path(db: str | Path) -> Path:
    """`<db>.sock`, or `<runtime dir>/<hash of the db path>.sock` when that is too long for AF_UNIX."""
    path = _resolved(db)
    beside = path.with_name(path.name + ".sock")
    if len(os.fsencode(beside)) <= MAX_SOCKET_PATH_BYTES:
        return beside
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:32]
    for folder in _runtime_dirs():
        candidate = folder / f"{digest}.sock"
        if len(os.fsencode(candidate)) <= MAX_SOCKET_PATH_BYTES:
            return candidate
    raise DuckgraphError(f"no folder with a path short enough for a Unix socket for {path}")


def _runtime_dirs() -> list[Path]:
    folders = []
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        folders.append(Path(runtime) / "duckgraph")
    folders.append(Path(tempfile.gettempdir()) / f"duckgraph-{os.getuid()}")
    folders.append(Path("/tmp") / f"duckgraph-{os.getuid()}")
    return folders


def private_folder(folder: Path) -> None:
    """Create the socket's folder when it is a runtime folder of ours; refuse one others could write to."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder in _runtime_dirs():  # a database's own folder is the user's business, whatever its name
        info = folder.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise DuckgraphError(f"{folder} belongs to another user or others can write to it; remove it")


# -- whose files ------------------------------------------------------------------------------------------


class ForeignFileError(DuckgraphError):
    """A lock or socket of a shared database that is not this user's own and private: another user may be posing
    as the duckgraph server that owns the file, so nothing is sent to it."""


def user_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_private(path: Path, info: os.stat_result, what: str) -> None:
    """Refuse a lock file or socket that another user owns or could open: whoever can open the lock can hold
    it, and whoever owns the socket answers the calls sent there."""
    me = os.getuid()
    if stat.S_ISLNK(info.st_mode):
        raise ForeignFileError(f"{path} ({what}) is a symbolic link, which duckgraph never follows there: "
                               f"remove it (it belongs to {user_name(info.st_uid)})")
    if info.st_uid != me:
        raise ForeignFileError(
            f"{path} ({what}) belongs to {user_name(info.st_uid)}, not to you, {user_name(me)}: another user "
            "may be posing as the duckgraph server of this database, so nothing was sent to it. Have that user or "
            "an administrator remove it, or keep the database in a folder only you can write to"
        )
    if info.st_mode & 0o077:
        raise ForeignFileError(f"{path} ({what}) can be opened by other users (mode {stat.S_IMODE(info.st_mode):04o}),"
                               f" who could take the database over: run `chmod 600 {path}`")


def _open_private(path: Path, flags: int, what: str) -> int:
    """Open `path` (never through a symlink) and check it is ours and private before it is used."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        try:
            found = os.lstat(path)
        except OSError:
            found = None
        if found is not None:  # there, but not openable as ours (a symlink, or another user's file)
            check_private(path, found, what)
        raise
    try:
        info = os.fstat(fd)
        check_private(path, info, what)
        if not stat.S_ISREG(info.st_mode):
            raise ForeignFileError(f"{path} ({what}) is not a plain file: remove it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_lock_file(db: str | Path) -> None:
    """Refuse to deal with the owner of `db` when its lock file is not this user's own and private."""
    path = lock_path(db)
    try:
        os.close(_open_private(path, os.O_RDONLY, "the lock file"))
    except FileNotFoundError:
        pass


# -- the lock ----------------------------------------------------------------------------------------------


class LockFile:
    """An exclusive flock on `<db>.lock`, held through one open file description."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, *, blocking: bool) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_private(self.path, os.O_RDWR | os.O_CREAT, "the lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def describe(self, info: dict[str, Any]) -> None:
        assert self.fd is not None
        data = json.dumps(info).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def holder(db: str | Path) -> dict[str, Any] | None:
    """The duckgraph process that holds the file, as it describes itself ({} until it has), or None.

    Only for messages: whoever holds the lock wrote this. Calls to the owner check its files and credentials."""
    if not supported():
        return None
    path = lock_path(db)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        try:
            info = json.loads(os.pread(fd, 65_536, 0) or b"{}")
        except (OSError, ValueError):
            info = {}
        return info if isinstance(info, dict) else {}
    finally:
        os.close(fd)


# -- who waits for the lock ----------------------------------------------------------------------------------

#: Linux's list of file locks, with the requests blocked on them ("->" lines): the one place a process can learn
#: which others wait for a flock. Other systems have none.
PROC_LOCKS = Path("/proc/locks")
#: A request blocked on a flock: "6: -> FLOCK  ADVISORY  WRITE 5723 fe:00:2277551 0 EOF" (pid, device, inode),
#: indented one space more for each request it waits behind ("6:  -> FLOCK ...").
_WAITER = re.compile(r"\d+:\s*-> FLOCK\s+\S+\s+\S+\s+(?P<pid>\d+)\s+"
                     r"(?P<major>[0-9a-f]+):(?P<minor>[0-9a-f]+):(?P<ino>\d+)\s")


def waiting(db: str | Path) -> list[int] | None:
    """The pids of the processes waiting for the lock of `db`: the duckgraph servers started on it while another
    owns it (each waits to take it over, `FileShare`), so stopping the owner hands the file to one of them. None
    when this system cannot tell (no /proc/locks: not Linux)."""
    if not supported():
        return []
    try:
        info = os.stat(lock_path(db))
    except OSError:
        return []  # no lock file: nobody has ever waited for it
    try:
        listed = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    found: list[int] = []
    for line in listed.splitlines():
        match = _WAITER.match(line)
        if match is None or int(match["ino"]) != info.st_ino or (pid := int(match["pid"])) <= 0 or pid in found:
            continue
        # The device listed is the file system's own, which an overlay (a container) does not show to stat: the
        # inode alone could be another file's, so the process must have this lock file open as well.
        same_device = (int(match["major"], 16), int(match["minor"], 16)) == (os.major(info.st_dev),
                                                                               os.minor(info.st_dev))
        if same_device or _has_open(pid, info):
            found.append(pid)
    return found


def _has_open(pid: int, info: os.stat_result) -> bool:
    """Whether process `pid` has the file of `info` open (read from /proc: False where it cannot be read)."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        entries = list(folder.iterdir())
    except OSError:
        return False
    for entry in entries:
        try:
            opened = entry.stat()
        except OSError:
            continue
        if (opened.st_dev, opened.st_ino) == (info.st_dev, info.st_ino):
            return True
    return False

