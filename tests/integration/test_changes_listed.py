"""What recent_changes lists is what was written, on a real DuckDB file with the real default model: a curation
that changes no fact lists no fact, and a fact ended later is listed as added without the end it got later."""

from __future__ import annotations

import time

import numpy as np
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model

NODES = [NodeInput(name="Payments Team", type="Team"), NodeInput(name="orders-db", type="Database"),
         NodeInput(name="checkout-service", type="Service", observations=["Current version is v1.8"])]
EDGES = [EdgeInput(source="Payments Team", target="checkout-service", type="OWNS"),
         EdgeInput(source="checkout-service", target="orders-db", type="WRITES_TO")]


def lines(kb: KnowledgeBase) -> list[str]:
    """recent_changes' lines without their moments."""
    return [line.split(" ", 4)[4] for line in kb.recent_changes().text.splitlines()]  # "- DAY TIME UTC what"


def edge_vectors(kb: KnowledgeBase) -> dict[int, np.ndarray]:
    ids = [e.id for e in kb.store.list_edges("default")]
    return kb.store.get_vectors("edge", ids)


def test_an_update_that_keeps_the_name_lists_the_entity_only_and_a_rename_refreshes_its_facts(real_kb):
    real_kb.add_knowledge_graph(NODES, EDGES)
    before = edge_vectors(real_kb)
    time.sleep(0.01)  # a later moment than the creation's, as between two calls
    real_kb.curation.update_entity("checkout-service", "default", remove_observations=["Current version is v1.8"],
                                   add_observations=["Current version is v1.9"], description="Takes the orders.",
                                   type="Microservice", aliases=["checkout"])
    # The edges' sentences name their ends only: nothing of them changed, so no fact is listed as updated.
    assert [line for line in lines(real_kb) if line.startswith("fact")] == [
        "fact added: Payments Team owns checkout-service", "fact added: checkout-service writes to orders-db"]
    assert "entity updated: checkout-service [Microservice]" in lines(real_kb)
    assert all(np.array_equal(before[i], v) for i, v in edge_vectors(real_kb).items())

    # A rename changes the sentences: the facts get vectors naming the new name.
    real_kb.curation.update_entity("checkout-service", "default", new_name="Checkout Frontend")
    after = edge_vectors(real_kb)
    assert all(not np.array_equal(before[i], after[i]) for i in before)
    sentence = real_kb.embedder.embed_query("Payments Team owns Checkout Frontend")
    [owns] = [e for e in real_kb.store.list_edges("default") if e.type == "OWNS"]
    assert float(np.dot(after[owns.id], sentence)) > 0.99
    assert sorted(line for line in lines(real_kb) if line.startswith("fact updated")) == [
        "fact updated: Checkout Frontend writes to orders-db", "fact updated: Payments Team owns Checkout Frontend"]


def test_a_fact_ended_later_is_listed_as_added_with_its_start_and_as_ended_with_its_end(db_path, minilm):
    with KnowledgeBase(DuckDBStore(db_path), minilm) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Marcus Lee", type="Person"), NodeInput(name="Priya Raman", type="Person"),
             NodeInput(name="Payments Team", type="Team")],
            [EdgeInput(source="Marcus Lee", target="Payments Team", type="ON_CALL_FOR", valid_from="2026-03-01")])
        time.sleep(0.01)
        kb.end_relations([EndRelationInput(source="Marcus Lee", target="Payments Team", type="ON_CALL_FOR",
                                           ended_at="2026-04-01")])
        # Written with its end: "added" shows it.
        kb.add_knowledge_graph([], [EdgeInput(source="Priya Raman", target="Payments Team", type="ON_CALL_FOR",
                                              valid_from="2026-04-01", valid_until="2026-11-01")])
        live = [line for line in lines(kb) if line.startswith("fact")]  # the running server's memory of the file
    # And read by a server started later (the listing reads each fact from the file).
    with KnowledgeBase(DuckDBStore(db_path), minilm) as kb:
        facts = [line for line in lines(kb) if line.startswith("fact")]
    assert facts == live == ["fact added: Priya Raman on call for Payments Team (2026-04-01 to 2026-11-01)",
                             "fact ended: Marcus Lee on call for Payments Team (2026-03-01 to 2026-04-01)",
                             "fact added: Marcus Lee on call for Payments Team (since 2026-03-01)"]


def test_a_merge_refreshes_the_facts_that_moved_and_lists_the_merge_only(real_kb):
    real_kb.add_knowledge_graph(
        [*NODES, NodeInput(name="Payments Squad", type="Team"), NodeInput(name="billing-api", type="Service")],
        [*EDGES, EdgeInput(source="Payments Squad", target="billing-api", type="OWNS")])
    before = edge_vectors(real_kb)
    time.sleep(0.01)
    real_kb.curation.merge_entities(["Payments Squad"], "Payments Team", "default")
    after = edge_vectors(real_kb)
    edges = {(e.type, real_kb.store.get_nodes([e.target_id])[0].name): e.id for e in real_kb.store.list_edges("default")}
    # The target's own facts name the same ends as before: neither rewritten nor listed as updated.
    assert np.array_equal(before[edges["OWNS", "checkout-service"]], after[edges["OWNS", "checkout-service"]])
    # The fact that moved is not listed as updated (its new vector is derived data): the merge's line counts it.
    assert [line for line in lines(real_kb) if line.startswith("fact updated")] == []
    assert "entity merged: Payments Squad [Team] into Payments Team (1 relation moved)" in lines(real_kb)
    # The fact that moved names the target now, in its vector too.
    sentence = real_kb.embedder.embed_query("Payments Team owns billing-api")
    assert float(np.dot(after[edges["OWNS", "billing-api"]], sentence)) > 0.99
