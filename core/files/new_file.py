"""A database file a command creates, removed again when the command fails before the file holds anything (a
failed import, an ingest whose embedder failed): nobody asked for an empty file, and doctor and the next commands
would take it for a memory."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def holds_nothing(kb: Any) -> bool:
    """Whether the open file holds no document, passage, entity or relation; False when that cannot be read (the
    file is then kept: it may hold what was stored)."""
    try:
        counts = kb.store.stats()
    except Exception:
        log.debug("cannot count what the file holds", exc_info=True)
        return False
    return not any(counts[key] for key in ("documents", "chunks", "nodes", "edges"))


class NewFile:
    """The database file a command is about to create (it is not there yet), with what opening it makes beside it:
    its write-ahead log and the missing folders above it. `remove` removes them again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.new = not os.path.lexists(path)  # a link to nothing is not new: the store refuses it
        # Only what is not there now: a write-ahead log left by an older file of that name is not this command's.
        self._files = [p for p in (path, path.with_name(path.name + ".wal")) if not os.path.lexists(p)]
        self._folders: list[Path] = []
        parent = path.parent
        while not os.path.lexists(parent):
            self._folders.append(parent)
            parent = parent.parent

    def remove(self) -> str:
        """Remove the file, its write-ahead log and the folders made for them, once the file is closed; what to say
        of it: that the file was not created, or what could not be removed."""
        left = []
        for file in self._files:
            try:
                file.unlink(missing_ok=True)
            except OSError as exc:
                left.append(f"{file} ({exc.strerror or exc})")
        for folder in self._folders:  # deepest first; one that holds something else now is not this command's
            try:
                folder.rmdir()
            except OSError:
                break
        if left:
            return f"what it created could not be removed, {', '.join(left)}: delete it, it holds nothing"
        return f"{self.path} was not created"
