"""A report the host wrote (save_community_report) that went stale is asked for again: communities_to_summarize
lists every report global_search marks "(stale)", marked stale, its material as the graph is now, and writing it
again clears the mark, in global_search, the listing and the next build (a real DuckDB file, the real default
model, the official MCP client in memory)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.domain.communities.reports import FACT_IDS
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_communities_mcp import call_ok, graph_arguments
from tests.e2e.test_mcp_inmemory import make_services

pytestmark = pytest.mark.model

NEW_DESCRIPTION = "Its Great Red Spot is a storm larger than Earth."


async def write_all(client: Client) -> None:
    listed = await call_ok(client, "communities_to_summarize", {"limit": 50})
    for entry in listed["communities"]:
        await call_ok(client, "save_community_report",
                      {"id": entry["id"], "title": f"Written {entry['id']}", "summary": "What the host wrote."})


async def stale_reports(client: Client) -> dict[int, str]:
    """Community id -> title, of the reports global_search marks stale (every level)."""
    found: dict[int, str] = {}
    for level in range(3):
        result = await client.call_tool("global_search", {"query": "main themes", "level": level,
                                                          "token_budget": 50_000})
        if result.is_error:  # past the last level
            break
        found |= {r["id"]: r["title"] for r in result.structured_content["reports"] if r["stale"]}
    return found


async def waiting(client: Client) -> dict[int, dict]:
    listed = await call_ok(client, "communities_to_summarize", {"limit": 50})
    assert listed["remaining"] == 0
    return {entry["id"]: entry for entry in listed["communities"]}


def test_a_stale_host_report_is_listed_to_be_written_again_and_writing_it_clears_the_mark(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            await call_ok(client, "build_communities", {})
            kb.communities.keeper.stop()  # no background rebuild: the host's turn between builds
            await write_all(client)
            assert await waiting(client) == {} and await stale_reports(client) == {}

            community = next(c for c in kb.store.communities("default")
                             if c.level == 0 and "Jupiter" in {e["name"] for e in c.details["entities"]})
            second = community.details["entities"][1]["name"]
            await call_ok(client, "update_entity", {"name": "Jupiter", "description": NEW_DESCRIPTION})
            await call_ok(client, "update_entity", {"name": second, "new_name": "Planet Two"})
            stale = await stale_reports(client)
            assert community.id in stale
            listed = await waiting(client)
            # Whatever global_search marks stale is asked for again, marked so, under the title it has.
            assert set(listed) == set(stale)
            entry = listed[community.id]
            assert entry["stale"] and entry["current_title"] == f"Written {community.id}"
            # Its material is the graph as it is now: the author writes what holds.
            assert f"- Jupiter (Planet): {NEW_DESCRIPTION}" in entry["material"]
            assert "- Planet Two (Planet)" in entry["material"] and f"- {second} (" not in entry["material"]

            for entry in listed.values():
                await call_ok(client, "save_community_report",
                              {"id": entry["id"], "title": "Rewritten", "summary": "The host wrote it again."})
            assert await stale_reports(client) == {} and await waiting(client) == {}
            shown = await call_ok(client, "global_search", {"query": "planets", "level": 0, "token_budget": 50_000})
            report = next(r for r in shown["reports"] if r["id"] == community.id)
            assert report["title"] == "Rewritten" and not report["stale"]
            assert "Planet Two" in {e["name"] for e in report["key_entities"]}

            # The next build keeps the reports written after the changes as they are (the same members: names
            # and descriptions changed, not the relations), not stale.
            await call_ok(client, "build_communities", {})
            assert await stale_reports(client) == {} and await waiting(client) == {}
            assert kb.store.communities("default", [community.id])[0].title == "Rewritten"

            # A relation the report cites, deleted: stale (its text withheld) and listed; written again, not.
            cited = kb.store.get_edges(kb.store.communities("default", [community.id])[0].details[FACT_IDS][:1])[0]
            names = {n.id: n.name for n in kb.store.get_nodes([cited.source_id, cited.target_id])}
            await call_ok(client, "delete_relations", {"relations": [
                {"source": names[cited.source_id], "target": names[cited.target_id], "type": cited.type}]})
            withheld = await stale_reports(client)
            entry = (await waiting(client))[community.id]
            # Listed under the title global_search shows: the written one may state the deleted fact.
            assert entry["stale"] and entry["current_title"] == withheld[community.id] != "Rewritten"
            await call_ok(client, "save_community_report",
                          {"id": community.id, "title": "Rewritten again", "summary": "Without that fact."})
            assert community.id not in await stale_reports(client)
            assert community.id not in await waiting(client)

    anyio.run(session)
