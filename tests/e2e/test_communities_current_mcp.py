"""Between builds, global_search shows an extractive report as its members are now (a real DuckDB file, the real
default model, the official MCP client in memory): a description changed through add_knowledge_graph, a fact
ended or deleted, is in (or gone from) the report at once, though too little changed for a rebuild; a report
written by the host stays as written, marked stale, with the changed entities named."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.domain.communities.global_search import WITHHELD_FACTS
from duckgraph.core.domain.communities.reports import FACT_IDS
from duckgraph.core.domain.texts import fact_sentence
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_communities_mcp import call_ok, graph_arguments
from tests.e2e.test_mcp_inmemory import make_services

pytestmark = pytest.mark.model

NEW_DESCRIPTION = "Its Great Red Spot is a storm larger than Earth."


def report_about(found: dict, name: str) -> dict:
    return next(r for r in found["reports"] if name in {e["name"] for e in r["key_entities"]})


def test_an_extractive_report_shows_its_members_as_they_are_now_and_a_written_one_stays_stale(
        tmp_path: Path, db_path: Path, plugin_manager, minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base

    def extractive(theme_entity: str):
        """The astronomy community's record, its first central entity and its first three key facts."""
        community = next(c for c in kb.store.communities("default")
                         if c.level == 0 and theme_entity in {e["name"] for e in c.details["entities"]})
        return community, community.details["entities"][0]["name"], kb.store.get_edges(
            community.details[FACT_IDS][:3])

    async def session() -> None:
        async with Client(build_server(services, tool_set="all")) as client:
            await call_ok(client, "add_knowledge_graph", graph_arguments())
            await call_ok(client, "build_communities", {})
            kb.communities.keeper.stop()  # no rebuild: what global_search shows between builds
            community, central, (ended, deleted, kept) = extractive("Jupiter")
            names = {n.id: n.name for n in kb.store.get_nodes(community.members)}
            sentence = {e.id: fact_sentence(names[e.source_id], e.type, names[e.target_id]) for e in
                        (ended, deleted, kept)}
            before = await call_ok(client, "global_search", {"query": "planets", "token_budget": 5_000})
            assert sentence[ended.id] in report_about(before, central)["summary"]
            # The host writes the music report; its authors' text is kept as written.
            music = report_about(before, "Mozart")["id"]
            await call_ok(client, "save_community_report", {
                "id": music, "title": "Composers", "summary": "Mozart was influenced by Haydn."})

            await call_ok(client, "add_knowledge_graph", {"nodes": [
                {"name": central, "type": "Planet", "description": NEW_DESCRIPTION},
                {"name": "Mozart", "type": "Composer", "description": "Wrote The Magic Flute."}], "edges": []})
            await call_ok(client, "end_relations", {"relations": [
                {"source": names[ended.source_id], "target": names[ended.target_id], "type": ended.type}]})
            await call_ok(client, "delete_relations", {"relations": [
                {"source": names[deleted.source_id], "target": names[deleted.target_id], "type": deleted.type}]})

            found = await client.call_tool("global_search", {"query": "planets", "token_budget": 5_000})
            assert not found.is_error
            result, text = found.structured_content, found.content[0].text
            assert not result["freshness"]["stale"]  # 5 writes of 124: no rebuild due
            astronomy = report_about(result, central)
            assert NEW_DESCRIPTION in astronomy["summary"] and NEW_DESCRIPTION in text
            assert sentence[ended.id] not in text and sentence[deleted.id] not in text
            assert sentence[kept.id] in astronomy["summary"]  # the facts that still hold are shown
            assert astronomy["summary"] != WITHHELD_FACTS and not astronomy["stale"]
            assert f"## {astronomy['title']} [community {astronomy['id']}, level 0, 8 entities]\n" in text
            written = report_about(result, "Mozart")
            assert (written["author"], written["summary"], written["stale"]) == (
                "host", "Mozart was influenced by Haydn.", True)
            assert text.endswith("(Changed since the reports were built: Mozart. Reports marked stale may say what "
                                 "no longer holds; search gives their current facts.)")
            assert central not in text.rsplit("(Changed since", 1)[1]

    anyio.run(session)
