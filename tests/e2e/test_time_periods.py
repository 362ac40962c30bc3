"""The periods of one relation through the official MCP client, on the real server, store and model: a period
after the current one is stored beside it; a write that would leave two periods sharing a moment is refused and
writes nothing; a planned fact (not begun) can be seen, ended and deleted; a merge keeps periods that differ;
recent_changes tells an update from an end; a moment outside the years 1 to 9999 in UTC and a namespace with a final newline are
refused per field."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.e2e.test_time import services  # noqa: F401 (a fixture)

pytestmark = pytest.mark.model

NODES = [{"name": "Dana", "type": "Person"}, {"name": "Acme", "type": "Organization"}]


def works(**more: Any) -> dict[str, Any]:
    return {"source": "Dana", "target": "Acme", "type": "WORKS_AT", **more}


async def periods(client: Client, name: str = "Dana") -> list[tuple[str | None, str | None, str]]:
    entity = (await call_ok(client, "get_entities", {"names": [name]}))["entities"][0]
    return sorted((r["valid_from"], r["valid_until"], r["description"]) for r in entity["relations"])


@pytest.mark.anyio
async def test_a_period_after_the_current_one_is_stored_beside_it_not_over_it(services):
    """A contract that holds now and the next one, told later: the next one must not replace the current one."""
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            works(valid_from="2024-01-01", valid_until="2030-01-01", description="contract")]})
        await call_ok(client, "add_knowledge_graph", {"edges": [works(valid_from="2031-01-01",
                                                                      valid_until="2032-01-01", description="next")]})
        await call_ok(client, "add_knowledge_graph", {"edges": [works(valid_from="2033-01-01",
                                                                      description="open-ended")]})
        assert await periods(client) == [("2024-01-01T00:00:00Z", "2030-01-01T00:00:00Z", "contract"),
                                         ("2031-01-01T00:00:00Z", "2032-01-01T00:00:00Z", "next"),
                                         ("2033-01-01T00:00:00Z", None, "open-ended")]
        # A period that shares a moment with the current one still changes it.
        await call_ok(client, "add_knowledge_graph", {"edges": [works(valid_from="2024-01-01",
                                                                      valid_until="2030-06-01")]})
        assert (await periods(client))[0] == ("2024-01-01T00:00:00Z", "2030-06-01T00:00:00Z", "contract")


@pytest.mark.anyio
async def test_a_period_that_overlaps_another_of_the_same_relation_is_refused(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [works(valid_from="2020-01-01")]})
        await call_ok(client, "end_relations", {"relations": [works(ended_at="2022-01-01")]})
        result = await client.call_tool("add_knowledge_graph", {"edges": [works(valid_from="2021-01-01")]})
        assert "overlaps its stored period from 2020-01-01" in error_text(result)
        assert await periods(client) == [("2020-01-01T00:00:00Z", "2022-01-01T00:00:00Z", "")]
        searched = await call_ok(client, "search", {"query": "Where does Dana work?", "as_of": "2021-06-01"})
        assert len([e for e in searched["edges"] if e["type"] == "WORKS_AT"]) == 1
        # A period that starts when the ended one ends is a new period of its own.
        await call_ok(client, "add_knowledge_graph", {"edges": [works(valid_from="2022-01-01")]})
        assert [p[:2] for p in await periods(client)] == [("2020-01-01T00:00:00Z", "2022-01-01T00:00:00Z"),
                                                          ("2022-01-01T00:00:00Z", None)]


@pytest.mark.anyio
async def test_a_planned_fact_is_listed_ended_after_it_begins_and_deleted(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [works(valid_from="2099-01-01")]})
        assert await periods(client) == [("2099-01-01T00:00:00Z", None, "")]
        refused = await client.call_tool("end_relations", {"relations": [works()]})
        assert "is before the relation started (2099-01-01); nothing was ended" in error_text(refused)
        ended = await call_ok(client, "end_relations", {"relations": [works(ended_at="2099-06-01")]})
        assert [(r["valid_from"], r["valid_until"]) for r in ended["ended"]] == [
            ("2099-01-01T00:00:00Z", "2099-06-01T00:00:00Z")]
        deleted = await call_ok(client, "delete_relations", {"relations": [works()]})
        assert (len(deleted["deleted"]), deleted["not_found"]) == (1, [])
        assert await periods(client) == []


@pytest.mark.anyio
async def test_ending_now_leaves_a_planned_period_beside_the_current_one(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            works(valid_from="2099-01-01", description="planned return"),
            works(valid_from="2018-01-01", valid_until="2050-01-01", description="works there now")]})
        ended = await call_ok(client, "end_relations", {"relations": [works()]})
        assert [r["valid_from"] for r in ended["ended"]] == ["2018-01-01T00:00:00Z"]
        assert (await periods(client))[1] == ("2099-01-01T00:00:00Z", None, "planned return")


@pytest.mark.anyio
async def test_ending_leaves_a_period_that_ends_by_then_as_it_is(services):
    """Ending at 2030 a contract of 2024-2029 followed by one of 2029-2032 moved the first one's end to 2030 too:
    two periods then overlapped, and a search in 2029 listed the fact twice."""
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            works(valid_from="2024-01-01", valid_until="2029-01-01", description="first"),
            works(valid_from="2029-01-01", valid_until="2032-01-01", description="second")]})
        ended = await call_ok(client, "end_relations", {"relations": [works(ended_at="2030-01-01")]})
        assert [r["valid_from"] for r in ended["ended"]] == ["2029-01-01T00:00:00Z"]
        assert await periods(client) == [("2024-01-01T00:00:00Z", "2029-01-01T00:00:00Z", "first"),
                                         ("2029-01-01T00:00:00Z", "2030-01-01T00:00:00Z", "second")]
        # Only a period that ends by then: ending it later is refused, nothing changes.
        result = await client.call_tool("end_relations", {"relations": [works(ended_at="2031-01-01")]})
        assert "already ends on 2030-01-01" in error_text(result) and "nothing was ended" in error_text(result)
        assert (await periods(client))[1] == ("2029-01-01T00:00:00Z", "2030-01-01T00:00:00Z", "second")


@pytest.mark.anyio
async def test_a_merge_keeps_a_current_fact_beside_one_that_has_not_begun(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Dana Smith", "type": "Person"}, {"name": "D. Smith", "type": "Person"},
                      {"name": "Acme", "type": "Organization"}],
            "edges": [{"source": "Dana Smith", "target": "Acme", "type": "WORKS_AT", "valid_from": "2099-01-01",
                       "description": "planned return"},
                      {"source": "D. Smith", "target": "Acme", "type": "WORKS_AT", "valid_from": "2018-01-01",
                       "description": "works there now"}]})
        merged = await call_ok(client, "merge_entities", {"sources": ["D. Smith"], "target": "Dana Smith"})
        assert merged["edges_collapsed"] == 0
        assert await periods(client, "Dana Smith") == [("2018-01-01T00:00:00Z", None, "works there now"),
                                                       ("2099-01-01T00:00:00Z", None, "planned return")]
        now = await call_ok(client, "search", {"query": "Where does Dana Smith work?"})
        assert [e["description"] for e in now["edges"] if e["type"] == "WORKS_AT"] == ["works there now"]


@pytest.mark.anyio
async def test_recent_changes_says_ended_only_for_a_fact_that_ended(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            works(valid_from="2024-01-01", valid_until="2030-01-01", description="contract")]})
        await call_ok(client, "add_knowledge_graph", {"edges": [works(description="renewed terms")]})
        changes = await call_ok(client, "recent_changes", {})
        facts = [c["change"] for c in changes["changes"] if c["change"].startswith("fact")]
        assert sorted(facts) == ["fact added", "fact updated"]
        await call_ok(client, "end_relations", {"relations": [works()]})
        changes = await call_ok(client, "recent_changes", {})
        facts = [c["change"] for c in changes["changes"] if c["change"].startswith("fact")]
        assert sorted(facts) == ["fact added", "fact ended"]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments", "field"), [
    ("add_documents", {"documents": [{"id": "d", "text": "hello", "time": "0001-01-01T00:30:00+01:00"}]},
     "documents[0].time"),
    ("add_knowledge_graph", {"nodes": NODES, "edges": [works(valid_until="9999-12-31T23:30:00-01:00")]},
     "edges[0].valid_until"),
    ("search", {"query": "hello", "before": "9999-12-31T22:00:00-05:00"}, "before"),
    ("end_relations", {"relations": [works(ended_at="0001-01-01T00:00:00+02:00")]}, "relations[0].ended_at"),
])
async def test_a_moment_outside_the_years_1_to_9999_in_utc_is_refused_per_field(services, tool, arguments, field):
    async with Client(build_server(services)) as client:
        text = error_text(await client.call_tool(tool, arguments))
        assert f"{field}: " in text and "outside the years 1 to 9999 in UTC" in text
        assert (await call_ok(client, "graph_stats", {}))["nodes"] == 0


@pytest.mark.anyio
async def test_a_namespace_with_a_final_newline_is_refused(services):
    async with Client(build_server(services)) as client:
        result = await client.call_tool("add_knowledge_graph", {"nodes": NODES, "namespace": "alpha\n"})
        assert "invalid namespace 'alpha\\n'" in error_text(result)
        listed = await call_ok(client, "list_namespaces", {})
        assert [n["name"] for n in listed["namespaces"]] == ["default"]
