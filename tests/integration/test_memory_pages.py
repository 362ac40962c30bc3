"""read_graph, search_nodes and open_nodes answer within a token bound (core/domain/memory_pages.py), on a real
DuckDB file with the hashing embedder: a type or a common word that matches a thousand entities, a thousand names,
a hub of 5,050 relations. Each answer's text stays within TEXT_TOKENS; reading on by `next_offset` returns every
entity once, each page with every relation that touches its entities."""

from __future__ import annotations

import pytest

from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.memory_pages import TEXT_TOKENS
from duckgraph.core.domain.model import MemoryEntityInput, RelationInput
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.core.mcp.tools.memory import graph_result

PEOPLE = 1_100


def relation(source: str, target: str, kind: str = "knows") -> RelationInput:
    return RelationInput.model_validate({"from": source, "to": target, "relationType": kind})


@pytest.fixture
def people(fake_kb):
    memory.create_entities(fake_kb, [MemoryEntityInput(
        name=f"Person {i}", entityType="person",
        observations=[f"Person {i} works on project {i % 37} and likes hiking, jazz and long walks; " * 4,
                      f"met at conference {i % 11}"]) for i in range(PEOPLE)])
    memory.create_relations(fake_kb, [relation(f"Person {i}", f"Person {(i + 1) % PEOPLE}") for i in range(PEOPLE)])
    return fake_kb


def tokens(graph) -> int:
    return sum(estimate_tokens(c.text) for c in graph_result(graph).content)


def pages(read, first_offset: int = 0) -> list:
    found, offset = [], first_offset
    while offset is not None:
        page = read(offset)
        found.append(page)
        offset = page.next_offset
    return found


def touching(graph) -> set[tuple[str, str]]:
    return {(r.from_, r.to) for r in graph.relations}


@pytest.mark.parametrize("read", [
    lambda kb, offset: memory.search_nodes(kb, "person", offset=offset),
    lambda kb, offset: memory.open_nodes(kb, [f"Person {i}" for i in range(1_000)], offset=offset),
])
def test_a_thousand_entities_come_a_bounded_page_at_a_time_each_once_with_their_relations(people, read):
    read_all = pages(lambda offset: read(people, offset))
    assert len(read_all) > 3
    names = [e.name for p in read_all for e in p.entities]
    assert set(names) >= {f"Person {i}" for i in range(1_000)} and len(names) == len(set(names))
    for page in read_all:
        assert tokens(page) <= TEXT_TOKENS
        shown = {e.name for e in page.entities}
        # Every relation with an end among the page's entities, and only those.
        expected = {(f"Person {i}", f"Person {(i + 1) % PEOPLE}") for i in range(PEOPLE)
                    if {f"Person {i}", f"Person {(i + 1) % PEOPLE}"} & shown}
        assert touching(page) == expected
        assert all(len(e.observations) == 2 for e in page.entities)
        assert page.relations_truncated is None and page.observations_truncated is None
    first = read_all[0]
    assert first.note.startswith(f"This answer holds entities 1 to {first.next_offset} of the ")
    assert f"offset={first.next_offset}" in first.note and read_all[-1].next_offset is None


def test_search_nodes_says_when_more_entities_match_than_it_reads(people):
    found = memory.search_nodes(people, "hiking")
    assert found.entities_truncated is True
    assert found.note.endswith("More than 1,000 entities contain the query, and only the first 1,000 of them are "
                               "read: narrow the query to find the others.")
    past = memory.search_nodes(people, "hiking", offset=5_000)
    assert past.entities == [] and past.note.startswith("offset=5000 is past the ")


def test_read_graph_s_page_is_bounded_and_the_pages_hold_every_relation_once(people):
    first = memory.read_graph(people, limit=1_000)
    assert 10 < len(first.entities) < 1_000 and first.next_offset == len(first.entities)
    assert tokens(first) <= TEXT_TOKENS
    assert first.note == (f"This page holds {len(first.entities)} entities, fewer than asked for: an answer takes at "
                          f"most 20,000 tokens. To read on, call read_graph with offset={first.next_offset}.")
    read_all = pages(lambda offset: memory.read_graph(people, offset=offset, limit=1_000))
    assert [e.name for p in read_all for e in p.entities] == [f"Person {i}" for i in range(PEOPLE)]
    assert sum(len(p.relations) for p in read_all) == PEOPLE
    # A page cut by `limit`, not by the bound, needs no note: next_offset says it all.
    assert memory.read_graph(people, limit=10).note is None


def test_a_hub_comes_alone_with_the_relations_that_fit_and_the_note_says_so(fake_kb):
    memory.create_entities(fake_kb, [MemoryEntityInput(name="Hub", entityType="team", observations=[])])
    memory.create_relations(fake_kb, [relation("Hub", f"N{i}", "links") for i in range(5_050)])
    for graph in (memory.open_nodes(fake_kb, ["Hub"]), memory.read_graph(fake_kb, limit=10)):
        assert [e.name for e in graph.entities] == ["Hub"]
        assert 100 < len(graph.relations) < 5_000 and graph.relations_truncated is True
        assert [r.to for r in graph.relations] == [f"N{i}" for i in range(len(graph.relations))]
        assert tokens(graph) <= TEXT_TOKENS
        assert f"so it is shown with all its observations and {len(graph.relations):,} of its" in graph.note
    assert memory.read_graph(fake_kb, limit=10).next_offset == 1
    # An end's own page has the relation.
    assert touching(memory.open_nodes(fake_kb, ["N5049"])) == {("Hub", "N5049")}
