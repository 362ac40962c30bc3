"""What global_search answers on a small personal memory of four topics (a real DuckDB file, the real default
model): a topical question gets its topic's report first though no word of it is in any report, a broad one the
largest; the text says how many reports were left out, cuts a report to the budget, says when the reports are
stale and which entities their written reports name changed (extractive ones are shown as the graph is now); a
rebuild never keeps a written report's text about deleted entities; a server's warm-up rebuilds a build made out
of date while no server ran; and a misspelt namespace is said to be empty."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from duckgraph.core.domain.communities.global_search import RECENT_CHANGES, WITHHELD
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.namespaces import EMPTY_NAMESPACE
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, NodeInput
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.core.mcp.warmup import WarmUp
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from duckgraph.ports import NotFoundError

from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.model

TOPICS = {
    "payments": [
        ("payments platform", "System", "The company's card payments platform on Kubernetes in eu-west-1"),
        ("checkout-service", "Service", "Service customers pay through; calls the ledger-service"),
        ("ledger-service", "Service", "Records payments in PostgreSQL 16"),
        ("PostgreSQL 16 cluster", "Database", "The ledger's database cluster"),
        ("Priya Raman", "Person", "Leads the payments team"),
        ("Tom Becker", "Person", "Payments engineer, on-call lead in November"),
        ("Stripe", "Organization", "Card processor"),
        ("Adyen", "Organization", "Fallback card processor"),
        ("INC-142", "Incident", "Checkout latency spike on 3 November from pool exhaustion"),
        ("PgBouncer", "Software", "Connection pooler the ledger will migrate to")],
    "garden": [
        ("plot 14", "Place", "Our allotment plot at Riverside Allotments, full sun"),
        ("Riverside Allotments", "Place", "Allotment site"),
        ("San Marzano tomatoes", "Plant", "Tomatoes grown this year; got blight in August"),
        ("Crimson Crush", "Plant", "Blight-resistant tomato variety to try next year"),
        ("tomato blight", "Disease", "Blight that hit the tomatoes in August"),
        ("Maria", "Person", "Gardener on plot 12 who shares comfrey fertiliser"),
        ("comfrey", "Plant", "Used as fertiliser and compost activator"),
        ("compost bay", "Thing", "Compost at plot 14, turned every three weeks")],
    "family": [
        ("Lena", "Person", "Our daughter, year 4"),
        ("Jonas", "Person", "Our son, starts reception next September"),
        ("Oakfield Primary", "School", "Lena's primary school"),
        ("Mr Okafor", "Person", "Lena's year 4 teacher"),
        ("Riverside Leisure Centre", "Place", "Where Lena swims on Tuesdays"),
        ("Dr Hannah Weiss", "Person", "Family dentist"),
        ("Bridge Street Dental", "Organization", "Dental practice"),
        ("Elm Road GP surgery", "Organization", "Family doctor's surgery")],
    "books": [
        ("Thursday book club", "Group", "Book club meeting on Thursdays"),
        ("Sam", "Person", "Hosts the book club"),
        ("Aisha", "Person", "Picks the book club's books this quarter"),
        ("The Left Hand of Darkness", "Book", "Novel by Ursula K. Le Guin, November's book"),
        ("Piranesi", "Book", "Novel by Susanna Clarke, December's book"),
        ("Labyrinths", "Book", "Borges collection planned for January"),
        ("Jorge Luis Borges", "Person", "Author"),
        ("Susanna Clarke", "Person", "Author"),
        ("Ursula K. Le Guin", "Person", "Author")],
}
#: Each topic's entities tied to its first (a hub) and to the next: one community per topic.
LINKS = {"payments": [("checkout-service", "ledger-service"), ("ledger-service", "PostgreSQL 16 cluster"),
                      ("INC-142", "ledger-service"), ("Tom Becker", "INC-142"), ("ledger-service", "PgBouncer")]}


def topic_graph(topics: dict = TOPICS) -> tuple[list[NodeInput], list[EdgeInput]]:
    nodes, edges = [], []
    for topic, entities in topics.items():
        nodes += [NodeInput(name=name, type=kind, description=text) for name, kind, text in entities]
        hub = entities[0][0]
        edges += [EdgeInput(source=name, target=hub, type="PART_OF") for name, _, _ in entities[1:]]
        edges += [EdgeInput(source=a, target=b, type="RELATED_TO") for a, b in LINKS.get(topic, [])]
    return nodes, edges


def knowledge_base(path: Path, embedder) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), embedder, community_detector=LeidenDetector())


@pytest.fixture
def memory(db_path: Path, minilm):
    with knowledge_base(db_path, minilm) as kb:
        kb.communities.keeper.stop()  # each test builds when it means to
        kb.add_knowledge_graph(*topic_graph())
        kb.communities.build("default")
        yield kb


def first_names(result) -> set[str]:
    return {e.name for e in result.reports[0].key_entities}


def test_a_topical_question_gets_its_topic_first_and_a_broad_one_the_largest_community(memory):
    # No word of these questions is in any report, and no report is as similar to them as the model's relevance
    # floor (calibrated for entities and passages): their vectors still say which topic they are about.
    garden = memory.communities.global_search("What do we know about the garden?", "default")
    assert "plot 14" in first_names(garden)
    small = memory.communities.global_search("What do we know about the garden?", "default", token_budget=300)
    assert len(small.reports) == 1 and "plot 14" in first_names(small)
    children = memory.communities.global_search("What's going on with our children?", "default")
    assert "Lena" in first_names(children)
    # An entity its report does not name (not central): the community holding it.
    adyen = memory.communities.global_search("Summarise everything about Adyen", "default")
    assert "payments platform" in first_names(adyen) and "Adyen" not in adyen.reports[0].summary
    broad = memory.communities.global_search("What are the main themes?", "default")
    assert [r.size for r in broad.reports] == sorted((r.size for r in broad.reports), reverse=True)
    assert "payments platform" in first_names(broad) and len(broad.reports) == 4


def test_words_about_the_whole_or_about_how_to_answer_match_no_report(memory):
    # "going" stems to "go": the report of a skill named Go matched it, and ranked first for a question about the
    # kids (the keyword channel matched the question's words, broad ones included).
    memory.add_knowledge_graph(*topic_graph({"skills": [
        ("Go", "Skill", "Programming language we write services in"), ("Rust", "Skill", "Systems language"),
        ("Kotlin", "Skill", "Language of the Android app"), ("Backend guild", "Group", "Engineers sharing skills")]}))
    memory.communities.build("default")
    children = memory.communities.global_search("What's going on with our children?", "default")
    assert "Lena" in first_names(children)
    # Words that say how to answer name no topic: the question stays broad, the largest first.
    broad = memory.communities.global_search("What are the main themes?", "default")
    asked = memory.communities.global_search("What are the main themes? Answer in detail please", "default")
    assert [r.id for r in asked.reports] == [r.id for r in broad.reports]
    assert [r.size for r in asked.reports] == sorted((r.size for r in asked.reports), reverse=True)


def test_a_question_about_what_changed_is_pointed_to_recent_changes(memory):
    for query in ("What changed this month?", "What happened last week?"):
        found = memory.communities.global_search(query, "default")
        assert found.hint == RECENT_CHANGES and RECENT_CHANGES in found.text, query
    assert memory.communities.global_search("What happened at work?", "default").hint is None


def test_the_text_says_how_many_reports_were_left_out_and_cuts_a_report_to_the_budget(memory):
    found = memory.communities.global_search("What are the main themes?", "default", token_budget=300)
    assert found.truncated and len(found.reports) == 1
    assert "(1 of 4 reports shown, largest first, within token_budget=300; token_budget=" in found.text
    whole = int(found.text.rsplit("token_budget=", 1)[1].split()[0])
    assert not memory.communities.global_search("What are the main themes?", "default",
                                                 token_budget=whole).truncated
    tiny = memory.communities.global_search("What are the main themes?", "default", token_budget=100)
    assert tiny.truncated and estimate_tokens(tiny.text) <= 100
    assert "cut short to fit token_budget=100, 3 more reports not shown" in tiny.text


def test_the_text_says_which_entities_changed_since_the_reports_were_built_and_when_they_are_stale(memory):
    payments = next(r for r in memory.communities.global_search("What happened at work?", "default").reports
                    if r.size == 10)
    memory.communities.save_written("default", payments.id, "Payments at work",
                                    "The ledger-service records payments in the PostgreSQL 16 cluster.")
    memory.curation.update_entity("ledger-service", "default", description="Records payments in CockroachDB")
    memory.end_relations([EndRelationInput(source="ledger-service", target="PostgreSQL 16 cluster",
                                           type="RELATED_TO")])
    memory.curation.update_entity("plot 14", "default", description="Our allotment plot, half shade since May")
    found = memory.communities.global_search("What happened at work?", "default")
    written = next(r for r in found.reports if r.size == 10)
    assert written.stale and not found.freshness.stale  # a few writes: no rebuild due, yet this report is behind
    assert written.summary == "The ledger-service records payments in the PostgreSQL 16 cluster."
    assert f"## Payments at work [community {written.id}, level 0, 10 entities] (stale)" in found.text
    assert found.text.endswith("(Changed since the reports were built: PostgreSQL 16 cluster, ledger-service. "
                               "Reports marked stale may say what no longer holds; search gives their current "
                               "facts.)")
    assert [r.stale for r in found.reports].count(True) == 1
    # An extractive report is shown as its members are now: not stale, its entities not named as changed.
    garden = next(r for r in found.reports if "plot 14" in {e.name for e in r.key_entities})
    assert "plot 14 (Place): Our allotment plot, half shade since May" in garden.summary and not garden.stale
    # A rebuild keeps the written report, stale (an entity it names changed), and the extractive one current.
    memory.communities.build("default")
    rebuilt = memory.communities.global_search("What happened at work?", "default")
    assert next(r for r in rebuilt.reports if r.size == 10).stale
    assert "half shade since May" in next(r.summary for r in rebuilt.reports
                                          if "plot 14" in {e.name for e in r.key_entities})
    assert "Changed since" not in rebuilt.text
    # A new topic larger than a fifth of the graph: the text says the reports are out of date.
    extra = {"house": [(f"house item {i}", "Thing", "Part of our house move") for i in range(14)]}
    memory.add_knowledge_graph(*topic_graph(extra))
    stale = memory.communities.global_search("What are the main themes?", "default")
    assert stale.freshness.stale and not stale.freshness.rebuilding
    assert stale.text.endswith("of the graph changed since, so they may be out of date: a running server rebuilds "
                               "them once writes settle, build_communities does it now.)")
    assert f"(These reports were built {stale.freshness.built_at[:10]} " in stale.text


def test_a_written_report_about_a_deleted_entity_is_never_shown_nor_kept(db_path: Path):
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.communities.keeper.stop()
        kb.add_knowledge_graph(
            [NodeInput(name="Project Nightjar", type="Project"), NodeInput(name="Zephyr Labs", type="Organization"),
             NodeInput(name="Priya Raman", type="Person"), NodeInput(name="Omar Haddad", type="Person")],
            [EdgeInput(source="Project Nightjar", target=name, type="INVOLVES")
             for name in ("Zephyr Labs", "Priya Raman", "Omar Haddad")])
        kb.communities.build("default")
        community = kb.communities.to_write("default").communities[0].id
        kb.communities.save_written("default", community, "Nightjar: buying Zephyr Labs",
                                    "Project Nightjar is the acquisition of Zephyr Labs for 40M.")
        kb.curation.delete_entities(["Zephyr Labs"], "default")
        before = kb.communities.global_search("Project Nightjar", "default")
        assert "Zephyr" not in before.text and "Zephyr" not in before.model_dump_json()
        assert WITHHELD in before.text and before.reports[0].stale
        assert kb.communities._shrunk("default")  # the keeper rebuilds such a namespace whatever the share
        built = kb.communities.build("default")
        assert built.written_reports_dropped == 1 and not kb.communities._shrunk("default")
        after = kb.communities.global_search("Project Nightjar", "default")
        assert "Zephyr" not in after.model_dump_json() and after.reports[0].author == "extractive"


def test_the_warm_up_rebuilds_a_build_made_out_of_date_while_no_server_ran(db_path: Path):
    with knowledge_base(db_path, HashingEmbedder()) as kb:
        kb.communities.keeper.stop()
        kb.add_knowledge_graph(*topic_graph({"books": TOPICS["books"]}))
        kb.communities.build("default")
        kb.add_knowledge_graph(*topic_graph({"garden": TOPICS["garden"]}))  # `duckgraph import`, say
        built_at = kb.store.community_build("default").built_at
    with knowledge_base(db_path, HashingEmbedder()) as kb:  # a server starts
        assert kb.communities.freshness("default").stale
        kb.communities.keeper.settle = 0.05
        warm_up = WarmUp(kb, lambda: None, lambda: None)
        warm_up.start()
        deadline = time.monotonic() + 30
        while kb.store.community_build("default").built_at == built_at and time.monotonic() < deadline:
            time.sleep(0.05)
        assert kb.communities.keeper.idle.wait(30)
        assert not kb.communities.freshness("default").stale
        found = kb.communities.global_search("What are the main themes?", "default")
        assert len(found.reports) == 2


def test_a_misspelt_namespace_is_said_to_be_empty_not_to_want_a_build(memory):
    hint = EMPTY_NAMESPACE.format(namespace="defualt")
    assert memory.communities.global_search("What are the main themes?", "defualt").hint == hint
    with pytest.raises(NotFoundError, match=r"^the namespace 'defualt' holds nothing to build communities from: did "
                                            r"you mean 'default'\? .*; nothing was built$"):
        memory.communities.build("defualt")  # it would build nothing: said, and no build is recorded
    assert memory.store.community_build("defualt") is None
    found = memory.communities.global_search("What are the main themes?", "defualt")
    assert found.hint == found.text == hint and found.reports == []
