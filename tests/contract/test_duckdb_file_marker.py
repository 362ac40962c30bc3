"""The marker of a DuckDB database file is defined once, in the contract (ports/store.py), where both the store
(plugins/duckdb/connection.py) and the commands' path checks (core/files/paths.py) may import it by the layer
rules: two copies could drift, and a file one accepts the other would refuse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from duckgraph.core.files.paths import is_duckdb_file
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.connection import refuse_foreign
from duckgraph.ports import StoreError
from duckgraph.ports.store import DUCKDB_MAGIC

ROOT = Path(__file__).resolve().parents[2]


def test_the_marker_is_defined_once_in_the_ports() -> None:
    defined = [str(path.relative_to(ROOT))
               for folder in ("core", "plugins", "ports") for path in sorted((ROOT / folder).rglob("*.py"))
               for line in path.read_text(encoding="utf-8").splitlines() if re.search(r"""b["']DUCK["']""", line)]
    assert defined == ["ports/store.py"], defined


def test_both_users_recognise_a_real_database_file_and_refuse_another(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    store = DuckDBStore(db)
    store.open()
    store.close()
    assert db.read_bytes()[8:12] == DUCKDB_MAGIC
    assert is_duckdb_file(db)
    refuse_foreign(db)  # a DuckDB file: no refusal

    text = tmp_path / "notes.duckdb"
    text.write_text("not a database, but notes\n", encoding="utf-8")
    assert not is_duckdb_file(text)
    with pytest.raises(StoreError, match=r"is not a duckdb memory \(it looks like a text file\)"):
        refuse_foreign(text)
