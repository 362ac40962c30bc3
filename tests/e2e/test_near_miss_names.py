"""Names read back as a caller remembers them, not as stored, through the official MCP client on a real DuckDB
file with the real default model: get_entities keeps them in not_found and says which stored names they most
likely meant; open_nodes opens the one entity a name names up to punctuation, as the reference skips the rest."""

from __future__ import annotations

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import call_ok, make_services

pytestmark = pytest.mark.model

NODES = [{"name": "Payments Team", "type": "Team"}, {"name": "checkout-service", "type": "Service"},
         {"name": "payments-api", "type": "Service"}, {"name": "Priya Raman", "type": "Person"},
         {"name": "Dr. Patel", "type": "Person", "aliases": ["the dentist"]},
         {"name": "PostgreSQL 17 migration", "type": "Project", "description": "Move orders-db to PostgreSQL 17."},
         {"name": "Jean-Luc", "type": "Person"}, {"name": "Jean Luc?", "type": "Person"}]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_get_entities_suggests_the_stored_names_a_near_miss_meant(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": []})
        asked = ["payments api", "Checkout Service", "Priya", "postgres 17 migration", "Dr Patel", "Jean Luc",
                 "Quantum Bakery", "priya raman"]
        result, text = await call_ok(client, "get_entities", {"names": asked})
    assert [e["name"] for e in result["entities"]] == ["Priya Raman"]
    assert result["not_found"] == asked[:-1]  # as before: exact names (and aliases) only
    meant = result["did_you_mean"]
    assert meant["payments api"] == ["payments-api"]
    assert meant["Checkout Service"][0] == "checkout-service"
    assert meant["Priya"] == ["Priya Raman"]
    assert meant["postgres 17 migration"] == ["PostgreSQL 17 migration"]
    assert meant["Dr Patel"] == ["Dr. Patel"]
    assert set(meant["Jean Luc"]) == {"Jean-Luc", "Jean Luc?"}  # both: a suggestion need not be unique
    assert "Quantum Bakery" not in meant and "priya raman" not in meant
    assert '"did_you_mean"' in text and '"postgres 17 migration": [' in text


@pytest.mark.anyio
async def test_open_nodes_opens_the_one_entity_a_name_names_up_to_punctuation(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": [
            {"source": "Priya Raman", "target": "Dr. Patel", "type": "SEES_DENTIST"}]})
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Dr Patel", "Quantum Bakery"]})
        assert [e["name"] for e in opened["entities"]] == ["Dr. Patel"]
        assert opened["relations"] == [{"from": "Priya Raman", "to": "Dr. Patel", "relationType": "SEES_DENTIST"}]
        # Two entities the name could be: which is meant cannot be told, so it is skipped as unknown.
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Jean Luc"]})
        assert opened == {"entities": [], "relations": []}
        # An exact name still wins over a loose one.
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Jean-Luc"]})
        assert [e["name"] for e in opened["entities"]] == ["Jean-Luc"]
        # Writes still name entities exactly: the near miss is not an entity to add to.
        result = await client.call_tool("add_observations", {"observations": [
            {"entityName": "Dr Patel", "contents": ["Office on NW 23rd Ave"]}]})
        assert result.is_error
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Dr. Patel"]})
        assert opened["entities"][0]["observations"] == []


@pytest.mark.anyio
async def test_did_you_mean_finds_a_path_s_file_a_word_s_beginning_and_one_typo(tmp_path, minilm):
    # None of these shares a keyword with the name meant, but the paths: suggested all the same, the nearest only.
    nodes = [{"name": "./scripts/deploy.sh", "type": "File"}, {"name": "src/api/users.py", "type": "File"},
             {"name": "UserRepository", "type": "Class"}, {"name": "Hohenzollern", "type": "Dynasty"},
             {"name": "Maximilian", "type": "Person", "observations": ["Maximum speed: 30 km/h"]},
             {"name": "Maxine", "type": "Person"}, {"name": "Users", "type": "Table"}]
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": nodes, "edges": []})
        asked = ["deploy.sh", "users.py", "UserRepo", "Hohenzolern", "Maximillian", "Usr", "Hohenstaufen"]
        result, _ = await call_ok(client, "get_entities", {"names": asked})
        assert result["did_you_mean"] == {
            "deploy.sh": ["./scripts/deploy.sh"], "users.py": ["src/api/users.py"], "UserRepo": ["UserRepository"],
            "Hohenzolern": ["Hohenzollern"], "Maximillian": ["Maximilian"]}
        # The other tools' not-found errors say the same.
        failed = await client.call_tool("find_paths", {"source": "UserRepo", "target": "users.py"})
    assert failed.is_error and "'UserRepository'" in failed.content[0].text
