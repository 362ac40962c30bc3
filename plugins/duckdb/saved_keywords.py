"""The keyword index saved in the file, so that an open need not split every text again (on a memory of some tens of
thousands of entities, splitting is most of an open's time).

Derived data, as the IVF layouts are (vector_search.py): saved at close when it changed since it was built or read,
and read at open only when it was saved from the tables as they are now (`fingerprint`: every column its texts are
made of) by the same code (`code_digest`: the modules that make and split the texts). Otherwise, or when it cannot
be read, the index is built from the tables as before; a failed save costs the next open a build, nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from importlib import metadata
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from duckgraph.plugins.duckdb import keyword_texts, sql
from duckgraph.plugins.duckdb.connection import interrupted
from duckgraph.plugins.duckdb.mirror import graph, keywords
from duckgraph.ports import names, text

log = logging.getLogger(__name__)

_TABLE = ("CREATE TABLE IF NOT EXISTS keyword_index "
          "(name VARCHAR PRIMARY KEY, saved_at TIMESTAMP NOT NULL, info JSON NOT NULL, data BLOB NOT NULL)")
_NAME = "bm25"

#: Per table, the columns a keyword text may be made of (keyword_texts.py and the graph mirror it reads): a change
#: to any of them changes the fingerprint. More than the texts need only costs a build now and then.
_COLUMNS = {
    "nodes": "id, namespace, name, type, description, aliases, properties",
    "observations": "node_id, text",
    "edges": "id, namespace, source_id, target_id, type, description, valid_from, valid_until",
    "chunks": "id, namespace, document_id, ordinal, text, section",
    "documents": "namespace, id, title",
}


def fingerprint(con: Any) -> str:
    """The rows' count and an order-free digest of the columns above, per table (one scan of each): the sum of the
    rows' hashes, where two equal rows add up (an xor would cancel them, and a pair of duplicates replaced by
    another pair would go unseen)."""
    parts = []
    for table, columns in _COLUMNS.items():
        parts.append(f"(SELECT count(*) || ':' || coalesce(sum(hash({columns})::HUGEINT), 0) FROM {table})")
    return "/".join(con.execute("SELECT " + ", ".join(parts)).fetchone())


@functools.cache  # the code does not change while a process runs
def code_digest() -> str | None:
    """A digest of the code that decides what the index holds (the modules that make and split the texts, and the
    versions of the stemmer and inflection tables they use): an index saved by other code (another version, or a
    change in development) is built again. None when a module's source cannot be read."""
    digest = hashlib.sha256()
    for module in (names, text, keyword_texts, keywords, graph):
        try:
            digest.update(Path(module.__file__ or "").read_bytes())
        except OSError:
            return None
    for package in _WORD_PACKAGES:
        try:
            digest.update(f"{package} {metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package} absent".encode())
    return digest.hexdigest()


#: The packages whose data shape the index's words (ports/text.py): PyStemmer's stems, lemminflect's inflections.
_WORD_PACKAGES = ("PyStemmer", "lemminflect")


def read(con: Any, path: Path) -> keywords.KeywordIndex | None:
    """The index saved in the file, when it was saved from the tables as they are by this code; else None."""
    import duckdb  # imported when a file is opened

    code = code_digest()
    if code is None:
        return None
    try:
        row = con.execute("SELECT info, data FROM keyword_index WHERE name = ?", [_NAME]).fetchone()
    except duckdb.CatalogException:  # a file no index was saved in yet
        return None
    if row is None:
        return None
    info = json.loads(row[0])
    if info.get("code") != code or info.get("fingerprint") != fingerprint(con):
        log.info("%s: the saved keyword index was saved %s; building it again",
                 path, "by other code" if info.get("code") != code else "from other rows")
        return None
    try:
        return keywords.KeywordIndex.from_bytes(row[1])
    except Exception as exc:  # derived data: built again instead
        if interrupted(exc):
            raise
        log.warning("%s: the saved keyword index is unreadable (%s); building it again", path, exc)
        return None


def save(index: keywords.KeywordIndex, transaction: Callable[[], AbstractContextManager[Any]], path: Path) -> None:
    """Save the index with the fingerprint of the tables it was made from (in one transaction, so that the two
    agree), when it changed since it was built or read."""
    code = code_digest()
    if not index.changed or code is None:
        return
    try:
        with transaction() as con:
            info = {"code": code, "fingerprint": fingerprint(con)}
            data = index.to_bytes()
            con.execute(_TABLE)
            con.execute("INSERT OR REPLACE INTO keyword_index VALUES (?, ?, ?, ?)",
                        [_NAME, sql.now(), json.dumps(info), data])
        index.changed = False
    except Exception as exc:  # derived data: the next open builds the index again
        if interrupted(exc):
            raise
        log.warning("saving the keyword index in %s failed: %s", path, exc)
