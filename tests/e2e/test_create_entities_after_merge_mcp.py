"""After a merge, the memory tools' create_entities with the merged duplicate's old name adds to the entity it was
merged into, as add_knowledge_graph does, instead of bringing the duplicate back. Through the official MCP client
on the real server and a real DuckDB file (the hashing embedder: names are resolved without vectors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok
from tests.fakes import HashingEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services(tmp_path: Path) -> Services:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, tools="all")
    return bootstrap(settings, embedder=HashingEmbedder())


async def merged(client: Client) -> None:
    await call_ok(client, "create_entities", {"entities": [
        {"name": "Maya Chen", "entityType": "Person", "observations": ["Leads payments"]},
        {"name": "Maya Chenn", "entityType": "Person", "observations": ["Likes espresso"]}]})
    await call_ok(client, "merge_entities", {"sources": ["Maya Chenn"], "target": "Maya Chen"})


async def graph(client: Client) -> list[tuple[str, str, list[str]]]:
    return [(e["name"], e["entityType"], e["observations"])
            for e in (await call_ok(client, "read_graph", {}))["entities"]]


@pytest.mark.anyio
async def test_the_merged_duplicate_s_old_name_adds_to_the_entity_it_was_merged_into(services):
    async with Client(build_server(services)) as client:
        await merged(client)
        created = await call_ok(client, "create_entities", {"entities": [
            {"name": "Maya Chenn", "entityType": "Person", "observations": ["Drinks tea", "Likes espresso"]},
            {"name": "maya chenn", "entityType": "person", "observations": ["Runs on Sundays"]}]})
        assert created["entities"] == [
            {"name": "Maya Chenn", "entityType": "Person", "observations": ["Drinks tea"], "merged_into": "Maya Chen"},
            {"name": "maya chenn", "entityType": "Person", "observations": ["Runs on Sundays"],
             "merged_into": "Maya Chen"}]
        assert await graph(client) == [
            ("Maya Chen", "Person", ["Leads payments", "Likes espresso", "Drinks tea", "Runs on Sundays"])]
        # The same as add_knowledge_graph resolves it.
        added = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Maya Chenn", "type": "Person", "observations": ["Plays chess"]}]})
        assert added["resolved"] == [{"name": "Maya Chenn", "into": "Maya Chen"}] and added["nodes_created"] == 0
        assert [name for name, _, _ in await graph(client)] == ["Maya Chen"]


@pytest.mark.anyio
async def test_an_alias_of_another_type_or_claimed_by_another_name_of_the_call_stays_a_new_entity(services):
    async with Client(build_server(services)) as client:
        await merged(client)
        # Resolution matches an alias within its type only, as add_knowledge_graph's does...
        created = await call_ok(client, "create_entities", {"entities": [
            {"name": "Maya Chenn", "entityType": "Cat", "observations": ["Sleeps all day"]}]})
        assert created["entities"] == [{"name": "Maya Chenn", "entityType": "Cat", "observations": ["Sleeps all day"]}]
        assert await graph(client) == [("Maya Chen", "Person", ["Leads payments", "Likes espresso"]),
                                       ("Maya Chenn", "Cat", ["Sleeps all day"])]


@pytest.mark.anyio
async def test_names_given_as_distinct_in_one_call_stay_distinct(services):
    async with Client(build_server(services)) as client:
        await merged(client)
        # ... and never onto an entity another name of the same call names.
        created = await call_ok(client, "create_entities", {"entities": [
            {"name": "Maya Chen", "entityType": "Person", "observations": ["Dropped: the stored name"]},
            {"name": "Maya Chenn", "entityType": "Person", "observations": ["A second person"]}]})
        assert created["entities"] == [
            {"name": "Maya Chenn", "entityType": "Person", "observations": ["A second person"]}]
        assert [name for name, _, _ in await graph(client)] == ["Maya Chen", "Maya Chenn"]
