"""A query made of a word of a stored entity's name finds that entity whatever its case and accents ("Nowak",
"nowak", "strasse" of Straße, "Soren" of Søren), while a common word inside a name ("blue" of Blue Harbor Bakery)
does not by itself defeat the relevance floor. With the real default model on a real file: the vector of one
word is far from an entity of a longer name, so below the floor only the query's names can say it is relevant."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.domain.query_words import _proper_words, name_words
from duckgraph.core.domain.relevance import _names_stored, _words_stored
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def people(tmp_path_factory, minilm):
    """One memory of people, a team and places for the read-only tests below (stored once: searches change nothing)."""
    kb = KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("names") / "kb.duckdb"), minilm)
    with kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Łukasz Nowak", type="Person", observations=["Lives in Köln.", "Works as a baker."]),
             NodeInput(name="Priya Raman", type="Person", observations=["Priya is a data engineer."]),
             NodeInput(name="Straße", type="Concept", observations=["German word for street."]),
             NodeInput(name="Søren Kierkegaard", type="Person"),
             NodeInput(name="Payments Team", type="Team", observations=["Owns the checkout flow."]),
             NodeInput(name="Checkout Service", type="Service"),
             NodeInput(name="Blue Harbor Bakery", type="Organization", observations=["Sells sourdough bread."]),
             NodeInput(name="Green River Point", type="Place")],
            [EdgeInput(source="Łukasz Nowak", target="Blue Harbor Bakery", type="WORKS_AT"),
             EdgeInput(source="Priya Raman", target="Łukasz Nowak", type="VISITS"),
             EdgeInput(source="Payments Team", target="Checkout Service", type="OWNS")])
        yield kb


@pytest.mark.parametrize("query, entity", [
    ("Nowak", "Łukasz Nowak"), ("nowak", "Łukasz Nowak"), ("NOWAK", "Łukasz Nowak"),
    ("who is nowak", "Łukasz Nowak"), ("where does nowak live", "Łukasz Nowak"),
    ("Strasse", "Straße"), ("strasse", "Straße"), ("Straße", "Straße"),
    ("Soren", "Søren Kierkegaard"), ("soren", "Søren Kierkegaard"),
])
def test_a_word_of_a_stored_name_finds_its_entity_in_any_case(people: KnowledgeBase, query: str, entity: str
                                                                ) -> None:
    result = people.search(query)
    assert not result.nothing_relevant, query
    assert [a.name for a in result.anchors][:1] == [entity], query


@pytest.mark.parametrize("query", [
    # common words that title case capitalised in a stored name
    "blue", "Blue", "harbor", "green", "point",
    # never stored
    "kubernetes", "Kubernetes", "weather",
    # a sentence that shares a common word with a stored name
    "What is the best blue paint for a kitchen?", "how does the team handle weather",
    # a stored name asked for something never stored
    "what is nowak's phone number",
])
def test_a_common_word_inside_a_name_does_not_defeat_the_floor(people: KnowledgeBase, query: str) -> None:
    assert people.search(query).nothing_relevant, query


def test_which_words_count_as_names(people: KnowledgeBase) -> None:
    store, namespace = people.store, people.namespace
    # Without the store only case marks a name; with it, a word of a stored name that is no common English word.
    assert name_words("nowak") == set()
    assert name_words("nowak", store, namespace) == {"nowak"}
    assert name_words("Lukasz and the blue team", store, namespace) == {"lukasz"}
    assert _names_stored(store, "nowak", namespace) == -1
    assert _names_stored(store, "blue", namespace) == 0
    # A query that asks nothing besides a stored name asks for whatever is stored of it.
    assert _words_stored(store, "who is nowak", namespace) is None
    assert _words_stored(store, "nowak bakery", namespace) == 0
    # The words a stored name writes like a proper name, as the keyword channel reads them.
    assert _proper_words("Łukasz Nowak") == {"lukasz", "nowak"}
    assert _proper_words("checkout-service") == frozenset()
    assert _proper_words("Checkout-Service") == {"checkout", "service", "checkout-service"}


def test_a_first_name_many_entities_share_finds_them(real_kb: KnowledgeBase) -> None:
    # 64 people of 8 first names and 8 surnames (with a number each): "Lukasz" is a word of eight names, and its
    # vector is below the floor from all of them (each holds a surname, a number and an observation too).
    first = ["Łukasz", "Jürgen", "Zoë", "Małgorzata", "Søren", "Priya", "Olga", "Marta"]
    last = ["Żółkiewski", "Straßmann", "Müller", "Brzęczyszczykiewicz", "Kierkegaard", "Raman", "Ivanova",
            "Nowak"]
    names = [f"{first[i % 8]} {last[i // 8]} {i}" for i in range(64)]
    real_kb.add_knowledge_graph([NodeInput(name=name, type="Person", observations=[f"{name} works on project {i}."])
                                 for i, name in enumerate(names)], [])
    for query, word in (("Lukasz", "Łukasz"), ("lukasz", "Łukasz"), ("Soren", "Søren")):
        result = real_kb.search(query)
        assert not result.nothing_relevant, query
        assert result.anchors and all(a.name.startswith(word) for a in result.anchors), query
    assert real_kb.search("kubernetes").nothing_relevant
