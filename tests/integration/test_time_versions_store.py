"""A relation that holds, written again from a later valid_from with other words, in the store on a real DuckDB
file: which writes start a new version of the fact (the old one kept as history) and which update the period in
place; a period with no known start; a change planned for later; one call that states both versions; a call
refused after a new version was made in it writes nothing."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.ports import InvalidInputError
from tests.integration.test_time_periods_store import d

NS = "default"
NODES = [NodeInput(name="Checkout Service", type="Service"), NodeInput(name="orders-db", type="Database"),
         NodeInput(name="cache", type="Database")]


def uses(target: str = "orders-db", **more) -> EdgeInput:
    return EdgeInput(source="Checkout Service", target=target, type="USES", **more)


def rows(kb: KnowledgeBase) -> list[tuple[datetime | None, datetime | None, str, dict, float]]:
    return sorted(((e.valid_from, e.valid_until, e.description, e.properties, e.weight)
                   for e in kb.store.list_edges(NS, include_expired=True)), key=str)


def on_file(kb: KnowledgeBase) -> list[tuple[datetime | None, datetime | None, dict]]:
    """The edges as the file holds them (the store answers reads from its memory)."""
    return [(start, end, json.loads(props)) for start, end, props in kb.store._con.execute(  # noqa: SLF001
        "SELECT valid_from, valid_until, properties::VARCHAR FROM edges ORDER BY valid_from NULLS FIRST").fetchall()]


def test_a_later_start_with_other_properties_keeps_the_version_before_and_carries_the_rest_over(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3", "tier": "gold"}, valid_from="2024-01-01",
                                             valid_until="2099-01-01", description="orders", weight=0.5)])
    written = fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.4"}, valid_from="2024-09-01")])
    assert (written.edges_created, written.edges_updated, written.edges_unchanged) == (1, 0, 0)
    # What the write does not say (another property, the description, the weight, the end to come) carries over.
    assert rows(fake_kb) == [
        (d("2024-01-01"), d("2024-09-01"), "orders", {"version": "v2.3", "tier": "gold"}, 0.5),
        (d("2024-09-01"), d("2099-01-01"), "orders", {"version": "v2.4", "tier": "gold"}, 0.5)]
    assert on_file(fake_kb) == [(d("2024-01-01"), d("2024-09-01"), {"version": "v2.3", "tier": "gold"}),
                                (d("2024-09-01"), d("2099-01-01"), {"version": "v2.4", "tier": "gold"})]
    # Written again as the new version says it, it is that version restated: nothing moves.
    again = fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.4"}, valid_from="2024-09-01")])
    assert (again.edges_created, again.edges_updated, again.edges_unchanged, again.hints) == (0, 0, 1, [])
    assert len(rows(fake_kb)) == 2


def test_another_description_from_a_later_date_is_a_new_version_too(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [uses(valid_from="2024-01-01", description="reads orders")])
    fake_kb.add_knowledge_graph([], [uses(valid_from="2024-09-01", description="reads and writes orders")])
    assert [r[:3] for r in rows(fake_kb)] == [(d("2024-01-01"), d("2024-09-01"), "reads orders"),
                                               (d("2024-09-01"), None, "reads and writes orders")]


def test_the_same_words_from_a_later_date_move_the_start_in_place(fake_kb):
    """The fact restated, more precisely dated: today's behaviour stays (one period, its start moved)."""
    fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3"}, valid_from="2024-01-01")])
    written = fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.3"}, valid_from="2024-02-01")])
    assert (written.edges_created, written.edges_updated, written.hints) == (0, 1, [])
    assert rows(fake_kb) == [(d("2024-02-01"), None, "", {"version": "v2.3"}, 1.0)]


def test_other_words_from_an_earlier_or_the_same_start_update_the_period_in_place(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3"}, valid_from="2024-01-01")])
    fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.3.1"}, valid_from="2024-01-01")])
    fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.3.2"}, valid_from="2023-06-01")])
    fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.3.3"})])  # undated: names the one that holds
    assert rows(fake_kb) == [(d("2023-06-01"), None, "", {"version": "v2.3.3"}, 1.0)]


def test_a_fact_with_no_known_start_keeps_its_words_until_the_new_version(fake_kb):
    """An undated fact counts as holding at any earlier moment: moving its start to the new date would make a search
    of any moment before find nothing, so its words stay as history, still with no known start."""
    fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3"})])
    written = fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.4"}, valid_from="2024-09-01")])
    assert written.edges_created == 1
    assert [h for h in written.hints if "until 2024-09-01" in h and "valid_from null" in h], written.hints
    assert rows(fake_kb) == [(None, d("2024-09-01"), "", {"version": "v2.3"}, 1.0),
                             (d("2024-09-01"), None, "", {"version": "v2.4"}, 1.0)]


def test_a_change_planned_for_later_leaves_the_fact_that_holds_now(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3"}, valid_from="2024-01-01")])
    fake_kb.add_knowledge_graph([], [uses(properties={"version": "v3.0"}, valid_from="2099-01-01")])
    assert rows(fake_kb) == [(d("2024-01-01"), d("2099-01-01"), "", {"version": "v2.3"}, 1.0),
                             (d("2099-01-01"), None, "", {"version": "v3.0"}, 1.0)]
    assert [e.properties for e in fake_kb.store.list_edges(NS)] == [{"version": "v2.3"}]  # what holds now


def test_one_call_that_states_both_versions_stores_both(fake_kb):
    written = fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3"}, valid_from="2024-01-01"),
                                                  uses(properties={"version": "v2.4"}, valid_from="2024-09-01")])
    assert written.edges_created == 2
    assert [r[:2] + r[3:4] for r in rows(fake_kb)] == [(d("2024-01-01"), d("2024-09-01"), {"version": "v2.3"}),
                                                        (d("2024-09-01"), None, {"version": "v2.4"})]


def test_a_call_refused_after_making_a_new_version_writes_nothing(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [uses(properties={"version": "v2.3"}, valid_from="2024-01-01"),
                                        uses("cache", valid_from="2020-01-01", valid_until="2022-01-01")])
    before = rows(fake_kb)
    with pytest.raises(InvalidInputError, match="overlaps its stored period"):
        fake_kb.add_knowledge_graph([], [uses(properties={"version": "v2.4"}, valid_from="2024-09-01"),
                                         uses("cache", valid_from="2021-01-01")])
    assert rows(fake_kb) == before
    assert on_file(fake_kb) == [(d("2020-01-01"), d("2022-01-01"), {}),
                                (d("2024-01-01"), None, {"version": "v2.3"})]
