"""The relevance floor and what a query's words say, with the real default model on a real file: words that say
when ("in March 2026", "2026-03", "on Monday") do not push a question under the floor; an id the query names that
nothing stored holds as a whole ("INC-199") is reported, not silently answered with its neighbours; a question that
asks for nothing but the entities of a stored type ("How many incidents have we had?") is about them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, NodeInput
from duckgraph.core.domain.relevance import _names_stored, _words_stored
from duckgraph.core.domain.retrieval import anchor_and_expand

pytestmark = pytest.mark.model


def store_rotation(kb: KnowledgeBase) -> None:
    kb.add_knowledge_graph([NodeInput(name="Payments Team", type="Team"), NodeInput(name="Marcus Lee", type="Person"),
                            NodeInput(name="Priya Raman", type="Person")],
                           [EdgeInput(source="Marcus Lee", target="Payments Team", type="ON_CALL_FOR",
                                      valid_from="2026-03-01")])
    kb.end_relations([EndRelationInput(source="Marcus Lee", target="Payments Team", type="ON_CALL_FOR",
                                       ended_at="2026-04-01")])
    kb.add_knowledge_graph([], [EdgeInput(source="Priya Raman", target="Payments Team", type="ON_CALL_FOR",
                                          valid_from="2026-04-01")])


def store_incidents(kb: KnowledgeBase) -> None:
    kb.add_knowledge_graph(
        [NodeInput(name="Payments Team", type="Team"), NodeInput(name="Platform Team", type="Team"),
         NodeInput(name="checkout-service", type="Service", observations=["Current version is v1.8"]),
         NodeInput(name="payments-api", type="Service", observations=["p99 latency SLO is 300 ms"]),
         NodeInput(name="orders-db", type="Database"),
         NodeInput(name="INC-142", type="Incident", description="Checkout outage on 2026-03-12: orders failed for "
                   "47 minutes.", observations=["Root cause: orders-db connection pool exhausted"]),
         NodeInput(name="INC-157", type="Incident",
                   description="payments-api p99 latency rose to 1.8 s after the v2.3 deploy."),
         NodeInput(name="INC-163", type="Incident", description="orders-db replica lag during the nightly batch."),
         NodeInput(name="Acme Corp", type="Company"), NodeInput(name="Globex", type="Company")],
        [EdgeInput(source="Payments Team", type="OWNS", target="checkout-service"),
         EdgeInput(source="Payments Team", type="OWNS", target="payments-api"),
         EdgeInput(source="Platform Team", type="OWNS", target="orders-db"),
         EdgeInput(source="checkout-service", type="WRITES_TO", target="orders-db"),
         EdgeInput(source="INC-142", type="AFFECTED", target="checkout-service"),
         EdgeInput(source="INC-157", type="AFFECTED", target="payments-api"),
         EdgeInput(source="Acme Corp", type="SUPPLIES", target="Globex",
                   description="under purchase order PO-88123 for turbine blades")])


@pytest.mark.parametrize("question, options", [
    ("Who was on call for payments in March 2026?", {}),
    ("Who was on call for payments in March 2026?", {"as_of": "2026-03-15"}),
    ("Who was on call for payments in 2026-03?", {"include_history": True}),
    ("Who was on call for payments on Monday?", {}),
])
def test_words_that_say_when_do_not_push_a_question_under_the_floor(real_kb: KnowledgeBase, question: str,
                                                                    options: dict) -> None:
    store_rotation(real_kb)
    # Parts off: the whole vectors alone decide here (a fact close enough would let it through on its own).
    result = real_kb.search(question, parts_compared=0, **options)
    assert not result.nothing_relevant, question
    assert "Payments Team" in {a.name for a in result.anchors}
    if "as_of" in options or "include_history" in options:
        assert ("Marcus Lee", "ON_CALL_FOR", "Payments Team") in {(e.source, e.type, e.target) for e in result.edges}


def test_a_date_does_not_let_an_unrelated_question_through(real_kb: KnowledgeBase) -> None:
    store_rotation(real_kb)
    for question in ("What did we eat for dinner in March 2026?", "Which flight did I book for 2026-03-15?"):
        assert real_kb.search(question).nothing_relevant, question


def test_an_unstored_word_that_says_when_is_neither_an_unknown_name_nor_an_unknown_word(real_kb: KnowledgeBase
                                                                                         ) -> None:
    store_rotation(real_kb)
    store, namespace = real_kb.store, real_kb.namespace
    # "March" is written like a name and no stored text holds it: it says when, not what.
    assert _names_stored(store, "Who was on call for Payments in March?", namespace) == -1
    assert _names_stored(store, "Who was on call in 2026-03?", namespace) == 0
    assert _names_stored(store, "Who was on call for Kubernetes in March?", namespace) == 1
    assert _words_stored(store, "what happened in march 2026", namespace) is None
    assert _words_stored(store, "cello lessons in march", namespace) == 1


def subgraph(kb: KnowledgeBase, question: str):
    options = replace(kb.search_defaults, relevance_floor=kb.embedder.relevance_floor)
    return anchor_and_expand(kb.store, question, kb.embedder.embed_query(question), kb.namespace, options,
                             embedder=kb.embedder)


def test_an_id_that_nothing_stored_holds_whole_is_reported_and_the_related_content_still_shown(
        real_kb: KnowledgeBase) -> None:
    store_incidents(real_kb)
    found = subgraph(real_kb, "What happened in INC-199?")
    assert found.not_stored == ["INC-199"]
    assert {found.records[a.node_id].name for a in found.anchors} >= {"INC-142"}  # related content, not hidden
    assert subgraph(real_kb, "PO-99999").not_stored == ["PO-99999"]
    assert subgraph(real_kb, "Is checkout-service on v2.7 or orders-db-3?").not_stored == ["v2.7", "orders-db-3"]
    # Held whole: as an entity's name, in a description, in a fact's description; a date is no id.
    for question in ("What happened in INC-142?", "What broke after the v2.3 deploy?", "PO-88123",
                     "Who owns orders-db?", "What failed on 2026-03-12?"):
        assert subgraph(real_kb, question).not_stored == [], question


def test_a_query_naming_one_id_of_a_series_is_not_anchored_on_its_siblings(real_kb: KnowledgeBase) -> None:
    """"What happened in INC-157?" anchored on INC-142 too, listed first: the two ids' vectors are as near."""
    store_incidents(real_kb)
    for asked in ("INC-142", "INC-157", "INC-163"):
        found = subgraph(real_kb, f"What happened in {asked}?")
        anchors = [found.records[a.node_id].name for a in found.anchors]
        assert asked in anchors and not {"INC-142", "INC-157", "INC-163"} - {asked} & set(anchors), anchors
    both = subgraph(real_kb, "Compare INC-142 and INC-157")
    assert {"INC-142", "INC-157"} <= {both.records[a.node_id].name for a in both.anchors}


@pytest.mark.parametrize("question", ["How many incidents have we had?", "List all incidents", "list the Incidents",
                                      "Tell me about the incidents"])
def test_a_question_about_the_entities_of_a_stored_type_passes_the_floor(real_kb: KnowledgeBase,
                                                                         question: str) -> None:
    store_incidents(real_kb)
    result = real_kb.search(question)
    assert not result.nothing_relevant, question
    assert {a.name for a in result.anchors} == {"INC-142", "INC-157", "INC-163"}, question


def test_a_type_named_with_other_words_is_held_to_the_floor(real_kb: KnowledgeBase) -> None:
    store_incidents(real_kb)
    assert not real_kb.search("List the teams").nothing_relevant
    assert real_kb.search("Which incident made the coffee machine leak?").nothing_relevant
