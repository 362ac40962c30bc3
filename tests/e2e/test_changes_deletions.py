"""recent_changes through the official MCP client, on the real server, store and model: after delete_relations,
delete_entities and a document added again with another text, "what changed?" lists each of them, newest first
with the rest, in the text and in the structured result, and `since` keeps to what came after."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures: asyncio, the real model)

pytestmark = pytest.mark.model

NODES = [{"name": "Dana Okafor", "type": "Person"}, {"name": "Northwind Logistics", "type": "Organization"},
         {"name": "Helios Robotics", "type": "Organization"}]
EDGES = [{"source": "Dana Okafor", "target": "Northwind Logistics", "type": "WORKS_AT", "valid_from": "2021-03-01"},
         {"source": "Dana Okafor", "target": "Helios Robotics", "type": "ADVISES"}]


@pytest.mark.anyio
async def test_deleted_and_replaced_things_are_listed_newest_first(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [
            {"id": "plan", "title": "Roadmap", "text": "Northwind ships the freight tracker in May."}]})
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
        last = (await call_ok(client, "recent_changes", {}))["changes"][0]["at"]
        after = (datetime.fromisoformat(last.replace("Z", "+00:00")) + timedelta(microseconds=1)).isoformat()

        await call_ok(client, "delete_relations", {"relations": [
            {"source": "Dana Okafor", "target": "Helios Robotics", "type": "ADVISES"}]})
        await call_ok(client, "delete_entities", {"names": ["Northwind Logistics"]})
        await call_ok(client, "add_documents", {"documents": [
            {"id": "plan", "title": "Roadmap", "text": "Northwind ships the freight tracker in June, not May."}]})

        result = await client.call_tool("recent_changes", {})
        assert not result.is_error, result.content[0].text
        changes = [(c["change"], c["subject"]) for c in result.structured_content["changes"]]
        assert changes[:4] == [
            ("document replaced", "plan: Roadmap"),
            ("entity deleted", "Northwind Logistics [Organization]"),
            ("fact deleted", "Dana Okafor works at Northwind Logistics (since 2021-03-01)"),
            ("fact deleted", "Dana Okafor advises Helios Robotics"),
        ]
        # The replaced document is not listed as added as well; what was not deleted is listed as before.
        assert ("document added", "plan: Roadmap") not in changes
        assert ("entity created", "Dana Okafor [Person]") in changes
        times = [c["at"] for c in result.structured_content["changes"]]
        assert times == sorted(times, reverse=True)
        text = result.content[0].text.splitlines()
        assert [line.split(" ", 4)[4] for line in text[:4]] == [f"{kind}: {subject}" for kind, subject in changes[:4]]

        since = await call_ok(client, "recent_changes", {"since": after, "limit": 10})
        assert [c["change"] for c in since["changes"]] == [
            "document replaced", "entity deleted", "fact deleted", "fact deleted"]


@pytest.mark.anyio
async def test_a_deleted_entitys_observations_and_property_values_are_gone_from_recent_changes(services):
    """A diagnosis kept as a property and an observation, then changed, then the entity deleted: recent_changes
    listed "properties changed: Lena [person]: dx: (none) -> HOLLOWMERE" after the entity had gone."""
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Lena", "type": "person", "observations": ["likes tea"]}, {"name": "Tom", "type": "person"}],
            "edges": []})
        await call_ok(client, "update_entity", {"name": "Lena", "properties": {"dx": "HOLLOWMERE"},
                                                "add_observations": ["has HOLLOWMERE cancer"]})
        await call_ok(client, "update_entity", {"name": "Lena", "properties": {"dx": "unknown"},
                                                "remove_observations": ["has HOLLOWMERE cancer"]})
        await call_ok(client, "add_knowledge_graph", {"nodes": [], "edges": [
            {"source": "Tom", "target": "Lena", "type": "DRIVES_TO_CHEMO", "valid_from": "2024-01-01"}]})
        before = await client.call_tool("recent_changes", {"limit": 100})
        assert "properties changed: Lena [person]: dx: (none) -> HOLLOWMERE" in before.content[0].text

        await call_ok(client, "delete_entities", {"names": ["Lena"]})
        result = await client.call_tool("recent_changes", {"limit": 100})
        assert "HOLLOWMERE" not in result.content[0].text and "likes tea" not in result.content[0].text
        assert "HOLLOWMERE" not in str(result.structured_content)
        changes = [(c["change"], c["subject"]) for c in result.structured_content["changes"]]
        assert changes == [("entity deleted", "Lena [person]"),
                           ("fact deleted", "Tom drives to chemo Lena (since 2024-01-01)"),
                           ("entity created", "Tom [person]")]
