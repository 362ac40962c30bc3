"""What the host model reads back about facts over time, through the official MCP client on the real server, store
and model: times of day marked UTC in the text, planned facts counted and shown with history, the fact that holds
now first among its periods, relations' properties, a question about what changed pointed to recent_changes, and
recent_changes naming the observations and property values a write changed."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.domain.knowledge_base import NOT_SHOWN, PLANNED_NOT_SHOWN
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures: asyncio, the real model)

pytestmark = pytest.mark.model


async def text_of(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content, "\n".join(block.text for block in result.content)


def relation_lines(text: str) -> list[str]:
    return text.split("Relations:\n", 1)[1].split("\nEntities:", 1)[0].splitlines() if "Relations:" in text else []


@pytest.mark.anyio
async def test_times_of_day_in_the_text_are_marked_utc_and_dates_stay_as_given(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [
            {"id": "m1", "title": "Q3 planning meeting", "time": "2024-07-08T10:00:00+02:00",
             "text": "The Q3 planning meeting with the Payments team is scheduled for 10:00 on Monday."}]})
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Dana", "type": "Person"}, {"name": "Berlin Office", "type": "Office"},
                      {"name": "Q3 planning meeting", "type": "Meeting"}],
            "edges": [{"source": "Dana", "target": "Berlin Office", "type": "WORKS_AT",
                       "valid_from": "2024-06-01T00:30:00+02:00"},
                      {"source": "Dana", "target": "Q3 planning meeting", "type": "ATTENDS", "valid_from": "2024-07-01"}]})

        _, text = await text_of(client, "search", {"query": "Where does Dana work?"})
        assert "- Dana works at Berlin Office (since 2024-05-31 22:30 UTC)" in text
        assert "(since 2024-07-01)" in text  # a date alone has no time of day to mark
        _, text = await text_of(client, "search", {"query": "When is the Q3 planning meeting?"})
        assert "[m1#1] (2024-07-08 08:00 UTC) Q3 planning meeting: " in text

        await call_ok(client, "delete_relations", {"relations": [
            {"source": "Dana", "target": "Berlin Office", "type": "WORKS_AT"}]})
        _, text = await text_of(client, "recent_changes", {})
        lines = text.splitlines()
        assert lines and all(re.match(r"- \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC [a-z]", line) for line in lines), lines
        assert any(line.endswith("fact deleted: Dana works at Berlin Office (since 2024-05-31 22:30 UTC)")
                   for line in lines), lines
        assert any(line.endswith("fact added: Dana attends Q3 planning meeting (since 2024-07-01)") for line in lines)


@pytest.mark.anyio
async def test_planned_facts_are_counted_like_ended_ones_and_shown_with_history(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": name, "type": "Person"} for name in ("Alice", "Bob", "Carol")]
            + [{"name": "Payments Team", "type": "Team"}],
            "edges": [{"source": "Bob", "target": "Payments Team", "type": "LEADS", "valid_from": "2024-06-01",
                       "valid_until": "2090-03-01"},
                      {"source": "Carol", "target": "Payments Team", "type": "LEADS", "valid_from": "2090-03-01"}]})
        question = "Who leads the Payments team?"
        found, text = await text_of(client, "search", {"query": question})
        assert (found["ended_not_shown"], found["planned_not_shown"]) == (0, 1)
        assert text.splitlines()[-1] == PLANNED_NOT_SHOWN.format(count=1)
        assert [line for line in relation_lines(text) if "Carol" in line] == []

        await call_ok(client, "add_knowledge_graph", {"edges": [
            {"source": "Alice", "target": "Payments Team", "type": "LEADS", "valid_from": "2024-01-01",
             "valid_until": "2024-06-01"}]})
        found, text = await text_of(client, "search", {"query": question})
        assert (found["ended_not_shown"], found["planned_not_shown"]) == (1, 1)
        assert text.splitlines()[-1] == NOT_SHOWN.format(ended=1, planned=1)

        found, text = await text_of(client, "search", {"query": question, "include_history": True})
        assert (found["ended_not_shown"], found["planned_not_shown"]) == (0, 0)
        assert {(e["source"], e["valid_from"][:10]) for e in found["edges"]} == {
            ("Bob", "2024-06-01"), ("Carol", "2090-03-01"), ("Alice", "2024-01-01")}
        # What holds now, then what comes next, then what ended.
        assert relation_lines(text) == [
            "- Bob leads Payments Team (2024-06-01 to 2090-03-01)",
            "- Carol leads Payments Team (planned, from 2090-03-01)",
            "- Alice leads Payments Team (2024-01-01 to 2024-06-01)"]
        assert "not shown" not in text


ON_CALL = ["Ann", "Ben", "Cy", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jon", "Kim", "Lou", "Max", "Ned"]


@pytest.mark.anyio
async def test_with_history_the_fact_that_holds_now_comes_first_and_the_rest_newest_first(services):
    start = date(2024, 1, 1)
    weeks = [(start + timedelta(weeks=i), start + timedelta(weeks=i + 1)) for i in range(len(ON_CALL))]
    edges = [{"source": person, "target": "Payments Team", "type": "ON_CALL_FOR", "valid_from": begin.isoformat(),
              **({"valid_until": end.isoformat()} if i < len(ON_CALL) - 1 else {})}
             for i, (person, (begin, end)) in enumerate(zip(ON_CALL, weeks))]
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": p, "type": "Person"} for p in ON_CALL] + [{"name": "Payments Team", "type": "Team"}],
            "edges": edges})
        question = "Who is on call for Payments?"
        found, text = await text_of(client, "search", {"query": question, "include_history": True})
        assert [e["source"] for e in found["edges"]] == ON_CALL[::-1]  # Ned holds now; then the latest ended first
        assert relation_lines(text)[0] == f"- Ned on call for Payments Team (since {weeks[-1][0].isoformat()})"
        assert relation_lines(text)[1:] == [
            f"- {p} on call for Payments Team ({b.isoformat()} to {e.isoformat()})"
            for p, (b, e) in reversed(list(zip(ON_CALL[:-1], weeks[:-1])))]

        # A small budget cuts the oldest periods, never the fact that holds now.
        found, text = await text_of(client, "search", {"query": question, "include_history": True,
                                                          "token_budget": 100})
        assert found["truncated"] and relation_lines(text)[0].startswith("- Ned on call for Payments Team (since")
        assert "Ann on call" not in text

        # A window's periods, newest first too.
        found, _ = await text_of(client, "search", {"query": question, "after": "2024-02-01",
                                                      "before": "2024-03-01"})
        ends = [e["valid_until"] for e in found["edges"]]
        assert len(ends) >= 4 and ends == sorted(ends, reverse=True)


@pytest.mark.anyio
async def test_relation_properties_come_back_and_are_shown_on_the_fact_s_line(services):
    async with Client(build_server(services, tool_set="all")) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Checkout Service", "type": "Service"}, {"name": "Production", "type": "Environment"}],
            "edges": [{"source": "Checkout Service", "target": "Production", "type": "DEPLOYED_IN",
                       "properties": {"version": "v2.4", "replicas": 3}, "valid_from": "2024-05-02"}]})
        await call_ok(client, "create_relations", {"relations": [
            {"from": "Checkout Service", "to": "Production", "relationType": "serves traffic in"}]})

        found, text = await text_of(client, "search", {"query": "What version of Checkout Service runs in production?"})
        deployed = next(e for e in found["edges"] if e["type"] == "DEPLOYED_IN")
        assert deployed["properties"] == {"version": "v2.4", "replicas": 3}
        serves = next(e for e in found["edges"] if e["type"] == "SERVES_TRAFFIC_IN")
        assert serves["properties"] == {}  # the memory tools' own record of the type's spelling is not the caller's
        assert ("- Checkout Service deployed in Production (since 2024-05-02); properties: version: v2.4; replicas: 3"
                in relation_lines(text))
        assert "- Checkout Service serves traffic in Production" in relation_lines(text)

        entities = await call_ok(client, "get_entities", {"names": ["Checkout Service"]})
        by_type = {r["type"]: r["properties"] for r in entities["entities"][0]["relations"]}
        assert by_type == {"DEPLOYED_IN": {"version": "v2.4", "replicas": 3}, "SERVES_TRAFFIC_IN": {}}

        graph = await call_ok(client, "open_nodes", {"names": ["Checkout Service"]})
        relations = {r["relationType"]: r.get("properties") for r in graph["relations"]}
        assert relations == {"DEPLOYED_IN": {"version": "v2.4", "replicas": 3}, "serves traffic in": None}


@pytest.mark.anyio
async def test_a_question_about_what_changed_is_pointed_to_recent_changes(services):
    async with Client(build_server(services)) as client:
        assert {"search", "recent_changes"} <= {tool.name for tool in (await client.list_tools()).tools}
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Payments Team", "type": "Team", "observations": ["Bob now leads the Payments team"]},
            {"name": "Decision: use Kafka", "type": "Decision",
             "observations": ["Decision reversed: we will use SQS instead of Kafka"]}]})
        found, text = await text_of(client, "search", {"query": "What changed last week?"})
        assert found["nothing_relevant"]
        assert "For what changed recently, call recent_changes" in text


@pytest.mark.anyio
async def test_recent_changes_names_the_observations_added_and_the_property_values_changed(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Checkout Service", "type": "Service", "properties": {"version": "v2.3", "owner": "Team A"},
             "observations": ["Decision: Checkout uses Kafka for events"]}]})
        await call_ok(client, "update_entity", {
            "name": "Checkout Service", "properties": {"version": "v2.4", "tier": "gold"},
            "remove_observations": ["Decision: Checkout uses Kafka for events"],
            "add_observations": ["Decision reversed: Checkout uses SQS for events, not Kafka"]})
        changes, text = await text_of(client, "recent_changes", {})
        listed = [(c["change"], c["subject"]) for c in changes["changes"]]
        assert listed[:4] == [
            ("entity updated", "Checkout Service [Service]"),
            ("observations added",
             "Checkout Service [Service]: Decision reversed: Checkout uses SQS for events, not Kafka"),
            ("observations deleted", "Checkout Service [Service]: Decision: Checkout uses Kafka for events"),
            ("properties changed",
             "Checkout Service [Service]: version: v2.3 -> v2.4; owner: Team A -> (none); tier: (none) -> gold")]
        assert listed[4:] == [("entity created", "Checkout Service [Service]")]  # its first observation with it
        assert "observations added: Checkout Service [Service]: Decision reversed" in text
        assert "properties changed: Checkout Service [Service]: version: v2.3 -> v2.4" in text

        # Written again as stored: nothing more is listed.
        await call_ok(client, "update_entity", {"name": "Checkout Service", "properties": {"version": "v2.4",
                                                                                          "tier": "gold"}})
        again, _ = await text_of(client, "recent_changes", {})
        assert [(c["change"], c["subject"]) for c in again["changes"]] == listed
