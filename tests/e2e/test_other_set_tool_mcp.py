"""A call to a tool of another tool set is refused as a tool error that names the sets having it and the setting
that picks one (DUCKGRAPH_TOOLS), not the SDK's bare "Unknown tool", and changes nothing; a name no set has keeps
the SDK's answer. Real parts: the server through the official MCP client in memory, on a real DuckDB file with the
hashing embedder of tests/fakes.py, answering from the shipped listing and from the tools it builds."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from duckgraph.core.mcp import tool_listing
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.e2e.test_unknown_arguments_mcp import contents, serve


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["made ahead", "built"])
def listing(request, monkeypatch) -> None:
    """The sets read from a listing made ahead of time (as the shipped one, without the build), or from the tools
    built when none fits."""
    if request.param == "made ahead":
        made = {tool_set: anyio.run(tool_listing.built_tool_listing, tool_set) for tool_set in tool_listing.TOOL_SETS}
        monkeypatch.setattr(tool_listing, "shipped", made.get)

        async def refused(tool_set: str) -> None:
            raise AssertionError("built though a listing made ahead of time fits")

        monkeypatch.setattr(tool_listing, "built_tool_listing", refused)
    else:
        monkeypatch.setattr(tool_listing, "shipped", lambda tool_set: None)


@pytest.mark.anyio
async def test_a_tool_of_another_set_names_the_sets_that_have_it_and_the_setting(tmp_path, listing):
    async with Client(build_server(serve(tmp_path, "memory"))) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": "Alex", "entityType": "person", "observations": ["surfs"]}]})
        text = error_text(await client.call_tool("update_entity", {"name": "Alex", "description": "changed"}))
        assert text == ("Unknown tool: update_entity is a tool of the graphrag and all tool sets, not of this "
                        "server's memory set. To call it, restart the server with DUCKGRAPH_TOOLS=all or "
                        "DUCKGRAPH_TOOLS=graphrag in its environment (or tools = \"all\" in its config file): all has "
                        "the tools of both sets. Nothing was done.")
        assert error_text(await client.call_tool("no_such_tool", {})) == "Unknown tool: no_such_tool"
    async with Client(build_server(serve(tmp_path, "graphrag"))) as client:
        text = error_text(await client.call_tool("read_graph", {}))
        assert text.startswith("Unknown tool: read_graph is a tool of the memory and all tool sets, not of this "
                               "server's graphrag set. To call it, restart the server with DUCKGRAPH_TOOLS=all or "
                               "DUCKGRAPH_TOOLS=memory")
        text = error_text(await client.call_tool("communities_to_summarize", {}))
        assert "is a tool of the all tool set, not of this server's graphrag set" in text
    assert contents(tmp_path / "kb.duckdb")["work"]["nodes"] == [("Alex", "", ("surfs",))]
