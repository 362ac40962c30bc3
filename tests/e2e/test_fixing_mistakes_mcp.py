"""Fixing mistakes in a memory, through the official MCP client on the real server and a real DuckDB file: a fact
ended by mistake (or at the wrong date) is deleted by its undated period and written again; a merge says what it
did not keep as it was; a merged duplicate's old name cannot delete the entity it was merged into; and the delete
and end tools say why a name or a relation matched nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.fakes import HashingEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve(tmp_path: Path, tools: str = "graphrag") -> Services:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, tools=tools)
    return bootstrap(settings, embedder=HashingEmbedder())


@pytest.fixture
def services(tmp_path: Path) -> Services:
    return serve(tmp_path)


PEOPLE = [{"name": "Maya Chen", "type": "Person"}, {"name": "Payments Team", "type": "Team"},
          {"name": "Acme Corp", "type": "Organization"}, {"name": "Zurich", "type": "City"}]


def leads(**more: Any) -> dict[str, Any]:
    return {"source": "Maya Chen", "target": "Payments Team", "type": "LEADS", **more}


async def periods(client: Client, type: str, name: str = "Maya Chen") -> list[tuple[str | None, str | None]]:
    entity = (await call_ok(client, "get_entities", {"names": [name]}))["entities"][0]
    return sorted(((r["valid_from"], r["valid_until"]) for r in entity["relations"] if r["type"] == type),
                  key=str)


@pytest.mark.anyio
async def test_an_undated_fact_ended_by_mistake_is_deleted_by_its_undated_period_and_written_again(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": PEOPLE, "edges": [leads()]})
        await call_ok(client, "end_relations", {"relations": [leads(ended_at="2024-01-01")]})

        # Each way the user tries says exactly what to send.
        missed = await call_ok(client, "delete_relations", {"relations": [leads()]})
        assert missed["deleted"] == [] and len(missed["not_found"]) == 1
        assert "valid_from null (the period until 2024-01-01)" in missed["hints"][0]
        not_ended = await call_ok(client, "end_relations", {"relations": [leads(ended_at="2024-06-01")]})
        assert not_ended["ended"] == [] and "it has ended" in not_ended["hints"][0]
        assert "delete_relations, giving this relation with valid_from null" in not_ended["hints"][0]
        refused = await client.call_tool("add_knowledge_graph", {"edges": [leads(valid_until="2024-06-01")]})
        said = error_text(refused)
        assert "the relation Maya Chen -LEADS-> Payments Team would hold" in said  # the names as stored
        assert "delete_relations with this relation and valid_from null" in said
        assert await periods(client, "LEADS") == [(None, "2024-01-01T00:00:00Z")]

        # valid_from given as null names the period with no known start.
        deleted = await call_ok(client, "delete_relations", {"relations": [leads(valid_from=None)]})
        assert [r["type"] for r in deleted["deleted"]] == ["LEADS"] and deleted["not_found"] == []
        assert await periods(client, "LEADS") == []
        await call_ok(client, "add_knowledge_graph", {"edges": [leads(valid_until="2024-06-01")]})
        assert await periods(client, "LEADS") == [(None, "2024-06-01T00:00:00Z")]


@pytest.mark.anyio
async def test_valid_from_null_deletes_only_the_undated_period_and_a_dated_one_is_named_by_its_start(services):
    works = {"source": "Maya Chen", "target": "Acme Corp", "type": "WORKS_AT"}
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": PEOPLE, "edges": [
            {**works, "valid_until": "2019-01-01"}, {**works, "valid_from": "2021-05-01"}]})
        await call_ok(client, "delete_relations", {"relations": [{**works, "valid_from": None}]})
        assert await periods(client, "WORKS_AT") == [("2021-05-01T00:00:00Z", None)]
        missed = await call_ok(client, "delete_relations", {"relations": [{**works, "valid_from": None}]})
        assert missed["deleted"] == [] and 'valid_from "2021-05-01" (the period since 2021-05-01)' in missed["hints"][0]

        # Ended by mistake, a dated fact's overlap error names the start to send.
        await call_ok(client, "end_relations", {"relations": [{**works, "ended_at": "2024-01-01"}]})
        refused = await client.call_tool("add_knowledge_graph", {"edges": [{**works, "valid_from": "2021-05-01"}]})
        assert 'delete_relations with this relation and valid_from "2021-05-01"' in error_text(refused)
        assert await periods(client, "WORKS_AT") == [("2021-05-01T00:00:00Z", "2024-01-01T00:00:00Z")]


async def merged(client: Client) -> dict[str, Any]:
    await call_ok(client, "add_knowledge_graph", {"nodes": [
        {"name": "Maya Chen", "type": "Person", "description": "Engineering lead",
         "properties": {"role": "lead", "email": "maya@acme.io"}},
        {"name": "Maya Chenn", "type": "Person", "description": "Payments engineer who moved from Lisbon",
         "properties": {"role": "manager", "phone": "555-1234"}},
        {"name": "Bob", "type": "Person"}], "edges": [
        {"source": "Maya Chenn", "target": "Maya Chen", "type": "SAME_TEAM_AS"},
        {"source": "Bob", "target": "Maya Chenn", "type": "REPORTS_TO"}]})
    return await call_ok(client, "merge_entities", {"sources": ["Maya Chenn"], "target": "Maya Chen"})


@pytest.mark.anyio
async def test_a_merge_says_what_it_did_not_keep_as_it_was(services):
    async with Client(build_server(services)) as client:
        result = await merged(client)
        maya = (await call_ok(client, "get_entities", {"names": ["Maya Chen"]}))["entities"][0]
        changes = await call_ok(client, "recent_changes", {})
    # The target's value stays; the source's is kept as an observation, and the result says so.
    assert maya["properties"] == {"role": "lead", "email": "maya@acme.io", "phone": "555-1234"}
    assert maya["observations"] == ["role: manager (from Maya Chenn)"]
    assert any(h.startswith("Maya Chenn's role: 'manager' was not kept as a property ('Maya Chen' keeps 'lead')")
               for h in result["hints"])
    # Two descriptions read as two statements.
    assert maya["description"] == "Engineering lead; Payments engineer who moved from Lisbon"
    # The relation between the two would join Maya Chen to herself: deleted, counted and listed as deleted.
    assert (result["edges_deleted"], result["edges_collapsed"]) == (1, 0)
    assert any("Maya Chenn -SAME_TEAM_AS-> Maya Chen" in h for h in result["hints"])
    assert [(r["source"], r["type"]) for r in maya["relations"]] == [("Bob", "REPORTS_TO")]
    assert {"change": "fact deleted", "subject": "Maya Chenn same team as Maya Chen"} in [
        {"change": c["change"], "subject": c["subject"]} for c in changes["changes"]]


@pytest.mark.anyio
@pytest.mark.parametrize("tools, argument", [("graphrag", "names"), ("memory", "entityNames"),
                                             ("all", "names"), ("all", "entityNames")])
async def test_a_merged_duplicate_s_old_name_does_not_delete_the_entity_it_was_merged_into(tmp_path, tools, argument):
    services = serve(tmp_path, "all")
    async with Client(build_server(services)) as client:
        await merged(client)
    async with Client(build_server(serve(tmp_path, tools))) as client:
        refused = await client.call_tool("delete_entities", {argument: ["Bob", "Maya Chenn"]})
        said = error_text(refused)
        assert "'Maya Chenn' is an alias of 'Maya Chen', not its name" in said
        assert "give its name, 'Maya Chen'" in said and "nothing was deleted" in said
        # To drop the alias: update_entity, which the memory tools do not have. Their words (entityNames) are what
        # tells, since a memory client sharing a file has its calls run by a server of every tool.
        if argument == "names":
            assert "to drop the alias use update_entity(name='Maya Chen', aliases=[])" in said
        else:
            assert "update_entity" not in said and said.endswith(
                "to delete that entity (with its relations) give its name, 'Maya Chen'; nothing was deleted")
    async with Client(build_server(serve(tmp_path, "all"))) as client:
        # The whole call was refused: Bob too is still there, and Maya Chen with her relation.
        found = await call_ok(client, "get_entities", {"names": ["Maya Chen", "Bob"]})
        assert sorted(e["name"] for e in found["entities"]) == ["Bob", "Maya Chen"]
        assert len(found["entities"][0]["relations"]) == 1
        # Named by her name as well, the old name deletes nothing more than she is.
        deleted = await call_ok(client, "delete_entities", {"names": ["Maya Chen", "Maya Chenn"]})
        assert deleted["deleted"] == ["Maya Chen"] and deleted["edges_deleted"] == 1


@pytest.mark.anyio
@pytest.mark.parametrize("tools, argument, look_up", [("graphrag", "names", "search"),
                                                      ("memory", "entityNames", "call search_nodes"),
                                                      ("all", "entityNames", "call search_nodes")])
async def test_a_name_not_found_is_looked_up_with_a_tool_the_caller_has(tmp_path, tools, argument, look_up):
    async with Client(build_server(serve(tmp_path, "all"))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": PEOPLE, "edges": []})
    async with Client(build_server(serve(tmp_path, tools))) as client:
        missed = await call_ok(client, "delete_entities", {argument: ["Maya Chne", "Nobody Else"]})
    assert missed["hints"] == [f"no entity named 'Maya Chne', 'Nobody Else'; did you mean 'Maya Chen' for "
                               f"'Maya Chne'? Otherwise {look_up} first to find the exact name"]


@pytest.mark.anyio
@pytest.mark.parametrize("tools, argument, lister", [
    ("graphrag", "names", "list_namespaces (`duckgraph namespaces`)"),
    ("memory", "entityNames", "`duckgraph namespaces` (on the command line)"),
    ("all", "entityNames", "`duckgraph namespaces` (on the command line)")])
async def test_an_empty_namespace_is_said_naming_only_tools_the_caller_has(tmp_path, tools, argument, lister):
    """The memory tools have no list_namespaces: named in their hint, it sent a model to a tool it cannot call."""
    async with Client(build_server(serve(tmp_path, "all"))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": PEOPLE, "edges": [], "namespace": "work"})
    async with Client(build_server(serve(tmp_path, tools))) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        missed = await call_ok(client, "delete_entities", {argument: ["Maya Chen"], "namespace": "team"})
    assert missed["hints"] == ["no entity named 'Maya Chen'. The namespace 'team' holds nothing yet. If the memory "
                               f"is in another one, {lister} shows those there are."]
    assert set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", missed["hints"][0])) <= listed


@pytest.mark.anyio
async def test_deletes_and_ends_say_why_a_name_or_a_relation_matched_nothing(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            *PEOPLE, {"name": "Maya Chenn", "type": "Person", "aliases": ["MC"]},
            {"name": "Mission Control", "type": "Team", "aliases": ["MC"]}], "edges": [
            {"source": "Maya Chen", "target": "Zurich", "type": "LIVES_IN"}]})
        ambiguous = await call_ok(client, "delete_entities", {"names": ["MC"]})
        assert ambiguous["not_found"] == ["MC"] and ambiguous["hints"] == [
            "no entity named 'MC'; it is an alias of several entities ('Maya Chenn', 'Mission Control'): use the "
            "exact name of one"]
        misspelt = await call_ok(client, "delete_entities", {"names": ["Maya Chne"]})
        assert "did you mean 'Maya Chen'?" in misspelt["hints"][0]
        wrong_type = await call_ok(client, "delete_relations", {"relations": [
            {"source": "Maya Chen", "target": "Zurich", "type": "LIVE_IN"}]})
        assert wrong_type["hints"] == ["Maya Chen -LIVE_IN-> Zurich: no relation of type LIVE_IN joins them; stored "
                                       "between them: Maya Chen -LIVES_IN-> Zurich"]
        wrong_name = await call_ok(client, "end_relations", {"relations": [
            {"source": "Maya Chne", "target": "Zurich", "type": "LIVES_IN"}]})
        assert wrong_name["ended"] == [] and "did you mean 'Maya Chen'?" in wrong_name["hints"][0]
        for tool, arguments in (("delete_entities", {"names": ["Zurich"]}),
                                ("delete_relations", {"relations": [{"source": "Maya Chen", "target": "Zurich",
                                                                     "type": "LIVES_IN"}]}),
                                ("end_relations", {"relations": [{"source": "Maya Chen", "target": "Zurich",
                                                                  "type": "LIVES_IN"}]})):
            empty = await call_ok(client, tool, {**arguments, "namespace": "wrok"})
            assert "The namespace 'wrok' holds nothing yet" in empty["hints"][0], tool
        # Nothing was deleted or ended by any of it.
        maya = (await call_ok(client, "get_entities", {"names": ["Maya Chen"]}))["entities"][0]
        assert [(r["type"], r["valid_until"]) for r in maya["relations"]] == [("LIVES_IN", None)]
