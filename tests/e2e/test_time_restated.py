"""Writing facts over time through the official MCP client, on the real server, store and model: a fact that ended,
stated again from a source as old as it (an agent re-reading a January note in August), stays ended and gains the
provenance; stated again from a later or undated source it holds again from now, and says so; an empty period
(valid_until = valid_from, or ended at its start) is refused and nothing is written; a month, a year, a week date
or the basic format are refused with the forms taken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.e2e.test_namespaces import make_services
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures)

pytestmark = pytest.mark.model

NODES = [{"name": "Alice", "type": "Person"}, {"name": "Payments Team", "type": "Team"},
         {"name": "Bob", "type": "Person"}]
DOCUMENTS = [
    {"id": "jan-note", "title": "Org note", "text": "Alice leads the Payments Team.", "time": "2024-01-05"},
    {"id": "jun-note", "title": "Org note", "text": "Bob now leads the Payments Team; Alice moved to Search.",
     "time": "2024-06-01"},
    {"id": "aug-note", "title": "Org note", "text": "Alice leads the Payments Team again.", "time": "2024-08-01"},
    {"id": "undated", "title": "Org note", "text": "Alice leads the Payments Team."},
]
QUERY = "Who leads the Payments Team?"


def leads(source: str = "Alice", **more: Any) -> dict[str, Any]:
    return {"source": source, "target": "Payments Team", "type": "LEADS", **more}


async def alice_periods(client: Client) -> list[tuple[str | None, str | None, str]]:
    entity = (await call_ok(client, "get_entities", {"names": ["Alice"]}))["entities"][0]
    return sorted(((r["valid_from"], r["valid_until"], r["description"]) for r in entity["relations"]),
                  key=lambda p: (p[0] or "", p[1] or "~"))  # no known start first, no end last


async def handover(client: Client, **first: Any) -> None:
    """Alice led the team until 2024-06-01 (ended), Bob since."""
    await call_ok(client, "add_documents", {"documents": DOCUMENTS})
    await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [leads(**first)]})
    await call_ok(client, "end_relations", {"relations": [leads(ended_at="2024-06-01")]})
    await call_ok(client, "add_knowledge_graph", {"edges": [leads("Bob", valid_from="2024-06-01",
                                                                  source_ids=["jun-note"])]})


async def current_leaders(client: Client) -> set[str]:
    found = await call_ok(client, "search", {"query": QUERY})
    return {e["source"] for e in found["edges"] if e["type"] == "LEADS"}


@pytest.mark.anyio
async def test_an_ended_fact_restated_from_an_older_source_stays_ended_and_gains_it(services):
    async with Client(build_server(services)) as client:
        await handover(client)  # stated by hand first: no provenance yet
        assert await current_leaders(client) == {"Bob"}
        again = await call_ok(client, "add_knowledge_graph", {"edges": [leads(source_ids=["jan-note"])]})
        assert again["edges_created"] == 0 and again["edges_updated"] + again["edges_unchanged"] == 1
        assert again["hints"] == [
            "Alice -LEADS-> Payments Team ended on 2024-06-01; the sources given are dated by then, so it stays "
            "ended and they support its period (until 2024-06-01): give valid_from to say it holds again"]
        assert await alice_periods(client) == [(None, "2024-06-01T00:00:00Z", "")]
        assert await current_leaders(client) == {"Bob"}
        # Its provenance went to the ended period: the January note's passage now supports it.
        store = services.knowledge_base.store
        edge = next(e for e in store.list_edges("default", include_expired=True) if e.valid_until is not None)
        chunks = {c for _, c in store.edge_evidence([edge.id])}
        assert set(store.chunk_documents(chunks).values()) == {"jan-note"}
        # A source dated at the end itself (the June note) is as old: still ended.
        again = await call_ok(client, "add_knowledge_graph", {"edges": [leads(source_ids=["jan-note", "jun-note"])]})
        assert again["edges_created"] == 0 and "stays ended" in again["hints"][0]
        assert await current_leaders(client) == {"Bob"}
        # With valid_from, it holds again from then: no hint needed.
        again = await call_ok(client, "add_knowledge_graph", {"edges": [leads(valid_from="2024-09-01",
                                                                             source_ids=["jan-note"])]})
        assert (again["edges_created"], again["hints"]) == (1, [])
        assert await alice_periods(client) == [(None, "2024-06-01T00:00:00Z", ""),
                                               ("2024-09-01T00:00:00Z", None, "")]


@pytest.mark.anyio
@pytest.mark.parametrize("sources", [["aug-note"], ["jan-note", "aug-note"], ["undated"], []])
async def test_an_ended_fact_restated_from_a_later_or_undated_source_holds_again_and_says_so(services, sources):
    async with Client(build_server(services)) as client:
        await handover(client, source_ids=["jan-note"])
        again = await call_ok(client, "add_knowledge_graph", {"edges": [leads(source_ids=sources)]})
        assert again["edges_created"] == 1
        assert again["hints"] == [
            "Alice -LEADS-> Payments Team had ended on 2024-06-01; stated again without valid_from (and without "
            "sources all dated by then), it holds again from now: if it still has ended, delete_relations removes "
            "the new period (the ended one stays)"]
        assert await current_leaders(client) == {"Alice", "Bob"}
        await call_ok(client, "delete_relations", {"relations": [leads()]})
        assert await alice_periods(client) == [(None, "2024-06-01T00:00:00Z", "")]


@pytest.mark.anyio
async def test_a_call_that_both_restates_and_reopens_says_it_holds_again(services):
    async with Client(build_server(services)) as client:
        await handover(client)
        again = await call_ok(client, "add_knowledge_graph", {"edges": [leads(), leads(source_ids=["jan-note"])]})
        assert again["edges_created"] == 1 and len(again["hints"]) == 1
        assert again["hints"][0].startswith("Alice -LEADS-> Payments Team had ended on 2024-06-01")
        assert await current_leaders(client) == {"Alice", "Bob"}


@pytest.mark.anyio
async def test_an_old_source_supports_the_period_it_tells_of(services):
    """Two ended periods: the note of 2020 goes to the first, the one of 2022 (between them) to the next."""
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [
            {"id": "n2020", "text": "Alice leads the Payments Team.", "time": "2020-06-01"},
            {"id": "n2022", "text": "Alice will lead the Payments Team again.", "time": "2022-06-01"}]})
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            leads(valid_from="2020-01-01", valid_until="2021-01-01", description="first"),
            leads(valid_from="2023-01-01", valid_until="2024-01-01", description="second")]})
        for note in ("n2020", "n2022"):
            again = await call_ok(client, "add_knowledge_graph", {"edges": [
                leads(source_ids=[note], description=f"from {note}")]})
            assert again["edges_created"] == 0 and "ended on 2024-01-01" in again["hints"][0]
        assert await alice_periods(client) == [
            ("2020-01-01T00:00:00Z", "2021-01-01T00:00:00Z", "from n2020"),
            ("2023-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "from n2022")]


@pytest.mark.anyio
async def test_the_memory_tools_say_when_a_relation_that_ended_holds_again(tmp_path: Path, db_path: Path,
                                                                         plugin_manager, minilm):
    async with Client(build_server(make_services(tmp_path, db_path, minilm, plugin_manager, tools="all"))) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": n, "entityType": "person", "observations": []} for n in ("Alice", "Payments Team")]})
        relation = {"from": "Alice", "to": "Payments Team", "relationType": "leads"}
        first = await client.call_tool("create_relations", {"relations": [relation]})
        assert "note" not in str(first.structured_content)
        await call_ok(client, "end_relations", {"relations": [leads(type="leads", ended_at="2024-06-01")]})
        again = (await client.call_tool("create_relations", {"relations": [relation]})).structured_content
        assert again["relations"][0]["note"] == (
            "it had ended on 2024-06-01: stored again, it holds again from now (delete_relations removes this new "
            "period; the ended one stays as history)")


@pytest.mark.anyio
async def test_an_empty_period_is_refused_and_nothing_is_written(services):
    async with Client(build_server(services)) as client:
        refused = await client.call_tool("add_knowledge_graph", {"nodes": NODES, "edges": [
            leads("Bob", valid_from="2024-01-01"),
            leads(valid_from="2024-06-01", valid_until="2024-06-01")]})
        assert ("valid_until 2024-06-01 equals valid_from: the period is empty (the end is exclusive); for the day "
                "2024-06-01 write valid_until 2024-06-02") in error_text(refused)
        refused = await client.call_tool("add_knowledge_graph", {"nodes": NODES, "edges": [
            leads(valid_from="2024-06-01T09:30:00Z", valid_until="2024-06-01T11:30:00+02:00")]})
        assert "the period is empty (the end is exclusive); give a valid_until after valid_from" in error_text(refused)
        assert (await call_ok(client, "get_entities", {"names": ["Alice", "Bob"]}))["entities"] == []


@pytest.mark.anyio
async def test_ending_a_fact_at_its_start_is_refused_and_nothing_is_ended(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            leads("Bob", valid_from="2024-01-01"), leads(valid_from="2024-03-01")]})
        refused = await client.call_tool("end_relations", {"relations": [
            leads("Bob", ended_at="2024-06-01"), leads(ended_at="2024-03-01")]})
        assert ("relations[1] (Alice -LEADS-> Payments Team): ended_at 2024-03-01 is when the relation started: "
                "ended then, it would never have held (the end is exclusive). If it never held, delete it: "
                "delete_relations with valid_from 2024-03-01; nothing was ended") in error_text(refused)
        assert await current_leaders(client) == {"Alice", "Bob"}  # neither was ended
        assert await alice_periods(client) == [("2024-03-01T00:00:00Z", None, "")]


@pytest.mark.anyio
@pytest.mark.parametrize(("given", "said"), [
    ("2024-06", "'2024-06' is a month, not a date: write its first day, 2024-06-01 (an end is exclusive: a period "
                "through that month ends at 2024-07-01)"),
    ("2024", "'2024' is a year, not a date: write its first day, 2024-01-01 (an end is exclusive: a period through "
             "that year ends at 2025-01-01)"),
    ("2024-W23", "'2024-W23' is not an ISO 8601 date or date-time in a form duckgraph takes"),
    ("20240601", "'20240601' is not an ISO 8601 date or date-time in a form duckgraph takes"),
    ("2024-02-30", "'2024-02-30' is not a valid date or time (day is out of range for month)"),
])
async def test_a_date_in_a_form_not_taken_is_refused_naming_the_forms_taken(services, given, said):
    async with Client(build_server(services)) as client:
        refused = await client.call_tool("add_knowledge_graph", {"nodes": NODES, "edges": [
            leads(valid_from=given)]})
        text = error_text(refused)
        assert said in text
        assert "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS[.ffffff]][Z|+HH:MM|-HH:MM] (T or a space before the time)" in text
        assert (await call_ok(client, "get_entities", {"names": ["Alice"]}))["entities"] == []
