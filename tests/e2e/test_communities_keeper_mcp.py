"""The communities' keeper through the official MCP client, in memory, on a real DuckDB file with the real model:
relations deleted over MCP get the reports rebuilt without their facts, and a server started with the warm-up off
(as make_services starts it) rebuilds a build made stale while no server ran, after its first call: it opens
nothing before it."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_communities_mcp import call_ok
from tests.e2e.test_mcp_inmemory import make_services
from tests.integration.test_global_search_answers import TOPICS, knowledge_base, topic_graph

pytestmark = pytest.mark.model


def arguments(topics: dict) -> dict:
    nodes, edges = topic_graph(topics)
    return {"nodes": [n.model_dump(exclude_none=True) for n in nodes],
            "edges": [e.model_dump(exclude_none=True) for e in edges]}


def test_relations_deleted_over_mcp_leave_the_reports_at_the_rebuild(tmp_path: Path, db_path: Path, plugin_manager,
                                                                     minilm):
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    graph = arguments(TOPICS)
    store, keeper_idle = services.knowledge_base.store, services.knowledge_base.communities.keeper.idle

    async def session() -> None:
        async with Client(build_server(services)) as client:
            await call_ok(client, "add_knowledge_graph", graph)
            built = await call_ok(client, "build_communities", {})
            built_at = store.community_build("default").built_at
            gone = [{k: e[k] for k in ("source", "target", "type")} for e in graph["edges"][::2]]  # 18 of 36
            deleted = await call_ok(client, "delete_relations", {"relations": gone})
            assert len(deleted["deleted"]) == len(gone)
            assert await anyio.to_thread.run_sync(keeper_idle.wait, 60)  # the keeper's look, and its rebuild
            assert store.community_build("default").built_at > built_at  # rebuilt: half the relations went
            found = await client.call_tool("global_search", {"query": "What are the main themes?",
                                                             "token_budget": 3000})
            text = found.content[0].text
            assert found.structured_content["freshness"]["changed_share"] == 0.0
            assert built["relations"] == 36 and "Facts: " in text
            for relation in gone:
                sentence = f"{relation['source']} part of {relation['target']}"
                assert sentence not in text, sentence
            assert "(stale)" not in text

    anyio.run(session)


def test_with_the_warm_up_off_a_stale_build_is_rebuilt_after_the_first_call(tmp_path: Path, db_path: Path,
                                                                            plugin_manager, minilm):
    with knowledge_base(db_path, minilm) as kb:  # written while no server ran (`duckgraph import`, say)
        kb.communities.keeper.stop()
        kb.add_knowledge_graph(*topic_graph({"books": TOPICS["books"]}))
        kb.communities.build("default")
        kb.add_knowledge_graph(*topic_graph({"garden": TOPICS["garden"]}))
        built_at = kb.store.community_build("default").built_at
    services = make_services(tmp_path, db_path, minilm, plugin_manager)
    kb = services.knowledge_base
    assert not services.settings.warm_up

    async def session() -> None:
        async with Client(build_server(services)) as client:
            await client.list_tools()
            await anyio.sleep(1)
            assert not kb._opened  # warm-up off: nothing opened before the first call
            first = await call_ok(client, "global_search", {"query": "What are the main themes?"})
            assert first["freshness"]["stale"] and len(first["reports"]) == 1
            deadline = time.monotonic() + 30
            while kb.store.community_build("default").built_at == built_at and time.monotonic() < deadline:
                await anyio.sleep(0.1)
            assert await anyio.to_thread.run_sync(kb.communities.keeper.idle.wait, 30)
            found = await call_ok(client, "global_search", {"query": "What are the main themes?"})
            assert not found["freshness"]["stale"] and len(found["reports"]) == 2

    anyio.run(session)
