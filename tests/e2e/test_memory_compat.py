"""Drop-in compatibility with the reference MCP memory server (@modelcontextprotocol/server-memory on npm).

The same scenario runs through the real reference server (spawned with npx) and through duckgraph, in memory
and as a real `duckgraph serve` process with DUCKGRAPH_TOOLS=memory; the results are compared field by field.
Where duckgraph deliberately differs (search_nodes is semantic, read_graph is paginated) only the shape is
compared. Two child processes in all: one reference server and one duckgraph server, each used once per module.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import TOOLS as GRAPHRAG_TOOLS

pytestmark = pytest.mark.model

#: The version whose dist/index.js these shapes were read from; pinned so the comparison is reproducible.
REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31"
TIMEOUT_SECONDS = 240
SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]

MEMORY_TOOLS = {
    "create_entities", "create_relations", "add_observations", "delete_entities", "delete_observations",
    "delete_relations", "read_graph", "search_nodes", "open_nodes",
}
#: Only in DUCKGRAPH_TOOLS=all: the host's own community reports (their listing would cost every conversation).
REPORT_TOOLS = {"communities_to_summarize", "save_community_report"}
#: Tools whose text content is the reference's JSON, byte for byte (the others answer with a fixed message).
JSON_TEXT_TOOLS = {"create_entities", "create_relations", "add_observations", "read_graph", "open_nodes"}

SCENARIO: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [
        {"name": "Alice", "entityType": "person", "observations": ["likes green tea", "works remotely"]},
        {"name": "Bob", "entityType": "person", "observations": ["plays chess"]},
        {"name": "Acme Corp", "entityType": "organization", "observations": ["makes widgets"]},
    ]}),
    # Alice exists: only Carol is created and returned (and a note, duckgraph's own, says "ignored" was dropped).
    ("create_entities", {"entities": [
        {"name": "Alice", "entityType": "person", "observations": ["ignored"]},
        {"name": "Carol", "entityType": "person", "observations": ["speaks French"]},
    ]}),
    ("create_relations", {"relations": [
        {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"},
        {"from": "Bob", "to": "Acme Corp", "relationType": "works_at"},
        {"from": "Alice", "to": "Bob", "relationType": "knows"},
        {"from": "Carol", "to": "Alice", "relationType": "is friends with"},
    ]}),
    # The first exists: only the second is created and returned.
    ("create_relations", {"relations": [
        {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"},
        {"from": "Carol", "to": "Acme Corp", "relationType": "works_at"},
    ]}),
    ("add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["likes green tea", "speaks Spanish"]},
        {"entityName": "Bob", "contents": ["plays go"]},
    ]}),
    ("delete_observations", {"deletions": [{"entityName": "Alice", "observations": ["works remotely"]}]}),
    ("delete_relations", {"relations": [{"from": "Bob", "to": "Acme Corp", "relationType": "works_at"}]}),
    ("delete_entities", {"entityNames": ["Carol"]}),
    # Acme Corp is not asked for: its relation with Alice comes back all the same (at least one end named).
    ("open_nodes", {"names": ["Alice", "Bob"]}),
    ("read_graph", {}),
    ("search_nodes", {"query": "tea"}),
    # A name no entity has, blank included, is skipped or not found; it does not fail the call.
    ("open_nodes", {"names": ["Bob", ""]}),
    ("delete_entities", {"entityNames": [""]}),
]
#: The reference memory server's resource: the whole graph, as read_graph returns it.
GRAPH_RESOURCE = "memory://knowledge-graph"


@dataclass
class Step:
    tool: str
    arguments: dict[str, Any]
    is_error: bool
    text: str  # the first text block: the reference's, which clients parse
    structured: dict[str, Any] | None
    notes: list[str]  # duckgraph's further text blocks, for the model (the reference has none)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def run_scenario(client: Client) -> list[Step]:
    steps = []
    for tool, arguments in SCENARIO:
        result = await client.call_tool(tool, json.loads(json.dumps(arguments)))
        [text, *notes] = [block.text for block in result.content if block.type == "text"]
        steps.append(Step(tool, arguments, bool(result.is_error), text, result.structured_content, notes))
    return steps


async def read_graph_resource(client: Client) -> dict[str, Any]:
    """The graph resource as listed and as read after the scenario."""
    [listed] = [r for r in (await client.list_resources()).resources if str(r.uri) == GRAPH_RESOURCE]
    [content] = (await client.read_resource(GRAPH_RESOURCE)).contents
    return {"mime_type": listed.mime_type, "content_mime_type": content.mime_type, "text": content.text}


def tool_listing(tools) -> dict[str, dict[str, Any]]:
    return {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools}


# -- the reference server, spawned once ----------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, Any]:
    """The reference server's tools/list and its answers to the scenario, from one real npx process."""
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed, so the reference memory server cannot be run")
    folder = tmp_path_factory.mktemp("reference")
    # The user's HOME, so npx uses (and fills) the ordinary npm cache.
    env = {**os.environ, "MEMORY_FILE_PATH": str(folder / "memory.jsonl")}
    params = StdioServerParameters(command="npx", args=["-y", REFERENCE_PACKAGE], env=env, cwd=folder)
    stderr_path = folder / "stderr.log"

    async def session() -> dict[str, Any]:
        with stderr_path.open("w", encoding="utf-8") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
            client = Client(stdio_client(params, errlog=stderr))
            try:
                await client.__aenter__()
            except Exception as exc:
                return {"unavailable": f"{type(exc).__name__}: {exc}"}
            try:
                assert client.server_info is None or client.server_info.name == "memory-server"
                tools = tool_listing((await client.list_tools()).tools)
                steps = await run_scenario(client)
                resource = await read_graph_resource(client)
            finally:
                await client.__aexit__(None, None, None)
        return {"tools": tools, "steps": steps, "resource": resource}

    outcome = anyio.run(session)
    if "unavailable" in outcome:
        log = stderr_path.read_text(encoding="utf-8")[-2000:]
        pytest.skip(f"npx could not fetch or start {REFERENCE_PACKAGE} ({outcome['unavailable']}):\n{log}")
    return outcome


# -- duckgraph -----------------------------------------------------------------------------------------


def make_services(folder: Path, tools: str, embedder) -> Services:
    """Services over a fresh file, isolated from the developer's environment and config file."""
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(folder / "kb.duckdb"), warm_up=False, tools=tools)
    return bootstrap(settings, embedder=embedder)


@pytest.fixture(scope="module")
def stdio_run(tmp_path_factory) -> dict[str, Any]:
    """`duckgraph serve` as a host runs it, with DUCKGRAPH_TOOLS=memory: its tools/list and scenario answers."""
    folder = tmp_path_factory.mktemp("stdio")
    home = folder / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "DUCKGRAPH_TOOLS": "memory"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(folder / "kb.duckdb")],
                                   env=env, cwd=folder)
    stderr_path = folder / "stderr.log"

    async def session() -> dict[str, Any]:
        with stderr_path.open("w", encoding="utf-8") as stderr, anyio.fail_after(TIMEOUT_SECONDS):
            async with Client(stdio_client(params, errlog=stderr)) as client:
                assert client.server_info is None or client.server_info.name == "duckgraph"
                tools = tool_listing((await client.list_tools()).tools)
                steps = await run_scenario(client)
                resource = await read_graph_resource(client)
        return {"tools": tools, "steps": steps, "resource": resource}

    outcome = anyio.run(session)
    errors = stderr_path.read_text(encoding="utf-8")
    assert "Traceback" not in errors, errors
    return outcome


# -- comparison ----------------------------------------------------------------------------------------


ENTITY_KEYS = {"name", "entityType", "observations"}
RELATION_KEYS = {"from", "to", "relationType"}


def assert_graph_shape(graph: dict[str, Any]) -> None:
    assert {"entities", "relations"} <= set(graph)
    for entity in graph["entities"]:
        assert set(entity) == ENTITY_KEYS, entity
        assert isinstance(entity["name"], str) and isinstance(entity["entityType"], str)
        assert all(isinstance(o, str) for o in entity["observations"])
    for relation in graph["relations"]:
        assert set(relation) == RELATION_KEYS, relation
        assert all(isinstance(v, str) for v in relation.values())


def assert_same_results(ours: list[Step], theirs: list[Step]) -> None:
    assert [s.tool for s in ours] == [s.tool for s in theirs]
    for mine, ref in zip(ours, theirs):
        where = f"{mine.tool}({json.dumps(mine.arguments)})"
        assert not ref.is_error, f"the reference failed on {where}: {ref.text}"
        assert not mine.is_error, f"duckgraph failed on {where}: {mine.text}"
        assert ref.structured is not None and mine.structured is not None, where
        # Every field the reference returns is there; duckgraph may add optional ones of its own.
        assert set(ref.structured) <= set(mine.structured), where
        if mine.tool == "search_nodes":
            # Ours searches by meaning, the reference by substring: only the shape can be the same.
            assert_graph_shape(ref.structured)
            assert_graph_shape(mine.structured)
            assert mine.structured["entities"], "the semantic search found nothing"
            assert json.loads(mine.text) == mine.structured
            continue
        for key in ref.structured:
            assert mine.structured[key] == ref.structured[key], f"{where}: {key}"
        if mine.tool == "read_graph":
            assert mine.structured.get("next_offset") is None, "the whole scenario fits in one page"
        if mine.tool in JSON_TEXT_TOOLS:
            assert json.loads(mine.text) == json.loads(ref.text), where
            assert mine.text == ref.text, where  # the same JSON, formatted the same way
        else:
            assert mine.text == ref.text, where


def check_expected_content(steps: list[Step]) -> None:
    """What the scenario must produce, independently of the reference."""
    by_index = {i: s.structured for i, s in enumerate(steps)}
    assert [e["name"] for e in by_index[1]["entities"]] == ["Carol"]
    assert steps[1].notes == [by_index[1]["note"]] and "'Alice' exists" in by_index[1]["note"]
    assert all(s.notes == [] for i, s in enumerate(steps) if i != 1)
    assert by_index[3]["relations"] == [{"from": "Carol", "to": "Acme Corp", "relationType": "works_at"}]
    assert by_index[4]["results"] == [{"entityName": "Alice", "addedObservations": ["speaks Spanish"]},
                                      {"entityName": "Bob", "addedObservations": ["plays go"]}]
    opened = by_index[8]
    assert [e["name"] for e in opened["entities"]] == ["Alice", "Bob"]
    assert {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"} in opened["relations"]
    graph = by_index[9]
    assert graph["entities"] == [
        {"name": "Alice", "entityType": "person", "observations": ["likes green tea", "speaks Spanish"]},
        {"name": "Bob", "entityType": "person", "observations": ["plays chess", "plays go"]},
        {"name": "Acme Corp", "entityType": "organization", "observations": ["makes widgets"]},
    ]
    assert graph["relations"] == [{"from": "Alice", "to": "Acme Corp", "relationType": "works_at"},
                                  {"from": "Alice", "to": "Bob", "relationType": "knows"}]
    assert steps[10].structured["entities"][0]["name"] == "Alice"
    assert [e["name"] for e in by_index[11]["entities"]] == ["Bob"]
    assert by_index[12]["success"] and by_index[12]["not_found"] == [""]


def resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        return resolve(root["$defs"][schema["$ref"].rsplit("/", 1)[-1]], root)
    return schema


def schema_shape(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """Property names, required lists and item shapes of a JSON schema, with references resolved."""
    root = root or schema
    schema = resolve(schema, root)
    if schema.get("type") == "array":
        return ["array", schema_shape(schema["items"], root)]
    if "properties" in schema:
        return {"required": sorted(schema.get("required", [])),
                "properties": {k: schema_shape(v, root) for k, v in schema["properties"].items()}}
    return schema.get("type") or [schema_shape(s, root) for s in schema.get("anyOf", [])]


#: The optional fields duckgraph's results add to the reference's (left out when they say nothing).
OPTIONAL_EXTRAS = {"merged_into", "note", "next_offset", "relations_truncated", "entities_truncated", "removed",
                   "not_found", "deleted", "edges_deleted", "hints", "properties", "observations_truncated",
                   "unmatched", "description"}


def assert_extends(mine: Any, ref: Any, where: str) -> None:
    """`mine` has every field of `ref`, with the same shapes and required lists, plus only optional extras."""
    if isinstance(ref, dict):
        assert mine["required"] == ref["required"], where
        assert set(mine["properties"]) - set(ref["properties"]) <= OPTIONAL_EXTRAS, where
        for key, shape in ref["properties"].items():
            assert_extends(mine["properties"][key], shape, f"{where}.{key}")
    elif isinstance(ref, list) and ref and ref[0] == "array":
        assert mine[0] == "array", where
        assert_extends(mine[1], ref[1], f"{where}[]")
    else:
        assert mine == ref, where


# -- tools/list ----------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("tool_set", "expected"), [
    ("memory", MEMORY_TOOLS), ("graphrag", GRAPHRAG_TOOLS),
    ("all", MEMORY_TOOLS | GRAPHRAG_TOOLS | REPORT_TOOLS | {"delete_documents"}),
])
async def test_each_tool_set_lists_its_tools_once(tmp_path, minilm, tool_set, expected):
    async with Client(build_server(make_services(tmp_path, tool_set, minilm))) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        instructions = client.instructions or ""
    assert len(names) == len(set(names)), f"a tool is listed twice: {sorted(names)}"
    assert set(names) == expected
    # The instructions name only tools that exist.
    assert ("add_knowledge_graph" in instructions) == (tool_set != "memory")
    assert ("search_nodes" in instructions) == (tool_set == "memory")


@pytest.mark.anyio
async def test_memory_tools_have_the_reference_names_schemas_and_hints(tmp_path, minilm, reference):
    async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
        ours = tool_listing((await client.list_tools()).tools)
    theirs = reference["tools"]
    assert set(theirs) == MEMORY_TOOLS == set(ours)
    for name, ref in theirs.items():
        mine = ours[name]
        assert mine["title"] == ref["title"], name
        ref_in, my_in = schema_shape(ref["inputSchema"]), schema_shape(mine["inputSchema"])
        # Every tool adds an optional namespace (docs/namespaces.md).
        assert my_in["properties"].pop("namespace") in ("string", ["string", "null"]), name
        if name == "read_graph":
            # The reference takes no arguments; ours adds optional pagination.
            assert ref_in == {"required": [], "properties": {}}
            assert set(my_in["properties"]) == {"offset", "limit"} and my_in["required"] == []
        elif name in ("search_nodes", "open_nodes"):
            # The reference's arguments, and an optional offset to read on past an answer's token bound.
            assert my_in["properties"].pop("offset") == "integer" and my_in == ref_in, name
        else:
            assert my_in == ref_in, name
        assert_extends(schema_shape(mine["outputSchema"]), schema_shape(ref["outputSchema"]), name)
        for hint in ("readOnlyHint", "destructiveHint", "openWorldHint"):
            assert mine["annotations"][hint] == ref["annotations"][hint], f"{name}: {hint}"


# -- the scenario --------------------------------------------------------------------------------------


# The reference is asked for only after duckgraph's own answers are checked, so a skip of it still tests them.


def assert_same_resource(ours: dict[str, Any], steps: list[Step], theirs: dict[str, Any]) -> None:
    """The graph resource is read_graph's answer (its text, byte for byte), and the reference's."""
    assert ours["mime_type"] == ours["content_mime_type"] == "application/json"
    graph = json.loads(ours["text"])
    assert_graph_shape(graph)
    assert ours["text"] == next(s.text for s in steps if s.tool == "read_graph")  # nothing changed it since
    assert (theirs["mime_type"], theirs["content_mime_type"]) == (ours["mime_type"], ours["content_mime_type"])
    assert ours["text"] == theirs["text"]


def test_in_memory_server_answers_as_the_reference(request, tmp_path, minilm):
    # Not an async test: the module's fixtures run their own event loop (anyio.run) when first asked for.
    async def session() -> tuple[list[Step], dict[str, Any]]:
        async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
            return await run_scenario(client), await read_graph_resource(client)

    ours, resource = anyio.run(session)
    check_expected_content(ours)
    reference = request.getfixturevalue("reference")
    assert_same_results(ours, reference["steps"])
    assert_same_resource(resource, ours, reference["resource"])


def test_stdio_server_answers_as_the_reference(request, stdio_run):
    assert set(stdio_run["tools"]) == MEMORY_TOOLS
    check_expected_content(stdio_run["steps"])
    reference = request.getfixturevalue("reference")
    assert_same_results(stdio_run["steps"], reference["steps"])
    assert_same_resource(stdio_run["resource"], stdio_run["steps"], reference["resource"])


# -- what duckgraph adds -------------------------------------------------------------------------------


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content, result.content[0].text


@pytest.mark.anyio
async def test_spelling_pagination_semantic_search_and_errors(tmp_path, minilm):
    services = make_services(tmp_path, "all", minilm)
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": f"Person {i}", "entityType": "person", "observations": []} for i in range(5)
        ] + [{"name": "Alice", "entityType": "person", "observations": ["drinks oolong every morning"]}]})
        created, _ = await call_ok(client, "create_relations", {"relations": [
            {"from": "Person 0", "to": "Person 1", "relationType": "is mentor of"}]})
        assert created["relations"][0]["relationType"] == "is mentor of"
        # The same relation in another spelling is the same relation (types are normalised) ...
        again, text = await call_ok(client, "create_relations", {"relations": [
            {"from": "person 0", "to": "PERSON 1", "relationType": "IS_MENTOR_OF"}]})
        assert again == {"relations": []} and text == "[]"
        # ... stored as IS_MENTOR_OF for the graphrag tools, and shown as first written by the memory tools.
        [entity] = (await call_ok(client, "get_entities", {"names": ["Person 0"]}))[0]["entities"]
        assert entity["relations"][0]["type"] == "IS_MENTOR_OF"
        opened, _ = await call_ok(client, "open_nodes", {"names": ["Person 1"]})
        assert opened["relations"] == [{"from": "Person 0", "to": "Person 1", "relationType": "is mentor of"}]

        # read_graph pages: next_offset while more remains, in the text too; every relation on one page.
        first, text = await call_ok(client, "read_graph", {"limit": 4})
        assert [e["name"] for e in first["entities"]] == [f"Person {i}" for i in range(4)]
        assert first["next_offset"] == 4 and json.loads(text)["next_offset"] == 4
        last, text = await call_ok(client, "read_graph", {"offset": 4, "limit": 4})
        assert [e["name"] for e in last["entities"]] == ["Person 4", "Alice"]
        assert "next_offset" not in last and "next_offset" not in json.loads(text)
        assert len(first["relations"]) + len(last["relations"]) == 1

        # search_nodes is by meaning ("drinks" is nowhere in Alice's entity), and finds nothing when nothing
        # stored is close enough (the relevance floor).
        found, _ = await call_ok(client, "search_nodes", {"query": "who drinks tea?"})
        assert found["entities"][0]["name"] == "Alice"
        nothing, _ = await call_ok(client, "search_nodes", {"query": "Which Kubernetes version runs in production?"})
        assert nothing["entities"] == [] and nothing["relations"] == []

        # Errors are tool errors, not success results with an error inside.
        for tool, arguments, fragment in [
            ("create_relations", {"relations": [{"from": "Alice", "to": "Nobody", "relationType": "->"}]},
             "letters or digits"),
            ("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]},
             "Entity with name Nobody not found"),
            ("create_entities", {"entities": [{"name": "Dan", "entityType": "person"}]}, "observations"),
        ]:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, result.structured_content)
            assert fragment in result.content[0].text, result.content[0].text
        assert services.knowledge_base.stats()["nodes"] == 6
