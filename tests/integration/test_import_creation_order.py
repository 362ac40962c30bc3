"""An export lists entities and relations by name, but read_graph and `export --format memory-jsonl` list them in
creation order (by id): an import creates the new ones in the order of their created_at, so that order survives an
export and import."""

from __future__ import annotations

import io

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.memory_server import read_graph
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files import import_ as import_module
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder


def _order(kb: KnowledgeBase) -> tuple[list[str], list[tuple[str, str]]]:
    names = {node.id: node.name for node in kb.store.list_nodes("default", limit=100)}
    edges = kb.store.list_edges("default", limit=100, include_expired=True)  # in id order
    return ([e.name for e in read_graph(kb).entities],
            [(names[e.source_id], names[e.target_id]) for e in edges])


@pytest.mark.parametrize("batch_lines", [2_000, 2])
def test_creation_order_survives_an_export_and_import(tmp_path, monkeypatch, batch_lines) -> None:
    # 2: the lines are written a few at a time, and the order still holds across the batches.
    monkeypatch.setattr(import_module, "BATCH_LINES", batch_lines)
    with KnowledgeBase(DuckDBStore(tmp_path / "src.duckdb"), HashingEmbedder()) as kb:
        # One write each, so each has its own created_at; neither order is alphabetical.
        for name in ("Zed Park", "Alice Wong", "Mike Ross", "Bea Lund"):
            kb.add_knowledge_graph([NodeInput(name=name, type="Person")], [])
        for source, target in (("Zed Park", "Mike Ross"), ("Bea Lund", "Alice Wong"), ("Alice Wong", "Zed Park")):
            kb.add_knowledge_graph([], [EdgeInput(source=source, target=target, type="KNOWS")])
        before = _order(kb)
        out = io.StringIO()
        export_jsonl(kb, out)
    assert before[0] == ["Zed Park", "Alice Wong", "Mike Ross", "Bea Lund"]
    with KnowledgeBase(DuckDBStore(tmp_path / "copy.duckdb"), HashingEmbedder()) as kb:
        import_lines(kb, out.getvalue().splitlines())
        assert _order(kb) == before


def test_the_order_of_entities_and_relations_one_call_created_survives_an_export_and_import(tmp_path) -> None:
    """One call gives its entities (and its relations) one created_at: the export lists them in the order they
    were created (by id among equal times), and the import creates them in the file's order among equal times."""
    with KnowledgeBase(DuckDBStore(tmp_path / "src.duckdb"), HashingEmbedder()) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name=name, type="Person") for name in ("Zed Park", "Alice Wong", "Mike Ross", "Bea Lund")],
            [EdgeInput(source=source, target=target, type="KNOWS") for source, target in (
                ("Zed Park", "Mike Ross"), ("Bea Lund", "Alice Wong"), ("Alice Wong", "Zed Park"))])
        before = _order(kb)
        out = io.StringIO()
        export_jsonl(kb, out)
    assert before == (["Zed Park", "Alice Wong", "Mike Ross", "Bea Lund"],
                      [("Zed Park", "Mike Ross"), ("Bea Lund", "Alice Wong"), ("Alice Wong", "Zed Park")])
    with KnowledgeBase(DuckDBStore(tmp_path / "copy.duckdb"), HashingEmbedder()) as kb:
        import_lines(kb, out.getvalue().splitlines())
        assert _order(kb) == before
        again = io.StringIO()
        export_jsonl(kb, again)
    assert again.getvalue() == out.getvalue()  # and the copy exports to the same lines
