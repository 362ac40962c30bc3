"""search through the official MCP client, on a real DuckDB file with the real default model: a one-word query
that is a word of a stored entity's name ("nowak", "Strasse") finds that entity, in any case and without its
accents, and a common word inside a name ("blue" of Blue Harbor Bakery) still finds nothing relevant."""

from __future__ import annotations

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import anyio_backend, call_ok, make_services  # noqa: F401 (a fixture)

pytestmark = pytest.mark.model


@pytest.mark.anyio
async def test_search_finds_an_entity_by_a_word_of_its_name(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "Łukasz Nowak", "type": "Person", "observations": ["Łukasz lives in Köln."]},
            {"name": "Straße", "type": "Concept", "observations": ["German word for street."]},
            {"name": "Blue Harbor Bakery", "type": "Organization", "observations": ["Sells sourdough bread."]}],
            "edges": [{"source": "Łukasz Nowak", "target": "Blue Harbor Bakery", "type": "WORKS_AT"}]})

        async def anchors(query: str) -> list[str] | None:
            found, _ = await call_ok(client, "search", {"query": query})
            return None if found["nothing_relevant"] else [a["name"] for a in found["anchors"]]

        for query in ("Nowak", "nowak"):
            assert (await anchors(query) or [])[:1] == ["Łukasz Nowak"], query
        for query in ("Strasse", "strasse"):
            assert (await anchors(query) or [])[:1] == ["Straße"], query
        for query in ("blue", "harbor", "kubernetes"):
            assert await anchors(query) is None, query
