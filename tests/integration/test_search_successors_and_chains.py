"""Facts a search shows though their own words share nothing with the question, with the real default model on a
real file: that an entity shown was replaced (and what holds in its place), and a chain of one relation type from
an entity the question names."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.domain.relation_types import replaced_end

pytestmark = pytest.mark.model

CACHING = "What caching layer did we choose?"


def triples(result) -> list[tuple[str, str, str]]:
    return [(e.source, e.type, e.target) for e in result.edges]


def store_decisions(kb: KnowledgeBase, successor_choice: str, superseding: EdgeInput) -> None:
    """ADR-3 chose Memcached; ADR-7, which supersedes it, chose `successor_choice`. No status anywhere: only the
    superseding relation says that ADR-3 no longer holds."""
    kb.add_knowledge_graph(
        [NodeInput(name="ADR-3", type="Decision", description="Use Memcached as the caching layer."),
         NodeInput(name="Memcached", type="Technology"), NodeInput(name=successor_choice, type="Technology"),
         NodeInput(name="ADR-7", type="Decision", description=f"Replace Memcached with {successor_choice}.")],
        [EdgeInput(source="ADR-3", target="Memcached", type="CHOSE"), superseding,
         EdgeInput(source="ADR-7", target=successor_choice, type="CHOSE")])


@pytest.mark.parametrize("superseding", [
    EdgeInput(source="ADR-7", target="ADR-3", type="SUPERSEDES"),
    EdgeInput(source="ADR-3", target="ADR-7", type="superseded by"),
    EdgeInput(source="ADR-3", target="ADR-7", type="REPLACED_WITH"),
], ids=lambda edge: edge.type)
def test_a_replaced_entity_is_shown_with_the_fact_that_says_so_and_its_successors_choice(
        real_kb: KnowledgeBase, superseding: EdgeInput) -> None:
    store_decisions(real_kb, "Redis", superseding)
    result = real_kb.search(CACHING)
    shown = triples(result)
    replacing = (superseding.source, superseding.type.upper().replace(" ", "_"), superseding.target)
    # The fact that ADR-3 was superseded comes before ADR-3's choice, which would read as current without it.
    assert shown.index(replacing) < shown.index(("ADR-3", "CHOSE", "Memcached"))
    assert ("ADR-7", "CHOSE", "Redis") in shown
    assert {"ADR-7", "Redis"} <= {n.name for n in result.nodes}
    text = result.text.splitlines()
    assert text.index(f"- {superseding.source} {superseding.type.lower().replace('_', ' ')} {superseding.target}") \
        < text.index("- ADR-3 chose Memcached")


def test_the_successors_fact_of_a_type_shown_for_the_replaced_entity_scores_as_it(real_kb: KnowledgeBase) -> None:
    # "ADR-7 chose KeyDB" is far from the question (a name the model barely knows): alone, it scores below what a
    # fact needs to be shown; it holds in the place of "ADR-3 chose Memcached", which is shown.
    store_decisions(real_kb, "KeyDB", EdgeInput(source="ADR-7", target="ADR-3", type="SUPERSEDES"))
    scores = {(e.source, e.type, e.target): e.score for e in real_kb.search(CACHING).edges}
    assert scores[("ADR-7", "CHOSE", "KeyDB")] == scores[("ADR-3", "CHOSE", "Memcached")]


def test_a_chain_of_one_relation_type_from_the_named_entity_is_followed(real_kb: KnowledgeBase) -> None:
    real_kb.add_knowledge_graph(
        [NodeInput(name="auth-service", type="Service", description="Issues and validates JWTs."),
         NodeInput(name="billing-service", type="Service"), NodeInput(name="api-gateway", type="Service"),
         NodeInput(name="Redis", type="Technology",
                   description="In-memory data store; if Redis is lost, every user is logged out."),
           NodeInput(name="Sofia Alvarez", type="Person", description="Security lead.")],
        [EdgeInput(source="auth-service", target="Redis", type="DEPENDS_ON", description="sessions"),
         EdgeInput(source="api-gateway", target="Redis", type="DEPENDS_ON", description="rate-limit counters"),
         EdgeInput(source="billing-service", target="auth-service", type="DEPENDS_ON"),
         EdgeInput(source="Sofia Alvarez", target="auth-service", type="MAINTAINS")])
    result = real_kb.search("What breaks if Redis goes down?")
    nodes = {n.name for n in result.nodes}
    # billing-service depends on Redis through auth-service: "billing-service depends on auth-service" shares no
    # word with the question, and reads as close to it as an unrelated fact.
    assert {"auth-service", "api-gateway", "billing-service"} <= nodes
    assert ("billing-service", "DEPENDS_ON", "auth-service") in triples(result)
    assert "- billing-service depends on auth-service" in result.text.splitlines()
    # A fact of another type from the chain's end lends nothing: who maintains auth-service is not asked.
    assert "Sofia Alvarez" not in nodes


def store_dependencies(kb: KnowledgeBase) -> None:
    """checkout-service DEPENDS_ON billing-service DEPENDS_ON auth-service DEPENDS_ON Redis, and a fact of
    another type at the end of the chain."""
    kb.add_knowledge_graph(
        [NodeInput(name=name, type="Service") for name in ("auth-service", "billing-service", "checkout-service")]
        + [NodeInput(name="Redis", type="Technology"), NodeInput(name="Sofia Alvarez", type="Person")],
        [EdgeInput(source="auth-service", target="Redis", type="DEPENDS_ON"),
         EdgeInput(source="billing-service", target="auth-service", type="DEPENDS_ON"),
         EdgeInput(source="checkout-service", target="billing-service", type="DEPENDS_ON"),
         EdgeInput(source="Sofia Alvarez", target="checkout-service", type="MAINTAINS")])


def test_a_chain_that_goes_on_past_the_last_hop_is_said(real_kb: KnowledgeBase) -> None:
    store_dependencies(real_kb)
    result = real_kb.search("What would break if we drop Redis?")
    assert "checkout-service" not in {n.name for n in result.nodes}  # two hops: auth-service, billing-service
    # The list of what depends on Redis is not whole: billing-service has a DEPENDS_ON fact one hop further.
    assert [chain.model_dump() for chain in result.chains_go_on] == [{
        "type": "DEPENDS_ON", "start": "Redis", "past": 2, "ends": ["billing-service"], "more": 1, "hops": 3}]
    assert ("(not shown, hops reached: the DEPENDS_ON chain from Redis goes on past 2 hops, from billing-service "
            "to 1 more entity; hops=3 shows more)") in result.text.splitlines()
    # hops=3 shows it, and the chain's end then has no fact of its type further on (a MAINTAINS fact is no chain).
    longer = real_kb.search("What would break if we drop Redis?", hops=3)
    assert "checkout-service" in {n.name for n in longer.nodes}
    assert longer.chains_go_on == []
    assert "hops reached" not in longer.text


def test_a_chain_past_the_most_hops_names_where_to_search_next(real_kb: KnowledgeBase) -> None:
    store_dependencies(real_kb)
    real_kb.add_knowledge_graph([NodeInput(name="storefront", type="Service")],
                                [EdgeInput(source="storefront", target="checkout-service", type="DEPENDS_ON")])
    result = real_kb.search("What would break if we drop Redis?", hops=3)
    assert [(c.ends, c.more, c.hops) for c in result.chains_go_on] == [(["checkout-service"], 1, None)]
    assert any(line.endswith("a search for checkout-service shows more)") for line in result.text.splitlines())


def test_a_chain_whose_next_entity_is_shown_is_not_said_to_go_on(real_kb: KnowledgeBase) -> None:
    # checkout-service depends on Redis too: it is shown (one hop), so the chain past billing-service adds nothing.
    store_dependencies(real_kb)
    real_kb.add_knowledge_graph([], [EdgeInput(source="checkout-service", target="Redis", type="DEPENDS_ON")])
    result = real_kb.search("What would break if we drop Redis?")
    assert "checkout-service" in {n.name for n in result.nodes}
    assert result.chains_go_on == []


@pytest.mark.parametrize(("relation", "replaced"), [
    ("SUPERSEDES", "target"), ("supersedes", "target"), ("Superseded by", "source"), ("WAS_SUPERSEDED_BY", "source"),
    ("REPLACES", "target"), ("REPLACED", "target"), ("REPLACED_BY", "source"), ("REPLACED_WITH", "source"),
    ("IS_REPLACEMENT_FOR", "target"), ("DEPRECATES", "target"), ("DEPRECATED_BY", "source"),
    ("OBSOLETES", "target"), ("CHOSE", None), ("DEPENDS_ON", None), ("SUCCEEDED_IN", None), ("BY", None),
])
def test_the_types_that_say_one_end_replaced_the_other(relation: str, replaced: str | None) -> None:
    assert replaced_end(relation) == replaced
