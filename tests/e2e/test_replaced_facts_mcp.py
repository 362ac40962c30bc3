"""A relation written beside the one relation of its type its source held ("Alice LIVES_IN Paris" while "Alice
LIVES_IN Berlin" holds) is stored, and the write's answer says, in one line, that the source now has two, as a
question of fact: both hold until the caller ends one that no longer holds. A type the source held to several ends
already (WORKS_ON), that one call gives several new ends, or that any entity of the namespace holds to several ends
(HAS_CHILD, SPEAKS: many by nature), stays quiet. Through the official MCP client on the real server and a real DuckDB
file (the hashing embedder: no vector is compared)."""

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
            "'Alice' now has two current LIVES_IN relations (to 'Berlin' and 'Paris'); if one no longer holds, end it "
            "with end_relations"]
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
            "'Alice' now has two current LIVES_IN relations (to 'Paris' and 'Lyon'); if one no longer holds, end it "
            "with end_relations"]


@pytest.mark.anyio
async def test_a_type_another_entity_holds_to_several_ends_has_many_by_nature(services):
    async with Client(build_server(services)) as client:
        people = ["Alice", "Bob", "Carol", "Dave", "Erin"]
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": n, "type": "Person"} for n in people],
            "edges": [E("Alice", "HAS_CHILD", "Bob"), E("Dave", "HAS_CHILD", "Erin")]})
        # Nothing shows yet that a parent may have several children: said, as a question of fact.
        second = await call_ok(client, "add_knowledge_graph", {"nodes": [],
                                                               "edges": [E("Alice", "HAS_CHILD", "Carol")]})
        assert second["hints"] == [
            "'Alice' now has two current HAS_CHILD relations (to 'Bob' and 'Carol'); if one no longer holds, end it "
            "with end_relations"]
        # Now Alice has two: Dave's second child is one of many, as is any entity's from now on.
        third = await call_ok(client, "add_knowledge_graph", {"nodes": [], "edges": [E("Dave", "HAS_CHILD", "Bob")]})
        assert third["hints"] == []
        # An ended relation shows nothing: LIVES_IN held twice at different times is still one at a time.
        await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Rome", "type": "City"}], "edges": [
            E("Bob", "LIVES_IN", "Rome", valid_from="2010-01-01", valid_until="2012-01-01")]})
        await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Oslo", "type": "City"}], "edges": [
            E("Bob", "LIVES_IN", "Oslo")]})
        moved = await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Bergen", "type": "City"}],
                                                              "edges": [E("Bob", "LIVES_IN", "Bergen")]})
        assert moved["hints"] == [
            "'Bob' now has two current LIVES_IN relations (to 'Oslo' and 'Bergen'); if one no longer holds, end it "
            "with end_relations"]


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
            "note": "'Alice' now has two current works_at relations (to 'Acme' and 'Globex'); if one no longer "
                    "holds, delete_relations removes it"}]
        # Two now: a third is one of many.
        third = await call_ok(client, "create_relations", {"relations": [R("Alice", "Initech", "works_at")]})
        assert third["relations"] == [{"from": "Alice", "to": "Initech", "relationType": "works_at"}]
        # Alice speaks two languages: Bob's second is one of many too.
        await call_ok(client, "create_relations", {"relations": [R("Alice", "English", "speaks"),
                                                                 R("Alice", "French", "speaks"),
                                                                 R("Bob", "English", "speaks")]})
        second = await call_ok(client, "create_relations", {"relations": [R("Bob", "German", "speaks")]})
        assert [r.get("note", "") for r in second["relations"]] == [
            "'German' did not exist: created with entityType 'unknown' to keep the relation (create_entities with the "
            "same name gives it a type and observations)"]
