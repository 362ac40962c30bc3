"""Between builds, communities_to_summarize hands the host an extractive report as global_search shows it: its
title and material written again from the members as they are now (a real DuckDB file, the real default model,
the official MCP client in memory). A host that writes from it writes what holds now, not the build's text."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.domain.communities.reports import FACT_IDS
from duckgraph.core.domain.texts import fact_sentence
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_communities_current_mcp import report_about
from tests.e2e.test_communities_mcp import call_ok, graph_arguments
from tests.e2e.test_mcp_inmemory import make_services

pytestmark = pytest.mark.model

NEW_DESCRIPTION = "Its Great Red Spot is a storm larger than Earth."


def test_communities_to_summarize_gives_an_extractive_reports_title_and_material_as_the_graph_is_now(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            await call_ok(client, "build_communities", {})
            kb.communities.keeper.stop()  # no rebuild: what the tools show between builds
            community = next(c for c in kb.store.communities("default")
                             if c.level == 0 and "Jupiter" in {e["name"] for e in c.details["entities"]})
            (central, old), (second, _) = [(e["name"], e["description"]) for e in community.details["entities"][:2]]
            ended = kb.store.get_edges(community.details[FACT_IDS][:1])[0]
            names = {n.id: n.name for n in kb.store.get_nodes(community.members)}
            sentence = fact_sentence(names[ended.source_id], ended.type, names[ended.target_id])
            first = await call_ok(client, "communities_to_summarize", {"limit": 50})
            before = next(c for c in first["communities"] if c["id"] == community.id)
            assert f"- {central} (Planet): {old}" in before["material"] and sentence in before["material"]

            await call_ok(client, "update_entity", {"name": central, "description": NEW_DESCRIPTION})
            await call_ok(client, "update_entity", {"name": second, "new_name": "Planet Two"})
            await call_ok(client, "end_relations", {"relations": [
                {"source": names[ended.source_id], "target": names[ended.target_id], "type": ended.type}]})

            found = await call_ok(client, "global_search", {"query": "planets", "token_budget": 5_000})
            assert not found["freshness"]["stale"]  # 3 writes of 124: no rebuild due
            shown = report_about(found, central)
            assert NEW_DESCRIPTION in shown["summary"] and "Planet Two" in shown["title"]
            listed = await call_ok(client, "communities_to_summarize", {"limit": 50})
            now = next(c for c in listed["communities"] if c["id"] == community.id)
            # What global_search shows: the new description and name, the ended fact gone.
            assert now["current_title"] == shown["title"]
            assert f"- {central} (Planet): {NEW_DESCRIPTION}" in now["material"]
            assert f"- {central} (Planet): {old}" not in now["material"]
            assert "- Planet Two (Planet)" in now["material"] and f"- {second} (" not in now["material"]
            assert sentence not in now["material"] and "Facts:" in now["material"]
            assert not now["stale"] and len(listed["communities"]) == len(first["communities"])

    anyio.run(session)
