"""A backup: a consistent copy of the knowledge file, taken while it stays in use."""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from duckgraph.core.files.paths import refuse_to_write
from duckgraph.ports import InvalidInputError, StoreError

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
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.partial")
    with kb.writes_paused():  # the counts below are those of the copy
        _copy_into_place(kb, partial, target)
        _sync_folder(target.parent)
        stats = kb.store.stats()
    return {"path": str(target), "bytes": target.stat().st_size,
            **{key: stats[key] for key in ("nodes", "edges", "documents", "chunks")}}


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
