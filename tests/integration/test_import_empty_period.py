"""An export of an older duckgraph may hold a relation whose period is empty (valid_until equal to valid_from, which
writes refuse now): importing it restores it as written rather than refusing the whole file."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta

import duckdb

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder


def test_an_exported_empty_period_imports_as_it_was(tmp_path) -> None:
    start = datetime(2024, 6, 1)
    with KnowledgeBase(DuckDBStore(tmp_path / "old.duckdb"), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Eve", type="Person"), NodeInput(name="Planning Sync", type="Event")],
                               [EdgeInput(source="Eve", target="Planning Sync", type="ATTENDED", valid_from=start,
                                          valid_until=start + timedelta(days=1))])
        out = io.StringIO()
        export_jsonl(kb, out)
    lines = []
    for line in out.getvalue().splitlines():  # as an older duckgraph wrote it: the period empty
        obj = json.loads(line)
        if obj.get("kind") == "edge":
            obj["valid_until"] = obj["valid_from"]
        lines.append(json.dumps(obj))
    with KnowledgeBase(DuckDBStore(tmp_path / "new.duckdb"), HashingEmbedder()) as kb:
        assert import_lines(kb, lines).edges_created == 1
    with duckdb.connect(str(tmp_path / "new.duckdb"), read_only=True) as con:
        assert con.execute("SELECT valid_from, valid_until FROM edges").fetchall() == [(start, start)]
