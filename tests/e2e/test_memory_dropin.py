"""The memory tool set as a drop-in for the reference memory server: calls the reference accepts and what they do,
through the official MCP client, on a real DuckDB file with the real default model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.domain.limits import MAX_OBSERVATION_CHARS, MAX_OBSERVATIONS
from duckgraph.core.domain.memory_pages import TEXT_TOKENS
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import GRAPH_RESOURCE, call_ok, make_services

pytestmark = pytest.mark.model


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def E(name: str, kind: str, observations: list[str]) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": observations}


def R(source: str, target: str, kind: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": kind}


async def names_found(client: Client, query: str) -> list[str]:
    found, _ = await call_ok(client, "search_nodes", {"query": query})
    return [e["name"] for e in found["entities"]]


@pytest.mark.anyio
async def test_a_long_lived_entity_keeps_a_thousand_observations(tmp_path, minilm):
    # The reference's standard prompt keeps everything it learns about the user as observations of default_user.
    facts = [f"user fact {i}: " + " ".join(["prefers quiet mornings, green tea and long walks by the river"] * 3)
             for i in range(MAX_OBSERVATIONS)]
    async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
        await call_ok(client, "create_entities", {"entities": [E("default_user", "person", facts[:500])]})
        for start in range(500, MAX_OBSERVATIONS, 100):
            added, _ = await call_ok(client, "add_observations", {"observations": [
                {"entityName": "default_user", "contents": facts[start:start + 100]}]})
            assert len(added["results"][0]["addedObservations"]) == 100
        # All are stored; one answer (at most memory_pages.TEXT_TOKENS) shows the first ones and says so.
        result = await client.call_tool("open_nodes", {"names": ["default_user"]})
        shown = result.structured_content["entities"][0]["observations"]
        assert 0 < len(shown) < MAX_OBSERVATIONS and shown == facts[:len(shown)]
        assert result.structured_content["observations_truncated"] is True
        assert f"{len(shown)} of its 1,000 observations" in result.content[1].text
        assert (await names_found(client, "user fact 742"))[:1] == ["default_user"]
        # One more is refused, saying what to do, and nothing is added.
        result = await client.call_tool("add_observations", {"observations": [
            {"entityName": "default_user", "contents": ["one more"]}]})
        assert result.is_error
        assert f"would have {MAX_OBSERVATIONS + 1} observations; the limit is {MAX_OBSERVATIONS}" in \
            result.content[0].text and "delete_observations" in result.content[0].text
        removed, _ = await call_ok(client, "delete_observations", {"deletions": [
            {"entityName": "default_user", "observations": [facts[-1], "one more"]}]})
        assert removed["removed"] == [{"entity": "default_user", "removed": [facts[-1]]}]


@pytest.mark.anyio
async def test_blank_names_are_not_found_and_long_queries_are_searched_by_substring(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
        note = "Long note: " + "lorem ipsum " * 250  # 3,011 characters
        await call_ok(client, "create_entities", {"entities": [E("Alice", "person", ["likes green tea"]),
                                                               E("Notes", "note", [note])]})
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Alice", "", "  "]})
        assert [e["name"] for e in opened["entities"]] == ["Alice"]
        deleted, text = await call_ok(client, "delete_entities", {"entityNames": ["", " "]})
        assert text == "Entities deleted successfully" and deleted["deleted"] == [] and deleted["not_found"] == ["", " "]
        # Longer than the search tool takes, still the reference's substring match ...
        assert await names_found(client, note[:2_500]) == ["Notes"]
        # ... and one longer than any observation can be is inside no entity.
        assert await names_found(client, "g" * (MAX_OBSERVATION_CHARS + 1)) == []
        assert (await names_found(client, ""))[:1] == ["Alice"]


@pytest.mark.anyio
async def test_a_user_s_own_entity_of_type_unknown_is_no_placeholder(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
        await call_ok(client, "create_entities", {"entities": [E("Mystery Caller", "unknown", ["called on Monday"]),
                                                               E("Blank Slate", "unknown", [])]})
        # Both exist: skipped, as the reference skips a stored name (a note says what was not added); their type
        # stays.
        again, text = await call_ok(client, "create_entities", {"entities": [
            E("Mystery Caller", "person", ["guess: a recruiter"]), E("Blank Slate", "idea", [])]})
        assert again == {"entities": [], "note": "'Mystery Caller' exists, so it was skipped: 1 observation it does "
                                                 "not hold was not added. Add them with add_observations."}
        assert text == "[]"
        # A relation's missing end is a placeholder, which create_entities fills in (and reports as created).
        created, _ = await call_ok(client, "create_relations", {"relations": [R("Mystery Caller", "Acme", "works at")]})
        assert "'Acme' did not exist" in created["relations"][0]["note"]
        filled, _ = await call_ok(client, "create_entities", {"entities": [E("Acme", "company", ["makes widgets"])]})
        assert filled["entities"] == [E("Acme", "company", ["makes widgets"])]
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Mystery Caller", "Blank Slate", "Acme"]})
    assert [(e["name"], e["entityType"], e["observations"]) for e in opened["entities"]] == [
        ("Mystery Caller", "unknown", ["called on Monday"]), ("Blank Slate", "unknown", []),
        ("Acme", "company", ["makes widgets"])]


@pytest.mark.anyio
async def test_search_nodes_puts_the_substring_matches_first_and_adds_no_mere_neighbours(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "create_entities", {"entities": [
            E("Alice", "person", ["likes green tea", "lower-case twin"]), E("Nowhere Land", "place", []),
            E("Multi", "software engineer", ["line one"])]})
        await call_ok(client, "create_relations", {"relations": [R("Alice", "Nowhere Land", "dreams of"),
                                                                 R("Alice", "Multi", "works with")]})
        # Alice's neighbours come back through her relations, not as entities found.
        found, _ = await call_ok(client, "search_nodes", {"query": "twin"})
        assert [e["name"] for e in found["entities"]] == ["Alice"] and len(found["relations"]) == 2
        assert await names_found(client, "green tea") == ["Alice"]

        await call_ok(client, "create_entities", {"entities": [
            E("default_user", "person", [f"user fact {i}" for i in range(50)]),
            *(E(f"Entity {i:03d}", "thing", [f"fact {i}"]) for i in range(60))]})
        await call_ok(client, "create_relations", {"relations": [
            R("default_user", f"Entity {i:03d}", "owns") for i in range(60)]})
        names = await names_found(client, "user fact 42")
        # The one entity that holds the query comes first; the rest are what duckgraph's search anchors on.
        searched, _ = await call_ok(client, "search", {"query": "user fact 42"})
        anchors = [a["name"] for a in searched["anchors"]]
        assert names[0] == "default_user"
        assert names[1:] == [n for n in anchors if n != "default_user"]


@pytest.mark.anyio
async def test_delete_results_and_schemas_are_in_the_memory_tools_terms(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        await call_ok(client, "create_entities", {"entities": [E("Bob", "p", ["x"]), E("Ann", "p", []),
                                                               E("Spacey", "p", [])]})
        await call_ok(client, "create_relations", {"relations": [R("Bob", "Ann", "knows")]})
        deleted, _ = await call_ok(client, "delete_relations", {"relations": [R("bob", "Ann", "knows"),
                                                                              R("Bob", "Ann", "hates")]})
        # The caller's spelling, as create_relations answers (the stored type is KNOWS).
        assert (deleted["deleted"], deleted["not_found"], deleted["edges_deleted"]) == (
            ["bob -knows-> Ann"], ["Bob -hates-> Ann"], 1)
        removed, _ = await call_ok(client, "delete_observations", {"deletions": [
            {"entityName": "Bob", "observations": ["x"]}]})
        assert removed["removed"] == [{"entity": "Bob", "removed": ["x"]}]
        # Names match ignoring case and spacing, as the description says.
        assert "ignoring case and spacing" in tools["delete_entities"].description
        gone, _ = await call_ok(client, "delete_entities", {"entityNames": [" spacey "]})
        assert gone["deleted"] == ["Spacey"]
    namespace = tools["open_nodes"].input_schema["properties"]["namespace"]
    assert namespace["anyOf"] == [{"type": "string"}, {"type": "null"}]
    for name in ("delete_entities", "delete_relations"):
        assert tools[name].input_schema["properties"]["namespace"] == namespace, name


@pytest.mark.anyio
@pytest.mark.parametrize("tool_set", ["memory", "all"])
async def test_the_graph_resource_serves_read_graph_s_largest_page(tmp_path, minilm, tool_set):
    async with Client(build_server(make_services(tmp_path, tool_set, minilm))) as client:
        await call_ok(client, "create_entities", {"entities": [E(f"Item {i}", "thing", []) for i in range(1_001)]})
        await call_ok(client, "create_relations", {"relations": [R("Item 0", "Item 1000", "precedes")]})
        [content] = (await client.read_resource(GRAPH_RESOURCE)).contents
        _, text = await call_ok(client, "read_graph", {"limit": 1_000})
    assert content.text == text
    graph = json.loads(content.text)
    # As many of the first 1,000 as fit in an answer (memory_pages.TEXT_TOKENS), then the next page.
    assert 500 < len(graph["entities"]) < 1_000 and graph["next_offset"] == len(graph["entities"])
    assert estimate_tokens(content.text) <= TEXT_TOKENS
    assert graph["relations"] == [R("Item 0", "Item 1000", "precedes")]
