"""add_knowledge_graph's counts on a real DuckDB file: an entity or relation sent again as it is stored counts as
unchanged, never as updated (a host re-adding the same graph must not believe it changed something)."""

from __future__ import annotations

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput

NODES = [
    NodeInput(name="Vera Rubin", type="Person", description="An astronomer.", aliases=["Vera Cooper Rubin"],
              properties={"born": 1928}, observations=["Measured galaxy rotation curves."]),
    NodeInput(name="Carnegie Institution", type="Organization"),
]
EDGES = [EdgeInput(source="Vera Rubin", target="Carnegie Institution", type="WORKS_AT", weight=2.0,
                   properties={"since": 1965}, description="Rubin worked at the Carnegie Institution.")]


def counts(result) -> tuple[int, ...]:
    return (result.nodes_created, result.nodes_updated, result.nodes_unchanged,
            result.edges_created, result.edges_updated, result.edges_unchanged)


def test_the_same_graph_added_again_counts_as_unchanged(fake_kb: KnowledgeBase):
    assert counts(fake_kb.add_knowledge_graph(NODES, EDGES)) == (2, 0, 0, 1, 0, 0)
    again = fake_kb.add_knowledge_graph(NODES, EDGES)
    assert counts(again) == (0, 0, 2, 0, 0, 1)
    assert again.observations_added == 0
    # The counts agree with recent_changes: the second call is no change at all.
    kinds = [c.kind for c in fake_kb.store.changes(fake_kb.namespace, None, None, 50)]
    assert sorted(kinds) == ["entity created", "entity created", "fact added"], kinds


def test_a_changed_entity_and_relation_count_as_updated(fake_kb: KnowledgeBase):
    fake_kb.add_knowledge_graph(NODES, EDGES)
    result = fake_kb.add_knowledge_graph(
        [NodeInput(name="Vera Rubin", type="Person", properties={"died": 2016}), NODES[1]],
        [EdgeInput(source="Vera Rubin", target="Carnegie Institution", type="WORKS_AT", weight=3.0)],
    )
    assert counts(result) == (0, 1, 1, 0, 1, 0)


def test_one_relation_named_twice_in_a_call_is_counted_once(fake_kb: KnowledgeBase):
    fake_kb.add_knowledge_graph(NODES, [])
    twice = [EdgeInput(source="Vera Rubin", target="Carnegie Institution", type="works at"),
             EdgeInput(source="Vera Rubin", target="Carnegie Institution", type="WORKS_AT")]
    first = fake_kb.add_knowledge_graph([], twice)
    assert (first.edges_created, first.edges_updated, first.edges_unchanged) == (1, 0, 0)
    again = fake_kb.add_knowledge_graph([], twice)
    assert (again.edges_created, again.edges_updated, again.edges_unchanged) == (0, 0, 1)
