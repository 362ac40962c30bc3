"""`search`'s text as the host model reads it, with the real default model on a real DuckDB file: a small budget keeps
the observation that corrects an older one, the communities line never takes the place of facts, a pointed
question is not sent to global_search, and a passage's header says each thing once and never stands alone.
"""

from __future__ import annotations

import re

import pytest

from duckgraph.core.domain import memory_server
from duckgraph.core.domain.communities.service import BROAD_HINT, BROAD_IF_NOTHING
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, MemoryEntityInput, NodeInput, ScoredNode
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector

pytestmark = pytest.mark.model

#: A personal assistant's user, kept as a reference memory server's user is: corrections are written last.
ALEX = ["Name is Alex Morgan", "Lives in Portland, Oregon", "Works as a UX designer at Lumen Labs", "Is vegetarian",
        "Birthday is August 14", "Has a dog named Biscuit, a beagle", "Allergic to peanuts",
        "Training for the Seattle half marathon in October", "Dentist appointment with Dr. Patel on 2026-12-03 at 10:00",
        "Favourite restaurant is Nong's Khao Man Gai", "Switched to green tea in September 2026; no longer drinks coffee",
        "Moved to Seattle in October 2026", "Started as senior product designer at Brightwave on 2026-10-20",
        "Now eats fish (pescatarian since November 2026)"]


@pytest.mark.parametrize("budget", [120, 150])
def test_a_small_budget_keeps_the_observation_that_corrects_an_older_one(real_kb: KnowledgeBase, budget: int) -> None:
    memory_server.create_entities(real_kb, [
        MemoryEntityInput(name="default_user", entityType="person", observations=ALEX),
        MemoryEntityInput(name="Dr. Patel", entityType="person", observations=["Alex's dentist", "Office on NW 23rd Ave"])])
    for question, old, new in (("Is Alex vegetarian?", "Is vegetarian", "Now eats fish (pescatarian since"),
                               ("Where does Alex live now?", "Lives in Portland", "Moved to Seattle in October 2026")):
        result = real_kb.search(question, token_budget=budget)
        assert result.truncated, question  # the budget cuts observations: the newest are those kept
        assert old in result.text and new in result.text, (question, result.text)
    user = next(n for n in real_kb.search("Is Alex vegetarian?").nodes if n.name == "default_user")
    # What matches the query's words first, then the rest newest first: the order they correct each other in.
    assert set(user.observations[:2]) == {"Is vegetarian", "Name is Alex Morgan"}
    unmatched = [o for o in user.observations if o not in ("Is vegetarian", "Name is Alex Morgan")]
    assert unmatched == [o for o in reversed(ALEX) if o in unmatched]


#: A software team's memory, as an agent writes it with add_knowledge_graph.
TEAM_NODES = [
    ("Payments Team", "Team", "Owns payment processing and checkout."),
    ("Platform Team", "Team", "Owns shared infrastructure, databases and the Kubernetes clusters."),
    ("Growth Team", "Team", "Owns user notifications, onboarding and experiments."),
    ("payments-api", "Service", "REST API that authorises and captures card payments."),
    ("checkout-service", "Service", "Builds carts and hands orders to payments-api."),
    ("orders-db", "Database", "PostgreSQL 15 cluster holding orders."),
    ("notification-service", "Service", "Sends order emails and push notifications."),
    ("auth-gateway", "Service", "OAuth2 gateway in front of all public APIs."),
    ("Priya Raman", "Person", "Senior backend engineer on the Payments Team."),
    ("Marcus Lee", "Person", "Backend engineer on the Payments Team."),
    ("Tom Okafor", "Person", "SRE who joined the Payments Team in 2026."),
    ("Dana Whitfield", "Person", "Staff engineer, Payments Team."),
    ("Sofia Alvarez", "Person", "Engineering manager."),
    ("Yuki Tanaka", "Person", "Platform engineer, database specialist."),
    ("INC-142", "Incident", "Checkout outage on 2026-03-12: orders failed for 47 minutes."),
    ("payments-api v2.3", "Release", "payments-api release v2.3, deployed 2026-04-02; switched to the new card tokenizer."),
    ("INC-157", "Incident", "payments-api p99 latency rose to 1.8 s after the v2.3 deploy on 2026-04-02."),
    ("payments-api v2.4", "Release", "payments-api release v2.4, deployed 2026-05-20; fixes INC-157."),
    ("INC-163", "Incident", "notification-service sent duplicate order confirmation emails on 2026-07-08."),
]
TEAM_EDGES = [
    ("Payments Team", "OWNS", "payments-api"), ("Payments Team", "OWNS", "checkout-service"),
    ("Platform Team", "OWNS", "orders-db"), ("Platform Team", "OWNS", "auth-gateway"),
    ("Growth Team", "OWNS", "notification-service"), ("checkout-service", "CALLS", "payments-api"),
    ("checkout-service", "WRITES_TO", "orders-db"), ("payments-api", "AUTHENTICATES_VIA", "auth-gateway"),
    ("checkout-service", "PUBLISHES_EVENTS_TO", "notification-service"), ("Priya Raman", "MEMBER_OF", "Payments Team"),
    ("Marcus Lee", "MEMBER_OF", "Payments Team"), ("Tom Okafor", "MEMBER_OF", "Payments Team"),
    ("Priya Raman", "TECH_LEAD_OF", "Payments Team"), ("Sofia Alvarez", "MANAGES", "Payments Team"),
    ("Yuki Tanaka", "MEMBER_OF", "Platform Team"), ("Tom Okafor", "ON_CALL_FOR", "Payments Team"),
    ("INC-142", "AFFECTED", "checkout-service"), ("INC-142", "CAUSED_BY", "orders-db"),
    ("Marcus Lee", "RESPONDED_TO", "INC-142"), ("Dana Whitfield", "OWNS_POSTMORTEM_OF", "INC-142"),
    ("payments-api v2.3", "RELEASE_OF", "payments-api"), ("INC-157", "AFFECTED", "payments-api"),
    ("INC-157", "CAUSED_BY", "payments-api v2.3"), ("Priya Raman", "RESPONDED_TO", "INC-157"),
    ("payments-api v2.4", "RELEASE_OF", "payments-api"), ("payments-api v2.4", "FIXES", "INC-157"),
    ("INC-163", "AFFECTED", "notification-service"), ("Yuki Tanaka", "RESPONDED_TO", "INC-163"),
]


@pytest.fixture
def team(db_path, minilm):
    with KnowledgeBase(DuckDBStore(db_path), minilm, community_detector=LeidenDetector()) as kb:
        kb.add_knowledge_graph([NodeInput(name=n, type=t, description=d) for n, t, d in TEAM_NODES],
                               [EdgeInput(source=s, type=t, target=o) for s, t, o in TEAM_EDGES])
        kb.communities.build("default")
        yield kb


POINTED = ["Who is on call for the Payments Team right now?", "Who responded to the checkout outage?",
           "Who was on call for payments in March 2026?"]


def test_the_communities_line_comes_last_and_names_each_community_once(team: KnowledgeBase) -> None:
    for question in POINTED:
        before = team.search(question, token_budget=300)
        # The communities' line takes no room from the answer: the text is what it would be without communities.
        assert "Communities:" not in before.text or not before.truncated, question
        if before.truncated:  # the caller's budget, never what was left after the communities' share
            # (the lines on what the search left out, a date not applied here, follow it)
            note = next(line for line in before.text.splitlines() if line.startswith("(truncated"))
            assert note.startswith(("(truncated to about 300 tokens; not shown: ", "(truncated; not shown: ")), note
        full = team.search(question, token_budget=50_000)
        assert full.anchor_communities and not full.truncated
        [line] = [line for line in full.text.splitlines() if line.startswith("Communities: ")]
        # last but for the closing notes in parentheses (a date the search did not apply, here)
        assert line == [line for line in full.text.splitlines() if not line.startswith("(")][-1]
        titles = set(full.anchor_communities.values())
        for title in titles:
            assert line.count(title) == 1, line  # each community once, with its anchors
            members = [name for name, of in full.anchor_communities.items() if of == title]
            assert f"{title} holds {', '.join(members)}" in line


def test_a_pointed_question_is_not_sent_to_global_search(team: KnowledgeBase) -> None:
    for question in POINTED:
        result = team.search(question)
        assert result.anchors and result.hint is None and "as a whole" not in result.text, question
    for question in ("What are the main themes?", "Give me an overview of the people and projects"):
        assert team.search(question).hint in (BROAD_HINT, BROAD_IF_NOTHING), question


def test_the_hint_comes_when_the_best_anchors_are_spread_and_none_is_named(team: KnowledgeBase) -> None:
    nodes = {n.name: n for n in team.store.find_nodes("default", [n.lower() for n, _, _ in TEAM_NODES])}
    found = team.store.node_communities([n.id for n in nodes.values()], "default")
    one_per_top: dict[int, str] = {}
    for name, node in nodes.items():
        one_per_top.setdefault(found[node.id][0][0], name)
    assert len(one_per_top) >= 3  # the team's memory has as many top-level communities

    def anchors(*scores: float) -> list[ScoredNode]:
        return [ScoredNode(id=nodes[name].id, name=name, type="x", score=score, hop=0)
                for name, score in zip(one_per_top.values(), scores)]

    about = team.communities.about_anchors
    spread = anchors(*[0.5] * len(one_per_top))
    assert about("default", spread, "What are our main systems?", False)[1] == BROAD_HINT
    named = f"What about {spread[0].name}?"
    assert about("default", spread, named, False)[1] is None  # a question naming one of them is about it
    # One anchor well ahead of the others: the question is about it, wherever the weaker ones are.
    assert about("default", anchors(0.6, *[0.4] * (len(one_per_top) - 1)), "What are our main systems?", False)[1] is None
    # Nothing relevant: the text says to say so, unless the question is about the memory as a whole.
    assert about("default", [], "What are the main themes?", True)[1] == BROAD_IF_NOTHING


MINUTES = [
    DocumentInput(id="mtg-2026-09-14", title="Architecture sync 2026-09-14", time="2026-09-14T10:00:00Z", text=(
        "# Architecture sync, 14 September 2026\n\nAttendees: Priya Raman, Yuki Tanaka, Sofia Alvarez.\n\n"
        "## Decisions\n- We will migrate orders-db from PostgreSQL 15 to PostgreSQL 17 in Q1 2027. Yuki owns the "
        "migration plan.\n- Budget for the migration: EUR 40,000, approved by Sofia.\n\n## Action items\n"
        "- AI-1: Yuki to write the migration runbook by 2026-10-01.\n- AI-2: Priya to measure replication lag on the "
        "eu-central-1 replica.\n- AI-3: Omar to draft the data retention policy (orders older than 7 years are deleted).\n")),
    DocumentInput(id="mtg-2026-10-12", title="Architecture sync 2026-10-12", time="2026-10-12T10:00:00Z", text=(
        "# Architecture sync, 12 October 2026\n\n## Updates\n- AI-2: replication lag measured at 180 ms p95, "
        "acceptable.\n- The PostgreSQL 17 migration is moved from Q1 2027 to Q2 2027 because of the holiday freeze.\n\n"
        "## Decisions\n- Reversal: we drop Elasticsearch and move search to OpenSearch 2.17 in Q1 2027 (licence "
        "cost).\n- Budget for the migration raised to EUR 55,000.\n")),
    DocumentInput(id="runbook", title="orders-db migration runbook", text=(
        "The database migration from PostgreSQL 15 to PostgreSQL 17 runs in four steps, and its budget covers the "
        "extra replica, the consultants and two weekends of overtime. First, a logical replica on PostgreSQL 17 is "
        "built next to the primary and kept in sync with pglogical while the application keeps writing to the old "
        "primary. Second, the replica is checked row by row against the primary with pg-compare, table by table, "
        "until two runs in a row find no difference. Third, writes are paused for at most five minutes, the last "
        "changes are applied and the application is pointed at the new primary. Fourth, the old primary is kept "
        "read-only for two weeks before it is dropped, so that a rollback stays possible.")),
]


def test_a_passage_header_says_each_thing_once_and_never_stands_alone(real_kb: KnowledgeBase) -> None:
    real_kb.add_documents(MINUTES)
    question = "What is the budget for the database migration?"
    full = real_kb.search(question, token_budget=50_000, max_passages=20)
    texts = {f"[{p.document_id}#{p.chunk_id}]": " ".join(p.text.split()) for p in full.passages}
    decisions = next(line for line in full.text.splitlines() if line.startswith("[mtg-2026-09-14#")
                     and "§ Decisions" in line)
    # The id, the time of day (the title gives the date), the title and the section, each once.
    assert decisions.startswith("[mtg-2026-09-14#") and "] (10:00 UTC) Architecture sync 2026-09-14 § Decisions: " in decisions
    assert decisions.count("2026-09-14") == 2 and "14 September" not in decisions  # the id's and the title's
    cuts = 0
    for budget in range(60, 400, 7):
        text = real_kb.search(question, token_budget=budget).text
        assert estimate_tokens(text) <= budget
        for line in text.splitlines():
            if not line.startswith("["):
                continue
            own = texts.get(line.split(" ", 1)[0], "")
            shown = line.split(": ", 1)[1] if ": " in line else ""  # after the header
            assert len(shown.rstrip("…")) >= 40, (budget, line)  # some of its own text, not a header alone
            if line.endswith("…"):  # cut between two words
                kept = shown[:-1]
                assert own.startswith(kept) and own[len(kept)] == " ", (budget, line)
                cuts += 1
        note = text.splitlines()[-1]
        assert re.findall(r"about (\d+) tokens", note) in ([], [str(budget)]), (budget, note)
    assert cuts  # the budgets tried cut some passage short


def test_the_note_says_how_much_was_left_out_when_it_does_not_fit_whole(real_kb: KnowledgeBase) -> None:
    real_kb.add_documents(MINUTES)
    for budget in (20, 30, 40):
        text = real_kb.search("What is the budget for the database migration?", token_budget=budget).text
        assert re.search(r"not shown", text.splitlines()[-1]), (budget, text)
