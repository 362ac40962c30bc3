"""The reference memory server's use cases on a real DuckDB file (with the instant hashing embedder)."""

import pytest

from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.model import (
    EdgeInput,
    MemoryEntityInput,
    NodeInput,
    ObservationAddition,
    ObservationDeletion,
    RelationInput,
)
from duckgraph.ports import InvalidInputError, NotFoundError


def entity(name: str, *observations: str, type: str = "person") -> MemoryEntityInput:
    return MemoryEntityInput(name=name, entityType=type, observations=list(observations))


def relation(source: str, target: str, kind: str) -> RelationInput:
    return RelationInput.model_validate({"from": source, "to": target, "relationType": kind})


@pytest.fixture
def kb(fake_kb):
    memory.create_entities(fake_kb, [entity("Alice", "likes tea"), entity("Bob"), entity("Acme", type="company")])
    return fake_kb


def test_create_skips_existing_names_and_repeats_and_stores_observations_once(kb):
    created = memory.create_entities(kb, [entity("alice"), entity("Carol", "a", "a", "b"), entity("CAROL")])
    assert [(e.name, e.observations) for e in created] == [("Carol", ["a", "b"])]
    assert memory.open_nodes(kb, ["carol"]).entities[0].observations == ["a", "b"]


def test_relations_keep_their_spelling_and_are_not_duplicated_by_another_one(kb):
    assert len(memory.create_relations(kb, [relation("Alice", "Acme", "works at")])) == 1
    assert memory.create_relations(kb, [relation("alice", "ACME", "WORKS_AT"), relation("Alice", "Acme", "works-at")]) == []
    [stored] = memory.read_graph(kb).relations
    assert (stored.from_, stored.to, stored.relationType) == ("Alice", "Acme", "works at")


def test_relations_to_unknown_entities_or_to_themselves_are_refused_whole(kb):
    with pytest.raises(NotFoundError, match="'Nobody'"):
        memory.create_relations(kb, [relation("Alice", "Bob", "knows"), relation("Alice", "Nobody", "knows")])
    with pytest.raises(InvalidInputError, match="same entity"):
        memory.create_relations(kb, [relation("Alice", "alice", "is")])
    assert memory.read_graph(kb).relations == []


def test_graphrag_edges_show_their_stored_type(kb):
    kb.add_knowledge_graph([NodeInput(name="Dan", type="Person")], [EdgeInput(source="Dan", target="Acme", type="founded")])
    [founded] = memory.open_nodes(kb, ["Dan"]).relations
    assert founded.relationType == "FOUNDED"


def test_observations_accumulate_within_a_call_and_an_unknown_entity_fails_it(kb):
    results = memory.add_observations(kb, [
        ObservationAddition(entityName="Alice", contents=["likes tea", "x"]),
        ObservationAddition(entityName="alice", contents=["x", "y"]),
    ])
    assert [(r.entityName, r.addedObservations) for r in results] == [("Alice", ["x"]), ("alice", ["y"])]
    with pytest.raises(NotFoundError, match="Entity with name Nobody not found"):
        memory.add_observations(kb, [ObservationAddition(entityName="Bob", contents=["z"]),
                                     ObservationAddition(entityName="Nobody", contents=["z"])])
    assert memory.open_nodes(kb, ["Bob"]).entities[0].observations == []  # nothing of the failed call
    # Two additions that fit alone but not together exceed the per-entity limit: the call fails whole.
    half = MAX_OBSERVATIONS // 2 + 10
    with pytest.raises(InvalidInputError, match="limit"):
        memory.add_observations(kb, [ObservationAddition(entityName="Bob", contents=[str(i) for i in range(half)]),
                                     ObservationAddition(entityName="Bob", contents=[f"{i}!" for i in range(half)])])
    assert memory.open_nodes(kb, ["Bob"]).entities[0].observations == []


def test_deleting_observations_ignores_unknown_entities(kb):
    result = memory.delete_observations(kb, [ObservationDeletion(entityName="Alice", observations=["likes tea", "no"]),
                                             ObservationDeletion(entityName="Nobody", observations=["x"])])
    assert result.success and result.not_found == ["Nobody"]
    assert [(r.entity, r.removed) for r in result.removed] == [("Alice", ["likes tea"])]
    assert memory.open_nodes(kb, ["Alice"]).entities[0].observations == []


def test_pages_list_every_relation_once_and_open_nodes_takes_relations_with_one_end_named(kb):
    memory.create_relations(kb, [relation("Bob", "Alice", "knows"), relation("Alice", "Acme", "works_at"),
                                 relation("Acme", "Bob", "employs")])
    pages, offset = [], 0
    while offset is not None:
        page = memory.read_graph(kb, offset=offset, limit=1)
        pages.append(page)
        offset = page.next_offset
    assert [e.name for p in pages for e in p.entities] == ["Alice", "Bob", "Acme"]
    assert sorted(r.relationType for p in pages for r in p.relations) == ["employs", "knows", "works_at"]
    assert [r.from_ for r in pages[0].relations] == ["Alice"]  # a relation is on the page of its `from`

    opened = memory.open_nodes(kb, ["Alice", "nobody"])
    assert [e.name for e in opened.entities] == ["Alice"]
    assert {(r.from_, r.to) for r in opened.relations} == {("Bob", "Alice"), ("Alice", "Acme")}
    with pytest.raises(InvalidInputError):
        memory.read_graph(kb, limit=0)


def test_a_blank_search_reads_the_first_page(kb):
    assert [e.name for e in memory.search_nodes(kb, "  ").entities] == ["Alice", "Bob", "Acme"]
