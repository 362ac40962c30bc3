"""search_nodes' substring match (`DuckDBStore.nodes_containing`) ignores accents as names do
(`ports.names.unaccented`), on a real DuckDB file, and stays right through every kind of write."""

from __future__ import annotations

import random

import pytest

from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import MemoryEntityInput, ObservationAddition, ObservationDeletion
from duckgraph.plugins.duckdb.mirror import substrings
from duckgraph.plugins.duckdb.store import DuckDBStore
from duckgraph.ports import NodeRecord, WriteBatch, entity_key
from duckgraph.ports.names import unaccented
from tests.fakes import HashingEmbedder


def entity(name: str, *observations: str, type: str = "person") -> MemoryEntityInput:
    return MemoryEntityInput(name=name, entityType=type, observations=list(observations))


def names(kb: KnowledgeBase, query: str, namespace: str = "default", limit: int = 1_000) -> list[str]:
    return [r.name for r in kb.store.get_nodes(kb.store.nodes_containing(namespace, query, limit=limit))]


@pytest.fixture
def people(fake_kb: KnowledgeBase) -> KnowledgeBase:
    memory.create_entities(fake_kb, [
        entity("Łukasz Nowak", "works in Kraków"), entity("José Álvarez", "plays the guitar"),
        entity("Zoë", "sleeps all day", type="cat"), entity("Jose", "a plain spelling"),
        entity("Søren", type="philosophe"), entity("Ada", "drinks crème brûlée", type="Mathématicienne"),
        entity("パス", "a pass"), entity("バス", "a bus"),
    ])
    return fake_kb


def test_a_query_without_accents_finds_the_accented_name_type_and_observation(people):
    assert names(people, "Lukasz") == ["Łukasz Nowak"]
    assert names(people, "lukasz nowak") == ["Łukasz Nowak"]
    assert names(people, "zoe") == ["Zoë"]
    assert names(people, "soren") == ["Søren"]  # a letter with its accent inside: read as "o"
    assert names(people, "alvarez") == ["José Álvarez"]
    assert names(people, "KRAKOW") == ["Łukasz Nowak"]  # an observation
    assert names(people, "creme brulee") == ["Ada"]
    assert names(people, "mathematicienne") == ["Ada"]  # the type


def test_both_sides_are_folded_so_accents_in_the_query_do_not_narrow_it(people):
    # The usual expectation (and what names do): "José" and "Jose" are one spelling, either way round.
    assert names(people, "José") == names(people, "Jose") == ["José Álvarez", "Jose"]
    assert names(people, "Łukasz") == ["Łukasz Nowak"]
    assert names(people, "Zoë") == names(people, "ZOË") == ["Zoë"]
    assert names(people, "Kraków") == ["Łukasz Nowak"]
    # A decomposed query (e and a combining acute) is the same text.
    assert names(people, "Jose\u0301") == ["José Álvarez", "Jose"]


def test_marks_that_make_another_letter_are_kept(people):
    # The kana voicing marks are no accents: "pass" and "bus" stay two words.
    assert names(people, "パス") == ["パス"]
    assert names(people, "バス") == ["バス"]


def test_case_empty_query_limit_and_no_pattern_characters_as_before(people):
    assert names(people, "") == [r.name for r in people.store.list_nodes("default", limit=100)]
    assert names(people, "", limit=2) == ["Łukasz Nowak", "José Álvarez"]
    assert names(people, "%") == [] and names(people, "_") == []
    assert names(people, "PLAYS THE") == ["José Álvarez"]
    assert people.store.nodes_containing("nowhere", "jose") == []
    assert people.store.nodes_containing("default", "jose", limit=0) == []


def test_a_query_spanning_two_texts_of_an_entity_matches_neither(people):
    # Texts are held joined by a NUL: a query holding one must not match across a name and a type.
    assert names(people, "zoë\x00cat") == names(people, "zoe\x00") == names(people, "\x00") == []


def test_every_kind_of_write_is_seen_by_the_next_search(people):
    kb = people
    assert names(kb, "lukasz") == ["Łukasz Nowak"]  # built now: what follows changes it
    memory.create_entities(kb, [entity("Renée", "likes café au lait")])
    assert names(kb, "renee") == ["Renée"] and names(kb, "cafe au") == ["Renée"]
    memory.add_observations(kb, [ObservationAddition(entityName="Jose", contents=["visited Málaga"])])
    assert names(kb, "malaga") == ["Jose"]
    memory.delete_observations(kb, [ObservationDeletion(entityName="Łukasz Nowak", observations=["works in Kraków"])])
    assert names(kb, "krakow") == []
    kb.curation.update_entity("Zoë", "default", new_name="Chloé", type="chat")
    assert names(kb, "zoe") == [] and names(kb, "chloe") == ["Chloé"] and names(kb, "CHAT") == ["Chloé"]
    kb.curation.merge_entities(["Jose"], "José Álvarez", "default")
    assert names(kb, "malaga") == ["José Álvarez"] and names(kb, "plain spelling") == ["José Álvarez"]
    kb.curation.delete_entities(["Renée"], "default")
    assert names(kb, "renee") == [] and names(kb, "cafe") == []


def test_the_other_namespaces_keep_their_own_matches(people):
    kb = people
    assert names(kb, "jose") == ["José Álvarez", "Jose"]
    memory.create_entities(kb, [entity("José Martí", "poet")], namespace="cuba")
    assert names(kb, "jose", "cuba") == ["José Martí"]
    assert names(kb, "jose") == ["José Álvarez", "Jose"]
    # A node moved to another namespace leaves the first one's matches.
    [record] = kb.store.find_nodes("cuba", [entity_key("José Martí")])
    moved = NodeRecord(namespace="default", key=record.key, name=record.name, type=record.type, id=record.id)
    kb.store.write(WriteBatch(nodes=[moved]))
    assert names(kb, "jose", "cuba") == []
    assert names(kb, "jose") == ["José Álvarez", "Jose", "José Martí"]


def test_matches_are_the_same_after_reopening_the_file(people, db_path):
    before = {q: names(people, q) for q in ("jose", "lukasz", "zoe", "krakow", "")}
    people.close()
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as again:
        assert {q: names(again, q) for q in before} == before


def _expected(kb: KnowledgeBase, namespace: str, query: str, limit: int) -> list[int]:
    """The match computed from the file's rows (not the store's memory): each text folded on its own."""
    con = kb.store._db  # the rows as committed, read the way the SQL match once read them
    texts: dict[int, list[str]] = {}
    rows = con.execute("SELECT id, name, type FROM nodes WHERE namespace = $1", [namespace]).fetchall()
    for node_id, name, type_ in rows:
        texts[node_id] = [name, type_]
    for node_id, text in con.execute("SELECT node_id, text FROM observations").fetchall():
        if node_id in texts:
            texts[node_id].append(text)
    needle = unaccented(query)
    return sorted(i for i, parts in texts.items() if any(needle in unaccented(p) for p in parts))[:limit]


def test_random_writes_keep_the_matches_those_of_the_file(fake_kb, monkeypatch):
    # Small blocks, so that the writes cross, empty and fill many of them.
    monkeypatch.setattr(substrings, "BLOCK", 4)
    kb, rng = fake_kb, random.Random(7)
    words = ["José", "Jose", "Łukasz", "lukasz", "Zoë", "zoe", "Søren", "Ærø", "straße", "STRASSE", "İstanbul",
             "パス", "バス", "ana", "Ana"]
    queries = ["jose", "JOSÉ", "luk", "zoe", "soren", "aero", "strasse", "istanbul", "パ", "ana", "a", "", "e\x00"]
    alive: dict[str, str] = {}  # name -> namespace
    for step in range(120):
        action = rng.random()
        namespace = rng.choice(["default", "other"])
        if action < 0.4 or not alive:
            name = f"{rng.choice(words)} {rng.choice(words)} {step}"
            memory.create_entities(kb, [entity(name, *rng.sample(words, 2), type=rng.choice(words))],
                                   namespace=namespace)
            alive[name] = namespace
        else:
            name = rng.choice(sorted(alive))
            namespace = alive[name]
            if action < 0.6:
                memory.add_observations(kb, [ObservationAddition(entityName=name, contents=[rng.choice(words)])],
                                        namespace=namespace)
            elif action < 0.7:
                [record] = kb.store.find_nodes(namespace, [entity_key(name)])
                gone = kb.store.get_observations([record.id]).get(record.id, [])[:1]
                memory.delete_observations(kb, [ObservationDeletion(entityName=name, observations=gone)],
                                           namespace=namespace)
            elif action < 0.85:
                new_name = f"{rng.choice(words)} renamed {step}"
                kb.curation.update_entity(name, namespace, new_name=new_name, type=rng.choice(words))
                alive[new_name] = alive.pop(name)
            else:
                kb.curation.delete_entities([name], namespace)
                del alive[name]
        if step % 10 == 9:
            for namespace in ("default", "other"):
                for query in queries:
                    limit = rng.choice([3, 1_000])
                    assert kb.store.nodes_containing(namespace, query, limit=limit) == \
                        _expected(kb, namespace, query, limit), (step, namespace, query)
