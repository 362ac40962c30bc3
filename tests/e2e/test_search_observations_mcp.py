"""What the host model reads of an entity's observations in `search`, through the official MCP client on the real
server, store and model: a decision log kept as one project's observations (as a memory tool's user keeps it),
where a later observation replaces an earlier one in words the question does not share."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import call_ok
from tests.e2e.test_time import anyio_backend, services  # noqa: F401 (fixtures: asyncio, the real model)
from tests.unit.test_observation_order import DECISIONS

pytestmark = pytest.mark.model

CHOSEN, REPLACED = DECISIONS[1], DECISIONS[4]  # Memcached chosen; Redis replacing it


async def search(client: Client, arguments: dict[str, Any]) -> tuple[dict[str, Any], str, list[str]]:
    """The structured result, the text and the text's observation lines."""
    result = await client.call_tool("search", arguments)
    assert not result.is_error, result.content
    text = "\n".join(block.text for block in result.content)
    return result.structured_content, text, [line[4:] for line in text.splitlines() if line.startswith("  - ")]


@pytest.mark.anyio
async def test_a_long_log_shows_the_reversal_and_says_how_many_observations_it_left_out(services):
    # 82 decisions: 40 before the choice of Memcached, 40 after it, the reversal among them. The question shares
    # "caching" with the choice alone; the reversal was left out of the 20 shown, and nothing said 62 were.
    log = [f"2021-{1 + i % 12:02d}-{1 + i % 27:02d}: decided to standardise component {i} on library lib{i} after "
           "a team vote about maintainability and licences of alternatives" for i in range(40)]
    log.insert(5, CHOSEN)
    log += [f"2023-{1 + i % 12:02d}-{1 + i % 27:02d}: decided to retire feature flag {i} after the quarterly cleanup "
            "of unused toggles in the web app" for i in range(40)]
    log.insert(45, REPLACED)
    async with Client(build_server(services, tool_set="all")) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": "Orion Platform", "entityType": "Project", "observations": log}]})
        found, text, lines = await search(client, {"query": "What do we use for caching now?"})
        [orion] = [node for node in found["nodes"] if node["name"] == "Orion Platform"]
        assert len(orion["observations"]) == 20 and orion["observations_not_shown"] == 62
        assert orion["observations"][:2] == [REPLACED, CHOSEN] and lines[:2] == [REPLACED, CHOSEN]
        assert text.splitlines()[-1] == (
            "(not shown, the observations least related to the query: Orion Platform: 62 more. get_entities lists "
            "all of an entity's observations)")
        read = await call_ok(client, "get_entities", {"names": ["Orion Platform"]})
        assert read["entities"][0]["observations"] == log  # what the note sends the model to


@pytest.mark.anyio
async def test_a_small_budget_never_shows_a_replaced_decision_without_its_reversal(services):
    async with Client(build_server(services, tool_set="all")) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": "Orion Platform", "entityType": "Project", "observations": DECISIONS}]})
        for query, old, new in (("What do we use for caching now?", CHOSEN, REPLACED),
                                ("Which message queue do we use and why?", DECISIONS[2], DECISIONS[6])):
            found, _, whole = await search(client, {"query": query})
            assert found["nodes"][0]["observations_not_shown"] == 0 and whole[:2] == [new, old], query
            for budget in (100, 120, 150):
                cut, text, lines = await search(client, {"query": query, "token_budget": budget})
                # What a budget shows is the start of what a larger one shows: the shorter, older, unrelated lines
                # (EC2, Kubernetes) never take the place of one cut; the newer comes first, the old never alone.
                assert cut["truncated"] and lines == whole[:len(lines)] and new in lines, (query, budget, text)
