"""DuckDB's settings as the store runs it: its cache limit beside what the store holds in memory itself, when its
log is folded into the file, the compression its writes leave out, and no extension fetched or loaded behind its
back."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Write-ahead log size at which a commit folds the log into the file (DuckDB's default: 16MB). A checkpoint rewrites
#: the last, partly filled row group of every table it touches, so at 16MB a bulk load of vectors checkpoints on
#: every call, each costlier than the last (contrib/bench/write.py). A crash leaves at most this much log to replay.
CHECKPOINT_THRESHOLD = "256MB"
#: Seconds without a commit after which the store folds the write-ahead log into the file itself (store.py,
#: `_checkpoint_when_quiet`). At the threshold alone a server's file would hold none of hours of writes (a copy of it
#: taken by a sync or backup tool an empty memory), DuckDB would keep every row of its log in memory, deleted ones too,
#: and a crash would leave the whole log to replay. The calls of a burst, or a bulk load's writes, follow one another
#: well within it: they share one checkpoint, and a bulk load is still folded at the threshold.
QUIET_CHECKPOINT_SECONDS = 5.0
#: Writes that never pause that long (several agents on one server) are folded at the latest this long after the
#: first one the file lacks. A bulk load reaches CHECKPOINT_THRESHOLD far sooner: this adds at most one checkpoint to
#: ten minutes of it.
CHECKPOINT_LATEST_SECONDS = 600.0
#: Compression methods the store's writes leave out: ALPRD saves a little space on embeddings but costs time at every
#: checkpoint and read, and files grown through many checkpoints come out larger with it (contrib/bench/write.py).
DISABLED_COMPRESSION = "alp,alprd"
#: What DuckDB may keep cached while open copies the vectors into memory, and after it has copied the graph
#: (see `lean_cache`); the store's memory_limit applies again at once.
CACHE_AFTER_LOAD = "256MB"
#: DuckDB's own cache limit when the store option memory_limit is not given: this share of the machine's memory, at
#: least 1 GiB. DuckDB's default (80%) ignores what the store holds itself (every vector and the graph), and its
#: cache would keep pages of the tables the store holds in memory already.
DEFAULT_MEMORY_SHARE = 0.25
#: Set on the store's connection: DuckDB never installs or loads an extension by itself (a query naming another
#: format's function, or a SQLite file, would have it download sqlite_scanner and the like from
#: extensions.duckdb.org). vss is loaded by path from its package (vector_search.py); json, parquet and icu are built
#: into the duckdb package. Set after connecting, not as connect's config: DuckDB refuses a second connection to the
#: same file with another config (a script reading the file beside a server in one process).
NO_EXTENSION_AUTOLOAD = ("SET autoinstall_known_extensions = false", "SET autoload_known_extensions = false")
#: What DuckDB accepts as a memory size.
MEMORY_SIZE = re.compile(r"\s*\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", re.IGNORECASE)


#: What a long write transaction (an import) may hold in memory beside its key indexes: DuckDB keeps a
#: transaction's uncommitted rows in memory up to memory_limit (~1.5 KB an imported line) and, under a lower limit,
#: writes them to its temporary folder instead.
TRANSACTION_CACHE = 512 * 2**20
_UNIT = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def size_bytes(size: str) -> float:
    """A DuckDB memory size ("1.5GiB", "512MB") in bytes."""
    number, unit = re.fullmatch(r"\s*([\d.]+)\s*([a-zA-Z]+)\s*", size).groups()
    return float(number) * _UNIT[unit.upper()]


def bound_transaction_cache(con: Any, memory_limit: str) -> None:
    """Lower DuckDB's limit, for the rest of a long transaction, to TRANSACTION_CACHE above twice what its key
    indexes hold (they must stay in memory and grow as rows go in), never above `memory_limit`; called again as
    the transaction grows. `set_limit` it again once the transaction has ended."""
    indexes = con.execute("SELECT coalesce(sum(memory_usage_bytes), 0) FROM duckdb_memory() "
                          "WHERE tag = 'ART_INDEX'").fetchone()[0]
    limit = min(size_bytes(memory_limit), TRANSACTION_CACHE + 2 * indexes)
    set_limit(con, f"{int(limit // 2**20)}MiB")


def set_limit(con: Any, memory_limit: str) -> None:
    """Set DuckDB's memory limit: a lower one for a while, or the store's own again. Not RESET: in DuckDB 1.5.5 that
    restores the setting but leaves the buffer pool at the lower limit, and a later write fails to commit once the
    indexes outgrow it."""
    con.execute(f"SET memory_limit = '{memory_limit}'")


def default_memory_limit() -> str:
    """DEFAULT_MEMORY_SHARE of the machine's memory, at least 1 GiB, as a DuckDB size."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows): DuckDB's default share of 8 GiB
        total = 8 * 2**30
    return f"{max(1.0, DEFAULT_MEMORY_SHARE * total / 2**30):.1f}GiB"


def apply_session_settings(con: Any, memory_limit: str) -> None:
    """The settings of the store's connection, set at open (also on a read-only file: its backup is written with
    them)."""
    # Loading a big file takes seconds; DuckDB's progress bar would write to stdout (the stdio transport).
    con.execute("SET enable_progress_bar = false")
    for statement in NO_EXTENSION_AUTOLOAD:
        con.execute(statement)
    set_limit(con, memory_limit)
    apply_write_settings(con)


def apply_write_settings(con: Any, checkpoint_threshold: str = CHECKPOINT_THRESHOLD) -> None:
    """The DuckDB settings the store writes with (see CHECKPOINT_THRESHOLD and DISABLED_COMPRESSION); benchmarks
    may try another threshold."""
    con.execute(f"SET checkpoint_threshold = '{checkpoint_threshold}'")
    con.execute(f"SET disabled_compression_methods = '{DISABLED_COMPRESSION}'")


@contextmanager
def lean_cache(con: Any, memory_limit: str, path: Path) -> Iterator[None]:
    """While inside, DuckDB keeps at most CACHE_AFTER_LOAD of table pages cached, and drops the rest on entry.

    Open reads every vector and the whole graph into this process's memory; the pages DuckDB would keep from
    those reads would double the copies. A lower memory limit makes it evict what no query holds; `memory_limit`
    applies again on the way out."""
    import duckdb  # imported when a file is opened: registering the plugin stays cheap

    try:
        set_limit(con, CACHE_AFTER_LOAD)
    except duckdb.Error as exc:  # pages still in use: nothing is lost but memory
        log.info("DuckDB kept its cache while loading %s: %s", path, exc)
    try:
        yield
    finally:
        set_limit(con, memory_limit)


def drop_cache(con: Any, memory_limit: str, path: Path) -> None:
    """Drop the table pages DuckDB keeps cached (see `lean_cache`), keeping `memory_limit`."""
    with lean_cache(con, memory_limit, path):
        pass
