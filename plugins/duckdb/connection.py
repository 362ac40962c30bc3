"""Opening the DuckDB file, and what the user reads when that, or a write, fails: a file this user cannot write is
opened read-only (reads work, writes say why not), a lock held by another program is named, and a write that
fails for lack of space or permission says what was kept. A damaged file (truncated, overwritten) says so in one
line, with what to do, wherever DuckDB notices it: at connect or while the store loads its tables. A file that is
no DuckDB database (another program's SQLite file, a text file, an empty file), or no regular file at all (a pipe, a
device, a symbolic link to nothing), is refused before DuckDB sees it."""

from __future__ import annotations

import logging
import os
import re
import shlex
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duckgraph.ports import StoreError, interruption
from duckgraph.ports.store import duckgraph_command, is_duckdb_header, special_file
from duckgraph.ports.users import login, user_name

log = logging.getLogger(__name__)

#: OS error texts in DuckDB's messages -> what went wrong, in words the user can act on.
_STORAGE_PROBLEMS = (
    ("no space left on device", "disk full"),
    ("disk quota exceeded", "disk full"),
    ("file too large", "disk full or file size limit reached"),
    ("permission denied", "not writable"),
    ("operation not permitted", "not writable"),  # EPERM: an immutable or append-only file, a sandbox's refusal
    ("read-only file system", "not writable"),
)
#: DuckDB's words for a file it cannot read as a database: cut short, blocks overwritten, or not a database at all.
_DAMAGE = ("could not read enough bytes", "not a valid duckdb database file", "corrupt database file",
           "does not match stored checksum")
#: The first bytes of other programs' files DuckDB would open as databases of its own kind.
_FOREIGN = ((b"SQLite format 3\0", "a SQLite database"),)


def why_read_only(path: Path) -> str:
    """Create the file's folder; then why this user cannot write the file ("" when it can), logged."""
    refuse_foreign(path)  # before a misleading "read-only" warning about a file that is no memory at all
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder for {path}: {exc}") from exc
    reason = _unwritable_reason(path)
    if reason:
        log.warning("%s is read-only (%s): opened for reading only", path, reason)
    return reason


def connect(path: Path, read_only: bool) -> tuple[Any, str]:
    """A connection to the file, and why it is read-only when DuckDB refused to open it for writing although the
    checks of `why_read_only` passed ("" otherwise)."""
    import duckdb  # imported on open so that registering the plugin stays cheap

    refuse_foreign(path)
    try:
        try:
            return duckdb.connect(str(path), read_only=read_only), ""
        except duckdb.IOException as exc:
            if read_only or storage_problem(str(exc)) != "not writable" or not path.is_file():
                raise
            con = duckdb.connect(str(path), read_only=True)
            reason = f"DuckDB cannot open it for writing: {one_line(exc)}"
            log.warning("%s is read-only (%s): opened for reading only", path, reason)
            return con, reason
    except duckdb.IOException as exc:
        raise (damaged(path, exc) or StoreError(_explain_open_error(path, exc))) from exc
    except duckdb.Error as exc:
        raise unusable(path, exc) from exc


def unusable(path: Path, exc: BaseException) -> StoreError:
    """The one-line error for a DuckDB error met while opening or first reading the file: damaged, or what DuckDB
    said."""
    return damaged(path, exc) or StoreError(f"{path} is not a usable DuckDB file: {one_line(exc)}"
                                            f"{_replay_advice(path, exc)}")


def refuse_foreign(path: Path) -> None:
    """Refuse, before DuckDB opens it, a path that cannot be a memory: a folder, a pipe, device or socket (reading
    a pipe waits for a writer for ever), a symbolic link to nothing (DuckDB cannot create a file behind a link whose
    folder is gone, and one whose drive is not mounted would start an empty memory in its place), an empty file
    (DuckDB refuses those), or another program's file: its header would make DuckDB load an extension for it (a
    SQLite file's) or call it damaged. A file of unknown binary content is left to DuckDB, which tells a damaged
    memory apart."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if path.is_symlink():
            missing = ("does not exist" if isinstance(exc, FileNotFoundError)
                       else f"cannot be reached ({exc.strerror})")  # a loop of links, a folder without access
            raise StoreError(
                f"{path} is a symbolic link to {os.readlink(path)}, which {missing}: if the memory was moved or its "
                "drive is not mounted, mount it or point the link at the memory's file; to start a new memory there, "
                f"give --db (DUCKGRAPH_DB) the target itself, {os.path.realpath(path)}") from exc
        return  # a new memory; or one DuckDB's own error explains (a folder on the way is a file, no permission)
    if stat.S_ISDIR(mode):
        raise StoreError(f"{path} is a folder, not a file: give the store (--db, DUCKGRAPH_DB) the memory's file "
                         f"name, e.g. {path / 'knowledge.duckdb'}")
    if kind := special_file(mode):
        raise StoreError(f"{path} is {kind}, not a file: a memory is kept in a regular file. Give --db "
                         "(DUCKGRAPH_DB) the memory's file, or a new file name to start one; nothing was read")
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except FileNotFoundError:
        return  # a new memory
    except OSError:
        return  # unreadable: DuckDB's own error says why
    if not head:
        raise StoreError(
            f"{path} is empty (0 bytes): it holds no memory, and DuckDB cannot open an empty file. Delete it and "
            f"duckgraph creates a new memory there; if it was a memory, it is damaged (cut to nothing): restore it "
            f"from a backup with `duckgraph restore BACKUP --db {path}`. `duckgraph doctor` checks a file.")
    if is_duckdb_header(head):
        return
    kind = next((what for magic, what in _FOREIGN if head.startswith(magic)), None)
    if kind is None and b"\0" not in head:
        try:
            head.decode("utf-8")
            kind = "a text file"
        except UnicodeDecodeError as exc:
            if exc.reason == "unexpected end of data":  # the 4096th byte cut a character in two
                kind = "a text file"
    if kind is not None:
        raise StoreError(
            f"{path} is not a duckdb memory (it looks like {kind}): duckgraph left it as it is. Give --db "
            "(DUCKGRAPH_DB) the memory's file, or a new file name to start one; `duckgraph doctor` shows which file "
            "is used.")


def damaged(path: Path, exc: BaseException) -> StoreError | None:
    """The one-line error for a file DuckDB cannot read as a database (`exc` says so), else None."""
    if not any(needle in str(exc).lower() for needle in _DAMAGE):
        return None
    return StoreError(
        f"{path} is damaged (cut short or overwritten): DuckDB cannot read it ({one_line(exc)[:200]}). Restore it "
        f"from a backup with `duckgraph restore BACKUP --db {path}` (`duckgraph backup` makes one; a copy by hand "
        f"must move {path.name}.wal aside too), or move it aside to start a new file; `duckgraph doctor` checks a "
        "file."
    )


def _replay_advice(path: Path, exc: BaseException) -> str:
    """What to do when DuckDB failed to replay the write-ahead log beside the file: often a log left there by
    another file (the file was replaced by a copy, or removed), which DuckDB cannot tell from the file's own."""
    if "replaying wal" not in str(exc).lower():
        return ""
    return (f". Its write-ahead log {path.name}.wal could not be applied to it: if {path.name} was replaced by a "
            f"copy (a backup) or removed, that log belongs to the file that was there; move {path.name}.wal aside "
            "(keep it with that file) and open again. `duckgraph restore` does this when it restores a backup")


def _unwritable_reason(path: Path) -> str:
    """Why this user cannot write the database (file, its WAL or folder), or "" when it can.

    Raises StoreError when the file does not exist and cannot be created. (root passes every access check.)
    """
    folder = path.parent
    wal = path.with_name(path.name + ".wal")
    try:
        read_only_fs = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only_fs = False
    if not path.exists():
        if read_only_fs or not os.access(folder, os.W_OK | os.X_OK):
            raise StoreError(
                f"cannot create {path}: the folder {folder} is "
                f"{'on a read-only file system' if read_only_fs else 'not writable by this user'}. "
                "Choose another file with --db or DUCKGRAPH_DB."
            )
        return ""
    if read_only_fs:
        return f"it is on a read-only file system ({folder})"
    if not os.access(path, os.W_OK):
        return "the file is not writable by this user"
    if wal.exists() and not os.access(wal, os.W_OK):
        owner = _foreign_owner(wal)
        return f"its write-ahead log {wal.name} is not writable by this user" + (f": it belongs to {owner}"
                                                                                 if owner else "")
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is not writable by this user (DuckDB keeps its write-ahead log there)"
    return ""


def _explain_open_error(path: Path, exc: Exception) -> str:
    message = str(exc)
    if "lock" in message.lower():
        # DuckDB names the holder: '... Conflicting lock is held in /usr/bin/python3.11 (PID 1081) by user ...'
        held = re.search(r"held in (?P<program>.+?) \(PID (?P<pid>\d+)\)", message)
        command = duckgraph_command(int(held["pid"])) if held else None
        if command in ("serve", "ui"):
            return (f"{path} is locked: a duckgraph server (`duckgraph {command}`, PID {held['pid']}) holds it; "
                    "use the memory through it, or stop it, or point duckgraph at another file with --db / "
                    "DUCKGRAPH_DB.")
        if command:
            return (f"{path} is locked: duckgraph's own command `duckgraph {command}` (PID {held['pid']}) is "
                    "using it, and DuckDB lets only one process open a file for writing: wait for it to finish "
                    "(or stop it), then try again.")
        holder = (f"another program, {held['program']} (PID {held['pid']}), holds it"
                  if held else f"another process holds it ({message.strip()})")
        return (
            f"{path} is locked: {holder}, and DuckDB lets only one process open a file for writing. duckgraph "
            "servers share a file among themselves, but not with other programs, nor with duckgraph's own commands "
            "(ingest, import...) while they run: wait for such a command to finish, close that program (or its "
            "connection to the file), or point duckgraph at another file with --db / DUCKGRAPH_DB."
        )
    if "permission" in message.lower() or "read-only" in message.lower():
        return f"cannot open {path}: {message.strip()} (check the file and folder permissions)"
    return f"cannot open {path}: {message.strip()}"


def read_only_message(path: Path, reason: str) -> str:
    """What a refused write says when the file is open read-only."""
    wal = path.with_name(path.name + ".wal")
    fix = "make the file and its folder writable by this user"
    if reason.startswith("its write-ahead log"):
        # The file and folder are writable: only the log is not (a server run as root and killed leaves it so).
        # Deleting it would lose the last writes, which are in it alone.
        keep = "do not delete it: it holds the last changes, not yet in the file"
        if owner := _foreign_owner(wal):
            fix = (f"have {owner} or an administrator give {wal.name} to this user (`chown {login(os.getuid())} "
                   f"{shlex.quote(str(wal))}`; {keep})")
        else:
            fix = f"make {wal.name} writable (`chmod u+w {shlex.quote(str(wal))}`; {keep})"
    return (
        f"this knowledge file is read-only: {path} ({reason or 'opened read-only'}). "
        f"Searches and reads work; to add or change knowledge, {fix}, or copy it somewhere writable (duckgraph "
        "backup) and point --db / DUCKGRAPH_DB at the copy."
    )


def _foreign_owner(path: Path) -> str | None:
    """The user who owns `path` when that is another user than this one ("root (uid 0)"), else None."""
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return None
    return None if uid == os.getuid() else user_name(uid)


def write_failure(path: Path, exc: BaseException, reopen: Callable[[], str]) -> StoreError | None:
    """A StoreError naming the file when `exc` is DuckDB failing to write it (disk full, permissions), else None.

    DuckDB rolls a failed commit back. When a checkpoint fails it invalidates the database instead (what was
    committed is safe in the write-ahead log): `reopen` then opens the file again, which also rebuilds the
    in-memory mirror from what the file holds, and says how that went.
    """
    import duckdb

    if not isinstance(exc, duckdb.Error):
        return None
    message = str(exc)
    fatal = isinstance(exc, duckdb.FatalException)
    problem = storage_problem(message)
    if problem is None and not fatal:
        return None
    reopened = reopen() if fatal else ""
    if "COMMIT succeeded" in message:
        outcome = (
            f"The change itself was saved (in {path.name}.wal), but DuckDB could not fold it into the "
            f"file{reopened}. Free some disk space; nothing is lost."
        )
    else:
        outcome = f"Nothing of this change was saved; everything stored before is intact{reopened}."
        if problem in ("disk full", "disk full or file size limit reached"):
            outcome += " Free some disk space and try again."
        elif problem == "not writable":
            outcome += " Make the file and its folder writable by this user."
    error = StoreError(f"could not write to {path}: {problem or 'DuckDB failed'} ({one_line(exc)}). {outcome}")
    log.warning("%s", error)  # the caller is told; whoever runs the server must see the storage trouble too
    return error


def storage_problem(message: str) -> str | None:
    """'disk full', 'not writable', 'I/O error' when a DuckDB message is about writing a file, else None."""
    lowered = message.lower()
    for needle, problem in _STORAGE_PROBLEMS:
        if needle in lowered:
            return problem
    if "could not write file" in lowered or "io error" in lowered:
        return "I/O error"
    return None


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400]


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` is Ctrl-C or SIGTERM rather than a failure (see `interruption`)."""
    return interruption(exc) is not None


def cancel_if_interrupted(con: Any, exc: BaseException) -> None:
    """Stop the query that `exc` interrupted, when it is an interruption: DuckDB stops waiting for it, but lets it
    run on, and the next statement on `con` (a rollback, a checkpoint, a close) would wait until it ends (a whole
    backup's copy, a whole scan) before the command could stop."""
    if interrupted(exc):
        con.interrupt()
