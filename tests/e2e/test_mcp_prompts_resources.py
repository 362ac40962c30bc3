"""The extract_knowledge prompt and the duckgraph://stats and duckgraph://schema resources, through the SDK's
`Client` connected in memory. The instant hashing embedder stands in for the model: nothing here depends on
what the vectors mean."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.domain.model import NodeInput
from duckgraph.core.domain.namespaces import EMPTY_NAMESPACE
from duckgraph.core.mcp.server import build_server
from tests.e2e.scenario import DOCUMENTS, EDGES, NODES
from tests.fakes import HashingEmbedder

RESOURCES = {"duckgraph://stats", "duckgraph://schema"}
#: The reference memory server's resource, beside its tools (memory and all).
MEMORY_RESOURCES = {"memory://knowledge-graph"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_services(folder: Path, db: Path, tools: str = "graphrag") -> Services:
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(db), warm_up=False, tools=tools)
    return bootstrap(settings, embedder=HashingEmbedder())


def text_of(result) -> str:
    [content] = result.contents
    return content.text


@pytest.mark.anyio
@pytest.mark.parametrize("tools", ["graphrag", "memory", "all"])
async def test_every_tool_set_offers_the_prompt_and_the_resources(tmp_path, db_path, tools):
    async with Client(build_server(make_services(tmp_path, db_path, tools))) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        tool_names = {t.name for t in (await client.list_tools()).tools}

    # The host writes community reports with tools listed only in the `all` set, so their prompt is there only.
    assert set(prompts) == {"extract_knowledge"} | ({"summarize_communities"} if tools == "all" else set())
    [argument] = prompts["extract_knowledge"].arguments
    assert argument.name == "text" and argument.required is False
    assert prompts["extract_knowledge"].description
    assert set(resources) == RESOURCES | (MEMORY_RESOURCES if tools != "graphrag" else set())
    for resource in resources.values():
        assert resource.mime_type == "application/json"
        assert resource.description
    # The prompt only names tools the client can call.
    async with Client(build_server(make_services(tmp_path, db_path, tools))) as client:
        prompt = (await client.get_prompt("extract_knowledge", {"text": "Ada Lovelace worked with Babbage."}))
    [message] = prompt.messages
    body = message.content.text
    named = {"add_documents", "add_knowledge_graph", "search", "create_entities", "create_relations",
             "add_observations", "search_nodes"}
    assert {name for name in named if re.search(rf"\b{name}\b", body)} <= tool_names


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "arguments", "says"), [
    ("summarize_communities", {"limit": "abc"}, "limit='abc' is refused: Input should be a valid integer"),
    ("summarize_communities", {"limit": "-1"}, "limit='-1' is refused: Input should be greater than or equal to 1"),
    ("summarize_communities", {"limit": "500"}, "a whole number from 1 to 20"),
    ("extract_knowledge", {"text": "x", "bogus": "y"}, "has no argument 'bogus'; its arguments are: text"),
    ("no_such_prompt", None, ("unknown prompt 'no_such_prompt'; the prompts are: extract_knowledge, "
                              "summarize_communities")),
])
async def test_a_bad_prompt_call_is_an_invalid_params_error_that_says_why(tmp_path, db_path, caplog, name,
                                                                          arguments, says):
    async with Client(build_server(make_services(tmp_path, db_path, "all"))) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt(name, arguments)
        assert raised.value.code == INVALID_PARAMS
        assert says in raised.value.message
        assert (await client.get_prompt("summarize_communities", {"limit": "3"})).messages  # a good one still works
    assert not [r for r in caplog.records if r.exc_info]  # the caller's mistake: no traceback in the log


@pytest.mark.anyio
async def test_the_extraction_prompt_teaches_specific_types_and_provenance(tmp_path, db_path):
    text = "Marie Curie founded the Radium Institute in Paris in 1914."
    async with Client(build_server(make_services(tmp_path, db_path))) as client:
        with_text = await client.get_prompt("extract_knowledge", {"text": text})
        without = await client.get_prompt("extract_knowledge")

    [message] = with_text.messages
    assert message.role == "user"
    body = message.content.text
    assert text in body
    # Storage order and provenance: the document first, its id in source_ids, then the graph.
    assert body.index("add_documents") < body.index("add_knowledge_graph")
    assert "source_ids" in body
    assert "search" in body and "exact" in body  # reuse the stored names
    assert "UPPER_SNAKE_CASE" in body and "FOUNDED" in body and "EMPLOYED_BY" in body
    assert "never use" in body and "RELATED_TO" in body  # named only as what not to do
    assert "Person" in body and "Organization" in body

    [bare] = without.messages
    assert text not in bare.content.text
    assert "add_knowledge_graph" in bare.content.text


@pytest.mark.anyio
@pytest.mark.parametrize("tools", ["graphrag", "memory"])
async def test_the_instructions_and_the_prompt_say_to_qualify_another_thing_s_name(tmp_path, db_path, tools):
    async with Client(build_server(make_services(tmp_path, db_path, tools))) as client:
        instructions = client.instructions or ""
        prompt = await client.get_prompt("extract_knowledge")
    # Before, both said only to reuse the exact names: "apple" the fruit was then merged into "Apple" the company.
    for text in (instructions, prompt.messages[0].content.text):
        assert "in any case is" in text and 'qualify the name of another thing that shares it ("Apple (fruit)")' in \
            " ".join(text.split())


@pytest.mark.anyio
@pytest.mark.parametrize("tools", ["graphrag", "memory"])
async def test_the_instructions_say_the_user_is_one_entity_under_their_name(tmp_path, db_path, tools):
    async with Client(build_server(make_services(tmp_path, db_path, tools))) as client:
        instructions = " ".join((client.instructions or "").split())
    # Before, a model wrote the user as "me", "I", "User" and under their name: four entities, no path between them.
    assert "The user is one entity under their name" in instructions and '"me"' in instructions

@pytest.mark.anyio
async def test_the_memory_tool_set_gets_the_reference_tools_in_the_prompt(tmp_path, db_path):
    async with Client(build_server(make_services(tmp_path, db_path, "memory"))) as client:
        prompt = await client.get_prompt("extract_knowledge", {"text": "Grace Hopper worked at Remington Rand."})
    body = prompt.messages[0].content.text
    assert "create_entities" in body and "create_relations" in body and "search_nodes" in body
    assert "add_knowledge_graph" not in body
    assert "RELATED_TO" in body and "UPPER_SNAKE_CASE" in body


@pytest.mark.anyio
async def test_the_stats_and_schema_resources_describe_the_graph(tmp_path, db_path):
    services = make_services(tmp_path, db_path)
    async with Client(build_server(services)) as client:
        empty_stats = json.loads(text_of(await client.read_resource("duckgraph://stats")))
        empty_schema = json.loads(text_of(await client.read_resource("duckgraph://schema")))

        for tool, arguments in (("add_documents", {"documents": DOCUMENTS}),
                                ("add_knowledge_graph", {"nodes": NODES, "edges": EDGES})):
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content

        stats = json.loads(text_of(await client.read_resource("duckgraph://stats")))
        schema = json.loads(text_of(await client.read_resource("duckgraph://schema")))
        # Read while the server runs: once it stops, it closes the file for good.
        expected_stats = services.knowledge_base.stats(services.knowledge_base.namespace)

    # A memory that holds nothing says so (a misspelt namespace would read the same zeros).
    assert empty_stats == {"nodes": 0, "edges": 0, "documents": 0, "chunks": 0, "node_types": {}, "edge_types": {},
                           "hint": EMPTY_NAMESPACE.format(namespace="default")}
    assert "hint" not in expected_stats
    assert empty_schema["node_types"] == [] and empty_schema["edge_types"] == []

    # Stats is KnowledgeBase.stats, as the graph_stats tool returns it.
    assert stats == expected_stats
    assert stats["nodes"] == len(NODES) and stats["edges"] == len(EDGES)
    assert stats["documents"] == len(DOCUMENTS) and stats["chunks"] >= len(DOCUMENTS)
    assert stats["node_types"]["Person"] == sum(n["type"] == "Person" for n in NODES)

    # Schema: every type in use, most common first, with its count and a real example.
    names = {n["name"] for n in NODES}
    node_types = {t["type"]: t for t in schema["node_types"]}
    assert set(node_types) == {n["type"] for n in NODES}
    assert [t["count"] for t in schema["node_types"]] == sorted((t["count"] for t in schema["node_types"]),
                                                                reverse=True)
    for entry in schema["node_types"]:
        assert entry["count"] == sum(n["type"] == entry["type"] for n in NODES)
        assert entry["example"] in names
        assert next(n for n in NODES if n["name"] == entry["example"])["type"] == entry["type"]
    edge_types = {t["type"]: t for t in schema["edge_types"]}
    assert set(edge_types) == {e["type"] for e in EDGES}
    for entry in schema["edge_types"]:
        example = entry["example"]
        assert any(e["source"] == example["source"] and e["target"] == example["target"]
                   and e["type"] == entry["type"] for e in EDGES)
    assert schema["truncated"] == {"node_types": False, "edge_types": False}
    assert schema["namespace"] == "default"


@pytest.mark.anyio
async def test_the_schema_resource_is_bounded_to_fifty_types(tmp_path, db_path):
    services = make_services(tmp_path, db_path)
    nodes = [{"name": f"Thing {i}", "type": f"Type{i:03d}"} for i in range(60)]
    services.knowledge_base.add_knowledge_graph([NodeInput(**n) for n in nodes], [])
    async with Client(build_server(services)) as client:
        schema = json.loads(text_of(await client.read_resource("duckgraph://schema")))
    assert len(schema["node_types"]) == 50
    assert schema["truncated"]["node_types"] is True
    assert all(t["count"] == 1 and t["example"].startswith("Thing ") for t in schema["node_types"])


@pytest.mark.anyio
async def test_a_broken_file_is_a_resource_error_not_a_crash(tmp_path):
    bad = tmp_path / "notes.duckdb"
    bad.write_bytes(bytes(range(256)) * 64)
    async with Client(build_server(make_services(tmp_path, bad))) as client:
        with pytest.raises(Exception) as raised:
            await client.read_resource("duckgraph://stats")
        assert str(bad) in str(raised.value)
        # Still serving.
        assert (await client.list_prompts()).prompts
