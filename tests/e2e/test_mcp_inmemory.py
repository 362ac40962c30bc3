"""End-to-end tests of the MCP server in memory: the real server, the real DuckDB store, the real MiniLM model.

The client is the MCP SDK's own `Client`, connected to the `MCPServer` in-process, so tool schemas, argument
validation, error results and structured output all go through the SDK exactly as a host would see them.
"""

from __future__ import annotations

import copy
import json
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.model import MAX_NODES_PER_CALL, SearchResult
from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.core.mcp.server import build_server
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.scenario import DOCUMENTS, EDGES, NODES

pytestmark = pytest.mark.model

TOOLS = {
    "add_knowledge_graph", "add_documents", "search", "get_entities", "update_entity", "merge_entities",
    "delete_entities", "delete_relations", "find_paths", "graph_stats", "end_relations", "recent_changes",
    "list_namespaces", "delete_namespace", "add_urls", "global_search", "build_communities", "read_document",
}
READ_ONLY = {"search", "get_entities", "find_paths", "graph_stats", "recent_changes", "list_namespaces",
             "global_search", "read_document"}
DESTRUCTIVE = {"update_entity", "merge_entities", "delete_entities", "delete_relations", "end_relations",
               "delete_namespace"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_services(folder: Path, db: Path, embedder, plugin_manager=None) -> Services:
    """Services over `db`, isolated from the developer's environment (env={}) and config file (an empty one)."""
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(db), warm_up=False)
    assert settings.db == db
    return bootstrap(settings, plugin_manager=plugin_manager, embedder=embedder)


@pytest.fixture
def services(tmp_path: Path, db_path: Path, plugin_manager, minilm) -> Services:
    """Services over a fresh file."""
    return make_services(tmp_path, db_path, minilm, plugin_manager)


@pytest.fixture(scope="module")
def seeded_file(tmp_path_factory, minilm) -> Path:
    """A file holding the astronomers' documents and graph, written once through the MCP server and closed."""
    folder = tmp_path_factory.mktemp("seeded")
    path = folder / "kb.duckdb"
    services = make_services(folder, path, minilm, build_plugin_manager(load_entry_points=False))

    async def write() -> None:
        async with Client(build_server(services)) as client:
            await seed(client)

    anyio.run(write)
    return path


@pytest.fixture
def seeded_services(seeded_file: Path, tmp_path: Path, db_path: Path, plugin_manager, minilm) -> Services:
    """Services over a private copy of the seeded file (copying is much faster than embedding again)."""
    for source in seeded_file.parent.glob(seeded_file.name + "*"):  # the file and a WAL, should one be left
        shutil.copy(source, db_path.parent / source.name.replace(seeded_file.name, db_path.name))
    return make_services(tmp_path, db_path, minilm, plugin_manager)


def counts(services: Services) -> dict[str, int]:
    """Rows in the file, read through the knowledge base the server itself uses (same process, same connection)."""
    stats = services.knowledge_base.stats()
    return {key: stats[key] for key in ("nodes", "edges", "documents", "chunks")}


def counts_on_disk(path: Path) -> dict[str, int]:
    """Rows in the file, read by a fresh store once the server has closed it."""
    store = DuckDBStore(path)
    store.open()
    try:
        stats = store.stats()
    finally:
        store.close()
    return {key: stats[key] for key in ("nodes", "edges", "documents", "chunks")}


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def seed(client: Client) -> dict[str, Any]:
    """Store the astronomers' documents and graph; returns the document ids mapped to their chunk ids."""
    docs = await call_ok(client, "add_documents", {"documents": DOCUMENTS})
    await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
    return {d["id"]: d["chunk_ids"] for d in docs["documents"]}


def error_text(result) -> str:
    assert result.is_error, f"expected an error result, got {result.structured_content or result.content}"
    assert result.content, "an error result must say what went wrong"
    return "\n".join(block.text for block in result.content)


# -- tools/list ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_lists_exactly_the_graphrag_tools_with_schemas_and_annotations(services):
    async with Client(build_server(services)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert client.instructions and "add_knowledge_graph" in client.instructions

    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.description and tool.description.strip(), name
        assert tool.input_schema["type"] == "object", name
        assert tool.input_schema["properties"] or name == "list_namespaces", name  # it lists them all
        assert tool.output_schema and tool.output_schema.get("properties"), name
        assert tool.annotations is not None, name
        assert tool.annotations.title, name
        assert tool.annotations.destructive_hint is (name in DESTRUCTIVE), name
        assert tool.annotations.read_only_hint is (name in READ_ONLY), name
        assert tool.annotations.idempotent_hint is True, name

    assert tools["search"].input_schema["required"] == ["query"]
    assert tools["add_documents"].input_schema["required"] == ["documents"]
    assert {"anchors", "nodes", "edges", "passages", "text"} <= set(tools["search"].output_schema["properties"])
    assert {"nodes_created", "nodes_updated", "edges_created", "edges_updated"} <= set(
        tools["add_knowledge_graph"].output_schema["properties"]
    )
    # The per-call limit is advertised, so a host can split a big graph before it is refused.
    assert tools["add_knowledge_graph"].input_schema["properties"]["nodes"]["maxItems"] == MAX_NODES_PER_CALL
    # Unknown fields are refused, and the schema says so.
    node_schema = tools["add_knowledge_graph"].input_schema["$defs"]["NodeInput"]
    assert node_schema["additionalProperties"] is False
    assert set(node_schema["required"]) == {"name", "type"}


# -- the full scenario ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_documents_graph_and_search_scenario(services, db_path):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with Client(build_server(services)) as client:
        docs = await client.call_tool("add_documents", {"documents": DOCUMENTS}, progress_callback=on_progress)
        assert not docs.is_error, docs.content
        stored = docs.structured_content
        assert [d["id"] for d in stored["documents"]] == ["doc-rubin", "doc-payne", "doc-bell"]
        assert all(d["chunk_ids"] and not d["unchanged"] for d in stored["documents"])
        assert stored["chunks_written"] == sum(len(d["chunk_ids"]) for d in stored["documents"])
        chunks_of = {d["id"]: d["chunk_ids"] for d in stored["documents"]}
        assert progress and progress[-1][0] == progress[-1][1] == stored["chunks_written"]

        graph = await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
        assert graph["nodes_created"] == len(NODES)
        assert graph["edges_created"] == len(EDGES)
        assert graph["nodes_updated"] == graph["edges_updated"] == 0
        assert [n["name"] for n in graph["nodes"]] == [n["name"] for n in NODES]
        assert all(n["created"] and isinstance(n["id"], int) for n in graph["nodes"])

        result = await client.call_tool("search", {"query": "Which institution employed Vera Rubin?"})
        assert not result.is_error, result.content
        found = result.structured_content

    # The structured result is the documented SearchResult.
    SearchResult.model_validate(found)
    assert found["query"] == "Which institution employed Vera Rubin?"
    assert found["anchors"][0]["name"] == "Vera Rubin"
    names = [n["name"] for n in found["nodes"]]
    assert "Carnegie Institution for Science" in names
    # The employer of another astronomer is off topic and is dropped, although it is an Organization too.
    assert "Harvard College Observatory" not in names
    assert any(
        e["source"] == "Vera Rubin" and e["type"] == "EMPLOYED_BY" and e["target"] == "Carnegie Institution for Science"
        for e in found["edges"]
    )
    assert all({"source", "target", "type", "weight"} <= set(e) for e in found["edges"])

    passages = found["passages"]
    assert passages, "the source passage of the fact must come back"
    for passage in passages:
        assert passage["document_id"] in chunks_of
        assert passage["chunk_id"] in chunks_of[passage["document_id"]]
        assert passage["text"].strip()
        assert isinstance(passage["score"], float)
    assert [p["score"] for p in passages] == sorted((p["score"] for p in passages), reverse=True)
    top = passages[0]
    assert top["document_id"] == "doc-rubin"
    assert top["title"] == "Vera Rubin"
    assert "Carnegie Institution for Science" in top["text"]

    # The text content is the compact rendering for the model, not a JSON dump of the structure.
    [block] = result.content
    assert block.type == "text"
    assert block.text == found["text"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(block.text)
    assert block.text.startswith("Relations:\n")
    assert "- Vera Rubin employed by Carnegie Institution for Science" in block.text
    assert "\nEntities:\n- Vera Rubin [Person]" in block.text
    assert all(isinstance(e["score"], float) for e in found["edges"])
    assert [e["score"] for e in found["edges"]] == sorted((e["score"] for e in found["edges"]), reverse=True)
    assert f"[doc-rubin#{top['chunk_id']}]" in block.text
    assert found["truncated"] is False

    # The server closed the file when the session ended; everything is on disk.
    assert counts_on_disk(db_path) == {
        "nodes": len(NODES), "edges": len(EDGES), "documents": len(DOCUMENTS),
        "chunks": sum(len(c) for c in chunks_of.values()),
    }


def strict_validator(schema: dict[str, Any]):
    """A JSON Schema validator that checks "date-time" as RFC 3339 does (a zone required), as the TypeScript SDK's
    clients check a tool's structured output; jsonschema checks that format only with an extra package."""
    from jsonschema import Draft202012Validator, FormatChecker

    checker = FormatChecker(formats=())

    @checker.checks("date-time", raises=ValueError)
    def _rfc3339(value: object) -> bool:
        return not isinstance(value, str) or ("T" in value and datetime.fromisoformat(value).tzinfo is not None)

    return Draft202012Validator(schema, format_checker=checker)


@pytest.mark.anyio
async def test_every_time_in_a_result_matches_its_schema_as_strict_clients_check_it(services):
    """Stored times are naive UTC; a result written without a zone ("2026-03-04T00:00:00") fails the date-time format
    of the output schema, and clients that check it (the MCP Inspector, the TypeScript SDK) refuse the whole result.
    The arguments, dates as the descriptions allow, pass the input schemas under the same check."""
    edge = {"source": "Vera Rubin", "type": "EMPLOYED_BY", "target": "Carnegie Institution for Science",
            "valid_from": "1965-01-01", "source_ids": ["doc-rubin"]}
    calls = [
        ("add_documents", {"documents": [{**d, "time": "2026-03-04"} for d in DOCUMENTS]}),
        ("add_knowledge_graph", {"nodes": NODES, "edges": [edge]}),
        ("search", {"query": "Where did Vera Rubin work?", "after": "1960-01-01", "before": "2030-01-01T12:00:00"}),
        ("get_entities", {"names": ["Vera Rubin"]}),
        ("find_paths", {"source": "Vera Rubin", "target": "Carnegie Institution for Science"}),
        ("end_relations", {"relations": [{"source": "Vera Rubin", "type": "EMPLOYED_BY",
                                          "target": "Carnegie Institution for Science", "ended_at": "2016-12-25"}]}),
        ("recent_changes", {"since": "2000-01-01"}),
        ("read_document", {"document_id": "doc-rubin"}),
    ]
    async with Client(build_server(services)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        results = {}
        for tool, arguments in calls:
            errors = [error.message for error in strict_validator(tools[tool].input_schema).iter_errors(arguments)]
            assert not errors, (tool, errors)
            results[tool] = await call_ok(client, tool, arguments)
    times = {
        "search": [p["time"] for p in results["search"]["passages"]] + [e["valid_from"] for e in results["search"]["edges"]],
        "end_relations": [results["end_relations"]["ended"][0]["valid_until"]],
        "recent_changes": [c["at"] for c in results["recent_changes"]["changes"]],
        "read_document": [results["read_document"]["time"]],
    }
    assert all(times.values()) and "1965-01-01T00:00:00Z" in times["search"]
    assert "2026-03-04T00:00:00Z" in times["search"] and times["end_relations"] == ["2016-12-25T00:00:00Z"]
    for tool, result in results.items():
        errors = [error.message for error in strict_validator(tools[tool].output_schema).iter_errors(result)]
        assert not errors, (tool, errors)


@pytest.mark.anyio
async def test_search_shows_observations_and_properties(seeded_services):
    # Observations come from the memory tool set or an import of the reference's memory.jsonl on the same file.
    from duckgraph.core.domain import memory_server
    from duckgraph.core.domain.model import ObservationAddition

    memory_server.add_observations(seeded_services.knowledge_base, [ObservationAddition(
        entityName="Vera Rubin",
        contents=["Born in Philadelphia in 1928", "First woman allowed to observe at Palomar Observatory"])])
    async with Client(build_server(seeded_services)) as client:
        await call_ok(client, "update_entity", {"name": "Vera Rubin", "properties": {"born": 1928}})
        found = await call_ok(client, "search", {"query": "Which observatory let Vera Rubin observe first?"})
    SearchResult.model_validate(found)
    rubin = next(n for n in found["nodes"] if n["name"] == "Vera Rubin")
    assert rubin["observations"] == ["First woman allowed to observe at Palomar Observatory",
                                     "Born in Philadelphia in 1928"]
    assert rubin["properties"]["born"] == 1928
    assert all({"observations", "properties"} <= set(n) for n in found["nodes"])
    lines = found["text"].splitlines()
    at = lines.index(next(line for line in lines if line.startswith("- Vera Rubin [Person]")))
    assert lines[at + 1:at + 4] == ["  properties: born: 1928", "  - First woman allowed to observe at Palomar "
                                    "Observatory", "  - Born in Philadelphia in 1928"]


@pytest.mark.anyio
async def test_search_respects_its_limits(seeded_services):
    async with Client(build_server(seeded_services)) as client:
        found = await call_ok(client, "search", {"query": "Vera Rubin", "hops": 0, "max_passages": 1,
                                                 "max_nodes": 2})
        assert len(found["passages"]) <= 1
        assert len(found["nodes"]) <= 2
        assert all(n["hop"] == 0 for n in found["nodes"])

        small = await call_ok(client, "search", {"query": "Vera Rubin", "token_budget": 100})
        assert small["truncated"] is True
        assert len(small["text"]) <= 100 * 4 + 80  # about four characters per token, plus the truncation note

        # An unrelated question gets an answer, not an error.
        unrelated = await call_ok(client, "search", {"query": "recipe for sourdough bread", "max_passages": 0})
        assert unrelated["passages"] == []


# -- idempotency ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_replaced_document_takes_what_only_its_old_text_supported_with_it(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_documents", {"documents": [
            {"id": "letters", "text": "Caroline Herschel found eight comets from Slough."},
            {"id": "diary", "text": "Caroline Herschel swept the sky with her brother William."}]})
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Caroline Herschel", "type": "Person", "source_ids": ["letters", "diary"]},
                      {"name": "Slough", "type": "Place", "source_ids": ["letters"]},
                      {"name": "William Herschel", "type": "Person"}],  # no source: written by hand
            "edges": [{"source": "Caroline Herschel", "target": "Slough", "type": "WORKED_IN",
                       "source_ids": ["letters"]},
                      {"source": "Caroline Herschel", "target": "William Herschel", "type": "SIBLING_OF"}]})
        # Extracted from the letters afterwards too: written by hand once, it stays all the same.
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "William Herschel", "type": "Person", "source_ids": ["letters"]}],
            "edges": [{"source": "Caroline Herschel", "target": "William Herschel", "type": "SIBLING_OF",
                       "source_ids": ["letters"]}]})
        replaced = await call_ok(client, "add_documents", {"documents": [
            {"id": "letters", "text": "Caroline Herschel was paid a salary by the King."}]})
        assert replaced["documents"][0]["replaced"]
        assert (replaced["entities_removed"], replaced["relations_removed"]) == (1, 1)
        found = await call_ok(client, "get_entities", {"names": ["Caroline Herschel", "Slough", "William Herschel"]})
    assert found["not_found"] == ["Slough"]
    caroline = next(e for e in found["entities"] if e["name"] == "Caroline Herschel")
    assert [r["type"] for r in caroline["relations"]] == ["SIBLING_OF"]


@pytest.mark.anyio
async def test_adding_the_same_graph_and_documents_twice_changes_nothing(services, db_path):
    async with Client(build_server(services)) as client:
        docs = await call_ok(client, "add_documents", {"documents": DOCUMENTS})
        first = await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
        after_first = counts(services)

        again_docs = await call_ok(client, "add_documents", {"documents": DOCUMENTS})
        assert [d["id"] for d in again_docs["documents"]] == [d["id"] for d in docs["documents"]]
        # Each lists its passages as stored (none written).
        assert [(d["unchanged"], d["chunk_ids"]) for d in again_docs["documents"]] == [
            (True, d["chunk_ids"]) for d in docs["documents"]]
        assert again_docs["chunks_written"] == 0

        second = await call_ok(client, "add_knowledge_graph", {"nodes": NODES, "edges": EDGES})
        # Sent again word for word: nothing is counted as updated.
        assert (second["nodes_created"], second["nodes_updated"], second["nodes_unchanged"]) == (0, 0, len(NODES))
        assert (second["edges_created"], second["edges_updated"], second["edges_unchanged"]) == (0, 0, len(EDGES))
        assert [(n["id"], n["name"]) for n in second["nodes"]] == [(n["id"], n["name"]) for n in first["nodes"]]
        assert not any(n["created"] for n in second["nodes"])
        assert counts(services) == after_first

        # The same entity under another spelling of its name is merged, not duplicated.
        variant = await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "  vera   RUBIN ", "type": "Person"}],
            "edges": [{"source": "VERA RUBIN", "target": "kent ford", "type": "collaborated with"}],
        })
        assert variant["nodes_created"] == 0 and variant["edges_created"] == 0
        assert variant["nodes"][0]["id"] == first["nodes"][0]["id"]
        assert counts(services) == after_first

        found = await call_ok(client, "search", {"query": "Vera Rubin"})
        assert [n["name"] for n in found["nodes"]].count("Vera Rubin") == 1

    assert counts_on_disk(db_path) == after_first == {
        "nodes": len(NODES), "edges": len(EDGES), "documents": len(DOCUMENTS), "chunks": after_first["chunks"],
    }


# -- bad input -----------------------------------------------------------------------------------------

NEW_NODE = {"name": "Henrietta Swan Leavitt", "type": "Person", "description": "Astronomer of variable stars."}

BAD_CALLS = [
    pytest.param("add_knowledge_graph", {"nodes": [{"name": "Henrietta Swan Leavitt"}]},
                 ["nodes[0].type: is required"], id="node-without-type"),
    pytest.param("add_knowledge_graph", {"nodes": "Henrietta Swan Leavitt"},
                 ["nodes: must be a list"], id="nodes-as-string"),
    pytest.param("add_knowledge_graph", {"nodes": [{"name": ["Henrietta"], "type": "Person"}]},
                 ["nodes[0].name: input should be a valid string"], id="name-as-list"),
    pytest.param("add_knowledge_graph", {"nodes": [{"name": "Henrietta Swan Leavitt", "entityType": "Person"}]},
                 ["nodes[0].entityType: is not taken here"], id="unknown-field"),
    pytest.param("add_knowledge_graph", {"nodes": [{**NEW_NODE, "type": "   "}]},
                 ["nodes[0].type: must not be empty"], id="blank-type"),
    pytest.param("add_knowledge_graph", {"nodes": [{"name": f"Star {i}", "type": "Star"}
                                                   for i in range(MAX_NODES_PER_CALL + 1)]},
                 [f"nodes: may have at most {MAX_NODES_PER_CALL:,} items"], id="too-many-nodes"),
    # A valid new node and an edge to a missing one: neither is written.
    pytest.param("add_knowledge_graph",
                 {"nodes": [NEW_NODE], "edges": [{"source": "Henrietta Swan Leavitt", "target": "Edward Pickering",
                                                  "type": "EMPLOYED_BY"}]},
                 ["'Edward Pickering'", "does not exist", "edges[0]"], id="edge-to-unknown-node"),
    pytest.param("add_knowledge_graph",
                 {"edges": [{"source": "Vera Rubin", "target": "Vera Rubin", "type": "KNOWS"}]},
                 ["same entity"], id="self-loop"),
    pytest.param("add_knowledge_graph",
                 {"nodes": [NEW_NODE], "edges": [{"source": "Henrietta Swan Leavitt", "target": "Vera Rubin",
                                                  "type": "KNEW", "weight": "NaN"}]},
                 ["edges[0].weight: input should be a finite number"], id="nan-weight"),
    pytest.param("add_knowledge_graph",
                 {"nodes": [NEW_NODE], "edges": [{"source": "Henrietta Swan Leavitt", "target": "Vera Rubin",
                                                  "type": "KNEW", "weight": "-Infinity"}]},
                 ["edges[0].weight: input should be a finite number"], id="infinite-weight"),
    pytest.param("add_knowledge_graph",
                 {"nodes": [NEW_NODE], "edges": [{"source": "Henrietta Swan Leavitt", "target": "Vera Rubin",
                                                  "type": "KNEW", "weight": -1}]},
                 ["edges[0].weight: must be at least 0"], id="negative-weight"),
    pytest.param("add_knowledge_graph", {"nodes": [{**NEW_NODE, "source_ids": ["doc-leavitt"]}]},
                 ["doc-leavitt", "add_documents"], id="source-id-of-missing-document"),
    pytest.param("add_knowledge_graph", {}, ["nothing to add"], id="empty-graph"),
    pytest.param("add_documents", {"documents": []}, ["documents", "at least 1"], id="no-documents"),
    pytest.param("add_documents", {"documents": [{"id": "doc-empty", "text": "  \n "}]},
                 ["documents[0]", "empty"], id="blank-document"),
    pytest.param("add_documents", {"documents": [{"id": "d", "text": "one"}, {"id": "d", "text": "two"}]},
                 ["same document id", "d"], id="duplicate-document-ids"),
    pytest.param("add_documents", {"documents": [{"id": "doc-x", "text": "Some text.", "metadata": "astronomy"}]},
                 ["documents[0].metadata: must be a JSON object"], id="metadata-as-string"),
    pytest.param("search", {"query": ""}, ["search refused its arguments: query: must not be empty"], id="empty-query"),
    pytest.param("search", {"query": "   \t "}, ["query is empty"], id="blank-query"),
    pytest.param("search", {}, ["query: is required"], id="missing-query"),
    pytest.param("search", {"query": "Vera Rubin", "hops": 7}, ["hops: must be at most 3"], id="too-many-hops"),
    # The default set speaks one vocabulary: the memory tools' spellings are refused with the field to use.
    pytest.param("delete_entities", {"entityNames": ["Vera Rubin"]}, ["names: is required"],
                 id="delete-entities-memory-spelling"),
    pytest.param("delete_entities", {"names": []}, ["names: needs at least 1 item"], id="delete-no-entities"),
    pytest.param("delete_relations", {"relations": [{"from": "Vera Rubin", "to": "Kent Ford",
                                                     "relationType": "COLLABORATED_WITH"}]},
                 ["relations[0].source: is required"], id="delete-relations-memory-spelling"),
    pytest.param("update_entity", {"name": "Vera Rubin", "description": "Changed.",
                                   "remove_observations": ["never said"]},
                 ["no observation 'never said'", "nothing was changed"], id="remove-absent-observation"),
    pytest.param("add_knowledge_graph", {"nodes": [{**NEW_NODE, "observations": ["ok", "bad\x00"]}]},
                 ["nodes[0].observations[1]: must not contain control characters"], id="observation-with-control-character"),
    pytest.param("add_knowledge_graph", {"nodes": [{**NEW_NODE, "observations": [""]}]},
                 ["nodes[0].observations[0]: must not be empty"], id="empty-observation"),
    pytest.param("add_knowledge_graph", {"nodes": [{"name": "Vera Rubin", "type": "Person",
                                                    "observations": [f"fact {i}" for i in range(MAX_OBSERVATIONS)]},
                                                   {"name": "Vera Rubin", "type": "Person",
                                                    "observations": [f"other {i}" for i in range(100)]}]},
                 [f"'Vera Rubin' would have {MAX_OBSERVATIONS + 100} observations", f"limit is {MAX_OBSERVATIONS}"],
                 id="too-many-observations"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments", "expected"), BAD_CALLS)
async def test_bad_input_is_a_tool_error_that_writes_nothing(seeded_services, tool, arguments, expected):
    services = seeded_services
    async with Client(build_server(services)) as client:
        before = counts(services)
        assert before["nodes"] == len(NODES) and before["documents"] == len(DOCUMENTS)
        result = await client.call_tool(tool, copy.deepcopy(arguments))
        message = error_text(result)
        for fragment in expected:
            assert fragment in message, f"{fragment!r} not in the error message:\n{message}"
        assert "Traceback" not in message and "internal error" not in message and "pydantic" not in message
        assert counts(services) == before

        # Nothing half-written sneaks into the in-memory vector index either, and the server still works.
        found = await call_ok(client, "search", {"query": "Henrietta Swan Leavitt, astronomer of variable stars"})
        assert "Henrietta Swan Leavitt" not in [n["name"] for n in found["nodes"]]


@pytest.mark.anyio
async def test_handshake_and_tools_list_load_no_model_and_open_no_file(tmp_path: Path, db_path: Path, plugin_manager):
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    cold = SentenceTransformersEmbedder()  # a fresh instance, not the session's warmed one
    services = make_services(tmp_path, db_path, cold, plugin_manager)
    async with Client(build_server(services)) as client:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        assert cold._model is None
        assert not db_path.exists()
        result = await client.call_tool("search", {"query": "anything at all"})
        assert not result.is_error
        # The first call loads what the query needs: the model, or its cached ONNX export (see the embedder).
        assert (cold._model is not None or cold._onnx is not None) and db_path.exists()


# -- one vocabulary, observations, exact results (issue 28) ---------------------------------------------


@pytest.mark.anyio
async def test_the_default_tools_speak_one_vocabulary(services):
    async with Client(build_server(services)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    listing = json.dumps({name: tool.input_schema for name, tool in tools.items()})
    for memory_word in ("entityNames", "relationType", '"from"', "entityType"):
        assert memory_word not in listing
    assert tools["delete_entities"].input_schema["required"] == ["names"]
    relation = tools["delete_relations"].input_schema["$defs"]["RelationToDelete"]
    edge = tools["add_knowledge_graph"].input_schema["$defs"]["EdgeInput"]
    assert relation["required"] == ["source", "target", "type"] == edge["required"]
    assert "observations" in tools["add_knowledge_graph"].input_schema["$defs"]["NodeInput"]["properties"]
    assert {"add_observations", "remove_observations"} <= set(tools["update_entity"].input_schema["properties"])
    for tool in tools.values():
        assert "\n" not in tool.description and "  " not in tool.description, tool.name  # no docstring indentation


@pytest.mark.anyio
async def test_observations_are_added_and_removed_with_the_default_tools(seeded_services):
    async with Client(build_server(seeded_services)) as client:
        added = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "vera rubin", "type": "Person", "observations": ["Born in 1928", "Studied at Vassar"]}]})
        assert added["observations_added"] == 2 and added["nodes_created"] == 0
        again = await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Vera Rubin", "type": "Person", "observations": ["Born in 1928"]}]})
        assert again["observations_added"] == 0
        updated = await call_ok(client, "update_entity", {
            "name": "Vera Rubin", "add_observations": ["Died in 2016"], "remove_observations": ["Studied at Vassar"]})
        assert updated["observations"] == ["Born in 1928", "Died in 2016"]
        [entity] = (await call_ok(client, "get_entities", {"names": ["Vera Rubin"]}))["entities"]
        assert entity["observations"] == ["Born in 1928", "Died in 2016"]
        # A removal that names an observation the entity lacks changes nothing, not even the rest of the call.
        message = error_text(await client.call_tool("update_entity", {
            "name": "Vera Rubin", "add_observations": ["Won the Gold Medal"],
            "remove_observations": ["Born in 1928", "Born in 1929"]}))
        assert "'Born in 1929'" in message
        [entity] = (await call_ok(client, "get_entities", {"names": ["Vera Rubin"]}))["entities"]
        assert entity["observations"] == ["Born in 1928", "Died in 2016"]


@pytest.mark.anyio
async def test_get_entities_pages_through_all_of_a_hubs_relations(services):
    spokes = [f"Service {i:03d}" for i in range(120)]
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Platform Team", "type": "Team"}] + [{"name": s, "type": "Service"} for s in spokes],
            "edges": [{"source": "Platform Team", "target": s, "type": "OWNS"} for s in spokes]})
        seen, offsets, offset = [], [], 0
        while offset is not None:
            [entity] = (await call_ok(client, "get_entities", {"names": ["Platform Team"],
                                                               "relations_offset": offset}))["entities"]
            seen += [r["target"] for r in entity["relations"]]
            offsets.append(offset)
            assert entity["relations_truncated"] == (entity["next_relations_offset"] is not None)
            offset = entity["next_relations_offset"]
        assert offsets == [0, 50, 100]
        assert sorted(seen) == spokes  # every relation once, none twice
        past = (await call_ok(client, "get_entities", {"names": ["Platform Team"], "relations_offset": 500}))
        assert past["entities"][0]["relations"] == [] and not past["entities"][0]["relations_truncated"]
        assert "relations_offset" in error_text(await client.call_tool(
            "get_entities", {"names": ["Platform Team"], "relations_offset": -1}))


@pytest.mark.anyio
async def test_deletions_say_what_was_deleted_and_what_was_not_found(seeded_services):
    services = seeded_services
    async with Client(build_server(services)) as client:
        before = counts(services)
        result = await call_ok(client, "delete_relations", {"relations": [
            {"source": "vera rubin", "target": "Kent Ford", "type": "collaborated with"},
            {"source": "Vera Rubin", "target": "Kent Ford", "type": "MARRIED"},
            {"source": "Vera Rubin", "target": "Nobody", "type": "KNEW"}]})
        assert result["deleted"] == [{"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH"}]
        assert result["not_found"] == [{"source": "Vera Rubin", "target": "Kent Ford", "type": "MARRIED"},
                                       {"source": "Vera Rubin", "target": "Nobody", "type": "KNEW"}]
        assert counts(services)["edges"] == before["edges"] - 1
        nothing = await call_ok(client, "delete_relations", {"relations": [
            {"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH"}]})
        assert nothing["deleted"] == [] and len(nothing["not_found"]) == 1

        entities = await call_ok(client, "delete_entities", {"names": ["kent ford", "Nobody"]})
        assert entities["deleted"] == ["Kent Ford"] and entities["not_found"] == ["Nobody"]
        assert counts(services)["nodes"] == before["nodes"] - 1


@pytest.mark.anyio
async def test_a_vague_relation_type_is_stored_and_flagged(seeded_services):
    async with Client(build_server(seeded_services)) as client:
        result = await call_ok(client, "add_knowledge_graph", {"edges": [
            {"source": "Vera Rubin", "target": "dark matter", "type": "related to"},
            {"source": "Kent Ford", "target": "Andromeda Galaxy", "type": "OBSERVED"}]})
    assert result["edges_created"] == 2
    assert result["vague_edges"] == [{"source": "Vera Rubin", "target": "dark matter", "type": "RELATED_TO"}]
    assert len(result["hints"]) == 1 and "RELATED_TO" in result["hints"][0]


@pytest.mark.anyio
async def test_entities_given_as_distinct_are_never_joined_and_a_big_batch_is_not_refused(services):
    nodes = [{"name": "Cherry Creek, Colorado", "type": "Place"}, {"name": "Cherry Creek (Colorado)", "type": "Place"},
             {"name": "Carnegie Institution", "type": "Organization", "aliases": ["CIS"]}]
    nodes += [{"name": f"Town {i}", "type": "Place"} for i in range(250)]
    edges = [{"source": f"Town {i}", "target": f"Town {i + 1}", "type": "NEAR"} for i in range(249)]
    edges += [{"source": "Cherry Creek, Colorado", "target": "Cherry Creek (Colorado)", "type": "MENTIONS"},
              # two names of one entity (its alias): the server joins them, so the edge is skipped, not refused
              {"source": "CIS", "target": "Carnegie Institution", "type": "SAME_AS"}]
    async with Client(build_server(services)) as client:
        result = await call_ok(client, "add_knowledge_graph", {"nodes": nodes, "edges": edges})
    assert result["nodes_created"] == len(nodes) and result["edges_created"] == 250
    assert [(e["source"], e["target"]) for e in result["skipped_edges"]] == [("CIS", "Carnegie Institution")]
    assert result["hints"] and "skipped" in result["hints"][0]


@pytest.mark.anyio
async def test_all_tools_take_either_vocabulary_for_deletions(tmp_path, db_path, plugin_manager, minilm):
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(db_path), warm_up=False, tools="all")
    services = bootstrap(settings, plugin_manager=plugin_manager, embedder=minilm)
    async with Client(build_server(services)) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert len(names) == len(set(names))
        await seed(client)
        ours = await call_ok(client, "delete_relations", {"relations": [
            {"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH"}]})
        assert ours["deleted"] == [{"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH"}]
        theirs = await client.call_tool("delete_relations", {"relations": [
            {"from": "Vera Rubin", "to": "Andromeda Galaxy", "relationType": "observed"}]})
        assert theirs.content[0].text == "Relations deleted successfully"
        # In the caller's spelling, as the reference's results are.
        assert theirs.structured_content["deleted"] == ["Vera Rubin -observed-> Andromeda Galaxy"]
        mixed = await client.call_tool("delete_relations", {"relations": [
            {"source": "Vera Rubin", "target": "dark matter", "type": "FOUND_EVIDENCE_FOR"},
            {"from": "Vera Rubin", "to": "dark matter", "relationType": "FOUND_EVIDENCE_FOR"}]})
        assert "every relation" in error_text(mixed)
        entities = await call_ok(client, "delete_entities", {"entityNames": ["Kent Ford"]})
        assert entities["success"] is True and entities["deleted"] == ["Kent Ford"]
        assert (await call_ok(client, "delete_entities", {"names": ["Antony Hewish"]}))["deleted"] == ["Antony Hewish"]
        assert "names" in error_text(await client.call_tool("delete_entities", {}))
