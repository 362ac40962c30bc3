"""Which process owns a database file: an exclusive `flock` on `<db>.lock`, and where the lock and the owner's socket
are.

- Ownership is an exclusive `flock` on `<db>.lock`, taken before the database is opened. The kernel drops it
  when the owner exits, however it exits (SIGKILL included), so it can never go stale. The owner writes its pid
  into the lock file, for messages and `duckgraph doctor`. The lock file stays next to the database (removing it
  would let two processes lock two different files).
- The owner listens on a Unix socket, `<db>.sock`, or, when that path is too long for AF_UNIX, a socket named
  after a hash of the database path in a private runtime folder. It is created with mode 0600.
- The lock file stays next to the database, so every process of the user finds it whatever its environment. The
  owner writes its socket's path into it (`announced_socket`), and clients connect there: a runtime folder comes
  from the environment (XDG_RUNTIME_DIR, TMPDIR), which differs between hosts (cron, ssh and some MCP hosts clear
  it), so a client that computed the path itself could look in another folder than the owner's.
- The database's folder may be one others can write to (`/tmp`, a shared folder), where another user can create
  the lock file or the socket first and pose as the owner. So neither is used unless it is this user's own and
  private to them (`check_private`), and a client sends nothing until the process on the socket proves, by its
  credentials, to run as this user (protocol.py).
- A process run as root on another user's memory (`sudo duckgraph compact`, a root cron job) makes the lock file
  and socket for that user (`memory_owner`), and accepts theirs: one of root's would keep that user's own servers
  from ever taking the lock.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shlex
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

from duckgraph.ports import DuckgraphError
from duckgraph.ports.users import user_name

try:
    import fcntl
except ImportError:  # Windows: no flock; each server opens the file itself, as before
    fcntl = None  # type: ignore[assignment]

#: AF_UNIX socket paths hold 108 bytes on Linux and 104 on macOS, the terminating NUL included.
MAX_SOCKET_PATH_BYTES = 100
#: What the lock file is called in messages.
LOCK_FILE = "the lock file"


def supported() -> bool:
    """Whether this platform can share a file between servers (flock and Unix sockets)."""
    return fcntl is not None and hasattr(socket, "AF_UNIX")


# -- where things are --------------------------------------------------------------------------------------


def _resolved(db: str | Path) -> Path:
    """One name per file: `./kb.duckdb`, `~/kb.duckdb` and a symlink to it all lock the same lock file."""
    return Path(db).expanduser().resolve()


LOCK_SUFFIX = ".lock"


def lock_path(db: str | Path) -> Path:
    path = _resolved(db)
    return path.with_name(path.name + LOCK_SUFFIX)


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


def identity(info: os.stat_result) -> tuple[int, int]:
    """Which file `info` is, whatever path names it now: (st_dev, st_ino)."""
    return info.st_dev, info.st_ino


def unlink_if_same(path: Path, made: tuple[int, int]) -> None:
    """Remove `path` only while it still names the file this process made (`identity`): its folder may have been
    deleted and made again meanwhile, and the file there be a newer server's."""
    try:
        if identity(os.lstat(path)) == made:
            path.unlink()
    except OSError:
        pass


def private_folder(folder: Path) -> None:
    """Create the socket's folder when it is a runtime folder of ours; refuse one others could write to."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder in _runtime_dirs():  # a database's own folder is the user's business, whatever its name
        info = folder.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise DuckgraphError(f"{folder} belongs to another user or others can write to it; remove it")


# -- whose files ------------------------------------------------------------------------------------------

#: A user as files are given to them: (uid, gid).
Owner = tuple[int, int]


def memory_owner(db: str | Path) -> Owner | None:
    """Whom a process run as root makes the lock file and socket of `db` for: the memory file's owner, or its
    folder's before there is a file, when that is another user (`sudo duckgraph compact`, a root cron job on alice's
    memory), since a lock file of root's would keep that user's own servers from taking the lock. None for any other
    process (its files are its own) and for root's own memory."""
    if os.getuid() != 0:
        return None
    path = _resolved(db)
    for candidate in (path, path.parent):
        try:
            info = os.stat(candidate)
        except OSError:
            continue
        return None if info.st_uid == 0 else (info.st_uid, info.st_gid)
    return None


def ours(uid: int | None, owner: Owner | None) -> bool:
    """Whether a file or process of `uid` is this process's own for a memory of `owner` (`memory_owner`): this
    user's, or, as root, also the memory's owner's."""
    return uid == os.getuid() or (owner is not None and uid == owner[0])


class ForeignFileError(DuckgraphError):
    """A lock or socket of a shared database that is not this user's own and private: another user may be posing
    as the duckgraph server that owns the file, so nothing is sent to it."""


def check_private(path: Path, info: os.stat_result, what: str, owner: Owner | None = None) -> None:
    """Refuse a lock file or socket that another user owns or could open: whoever can open the lock can hold
    it, and whoever owns the socket answers the calls sent there. `owner`: see `ours`."""
    me = os.getuid()
    if stat.S_ISLNK(info.st_mode):
        raise ForeignFileError(f"{path} ({what}) is a symbolic link, which duckgraph never follows there: "
                               f"remove it (it belongs to {user_name(info.st_uid)})")
    if not ours(info.st_uid, owner):
        raise ForeignFileError(
            f"{path} ({what}) belongs to {user_name(info.st_uid)}, not to you, {user_name(me)}: another user "
            "may be posing as the duckgraph server of this database, so nothing was sent to it. Have that user or "
            "an administrator remove it, or keep the database in a folder only you can write to"
        )
    if info.st_mode & 0o077:
        raise ForeignFileError(f"{path} ({what}) can be opened by other users (mode {stat.S_IMODE(info.st_mode):04o}),"
                               f" who could take the database over: run `chmod 600 {path}`")


def _check_lock_private(path: Path, info: os.stat_result, owner: Owner | None) -> None:
    """`check_private` for a lock file: one of another user's says whether a process holds it, since one that no
    process holds was left behind (a duckgraph server or command run once as root, with sudo) and is safe to
    delete, while one that is held may be another user posing as the owner."""
    if not stat.S_ISLNK(info.st_mode) and not ours(info.st_uid, owner):
        raise ForeignFileError(_foreign_lock(path, info))
    check_private(path, info, LOCK_FILE, owner)


def _foreign_lock(path: Path, info: os.stat_result) -> str:
    theirs, mine = user_name(info.st_uid), user_name(os.getuid())
    holders = _flock_holders(info)
    if holders == []:
        return (f"{path} ({LOCK_FILE}) belongs to {theirs}, not to you, {mine}, and no process holds it: a duckgraph "
                f"server or command run as that user (with sudo, say) left it, and duckgraph uses no lock file of "
                f"another user's. {_removal(path, capital=True)}; duckgraph then makes a new one of yours")
    pids = sorted({pid for pid in holders or [] if pid})
    held = "" if holders is None else f", and {_processes(pids) if pids else 'a process'} holds it"
    advice = ("Have that user or an administrator remove it, or keep the database in a folder only you can write to"
              if holders else
              f"If no duckgraph process of that user runs on this database, it is a leftover of one run as that user "
              f"(with sudo, say): {_removal(path, capital=False)}. Otherwise have that user or an administrator "
              "remove it, or keep the database in a folder only you can write to")
    return (f"{path} ({LOCK_FILE}) belongs to {theirs}, not to you, {mine}{held}: another user may be posing as the "
            f"duckgraph server of this database, so nothing was sent to it. {advice}")


def _processes(pids: list[int]) -> str:
    return f"process {pids[0]}" if len(pids) == 1 else "processes " + ", ".join(map(str, pids))


def _removal(path: Path, *, capital: bool) -> str:
    """Who can delete `path`: whoever may write to its folder (in a sticky folder such as /tmp, only its owner or
    the file's), with the exact command."""
    command = f"`rm {shlex.quote(str(path))}`"
    folder = path.parent
    me = os.getuid()
    try:
        info = os.stat(folder)
    except OSError:
        return f"{'D' if capital else 'd'}elete it: {command}"
    sticky = bool(info.st_mode & stat.S_ISVTX)
    if os.access(folder, os.W_OK | os.X_OK) and (not sticky or me in (0, info.st_uid)):
        return f"{'Y' if capital else 'y'}ou can delete it, as you may write to its folder: {command}"
    if info.st_uid == me:
        return (f"{'Y' if capital else 'y'}our folder {folder} is not writable: make it so "
                f"(`chmod u+w {shlex.quote(str(folder))}`), then delete it: {command}")
    return (f"{'T' if capital else 't'}he owner of its folder {folder}, {user_name(info.st_uid)}, or an administrator "
            f"can delete it: {command}")


def _open_private(path: Path, flags: int, what: str) -> int:
    """Open `path` (never through a symlink) and check it is ours and private before it is used. A lock file root
    creates for another user's memory is given to that user at once (`memory_owner`)."""
    owner = memory_owner(path.with_name(path.name.removesuffix(LOCK_SUFFIX))) if what == LOCK_FILE else None
    check = ((lambda p, i: _check_lock_private(p, i, owner)) if what == LOCK_FILE
             else (lambda p, i: check_private(p, i, what)))
    flags |= os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = _create_for(path, flags, owner, what) if flags & os.O_CREAT and owner is not None else None
        if fd is None:
            fd = os.open(path, flags, 0o600)
    except OSError:
        try:
            found = os.lstat(path)
        except OSError:
            found = None
        if found is not None:  # there, but not openable as ours (a symlink, or another user's file)
            check(path, found)
        raise
    try:
        info = os.fstat(fd)
        check(path, info)
        if not stat.S_ISREG(info.st_mode):
            raise ForeignFileError(f"{path} ({what}) is not a plain file: remove it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create_for(path: Path, flags: int, owner: Owner, what: str) -> int | None:
    """Create `path` for `owner` (open as `flags`), or None when it is there already (left as it is)."""
    try:
        fd = os.open(path, flags | os.O_EXCL, 0o600)
    except FileExistsError:
        return None
    try:
        os.fchown(fd, *owner)
    except OSError as exc:  # one of root's would lock that user out: none rather than that
        made = identity(os.fstat(fd))
        os.close(fd)
        unlink_if_same(path, made)
        raise LockFileError(f"cannot give {path} ({what}) to {user_name(owner[0])}, whose memory it is: "
                            f"{exc.strerror or exc}. Run duckgraph as that user") from exc
    return fd


def check_lock_file(db: str | Path) -> None:
    """Refuse to deal with the owner of `db` when its lock file is not this user's own and private."""
    if not supported():
        return
    path = lock_path(db)
    try:
        os.close(_open_private(path, os.O_RDONLY, LOCK_FILE))
    except FileNotFoundError:
        pass
    except OSError as exc:  # ours, but unreadable (mode 0200): one clear error, not a traceback
        raise LockFileError(_unusable_lock(path, exc)) from exc


def lock_file_problem(db: str | Path) -> str | None:
    """Why no duckgraph server could use the lock file of `db` as it is (another user's, a symbolic link, others can
    open it, not writable by this user), or None (fine, or not there yet). Opens it as a server would, without
    taking the lock or changing it; for `duckgraph doctor`, which cannot learn this from `holder`."""
    if not supported():
        return None
    path = lock_path(db)
    try:
        os.close(_open_private(path, os.O_RDWR, LOCK_FILE))
    except OSError as exc:
        # None when there is none (its folder missing, or a file: the database check says why it cannot be made).
        return _unusable_lock(path, exc) if os.path.lexists(path) else None
    except DuckgraphError as exc:
        return str(exc)
    return None


class LockFileError(DuckgraphError):
    """The lock file of a database cannot be created or opened (a folder or file this user cannot write)."""


def _unusable_lock(path: Path, exc: OSError) -> str:
    """What to do when this user cannot open or create `path`, a lock file (not another user's: `_foreign_lock`)."""
    folder = path.parent
    me = user_name(os.getuid())
    if exc.errno == errno.EROFS:
        return (f"cannot create {LOCK_FILE} {path}: its folder {folder} is on a read-only file system. duckgraph keeps "
                f"{path.name} beside the database to know which process uses it: keep the database on a writable "
                "file system")
    if exc.errno in (errno.EACCES, errno.EPERM):
        if not os.path.isdir(folder):
            return f"cannot create {LOCK_FILE} {path}: its folder {folder} cannot be created by this user, {me}"
        try:
            info = os.lstat(path)
        except OSError:
            return (f"cannot create {LOCK_FILE} {path}: its folder {folder} is not writable by this user, {me}. "
                    f"duckgraph keeps {path.name} beside the database to know which process uses it: make the folder "
                    "writable by this user, or keep the database in a folder this user can write to")
        return (f"cannot open {LOCK_FILE} {path}: it is not readable and writable by this user, {me} (mode "
                f"{stat.S_IMODE(info.st_mode):04o}): run `chmod 600 {shlex.quote(str(path))}`")
    return f"cannot open {LOCK_FILE} {path}: {exc.strerror or exc}"


# -- the lock ----------------------------------------------------------------------------------------------


class LockFile:
    """An exclusive flock on `<db>.lock`, held through one open file description."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, *, blocking: bool) -> bool:
        """Take the lock (False when another process holds it and not `blocking`). A lock file this user cannot
        create or open is a LockFileError, and one of another user's a ForeignFileError: one line for every
        caller (serve, backup, restore, compact), never a bare PermissionError."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open_private(self.path, os.O_RDWR | os.O_CREAT, LOCK_FILE)
        except OSError as exc:
            raise LockFileError(_unusable_lock(self.path, exc)) from exc
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
        return _description(fd) if _held(fd) else None
    finally:
        os.close(fd)


def _held(fd: int) -> bool:
    """Whether a process holds the lock of the open lock file `fd` (a shared lock is refused while one does)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _description(fd: int) -> dict[str, Any]:
    """What the holder wrote into the lock file ({} until it has)."""
    try:
        info = json.loads(os.pread(fd, 65_536, 0) or b"{}")
    except (OSError, ValueError):
        info = {}
    return info if isinstance(info, dict) else {}


def announced_socket(db: str | Path) -> Path | None:
    """Where the process that holds the lock of `db` listens, as it wrote in the lock file: its own environment chose
    the folder for a long path (`socket_path`), which may not be the one this process would choose. None when no
    process holds the lock, or its holder has not written the path yet (starting) or never does (a duckgraph older
    than this key): then the caller uses the path it computes itself.

    The path is read only from a lock file that is this user's own and private (ForeignFileError otherwise), so only
    this user can have written it; the socket there is checked again on connecting (protocol.py)."""
    if not supported():
        return None
    path = lock_path(db)
    try:
        fd = _open_private(path, os.O_RDONLY, LOCK_FILE)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LockFileError(_unusable_lock(path, exc)) from exc
    try:
        if not _held(fd):  # an owner killed with SIGKILL leaves its description: it is no one's now
            return None
        where = _description(fd).get("socket")
    finally:
        os.close(fd)
    return Path(where) if isinstance(where, str) and os.path.isabs(where) else None


# -- who waits for the lock ----------------------------------------------------------------------------------

#: Linux's list of file locks, with the requests blocked on them ("->" lines): the one place a process can learn
#: which others wait for a flock. Other systems have none.
PROC_LOCKS = Path("/proc/locks")
#: A flock line: one held ("7: FLOCK  ADVISORY  WRITE 1399 fe:00:2541236 0 EOF": pid, device, inode) or, after
#: "->", a request blocked on one ("6: -> FLOCK ..."), indented one space more for each request it waits behind.
_FLOCK = re.compile(r"\d+:\s*(?P<blocked>-> )?FLOCK\s+\S+\s+\S+\s+(?P<pid>-?\d+)\s+"
                    r"(?P<major>[0-9a-f]+):(?P<minor>[0-9a-f]+):(?P<ino>\d+)\s")


def _flocks(info: os.stat_result) -> list[tuple[bool, int, bool]] | None:
    """The flock lines of /proc/locks on the inode of `info`, each as (blocked, pid, listed on its device); None
    when there is no /proc/locks (not Linux). The device listed is the file system's own, which an overlay (a
    container) does not show to stat: where it differs, the inode alone could be another file's, so the callers
    also ask whether the process has the file open (`_has_open`)."""
    try:
        listed = PROC_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    device = (os.major(info.st_dev), os.minor(info.st_dev))
    return [(match["blocked"] is not None, int(match["pid"]),
             (int(match["major"], 16), int(match["minor"], 16)) == device)
            for line in listed.splitlines()
            if (match := _FLOCK.match(line)) is not None and int(match["ino"]) == info.st_ino]


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
    entries = _flocks(info)
    if entries is None:
        return None
    found: list[int] = []
    for blocked, pid, same_device in entries:
        if blocked and pid > 0 and pid not in found and (same_device or _has_open(pid, info)):
            found.append(pid)
    return found


def _flock_holders(info: os.stat_result) -> list[int] | None:
    """The pids holding a flock on the file of `info` (0 for one /proc does not name), [] when none does, or None
    when this system cannot tell: no /proc/locks (not Linux), or a lock on an inode of that number that cannot be
    tied to this file (an overlay shows another device, and another user's /proc/PID/fd is closed to us). Read
    without opening the file, which another user's lock file (mode 0600) does not allow."""
    entries = _flocks(info)
    if entries is None:
        return None
    found: list[int] = []
    unsure = False
    for blocked, pid, same_device in entries:
        if blocked:
            continue
        if same_device or (pid > 0 and _has_open(pid, info)):
            found.append(max(pid, 0))
        else:
            unsure = True
    return found if found or not unsure else None


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

