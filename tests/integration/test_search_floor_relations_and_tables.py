"""The relevance floor over a graph-only memory and over tables, with the real default model on a real file: a
question about what a change to a stored entity would bring about ("What would break if we drop Redis?") asks for
its relations, though the words that say what changes are stored nowhere; a table's row is compared under its
header, so "What is Maria Garcia's phone number?" finds her row of a contacts table."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core.domain import memory_server
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import MemoryEntityInput, RelationInput
from duckgraph.core.domain.query_words import asks_consequence
from tests.integration import test_ingest_folder
from tests.integration.test_ingest_folder import command, ingest

notes = test_ingest_folder.notes  # a folder to ingest from, its fixture

pytestmark = pytest.mark.model


def store_services(kb: KnowledgeBase) -> None:
    """A platform as a memory-tool agent writes it: entities and relations, no documents."""
    memory_server.create_entities(kb, [
        MemoryEntityInput(name="Redis", entityType="technology", observations=["In-memory data store"]),
        MemoryEntityInput(name="Grafana", entityType="technology", observations=["Dashboards for the on-call team"]),
        *(MemoryEntityInput(name=name, entityType="service", observations=[])
          for name in ("auth-service", "api-gateway", "orders-service", "billing-service")),
    ])
    memory_server.create_relations(kb, [
        RelationInput(**{"from": source, "to": target, "relationType": relation}) for source, relation, target in (
            ("auth-service", "DEPENDS_ON", "Redis"), ("api-gateway", "DEPENDS_ON", "Redis"),
            ("orders-service", "USES", "Redis"), ("billing-service", "DEPENDS_ON", "auth-service"))])


@pytest.mark.parametrize("question", [
    "What would break if we drop Redis?", "What would break if we removed Redis?", "What happens if Redis goes down?",
    "What is the impact of removing Redis?", "What are the consequences of dropping Redis?",
    "What breaks without Redis?"])
def test_a_question_about_what_a_change_would_bring_about_is_about_its_relations(real_kb: KnowledgeBase,
                                                                                question: str) -> None:
    store_services(real_kb)
    result = real_kb.search(question)
    assert not result.nothing_relevant
    assert [a.name for a in result.anchors][:1] == ["Redis"]
    assert {"auth-service", "api-gateway", "orders-service"} <= {n.name for n in result.nodes}
    assert asks_consequence(question)


@pytest.mark.parametrize("question", [
    # A missing attribute of the entity: no word of consequence.
    "What is Redis's license?", "Which port does Redis listen on?",
    # An entity without relations: nothing stored says what a change to it reaches.
    "What would break if we drop Grafana?",
    # A name the memory does not hold.
    "What would break if we drop Kafka?"])
def test_a_question_the_relations_do_not_answer_keeps_the_floor(real_kb: KnowledgeBase, question: str) -> None:
    store_services(real_kb)
    assert real_kb.search(question).nothing_relevant


FIRST = ["Hugo", "Tara", "Ines", "Rosa", "Omar", "Farid", "Kofi", "Lena", "Dmitri", "Quinn"]
LAST = ["Schulz", "Petrov", "Rossi", "Larsen", "Horvat", "Novak", "Moreau", "Kowalski", "Fischer", "Berg"]
CITIES = ["Lyon", "Oslo", "Graz", "Porto", "Madrid"]


def contacts_csv() -> str:
    """A contacts file of 101 rows, Maria Garcia's the 60th: far past the first passage."""
    rows = [f"{first} {last},{first.lower()}.{last.lower()}@example.com,+1 555 {1000 + 37 * n},{CITIES[n % 5]}"
            for n, (first, last) in enumerate((first, last) for last in LAST for first in FIRST)]
    rows.insert(59, "Maria Garcia,maria.garcia@example.com,+34 612 345 678,Madrid")
    return "\n".join(["name,email,phone,city", *rows]) + "\n"


def test_a_table_row_is_compared_under_its_header(notes: Path, db_path: Path) -> None:
    (notes / "contacts.csv").write_text(contacts_csv(), encoding="utf-8")
    # The same rows as a Markdown table in a note: each of its passages after the first starts with its header too.
    table = "".join(f"| {' | '.join(line.split(','))} |\n" + ("| --- | --- | --- | --- |\n" if i == 0 else "")
                    for i, line in enumerate(contacts_csv().splitlines()))
    (notes / "contacts.md").write_text(f"# Contacts\n\n{table}", encoding="utf-8")
    assert ingest(db_path, "notes/contacts.csv", "notes/contacts.md")[0] == 0

    row = "| Maria Garcia | maria.garcia@example.com | +34 612 345 678 | Madrid |"
    for question in ("What is Maria Garcia's phone number?", "Maria Garcia phone", "What is Maria Garcia's email?"):
        code, answer = command(db_path, "search", question, "--max-passages", "1")
        assert code == 0 and row in answer.split("Passages:\n", 1)[-1], question
    # Her row, read under its header, holds no salary nor blood type; no row is Hugo Garcia's, though one holds
    # "Hugo" and hers "Garcia": the floor holds.
    for question in ("What is Maria Garcia's salary?", "What is Maria Garcia's blood type?",
                     "What is Hugo Garcia's phone number?"):
        assert command(db_path, "search", question)[1].startswith("Nothing relevant"), question
