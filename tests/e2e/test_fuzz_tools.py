"""Random and hostile arguments for every tool, through the MCP client: nothing crashes the server, every
failure is a tool error with a message, and nothing inconsistent is ever written."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.mcp.server import build_server
from tests.fakes import HashingEmbedder

HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from([
        "", " ", "\x00", "Robert'); DROP TABLE nodes;--", "' OR 1=1 --", "%_\\", "$1", "?", "🦆" * 50,
        "\u202e\u200b\ufeff", "a" * 5_000, "NaN", "null", "{}", "[]", "\n\t", "ｆｕｌｌ　ｗｉｄｔｈ", "İı", "ß",
    ]),
)
NUMBER = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True))
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBER, HOSTILE_TEXT),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(HOSTILE_TEXT, children, max_size=4)),
    max_leaves=12,
)
NODE = st.fixed_dictionaries(
    {"name": HOSTILE_TEXT, "type": HOSTILE_TEXT},
    optional={"description": HOSTILE_TEXT, "aliases": st.lists(HOSTILE_TEXT, max_size=3),
              "properties": st.dictionaries(HOSTILE_TEXT, JSON, max_size=3), "source_ids": st.lists(HOSTILE_TEXT, max_size=2),
              "entityType": HOSTILE_TEXT},
)
EDGE = st.fixed_dictionaries(
    {"source": HOSTILE_TEXT, "target": HOSTILE_TEXT, "type": HOSTILE_TEXT},
    optional={"weight": NUMBER, "description": HOSTILE_TEXT, "properties": st.dictionaries(HOSTILE_TEXT, JSON, max_size=2)},
)
ENTITY = st.fixed_dictionaries({"name": HOSTILE_TEXT, "entityType": HOSTILE_TEXT,
                                "observations": st.lists(HOSTILE_TEXT, max_size=3)})
RELATION = st.fixed_dictionaries({"from": HOSTILE_TEXT, "to": HOSTILE_TEXT, "relationType": HOSTILE_TEXT})

# Plausible shapes for every tool, plus arbitrary JSON objects for all of them.
SHAPED: dict[str, st.SearchStrategy] = {
    "add_knowledge_graph": st.fixed_dictionaries({}, optional={"nodes": st.lists(NODE, max_size=4),
                                                               "edges": st.lists(EDGE, max_size=4)}),
    "add_documents": st.fixed_dictionaries({"documents": st.lists(st.fixed_dictionaries(
        {"text": HOSTILE_TEXT}, optional={"id": HOSTILE_TEXT, "title": HOSTILE_TEXT, "metadata": JSON}), max_size=3)}),
    "search": st.fixed_dictionaries({"query": HOSTILE_TEXT}, optional={"hops": NUMBER, "k_anchors": NUMBER,
                                                                       "max_nodes": NUMBER, "token_budget": NUMBER}),
    "get_entities": st.fixed_dictionaries({"names": st.lists(HOSTILE_TEXT, max_size=4)}),
    "update_entity": st.fixed_dictionaries({"name": HOSTILE_TEXT}, optional={
        "new_name": HOSTILE_TEXT, "type": HOSTILE_TEXT, "description": HOSTILE_TEXT,
        "aliases": st.lists(HOSTILE_TEXT, max_size=3), "properties": JSON}),
    "merge_entities": st.fixed_dictionaries({"sources": st.lists(HOSTILE_TEXT, max_size=3), "target": HOSTILE_TEXT}),
    "find_paths": st.fixed_dictionaries({"source": HOSTILE_TEXT, "target": HOSTILE_TEXT},
                                        optional={"max_hops": NUMBER}),
    "graph_stats": st.just({}),
    "delete_entities": st.fixed_dictionaries({"entityNames": st.lists(HOSTILE_TEXT, max_size=3)}),
    "delete_relations": st.fixed_dictionaries({"relations": st.lists(RELATION, max_size=3)}),
    "create_entities": st.fixed_dictionaries({"entities": st.lists(ENTITY, max_size=3)}),
    "create_relations": st.fixed_dictionaries({"relations": st.lists(RELATION, max_size=3)}),
    "add_observations": st.fixed_dictionaries({"observations": st.lists(st.fixed_dictionaries(
        {"entityName": HOSTILE_TEXT, "contents": st.lists(HOSTILE_TEXT, max_size=3)}), max_size=2)}),
    "delete_observations": st.fixed_dictionaries({"deletions": st.lists(st.fixed_dictionaries(
        {"entityName": HOSTILE_TEXT, "observations": st.lists(HOSTILE_TEXT, max_size=3)}), max_size=2)}),
    "read_graph": st.fixed_dictionaries({}, optional={"offset": NUMBER, "limit": NUMBER}),
    "search_nodes": st.fixed_dictionaries({"query": HOSTILE_TEXT}),
    "open_nodes": st.fixed_dictionaries({"names": st.lists(HOSTILE_TEXT, max_size=3)}),
    "end_relations": st.fixed_dictionaries({"relations": st.lists(st.fixed_dictionaries(
        {"source": HOSTILE_TEXT, "target": HOSTILE_TEXT, "type": HOSTILE_TEXT},
        optional={"ended_at": st.one_of(HOSTILE_TEXT, st.sampled_from(["2024-01-01", "1999-12-31T23:59:59Z"]))}),
        max_size=3)}),
    "recent_changes": st.fixed_dictionaries({}, optional={"since": HOSTILE_TEXT, "until": HOSTILE_TEXT,
                                                          "limit": NUMBER, "offset": NUMBER}),
    # fetch_urls is off here: every call must be refused cleanly, whatever the URLs.
    "add_urls": st.fixed_dictionaries({"urls": st.lists(HOSTILE_TEXT, max_size=3)}, optional={"crawl_depth": NUMBER}),
    "list_namespaces": st.just({}),
    "delete_namespace": st.fixed_dictionaries({"namespace": HOSTILE_TEXT, "confirm": HOSTILE_TEXT}),
    "global_search": st.fixed_dictionaries({"query": HOSTILE_TEXT}, optional={"level": NUMBER,
                                                                              "token_budget": NUMBER}),
    "build_communities": st.just({}),
    "communities_to_summarize": st.fixed_dictionaries({}, optional={"limit": NUMBER}),
    "save_community_report": st.fixed_dictionaries({"id": NUMBER, "title": HOSTILE_TEXT, "summary": HOSTILE_TEXT}),
    "delete_documents": st.fixed_dictionaries({"ids": st.lists(HOSTILE_TEXT, max_size=3)}),
    "read_document": st.fixed_dictionaries({"document_id": HOSTILE_TEXT}, optional={
        "chunk_id": NUMBER, "before": NUMBER, "after": NUMBER}),
}
CALLS = st.one_of(
    *(st.tuples(st.just(name), shaped) for name, shaped in SHAPED.items()),
    st.tuples(st.sampled_from(sorted(SHAPED)), st.dictionaries(HOSTILE_TEXT, JSON, max_size=4)),
)
# A valid seed the fuzzer can hit by name, so edges and merges have something to work on.
SEED = {
    "nodes": [{"name": "Alice", "type": "Person"}, {"name": "Bob", "type": "Person"}, {"name": "Acme", "type": "Org"}],
    "edges": [{"source": "Alice", "target": "Acme", "type": "WORKS_AT"}, {"source": "Bob", "target": "Alice", "type": "KNOWS"}],
}


@pytest.fixture(scope="module")
def fuzz_session(tmp_path_factory):
    folder: Path = tmp_path_factory.mktemp("fuzz")
    (folder / "config.toml").write_text("")
    settings_ = load_settings(folder / "config.toml", env={}, db=str(folder / "kb.duckdb"), warm_up=False, tools="all")
    services = bootstrap(settings_, embedder=HashingEmbedder())
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(build_server(services))) as client:
        result = portal.call(client.call_tool, "add_knowledge_graph", SEED)
        assert not result.is_error, result.content
        yield portal, client, services.knowledge_base


def _check_consistency(kb) -> None:
    stats = kb.store.stats()
    health = kb.store.health()
    # Every node and edge that exists has exactly its vector in the index, and nothing else is indexed.
    assert health["vectors"]["node"] == stats["nodes"]
    # (ended relations keep theirs: they are history, which stats does not count)
    assert health["vectors"]["edge"] == len(kb.store.list_edges(kb.namespace, limit=10_000, include_expired=True))
    assert health["vectors"]["chunk"] == stats["chunks"]
    for node in kb.store.list_nodes(kb.namespace, limit=10_000):
        assert node.key and node.key == " ".join(node.key.split()), node
        assert node.name.strip() and node.type.strip(), node


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(call=CALLS)
def test_no_input_crashes_the_server_or_writes_garbage(fuzz_session, call):
    portal, client, kb = fuzz_session
    name, arguments = call
    result = portal.call(client.call_tool, name, arguments)
    if result.is_error:
        message = result.content[0].text
        assert message.strip()
        assert "Traceback" not in message and "internal error" not in message, message
    _check_consistency(kb)
    weights = [e.weight for e in kb.store.list_edges(kb.namespace, limit=10_000)]
    assert all(math.isfinite(w) and w >= 0 for w in weights)


def test_the_server_still_answers_after_the_fuzzing(fuzz_session):
    portal, client, kb = fuzz_session
    tools = portal.call(client.list_tools).tools
    assert len(tools) == len(SHAPED)
    result = portal.call(client.call_tool, "graph_stats", {})
    assert not result.is_error
