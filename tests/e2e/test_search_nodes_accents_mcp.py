"""search_nodes through the official MCP client in drop-in mode (DUCKGRAPH_TOOLS=memory), on a real DuckDB file with
the real default model: a query without accents finds the accented entity, and one with accents the plain one."""

from __future__ import annotations

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import anyio_backend, call_ok, make_services  # noqa: F401 (a fixture)

pytestmark = pytest.mark.model


@pytest.mark.anyio
async def test_search_nodes_matches_ignoring_accents_both_ways(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "memory", minilm))) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": "Łukasz Nowak", "entityType": "person", "observations": ["works in Kraków"]},
            {"name": "José Álvarez", "entityType": "person", "observations": ["plays the guitar"]},
            {"name": "Zoë", "entityType": "cat", "observations": ["sleeps all day"]},
            {"name": "Jose", "entityType": "person", "observations": []},
            {"name": "Alice", "entityType": "person", "observations": ["likes green tea"]}]})

        async def found(query: str) -> list[str]:
            graph, _ = await call_ok(client, "search_nodes", {"query": query})
            return [e["name"] for e in graph["entities"]]

        # The substring matches come first (the search's other finds may follow them).
        assert (await found("Lukasz"))[:1] == ["Łukasz Nowak"]
        assert (await found("Łukasz"))[:1] == ["Łukasz Nowak"]
        assert (await found("krakow"))[:1] == ["Łukasz Nowak"]
        assert (await found("zoe"))[:1] == ["Zoë"]
        assert set((await found("jose"))[:2]) == set((await found("José"))[:2]) == {"Jose", "José Álvarez"}
        assert (await found("alvarez"))[:1] == ["José Álvarez"]
