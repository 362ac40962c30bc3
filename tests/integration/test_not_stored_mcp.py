"""An id the query names that nothing stored holds, through the official MCP client with the real default model on a
real file: the search still shows the related content, says first that nothing stored mentions the id, and lists it
in `not_stored`; an id stored whole (here only in a fact's description) is not listed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services
from tests.integration.test_search_floor_when_ids_types import store_incidents

pytestmark = pytest.mark.model


def test_the_search_tool_says_which_named_ids_nothing_stored_mentions(tmp_path: Path, db_path: Path, plugin_manager,
                                                                       minilm) -> None:
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    store_incidents(services.knowledge_base)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            found = await client.call_tool("search", {"query": "What happened in INC-199?", "token_budget": 300})
            assert not found.is_error and not found.structured_content["nothing_relevant"]
            assert found.structured_content["not_stored"] == ["INC-199"]
            text = found.content[0].text
            assert text.startswith("Nothing stored mentions INC-199; what follows is related content.\n")
            assert "INC-142" in text  # the related content is still shown
            stored = await client.call_tool("search", {"query": "PO-88123"})
            assert stored.structured_content["not_stored"] == []
            assert not stored.content[0].text.startswith("Nothing stored mentions")

    anyio.run(session)
