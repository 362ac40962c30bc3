"""A relation written beside the one relation of its type its source held ("Alice LIVES_IN Paris" while "Alice
LIVES_IN Berlin" holds) is stored, and the write's answer names the older one and how to end it, in one line: both
hold until the caller ends one. A type the source held to several ends already (WORKS_ON), or that one call gives
several new ends, stays quiet. Through the official MCP client on the real server and a real DuckDB file (the hashing
embedder: no vector is compared)."""

from __future__ import annotations

import pytest
from mcp import Client

from duckgraph.core.mcp.server import build_server
from tests.e2e.test_create_entities_after_merge_mcp import anyio_backend, services  # noqa: F401 (fixtures)
from tests.e2e.test_mcp_inmemory import call_ok


def E(source: str, kind: str, target: str, **more: str) -> dict[str, str]:
    return {"source": source, "type": kind, "target": target, **more}


def R(source: str, target: str, kind: str) -> dict[str, str]:
    return {"from": source, "to": target, "relationType": kind}


@pytest.mark.anyio
async def test_add_knowledge_graph_names_the_one_relation_of_its_type_a_new_one_may_replace(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Alice", "type": "Person"}, {"name": "Berlin", "type": "City"},
                      {"name": "Checkout", "type": "Project"}, {"name": "Search", "type": "Project"}],
            "edges": [E("Alice", "LIVES_IN", "Berlin"), E("Alice", "WORKS_ON", "Checkout"),
                      E("Alice", "WORKS_ON", "Search")]})
        moved = await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Paris", "type": "City"}, {"name": "Billing", "type": "Project"}],
            "edges": [E("alice", "lives in", "Paris"), E("Alice", "WORKS_ON", "Billing")]})
        assert moved["hints"] == [
            "Alice -LIVES_IN-> Paris holds beside Alice -LIVES_IN-> Berlin: if the new one replaces it, end that one "
            "with end_relations (it stays as history)"]
        [alice] = (await call_ok(client, "get_entities", {"names": ["Alice"]}))["entities"]
        assert sorted((r["type"], r["target"]) for r in alice["relations"] if r["type"] == "LIVES_IN") == [
            ("LIVES_IN", "Berlin"), ("LIVES_IN", "Paris")]  # said, not ended

        ended = await call_ok(client, "end_relations", {"relations": [E("Alice", "LIVES_IN", "Berlin")]})
        assert len(ended["ended"]) == 1
        quiet = [
            [E("Alice", "LIVES_IN", "Paris")],  # stated again: not new
            [E("Alice", "LIVES_IN", "Rome", valid_from="2010-01-01", valid_until="2012-01-01")],  # history
            [E("Alice", "SPEAKS", "German"), E("Alice", "SPEAKS", "French")],  # two new ends in one call
            [E("Alice", "SPEAKS", "Italian")],  # a type held to several ends already
        ]
        for edges in quiet:
            nodes = [{"name": e["target"], "type": "Thing"} for e in edges if e["target"] != "Paris"]
            answer = await call_ok(client, "add_knowledge_graph", {"nodes": nodes, "edges": edges})
            assert answer["hints"] == [], edges
        # Paris is the one LIVES_IN that holds now, Berlin ended: a new one names Paris.
        again = await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Lyon", "type": "City"}],
                                                              "edges": [E("Alice", "LIVES_IN", "Lyon")]})
        assert again["hints"] == [
            "Alice -LIVES_IN-> Lyon holds beside Alice -LIVES_IN-> Paris: if the new one replaces it, end that one "
            "with end_relations (it stays as history)"]


@pytest.mark.anyio
async def test_create_relations_says_it_in_the_relation_s_note(services):
    async with Client(build_server(services)) as client:
        await call_ok(client, "create_entities", {"entities": [
            {"name": n, "entityType": t, "observations": []}
            for n, t in [("Alice", "person"), ("Acme", "company"), ("Globex", "company"), ("Initech", "company")]]})
        await call_ok(client, "create_relations", {"relations": [R("Alice", "Acme", "works at")]})
        moved = await call_ok(client, "create_relations", {"relations": [R("Alice", "Globex", "works_at")]})
        assert moved["relations"] == [{
            "from": "Alice", "to": "Globex", "relationType": "works_at",
            "note": "'Alice' -works at-> 'Acme' holds too: if this relation replaces it, remove that one (end_relations "
                    "keeps it as history, where it is served; delete_relations deletes it)"}]
        # Two now: a third is one of many.
        third = await call_ok(client, "create_relations", {"relations": [R("Alice", "Initech", "works_at")]})
        assert third["relations"] == [{"from": "Alice", "to": "Initech", "relationType": "works_at"}]
