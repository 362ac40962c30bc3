"""A coding agent's ids through the official MCP client, on a real DuckDB file with the real default model: an error
code the memory holds verbatim is found ("how do I fix ECONNREFUSED?" came back "Nothing relevant"), a function
never stored is named as such instead of answered silently with a look-alike, and a query that is an entity's name
(up to punctuation) finds that entity first, in `search` and in `search_nodes`."""

from __future__ import annotations

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_memory_compat import anyio_backend, call_ok, make_services  # noqa: F401 (a fixture)

pytestmark = pytest.mark.model


@pytest.mark.anyio
async def test_search_finds_stored_codes_and_names_the_ids_never_stored(tmp_path, minilm):
    async with Client(build_server(make_services(tmp_path, "all", minilm))) as client:
        await call_ok(client, "add_knowledge_graph", {"nodes": [
            {"name": "orders-db", "type": "Database", "observations": [
                "ECONNREFUSED 127.0.0.1:5432 means the orders-db container is not running: run docker compose up -d "
                "orders-db"]},
            {"name": "getUserById", "type": "Function", "observations": ["Defined in src/api/users.py at line 42"]},
            {"name": "ORA-00942", "type": "Error", "observations": [
                "ORA-00942: table or view does not exist; cause: the app user lacks a grant on the ORDERS schema; "
                "fix: GRANT SELECT ON orders.orders TO app_user"]}]})

        found, text = await call_ok(client, "search", {"query": "how do I fix ECONNREFUSED?"})
        assert not found["nothing_relevant"] and "run docker compose up -d orders-db" in text

        found, text = await call_ok(client, "search", {"query": "where is getUserByName defined?"})
        assert found["not_stored"] == ["getUserByName"]
        assert text.startswith("Nothing stored mentions getUserByName; what follows is related content.\n")
        assert "getUserById" in text  # the related content is still shown

        for query in ("orders-db", "orders_db"):
            found, _ = await call_ok(client, "search", {"query": query})
            assert [a["name"] for a in found["anchors"]][:1] == ["orders-db"], query
            assert found["not_stored"] == [], query
            nodes, _ = await call_ok(client, "search_nodes", {"query": query})
            assert [e["name"] for e in nodes["entities"]][:1] == ["orders-db"], query
