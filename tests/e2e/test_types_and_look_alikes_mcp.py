"""Entity types in another case or number, and names with look-alike letters, through the official MCP client on a
real DuckDB file: "List all people" lists the entities typed Person (and person, Persons, people); a write typed
"People" resolves onto the entity a "person" write made an alias; a name written with a Cyrillic a is reported in
possible_duplicates (graphrag tools) and in create_entities' note (memory tools), never merged; a name written with
another type than its entity's is said in resolved and hints, or goes to the one entity of that type that has it as
an alias."""

from __future__ import annotations

import json

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import anyio_backend, call_ok, make_services  # noqa: F401 (a fixture)
from tests.fakes import HashingEmbedder

CYRILLIC_MAYA = "M\u0430ya Chen"  # the second letter is U+0430 CYRILLIC SMALL LETTER A
REASON = "looks the same as 'Maya Chen' but uses other letters (CYRILLIC SMALL LETTER A for 'a')"


def person(name: str, type_: str, observation: str) -> dict:
    return {"name": name, "type": type_, "observations": [observation]}


@pytest.mark.model
@pytest.mark.anyio
async def test_a_question_about_people_lists_the_entities_of_the_type_in_every_case_and_number(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            person("Renée Dubois", "Person", "leads the platform team"),
            person("Maya Chen", "Person", "backend engineer"), person("Tom Okafor", "Person", "support")],
            "edges": []})

        async def listed(query: str) -> set[str] | None:
            found, _ = await call_ok(client, "search", {"query": query})
            return None if found["nothing_relevant"] else {a["name"] for a in found["anchors"]}

        # Before: "Nothing relevant to this query is stored" ("people" and "person" have other stems).
        for query in ("List all people", "How many people are there?"):
            assert await listed(query) == {"Renée Dubois", "Maya Chen", "Tom Okafor"}, query
        # Before: the one entity typed "people" alone, which read as the complete list.
        await call_ok(client, "add_knowledge_graph", {"nodes": [person("Priya Raman", "people", "designer")],
                                                      "edges": []})
        for query in ("List all people", "List all persons"):
            assert await listed(query) == {"Renée Dubois", "Maya Chen", "Tom Okafor", "Priya Raman"}, query
        assert await listed("Which person made the coffee machine leak?") is None  # another word: the floor holds


@pytest.mark.anyio
async def test_a_type_in_another_number_resolves_and_keeps_the_stored_spelling(tmp_path):
    async with Client(build_server(make_services(tmp_path, "all", HashingEmbedder()))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            person("José Álvarez", "Person", "DBA"), person("Maya Chen", "Person", "backend engineer")], "edges": []})
        first, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            person("Jose Alvarez", "person", "works remotely")], "edges": []})
        assert first["resolved"] == [{"name": "Jose Alvarez", "into": "José Álvarez"}]
        again, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            person("Jose Alvarez", "People", "people typed"), person("Maya Chen", "people", "people typed")],
            "edges": []})
        assert (again["nodes_created"], again["possible_duplicates"]) == (0, [])
        assert [(n["name"], n["type"]) for n in again["nodes"]] == [("José Álvarez", "Person"),
                                                                    ("Maya Chen", "Person")]
        found, _ = await call_ok(client, "get_entities", {"names": ["Jose Alvarez", "Maya Chen"]})
        assert [(e["name"], e["type"]) for e in found["entities"]] == [("José Álvarez", "Person"),
                                                                       ("Maya Chen", "Person")]
        assert found["entities"][0]["observations"] == ["DBA", "works remotely", "people typed"]

        looks, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            person(CYRILLIC_MAYA, "Person", "on call this week")], "edges": []})
        assert looks["nodes_created"] == 1
        [duplicate] = looks["possible_duplicates"]
        assert (duplicate["name"], duplicate["similar_to"], duplicate["reason"]) == (CYRILLIC_MAYA, "Maya Chen", REASON)
        both, _ = await call_ok(client, "get_entities", {"names": ["Maya Chen", CYRILLIC_MAYA]})
        assert [e["name"] for e in both["entities"]] == ["Maya Chen", CYRILLIC_MAYA]  # not merged


@pytest.mark.model
@pytest.mark.anyio
async def test_a_same_name_of_another_type_is_said_or_goes_to_the_alias_of_that_type(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "graphrag", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Apple", "type": "Organization", "description": "Apple Inc., the tech company."},
            {"name": "Tim Cook", "type": "Person"}, {"name": "Paris", "type": "City"},
            {"name": "Paris Dubois", "type": "Person", "aliases": ["Paris"], "description": "Product designer."}],
            "edges": [{"source": "Tim Cook", "target": "Apple", "type": "CEO_OF"}]})
        fruit, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "apple", "type": "Ingredient", "description": "The fruit in grandma's pie."}], "edges": []})
        person, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Paris", "type": "Person", "observations": ["on holiday next week"]}], "edges": []})
        found, _ = await call_ok(client, "get_entities", {"names": ["Paris", "Paris Dubois"]})
    # Before: resolved and hints empty, as for any write of the same type.
    assert [(n["name"], n["type"], n["created"]) for n in fruit["nodes"]] == [("Apple", "Ingredient", False)]
    assert fruit["resolved"] == [{"name": "apple", "into": "Apple"}]
    [hint] = fruit["hints"]
    assert hint.startswith("'apple' (Ingredient) was merged into the entity 'Apple' (Organization)")
    assert "update_entity with type 'Organization'" in hint and "'apple (ingredient)'" in hint
    # Before: merged into the City, which became a Person on holiday.
    assert person["resolved"] == [{"name": "Paris", "into": "Paris Dubois"}] and person["hints"] == []
    assert [(e["name"], e["type"], e["observations"]) for e in found["entities"]] == [
        ("Paris", "City", []), ("Paris Dubois", "Person", ["on holiday next week"])]


@pytest.mark.anyio
async def test_graph_stats_and_the_schema_list_a_type_once_in_every_case_and_number(tmp_path):
    async with Client(build_server(make_services(tmp_path, "all", HashingEmbedder()))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            person("Maya Chen", "Person", "backend"), person("Tom Okafor", "Person", "support"),
            person("Priya Raman", "people", "design"), person("Renée Dubois", "person", "platform"),
            person("Acme Corp", "Organization", "employer")], "edges": []})
        stats, _ = await call_ok(client, "graph_stats", {})
        schema = json.loads((await client.read_resource("duckgraph://schema")).contents[0].text)
    # Before: {"Person": 2, "Organization": 1, "people": 1, "person": 1}, four types for two.
    assert stats["node_types"] == {"Person": 4, "Organization": 1}
    assert stats["node_type_spellings"] == {"Person": ["people", "person"]}
    assert schema["node_types"] == [
        {"type": "Person", "count": 4, "example": "Maya Chen", "spellings": ["people", "person"]},
        {"type": "Organization", "count": 1, "example": "Acme Corp"}]


@pytest.mark.anyio
async def test_create_entities_notes_a_name_that_looks_like_a_stored_one(tmp_path):
    async with Client(build_server(make_services(tmp_path, "memory", HashingEmbedder()))) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": "Maya Chen", "entityType": "person", "observations": ["plain"]}]})
        created, text = await call_ok(client, "create_entities", {"entities": [
            {"name": CYRILLIC_MAYA, "entityType": "person", "observations": ["cyrillic a"]}]})
        [entity] = created["entities"]
        assert entity["name"] == CYRILLIC_MAYA and "merged_into" not in entity
        assert entity["note"] == (f"{REASON}: stored as an entity of its own; if both are one, delete this one "
                                  "(delete_entities) and add its observations to 'Maya Chen'")
        assert REASON in text
        graph, _ = await call_ok(client, "read_graph", {})
        assert sorted(e["name"] for e in graph["entities"]) == ["Maya Chen", CYRILLIC_MAYA]
