"""A fact that holds, written again from a later valid_from with other properties, through the official MCP client
on the real server, store and model: the version before is kept as a past period with its own sources, the new one
holds from that date; search as of either moment, with history, recent_changes, end_relations, delete_relations
with valid_from and an export imported into another file all see the two periods."""

from __future__ import annotations

import io
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, make_services
from tests.e2e.test_time import services  # noqa: F401 (a fixture)

pytestmark = pytest.mark.model

NODES = [{"name": "Checkout Service", "type": "Service", "description": "Takes payment for orders."},
         {"name": "orders-db", "type": "Database", "description": "The PostgreSQL database of orders."}]
DOCUMENTS = [
    {"id": "jan-notes", "time": "2024-01-02", "text": "Checkout Service reads and writes orders-db, version v2.3."},
    {"id": "sep-notes", "time": "2024-09-02", "text": "Checkout Service now runs on orders-db v2.4 since the upgrade."},
]
QUERY = "Which database version does Checkout Service use?"
V23 = {"source": "Checkout Service", "target": "orders-db", "type": "USES", "properties": {"version": "v2.3"},
       "valid_from": "2024-01-01", "source_ids": ["jan-notes"]}
V24 = {**V23, "properties": {"version": "v2.4"}, "valid_from": "2024-09-01", "source_ids": ["sep-notes"]}
OLD = ("2024-01-01T00:00:00Z", "2024-09-01T00:00:00Z", {"version": "v2.3"})
NEW = ("2024-09-01T00:00:00Z", None, {"version": "v2.4"})


def uses(result: dict[str, Any], key: str = "edges") -> list[tuple[str | None, str | None, dict[str, Any]]]:
    return sorted(((e["valid_from"], e["valid_until"], e["properties"]) for e in result[key] if e["type"] == "USES"),
                  key=str)


async def periods(client: Client) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    return uses((await call_ok(client, "get_entities", {"names": ["Checkout Service"]}))["entities"][0], "relations")


async def two_versions(client: Client) -> dict[str, Any]:
    await call_ok(client, "add_documents", {"documents": DOCUMENTS})
    first = await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [V23]})
    assert first["edges_created"] == 1
    return await call_ok(client, "add_knowledge_graph", {"edges": [V24]})


@pytest.mark.anyio
async def test_the_previous_version_is_kept_as_history_and_searched_as_of_then(services):
    async with Client(build_server(services)) as client:
        written = await two_versions(client)
        assert (written["edges_created"], written["edges_updated"], written["edges_unchanged"]) == (1, 0, 0)
        assert any("Checkout Service -USES-> orders-db says something else from 2024-09-01: its previous version is "
                   "kept as history (2024-01-01 to 2024-09-01" in h and 'valid_from "2024-01-01"' in h
                   for h in written["hints"]), written["hints"]
        assert await periods(client) == [OLD, NEW]

        assert uses(await call_ok(client, "search", {"query": QUERY, "as_of": "2024-03-01"})) == [OLD]
        assert uses(await call_ok(client, "search", {"query": QUERY, "as_of": "2024-10-01"})) == [NEW]
        assert uses(await call_ok(client, "search", {"query": QUERY})) == [NEW]
        history = await client.call_tool("search", {"query": QUERY, "include_history": True})
        assert uses(history.structured_content) == [OLD, NEW]
        assert "(2024-01-01 to 2024-09-01); properties: version: v2.3" in history.content[0].text

        # Each period keeps the sources it was written with.
        store = services.knowledge_base.store
        by_start = {e.valid_from.date().isoformat(): e.id for e in store.list_edges("default", include_expired=True)}
        evidence = store.edge_evidence(by_start.values())
        documents = store.chunk_documents({chunk for _, chunk in evidence})
        assert {(edge, documents[chunk]) for edge, chunk in evidence} == {
            (by_start["2024-01-01"], "jan-notes"), (by_start["2024-09-01"], "sep-notes")}

        changes = (await call_ok(client, "recent_changes", {"limit": 5}))["changes"]
        facts = sorted((c["change"], c["subject"]) for c in changes if c["change"].startswith("fact"))
        assert facts == [("fact added", "Checkout Service uses orders-db (since 2024-01-01)"),
                         ("fact added", "Checkout Service uses orders-db (since 2024-09-01)"),
                         ("fact ended", "Checkout Service uses orders-db (2024-01-01 to 2024-09-01)")]


@pytest.mark.anyio
async def test_end_delete_and_an_export_reach_each_version_on_its_own(services, tmp_path, minilm, plugin_manager):
    out = io.StringIO()
    async with Client(build_server(services)) as client:
        await two_versions(client)
        export_jsonl(services.knowledge_base, out, embeddings=True)
        ended = await call_ok(client, "end_relations", {"relations": [
            {"source": "Checkout Service", "target": "orders-db", "type": "USES", "ended_at": "2025-01-01"}]})
        assert [(r["valid_from"], r["valid_until"]) for r in ended["ended"]] == [
            ("2024-09-01T00:00:00Z", "2025-01-01T00:00:00Z")]
        deleted = await call_ok(client, "delete_relations", {"relations": [
            {"source": "Checkout Service", "target": "orders-db", "type": "USES", "valid_from": "2024-01-01"}]})
        assert (len(deleted["deleted"]), deleted["not_found"]) == (1, [])
        assert await periods(client) == [(NEW[0], "2025-01-01T00:00:00Z", NEW[2])]

    (tmp_path / "copy").mkdir()
    copy = make_services(tmp_path / "copy", tmp_path / "copy.duckdb", minilm, plugin_manager)
    import_lines(copy.knowledge_base, io.StringIO(out.getvalue()))
    async with Client(build_server(copy)) as client:
        assert await periods(client) == [OLD, NEW]
        assert uses(await call_ok(client, "search", {"query": QUERY, "as_of": "2024-03-01"})) == [OLD]
        assert uses(await call_ok(client, "search", {"query": QUERY})) == [NEW]
