"""Homonyms through the memory tools: one name for two things ("Paris" the city and a person, "Apple" and an apple,
"John Smith" an alias of two people). Each answer names the entities a name could mean and says what was done to
which, and how to undo it where the caller meant another. Through the official MCP client on the real server and a
real DuckDB file (the hashing embedder: names are resolved without vectors)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_create_entities_after_merge_mcp import anyio_backend, services  # noqa: F401 (fixtures)
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.e2e.test_memory_spellings_mcp import E, R, graph


def texts(result: Any) -> list[str]:
    assert not result.is_error, result.content
    return [block.text for block in result.content]


async def two_john_smiths(client: Client) -> None:
    """Two people who share the alias "John Smith" (add_knowledge_graph keeps an alias two entities give)."""
    await call_ok(client, "add_knowledge_graph", {"nodes": [
        {"name": "John Smith (Acme)", "type": "person", "aliases": ["John Smith"]},
        {"name": "John Smith (engineer)", "type": "person", "aliases": ["John Smith"]},
        {"name": "Acme", "type": "organization"}]})


async def paris_and_paris_dubois(client: Client) -> None:
    """'Paris' is the city's name and an alias of the person Paris Dubois."""
    await call_ok(client, "add_knowledge_graph", {"nodes": [
        {"name": "Paris", "type": "City", "observations": ["our EU office is here"]},
        {"name": "Paris Dubois", "type": "Person", "aliases": ["Paris"]},
        {"name": "Growth Team", "type": "Team"}]})


@pytest.mark.anyio
async def test_a_stored_name_created_with_another_type_is_skipped_with_a_note_naming_the_stored_type(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [
            E("Paris", "city", ["our EU office is here"]), E("Alice", "person", []), E("Mercury", "planet", [])]})
        result = await client.call_tool("create_entities", {"entities": [
            E("Paris", "person", ["product designer, joined in May"]), E("Alice", "person", ["likes tea"]),
            E("Mercury", "band", [])]})
        note = ("'Alice' exists, so it was skipped: 1 observation it does not hold was not added. Add them with "
                "add_observations. 'Paris' exists with entityType 'city', not 'person', so it was skipped: 1 "
                "observation it does not hold was not added. If it is another entity, create it under a name of its "
                "own, such as 'Paris (person)'; if it is that city, add them with add_observations. 'Mercury' exists "
                "with entityType 'planet', not 'band', so it was skipped. If it is another entity, create it under a "
                "name of its own, such as 'Mercury (band)'.")
        assert texts(result) == ["[]", note]
        assert result.structured_content == {"entities": [], "note": note}
        # The name the note offers is another entity's: created apart, with its observation.
        created = await call_ok(client, "create_entities", {"entities": [
            E("Paris (person)", "person", ["product designer, joined in May"])]})
        assert created["entities"] == [E("Paris (person)", "person", ["product designer, joined in May"])]
        assert (await graph(client))[0] == [
            ("Paris", "city", ["our EU office is here"]), ("Alice", "person", []), ("Mercury", "planet", []),
            ("Paris (person)", "person", ["product designer, joined in May"])]


@pytest.mark.anyio
async def test_a_stored_name_created_with_the_type_of_the_one_entity_aliased_so_names_that_entity(services):
    async with Client(build_server(services)) as client:
        await paris_and_paris_dubois(client)
        result = await client.call_tool("create_entities", {"entities": [E("Paris", "Person", ["plays the piano"])]})
        # Before: "create it under a name of its own, such as 'Paris (Person)'", a second Paris Dubois, whom
        # add_knowledge_graph would have written to (resolution rule 1b) and the note never named.
        note = ("'Paris' exists with entityType 'City', not 'Person', so it was skipped: 1 observation it does not "
                "hold was not added. 'Paris' is an alias of the Person 'Paris Dubois': if that is the entity meant, "
                "add them to it (add_observations with entityName 'Paris Dubois'), rather than creating another; if "
                "it is that City, add them with add_observations.")
        assert texts(result) == ["[]", note]
        # Without observations, the note still names the entity.
        bare = await call_ok(client, "create_entities", {"entities": [E("Paris", "Person", [])]})
        assert bare == {"entities": [], "note": (
            "'Paris' exists with entityType 'City', not 'Person', so it was skipped. 'Paris' is an alias of the "
            "Person 'Paris Dubois': if that is the entity meant, it is stored already: name it 'Paris Dubois', "
            "rather than creating another.")}
        # Followed, the advice puts the observation on Paris Dubois, and no third Paris is made.
        await call_ok(client, "add_observations", {"observations": [
            {"entityName": "Paris Dubois", "contents": ["plays the piano"]}]})
        assert (await graph(client))[0] == [("Paris", "City", ["our EU office is here"]),
                                            ("Paris Dubois", "Person", ["plays the piano"]),
                                            ("Growth Team", "Team", [])]


@pytest.mark.anyio
async def test_a_name_merged_into_an_entity_of_another_type_says_what_was_added_and_how_to_undo_it(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [E("Apple", "organization", ["tech company"])]})
        created = await call_ok(client, "create_entities", {"entities": [
            E("apple", "ingredient", ["6 Granny Smith for grandma's pie"])]})
        [merged] = created["entities"]
        assert merged == {
            "name": "apple", "entityType": "organization", "observations": ["6 Granny Smith for grandma's pie"],
            "merged_into": "Apple",
            "note": "the entityType 'ingredient' was not applied: 'Apple' keeps its type 'organization'. If 'apple' "
                    "is another entity, not this organization, undo this: delete_observations with entityName "
                    "'Apple' and the 1 observation listed here removes it from 'Apple'; then create it under a name "
                    "of its own, such as 'apple (ingredient)'"}
        # Followed, the note's advice leaves the company as it was and the ingredient apart.
        await call_ok(client, "delete_observations", {"deletions": [
            {"entityName": merged["merged_into"], "observations": merged["observations"]}]})
        await call_ok(client, "create_entities", {"entities": [
            E("apple (ingredient)", "ingredient", ["6 Granny Smith for grandma's pie"])]})
        assert (await graph(client))[0] == [
            ("Apple", "organization", ["tech company"]),
            ("apple (ingredient)", "ingredient", ["6 Granny Smith for grandma's pie"])]


@pytest.mark.anyio
async def test_open_nodes_of_an_alias_of_several_entities_keeps_the_reference_s_json_and_names_them(services):
    async with Client(build_server(services)) as client:
        await two_john_smiths(client)
        result = await client.call_tool("open_nodes", {"names": ["John Smith"]})
        assert texts(result) == [
            '{\n  "entities": [],\n  "relations": []\n}',
            "Skipped: no entity named 'John Smith'; it is an alias of several entities ('John Smith (Acme)', 'John "
            "Smith (engineer)'): use the exact name of one."]
        assert result.structured_content == {"entities": [], "relations": []}
        # Beside a name found, and a misspelt one: each skipped name is said, what was found is shown.
        result = await client.call_tool("open_nodes", {"names": ["Acme", "John Smith", "John Smith (Acme Corp)", ""]})
        assert [e["name"] for e in result.structured_content["entities"]] == ["Acme"]
        assert texts(result)[1] == (
            "Skipped: no entity named 'John Smith', 'John Smith (Acme Corp)'; 'John Smith' is an alias of several "
            "entities ('John Smith (Acme)', 'John Smith (engineer)'): use the exact name of one; did you mean 'John "
            "Smith (Acme)' for 'John Smith (Acme Corp)'? Otherwise call search_nodes first to find the exact name.")
        # A name found: one text block, as the reference's.
        assert len(texts(await client.call_tool("open_nodes", {"names": ["John Smith (Acme)"]}))) == 1


@pytest.mark.anyio
async def test_create_relations_with_an_alias_of_several_entities_is_refused_naming_them(services):
    async with Client(build_server(services)) as client:
        await two_john_smiths(client)
        refused = await client.call_tool("create_relations", {"relations": [R("John Smith", "Acme", "works_at")]})
        assert error_text(refused).endswith(
            "'John Smith' is an alias of several entities ('John Smith (Acme)', 'John Smith (engineer)'): use the "
            "exact name of one")
        assert (await graph(client))[1] == []


@pytest.mark.anyio
async def test_a_name_that_is_one_entity_s_name_and_another_s_alias_reaches_the_first_and_the_answer_says_so(
        services):
    async with Client(build_server(services)) as client:
        await paris_and_paris_dubois(client)
        said = "'Paris' is the name of 'Paris' (City) and an alias of 'Paris Dubois' (Person): "
        result = await client.call_tool("add_observations", {"observations": [
            {"entityName": "Paris", "contents": ["on holiday next week"]}]})
        note = (said + "the observations were added to 'Paris', the entity it names; if 'Paris Dubois' was meant, "
                "move them: delete_observations with entityName 'Paris' and the observations added, then "
                "add_observations with the exact name of the one meant")
        assert texts(result) == ['[\n  {\n    "entityName": "Paris",\n    "addedObservations": [\n      "on holiday '
                                 'next week"\n    ]\n  }\n]', note]
        assert result.structured_content == {
            "results": [{"entityName": "Paris", "addedObservations": ["on holiday next week"]}], "note": note}
        # Followed, the advice moves them.
        await call_ok(client, "delete_observations", {"deletions": [
            {"entityName": "Paris", "observations": ["on holiday next week"]}]})
        moved = await call_ok(client, "add_observations", {"observations": [
            {"entityName": "Paris Dubois", "contents": ["on holiday next week"]}]})
        assert "note" not in moved
        assert (await graph(client))[0] == [("Paris", "City", ["our EU office is here"]),
                                            ("Paris Dubois", "Person", ["on holiday next week"]),
                                            ("Growth Team", "Team", [])]

        related = await call_ok(client, "create_relations", {"relations": [R("Paris", "Growth Team", "member_of")]})
        assert related["relations"] == [{
            "from": "Paris", "to": "Growth Team", "relationType": "member_of",
            "note": said + "the relation was stored with 'Paris', the entity it names; if 'Paris Dubois' was meant, "
                           "delete_relations removes this one: create it again with the exact name of the one meant"}]

        updated = await call_ok(client, "update_entity", {"name": "Paris", "description": "Capital of France."})
        assert (updated["name"], updated["description"]) == ("Paris", "Capital of France.")
        assert updated["hint"] == (said + "the change was made to 'Paris', the entity it names; if 'Paris Dubois' was "
                                          "meant, give its exact name, and undo this change with update_entity on "
                                          "'Paris'")
        plain = await call_ok(client, "update_entity", {"name": "Paris Dubois", "description": "Designer."})
        assert plain["hint"] is None

        deleted = await call_ok(client, "delete_entities", {"entityNames": ["Paris"]})
        assert deleted["deleted"] == ["Paris"]
        assert deleted["hints"] == [said + "what was deleted is 'Paris', the entity it names; if 'Paris Dubois' was "
                                           "meant, it was not deleted: give its exact name to delete it"]
        assert [name for name, _, _ in (await graph(client))[0]] == ["Paris Dubois", "Growth Team"]


@pytest.mark.anyio
async def test_a_stored_name_in_another_case_created_with_the_type_of_the_one_entity_aliased_so_goes_to_it(services):
    async with Client(build_server(services)) as client:
        await paris_and_paris_dubois(client)
        created = await call_ok(client, "create_entities", {"entities": [E("paris", "Person", ["plays the piano"])]})
        # Before: merged into the City 'Paris' ("the entityType 'Person' was not applied"), where add_knowledge_graph
        # sends the same write to Paris Dubois (resolution rule 1b).
        assert created == {"entities": [{
            "name": "paris", "entityType": "Person", "observations": ["plays the piano"], "merged_into": "Paris Dubois",
            "note": "'paris' is 'Paris' (City) but for case or spacing, and an alias of 'Paris Dubois' (Person): with "
                    "entityType 'Person' it is 'Paris Dubois', so the observations listed were added to 'Paris "
                    "Dubois'. If the City 'Paris' was meant, move them: delete_observations with entityName 'Paris "
                    "Dubois' and the 1 observation listed here, then add_observations with entityName 'Paris'"}]}
        # Without observations, the note still says which entity the name was taken as.
        bare = await call_ok(client, "create_entities", {"entities": [E("PARIS", "person", [])]})
        assert bare["entities"][0]["merged_into"] == "Paris Dubois"
        assert bare["entities"][0]["note"] == (
            "'PARIS' is 'Paris' (City) but for case or spacing, and an alias of 'Paris Dubois' (Person): with "
            "entityType 'person' it is 'Paris Dubois'; nothing was added to it")
        # add_knowledge_graph writes the same name to the same entity.
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "paris", "type": "Person", "observations": ["speaks French"]}]})
        assert (await graph(client))[0] == [("Paris", "City", ["our EU office is here"]),
                                            ("Paris Dubois", "Person", ["plays the piano", "speaks French"]),
                                            ("Growth Team", "Team", [])]
        # A call that names Paris Dubois too keeps its names apart: 'paris' is not taken as an entity the call names.
        apart = await call_ok(client, "create_entities", {"entities": [
            E("Paris Dubois", "Person", []), E("paris", "Person", ["likes jazz"])]})
        assert apart["entities"][0]["merged_into"] == "Paris"
