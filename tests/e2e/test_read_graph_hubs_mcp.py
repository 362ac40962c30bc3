"""read_graph and memory://knowledge-graph with hubs (DUCKGRAPH_TOOLS=memory), through the official MCP client on
the real server and a real DuckDB file (the hashing embedder): a page holds every relation that starts at its
entities, however many come in to them, and paging through the graph returns every relation once. The relation cap
is made small so that a few dozen relations reach it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.domain import memory_server
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok
from tests.fakes import HashingEmbedder

CAP = 10


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services(tmp_path: Path, monkeypatch) -> Services:
    monkeypatch.setattr(memory_server, "MAX_RELATIONS", CAP)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, tools="memory")
    return bootstrap(settings, embedder=HashingEmbedder())


def triples(relations: list[dict]) -> set[tuple[str, str, str]]:
    return {(r["from"], r["to"], r["relationType"]) for r in relations}


@pytest.mark.anyio
async def test_pages_hold_their_own_relations_past_hubs_and_lose_none(services):
    hubs = [{"name": f"Hub{i}", "entityType": "topic", "observations": []} for i in range(2)]
    mine = [{"name": f"A{i}", "entityType": "person", "observations": []} for i in range(4)]
    fans = [{"name": f"F{i}", "entityType": "person", "observations": []} for i in range(40)]
    incoming = [{"from": f"F{i}", "to": f"Hub{i % 2}", "relationType": "follows"} for i in range(40)]
    # Page 0's own: 3 each from A0..A3 (12, over the cap): the page ends early rather than drop any.
    own = [{"from": f"A{i}", "to": f"Hub{k % 2}" if k < 2 else f"A{(i + 1) % 4}", "relationType": f"r{k}"}
           for i in range(4) for k in range(3)]
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": hubs + mine + fans})
        await call_ok(client, "create_relations", {"relations": incoming})  # the lowest ids: read first before
        await call_ok(client, "create_relations", {"relations": own})

        first = await call_ok(client, "read_graph", {"limit": 6})
        resource = json.loads((await client.read_resource("memory://knowledge-graph")).contents[0].text)

        pages, offset = [], 0
        while offset is not None:
            page = await call_ok(client, "read_graph", {"offset": offset, "limit": 6})
            pages.append(page)
            offset = page.get("next_offset")

    # Hubs and A0..A2: A3's three would take the page over the cap, so it starts the next page.
    assert [e["name"] for e in first["entities"]] == ["Hub0", "Hub1", "A0", "A1", "A2"]
    assert triples(first["relations"]) == triples([r for r in own if r["from"] != "A3"])
    assert first["next_offset"] == 5 and "relations_truncated" not in first
    assert resource == first  # the largest page is cut at the same entity

    every = [r for p in pages for r in p["relations"]]
    assert len(every) == len(incoming) + len(own) and triples(every) == triples(incoming + own)
    assert [e["name"] for p in pages for e in p["entities"]] == [e["name"] for e in hubs + mine + fans]
    assert not any("relations_truncated" in p for p in pages)
