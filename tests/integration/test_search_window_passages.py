"""A search's time window over many timed notes (real DuckDB file, the real default model): the passages it shows
are the nearest among those the window may show, not those of the nearest passages overall that fall in it; a
question about the window itself ("What did I do that week?") passes the relevance floor with them."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.core.domain.namespaces import EMPTY_NAMESPACE
from duckgraph.core.domain.render import NOTHING_IN_WINDOW, NOTHING_RELEVANT
from duckgraph.core.domain.search_options import SearchOptions
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import GraphStore

pytestmark = pytest.mark.model

QUESTION = "What was my mood?"
#: More notes nearer the question than the week's, outside it, than a search takes as its nearest passages.
OTHERS = SearchOptions().passage_seeds + 10


@pytest.fixture(scope="module")
def kb(tmp_path_factory, minilm):
    """Daily notes of January and February that state the mood in the question's words, and two of a June week
    that tell it otherwise, further from the question."""
    start = datetime(2024, 1, 1)
    notes = [DocumentInput(id=f"{start + timedelta(days=i):%Y-%m-%d}", time=f"{start + timedelta(days=i):%Y-%m-%d}",
                           text=f"My mood: {('good', 'great', 'fine')[i % 3]}. Mood today was steady.")
             for i in range(OTHERS)]
    notes += [DocumentInput(id="2024-06-03", time="2024-06-03", text="Mood: tired after the long bouldering session."),
              DocumentInput(id="2024-06-05", time="2024-06-05", text="Mood: cheerful, the garden is in bloom.")]
    with KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("window") / "kb.duckdb"), minilm) as knowledge_base:
        knowledge_base.add_documents(notes)
        yield knowledge_base


def shown(kb: KnowledgeBase, **options) -> set[str]:
    return {p.document_id for p in kb.search(QUESTION, max_passages=3, **options).passages}


def test_the_set_up_puts_the_weeks_notes_beyond_the_nearest_passages(kb):
    nearest = kb.store.vector_search("chunk", kb.embedder.embed_query(QUESTION), OTHERS, kb.namespace)
    documents = kb.store.chunk_documents([c for c, _ in nearest])
    assert not {"2024-06-03", "2024-06-05"} & set(documents.values())


def test_a_window_shows_its_own_passages_nearest_the_question(kb):
    week = (kb.namespace, datetime(2024, 6, 1), datetime(2024, 6, 8))
    assert kb.store.timed_chunks(*week).tolist() == GraphStore.timed_chunks(kb.store, *week).tolist()  # the default
    assert len(kb.store.timed_chunks(*week)) == 2
    assert shown(kb, after=datetime(2024, 6, 1), before=datetime(2024, 6, 8)) == {"2024-06-03", "2024-06-05"}
    assert shown(kb, after=datetime(2024, 6, 4), before=datetime(2024, 6, 8)) == {"2024-06-05"}


def test_as_of_shows_the_passages_of_before_it_when_later_ones_are_nearer(kb):
    """Asked as of a day before the others, the one note timed before it (none of the nearest overall) is shown."""
    kb.add_documents([DocumentInput(id="2023-12-20", time="2023-12-20", text="Mood: anxious before the trip.")])
    assert shown(kb, as_of=datetime(2023, 12, 24)) == {"2023-12-20"}


@pytest.mark.parametrize("question", [QUESTION, "What did I do that week?"])
def test_an_empty_window_finds_nothing_relevant_and_says_the_memory_is_not_empty(kb, question):
    """Nothing is timed in it: the text says so, naming the window, not that the memory does not know the topic."""
    result = kb.search(question, after=datetime(2025, 1, 1), before=datetime(2025, 2, 1))
    assert not result.passages and result.hint != EMPTY_NAMESPACE.format(namespace=kb.namespace)
    assert result.nothing_relevant and result.empty_window == "2025-01-01 to 2025-02-01"
    assert result.text.startswith(NOTHING_IN_WINDOW.format(window="2025-01-01 to 2025-02-01"))
    assert kb.search(question, after=datetime(2025, 1, 1)).empty_window == "from 2025-01-01"


WEEK = {"after": datetime(2024, 6, 1), "before": datetime(2024, 6, 8)}


#: Questions about the window itself, and (after the first three) ones asked with a word of doing ("work") or the
#: days of the window ("June 1", "7": counted as content words before, which held them to the floor).
ABOUT_THE_WINDOW = ["What did I do that week?", "What happened last week?", "What did I do?",
                    "What did I work on that week?", "What did I do between June 1 and June 7?",
                    "What was I busy with from 1 to 7 June?"]


@pytest.mark.parametrize("question", ABOUT_THE_WINDOW)
def test_a_question_about_the_window_itself_shows_its_passages(kb, question):
    """Nothing but asking words, words that say when (a month's days too) and words of a period or of doing: the
    window is the subject, however far its vector."""
    found = kb.search(question, max_passages=3, **WEEK)
    assert not found.nothing_relevant, question
    assert {p.document_id for p in found.passages} == {"2024-06-03", "2024-06-05"}


@pytest.mark.parametrize("question", ["What did I cook that week?", "What did I cook on June 3?"])
def test_a_question_with_a_word_of_its_own_keeps_the_floor_in_a_window(kb, question):
    """The window holds passages: nothing relevant is then said as ever."""
    result = kb.search(question, **WEEK)
    assert result.nothing_relevant and result.empty_window is None and result.text.startswith(NOTHING_RELEVANT)


@pytest.mark.parametrize("question", ABOUT_THE_WINDOW)
def test_a_question_about_a_period_without_a_window_keeps_the_floor(kb, question):
    result = kb.search(question)
    assert result.nothing_relevant and result.empty_window is None
