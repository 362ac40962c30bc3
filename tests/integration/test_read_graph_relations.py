"""read_graph's pages hold exactly the relations that start at their entities: a hub's incoming relations (which
belong to their sources' pages) never crowd them out, and a page whose entities start more relations than one page
holds ends early instead of leaving relations out. On a real DuckDB file with the hashing embedder; the relation cap
is made small so that a few dozen relations reach it."""

import pytest

from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.model import EndRelationInput, MemoryEntityInput, RelationInput

CAP = 10


def entity(name: str) -> MemoryEntityInput:
    return MemoryEntityInput(name=name, entityType="thing", observations=[])


def relation(source: str, target: str, kind: str = "links") -> RelationInput:
    return RelationInput.model_validate({"from": source, "to": target, "relationType": kind})


@pytest.fixture
def capped(monkeypatch):
    monkeypatch.setattr(memory, "MAX_RELATIONS", CAP)


def all_pages(kb, limit: int) -> list:
    pages, offset = [], 0
    while offset is not None:
        page = memory.read_graph(kb, offset=offset, limit=limit)
        pages.append(page)
        offset = page.next_offset
    return pages


def triples(relations) -> set[tuple[str, str, str]]:
    return {(r.from_, r.to, r.relationType) for r in relations}


def test_a_hub_s_incoming_relations_do_not_crowd_out_the_page_s_own(fake_kb, capped):
    # Hubs first (page 0), then page 0's other entities with relations of their own, then many later entities
    # whose relations all go into the hubs (created first, so the lowest ids: the first an either-way read takes).
    memory.create_entities(fake_kb, [entity(n) for n in ["Hub1", "Hub2", "A1", "A2", "A3"]])
    memory.create_entities(fake_kb, [entity(f"F{i}") for i in range(30)])
    memory.create_relations(fake_kb, [relation(f"F{i}", f"Hub{1 + i % 2}") for i in range(30)])
    own = [relation("A1", "Hub1", "knows"), relation("A2", "Hub2", "knows"), relation("A3", "A1", "knows"),
           relation("Hub1", "Hub2", "knows")]
    memory.create_relations(fake_kb, own)

    page = memory.read_graph(fake_kb, limit=5)
    assert [e.name for e in page.entities] == ["Hub1", "Hub2", "A1", "A2", "A3"]
    assert triples(page.relations) == triples(own)
    assert page.relations_truncated is None and page.next_offset == 5

    pages = all_pages(fake_kb, limit=5)
    every = [r for p in pages for r in p.relations]
    assert len(every) == 34 and len(triples(every)) == 34  # each relation once, none lost
    assert not any(p.relations_truncated for p in pages)


def test_a_page_whose_relations_exceed_the_cap_ends_early_and_the_next_page_has_the_rest(fake_kb, capped):
    names = [f"E{i}" for i in range(6)]
    memory.create_entities(fake_kb, [entity(n) for n in [*names, "T"]])
    # E0..E5 start 4 relations each (24 in all, over the cap of 10).
    written = [relation(n, target, kind) for n in names for target in ("T", *[m for m in names if m != n][:1])
               for kind in ("a", "b")]
    memory.create_relations(fake_kb, written)

    first = memory.read_graph(fake_kb, limit=7)
    assert [e.name for e in first.entities] == ["E0", "E1"]  # a third entity's 4 would make 12
    assert len(first.relations) == 8 and {r.from_ for r in first.relations} == {"E0", "E1"}
    assert first.next_offset == 2 and first.relations_truncated is None

    pages = all_pages(fake_kb, limit=7)
    assert [e.name for p in pages for e in p.entities] == [*names, "T"]
    every = [r for p in pages for r in p.relations]
    assert len(every) == len(written) and triples(every) == triples(written)
    assert all(len(p.relations) <= CAP for p in pages) and not any(p.relations_truncated for p in pages)


def test_an_entity_that_alone_starts_more_than_a_page_holds_comes_alone_and_says_so(fake_kb, capped):
    memory.create_entities(fake_kb, [entity(n) for n in ["Big", "Next"]])
    memory.create_relations(fake_kb, [relation("Big", f"T{i}") for i in range(CAP + 3)])
    memory.create_relations(fake_kb, [relation("Next", "Big")])

    page = memory.read_graph(fake_kb, limit=100)
    assert [e.name for e in page.entities] == ["Big"]
    assert [r.to for r in page.relations] == [f"T{i}" for i in range(CAP)]  # the first ones, creation order
    assert page.relations_truncated is True and page.next_offset == 1
    rest = memory.read_graph(fake_kb, offset=1, limit=100)
    assert rest.entities[0].name == "Next" and triples(rest.relations) == {("Next", "Big", "links")}
    assert rest.relations_truncated is None and rest.next_offset is None


def test_an_ended_relation_is_not_on_its_source_s_page(fake_kb):
    memory.create_entities(fake_kb, [entity("A"), entity("B")])
    memory.create_relations(fake_kb, [relation("A", "B", "knows"), relation("A", "B", "likes")])
    ended = fake_kb.end_relations([EndRelationInput(source="A", target="B", type="knows")])
    assert len(ended.ended) == 1
    assert triples(memory.read_graph(fake_kb).relations) == {("A", "B", "likes")}
