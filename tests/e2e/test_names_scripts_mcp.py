"""Names in other languages and scripts through the tools, with the official MCP client on a real DuckDB file: the
kana voicing marks keep names apart, letters with a stroke and ligatures match their plain spelling ("Lukasz" for
"Łukasz"), "İstanbul" is found in any case, and find_paths takes names as open_nodes does (and says what a name it
cannot find likely meant). The instant hashing embedder stands in for the model: resolution and lookups by name do
not depend on what the vectors mean."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import call_ok
from tests.fakes import HashingEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_services(folder: Path) -> Services:
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(folder / "kb.duckdb"), warm_up=False, tools="all")
    return bootstrap(settings, embedder=HashingEmbedder())


def text(result) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.anyio
async def test_names_that_differ_by_a_kana_voicing_mark_are_other_entities(tmp_path):
    async with Client(build_server(make_services(tmp_path))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "バス", "type": "Product", "description": "a bus (vehicle)"},
            {"name": "ゴトウ", "type": "Person", "observations": ["後藤さん, sales"]}], "edges": []})
        added, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "パス", "type": "Product", "description": "a pass (ticket)"},
            {"name": "コトウ", "type": "Person", "observations": ["古藤さん, engineering"]}], "edges": []})
        assert not added.get("resolved") and added["nodes_created"] == 2
        found, _ = await call_ok(client, "get_entities", {"names": ["バス", "パス", "ゴトウ", "コトウ"]})
    entities = {e["name"]: e for e in found["entities"]}
    assert entities["バス"]["description"] == "a bus (vehicle)" and entities["パス"]["description"] == "a pass (ticket)"
    assert entities["ゴトウ"]["observations"] == ["後藤さん, sales"]
    assert entities["コトウ"]["observations"] == ["古藤さん, engineering"]
    assert all(not e["aliases"] for e in entities.values())


@pytest.mark.anyio
async def test_letters_with_a_stroke_match_their_plain_spelling(tmp_path):
    async with Client(build_server(make_services(tmp_path))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Łukasz Nowak", "type": "Person", "observations": ["born in Kraków"]},
            {"name": "Søren Larsen", "type": "Person"}, {"name": "Ærøskøbing", "type": "Town"}], "edges": []})
        added, _ = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Lukasz Nowak", "type": "Person", "observations": ["speaks Polish"]}], "edges": []})
        assert added["resolved"] == [{"name": "Lukasz Nowak", "into": "Łukasz Nowak"}]
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Lukasz Nowak", "Soren Larsen", "Aeroskobing"]})
        assert [e["name"] for e in opened["entities"]] == ["Łukasz Nowak", "Søren Larsen", "Ærøskøbing"]
        assert opened["entities"][0]["observations"] == ["born in Kraków", "speaks Polish"]
        # get_entities names entities exactly, and says what a name spelt without the stroke meant.
        found, _ = await call_ok(client, "get_entities", {"names": ["Soren Larsen"]})
        assert found["not_found"] == ["Soren Larsen"] and found["did_you_mean"] == {"Soren Larsen": ["Søren Larsen"]}


@pytest.mark.anyio
async def test_a_name_with_the_turkish_dotted_capital_i_is_found_in_any_case(tmp_path):
    async with Client(build_server(make_services(tmp_path))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "İstanbul", "type": "City"}, {"name": "Iğdır", "type": "City"}], "edges": []})
        asked = ["istanbul", "Istanbul", "ISTANBUL", "İSTANBUL", "IĞDIR", "igdir".replace("g", "ğ")]
        found, _ = await call_ok(client, "get_entities", {"names": asked})
        assert found["not_found"] == [] and [e["name"] for e in found["entities"]] == ["İstanbul", "Iğdır"]
        # Ignoring case is a rule of every name, writes included.
        await call_ok(client, "add_observations", {"observations": [
            {"entityName": "ISTANBUL", "contents": ["on the Bosphorus"]}]})
        found, _ = await call_ok(client, "get_entities", {"names": ["İstanbul"]})
        assert found["entities"][0]["observations"] == ["on the Bosphorus"]


@pytest.mark.anyio
async def test_find_paths_takes_names_as_open_nodes_does(tmp_path):
    async with Client(build_server(make_services(tmp_path))) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Sean O’Brien", "type": "Person"}, {"name": "Łukasz Nowak", "type": "Person"},
                      {"name": "İstanbul", "type": "City"}, {"name": "Zoë Müller", "type": "Person"}],
            "edges": [{"source": "Sean O’Brien", "target": "Łukasz Nowak", "type": "WORKS_WITH"},
                      {"source": "Łukasz Nowak", "target": "İstanbul", "type": "VISITED"}]})
        paths, _ = await call_ok(client, "find_paths", {"source": "Sean O'Brien", "target": "Lukasz Nowak"})
        assert (paths["source"], paths["target"], paths["paths"]) == (
            "Sean O’Brien", "Łukasz Nowak", ["Sean O’Brien -WORKS_WITH-> Łukasz Nowak"])
        paths, _ = await call_ok(client, "find_paths", {"source": "sean o'brien", "target": "ISTANBUL"})
        assert paths["hops"] == 2 and paths["target"] == "İstanbul"
        # A name that is none of them even loosely: the error says which stored name it likely meant.
        failed = await client.call_tool("find_paths", {"source": "Zoe Mueller", "target": "Istanbul"})
        assert failed.is_error and "no entity named 'Zoe Mueller'; did you mean 'Zoë Müller'?" in text(failed)
        # Writes still name entities exactly (or in another case), and say what a near miss meant.
        failed = await client.call_tool("update_entity", {"name": "Lukasz Nowak", "add_observations": ["moved"]})
        assert failed.is_error and "no entity named 'Lukasz Nowak'; did you mean 'Łukasz Nowak'?" in text(failed)
        found, _ = await call_ok(client, "get_entities", {"names": ["Łukasz Nowak"]})
        assert found["entities"][0]["observations"] == []
