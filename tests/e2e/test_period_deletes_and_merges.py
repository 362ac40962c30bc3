"""Through the official MCP client, on the real server, store and model: a past period written by mistake is
deleted by naming its start (delete_relations' valid_from), and not_found says how when only ended periods are
stored; a merge joins the overlapping periods of one relation so that search lists the fact once; a past period
written onto a fact that holds now is refused instead of silently replacing it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.e2e.test_time import services  # noqa: F401 (a fixture)
from tests.e2e.test_time_periods import periods

pytestmark = pytest.mark.model

NODES = [{"name": "Ivy", "type": "Person"}, {"name": "I. Lee", "type": "Person"},
         {"name": "Acme", "type": "Organization"}]


def works(source: str = "Ivy", **more: Any) -> dict[str, Any]:
    return {"source": source, "target": "Acme", "type": "WORKS_AT", **more}


@pytest.mark.anyio
async def test_a_mistaken_past_period_is_deleted_by_its_start(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            works(valid_from="2015-01-01", valid_until="2018-01-01", description="a mistake")]})
        missed = await call_ok(client, "delete_relations", {"relations": [works()]})
        assert missed["deleted"] == [] and len(missed["not_found"]) == 1
        assert "2015-01-01 to 2018-01-01" in missed["hints"][0] and "valid_from" in missed["hints"][0]
        deleted = await call_ok(client, "delete_relations", {"relations": [works(valid_from="2015-01-01")]})
        assert [r["type"] for r in deleted["deleted"]] == ["WORKS_AT"] and deleted["not_found"] == []
        assert await periods(client, "Ivy") == []


@pytest.mark.anyio
async def test_a_merge_joins_overlapping_periods_and_search_lists_the_fact_once(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            works(valid_from="2020-01-01", description="from HR"),
            works("I. Lee", valid_from="2022-01-01", description="from chat"),
            works("I. Lee", valid_from="2010-01-01", valid_until="2021-01-01", description="old stint")]})
        merged = await call_ok(client, "merge_entities", {"sources": ["I. Lee"], "target": "Ivy"})
        assert merged["edges_collapsed"] == 2
        assert await periods(client, "Ivy") == [("2010-01-01T00:00:00Z", None, "from HR")]
        found = await call_ok(client, "search", {"query": "Where does Ivy work?"})
        assert len([e for e in found["edges"] if e["type"] == "WORKS_AT"]) == 1


@pytest.mark.anyio
async def test_a_past_period_written_onto_the_current_fact_is_refused(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [works(description="current job")]})
        result = await client.call_tool("add_knowledge_graph", {"edges": [
            works(valid_from="2015-01-01", valid_until="2018-01-01", description="first stint")]})
        assert "overlaps its stored period from no known start to no end" in error_text(result)
        assert await periods(client, "Ivy") == [(None, None, "current job")]
