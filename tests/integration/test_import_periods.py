"""Import never leaves one relation with two periods that share a moment (docs/time.md): a line that starts when a
stored period starts writes over it (the file's end wins), any other overlap refuses the whole file, naming the
line, the relation and both periods, and writes nothing."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder

NODES = [NodeInput(name="Tom Reyes", type="Person"), NodeInput(name="Acme Corp", type="Organization")]


def _kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder())


def _periods(where: Path | KnowledgeBase) -> list[tuple]:
    """The stored periods: from the file (a closed one), or through the open knowledge base's store."""
    if isinstance(where, KnowledgeBase):
        edges = where.store.list_edges("default", include_expired=True, limit=100)
        return sorted(((e.valid_from, e.valid_until) for e in edges), key=lambda p: (p[0] is not None, p[0]))
    with duckdb.connect(str(where), read_only=True) as con:
        return con.execute("SELECT valid_from, valid_until FROM edges ORDER BY valid_from NULLS FIRST, id").fetchall()


def _export(kb: KnowledgeBase) -> list[str]:
    out = io.StringIO()
    export_jsonl(kb, out)
    return out.getvalue().splitlines()


def _with_edges(lines: list[str], *periods: tuple[str | None, str | None]) -> list[str]:
    """The export's lines with its one WORKS_AT line replaced by one line per period (`_recounted`)."""
    result = []
    for line in lines:
        obj = json.loads(line)
        if obj.get("kind") != "edge":
            result.append(line)
            continue
        for i, (start, end) in enumerate(periods):
            result.append(json.dumps({**obj, "id": obj["id"] + 1000 * i, "valid_from": start, "valid_until": end}))
    return _recounted(result)


def _recounted(lines: list[str]) -> list[str]:
    """Lines of an export edited here, with its end line counting them again, as one who edits a file by hand
    would fix it: the import refuses a file whose lines do not match the end line's counts."""
    kinds = [json.loads(line)["kind"] for line in lines]
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds) if kind not in ("meta", "end")}
    return [line for line, kind in zip(lines, kinds) if kind != "end"] + [json.dumps({"kind": "end", "lines": counts})]


def test_an_older_export_imported_back_writes_over_the_period_it_started(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                                 valid_from=datetime(2023, 1, 15))])
        exported = _export(kb)
        kb.end_relations([EndRelationInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                           ended_at=datetime(2024, 6, 1))])
        assert _periods(kb) == [(datetime(2023, 1, 15), datetime(2024, 6, 1))]
        summary = import_lines(kb, exported)
    # One period, as the file has it (the file's values win), never a second one beside the ended one.
    assert (summary.edges_created, summary.edges_updated) == (0, 1)
    assert _periods(db) == [(datetime(2023, 1, 15), None)]
    with _kb(db) as kb:  # and again: nothing changes
        summary = import_lines(kb, exported)
    assert (summary.edges_created, summary.edges_updated, summary.edges_unchanged) == (0, 0, 1)


def test_an_ended_period_from_another_host_ends_the_stored_one_that_started_with_it(tmp_path) -> None:
    with _kb(tmp_path / "one.duckdb") as kb:
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                                 valid_from=datetime(2023, 1, 15), valid_until=datetime(2024, 6, 1))])
        ended = _export(kb)
    db = tmp_path / "two.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                                 valid_from=datetime(2023, 1, 15))])
        import_lines(kb, ended)
    assert _periods(db) == [(datetime(2023, 1, 15), datetime(2024, 6, 1))]


def test_an_overlapping_period_that_starts_elsewhere_refuses_the_import(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                                 valid_from=datetime(2023, 1, 15))])
        lines = _with_edges(_export(kb), ("2022-03-01T00:00:00Z", "2024-01-01T00:00:00Z"))
        lines = _recounted([lines[0], json.dumps({"kind": "node", "name": "Newcomer", "type": "Person"}), *lines[1:]])
        with pytest.raises(InvalidInputError) as refused:
            import_lines(kb, lines, source="merge.jsonl")
    message = str(refused.value)
    number = next(i for i, line in enumerate(lines, 1) if json.loads(line).get("kind") == "edge")
    assert message.startswith(f"merge.jsonl:{number}: the relation Tom Reyes -WORKS_AT-> Acme Corp would hold from "
                              "2022-03-01 00:00:00 UTC to 2024-01-01 00:00:00 UTC, which overlaps its stored period "
                              "from 2023-01-15 00:00:00 UTC to no end")
    assert 'valid_from "2023-01-15"' in message and "nothing was imported" in message
    assert _periods(db) == [(datetime(2023, 1, 15), None)]  # nothing written: not the edge, not the new node
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM nodes WHERE name = 'Newcomer'").fetchone() == (0,)


def test_two_lines_of_one_file_whose_periods_overlap_are_refused(tmp_path) -> None:
    with _kb(tmp_path / "src.duckdb") as kb:
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT")])
        lines = _with_edges(_export(kb), ("2023-01-15T00:00:00Z", "2024-06-01T00:00:00Z"),
                            ("2023-01-15T00:00:00Z", None))
    db = tmp_path / "new.duckdb"
    with _kb(db) as kb:
        with pytest.raises(InvalidInputError) as refused:
            import_lines(kb, lines, source="f.jsonl")
    first = next(i for i, line in enumerate(lines, 1) if json.loads(line).get("kind") == "edge")
    assert str(refused.value).startswith(
        f"f.jsonl:{first + 1}: the relation Tom Reyes -WORKS_AT-> Acme Corp would hold from 2023-01-15 00:00:00 UTC "
        f"to no end, which overlaps its period from 2023-01-15 00:00:00 UTC to 2024-06-01 00:00:00 UTC on line "
        f"{first}")
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM nodes").fetchone() == (0,)


def test_a_history_that_moves_a_stored_period_is_no_clash(tmp_path) -> None:
    """Stored 2020-2022 and 2022-now; the file's 2020-2023 and 2023-now write over both (the one that starts with it,
    and the one that still holds): the result's periods do not overlap, so the import goes through."""
    db = tmp_path / "kb.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                                 valid_from=datetime(2020, 1, 1), valid_until=datetime(2022, 1, 1))])
        kb.add_knowledge_graph(NODES, [EdgeInput(source="Tom Reyes", target="Acme Corp", type="WORKS_AT",
                                                 valid_from=datetime(2022, 1, 1))])
        assert len(_periods(kb)) == 2
        exported = _export(kb)
        edges = [line for line in exported if json.loads(line).get("kind") == "edge"]
        lines = _with_edges([line for line in exported if line not in edges[1:]],
                            ("2020-01-01T00:00:00Z", "2023-01-01T00:00:00Z"), ("2023-01-01T00:00:00Z", None))
        summary = import_lines(kb, lines)
    assert (summary.edges_created, summary.edges_updated) == (0, 2)
    assert _periods(db) == [(datetime(2020, 1, 1), datetime(2023, 1, 1)), (datetime(2023, 1, 1), None)]
