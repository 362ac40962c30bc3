"""Communities through the official MCP client, in memory: build_communities with progress, global_search,
search naming its anchors' communities, and host-written reports (the summarize_communities prompt, then
save_community_report, in the `all` tool set)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services
from tests.integration.test_communities import QUERIES, THEMES, planted_graph, theme_of

pytestmark = pytest.mark.model


def graph_arguments() -> dict:
    nodes, edges = planted_graph()
    return {"nodes": [n.model_dump(exclude_none=True) for n in nodes],
            "edges": [e.model_dump(exclude_none=True) for e in edges]}


async def call_ok(client: Client, name: str, arguments: dict) -> dict:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def test_build_then_global_search_through_the_client(tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            before = await call_ok(client, "global_search", {"query": "main themes"})
            assert before["reports"] == [] and "build_communities" in before["hint"]
            progress = []

            async def on_progress(done, total, message):
                progress.append(done)

            built = await client.call_tool("build_communities", {}, progress_callback=on_progress)
            assert not built.is_error and built.structured_content["communities"] >= 5
            assert progress and progress[-1] == 4
            for theme, query in QUERIES.items():
                found = await client.call_tool("global_search", {"query": query, "token_budget": 400})
                assert not found.is_error
                first = found.structured_content["reports"][0]
                assert {theme_of(e["name"]) for e in first["key_entities"]} == {theme}
                assert first["title"] in found.content[0].text
            refused = await client.call_tool("global_search", {"query": "x", "level": 9})
            assert refused.is_error and "level 9 does not exist" in refused.content[0].text
            search = await call_ok(client, "search", {"query": "Chopin"})
            assert "(community " in search["anchor_communities"]["Chopin"]
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"global_search", "build_communities"} <= tools and "save_community_report" not in tools

    anyio.run(session)


def test_the_host_writes_reports_through_the_prompt_and_the_tool(tmp_path: Path, db_path: Path, plugin_manager,
                                                                 minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            await call_ok(client, "build_communities", {})
            prompt = await client.get_prompt("summarize_communities", {"limit": "2"})
            text = prompt.messages[0].content.text
            assert "save_community_report" in text and "Facts:" in text and "more communities wait" in text
            listed = await call_ok(client, "communities_to_summarize", {"limit": 50})
            waiting = len(listed["communities"])
            for done, community in enumerate(listed["communities"], start=1):
                names = [line[2:].split(" (")[0] for line in community["material"].splitlines()
                         if line.startswith("- ") and " (" in line and "Key" not in line]
                theme = theme_of(names[0])
                saved = await call_ok(client, "save_community_report", {
                    "id": community["id"], "title": f"{theme.title()} overview",
                    "summary": f"Everything stored about {theme}: {', '.join(THEMES[theme][1])}."})
                assert (saved["written"], saved["remaining"]) == (1, waiting - done)
            assert (await call_ok(client, "communities_to_summarize", {}))["communities"] == []
            found = await call_ok(client, "global_search", {"query": "classical composers"})
            assert (found["reports"][0]["title"], found["reports"][0]["author"]) == ("Music overview", "host")
            missing = await client.call_tool("save_community_report", {"id": 999, "title": "t", "summary": "s"})
            assert missing.is_error and "no community 999" in missing.content[0].text

    anyio.run(session)
