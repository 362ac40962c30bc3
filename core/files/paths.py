"""Is a path one of a database's files? Every path the user gives (a backup's destination, an export's output, an
import's source, the database itself) is checked here, so that no command writes over a database, its write-ahead
log, its lock or its socket, whether a server has it open or not.

Paths are compared as the operating system will open them: relative ones from the working directory, through
symbolic links, and a hard link to the knowledge file is the knowledge file.

It also says what permissions and owner a file that a command writes (a backup, an export) gets
(`Permissions`): the memory's copies are as private as the memory.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from duckgraph.core.sharing.lock import holder, lock_path, socket_path
from duckgraph.ports import DuckgraphError, InvalidInputError
from duckgraph.ports.store import is_duckdb_header

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

#: The files a DuckDB database has beside itself while duckgraph uses it, and what each is.
COMPANIONS = {".wal": "write-ahead log", ".lock": "lock file", ".sock": "socket"}


def resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def own_file(path: str | Path, db: str | Path) -> str | None:
    """What `path` is of the knowledge file `db` ("the knowledge file", "its write-ahead log", ...), or None."""
    target, base = resolved(path), resolved(db)
    names = {base: "the knowledge file", base.with_name(base.name + ".wal"): "the knowledge file's write-ahead log",
             lock_path(base): "the knowledge file's lock file"}
    try:
        names[socket_path(base)] = "the knowledge file's socket"
    except DuckgraphError:  # no folder for a long path's socket: then there is no such socket either
        pass
    if target in names:
        return f"{names[target]} {base}" if target == base else f"{names[target]} (of {base})"
    try:
        if os.path.samefile(target, base):
            return f"the knowledge file {base} (under another name)"
    except OSError:
        pass
    return None


def database_file(path: str | Path) -> str | None:
    """What `path` is of any database, or None: the write-ahead log, lock or socket beside an existing file, a
    socket, or a DuckDB database file (with whether it is in use)."""
    target = resolved(path)
    for suffix, what in COMPANIONS.items():
        # Only a name longer than the suffix has a base: "kb" or ".wal" alone are no database's companion.
        if len(target.name) <= len(suffix) or not target.name.endswith(suffix):
            continue
        base = target.with_name(target.name[: -len(suffix)])
        if base.is_file():
            return f"the {what} of the database {base}"
    try:
        info = target.stat()
    except OSError:
        return None
    if stat.S_ISSOCK(info.st_mode):
        return "a socket"
    if stat.S_ISREG(info.st_mode) and is_duckdb_file(target):
        use = in_use(target)
        return f"a DuckDB database ({use})" if use else "a DuckDB database"
    return None


def in_use(database: Path) -> str | None:
    """Why the database file is in use, or None: a duckgraph server holds it, DuckDB has it open, or it has a
    write-ahead log (changes that are not in the file yet)."""
    info = holder(database)
    if info is not None:
        return f"held by the duckgraph server pid {info.get('pid', '?')}"
    if _posix_locked(database):
        return "open in a DuckDB process"
    if database.with_name(database.name + ".wal").exists():
        return "it has a write-ahead log, changes not yet in the file"
    return None


def refuse_to_write(path: str | Path, db: str | Path | None, purpose: str, *, replace_unused: bool = False) -> None:
    """Refuse, before anything is written, to write `purpose` (e.g. "the backup") to a file of a database.

    `replace_unused`: a DuckDB database no process uses may be replaced (a backup over an older backup)."""
    example = "knowledge-backup.duckdb" if replace_unused else "knowledge-export.jsonl"  # a database, or an export
    _refuse_folder_or_blank(path, f"give {purpose} a file name", example)
    reason = (own_file(path, db) if db is not None else None) or database_file(path)
    if reason is None or (replace_unused and reason == "a DuckDB database"):
        return
    raise InvalidInputError(
        f"{path} is {reason}; duckgraph never writes {purpose} over a database's files, in use or not, so nothing "
        "was written: choose another file"
    )


def refuse_to_read(path: str | Path, db: str | Path, purpose: str) -> None:
    """Refuse to read one of the knowledge file's own files as the input of `purpose` (e.g. "import")."""
    reason = own_file(path, db)
    if reason is not None:
        raise InvalidInputError(f"{path} is {reason}, not a file {purpose} can read: give an export file")


def refuse_as_database(path: str | Path) -> None:
    """Refuse to use a folder, a blank name, or another database's write-ahead log, lock or socket as a knowledge
    file."""
    _refuse_folder_or_blank(path, "give --db (DUCKGRAPH_DB) the knowledge file's name", "knowledge.duckdb")
    reason = database_file(path)
    if reason is not None and not reason.startswith("a DuckDB database"):
        raise InvalidInputError(f"{path} is {reason}, not a knowledge file: give the database's own file to --db "
                                "(DUCKGRAPH_DB)")


def refuse_dangling_link(path: str | Path) -> None:
    """Refuse a knowledge file that is a symbolic link to nothing, in the words the store uses when a command that
    writes opens one (plugins/duckdb/connection.py): a command that only reads would otherwise say there is no
    memory, when the memory is where the link points, moved or on a drive not mounted."""
    link = Path(path).expanduser()
    if not link.is_symlink():
        return
    try:
        link.stat()
        return
    except FileNotFoundError:
        missing = "does not exist"
    except OSError as exc:  # a loop of links, a folder without access
        missing = f"cannot be reached ({exc.strerror})"
    raise InvalidInputError(
        f"{link} is a symbolic link to {os.readlink(link)}, which {missing}: if the memory was moved or its drive is "
        "not mounted, mount it or point the link at the memory's file; to start a new memory there, give --db "
        f"(DUCKGRAPH_DB) the target itself, {os.path.realpath(link)}")


def _refuse_folder_or_blank(path: str | Path, advice: str, example: str) -> None:
    """A folder ("", ".") cannot be written as a file, and a blank name (" ") would quietly become a file named by
    spaces."""
    target = resolved(path)
    if target.is_dir():
        raise InvalidInputError(f"{path or '.'} is a folder, not a file: {advice}, e.g. {target / example}")
    if not target.name.strip():
        raise InvalidInputError(f"the file name {target.name!r} is blank: {advice}, e.g. {target.parent / example}")


def is_duckdb_file(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return is_duckdb_header(file.read(12))
    except OSError:
        return False


def _posix_locked(path: Path) -> bool:
    """Whether some process holds a POSIX lock on the file (DuckDB locks a database it opens), asked with
    F_GETLK, which takes none: taking one and closing the file would drop this process's own locks on it."""
    if fcntl is None or not sys.platform.startswith("linux") or struct.calcsize("P") != 8:
        return False
    layout = "hhqqi"  # struct flock on 64-bit Linux: type, whence, start, len, pid (padded to 32 bytes)
    query = struct.pack(layout, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0).ljust(32, b"\0")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
    except OSError:
        return False
    finally:
        os.close(fd)
    return struct.unpack(layout, answer[: struct.calcsize(layout)])[0] != fcntl.F_UNLCK


@dataclass(frozen=True)
class Permissions:
    """What a file written in place of `target` gets (see `permissions_for`)."""

    mode: int  #: permission bits
    exact: bool  #: an existing file's own bits, set as they are; else the umask narrows them
    owner: tuple[int, int] | None  #: the uid and gid of the file replaced; None for a new file


def permissions_for(target: Path, memory: Path | None) -> Permissions:
    """The permissions of a file about to be written at `target` (a path already through its links) with the
    memory file `memory`'s content: a file written over keeps its mode and owner (a chmod or chown the user made
    must not be undone by the next nightly run), a new one gets the memory's mode, without execute bits (a copy is
    no program), narrowed by the umask as any new file is. So a private memory never gives a world-readable copy,
    as a restore keeps a private file private (core/files/backup.py)."""
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return Permissions(stat.S_IMODE(info.st_mode), exact=True, owner=(info.st_uid, info.st_gid))
    try:
        mode = stat.S_IMODE(memory.stat().st_mode) & 0o666 if memory is not None else 0o666
    except OSError:  # no memory file to follow (a store without one): a new file's usual mode
        mode = 0o666
    return Permissions(mode, exact=False, owner=None)


@contextmanager
def created_as(permissions: Permissions) -> Iterator[None]:
    """Files this process creates meanwhile get at most `permissions.mode` from the start: for a file another
    library creates (DuckDB writes a backup's copy), there is no other way to have it private before it holds
    anything. The umask belongs to the whole process, so this only ever narrows it, and briefly: a file another
    thread creates meanwhile is at worst more private than it would be."""
    if os.name != "posix":  # Windows has no such bits
        yield
        return
    old = os.umask(0o077)
    os.umask(old | (0o777 & ~permissions.mode))
    try:
        yield
    finally:
        os.umask(old)


def give_permissions(path: Path, permissions: Permissions, *, fd: int | None = None) -> None:
    """Give the new file (open as `fd`, else at `path`) the owner and then the exact mode of `permissions` (a chown
    clears the set-id bits, so the mode comes last). An owner this user cannot give raises InvalidInputError: the
    file replaced would otherwise change hands silently, and with its mode kept its owner could lose access."""
    if os.name != "posix":
        return
    if permissions.owner is not None:
        info = os.stat(path) if fd is None else os.fstat(fd)
        uid, gid = permissions.owner
        change = (uid if uid != info.st_uid else -1, gid if gid != info.st_gid else -1)
        if change != (-1, -1):
            try:
                if fd is None:
                    os.chown(path, *change)
                else:
                    os.fchown(fd, *change)
            except PermissionError as exc:
                raise InvalidInputError(
                    f"the file it would replace belongs to uid {uid}, gid {gid}, and a file written by this user "
                    f"cannot be given that owner ({exc.strerror}): run the command as that user, or remove the "
                    "file or choose another name") from exc
    if permissions.exact:
        if fd is None:
            os.chmod(path, permissions.mode)
        else:
            os.fchmod(fd, permissions.mode)
