"""A word that only a fact (a relation's sentence or description) holds finds that fact, with the real default model
on a real file: the keyword channel's facts give anchors (their ends), the fact is shown, and the relevance floor
lets such a query through. A fact stored by one call is found by keyword in the next."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client

from duckgraph.core.domain import memory_server
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, MemoryEntityInput, NodeInput, RelationInput
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services

pytestmark = pytest.mark.model

SUPPLIES = "Acme Corp supplies Globex: under purchase order PO-88123 for turbine blades"


def store_supplier(kb: KnowledgeBase) -> None:
    kb.add_knowledge_graph(
        [NodeInput(name="Acme Corp", type="Company"), NodeInput(name="Globex", type="Company")],
        [EdgeInput(source="Acme Corp", type="SUPPLIES", target="Globex",
                   description="under purchase order PO-88123 for turbine blades")])


def test_an_id_only_a_facts_description_holds_finds_the_fact_and_its_ends(real_kb: KnowledgeBase) -> None:
    store_supplier(real_kb)  # the next call finds it
    for question in ("PO-88123", "purchase order PO-88123", "who supplies turbine blades under PO-88123?",
                     "Who supplies turbine blades?"):
        result = real_kb.search(question)
        assert not result.nothing_relevant, question
        assert {a.name for a in result.anchors} == {"Acme Corp", "Globex"}, question
        assert [(e.source, e.type, e.target) for e in result.edges] == [("Acme Corp", "SUPPLIES", "Globex")], question
        assert SUPPLIES in result.text and "PO-88123" in result.text, question


def test_a_fact_does_not_let_through_a_question_it_does_not_answer(real_kb: KnowledgeBase) -> None:
    store_supplier(real_kb)
    # It shares a word with the fact ("turbine"), and the fact is found by it, but is not close enough to it.
    question = "Which turbine brand is the quietest for a home?"
    assert real_kb.store.keyword_search("edge", question, 1, real_kb.namespace)
    assert real_kb.search(question).nothing_relevant


def test_a_relation_written_with_the_memory_tools_is_found_by_its_type(real_kb: KnowledgeBase) -> None:
    # The reference memory server's relations have no description: the relation's own words are the fact's.
    memory_server.create_entities(real_kb, [
        MemoryEntityInput(name="Ilse Maren", entityType="person", observations=["Lives in Leiden"]),
        MemoryEntityInput(name="Oskar Brandt", entityType="person", observations=["Plays the cello"]),
    ])
    memory_server.create_relations(real_kb, [RelationInput(**{"from": "Ilse Maren", "to": "Oskar Brandt",
                                                                "relationType": "mentors"})])
    result = real_kb.search("Who mentors someone?")
    assert not result.nothing_relevant
    assert [(e.source, e.type, e.target) for e in result.edges] == [("Ilse Maren", "MENTORS", "Oskar Brandt")]


def test_through_the_mcp_client_the_next_call_finds_the_fact_by_its_id(tmp_path: Path, db_path: Path, plugin_manager,
                                                                        minilm) -> None:
    services = make_services(tmp_path, db_path, minilm, plugin_manager)

    async def session() -> None:
        async with Client(build_server(services)) as client:
            stored = await client.call_tool("add_knowledge_graph", {
                "nodes": [{"name": "Acme Corp", "type": "Company"}, {"name": "Globex", "type": "Company"}],
                "edges": [{"source": "Acme Corp", "type": "SUPPLIES", "target": "Globex",
                           "description": "under purchase order PO-88123 for turbine blades"}]})
            assert not stored.is_error, stored.content
            found = await client.call_tool("search", {"query": "who supplies turbine blades under PO-88123?"})
            assert not found.is_error and not found.structured_content["nothing_relevant"]
            assert SUPPLIES in found.content[0].text

    anyio.run(session)
