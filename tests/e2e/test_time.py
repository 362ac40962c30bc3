"""Time through the official MCP client, on the real server, store and model: a person changes jobs.

Facts are added with validity, one is ended, a new one added; search now, as of before the change, with history,
and within a window of document times; recent_changes since the change; an export imported into another file
keeps the history; bad input is refused and nothing is written.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, counts, error_text, make_services

pytestmark = pytest.mark.model

NODES = [
    {"name": "Dana Okafor", "type": "Person", "description": "Site reliability engineer."},
    {"name": "Northwind Logistics", "type": "Organization", "description": "A freight company."},
    {"name": "Helios Robotics", "type": "Organization", "description": "A warehouse robotics startup."},
]
WORKED_AT_NORTHWIND = {"source": "Dana Okafor", "target": "Northwind Logistics", "type": "WORKS_AT",
                       "description": "Dana Okafor works at Northwind Logistics as an SRE.", "valid_from": "2021-03-01"}
WORKS_AT_HELIOS = {"source": "Dana Okafor", "target": "Helios Robotics", "type": "WORKS_AT",
                   "description": "Dana Okafor works at Helios Robotics.", "valid_from": "2024-02-01"}
DOCUMENTS = [
    {"id": "onboarding", "title": "Northwind onboarding", "time": "2021-03-01T09:00:00Z",
     "text": "Dana Okafor joined Northwind Logistics today as a site reliability engineer on the freight team."},
    {"id": "farewell", "title": "Farewell note", "time": "2024-01-31",
     "text": "Dana Okafor leaves Northwind Logistics this week and starts at Helios Robotics in February."},
]
QUERY = "Where does Dana Okafor work?"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    return make_services(tmp_path, db_path, minilm, plugin_manager)


def facts(result: dict[str, Any]) -> set[tuple[str, str, str | None]]:
    return {(e["source"], e["target"], e["valid_until"]) for e in result["edges"]}


async def story(client: Client) -> None:
    await call_ok(client, "add_documents", {"documents": DOCUMENTS})
    await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [WORKED_AT_NORTHWIND]})
    ended = await call_ok(client, "end_relations", {"relations": [
        {"source": "dana okafor", "target": "Northwind Logistics", "type": "works_at", "ended_at": "2024-01-31"},
        {"source": "Dana Okafor", "target": "Helios Robotics", "type": "WORKS_AT"},
    ]})
    assert [(r["target"], r["valid_until"]) for r in ended["ended"]] == [("Northwind Logistics", "2024-01-31T00:00:00Z")]
    assert [r["target"] for r in ended["not_found"]] == ["Helios Robotics"]  # nothing current to end
    await call_ok(client, "add_knowledge_graph", {"edges": [WORKS_AT_HELIOS]})


@pytest.mark.anyio
async def test_a_job_change_is_kept_as_history_and_searched_in_time(services):
    async with Client(build_server(services)) as client:
        await story(client)

        now = (await client.call_tool("search", {"query": QUERY})).structured_content
        assert facts(now) == {("Dana Okafor", "Helios Robotics", None)}

        result = await client.call_tool("search", {"query": QUERY, "as_of": "2023-06-01"})
        assert facts(result.structured_content) == {("Dana Okafor", "Northwind Logistics", "2024-01-31T00:00:00Z")}
        assert "(2021-03-01 to 2024-01-31)" in result.content[0].text

        history = await client.call_tool("search", {"query": QUERY, "include_history": True})
        assert facts(history.structured_content) == {("Dana Okafor", "Helios Robotics", None),
                                                     ("Dana Okafor", "Northwind Logistics", "2024-01-31T00:00:00Z")}
        assert "(since 2024-02-01)" in history.content[0].text

        window = await client.call_tool("search", {"query": QUERY, "after": "2024-01-01", "before": "2024-03-01"})
        passages = window.structured_content["passages"]
        assert [p["document_id"] for p in passages] == ["farewell"]
        assert passages[0]["time"] == "2024-01-31T00:00:00Z"
        assert "(2024-01-31)" in window.content[0].text
        early = await call_ok(client, "search", {"query": QUERY, "before": "2022-01-01"})
        assert [p["document_id"] for p in early["passages"]] == ["onboarding"]
        assert facts(early) == {("Dana Okafor", "Northwind Logistics", "2024-01-31T00:00:00Z")}

        entity = await call_ok(client, "get_entities", {"names": ["Dana Okafor"]})
        periods = {(r["target"], r["valid_from"], r["valid_until"]) for r in entity["entities"][0]["relations"]}
        assert periods == {("Northwind Logistics", "2021-03-01T00:00:00Z", "2024-01-31T00:00:00Z"),
                           ("Helios Robotics", "2024-02-01T00:00:00Z", None)}


@pytest.mark.anyio
async def test_recent_changes_lists_what_was_written_since(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [WORKED_AT_NORTHWIND]})
        mark = services.knowledge_base.store.list_edges("default")[0].created_at.isoformat()
        everything = await call_ok(client, "recent_changes", {})
        assert {c["change"] for c in everything["changes"]} == {"entity created", "fact added"}
        await call_ok(client, "end_relations", {"relations": [
            {"source": "Dana Okafor", "target": "Northwind Logistics", "type": "WORKS_AT", "ended_at": "2024-01-31"}]})
        await call_ok(client, "add_knowledge_graph", {"edges": [WORKS_AT_HELIOS]})
        await call_ok(client, "add_documents", {"documents": DOCUMENTS[1:]})

        result = await client.call_tool("recent_changes", {"since": mark, "limit": 10})
        changes = result.structured_content["changes"]
        kinds = [c["change"] for c in changes]
        assert {"fact ended", "fact added", "document added"} <= set(kinds)
        assert [c["at"] for c in changes] == sorted((c["at"] for c in changes), reverse=True)  # newest first
        ended = next(c for c in changes if c["change"] == "fact ended")
        assert "Northwind Logistics" in ended["subject"] and "2021-03-01 to 2024-01-31" in ended["subject"]
        assert "fact ended:" in result.content[0].text

        one = await call_ok(client, "recent_changes", {"limit": 1})
        assert len(one["changes"]) == 1 and one["truncated"] is True


@pytest.mark.anyio
async def test_export_and_import_keep_the_history(services, tmp_path, minilm, plugin_manager):
    out = io.StringIO()
    async with Client(build_server(services)) as client:
        await story(client)
        export_jsonl(services.knowledge_base, out, embeddings=True)
        original = {(e.valid_from, e.valid_until, e.created_at)
                    for e in services.knowledge_base.store.list_edges("default", include_expired=True)}
    (tmp_path / "copy").mkdir()
    copy = make_services(tmp_path / "copy", tmp_path / "copy.duckdb", minilm, plugin_manager)
    import_lines(copy.knowledge_base, io.StringIO(out.getvalue()))
    async with Client(build_server(copy)) as client:
        entity = await call_ok(client, "get_entities", {"names": ["Dana Okafor"]})
        periods = {(r["target"], r["valid_from"], r["valid_until"]) for r in entity["entities"][0]["relations"]}
        assert periods == {("Northwind Logistics", "2021-03-01T00:00:00Z", "2024-01-31T00:00:00Z"),
                           ("Helios Robotics", "2024-02-01T00:00:00Z", None)}
        past = await call_ok(client, "search", {"query": QUERY, "as_of": "2023-06-01", "before": "2022-01-01"})
        assert facts(past) == {("Dana Okafor", "Northwind Logistics", "2024-01-31T00:00:00Z")}
        assert [(p["document_id"], p["time"]) for p in past["passages"]] == [("onboarding", "2021-03-01T09:00:00Z")]
        imported = {(e.valid_from, e.valid_until, e.created_at)
                    for e in copy.knowledge_base.store.list_edges("default", include_expired=True)}
    assert imported == original


@pytest.mark.anyio
async def test_bad_times_are_refused_and_nothing_is_written(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [WORKED_AT_NORTHWIND]})
        before = counts(services)
        backwards = {**WORKS_AT_HELIOS, "valid_from": "2024-06-01", "valid_until": "2024-01-01"}
        text = error_text(await client.call_tool("add_knowledge_graph", {"nodes": NODES[:1], "edges": [backwards]}))
        assert "valid_until" in text and "before valid_from" in text
        text = error_text(await client.call_tool("add_knowledge_graph", {"edges": [
            {**WORKS_AT_HELIOS, "valid_from": "last spring"}]}))
        assert "ISO 8601" in text
        text = error_text(await client.call_tool("add_documents", {"documents": [
            {"id": "x", "text": "A note.", "time": "31/01/2024"}]}))
        assert "ISO 8601" in text
        text = error_text(await client.call_tool("end_relations", {"relations": [
            {"source": "Dana Okafor", "target": "Northwind Logistics", "type": "WORKS_AT", "ended_at": "2020-01-01"}]}))
        assert "before the relation started" in text
        text = error_text(await client.call_tool("end_relations", {"relations": [
            {"source": "Dana Okafor", "target": "Northwind Logistics", "type": "WORKS_AT", "ended_at": "2024-06-01"},
            {"source": "dana okafor", "target": "Northwind Logistics", "type": "works at", "ended_at": "2024-07-01"}]}))
        assert ("relations[0] and relations[1] name the same relation (Dana Okafor -WORKS_AT-> Northwind Logistics)"
                in text and "nothing was ended" in text)
        text = error_text(await client.call_tool("search", {"query": QUERY, "after": "2024-03-01",
                                                            "before": "2024-01-01"}))
        assert "must be later than after" in text
        assert error_text(await client.call_tool("recent_changes", {"since": "2024-03-01", "until": "2024-01-01"}))
        assert counts(services) == before
        stored = services.knowledge_base.store.list_edges("default", include_expired=True)
        assert [(e.valid_from.isoformat(), e.valid_until) for e in stored] == [("2021-03-01T00:00:00", None)]


@pytest.mark.anyio
async def test_a_relation_whose_end_is_still_to_come_is_current_for_writes_as_for_search(services):
    """Search holds a period that has not ended yet as valid now; writing the relation again updates that period
    rather than opening a second one, and end_relations ends it."""
    contract = {**WORKS_AT_HELIOS, "valid_until": "2099-01-31"}
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [contract]})
        assert facts(await call_ok(client, "search", {"query": QUERY})) == {
            ("Dana Okafor", "Helios Robotics", "2099-01-31T00:00:00Z")}
        again = {**WORKS_AT_HELIOS, "description": "Dana Okafor works at Helios Robotics on contract."}
        del again["valid_from"]
        written = await call_ok(client, "add_knowledge_graph", {"edges": [again]})
        assert (written["edges_created"], written["edges_updated"]) == (0, 1)
        stored = services.knowledge_base.store.list_edges("default", include_expired=True)
        assert [(e.description, e.valid_from.isoformat(), e.valid_until.isoformat()) for e in stored] == [
            (again["description"], "2024-02-01T00:00:00", "2099-01-31T00:00:00")]
        ended = await call_ok(client, "end_relations", {"relations": [
            {"source": "Dana Okafor", "target": "Helios Robotics", "type": "WORKS_AT", "ended_at": "2025-01-01"}]})
        assert [r["valid_until"] for r in ended["ended"]] == ["2025-01-01T00:00:00Z"]


@pytest.mark.anyio
async def test_the_counts_take_the_relations_that_hold_now_as_search_does(services):
    """graph_stats, list_namespaces and the schema resource count a relation whose end is still to come, and not
    one that starts later nor one that ended: the relations search shows now."""
    async with Client(build_server(services)) as client:
        await story(client)  # Northwind ended, Helios since 2024
        await call_ok(client, "end_relations", {"relations": [
            {"source": "Dana Okafor", "target": "Helios Robotics", "type": "WORKS_AT", "ended_at": "2099-01-31"}]})
        await call_ok(client, "add_knowledge_graph", {"edges": [
            {"source": "Dana Okafor", "target": "Northwind Logistics", "type": "ADVISES", "valid_from": "2099-02-01"},
            {"source": "Dana Okafor", "target": "Helios Robotics", "type": "ADVISES", "valid_from": "2099-02-01"}]})
        assert facts(await call_ok(client, "search", {"query": QUERY})) == {
            ("Dana Okafor", "Helios Robotics", "2099-01-31T00:00:00Z")}

        stats = await call_ok(client, "graph_stats", {})
        assert (stats["edges"], stats["edge_types"]) == (1, {"WORKS_AT": 1})
        [namespace] = (await call_ok(client, "list_namespaces", {}))["namespaces"]
        assert namespace["relations"] == 1
        schema = json.loads((await client.read_resource("duckgraph://schema")).contents[0].text)
        assert [(t["type"], t["count"]) for t in schema["edge_types"]] == [("WORKS_AT", 1)]
        deleted = await call_ok(client, "delete_namespace", {"namespace": "default", "confirm": "default"})
        assert deleted["relations"] == 1


@pytest.mark.anyio
async def test_document_times_restrict_passages_of_both_channels_and_the_walk(services):
    """A passage only the keyword channel finds (an incident code, no entity), one the vectors find and those
    the walk reaches from the facts: a window keeps those dated in it, and `as_of` leaves out those dated after
    it (they told of a later world); a passage of unknown time stays for `as_of` and goes for a window."""
    incident = {"id": "incident", "title": "Pager log", "time": "2024-03-05",
                "text": "INC-7731 paged the freight on-call at 03:12; the conveyor PLC firmware was rolled back."}
    untimed = {"id": "untimed", "title": "Undated note",
               "text": "Dana Okafor wrote the on-call handbook for Northwind Logistics."}
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [*DOCUMENTS, incident, untimed]})
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [WORKED_AT_NORTHWIND]})

        def documents(result: dict[str, Any]) -> set[str]:
            return {p["document_id"] for p in result["passages"]}

        assert "incident" in documents(await call_ok(client, "search", {"query": "INC-7731"}))
        for filters in ({"before": "2024-03-01"}, {"as_of": "2024-03-01"}, {"after": "2024-03-06"}):
            assert "incident" not in documents(await call_ok(client, "search", {"query": "INC-7731", **filters}))
        assert "incident" in documents(await call_ok(client, "search", {"query": "INC-7731",
                                                                         "as_of": "2024-03-05"}))

        everything = documents(await call_ok(client, "search", {"query": QUERY, "max_passages": 10}))
        assert {"onboarding", "farewell", "untimed"} <= everything
        then = documents(await call_ok(client, "search", {"query": QUERY, "max_passages": 10,
                                                           "as_of": "2023-06-01"}))
        assert "farewell" not in then and {"onboarding", "untimed"} <= then
        window = documents(await call_ok(client, "search", {"query": QUERY, "max_passages": 10,
                                                             "after": "2021-01-01", "before": "2024-01-01"}))
        assert window == {"onboarding"}
