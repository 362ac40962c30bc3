"""Reading what a closed memory file holds, beside the store under test."""

from __future__ import annotations

from pathlib import Path

import duckdb


def file_meta(path: Path) -> dict[str, str]:
    """The file's `meta` table (schema version, embedder, ...), read with a connection of its own."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    finally:
        con.close()
