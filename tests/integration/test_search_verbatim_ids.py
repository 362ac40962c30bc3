"""Ids a coding agent's memory holds verbatim, with the real default model on a real file: the vectors barely see
an error code, a port, an exit code or an issue number ("how do I fix ECONNREFUSED?" is 0.27 from the observation
that answers it), so a query naming one the memory holds passes the floor; code identifiers never stored
("getUserByName" where getUserById is) are reported in `not_stored`, not silently answered with look-alikes, and the
stored parts of one ("src", "py") do not let a query through; a query that is an entity's name puts it first, and
the entity and the passages that hold an id the query names come first; a person's name written with an inner
capital ("DeShawn") is a name, not an id."""

from __future__ import annotations

import pytest

from duckgraph.core.domain import query_words, relevance
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.memory_server import search_nodes
from duckgraph.core.domain.model import DocumentInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model


def store_coding_memory(kb: KnowledgeBase) -> None:
    kb.add_knowledge_graph([
        NodeInput(name="orders-db", type="Database", observations=[
            "PostgreSQL 15 running in docker compose on port 5432",
            "ECONNREFUSED 127.0.0.1:5432 means the orders-db container is not running: run docker compose up -d "
            "orders-db"]),
        NodeInput(name="OOMKilled api pod", type="Incident", observations=[
            "The api pod exited with exit code 137 (OOMKilled); fixed by raising the memory limit to 2Gi"]),
        NodeInput(name="#482", type="Issue", observations=[
            "GitHub issue #482: flaky test test_checkout_timeout on CI; marked xfail until the retry logic is fixed"]),
        NodeInput(name="getUserById", type="Function", observations=["Defined in src/api/users.py at line 42"]),
        NodeInput(name="src/api/users.py", type="File", observations=["The users endpoint GET /api/v1/users/{id}"]),
        NodeInput(name="./scripts/deploy.sh", type="Script",
                  observations=["Builds the docker image and runs kubectl rollout restart"]),
        NodeInput(name="spring.datasource.url", type="ConfigKey",
                  observations=["jdbc:postgresql://localhost:5432/orders"]),
        NodeInput(name="ORA-00942", type="Error", observations=[
            "ORA-00942: table or view does not exist; cause: the app user lacks a grant on the ORDERS schema; fix: "
            "GRANT SELECT ON orders.orders TO app_user"]),
    ], [])


@pytest.fixture(scope="module")
def coding(tmp_path_factory, minilm):
    """A coding agent's memory for the read-only tests below (stored once: searches change nothing)."""
    kb = KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("codes") / "kb.duckdb"), minilm)
    with kb:
        store_coding_memory(kb)
        yield kb


@pytest.mark.parametrize("query, entity", [
    ("how do I fix ECONNREFUSED?", "orders-db"), ("how do I fix ECONNREFUSED 5432?", "orders-db"),
    ("5432", "orders-db"), ("exit code 137", "OOMKilled api pod"), ("#482", "#482"),
    ("what is issue 482 about?", "#482"),
])
def test_a_query_naming_a_code_the_memory_holds_verbatim_passes_the_floor(coding: KnowledgeBase, query: str,
                                                                          entity: str) -> None:
    """All six came back "Nothing relevant": their vectors are 0.08-0.30 from what holds the code."""
    result = coding.search(query)
    assert not result.nothing_relevant, query
    assert entity in {a.name for a in result.anchors}, query
    assert result.not_stored == [], query


@pytest.mark.parametrize("query", [
    "how do I fix ENOENT?", "what is issue 999 about?", "exit code 143",
    # a path whose parts ("src", "py") are stored, never the path: it is held to the floor (best vector 0.33)
    "what does src/payments/refund.py do?",
])
def test_a_code_the_memory_does_not_hold_leaves_the_query_to_the_floor(coding: KnowledgeBase, query: str) -> None:
    assert coding.search(query).nothing_relevant, query


@pytest.mark.parametrize("query, missing", [
    ("where is getUserByName defined?", ["getUserByName"]),
    ("where is get_user_by_name defined?", ["get_user_by_name"]),
    ("what is spring.datasource.password set to?", ["spring.datasource.password"]),
    ("Does getUserById call findUserByEmail?", ["findUserByEmail"]),
])
def test_a_code_identifier_nothing_stored_holds_is_reported(coding: KnowledgeBase, query: str,
                                                            missing: list[str]) -> None:
    """They were answered with getUserById and spring.datasource.url and an empty `not_stored`: their vectors are
    as near as the stored ids' own (0.61-0.64)."""
    result = coding.search(query)
    assert not result.nothing_relevant, query
    assert result.not_stored == missing, query
    assert result.text.startswith(f"Nothing stored mentions {missing[0]}; what follows is related content."), query


@pytest.mark.parametrize("query", [
    "where is getUserById defined?", "what is spring.datasource.url set to?", "what does ./scripts/deploy.sh do?",
    "what is in src/api/users.py?",
    # an entity named up to punctuation
    "orders_db",
])
def test_a_code_identifier_stored_verbatim_is_not_reported(coding: KnowledgeBase, query: str) -> None:
    result = coding.search(query)
    assert not result.nothing_relevant, query
    assert result.not_stored == [], query


@pytest.mark.parametrize("query", ["orders-db", "orders_db", "Orders DB"])
def test_an_entity_the_whole_query_names_comes_first(coding: KnowledgeBase, query: str) -> None:
    """ORA-00942 came first: its vector is nearer (0.45 against 0.41) and its observation writes "orders" three
    times, so it led two of the three rankings fused."""
    assert [a.name for a in coding.search(query).anchors][:1] == ["orders-db"], query
    assert [e.name for e in search_nodes(coding, query).entities][:1] == ["orders-db"], query


def test_a_number_that_names_a_thing_counts_as_a_name(coding: KnowledgeBase) -> None:
    """Numbers were left out of the names that move the floor: "issue 999" of a memory without it did not raise it."""
    store, namespace = coding.store, coding.namespace
    assert relevance._names_stored(store, "what is issue 482 about?", namespace) == -1
    assert relevance._names_stored(store, "what is issue 999 about?", namespace) == 1
    assert relevance._names_stored(store, "which 12 tests are flaky?", namespace) == 0  # a count names nothing


@pytest.mark.parametrize("query, ids", [
    ("how do I fix ECONNREFUSED on port 5432 after #48?", ["ECONNREFUSED", "5432", "48"]),
    ("getUserById, OOMKilled, get_user_by_name, spring.datasource.url, src/api/users.py, INC-142",
     ["getUserById", "OOMKilled", "get_user_by_name", "spring.datasource.url", "src/api/users.py", "INC-142"]),
    # counts, dates and times, initials, a common word in capitals, names, compounds of prose
    ("Did the US team of 12 meet on 2026-03-15 at 10AM, e.g. Jean-Luc and McKenna?", []),
    ("When did Caroline draw a self-portrait of artists/bands in 2023?", []),
    # names with an inner capital: a prefix or particle and a name, neither a common word
    ("Did McKenna, MacDonald, DeShawn, LaToya or DiCaprio call?", []),
    # code identifiers are built of words, or of more parts
    ("iPhone, UserRepoImpl, UserRepo, GitHub, HashMap, DuckDB", ["iPhone", "UserRepoImpl", "UserRepo", "GitHub",
                                                                "HashMap", "DuckDB"]),
    # command-line options, not a negative number nor a compound
    ("java -Xmx4g --dry-run at -5 degrees, well-known", ["Xmx4g", "dry-run"]),
])
def test_which_words_are_ids(query: str, ids: list[str]) -> None:
    assert list(query_words.query_ids(query)) == ids


@pytest.mark.parametrize("query", ["how do I fix ECONNREFUSED?", "ECONNREFUSED"])
def test_an_entity_holding_the_queried_id_comes_first(coding: KnowledgeBase, query: str) -> None:
    """"OOMKilled api pod" came first, orders-db (whose observation holds ECONNREFUSED) second: the vectors barely
    see the code, and "fix" matched the incident "fixed by raising the memory limit"."""
    assert [a.name for a in coding.search(query).anchors][:1] == ["orders-db"], query


def test_a_name_written_with_an_inner_capital_is_held_to_the_floor(tmp_path, minilm) -> None:
    """"DeShawn" and "LaToya" counted as camelCase ids: stored whole, they let a question about anything of them
    through the floor ("Where does DeShawn live?" of a memory that never says)."""
    with KnowledgeBase(DuckDBStore(tmp_path / "kb.duckdb"), minilm) as kb:
        kb.add_knowledge_graph([
            NodeInput(name="DeShawn Carter", type="Person",
                      observations=["Plays five-a-side football on Thursdays", "Works as a nurse at St Mary's"]),
            NodeInput(name="LaToya Brooks", type="Person", observations=["Runs the book club", "Allergic to peanuts"]),
        ], [])
        for query in ("Where does DeShawn live?", "What is LaToya's birthday?"):
            assert kb.search(query).nothing_relevant, query
        for query, name in (("Where does DeShawn work?", "DeShawn Carter"), ("Which club does LaToya run?",
                                                                              "LaToya Brooks")):
            result = kb.search(query)  # what is stored of them still comes back
            assert [a.name for a in result.anchors][:1] == [name], query
            assert result.not_stored == [], query


@pytest.fixture(scope="module")
def runbooks(tmp_path_factory, minilm):
    """Passages about one service, each mentioning it: one holds an error code in a log line, one a JVM option."""
    kb = KnowledgeBase(DuckDBStore(tmp_path_factory.mktemp("runbooks") / "kb.duckdb"), minilm)
    with kb:
        kb.add_knowledge_graph([NodeInput(name="api-gateway", type="Service",
                                          observations=["Fronts the backend services"])], [])
        kb.add_documents([DocumentInput(id=i, title=title, text=text) for i, title, text in [
            ("c-1", "Connection refused", "How to fix connection refused errors on the api-gateway: check that the "
                                          "server is listening on the port and that no firewall blocks it."),
            ("c-2", "Refused connections in Docker", "Fixing refused connections to the api-gateway in Docker: "
                                                     "publish the container port with -p and bind to 0.0.0.0."),
            ("c-3", "Proxy refusals", "To fix a connection the api-gateway proxy refuses, check the upstream address "
                                      "in the nginx config and reload it."),
            ("c-4", "Redis errors", "Startup log of the api-gateway: loaded 42 routes, TLS on, metrics exported, then "
                                    "Error: connect ECONNREFUSED 127.0.0.1:6379, retrying in 5 seconds."),
            ("c-5", "Firewall", "How to fix blocked connections to the api-gateway: open the port in the firewall "
                                "rules and retry."),
            ("c-6", "JVM options", "The api-gateway runs on the JVM; its start script passes -Xmx4g to java and logs "
                                   "heap usage."),
            ("c-7", "JVM heap", "How to fix heap size problems in the api-gateway JVM: raise the maximum heap in the "
                                "start script."),
            ("c-8", "JVM memory", "Where the api-gateway heap is set: the memory settings of the JVM live in the "
                                  "start script."),
        ]])
        yield kb


@pytest.mark.parametrize("query, holder", [
    ("how do I fix connection refused on the api-gateway (ECONNREFUSED)?", "c-4"),
    ("where is the api-gateway heap set to -Xmx4g?", "c-6"),
    # an option stored whole passes the floor as other ids do (this came back "Nothing relevant")
    ("where is -Xmx4g set?", "c-6"),
])
def test_a_passage_holding_the_queried_id_comes_first(runbooks: KnowledgeBase, query: str, holder: str) -> None:
    """c-4 came last of the five passages shown and c-6 second: passages that mention an entity get no lift from
    their words, and the others share more of the question's ("fix", "connection", "heap")."""
    result = runbooks.search(query)
    assert [p.document_id for p in result.passages][:1] == [holder], query
    assert result.not_stored == [], query


def test_ordinary_words_lift_no_passage(runbooks: KnowledgeBase) -> None:
    """Without the id the question is prose: the log line is not what answers it."""
    assert [p.document_id for p in runbooks.search("how do I fix connection refused on the api-gateway?").passages
            ][:1] == ["c-1"]
