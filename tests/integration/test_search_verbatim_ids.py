"""Ids a coding agent's memory holds verbatim, with the real default model on a real file: the vectors barely see
an error code, a port, an exit code or an issue number ("how do I fix ECONNREFUSED?" is 0.27 from the observation
that answers it), so a query naming one the memory holds passes the floor; code identifiers never stored
("getUserByName" where getUserById is) are reported in `not_stored`, not silently answered with look-alikes, and the
stored parts of one ("src", "py") do not let a query through; a query that is an entity's name puts it first."""

from __future__ import annotations

import pytest

from duckgraph.core.domain import retrieval
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.memory_server import search_nodes
from duckgraph.core.domain.model import NodeInput
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
    assert retrieval._names_stored(store, "what is issue 482 about?", namespace) == -1
    assert retrieval._names_stored(store, "what is issue 999 about?", namespace) == 1
    assert retrieval._names_stored(store, "which 12 tests are flaky?", namespace) == 0  # a count names nothing


@pytest.mark.parametrize("query, ids", [
    ("how do I fix ECONNREFUSED on port 5432 after #48?", ["ECONNREFUSED", "5432", "48"]),
    ("getUserById, OOMKilled, get_user_by_name, spring.datasource.url, src/api/users.py, INC-142",
     ["getUserById", "OOMKilled", "get_user_by_name", "spring.datasource.url", "src/api/users.py", "INC-142"]),
    # counts, dates and times, initials, a common word in capitals, names, compounds of prose
    ("Did the US team of 12 meet on 2026-03-15 at 10AM, e.g. Jean-Luc and McKenna?", ["McKenna"]),
    ("When did Caroline draw a self-portrait of artists/bands in 2023?", []),
])
def test_which_words_are_ids(query: str, ids: list[str]) -> None:
    assert list(retrieval._ids(query)) == ids
