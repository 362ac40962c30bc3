"""Whether the file at the store's path is still the one the store opened. A file deleted, moved or replaced while
a server runs stays open and writable to DuckDB, so writes would be acknowledged and end up in a file nobody will
open at that path again (or vanish with the process). The store compares the file's identity (device and inode)
at open with the one at its path before each commit, and refuses the write when they differ (see `moved_message`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: (st_dev, st_ino): which file a path names, whatever its name.
Identity = tuple[int, int]
#: Where Linux lists a process's open files: each entry a link to the file's path now, "... (deleted)" if removed.
_OPEN_FILES = Path("/proc/self/fd")
_DELETED = " (deleted)"


def identity(path: Path) -> Identity | None:
    """The identity of the file at `path`, None when there is none. OSError when it cannot be told (a folder on the
    way that this user may no longer search)."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return found.st_dev, found.st_ino


def moved_message(path: Path, opened: Identity) -> str | None:
    """Why a write must not go to the file opened as `opened` (None when it is still the file at `path`): the
    refusal, with where the open file is now and what to do, as far as this system tells."""
    try:
        now = identity(path)
    except OSError as exc:
        return (f"cannot check that {path} is still the memory file this server opened ({exc.strerror or exc}); "
                "nothing was written. Make its folder accessible to this user again, or restart the server")
    if now == opened:
        return None
    found = _open_file(opened)
    restart = f"restart the server to use the file now at {path}" if now is not None else (
        f"restart the server: it starts a new, empty memory at {path}")
    if found is None:  # no /proc here (macOS), or DuckDB no longer holds it: where it went is not known
        return (f"the memory file {path} was deleted, moved or replaced by another file while this server ran; "
                f"nothing was written. Put it back, or {restart}")
    if found.deleted:
        what = "" if now is None else ", and another file is there now"
        return (f"the memory file {path} was deleted while this server ran{what}; nothing was written. What it held "
                "is only in this server's open copy now, lost when the server stops (searches answer from it until "
                f"then). To keep it, copy it before stopping the server: {found.rescue()}. Otherwise {restart}")
    if now is None:
        return (f"the memory file {path} was moved to {found.path} while this server ran; nothing was written. "
                f"Everything written before is in {found.path}: move it back to {path} (then writes work again), "
                f"or restart the server with --db {found.path} (DUCKGRAPH_DB)")
    return (f"the memory file {path} was replaced by another file while this server ran; nothing was written. The "
            f"file this server opened is now {found.path}, with everything written before: {restart}, or with "
            f"--db {found.path} (DUCKGRAPH_DB) to go on with that one")


@dataclass(frozen=True)
class _OpenFile:
    """The file this process holds open: its path now (as /proc says it), whether it was deleted, and the
    descriptors of it and of its write-ahead log (where DuckDB holds one open)."""

    path: str
    deleted: bool
    fd: str
    wal_fd: str | None

    def rescue(self) -> str:
        """The commands that copy the deleted file (and its log) from this process back to files of their own."""
        pid, name = os.getpid(), Path(self.path).name
        copy = f"cp /proc/{pid}/fd/{self.fd} RESCUED/{name}"
        if self.wal_fd is not None:
            copy += f" && cp /proc/{pid}/fd/{self.wal_fd} RESCUED/{name}.wal"
        return f"`{copy}` (RESCUED: a folder of your choice), then use --db RESCUED/{name}"


def _open_file(opened: Identity) -> _OpenFile | None:
    """The open file `opened` as /proc tells it; None when this system does not tell (or it is not open)."""
    try:
        descriptors = os.listdir(_OPEN_FILES)
    except OSError:
        return None
    targets: dict[str, str] = {}
    found = None
    for fd in descriptors:
        link = _OPEN_FILES / fd
        try:
            target = os.readlink(link)
            held = os.stat(link)
        except OSError:  # closed meanwhile (listdir's own descriptor among them)
            continue
        targets[target] = fd
        if (held.st_dev, held.st_ino) == opened:
            found = (target, fd)
    if found is None:
        return None
    target, fd = found
    deleted = target.endswith(_DELETED)
    path = target[: -len(_DELETED)] if deleted else target
    return _OpenFile(path, deleted, fd, targets.get(f"{path}.wal{_DELETED if deleted else ''}"))
