"""Maps an import keeps from line to line (the file's ids and keys that later lines may name), held on disk so
that an import's memory does not grow with its file: SQLite's private temporary database (deleted when closed),
of which only a bounded page cache stays in memory."""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Hashable, Iterator, MutableMapping
from typing import Any

#: Pages SQLite keeps in memory per map (negative: KiB).
CACHE_KIB = 8 * 1024


class SpilledMap(MutableMapping):
    """A dict whose keys and values are pickled into a temporary SQLite table. Keys must pickle the same way each
    time (ints, strings and tuples of them do)."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self._db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("CREATE TABLE map (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")

    def __getitem__(self, key: Hashable) -> Any:
        row = self._db.execute("SELECT value FROM map WHERE key = ?", (_packed(key),)).fetchone()
        if row is None:
            raise KeyError(key)
        return pickle.loads(row[0])

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self._db.execute("INSERT OR REPLACE INTO map VALUES (?, ?)", (_packed(key), _packed(value)))

    def __delitem__(self, key: Hashable) -> None:
        if self._db.execute("DELETE FROM map WHERE key = ?", (_packed(key),)).rowcount == 0:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return self._db.execute("SELECT 1 FROM map WHERE key = ?", (_packed(key),)).fetchone() is not None

    def __iter__(self) -> Iterator[Any]:
        return (pickle.loads(key) for (key,) in self._db.execute("SELECT key FROM map").fetchall())

    def __len__(self) -> int:
        return self._db.execute("SELECT count(*) FROM map").fetchone()[0]

    def add(self, key: Hashable) -> None:
        """Use as a set: `key in m` after `m.add(key)`."""
        self[key] = None

    def close(self) -> None:
        self._db.close()


def _packed(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
