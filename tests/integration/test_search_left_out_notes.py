"""What a search leaves out is said, with the real default model on a real file: a list that `max_nodes` cut short
(a team of 40 showed 29 members), the entities of the type asked about beyond `k_anchors` (5 of 9 incidents), a
name nothing stored mentions ("Tokyo": the people of other cities followed), and a date that no window applied.
A window's notes that hold the question's words are what it asks about ("How many weekly syncs did we have?"
answered "Nothing relevant" over three of them). Before, each read as a whole answer: a model counted 29 members,
5 incidents, or named people of Berlin."""

from __future__ import annotations

from datetime import datetime

import pytest

from duckgraph.core.domain.knowledge_base import NOT_STORED, KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput, TypeCount
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model

FIRST = ["Aaron", "Bella", "Caleb", "Delia", "Ethan", "Faye", "Gavin", "Holly", "Isaac", "Jade", "Kyle", "Lara",
         "Mason", "Nina", "Owen", "Paula", "Reed", "Sara", "Tyler", "Vicky", "Wade", "Alma", "Bruno", "Cora", "Dean",
         "Edith", "Flynn", "Gemma", "Hank", "Iris", "Jude", "Kelly", "Lloyd", "Mabel", "Ned", "Opal", "Percy", "Ruth",
         "Silas", "Tessa"]
LAST = ["Abbott", "Barnes", "Carver", "Dalton", "Ellis", "Foster", "Grant", "Hayes", "Irving", "Jensen", "Knight",
        "Lowe", "Mills", "Nash", "Osborne", "Pratt", "Quill", "Rhodes", "Shaw", "Tate", "Underwood", "Vance", "Walsh",
        "Yates", "Young", "Zimmer", "Archer", "Bishop", "Cole", "Drake", "Eaton", "Frost", "Gill", "Hale", "Ingram",
        "Joyce", "Kemp", "Lane", "Marsh", "Noble"]
MEMBERS = [f"{first} {last}" for first, last in zip(FIRST, LAST)]
CITIES = ("Berlin", "London", "Lisbon")
ENGINEERS = {"Kira Tanaka": "London", "Hana Sato": "Lisbon"}
MARCH = {"after": datetime(2025, 3, 1), "before": datetime(2025, 4, 1)}


@pytest.fixture(scope="module")
def kb(tmp_path_factory, minilm):
    """A support team of 40, each member based in one of three cities, and two engineers of Japanese names based
    there too (whose facts are near a question about Tokyo); nine incidents and four teams; weekly syncs of three
    months, three of them in March 2025; a runbook that writes PostgreSQL."""
    nodes = [NodeInput(name="Support Team", type="Team", description="Customer support team."),
             *(NodeInput(name=f"{name} Team", type="Team") for name in ("Payments", "Platform", "Mobile")),
             *(NodeInput(name=city, type="Location") for city in CITIES),
             *(NodeInput(name=member, type="Person") for member in [*MEMBERS, *ENGINEERS]),
             *(NodeInput(name=f"INC-10{i}", type="Incident", description=f"Incident INC-10{i}: outage number {i}.")
               for i in range(1, 10))]
    edges = [*(EdgeInput(source=engineer, target=city, type="BASED_IN") for engineer, city in ENGINEERS.items()),
             *(EdgeInput(source=member, target="Support Team", type="MEMBER_OF") for member in MEMBERS),
             *(EdgeInput(source=member, target=CITIES[i % 3], type="BASED_IN") for i, member in enumerate(MEMBERS))]
    projects = ["Fraud Scoring", "Ledger v2", "Invoice Portal"]
    notes = [DocumentInput(id=f"meeting-{month}-{day}", time=f"2025-{month:02d}-{day:02d}",
                           title=f"Meeting notes {month}-{day}: {project}",
                           text=f"Weekly sync on {project}. Attendees: {', '.join(MEMBERS[day:day + 3])}. "
                                f"{MEMBERS[day]} reported progress on {project}; {MEMBERS[day + 1]} raised a risk "
                                f"about the timeline. Action: {MEMBERS[day + 2]} to follow up next week.")
             for month in (2, 3, 4) for day in (3, 15, 27) for project in [projects[(month + day) % 3]]]
    notes.append(DocumentInput(id="runbook", text="inventory-db is the PostgreSQL 15 cluster that holds the orders; "
                                                  "its delayed replica must never be promoted."))
    with KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("left-out") / "kb.duckdb"), minilm) as knowledge_base:
        knowledge_base.add_knowledge_graph(nodes, edges)
        knowledge_base.add_documents(notes)
        yield knowledge_base


def members_shown(text: str) -> set[str]:
    return {member for member in MEMBERS if f"- {member} member of Support Team" in text}


def test_a_team_that_max_nodes_cuts_short_says_how_many_more_members_it_has(kb: KnowledgeBase) -> None:
    result = kb.search("Who is on the Support team?", token_budget=8_000)
    shown = members_shown(result.text)
    assert 20 < len(shown) < 40 and not result.truncated
    assert result.more_facts["Support Team"] == {"MEMBER_OF": 40 - len(shown)}
    assert (f"(not shown, max_nodes reached: Support Team: {40 - len(shown)} more MEMBER_OF facts"
            in result.text.splitlines()[-1])
    whole = kb.search("Who is on the Support team?", token_budget=8_000, max_nodes=60)
    assert members_shown(whole.text) == set(MEMBERS) and not whole.more_facts and "(not shown" not in whole.text


def test_the_facts_cap_cutting_a_list_short_is_said_too(real_kb: KnowledgeBase) -> None:
    """Every entity kept (six, named), but more facts among them than FACTS_PER_NODE x max_nodes: that cap alone
    leaves some out, and each list it cut short (two or more of an entity's facts of a type shown) says how many
    more it has."""
    people = ["Ann Weller", "Ben Okoro", "Cal Duarte", "Dan Moreau", "Eve Lindqvist", "Fay Osei"]
    real_kb.add_knowledge_graph([NodeInput(name=p, type="Person") for p in people], [
        EdgeInput(source=a, target=b, type="KNOWS") for i, a in enumerate(people) for b in people[i + 1:]])
    result = real_kb.search(f"How do {', '.join(people[:-1])} and {people[-1]} know each other?", max_nodes=6,
                            k_anchors=6)
    assert {n.name for n in result.nodes} == set(people) and len(result.edges) == 12  # of 15
    assert result.more_facts
    for name, types in result.more_facts.items():
        shown = sum(1 for e in result.edges if name in (e.source, e.target))
        assert shown >= 2 and types == {"KNOWS": 5 - shown}, name  # each knows the five others
    assert "more KNOWS facts" in result.text


def test_the_entities_of_a_type_beyond_k_anchors_are_counted(kb: KnowledgeBase) -> None:
    result = kb.search("How many incidents have we had?")
    assert len([a for a in result.anchors if a.type == "Incident"]) == 5
    assert result.type_count == TypeCount(type="Incident", shown=5, stored=9, k_anchors=9)
    assert "(5 of 9 Incident entities shown: k_anchors=9 shows them all" in result.text
    every = kb.search("How many incidents have we had?", k_anchors=9)
    assert len([a for a in every.anchors if a.type == "Incident"]) == 9 and every.type_count is None
    # A query that names no type counts nothing.
    assert kb.search("Which incident hit the payments team?").type_count is None


@pytest.mark.parametrize("question", ["How many weekly syncs did we have?", "How many meetings did we have?"])
def test_a_window_whose_notes_hold_the_question_s_words_shows_them(kb: KnowledgeBase, question: str) -> None:
    result = kb.search(question, **MARCH)
    assert not result.nothing_relevant
    assert {p.document_id for p in result.passages} == {"meeting-3-3", "meeting-3-15", "meeting-3-27"}
    # A word no note of the window holds keeps the floor, as before.
    assert kb.search("How many pizzas did we order?", **MARCH).nothing_relevant


def test_a_date_in_the_query_without_a_window_is_said_not_applied(kb: KnowledgeBase) -> None:
    """Words that say when are no window: the answer "Nothing relevant" (or other months' notes) must not read as
    what March holds; the window the note points to shows March's notes."""
    result = kb.search("Which meetings did we have in March 2025?")
    assert result.dates_not_applied == ["March 2025"]
    assert ("(not applied as a time window: March 2025; give after and before (dates) to search that period only)"
            in result.text.splitlines())
    windowed = kb.search("Which meetings did we have in March 2025?", **MARCH)
    assert windowed.dates_not_applied == [] and "(not applied" not in windowed.text
    assert {p.document_id for p in windowed.passages} == {"meeting-3-3", "meeting-3-15", "meeting-3-27"}
    assert kb.search("Who may join the Support team?").dates_not_applied == []  # "may" is no month here


def test_a_name_nothing_stored_mentions_is_said_before_the_related_content(kb: KnowledgeBase) -> None:
    result = kb.search("Who is based in Tokyo?")
    assert result.not_stored == ["Tokyo"] and not result.nothing_relevant and result.edges  # not emptied
    assert result.text.startswith(NOT_STORED.format(ids="Tokyo") + "\n")
    # A small budget's note names the budget asked for, though that first line took some of it, and the advice.
    small = kb.search("Who is based in Tokyo?", token_budget=300)
    note = next(line for line in small.text.splitlines() if line.startswith("(truncated"))
    assert note.startswith("(truncated to about 300 tokens; not shown: ") and note.endswith(
        "; a larger token_budget shows more)") and small.text.startswith(NOT_STORED.format(ids="Tokyo"))
    assert kb.search("Tokyo: who is based there?").not_stored == ["Tokyo"]  # a first word that is no common one
    assert kb.search("Who is based in Berlin?").not_stored == []
    assert kb.search("Who is based in Tokyo or Berlin, Kyoto?").not_stored == ["Tokyo", "Kyoto"]
    # A capitalised common word that starts the question says nothing; one a shown text holds inside a longer
    # word is stored as it is written there ("Postgres" of "PostgreSQL").
    assert kb.search("Weekly syncs on Fraud Scoring?").not_stored == []
    assert kb.search("Which Postgres replica must never be promoted?").not_stored == []


def test_the_list_counted_is_the_named_team_s_not_a_neighbour_s(real_kb: KnowledgeBase) -> None:
    """Two teams of 20, both anchors of "Who is in the Support Team?": only the team the query names has its list
    counted (the other's members reached on the way are no list it asked for)."""
    members = {team: [f"{first} {team[0]}. {last}" for first, last in zip(FIRST[:20], LAST[:20])]
               for team in ("Support Team", "Platform Team")}
    real_kb.add_knowledge_graph(
        [NodeInput(name=team, type="Team") for team in members]
        + [NodeInput(name=name, type="Person") for names in members.values() for name in names],
        [EdgeInput(source=name, target=team, type="MEMBER_OF") for team, names in members.items() for name in names])
    result = real_kb.search("Who is in the Support Team?", max_nodes=15)
    shown = sum(1 for e in result.edges if e.target == "Support Team")
    assert result.more_facts == {"Support Team": {"MEMBER_OF": 20 - shown}}
    # Every Support member shown, and some of Platform's: nothing the query asked for is left out.
    every = real_kb.search("Who is in the Support Team?", max_nodes=30)
    assert sum(1 for e in every.edges if e.target == "Support Team") == 20
    assert 0 < sum(1 for e in every.edges if e.target == "Platform Team") < 20
    assert every.more_facts == {} and "Platform Team:" not in every.text


def test_a_month_that_is_a_stored_name_is_no_date(real_kb: KnowledgeBase) -> None:
    real_kb.add_knowledge_graph([
        NodeInput(name="March Patel", type="Person", description="Designer of the checkout page."),
        NodeInput(name="May Lin", type="Person", description="Designs the mobile app's screens.")], [])
    for question in ("What does March Patel do?", "What did May design?"):
        result = real_kb.search(question)
        assert result.dates_not_applied == [] and "not applied as a time window" not in result.text, question
    # A month with a year is a date whoever is named.
    assert real_kb.search("What did May Lin design in March 2025?").dates_not_applied == ["March 2025"]


def test_a_plural_weekday_is_no_name(kb: KnowledgeBase) -> None:
    assert kb.search("Who works with Kira Tanaka on Fridays?").not_stored == []


def test_a_one_sentence_passage_under_a_long_title_passes_the_floor(real_kb: KnowledgeBase) -> None:
    """The floor compares the sentences the keyword channel found with the query alone too: under a long title (as
    the passage is embedded) the one sentence that answers read as far (0.21 against 0.44 alone)."""
    sentence = ("The anomalous capacity fade at cycle 317 was traced to a hairline crack in the ceramic separator; "
                "scanning electron microscopy showed lithium dendrites growing along the grain boundaries of the "
                "batch delivered in November, which had been sintered at 1,150 °C instead of the specified 1,230 °C.")
    real_kb.add_documents([DocumentInput(id="paper", title="Solid-State Electrolyte Degradation in Lithium-Metal Cells",
                                         text="## Discussion\n\n" + sentence)])
    result = real_kb.search("At what temperature was the November separator batch sintered?")
    assert not result.nothing_relevant and [p.document_id for p in result.passages] == ["paper"]
