"""Merging two hub entities (hundreds of relations each) on a real DuckDB file: recent_changes lists the merge, with
the count of relations that moved, on its first page, not each moved relation as "fact updated" (their new vectors
are derived data); the moved relations get vectors naming the target; progress is reported while they are computed,
through the official MCP client too."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import numpy as np
from mcp import Client

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services
from tests.fakes import HashingEmbedder

#: Relations of each hub: each moved one listed as updated would fill several pages of recent_changes.
PER_HUB = 300


def hubs() -> tuple[list[NodeInput], list[EdgeInput]]:
    """"Payments Team" and its duplicate "Payments Squad", each owning PER_HUB services of its own."""
    nodes = [NodeInput(name="Payments Team", type="Team"), NodeInput(name="Payments Squad", type="Team")]
    edges = []
    for hub, prefix in (("Payments Team", "team"), ("Payments Squad", "squad")):
        for i in range(PER_HUB):
            nodes.append(NodeInput(name=f"{prefix}-service-{i}", type="Service"))
            edges.append(EdgeInput(source=hub, target=f"{prefix}-service-{i}", type="OWNS"))
    return nodes, edges


def facts(kb: KnowledgeBase) -> dict[str, object]:
    """Each relation by its target's name."""
    edges = kb.store.list_edges("default", limit=10 * PER_HUB)
    names = {n.id: n.name for n in kb.store.get_nodes({e.target_id for e in edges})}
    return {names[e.target_id]: e for e in edges}


def test_a_hub_merge_is_one_entry_on_the_first_page_and_its_moved_relations_are_not_listed_as_updated(fake_kb):
    fake_kb.add_knowledge_graph(*hubs())
    before = facts(fake_kb)
    time.sleep(0.01)  # a later moment than the creation's, as between two calls
    progress: list[tuple[int, int, str]] = []
    result = fake_kb.curation.merge_entities(["Payments Squad"], "Payments Team", "default",
                                             progress=lambda *report: progress.append(report))

    first_page = fake_kb.recent_changes()
    assert first_page.changes[0].change == "entity merged"
    assert first_page.changes[0].subject == "Payments Squad [Team] into Payments Team (300 relations moved)"
    assert "entity merged: Payments Squad [Team] into Payments Team (300 relations moved)" in first_page.text
    every = fake_kb.recent_changes(limit=1_000)
    assert [c for c in every.changes if c.change.startswith("fact") and c.change != "fact added"] == []
    assert any("300 relations moved to 'Payments Team'" in hint for hint in result.hints)

    after = facts(fake_kb)
    moved = [f"squad-service-{i}" for i in range(PER_HUB)]
    # Their rows are as they were (only their vectors changed), the target's own are untouched.
    assert all(after[name].updated_at == before[name].updated_at for name in after)
    vectors = fake_kb.store.get_vectors("edge", [after[name].id for name in moved])
    sentences = fake_kb.embedder.embed_documents([f"Payments Team owns {name}" for name in moved])
    # Stored at reduced precision: 0.99 tells the new sentence from the old one (about 0.9 alike).
    assert all(float(np.dot(vectors[after[name].id], s)) > 0.99 for name, s in zip(moved, sentences))
    # One report per embedder call, the last one with all of them done.
    batch = fake_kb.embedder.batch_size
    assert len(progress) == -(-PER_HUB // batch) and progress[-1][:2] == (PER_HUB, PER_HUB)
    assert "Payments Team" in progress[-1][2]


def test_a_hub_merge_through_the_mcp_client_reports_progress_and_lists_the_merge_first(
        tmp_path: Path, db_path: Path, plugin_manager):
    services = make_services(tmp_path, db_path, HashingEmbedder(), plugin_manager)
    nodes, edges = hubs()

    async def session() -> None:
        async with Client(build_server(services)) as client:
            added = await client.call_tool("add_knowledge_graph", {
                "nodes": [n.model_dump(exclude_none=True) for n in nodes],
                "edges": [e.model_dump(exclude_none=True) for e in edges]})
            assert not added.is_error, added.content
            await anyio.sleep(0.01)
            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(done, total, message):
                progress.append((done, total, message))

            merged = await client.call_tool("merge_entities", {"sources": ["Payments Squad"],
                                                               "target": "Payments Team"},
                                            progress_callback=on_progress)
            assert not merged.is_error, merged.content
            assert progress and progress[-1][:2] == (PER_HUB, PER_HUB)
            assert "relations moved to Payments Team" in progress[-1][2]
            changes = await client.call_tool("recent_changes", {})
            assert not changes.is_error, changes.content
            listed = changes.structured_content["changes"]
            assert listed[0]["change"] == "entity merged"
            assert listed[0]["subject"] == "Payments Squad [Team] into Payments Team (300 relations moved)"
            assert not any(c["change"] == "fact updated" for c in listed)

    anyio.run(session)
