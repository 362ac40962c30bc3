"""A tool call with a top-level argument the tool does not take is refused as a tool error that names it, the
argument it most likely meant and those the tool takes, and changes nothing. The SDK's argument models ignore
unknown keys: before this, `delete_entities {"names": ["Alex"], "namespaces": "personal"}` on a server whose
default namespace is "work" deleted work's Alex.

Real parts: the server through the official MCP client in memory (every tool set), `duckgraph serve` subprocesses
over stdio sharing one file (the client server forwards to the owner) and over HTTP, and `duckgraph ui`'s
/api/tool, each on a real DuckDB file with the hashing embedder of tests/fakes.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.core.mcp.server import build_server
from duckgraph.core.mcp.tools import ALL_SET_ARGUMENTS
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_mcp_http import start as start_http
from tests.e2e.test_mcp_inmemory import call_ok, error_text
from tests.e2e.test_shared_file import TIMEOUT_SECONDS, client_pid, env, session, wait_for  # noqa: F401
from tests.e2e.test_ui_security import request
from tests.e2e.ui_server import child_env, running_ui
from tests.fakes import HashingEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def serve(tmp_path: Path, tools: str, namespace: str = "work") -> Services:
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(tmp_path / "kb.duckdb"), warm_up=False, tools=tools,
                             namespace=namespace)
    return bootstrap(settings, embedder=HashingEmbedder())


def ALEX(kind: str) -> dict[str, Any]:
    return {"name": "Alex", "type": "Person", "description": f"Alex, {kind}"}


def contents(db: Path) -> dict[str, Any]:
    """What the file holds, per namespace, read with no server running."""
    store = DuckDBStore(db)
    store.open()
    try:
        held = {}
        for ns in store.namespaces():
            nodes = store.list_nodes(ns, limit=10_000)
            observations = store.get_observations(n.id for n in nodes)
            held[ns] = {"stats": {k: v for k, v in store.stats(ns).items() if isinstance(v, int)},
                        "nodes": sorted((n.name, n.description, tuple(observations.get(n.id, ())))
                                        for n in nodes)}
        return held
    finally:
        store.close()


async def seed_both(client: Client, node: str = "add_knowledge_graph") -> None:
    await call_ok(client, node, {"nodes": [ALEX("at work")], "namespace": "work"})
    await call_ok(client, node, {"nodes": [ALEX("my brother")], "namespace": "personal"})


@pytest.mark.anyio
async def test_a_misspelt_namespace_is_refused_naming_it_and_nothing_is_deleted_written_or_searched(tmp_path):
    services = serve(tmp_path, "graphrag")
    async with Client(build_server(services)) as client:
        await seed_both(client)
        await call_ok(client, "add_documents", {"documents": [{"id": "n", "text": "Alex surfs in Lisbon."}],
                                                "namespace": "personal"})
        before = await call_ok(client, "get_entities", {"names": ["Alex"], "namespace": "work"})

        text = error_text(await client.call_tool("delete_entities", {"names": ["Alex"], "namespaces": "personal"}))
        assert text == ("delete_entities refused its arguments: 'namespaces': is not an argument of "
                        "delete_entities (did you mean 'namespace'?); it takes names, namespace. Nothing was done.")
        assert await call_ok(client, "get_entities", {"names": ["Alex"], "namespace": "work"}) == before

        text = error_text(await client.call_tool("add_knowledge_graph", {
            "nodes": [{"name": "Secret", "type": "Note", "description": "meant for personal"}],
            "Namespace": "personal"}))
        assert "'Namespace': is not an argument of add_knowledge_graph (did you mean 'namespace'?)" in text
        assert "it takes nodes, edges," in text and "namespace" in text.split("it takes ")[1]

        # No accepted argument is close to "ns": none is suggested, and the list says what to use.
        text = error_text(await client.call_tool("search", {"query": "Alex", "ns": "personal"}))
        assert "'ns': is not an argument of search;" in text and "did you mean" not in text
        assert "query" in text.split("it takes ")[1] and "namespace" in text.split("it takes ")[1]

        # Two unknown keys are both named; one of them spelt as the accepted argument but for its separator.
        text = error_text(await client.call_tool("get_entities", {"Names": ["Alex"], "relations-offset": 0}))
        assert "'Names': is not an argument of get_entities (did you mean 'names'?)" in text
        assert "'relations-offset': is not an argument of get_entities (did you mean 'relations_offset'?)" in text
        assert "; names: is required; it takes names, namespace, relations_offset." in text
    held = contents(tmp_path / "kb.duckdb")
    assert held["work"]["nodes"] == [("Alex", "Alex, at work", ())]
    assert held["personal"]["nodes"] == [("Alex", "Alex, my brother", ())]
    assert held["work"]["stats"]["documents"] == 0


@pytest.mark.anyio
async def test_the_memory_tools_refuse_an_unknown_top_level_key_but_ignore_unknown_keys_in_items(tmp_path):
    services = serve(tmp_path, "memory")
    async with Client(build_server(services)) as client:
        for ns in ("work", "personal"):
            await call_ok(client, "create_entities", {"entities": [
                {"name": "Globex", "entityType": "organization", "observations": []}], "namespace": ns})
        text = error_text(await client.call_tool("add_observations", {
            "observations": [{"entityName": "Globex", "contents": ["HOMESECRET meant for personal"]}],
            "Namespace": "personal"}))
        assert text == ("add_observations refused its arguments: 'Namespace': is not an argument of "
                        "add_observations (did you mean 'namespace'?); it takes observations, namespace. "
                        "Nothing was done.")
        text = error_text(await client.call_tool("delete_entities", {"entityNames": ["Globex"], "names": ["x"]}))
        assert "'names': is not an argument of delete_entities;" in text and "it takes entityNames, namespace" in text
        # Keys inside an item stay ignored, as the reference server's schemas let prompts written for it send them.
        added = await call_ok(client, "add_observations", {"observations": [
            {"entityName": "Globex", "contents": ["a fact"], "confidence": 0.9}]})
        assert added["results"][0]["addedObservations"] == ["a fact"]
        # _meta travels beside the arguments (the request's params), not among them.
        graph = await client.call_tool("read_graph", {}, meta={"progressToken": "t-1"})
        assert not graph.is_error, graph.content
    held = contents(tmp_path / "kb.duckdb")
    assert held["work"]["nodes"] == [("Globex", "", ("a fact",))]
    assert held["personal"]["nodes"] == [("Globex", "", ())]


@pytest.mark.anyio
async def test_every_tool_of_every_set_refuses_an_unknown_argument_and_changes_nothing(tmp_path):
    for tool_set in ("graphrag", "memory", "all"):
        folder = tmp_path / tool_set
        folder.mkdir()
        services = serve(folder, tool_set)
        async with Client(build_server(services)) as client:
            tools = (await client.list_tools()).tools
            if tool_set == "memory":
                for ns in ("work", "personal"):
                    await call_ok(client, "create_entities", {"entities": [
                        {"name": "Alex", "entityType": "person", "observations": []}], "namespace": ns})
            else:
                await seed_both(client)
        before = contents(folder / "kb.duckdb")
        async with Client(build_server(serve(folder, tool_set))) as client:
            for tool in tools:
                # The advertised schemas stay as they were: the listing's tokens pay for no additionalProperties.
                assert "additionalProperties" not in tool.input_schema, tool.name
                accepted = list(tool.input_schema.get("properties", {}))
                text = error_text(await client.call_tool(tool.name, {"confirm_namespace": "personal"}))
                takes = f"it takes {', '.join(accepted)}." if accepted else "it takes no arguments."
                assert text.startswith(f"{tool.name} refused its arguments: 'confirm_namespace': is not an "
                                       f"argument of {tool.name}"), text
                assert text.endswith(f"{takes} Nothing was done."), text
        assert contents(folder / "kb.duckdb") == before, tool_set


def test_the_refusal_names_exactly_the_arguments_the_tools_accept(tmp_path):
    """The check reads the advertised schemas (the shipped listing answers before the tools are built): they must
    name exactly the keys each tool's argument model takes, or a valid call would be refused (or a typo pass); but
    for the arguments only the `all` set lists (ALL_SET_ARGUMENTS), which the other sets refuse so."""
    for tool_set in ("graphrag", "memory", "all"):
        server = build_server(serve(tmp_path, tool_set))
        advertised = {tool.name: set(tool.input_schema.get("properties", {}))
                      for tool in anyio.run(server.list_tools)}
        for tool in server._tool_manager.list_tools():  # noqa: SLF001 (the SDK's registry, as core/mcp/server.py)
            taken = {field.alias or name for name, field in tool.fn_metadata.arg_model.model_fields.items()}
            all_only = set(ALL_SET_ARGUMENTS.get(tool.name, ())) if tool_set != "all" else set()
            assert advertised[tool.name] == taken - all_only, (tool_set, tool.name)


@pytest.mark.anyio
async def test_update_entitys_expected_fingerprint_is_the_all_sets_and_refused_by_the_default_set(tmp_path):
    # The web page's Edit sends it (core/ui/); the default set's listing, at its token budget, lacks it.
    from duckgraph.core.domain import browse

    for tool_set in ("graphrag", "all"):
        folder = tmp_path / tool_set
        folder.mkdir()
        services = serve(folder, tool_set)
        async with Client(build_server(services)) as client:
            await seed_both(client)
            seen = browse.run(services.knowledge_base, "entity_fields", "work", {"name": "Alex"})["fingerprint"]
            await call_ok(client, "update_entity", {"name": "Alex", "aliases": ["Al"], "namespace": "work"})
            stale = {"name": "Alex", "aliases": ["Lex"], "namespace": "work", "expected_fingerprint": seen}
            text = error_text(await client.call_tool("update_entity", stale))
            if tool_set == "graphrag":
                assert text.startswith("update_entity refused its arguments: 'expected_fingerprint': is not an "
                                       "argument of update_entity"), text
            else:
                assert text == ("Error executing tool update_entity: 'Alex' changed since it was read (another "
                                "client wrote to it); nothing was changed. Read it again and make the change to what "
                                "is stored now"), text
            found = await call_ok(client, "get_entities", {"names": ["Alex"], "namespace": "work"})
            assert found["entities"][0]["aliases"] == ["Al"], tool_set


# -- the same refusal over every way in ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_client_server_refuses_over_stdio_by_its_own_tool_set_before_forwarding(tmp_path, env):
    """B, a graphrag server, forwards to A (which runs every set, so would take memory's entityNames): the check is
    B's, so B refuses what its own listing does not offer, and A never runs the call."""
    db = tmp_path / "kb.duckdb"
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, {**env, "DUCKGRAPH_NAMESPACE": "work"}, tmp_path / "a.log") as a, \
                session(db, {**env, "DUCKGRAPH_NAMESPACE": "work"}, tmp_path / "b.log") as b:
            await seed_both(a)
            await wait_for(lambda: client_pid(tmp_path / "b.log"))
            text = error_text(await b.call_tool("delete_entities", {"names": ["Alex"], "namespaces": "personal"}))
            assert "'namespaces': is not an argument of delete_entities (did you mean 'namespace'?)" in text
            text = error_text(await b.call_tool("delete_entities", {"entityNames": ["Alex"]}))
            assert "'entityNames': is not an argument of delete_entities; names: is required; it takes names, " \
                "namespace." in text
            for namespace in ("work", "personal"):
                found = await call_ok(b, "get_entities", {"names": ["Alex"], "namespace": namespace})
                assert [e["name"] for e in found["entities"]] == ["Alex"]


@pytest.mark.anyio
async def test_over_http_the_call_is_refused_as_a_tool_error(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    for served in start_http(tmp_path, {**env, "DUCKGRAPH_DB": str(db), "DUCKGRAPH_NAMESPACE": "work"}):
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with Client(served.url) as client:
                await seed_both(client)
                result = await client.call_tool("delete_entities", {"names": ["Alex"], "namespaces": "personal"})
                assert "(did you mean 'namespace'?)" in error_text(result)
                found = await call_ok(client, "get_entities", {"names": ["Alex"], "namespace": "work"})
                assert [e["name"] for e in found["entities"]] == ["Alex"]


def test_the_web_pages_tool_endpoint_refuses_it_and_deletes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder(), namespace="work") as kb:
        kb.add_knowledge_graph([NodeInput(**ALEX("at work"))], [])
    before = contents(db)
    env = child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0", DUCKGRAPH_NAMESPACE="work")
    with running_ui(db, tmp_path / "ui.log", env) as url:
        status, _, body = request(url, "/api/tool/delete_entities", method="POST",
                                  body={"arguments": {"names": ["Alex"], "namespaces": "personal"}})
        assert status == 400, body
        assert "'namespaces': is not an argument of delete_entities (did you mean 'namespace'?)" in \
            json.loads(body)["error"]
    assert contents(db) == before
