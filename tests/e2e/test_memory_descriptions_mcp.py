"""Descriptions through the memory tools (DUCKGRAPH_TOOLS=all): an entity's description (what a decision chose) and a
relation's (the reason for it), which add_knowledge_graph and extraction write, reach read_graph, search_nodes,
open_nodes and memory://knowledge-graph as an extra `description` key, so the reference's keys stay as they are and
`export --format memory-jsonl` stays the reference's file. Through the official MCP client on the real server and a
real DuckDB file (the hashing embedder: nothing here depends on vectors)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from mcp import Client

from duckgraph.core.files.import_ import import_lines
from duckgraph.core.files.memory_jsonl import export_memory_jsonl
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_create_entities_after_merge_mcp import anyio_backend, services  # noqa: F401 (fixtures)
from tests.e2e.test_mcp_inmemory import call_ok
from tests.e2e.test_memory_spellings_mcp import E, R

CHOSEN = "Chose PostgreSQL 14 as the primary database over MySQL."
REASON = "JSONB for order metadata, serializable transactions that billing needs"

#: ADR-2 and its relations as the memory tools show them: the reference's keys, then `description` where one is
#: stored (never on what the memory tools wrote, which has none).
ADR_2 = {**E("ADR-2", "Decision", ["Status: accepted"]), "description": CHOSEN}
POSTGRES = E("PostgreSQL", "Technology", [])
CHOSE = {**R("ADR-2", "PostgreSQL", "CHOSE"), "description": REASON}
DECIDED = R("Maya Chen", "ADR-2", "decided")


async def adr(client: Client) -> None:
    await call_ok(client, "add_knowledge_graph", {
        "nodes": [{"name": "ADR-2", "type": "Decision", "description": CHOSEN, "observations": ["Status: accepted"]},
                  {"name": "PostgreSQL", "type": "Technology"}],
        "edges": [{"source": "ADR-2", "target": "PostgreSQL", "type": "CHOSE", "description": REASON}]})
    await call_ok(client, "create_entities", {"entities": [E("Maya Chen", "Person", ["CTO"])]})
    await call_ok(client, "create_relations", {"relations": [DECIDED]})


def answer(result: Any) -> dict[str, Any]:
    """The first text block, the reference's JSON that clients parse and the model reads: the same as the
    structured content."""
    assert not result.is_error, result.content
    text = json.loads(result.content[0].text)
    assert text == result.structured_content
    return text


@pytest.mark.anyio
async def test_read_answers_show_an_entity_s_and_a_relation_s_description_as_an_extra_key(services):
    async with Client(build_server(services)) as client:
        await adr(client)
        opened = answer(await client.call_tool("open_nodes", {"names": ["ADR-2"]}))
        assert opened == {"entities": [ADR_2], "relations": [CHOSE, DECIDED]}
        found = answer(await client.call_tool("search_nodes", {"query": "ADR-2"}))
        assert found["entities"][0] == ADR_2 and found["relations"] == [CHOSE, DECIDED]
        read = answer(await client.call_tool("read_graph", {}))
        assert read == {"entities": [ADR_2, POSTGRES, E("Maya Chen", "Person", ["CTO"])],
                        "relations": [CHOSE, DECIDED]}
        [resource] = (await client.read_resource("memory://knowledge-graph")).contents
        assert json.loads(resource.text) == read
        # A client written for the reference reads its own keys, unchanged.
        assert [{k: e[k] for k in ("name", "entityType", "observations")} for e in opened["entities"]] == [
            E("ADR-2", "Decision", ["Status: accepted"])]


@pytest.mark.anyio
async def test_a_description_stays_out_of_the_reference_s_file_so_importing_it_back_adds_nothing(services):
    """The description is no observation: `export --format memory-jsonl` writes the reference's lines without it,
    and the file imported back into the memory it came from finds every observation stored."""
    kb = services.knowledge_base
    async with Client(build_server(services)) as client:
        await adr(client)
        before = answer(await client.call_tool("read_graph", {}))
        out = io.StringIO()
        export_memory_jsonl(kb, out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert lines[0] == {"type": "entity", **E("ADR-2", "Decision", ["Status: accepted"])}
        assert {"type": "relation", **R("ADR-2", "PostgreSQL", "CHOSE")} in lines
        summary = import_lines(kb, out.getvalue().splitlines())
        assert (summary.nodes_unchanged, summary.edges_unchanged) == (3, 2)
        assert answer(await client.call_tool("read_graph", {})) == before
