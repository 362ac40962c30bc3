"""The relevance floor over emails and meeting notes, with the real default model on a real file: a question that
asks what someone said or asked for ("What did Sarah ask me to do?") is about what the memory holds of that person,
though the verb that reports it is stored nowhere ("Could you please update the deck..."); a section heading that is
the question's subject ("## Action items" for "What are my open action items?") lets it through, though none of the
section's lines holds the question's words."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.core.domain.query_words import asked_type
from duckgraph.core.domain.relevance import _words_stored

pytestmark = pytest.mark.model

BUDGET_MAIL = DocumentInput(
    id="mail:budget", title="Q4 budget deck for Thursday", time="2026-11-24T13:47:00Z",
    text="From: Sarah Kim <sarah.kim@northwind.example>\nSubject: Q4 budget deck for Thursday\n\nHi Alex,\n\n"
         "Could you please update the Q4 budget deck with the new Acme licence costs and send it to me by Wednesday "
         "December 2? The budget review with the CFO is on Thursday December 3, 2026 at 2pm.\n\n"
         "Also please book the large conference room for it.")
PRICING_MAIL = DocumentInput(
    id="mail:pricing", title="Re: Acme pricing proposal", time="2026-10-23T10:30:00Z",
    text="From: Zoë Müller <zoe.mueller@acme.example>\n\nHi Alex,\n\nI spoke with our CFO, José Núñez. We can do "
         "€37 per seat per month on a 24-month term, onboarding fee waived, and a price lock until October 2028.")
NOTICES = [DocumentInput(id=f"it-{i}", title=f"Scheduled maintenance #{i}", time=f"2026-11-{2 + i * 7:02d}",
                         text="From: IT Helpdesk\n\nReminder: VPN maintenance window this Saturday 22:00-02:00. "
                              "Expect short interruptions.") for i in range(3)]
SYNCS = [
    DocumentInput(id="sync-11-19", title="Ops weekly sync", time="2026-11-19", text=(
        "# Ops weekly sync 2026-11-19\n\nAttendees: Sarah Kim, Alex Rivera, Raj Patel\n\n## Notes\n"
        "- Office move: crates due December 10.\n\n## Action items\n"
        "- [ ] Alex Rivera: confirm Comcast technician date — due 2026-11-23\n"
        "- [ ] Alex Rivera: order 40 new crates from Atlas Relocation — due 2026-11-30\n"
        "- [ ] Raj Patel: label network cables — due 2026-12-04\n")),
    DocumentInput(id="sync-11-26", title="Ops weekly sync", time="2026-11-26", text=(
        "# Ops weekly sync 2026-11-26\n\nAttendees: Sarah Kim, Alex Rivera, Mei Lin\n\n## Action items\n"
        "- [ ] Alex Rivera: send Q4 budget deck to Sarah — due 2026-12-02\n"
        "- [ ] Mei Lin: update floor plan seating chart — due 2026-12-07\n")),
]


@pytest.mark.parametrize("question, document", [
    ("What did Sarah ask me to do?", "mail:budget"),
    ("What did Sarah want me to do?", "mail:budget"),
    ("What did Sarah request?", "mail:budget"),
    # The name only a passage holds, asked with or without its accents.
    ("What did José Núñez offer?", "mail:pricing"),
    ("What did Jose Nunez offer?", "mail:pricing"),
])
def test_a_question_about_what_someone_said_is_about_what_the_memory_holds_of_them(
        real_kb: KnowledgeBase, question: str, document: str) -> None:
    real_kb.add_documents([BUDGET_MAIL, PRICING_MAIL, *NOTICES])
    result = real_kb.search(question)
    assert not result.nothing_relevant
    assert result.passages[0].document_id == document
    # "ask", "request", "offer" are stored nowhere: they report what was said, and ask with no word of their own.
    assert _words_stored(real_kb.store, question, real_kb.namespace) is None


def test_a_verb_of_saying_does_not_let_through_what_was_never_stored(real_kb: KnowledgeBase) -> None:
    real_kb.add_documents([BUDGET_MAIL, *NOTICES])
    # A name the memory does not hold, or another word it holds nowhere ("wedding"), keeps the floor.
    assert real_kb.search("What did Priya ask me to do?").nothing_relevant
    assert real_kb.search("What did Sarah ask me about the wedding?").nothing_relevant
    # As a noun such a word may name a type: a question for the entities of one is still about them.
    assert asked_type("How many requests do we have?").words == ["requests"]


@pytest.mark.parametrize("question", ["What are my open action items?", "action items", "open action items"])
def test_a_section_heading_that_is_the_questions_subject_lets_it_through(real_kb: KnowledgeBase,
                                                                         question: str) -> None:
    real_kb.add_documents(SYNCS)
    result = real_kb.search(question)
    assert not result.nothing_relevant
    sections = {c.id: c.section for c in real_kb.store.get_chunks([p.chunk_id for p in result.passages])}
    assert sections[result.passages[0].chunk_id].endswith("> Action items")


@pytest.mark.parametrize("question", ["What notes did I take about cooking?",
                                      "Who owns the action item about the fridge?"])
def test_a_heading_that_shares_a_word_does_not_let_through_a_question_about_something_else(
        real_kb: KnowledgeBase, question: str) -> None:
    # A heading is compared under its document's title, never alone: "Notes" alone is 0.45 from the first.
    real_kb.add_documents(SYNCS)
    assert real_kb.search(question).nothing_relevant
