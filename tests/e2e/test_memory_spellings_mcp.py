"""A spelling of a stored name up to accents and punctuation ("Jose" for "José", "orders_db" for "orders-db",
"O'Brien" for "O’Brien") reaches one entity through every memory tool, as it does through open_nodes: create_entities
and create_relations record it as an alias, so later writes by it neither miss the entity nor make a second one.
Through the official MCP client on the real server and a real DuckDB file (the hashing embedder: names are resolved
without vectors)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_create_entities_after_merge_mcp import anyio_backend, services  # noqa: F401 (fixtures)
from tests.e2e.test_mcp_inmemory import call_ok, error_text


def E(name: str, kind: str, observations: list[str]) -> dict[str, Any]:
    return {"name": name, "entityType": kind, "observations": observations}


def R(source: str, target: str, kind: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": kind}


async def graph(client: Client) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str, str]]]:
    read = await call_ok(client, "read_graph", {})
    return ([(e["name"], e["entityType"], e["observations"]) for e in read["entities"]],
            [(r["from"], r["to"], r["relationType"]) for r in read["relations"]])


async def aliases(client: Client, name: str) -> list[str]:
    [entity] = (await call_ok(client, "get_entities", {"names": [name]}))["entities"]
    return entity["aliases"]


@pytest.mark.anyio
async def test_a_spelling_create_entities_merged_is_an_alias_that_every_later_call_reaches(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [
            E("José", "person", ["speaks spanish"]), E("orders-db", "database", ["holds orders"]),
            E("Sean O’Brien", "person", ["DBA"])]})
        created = await call_ok(client, "create_entities", {"entities": [
            E("Jose", "person", ["sits near window"]), E("orders_db", "database", ["nightly backup"]),
            E("Sean O'Brien", "person", ["on call"])]})
        note = ("{!r} is now an alias of {!r} (the same name but for accents and punctuation), so later calls with "
                "either name reach this entity")
        assert created["entities"] == [
            {"name": "Jose", "entityType": "person", "observations": ["sits near window"], "merged_into": "José",
             "note": note.format("Jose", "José")},
            {"name": "orders_db", "entityType": "database", "observations": ["nightly backup"],
             "merged_into": "orders-db", "note": note.format("orders_db", "orders-db")},
            {"name": "Sean O'Brien", "entityType": "person", "observations": ["on call"],
             "merged_into": "Sean O’Brien", "note": note.format("Sean O'Brien", "Sean O’Brien")}]
        # Case alone is the same key: no alias, no note.
        cased = await call_ok(client, "create_entities", {"entities": [E("JOSÉ", "person", ["case only"])]})
        assert cased["entities"] == [
            {"name": "JOSÉ", "entityType": "person", "observations": ["case only"], "merged_into": "José"}]
        assert await aliases(client, "José") == ["Jose"]
        assert await aliases(client, "orders-db") == ["orders_db"]
        assert await aliases(client, "Sean O’Brien") == ["Sean O'Brien"]

        # Every later call by the merged spelling reaches the same entity.
        added = await call_ok(client, "add_observations", {"observations": [
            {"entityName": "Jose", "contents": ["joined in May"]}]})
        assert added["results"] == [{"entityName": "Jose", "addedObservations": ["joined in May"]}]
        related = await call_ok(client, "create_relations", {"relations": [R("Jose", "orders_db", "owns")]})
        assert related["relations"] == [{"from": "Jose", "to": "orders_db", "relationType": "owns"}]  # no note
        opened = await call_ok(client, "open_nodes", {"names": ["Jose"]})
        assert [(e["name"], e["entityType"]) for e in opened["entities"]] == [("José", "person")]
        assert [(r["from"], r["to"]) for r in opened["relations"]] == [("José", "orders-db")]
        removed = await call_ok(client, "delete_observations", {"deletions": [
            {"entityName": "Jose", "observations": ["sits near window"]}]})
        assert removed["removed"] == [{"entity": "José", "removed": ["sits near window"]}]
        assert await graph(client) == (
            [("José", "person", ["speaks spanish", "case only", "joined in May"]),
             ("orders-db", "database", ["holds orders", "nightly backup"]),
             ("Sean O’Brien", "person", ["DBA", "on call"])],
            [("José", "orders-db", "owns")])

        # Deleting by the alias would delete José, all he is: refused, naming him, and nothing is deleted.
        refused = await client.call_tool("delete_entities", {"entityNames": ["Jose"]})
        said = error_text(refused)
        assert "'Jose' is an alias of 'José', not its name" in said and "nothing was deleted" in said
        assert len((await graph(client))[0]) == 3


@pytest.mark.anyio
async def test_a_relation_end_spelt_as_one_stored_entity_is_that_entity_and_becomes_its_alias(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [
            E("orders-db", "database", ["holds orders"]), E("Sean O’Brien", "person", ["DBA"]),
            E("Ana", "person", [])]})
        # What open_nodes finds by these spellings ...
        opened = await call_ok(client, "open_nodes", {"names": ["orders_db", "Sean O'Brien"]})
        assert [e["name"] for e in opened["entities"]] == ["orders-db", "Sean O’Brien"]
        # ... is what create_relations relates.
        related = await call_ok(client, "create_relations", {"relations": [
            R("Sean O'Brien", "orders_db", "administers"), R("Ana", "orders.db", "reads")]})
        assert related["relations"] == [
            {"from": "Sean O'Brien", "to": "orders_db", "relationType": "administers",
             "note": "\"Sean O'Brien\" was taken as 'Sean O’Brien' (the same name but for accents and punctuation) "
                     "and is now its alias; 'orders_db' was taken as 'orders-db' (the same name but for accents "
                     "and punctuation) and is now its alias"},
            {"from": "Ana", "to": "orders.db", "relationType": "reads",
             "note": "'orders.db' was taken as 'orders-db' (the same name but for accents and punctuation) and is "
                     "now its alias"}]
        assert await graph(client) == (
            [("orders-db", "database", ["holds orders"]), ("Sean O’Brien", "person", ["DBA"]), ("Ana", "person", [])],
            [("Sean O’Brien", "orders-db", "administers"), ("Ana", "orders-db", "reads")])
        assert await aliases(client, "orders-db") == ["orders_db", "orders.db"]
        assert await aliases(client, "Sean O’Brien") == ["Sean O'Brien"]
        # The alias is recorded: the writes that match by name or alias only reach the entity too.
        added = await call_ok(client, "add_observations", {"observations": [
            {"entityName": "orders_db", "contents": ["nightly backup"]}]})
        assert added["results"] == [{"entityName": "orders_db", "addedObservations": ["nightly backup"]}]
        deleted = await call_ok(client, "delete_relations", {"relations": [R("Ana", "orders.db", "reads")]})
        assert deleted["edges_deleted"] == 1
        assert (await graph(client))[1] == [("Sean O’Brien", "orders-db", "administers")]


@pytest.mark.anyio
async def test_an_end_spelt_as_several_entities_stays_a_placeholder_and_its_note_names_them(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [
            E("orders-db", "database", []), E("orders.db", "file", []), E("Ana", "person", [])]})
        related = await call_ok(client, "create_relations", {"relations": [R("Ana", "orders_db", "reads")]})
        [relation] = related["relations"]
        assert relation["note"] == (
            "'orders_db' did not exist: created with entityType 'unknown' to keep the relation (create_entities with "
            "the same name gives it a type and observations); 'orders_db' is 'orders-db' and 'orders.db' but for "
            "accents and punctuation, so it was taken as none of them (give the exact name of the one meant)")
        entities, relations = await graph(client)
        assert entities[-1] == ("orders_db", "unknown", []) and relations == [("Ana", "orders_db", "reads")]
        assert await aliases(client, "orders-db") == [] and await aliases(client, "orders.db") == []


@pytest.mark.anyio
async def test_a_relation_whose_ends_are_one_entity_but_for_punctuation_is_not_stored_nor_an_alias(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [E("orders-db", "database", [])]})
        related = await call_ok(client, "create_relations", {"relations": [R("orders_db", "orders-db", "copies")]})
        assert related["relations"] == [
            {"from": "orders_db", "to": "orders-db", "relationType": "copies",
             "note": "not stored: 'orders_db' and 'orders-db' are one entity here ('orders-db'; 'orders_db' was "
                     "taken as 'orders-db' (the same name but for accents and punctuation))"}]
        assert await graph(client) == ([("orders-db", "database", [])], [])
        assert await aliases(client, "orders-db") == []


@pytest.mark.anyio
async def test_observations_for_a_name_not_found_say_what_it_likely_meant_and_add_nothing(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [E("orders-db", "database", ["holds orders"])]})
        refused = await client.call_tool("add_observations", {"observations": [
            {"entityName": "orders-db", "contents": ["nightly backup"]},
            {"entityName": "orders_db", "contents": ["weekly restore test"]}]})
        assert error_text(refused).endswith("Entity with name orders_db not found; did you mean 'orders-db'? "
                                            "Otherwise create it with create_entities first")
        assert await graph(client) == ([("orders-db", "database", ["holds orders"])], [])


@pytest.mark.anyio
async def test_add_knowledge_graph_says_which_stored_entity_an_unknown_edge_end_likely_meant(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "orders-db", "type": "Database"}]})
        refused = await client.call_tool("add_knowledge_graph", {
            "nodes": [{"name": "Sean", "type": "Person"}],
            "edges": [{"source": "Sean", "target": "orders_db", "type": "ADMINISTERS"}]})
        assert error_text(refused).endswith(
            "edges[0] (Sean -ADMINISTERS-> orders_db): the target entity 'orders_db' does not exist; did you mean "
            "'orders-db'? Otherwise add it to `nodes` in this call, or use the exact name of a stored entity")
        # The same suggestion get_entities gives; and the refused call wrote nothing (Sean neither).
        found = await call_ok(client, "get_entities", {"names": ["orders_db", "Sean"]})
        assert found["did_you_mean"] == {"orders_db": ["orders-db"]} and found["not_found"] == ["orders_db", "Sean"]


@pytest.mark.anyio
async def test_runs_of_whitespace_in_a_name_are_one_space_whatever_the_tool_set(services):
    async with Client(build_server(services)) as client:
        created = await call_ok(client, "create_entities", {"entities": [E("  Maya  Chen ", "person", ["a"])]})
        assert created["entities"] == [{"name": "Maya Chen", "entityType": "person", "observations": ["a"]}]
        # The name as one writes it is the stored name: skipped as the reference skips it, no merged_into.
        again = await call_ok(client, "create_entities", {"entities": [E("Maya Chen", "person", ["b"])]})
        assert again["entities"] == []
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Payments\t\tTeam", "type": "Team", "aliases": ["Pay \n Team"]}]})
        [team] = (await call_ok(client, "get_entities", {"names": ["payments team"]}))["entities"]
        assert (team["name"], team["aliases"]) == ("Payments Team", ["Pay Team"])
        related = await call_ok(client, "create_relations", {"relations": [R("Maya  Chen", "Payments   Team",
                                                                                 "leads")]})
        assert related["relations"] == [{"from": "Maya Chen", "to": "Payments Team", "relationType": "leads"}]


@pytest.mark.anyio
async def test_names_told_apart_by_a_symbol_are_other_entities_through_both_tool_sets(services):
    """C, C++ and C# are three languages, F and F# two, .NET is not NET: a symbol, or a period that starts a name,
    is part of it, not punctuation between its words, so neither set of tools merges them."""
    async with Client(build_server(services)) as client:
        for name, use in [("C", "firmware"), ("C++", "game engine"), ("C#", "Unity scripts")]:
            created = await call_ok(client, "create_entities", {"entities": [E(name, "Language", [f"for the {use}"])]})
            assert created["entities"] == [E(name, "Language", [f"for the {use}"])]  # no merged_into
        related = await call_ok(client, "create_relations", {"relations": [R("engine", "C++", "written_in")]})
        assert [(r["from"], r["to"]) for r in related["relations"]] == [("engine", "C++")]
        assert await graph(client) == (
            [("C", "Language", ["for the firmware"]), ("C++", "Language", ["for the game engine"]),
             ("C#", "Language", ["for the Unity scripts"]), ("engine", "unknown", [])],
            [("engine", "C++", "written_in")])

        await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "F", "type": "Language"},
                                                                 {"name": "NET", "type": "Language"}]})
        added = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "F#", "type": "Language", "observations": ["for the pricing model"]},
            {"name": ".NET", "type": "Language"}]})
        assert added["resolved"] == [] and added["nodes_created"] == 2
        found = await call_ok(client, "get_entities", {"names": ["C", "C++", "C#", "F", "F#", "NET", ".NET"]})
        assert [(e["name"], e["aliases"]) for e in found["entities"]] == [
            ("C", []), ("C++", []), ("C#", []), ("F", []), ("F#", []), ("NET", []), (".NET", [])]
        # The punctuation between words still joins spellings of one name.
        spelt = await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "C++.", "type": "Language"},
                                                                         {"name": "(.NET)", "type": "Language"}]})
        assert spelt["resolved"] == [{"name": "C++.", "into": "C++"}, {"name": "(.NET)", "into": ".NET"}]


@pytest.mark.anyio
async def test_a_name_sent_with_spaces_around_it_adds_its_observations_and_a_skipped_repeat_says_what_it_dropped(
        services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [E("Alice", "person", ["lives in Berlin"])]})
        # The reference keeps "Alice " as a new name, with its observation: here it is Alice, as "alice" is.
        created = await call_ok(client, "create_entities", {"entities": [
            E("Alice ", "person", ["moved to Paris"]), E("alice", "person", ["likes tea"])]})
        assert created["entities"] == [
            {"name": "Alice", "entityType": "person", "observations": ["moved to Paris"], "merged_into": "Alice",
             "note": "sent as 'Alice ', which is 'Alice' once extra spaces and invisible characters are dropped, as "
                     "they are from every name"},
            {"name": "alice", "entityType": "person", "observations": ["likes tea"], "merged_into": "Alice"}]
        # The exact name is skipped, as the reference skips it: its first text block is the reference's JSON, and
        # a second one (the note, in the structured content too) says what was not added.
        result = await client.call_tool("create_entities", {"entities": [E("Alice", "person", ["has a dog"])]})
        assert [block.text for block in result.content] == [
            "[]", "'Alice' exists, so it was skipped: 1 observation it does not hold was not added. Add them with "
                  "add_observations."]
        assert result.structured_content == {"entities": [], "note": result.content[1].text}
        assert await graph(client) == ([("Alice", "person", ["lives in Berlin", "moved to Paris", "likes tea"])], [])


@pytest.mark.anyio
async def test_a_placeholder_end_is_the_entity_its_name_spelt_otherwise_creates_whatever_its_type(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_relations", {"relations": [R("Alice", "Acme Inc.", "works_at")]})
        created = await call_ok(client, "create_entities", {"entities": [
            E("Acme Inc", "company", ["makes robots"]), E("alice", "organization", ["a person"])]})
        assert created["entities"] == [
            {"name": "Acme Inc", "entityType": "company", "observations": ["makes robots"], "merged_into": "Acme Inc.",
             "note": "'Acme Inc' is now an alias of 'Acme Inc.' (the same name but for accents and punctuation), so "
                     "later calls with either name reach this entity"},
            # A placeholder (Alice, made by create_relations) takes the type given.
            {"name": "alice", "entityType": "organization", "observations": ["a person"], "merged_into": "Alice"}]
        # Another type for a typed entity is not applied, and the note says so.
        retyped = await call_ok(client, "create_entities", {"entities": [E("ALICE", "person", [])]})
        assert retyped["entities"] == [
            {"name": "ALICE", "entityType": "organization", "observations": [], "merged_into": "Alice",
             "note": "the entityType 'person' was not applied: 'Alice' keeps its type 'organization'. If 'ALICE' is "
                     "another entity, not this organization, nothing was added to 'Alice': create it under a name of "
                     "its own, such as 'ALICE (person)'"}]
        assert await graph(client) == ([("Alice", "organization", ["a person"]),
                                        ("Acme Inc.", "company", ["makes robots"])],
                                       [("Alice", "Acme Inc.", "works_at")])


@pytest.mark.anyio
async def test_deleting_an_observation_spelt_otherwise_than_stored_says_it_is_still_there(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [E("Alice", "person", ["lives in Berlin"])]})
        result = await client.call_tool("delete_observations", {"deletions": [
            {"entityName": "Alice", "observations": ["Lives in Berlin."]}]})
        note = ("Not stored, so nothing was removed for: 'Lives in Berlin.' of 'Alice' (stored: 'lives in Berlin') "
                "(see unmatched). Delete an observation by its text as stored (open_nodes lists them).")
        assert [block.text for block in result.content] == ["Observations deleted successfully", note]
        assert result.structured_content == {
            "success": True, "message": "Observations deleted successfully", "removed": [], "not_found": [],
            "unmatched": [{"entity": "Alice", "observation": "Lives in Berlin.", "nearest": "lives in Berlin"}],
            "hints": [note]}
        assert await graph(client) == ([("Alice", "person", ["lives in Berlin"])], [])


@pytest.mark.anyio
async def test_deleting_observations_of_an_entity_no_one_has_names_the_ones_it_likely_meant(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [E("Priya Raman", "person", ["lives in Berlin"])]})
        result = await client.call_tool("delete_observations", {"deletions": [
            {"entityName": "Priya", "observations": ["lives in Berlin"]},
            {"entityName": "Nobody", "observations": ["x"]}]})
        note = ("No entity is named 'Priya' (did you mean 'Priya Raman'?) or 'Nobody': nothing was removed for them "
                "(see not_found). Give each name as stored (search_nodes finds it).")
        assert [block.text for block in result.content] == ["Observations deleted successfully", note]
        assert result.structured_content == {
            "success": True, "message": "Observations deleted successfully", "removed": [],
            "not_found": ["Priya", "Nobody"], "unmatched": [], "hints": [note]}
        assert await graph(client) == ([("Priya Raman", "person", ["lives in Berlin"])], [])
