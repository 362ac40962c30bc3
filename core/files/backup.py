"""A backup: a consistent copy of the knowledge file, taken while it stays in use; and a restore, which puts one
back in place of the knowledge file."""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.core.files.paths import in_use, is_duckdb_file, own_file, refuse_to_write
from duckgraph.core.sharing.lock import LockFile, holder, lock_path, supported
from duckgraph.ports import DuckgraphError, InvalidInputError, StoreError

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
    _check_target(target, getattr(kb.store, "path", None), force)
    partial = _partial_of(target)
    with kb.writes_paused():  # the counts below are those of the copy
        # Within this process backups wait for one another here, so every leftover is another process's.
        remove_leftovers(target.parent, target.name)
        _copy_into_place(kb, partial, target)
        _sync_folder(target.parent)
        held = counts(kb)
    return {"path": str(target), "bytes": target.stat().st_size, **held}


def counts(kb: KnowledgeBase) -> dict[str, int]:
    """What a backup or a restore reports the copy holds (all namespaces)."""
    stats = kb.store.stats()
    return {key: stats[key] for key in ("nodes", "edges", "documents", "chunks")}


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
    backup, target = Path(source).expanduser().absolute(), Path(db).expanduser().absolute()
    _check_restore(backup, target)
    lock = LockFile(lock_path(target)) if supported() else None
    if lock is not None and not lock.acquire(blocking=False):
        info = holder(target) or {}
        command = f"`duckgraph {info['command']}`" if info.get("command") else "a duckgraph server"
        raise StoreError(f"{target} is in use by {command} (pid {info.get('pid', '?')}): stop it (and the MCP "
                         "clients that start it), then restore; nothing was changed")
    try:
        with _held(target):
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
    finally:
        if lock is not None:
            lock.release()
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


class _held:
    """Hold a POSIX lock on `path` as DuckDB does on a file it opens: refused while a process has it open, and
    until released no process can open it (not even between the check and the rename)."""

    def __init__(self, path: Path) -> None:
        self.path, self.fd = path, None

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
                "using DuckDB): let it finish or close it, then restore; nothing was changed") from exc

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the lock


def _move_aside(target: Path) -> list[Path]:
    """Rename the knowledge file and its write-ahead log to one new name (the log first: if this stops midway the
    file is whole without it, and the log is kept); returns the new paths."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = target.with_name(f"{target.name}.before-restore-{stamp}")
    n = 1
    while aside.exists() or _wal_of(aside).exists():
        n += 1
        aside = target.with_name(f"{target.name}.before-restore-{stamp}-{n}")
    kept = []
    for current, new in ((_wal_of(target), _wal_of(aside)), (target, aside)):
        if current.exists():
            os.rename(current, new)
            kept.append(new)
    return kept[::-1]


def _copy_into_place(kb: KnowledgeBase, partial: Path, target: Path) -> None:
    """Copy the file to `partial`, then rename it to `target`; whatever happens, no partial file is left."""
    try:
        kb.store.backup(partial)
        if _wal_of(partial).exists():
            raise StoreError(f"the copy {partial} was left with a write-ahead log; nothing was kept")
        # A write-ahead log of the file being replaced would be replayed onto the copy: remove it first.
        _wal_of(target).unlink(missing_ok=True)
        os.replace(partial, target)
    except OSError as exc:
        raise StoreError(f"could not write the backup {target}: {exc}") from exc
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
    backup or restore can tell the copy of a process that was killed from one being written (`leftovers`)."""
    return target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.partial")


_PARTIAL = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{12}\.partial(\.wal)?")


def leftovers(folder: Path, name: str | None = None) -> list[Path]:
    """The temporary copies (and their logs) that a backup or restore killed midway left in `folder` (of the file
    `name`, or of any): those whose process no longer runs."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    return [entry for entry in entries
            if (found := _PARTIAL.fullmatch(entry.name)) and name in (None, found["name"])
            and not _running(int(found["pid"]))]


def remove_leftovers(folder: Path, name: str) -> None:
    for leftover in leftovers(folder, name):
        try:
            leftover.unlink()
            log.warning("removed %s, left by a backup or restore that was interrupted", leftover)
        except OSError as exc:
            log.warning("could not remove %s, left by an interrupted backup or restore: %s", leftover, exc)


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
