"""The memory tools' read answers within their token bound, through the official MCP client on the real server and a
real DuckDB file (the hashing embedder): the first text block stays the reference's JSON, bounded; a second one,
the note, says what was left out and how to read on (`offset`). And observations typed in another Unicode form or
spacing, and aliases that name another entity, as the tools take them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.domain.memory_pages import TEXT_TOKENS
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.core.mcp.server import build_server
from tests.fakes import HashingEmbedder

PEOPLE = 1_100
NFC, NFD = "cr\u00e8me br\u00fbl\u00e9e served", "cre\u0300me bru\u0302le\u0301e served"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def services(tmp_path: Path, tools: str) -> Services:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, tools=tools)
    return bootstrap(settings, embedder=HashingEmbedder())


async def texts(client: Client, tool: str, arguments: dict[str, Any]) -> list[str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return [c.text for c in result.content]


@pytest.mark.anyio
async def test_big_answers_are_bounded_json_with_a_note_that_says_how_to_read_on(tmp_path):
    people = [{"name": f"Person {i}", "entityType": "person",
               "observations": [f"Person {i} works on project {i % 37} and likes hiking, jazz and long walks; " * 4,
                                f"met at conference {i % 11}"]} for i in range(PEOPLE)]
    knows = [{"from": f"Person {i}", "to": f"Person {(i + 1) % PEOPLE}", "relationType": "knows"}
             for i in range(PEOPLE)]
    hub = [{"from": "Hub", "to": f"N{i}", "relationType": "links"} for i in range(5_050)]
    async with Client(build_server(services(tmp_path, "memory"))) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        await client.call_tool("create_entities", {"entities": [*people, {"name": "Hub", "entityType": "team",
                                                                          "observations": []}]})
        await client.call_tool("create_relations", {"relations": knows + hub})
        answers = {
            "search": await texts(client, "search_nodes", {"query": "person"}),
            "read": await texts(client, "read_graph", {"limit": 1_000}),
            "open": await texts(client, "open_nodes", {"names": [f"Person {i}" for i in range(1_000)]}),
            "hub": await texts(client, "open_nodes", {"names": ["Hub"]}),
        }
        first = json.loads(answers["search"][0])
        on = json.loads((await texts(client, "search_nodes", {"query": "person", "offset": first["next_offset"]}))[0])
        small = await texts(client, "open_nodes", {"names": ["Person 7"]})

    for name, (graph_text, note) in answers.items():
        graph = json.loads(graph_text)  # the first block is the reference's JSON, whole
        assert {"entities", "relations"} <= graph.keys(), name
        assert estimate_tokens(graph_text) + estimate_tokens(note) <= TEXT_TOKENS, name
        assert "note" not in graph, name
    assert "To read on, call search_nodes with the same query and offset=" in answers["search"][1]
    assert "only the first 1,000 of them are read" in answers["search"][1]
    assert f"To read on, call read_graph with offset={json.loads(answers['read'][0])['next_offset']}." in \
        answers["read"][1]
    assert "call open_nodes with the same names and offset=" in answers["open"][1]
    hub_graph = json.loads(answers["hub"][0])
    assert hub_graph["relations_truncated"] is True and "'Hub' takes more than an answer holds" in answers["hub"][1]
    # Reading on gives the next entities; an answer that fits is the reference's one block, as before.
    assert {e["name"] for e in on["entities"]}.isdisjoint({e["name"] for e in first["entities"]})
    assert len(small) == 1 and [e["name"] for e in json.loads(small[0])["entities"]] == ["Person 7"]
    for tool in ("read_graph", "search_nodes", "open_nodes"):
        assert f"{TEXT_TOKENS:,} tokens" in listed[tool].description, tool
        assert "offset" in listed[tool].input_schema["properties"], tool


@pytest.mark.anyio
async def test_observation_variants_are_one_and_an_alias_of_another_entity_is_refused(tmp_path):
    async with Client(build_server(services(tmp_path, "all"))) as client:
        await client.call_tool("create_entities", {"entities": [
            {"name": "Cafe Noir", "entityType": "place", "observations": [NFD, "open late"]},
            {"name": "Ann", "entityType": "person", "observations": []},
            {"name": "Ben", "entityType": "person", "observations": []}]})
        added = await client.call_tool("add_observations", {"observations": [
            {"entityName": "Cafe Noir", "contents": [NFC, "open late ", "Open late"]}]})
        stored = (await client.call_tool("open_nodes", {"names": ["Cafe Noir"]})).structured_content
        update = await client.call_tool("update_entity", {"name": "Cafe Noir", "remove_observations": [NFC]})
        deleted = await client.call_tool("delete_observations", {"deletions": [
            {"entityName": "Cafe Noir", "observations": ["open late"]}]})
        refused = await client.call_tool("update_entity", {"name": "Ann", "aliases": ["Ben"]})
        ann = (await client.call_tool("get_entities", {"names": ["Ann"]})).structured_content

    assert added.structured_content["results"][0]["addedObservations"] == ["Open late"]
    assert stored["entities"][0]["observations"] == [NFC, "open late", "Open late"]
    assert not update.is_error and update.structured_content["observations"] == ["open late", "Open late"]
    assert deleted.structured_content["removed"] == [{"entity": "Cafe Noir", "removed": ["open late"]}]
    assert refused.is_error and "'Ben' is the name of another entity: if the two are one, use merge_entities(" \
        "sources=['Ben'], target='Ann'); nothing was changed" in refused.content[0].text
    assert ann["entities"][0]["aliases"] == []
