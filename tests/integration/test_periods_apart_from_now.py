"""On a real DuckDB file: a write of a period apart from now (both dates given) never rewrites the fact that holds
now, whatever the order in one call; a merge joins the overlapping periods of one relation into one; a stored
period, an ended one too, can be deleted by naming its start."""

from __future__ import annotations

from datetime import datetime

import pytest

from duckgraph.core.domain.model import EdgeInput, NodeInput, RelationToDelete
from duckgraph.ports import InvalidInputError

NS = "default"
NODES = [NodeInput(name="Ann", type="Person"), NodeInput(name="A. Lee", type="Person"),
         NodeInput(name="Acme", type="Organization")]


def edge(source: str = "Ann", **more: str) -> EdgeInput:
    return EdgeInput(source=source, target="Acme", type="WORKS_AT", **more)


def rows(kb) -> list[tuple]:
    return sorted(((e.valid_from, e.valid_until, e.description)
                   for e in kb.store.list_edges(NS, include_expired=True)), key=str)


def d(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(("current", "other", "stored"), [
    ({}, ("2015-01-01", "2018-01-01"), "from no known start to no end"),
    ({}, ("2090-01-01", "2091-01-01"), "from no known start to no end"),
    ({"valid_from": "2024-01-01"}, ("2090-01-01", "2091-01-01"), "from 2024-01-01 00:00:00 UTC to no end")])
def test_a_period_apart_from_now_never_rewrites_the_fact_that_holds_now(fake_kb, current, other, stored):
    """It used to take the current row's place (updated=1, no word said): the fact that held now was lost."""
    fake_kb.add_knowledge_graph(NODES, [edge(description="current job", **current)])
    before = rows(fake_kb)
    with pytest.raises(InvalidInputError, match=f"overlaps its stored period {stored}"):
        fake_kb.add_knowledge_graph([], [edge(valid_from=other[0], valid_until=other[1], description="x")])
    assert rows(fake_kb) == before


def test_a_past_period_apart_from_the_current_one_is_added_beside_it(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2024-01-01", description="current job")])
    fake_kb.add_knowledge_graph([], [edge(valid_from="2015-01-01", valid_until="2018-01-01", description="first")])
    assert rows(fake_kb) == [(d("2015-01-01"), d("2018-01-01"), "first"), (d("2024-01-01"), None, "current job")]


def test_ending_the_current_fact_by_valid_until_alone_still_updates_it(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2024-01-01", description="current job")])
    fake_kb.add_knowledge_graph([], [edge(valid_until="2025-01-01")])
    assert rows(fake_kb) == [(d("2024-01-01"), d("2025-01-01"), "current job")]


@pytest.mark.parametrize("order", [0, 1])
def test_in_one_call_the_order_of_the_current_fact_and_a_past_period_does_not_matter(fake_kb, order):
    edges = [edge(description="current"), edge(valid_from="2015-01-01", valid_until="2018-01-01",
                                               description="first stint")]
    summary = fake_kb.add_knowledge_graph(NODES, edges if order == 0 else edges[::-1])
    assert summary.edges_created == 2
    stored = rows(fake_kb)
    assert stored[0] == (d("2015-01-01"), d("2018-01-01"), "first stint")
    assert stored[1][1:] == (None, "current") and stored[1][0] is not None  # holds from now


def test_a_merge_joins_overlapping_periods_of_one_relation(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [
        edge(valid_from="2020-01-01", description="from HR"),
        edge("A. Lee", valid_from="2022-01-01", description="from chat"),
        edge("A. Lee", valid_from="2010-01-01", valid_until="2021-01-01", description="old stint")])
    merged = fake_kb.curation.merge_entities(["A. Lee"], "Ann", NS)
    assert merged.edges_collapsed == 2
    # The oldest row stays, over the union of the periods.
    assert rows(fake_kb) == [(d("2010-01-01"), None, "from HR")]


def test_delete_relations_deletes_a_past_period_named_by_its_start(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2015-01-01", valid_until="2018-01-01", description="x"),
                                        edge(valid_from="2024-01-01", description="current")])
    result = fake_kb.curation.delete_relations(
        [RelationToDelete(source="Ann", target="Acme", type="WORKS_AT", valid_from="2015-01-01")], NS)
    assert [r.label() for r in result.deleted] == ["Ann -WORKS_AT-> Acme"] and not result.not_found
    assert rows(fake_kb) == [(d("2024-01-01"), None, "current")]


def test_delete_relations_says_how_to_name_an_ended_period(fake_kb):
    fake_kb.add_knowledge_graph(NODES, [edge(valid_from="2015-01-01", valid_until="2018-01-01")])
    result = fake_kb.curation.delete_relations([RelationToDelete(source="Ann", target="Acme", type="WORKS_AT")], NS)
    assert len(result.not_found) == 1 and not result.deleted
    assert "2015-01-01 to 2018-01-01" in result.hints[0] and "valid_from" in result.hints[0]
    result = fake_kb.curation.delete_relations(
        [RelationToDelete(source="Ann", target="Acme", type="WORKS_AT", valid_from="2016-01-01")], NS)
    assert len(result.not_found) == 1 and "starts then" in result.hints[0]
    assert len(rows(fake_kb)) == 1
