"""A backup: a consistent copy of the knowledge file, taken while it stays in use; a restore, which puts one back
in place of the knowledge file; and a compact, which puts a copy of the file in its own place, without the free
blocks that deleted and replaced rows leave (DuckDB reuses them, but a file never shrinks)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.core.files.paths import (
    Permissions,
    created_as,
    give_permissions,
    in_use,
    is_duckdb_file,
    own_file,
    permissions_for,
    refuse_to_write,
)
from duckgraph.core.sharing.lock import LockFile, LockFileError, holder, lock_path, supported, waiting
from duckgraph.ports import DuckgraphError, InvalidInputError, StoreError
from duckgraph.ports.store import duckgraph_command, special_file

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase

log = logging.getLogger(__name__)


def backup(kb: KnowledgeBase, destination: str | Path, *, force: bool = False) -> dict[str, Any]:
    """Write a consistent copy of the knowledge base to the file `destination`, while it stays in use.

    The copy is taken at one moment (writes wait until it is done), written under a temporary name in the
    destination's folder and renamed into place: the destination is the whole copy or untouched, never half a
    file. An existing destination is refused unless `force`; the knowledge file and the write-ahead log, lock and
    socket of any database always are, and so is a database in use (core/files/paths.py). A relative
    destination is taken from this process's working directory. Returns the destination, its size in bytes
    and the counts it holds.
    """
    target = Path(destination).expanduser().absolute()
    memory = getattr(kb.store, "path", None)
    _check_target(target, memory, force)
    # Through a symbolic link its target is replaced and the link stays, as restore and compact keep a --db link: a
    # link into a synced folder must keep pointing at the latest backup, not at the one before.
    written = target.resolve()
    if not written.parent.is_dir():
        raise InvalidInputError(f"{target} is a symbolic link into the folder {written.parent}, which does not "
                                "exist; create it first or choose another destination")
    partial = _partial_of(written)
    with kb.writes_paused():  # the counts below are those of the copy
        # Within this process backups wait for one another here, so every leftover is another process's.
        remove_leftovers(written.parent, written.name)
        logs = dict.fromkeys([_wal_of(written), _wal_of(target)])  # one log, or the target's and the link's
        _copy_into_place(kb, partial, written, permissions_for(written, memory), list(logs))
        _sync_folder(written.parent)
        held = counts(kb)
    return {"path": str(target), "bytes": written.stat().st_size, **held}


def counts(kb: KnowledgeBase, at: datetime | None = None) -> dict[str, int]:
    """What a backup or a restore reports the copy holds (all namespaces). Relations are counted with the ended
    ones (`edges_ended` of them, ended by `at`, default now): the history is part of what a copy must hold, and
    counting only those that hold now would let a copy that lost it pass a check."""
    stats = kb.store.stats()
    relations = kb.store.relation_counts(at or datetime.now(timezone.utc))
    return {"nodes": stats["nodes"], "edges": relations["edges"], "edges_ended": relations["edges_ended"],
            "documents": stats["documents"], "chunks": stats["chunks"]}


def restore(source: str | Path, db: str | Path, check: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Put the backup `source` in place of the knowledge file `db`, and keep what was there.

    A copy by hand is not enough: DuckDB replays the write-ahead log beside a file (`db`.wal, left by a crash)
    onto whatever file is at `db`, and cannot tell that the log belongs to another one. So the file and its log
    are moved aside together, under a new name that keeps them a pair (`db`.before-restore-TIME and its .wal),
    and the backup is copied in under a temporary name, opened by `check` (which returns its counts: a damaged
    backup is refused here) and renamed into place. Refused while any process has `db` open (a duckgraph server
    or command, another program), and, until it is done, so is every process that opens `db`. Returns the paths
    and the counts of the restored file.
    """
    # Through a symbolic link the file is replaced, not the link (as compact does): a host that opens the file by
    # its own path must see the restored memory, not keep the old one under a second name.
    backup, target = Path(source).expanduser().absolute(), Path(db).expanduser().resolve()
    _check_restore(backup, target)
    with _owned(target, "restore"):
        with _held(target, "restore"):
            remove_leftovers(target.parent, target.name)  # the file's lock is ours: none is being written
            partial = _partial_of(target)
            try:
                shutil.copyfile(backup, partial)
                # The file's permissions stay those it had (a private file stays private), else the backup's.
                shutil.copymode(target if target.exists() else backup, partial)
                _sync_file(partial)
                try:
                    held = check(partial)
                except DuckgraphError as exc:
                    raise StoreError(f"{backup} cannot be restored ({exc}); {target} is unchanged") from exc
                if _wal_of(partial).exists():
                    raise StoreError(f"the copy {partial} was left with a write-ahead log")
                kept = _move_aside(target)
                os.replace(partial, target)
            except OSError as exc:
                raise StoreError(f"could not restore {backup} to {target}: {exc}; {target} is unchanged") from exc
            finally:
                for leftover in (partial, _wal_of(partial)):
                    leftover.unlink(missing_ok=True)
            _sync_folder(target.parent)
    return {"path": str(target), "backup": str(backup), "bytes": target.stat().st_size,
            "kept": [str(path) for path in kept], **held}


def _check_restore(backup: Path, target: Path) -> None:
    """Refuse, before anything is changed, a backup that cannot be restored as it is."""
    if not backup.is_file():
        raise InvalidInputError(f"there is no backup file at {backup}" + (" (it is a folder)" if backup.is_dir()
                                                                         else ""))
    if own_file(backup, target):
        raise InvalidInputError(f"{backup} is {own_file(backup, target)}, not a backup of it: give the backup's file")
    if not is_duckdb_file(backup):
        raise InvalidInputError(f"{backup} is not a DuckDB file (or not readable), so not a backup made by `duckgraph "
                                "backup`; an export (JSON Lines) is read with `duckgraph import`")
    if use := in_use(backup):
        raise StoreError(f"{backup} is in use ({use}): a restore copies the file alone. Let it be closed, or open "
                         f"it once with duckgraph (duckgraph stats --db {backup}) to fold its log in, then restore")
    if target.is_dir():
        raise InvalidInputError(f"{target} is a folder: give --db the knowledge file to restore")
    if not target.parent.is_dir():
        raise InvalidInputError(f"the folder {target.parent} does not exist; create it first")
    if not os.access(target.parent, os.W_OK | os.X_OK):  # the copy goes in beside the file, then is renamed over it
        raise StoreError(f"cannot write the restored copy beside {target}: the folder {target.parent} is not "
                         "writable by this user; nothing was changed")


def compact(db: str | Path, open_kb: Callable[[Path], AbstractContextManager[KnowledgeBase]], *,
            keep_old: bool = False) -> dict[str, Any]:
    """Put a compact copy of the knowledge file `db` in its place: the same rows, without the free blocks that
    deleted and replaced rows left (DuckDB reuses them for later writes, but never gives them back).

    The file is opened with `open_kb` (which replays a write-ahead log left by a crash, and folds it into the
    file when it closes), copied as `backup` copies it (COPY FROM DATABASE writes no free block) under a temporary
    name beside it, and the copy, given the file's permissions and owner, is opened with `open_kb` and refused
    unless it holds the same counts. Then it is renamed over the file, which removes the old one in the same
    step; with `keep_old` the old file is first renamed to `db`.before-compact-TIME (`_move_aside`: between the
    two renames it is whole under that name). Otherwise `db` is the old file or the whole new one at every
    moment: a compact killed midway leaves the old file, and a temporary copy that the next backup, restore or
    compact of the file removes. Refused while any process has `db` open (a duckgraph
    server or command, another program), and, until it is done, so is every process that opens `db`. Returns the
    path, its size before and after, what was kept, and the counts.
    """
    target = Path(db).expanduser().resolve()  # through a symbolic link: the file is replaced, not the link
    _check_compact(target)
    with _owned(target, "compact"):
        with _held(target, "compact"):  # refused here, naming the holder, before the file is opened
            remove_leftovers(target.parent, target.name)
        before = target.stat().st_size
        partial = _partial_of(target)
        at = datetime.now(timezone.utc)  # the file and its copy count the relations ended by the same moment
        try:
            try:
                with open_kb(target) as kb:  # DuckDB's own lock keeps every other process out until it closes
                    with kb.writes_paused():
                        kb.store.backup(partial)
                        held = _compact_counts(kb, at)
            except StoreError as exc:
                raise _not_compacted(target, str(exc)) from exc
            # Closing the file dropped this process's POSIX locks on it (any close of a file drops them all), so
            # the lock is taken again at once: a process that opened the file in between is refused here.
            with _held(target, "compact"):
                if _wal_of(target).exists():
                    raise _not_compacted(target, f"its write-ahead log {_wal_of(target)} could not be folded into "
                                                 "it (see the warnings above)")
                _keep_owner(target, partial)
                _sync_file(partial)
                try:
                    with open_kb(partial) as copy:
                        copied = _compact_counts(copy, at)
                except DuckgraphError as exc:
                    raise _not_compacted(target, f"the compact copy does not open ({exc})") from exc
                if copied != held:
                    raise _not_compacted(target, f"the compact copy holds {_listed(copied)}, the file "
                                                 f"{_listed(held)}")
                if _wal_of(partial).exists():
                    raise _not_compacted(target, f"the copy {partial} was left with a write-ahead log")
                kept = _move_aside(target, "before-compact") if keep_old else []
                try:
                    os.replace(partial, target)
                except OSError:
                    if kept:
                        os.rename(kept[0], target)  # the file back under its name: unchanged after all
                    raise
        except OSError as exc:
            raise _not_compacted(target, str(exc)) from exc
        finally:
            for leftover in (partial, _wal_of(partial)):
                leftover.unlink(missing_ok=True)
        _sync_folder(target.parent)
    return {"path": str(target), "bytes_before": before, "bytes": target.stat().st_size,
            "kept": [str(path) for path in kept], **held}


def _compact_counts(kb: KnowledgeBase, at: datetime) -> dict[str, int]:
    """What a compact checks its copy against: the counts of a backup, and the namespaces."""
    return {**counts(kb, at), "namespaces": len(kb.store.namespaces())}


def _not_compacted(target: Path, why: str) -> StoreError:
    return StoreError(f"could not compact {target}: {why}; {target} is unchanged")


def _listed(held: dict[str, int]) -> str:
    return (f"{held['nodes']} entities, {relations(held)}, {held['documents']} documents, {held['chunks']} passages, "
            f"{held['namespaces']} namespaces")


def relations(held: dict[str, Any]) -> str:
    """The relations of `counts` in words: "12 relations (3 ended)", the ended ones (history) among them."""
    ended = held.get("edges_ended")  # absent from the report of a server of an older duckgraph that made a backup
    return f"{held['edges']} relations" + (f" ({ended} ended)" if ended else "")


def _check_compact(target: Path) -> None:
    """Refuse, before anything is changed, a file that cannot be compacted in place."""
    if not target.exists():
        raise InvalidInputError(f"there is no file at {target}: give --db the memory's file; nothing was changed")
    if target.is_dir():
        raise InvalidInputError(f"{target} is a folder: give --db the memory's file; nothing was changed")
    if not target.is_file():
        raise InvalidInputError(f"{target} is not a regular file: give --db the memory's file; nothing was changed")
    if not is_duckdb_file(target):
        raise InvalidInputError(f"{target} is not a DuckDB file (or not readable): give --db the memory's file; "
                                "nothing was changed")
    if not os.access(target, os.W_OK):
        raise StoreError(f"{target} is not writable by this user, and a compact replaces it; nothing was changed")
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise StoreError(f"cannot write the compact copy beside {target}: the folder {target.parent} is not "
                         "writable by this user; nothing was changed")
    if (links := target.stat().st_nlink) > 1:
        # The new file would take this name only: the other names would keep the old file, and writes to it.
        raise InvalidInputError(f"{target} has {links} names (hard links), and a compact would replace the file "
                                "under this one only: remove the other links first; nothing was changed")


def _keep_owner(target: Path, copy: Path) -> None:
    """Give the copy the file's permissions (a private file stays private) and owner (as root, a user's file stays
    theirs)."""
    shutil.copymode(target, copy)
    info = target.stat()
    mine = copy.stat()
    if (info.st_uid, info.st_gid) != (mine.st_uid, mine.st_gid):
        try:
            os.chown(copy, info.st_uid, info.st_gid)
        except OSError as exc:
            raise _not_compacted(target, f"its copy cannot be given the file's owner (uid {info.st_uid}, gid "
                                         f"{info.st_gid}): {exc.strerror}; run compact as that user") from exc


@contextmanager
def _owned(target: Path, action: str) -> Iterator[None]:
    """Hold the file's duckgraph lock for `action` (as a server or the web UI holds it while they run): refused,
    naming the holder, while one of them runs; one that starts meanwhile waits."""
    lock = LockFile(lock_path(target)) if supported() else None
    try:
        taken = lock is None or lock.acquire(blocking=False)
    except LockFileError as exc:  # a lock file this user cannot make: one line, before anything is changed
        raise StoreError(f"{exc}; nothing was changed") from exc
    if not taken:
        raise StoreError(_in_use(target, action))
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def _in_use(target: Path, action: str) -> str:
    """Why `action` is refused while duckgraph servers hold `target`: the owner, and every server waiting to take
    the file over, which would hold it next once the owner stops, so that one try names all there is to stop."""
    info = holder(target) or {}
    owner = _server(info.get("command"), info.get("pid", "?"))
    waiters = waiting(target)
    if waiters is None:  # this system cannot list them: say that they may be there, and what to do
        return (f"{target} is in use by {owner}: stop it (and the MCP clients that start it), then {action}; nothing "
                "was changed. Any other duckgraph server started on this file waits to take it over when that one "
                "stops (this system cannot list them): stop those too")
    others = [_server(duckgraph_command(pid), pid) for pid in waiters if pid != info.get("pid")]
    if not others:
        return (f"{target} is in use by {owner}: stop it (and the MCP clients that start it), then {action}; nothing "
                "was changed")
    more = ("1 more duckgraph server started on it waits to take it over when that one stops" if len(others) == 1
            else f"{len(others)} more duckgraph servers started on it wait to take it over when that one stops")
    return (f"{target} is in use by {owner}, and {more}: {', '.join(others)}. Stop all of them (and the MCP clients "
            f"that start them), then {action}; nothing was changed")


def _server(command: str | None, pid: object) -> str:
    return f"{f'`duckgraph {command}`' if command else 'a duckgraph server'} (pid {pid})"


class _held:
    """Hold a POSIX lock on `path` as DuckDB does on a file it opens: refused while a process has it open, and
    until released no process can open it (not even between the check and the rename). This process's own
    DuckDB connection to `path` drops the lock when it closes (POSIX locks belong to the process)."""

    def __init__(self, path: Path, action: str) -> None:
        self.path, self.action, self.fd = path, action, None

    def __enter__(self) -> None:
        if fcntl is None or not self.path.exists():
            return
        writable = os.access(self.path, os.W_OK)
        self.fd = os.open(self.path, (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.lockf(self.fd, (fcntl.LOCK_EX if writable else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self.fd)
            raise StoreError(
                f"{self.path} is open in another process (a duckgraph command such as ingest or import, or a program "
                f"using DuckDB): let it finish or close it, then {self.action}; nothing was changed") from exc

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the lock


def _move_aside(target: Path, label: str = "before-restore") -> list[Path]:
    """Rename the knowledge file and its write-ahead log to one new name, `target`.LABEL-TIME (the log first: if
    this stops midway the file is whole without it, and the log is kept); returns the new paths."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = target.with_name(f"{target.name}.{label}-{stamp}")
    n = 1
    while aside.exists() or _wal_of(aside).exists():
        n += 1
        aside = target.with_name(f"{target.name}.{label}-{stamp}-{n}")
    kept = []
    for current, new in ((_wal_of(target), _wal_of(aside)), (target, aside)):
        if current.exists():
            os.rename(current, new)
            kept.append(new)
    return kept[::-1]


def _copy_into_place(kb: KnowledgeBase, partial: Path, target: Path, permissions: Permissions,
                     logs: list[Path]) -> None:
    """Copy the file to `partial`, private from its first byte when the memory is (`permissions`: the file replaced
    keeps its mode and owner, a new one gets the memory's), then rename it to `target`; whatever happens, no
    partial file is left. `logs`: the write-ahead logs to remove first (a log of the file being replaced, beside
    it or beside a link to it, would be replayed onto the copy)."""
    try:
        with created_as(permissions):  # DuckDB creates the copy: only the umask keeps it closed from the start
            kb.store.backup(partial)
        if _wal_of(partial).exists():
            raise StoreError(f"the copy {partial} was left with a write-ahead log; nothing was kept")
        try:
            give_permissions(partial, permissions)
        except InvalidInputError as exc:
            raise InvalidInputError(f"could not write the backup {target}: {exc}; nothing was written there") from exc
        for log_file in logs:
            log_file.unlink(missing_ok=True)
        os.replace(partial, target)
    except OSError as exc:
        why = exc.strerror or str(exc)  # the cause, not the temporary file's name
        raise StoreError(f"could not write the backup {target}: {why}; nothing was written there") from exc
    except StoreError as exc:
        raise StoreError(f"backup to {target} failed, nothing was written there: {exc}") from exc
    finally:
        for leftover in (partial, _wal_of(partial)):
            try:
                leftover.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not remove %s: %s", leftover, exc)


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def _partial_of(target: Path) -> Path:
    """The temporary name a copy is written under, beside `target`: it carries this process's id, so that a later
    backup, restore or compact can tell the copy of a process that was killed from one being written (`leftovers`)."""
    return target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.partial")


_PARTIAL = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{12}\.partial(\.wal)?")


def leftovers(folder: Path, name: str | None = None) -> list[Path]:
    """The temporary copies (and their logs) that a backup, restore or compact killed midway left in `folder` (of
    the file `name`, or of any): those whose process no longer runs."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [entry for entry in entries
            if (found := _PARTIAL.fullmatch(entry.name)) and name in (None, found["name"])
            and not _running(int(found["pid"]))]


def leftover_of(leftover: Path) -> str:
    """The name of the file whose temporary copy `leftover` (one of `leftovers`) is: the knowledge file's for a
    restore or compact of it, a backup's destination's for a backup."""
    found = _PARTIAL.fullmatch(leftover.name)
    if found is None:
        raise ValueError(f"{leftover} is not a temporary copy of a backup, restore or compact")
    return found["name"]


#: What `_move_aside` names a file it keeps: NAME.LABEL-YYYYMMDD-HHMMSS[-N], and its write-ahead log (.wal).
_ASIDE = re.compile(r"(?P<name>.+)\.(?P<label>before-restore|before-compact)-\d{8}-\d{6}(-\d+)?(\.wal)?")


def kept_aside(folder: Path, name: str) -> list[tuple[Path, str]]:
    """The files a restore (before-restore) or a `compact --keep-old` (before-compact) of the file `name` in
    `folder` kept, as they were before it, with that label: they stay until the user deletes them."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [(entry, found["label"]) for entry in entries
            if (found := _ASIDE.fullmatch(entry.name)) and found["name"] == name and entry.is_file()]


def remove_leftovers(folder: Path, name: str) -> None:
    for leftover in leftovers(folder, name):
        try:
            leftover.unlink()
            log.warning("removed %s, left by a backup, restore or compact that was interrupted", leftover)
        except OSError as exc:
            log.warning("could not remove %s, left by an interrupted backup, restore or compact: %s", leftover, exc)


def _running(pid: int) -> bool:
    """Whether process `pid` may still run (this one included): only a process known to be gone is not."""
    if os.name != "posix":
        return True  # os.kill(pid, 0) would end the process on Windows
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, or no answer: assume it runs
        return True
    return True


def _check_target(target: Path, source: Path | None, force: bool) -> None:
    """Refuse, before anything is written, a backup destination that cannot or must not be written."""
    refuse_to_write(target, source, "a backup", replace_unused=True)
    try:
        kind = special_file(target.stat().st_mode)
    except OSError:
        kind = None
    if kind:  # a backup is renamed into place, which would replace the device or pipe itself (/dev/null)
        raise InvalidInputError(f"{target} is {kind}, not a file: a backup is a database file; give it a file "
                                "name, e.g. knowledge-backup.duckdb; nothing was written")
    if target.is_dir():
        raise InvalidInputError(
            f"{target} is a folder; give the backup a file name, e.g. {target / 'knowledge-backup.duckdb'}"
        )
    if target.exists() and not force:
        raise InvalidInputError(
            f"{target} exists; choose another name, or replace it with --force (force=true)"
        )
    folder = target.parent
    if not folder.is_dir():
        raise InvalidInputError(f"the folder {folder} does not exist; create it first or choose another destination")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"cannot write a backup into {folder}: the folder is not writable by this user")


def _sync_file(path: Path) -> None:
    with path.open("rb+") as file:
        os.fsync(file.fileno())


def _sync_folder(folder: Path) -> None:
    """Make a rename in `folder` durable (best effort: not every platform can open a folder)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
