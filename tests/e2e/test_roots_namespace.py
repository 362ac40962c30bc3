"""namespace = "@roots" through the official MCP client in memory against the real server and DuckDB file: the
client's roots are asked once per connection, not at every call, and again after the client says they changed.
(The namespace a client's roots give, and the fallbacks: test_namespaces.py.)"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import ListRootsResult, Root

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Roots:
    """The client's roots callback: answers the current folder, and counts how often the server asked."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.asked = 0

    async def __call__(self, context) -> ListRootsResult:
        self.asked += 1
        return ListRootsResult(roots=[Root(uri=self.uri)])


def server(tmp_path: Path, db_path: Path, plugin_manager):
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(db_path), warm_up=False, namespace="@roots",
                             namespace_fallback="shared")
    return build_server(bootstrap(settings, plugin_manager=plugin_manager, embedder=HashingEmbedder()))


async def default_namespace(client: Client) -> str:
    result = await client.call_tool("list_namespaces", {})
    assert not result.is_error, result.content
    [default] = [n["name"] for n in result.structured_content["namespaces"] if n["default"]]
    return default


async def test_the_roots_are_asked_once_per_connection_and_again_when_they_change(tmp_path: Path, db_path: Path,
                                                                                   plugin_manager) -> None:
    roots = Roots("file:///work/api-server")
    # mode="legacy": the handshake-era protocol, in which a server may ask the client for its roots during a call.
    async with Client(server(tmp_path, db_path, plugin_manager), mode="legacy", list_roots_callback=roots) as client:
        for _ in range(3):
            added = await client.call_tool("add_knowledge_graph", {"nodes": [{"name": "Gateway", "type": "Service"}]})
            assert not added.is_error, added.content
        assert await default_namespace(client) == "api-server"
        assert roots.asked == 1

        roots.uri = "file:///work/web-app"
        with warnings.catch_warnings():  # roots are deprecated in the newest protocol; hosts still send this
            warnings.simplefilter("ignore")
            await client.send_roots_list_changed()
        assert await default_namespace(client) == "web-app"
        assert await default_namespace(client) == "web-app"
        assert roots.asked == 2
