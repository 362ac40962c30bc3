"""recent_changes through the official MCP client, on the real server, store and model: every change of a bulk
write can be listed (the structured result holds `limit` changes whatever the text's budget, and `offset` pages
through changes that share one moment), and an entity written again as it is stored is not listed as updated."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from duckgraph.core.mcp.server import build_server
from mcp import Client

from tests.e2e.test_mcp_inmemory import make_services
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures: asyncio, the real model)

pytestmark = pytest.mark.model

SERVERS = [{"name": f"Server {i:03d}", "type": "Host"} for i in range(300)]


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result


def subjects(text: str) -> list[str]:
    """The subjects of a recent_changes text's lines (its note, if any, left out)."""
    return [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("- ")]


@pytest.mark.anyio
async def test_every_change_of_two_bulk_writes_is_listed_and_pages_through_one_moment(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": SERVERS[:150], "edges": []})
        await call_ok(client, "add_knowledge_graph", {"nodes": SERVERS[150:], "edges": []})
        every_name = {f"{s['name']} [Host]" for s in SERVERS}

        # All 300 in the structured result, though the text holds fewer within its 2,000 tokens.
        result = await call_ok(client, "recent_changes", {"limit": 1000})
        everything = result.structured_content
        assert {c["subject"] for c in everything["changes"]} == every_name
        assert len(everything["changes"]) == 300
        assert everything["truncated"] is False and everything["next_offset"] is None
        shown = subjects(result.content[0].text)
        assert 0 < len(shown) < 300

        # The text's last line names the offset its next lines start at: following it lists every change once.
        listed, offset = list(shown), len(shown)
        assert f"offset={offset} lists them from here" in result.content[0].text.splitlines()[-1]
        while True:
            text = (await call_ok(client, "recent_changes", {"limit": 1000, "offset": offset})).content[0].text
            listed += subjects(text)
            note = re.search(r"offset=(\d+)", text.splitlines()[-1])
            if note is None:
                break
            offset = int(note.group(1))
        assert sorted(listed) == sorted(every_name)

        # Pages of 120 by next_offset: the same changes in the same order, within one moment as across two.
        pages, offset, truncated = [], 0, []
        while offset is not None:
            page = (await call_ok(client, "recent_changes", {"limit": 120, "offset": offset})).structured_content
            pages += page["changes"]
            truncated.append(page["truncated"])
            offset = page["next_offset"]
            assert (offset is None) is (page["truncated"] is False)
        assert pages == everything["changes"]
        assert truncated == [True, True, False]
        last = await call_ok(client, "recent_changes", {"limit": 120, "offset": 120})
        assert last.content[0].text.splitlines()[-1] == (
            "(more changes: offset=240 lists the next ones, with the same since and until)")

        # Past the end: nothing, and said so.
        beyond = (await call_ok(client, "recent_changes", {"offset": 300})).structured_content
        assert beyond["changes"] == [] and beyond["truncated"] is False
        assert beyond["text"] == f"offset=300 is past the {len(everything['changes'])} changes of that span."

        for bad in (-1, 100_001):
            refused = await client.call_tool("recent_changes", {"offset": bad})
            assert refused.is_error and "offset" in refused.content[0].text


@pytest.mark.anyio
async def test_an_entity_added_again_as_it_is_is_not_listed_as_updated(services, tmp_path, db_path, minilm,
                                                                    plugin_manager):
    maya = {"name": "Maya Chen", "type": "Person", "description": "Engineer.", "aliases": ["Maya"],
            "properties": {"team": "payments", "level": 3}, "observations": ["Lives in Portland"]}
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [maya, {"name": "Acme", "type": "Org"}], "edges": []})
        await anyio.sleep(0.01)  # a later moment than the creation's, as between two calls
        # Word for word, properties in another order, and with no observations (which keeps the stored ones).
        await call_ok(client, "add_knowledge_graph", {"nodes": [maya], "edges": []})
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {**maya, "properties": {"level": 3, "team": "payments"}}], "edges": []})
        await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Maya Chen", "type": "Person"}],
                                                      "edges": []})
        listed = (await call_ok(client, "recent_changes", {})).structured_content["changes"]
        assert [c["change"] for c in listed] == ["entity created", "entity created"]
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Maya Chen", "type": "Person", "observations": ["Works on payments"]}], "edges": []})
        listed = (await call_ok(client, "recent_changes", {})).structured_content["changes"]
        assert (listed[0]["change"], listed[0]["subject"]) == ("entity updated", "Maya Chen [Person]")
        live = [(c["change"], c["subject"]) for c in listed]
    services.knowledge_base.close()

    # A server started later reads the same from the file.
    again = make_services(tmp_path, db_path, minilm, plugin_manager)
    async with Client(build_server(again)) as client:
        listed = (await call_ok(client, "recent_changes", {})).structured_content["changes"]
        assert [(c["change"], c["subject"]) for c in listed] == live
    again.knowledge_base.close()


@pytest.mark.anyio
async def test_a_relation_added_again_as_it_is_is_not_listed_as_updated(services):
    nodes = [{"name": "Maya Chen", "type": "Person"}, {"name": "Acme", "type": "Org"}]
    works = {"source": "Maya Chen", "target": "Acme", "type": "WORKS_AT", "description": "Since 2021.",
             "properties": {"team": "payments", "level": 3}, "valid_from": "2021-01-01"}
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": nodes, "edges": [works]})
        await anyio.sleep(0.01)
        # Word for word, and with its properties in another order.
        await call_ok(client, "add_knowledge_graph", {"nodes": [], "edges": [works]})
        await call_ok(client, "add_knowledge_graph", {"nodes": [], "edges": [
            {**works, "properties": {"level": 3, "team": "payments"}}]})
        listed = (await call_ok(client, "recent_changes", {})).structured_content["changes"]
        assert sorted(c["change"] for c in listed) == ["entity created", "entity created", "fact added"]
        await call_ok(client, "add_knowledge_graph", {"nodes": [], "edges": [{**works, "description": "Lead."}]})
        listed = (await call_ok(client, "recent_changes", {})).structured_content["changes"]
        assert listed[0]["change"] == "fact updated"
