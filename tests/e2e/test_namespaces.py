"""Several memories in one file (namespaces), through the official MCP client against the real server, the real
DuckDB file and the real default model: isolation, deleting a namespace, names refused, and the default taken
from the client's MCP roots."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import ListRootsResult, Root

from duckgraph.core.bootstrap import Services, bootstrap
from duckgraph.core.config import load_settings
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.core.mcp.server import build_server
from duckgraph.ports import InvalidInputError

pytestmark = [pytest.mark.model, pytest.mark.anyio]

#: The same names in both namespaces, with facts that differ: nothing of one may show in the other.
FACTS = {
    "alpha": {
        "nodes": [
            {"name": "Orion Project", "type": "Project", "description": "a telescope control system in Rust",
             "observations": ["deadline is in March"]},
            {"name": "Dana Whitfield", "type": "Person", "description": "lead engineer of the telescope software"},
            {"name": "Kestrel Labs", "type": "Organization", "description": "builds observatory hardware"},
        ],
        "edges": [
            {"source": "Dana Whitfield", "target": "Orion Project", "type": "LEADS"},
            {"source": "Orion Project", "target": "Kestrel Labs", "type": "FUNDED_BY"},
        ],
        "document": {"id": "notes", "title": "Orion notes",
                     "text": "The Orion Project moves the telescope mount with a Rust control loop."},
        "word": "telescope",
    },
    "beta": {
        "nodes": [
            {"name": "Orion Project", "type": "Campaign", "description": "a bakery marketing campaign",
             "observations": ["launch party with sourdough tasting"]},
            {"name": "Dana Whitfield", "type": "Person", "description": "pastry chef and campaign owner"},
            {"name": "Zephyrine Bakery", "type": "Organization", "description": "bakes sourdough bread"},
        ],
        "edges": [
            {"source": "Dana Whitfield", "target": "Orion Project", "type": "OWNS"},
            {"source": "Orion Project", "target": "Zephyrine Bakery", "type": "PROMOTES"},
        ],
        "document": {"id": "notes", "title": "Orion campaign",
                     "text": "The Orion campaign of Zephyrine Bakery offers sourdough tastings to pastry lovers."},
        "word": "sourdough",
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def make_services(folder: Path, db: Path, embedder, plugin_manager, **settings: Any) -> Services:
    config = folder / "config.toml"
    config.write_text("", encoding="utf-8")
    return bootstrap(load_settings(config, env={}, db=str(db), warm_up=False, **settings),
                     plugin_manager=plugin_manager, embedder=embedder)


@pytest.fixture
def services(tmp_path: Path, db_path: Path, plugin_manager, minilm) -> Services:
    return make_services(tmp_path, db_path, minilm, plugin_manager, tools="all")


def reopened(services: Services):
    """A knowledge base on the same file (a server's lifespan closes its own for good)."""
    return bootstrap(services.settings, plugin_manager=services.plugin_manager,
                     embedder=services.knowledge_base.embedder).knowledge_base


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


async def fill(client: Client) -> None:
    for namespace, facts in FACTS.items():
        await call_ok(client, "add_documents", {"documents": [facts["document"]], "namespace": namespace})
        nodes = [{**n, "source_ids": ["notes"]} for n in facts["nodes"]]
        await call_ok(client, "add_knowledge_graph", {"nodes": nodes, "edges": facts["edges"],
                                                      "namespace": namespace})


def words(value: Any) -> str:
    """The result as lower-case text, without the query it repeats."""
    if isinstance(value, dict):
        value = {key: item for key, item in value.items() if key != "query"}
    return json.dumps(value, ensure_ascii=False).lower()


async def test_two_namespaces_with_the_same_names_never_show_each_other(services: Services) -> None:
    async with Client(build_server(services, tool_set="all")) as client:
        await fill(client)
        for mine, other in (("alpha", "beta"), ("beta", "alpha")):
            ns = {"namespace": mine}
            theirs = FACTS[other]["word"]
            # Both channels of search (the vector and the keyword one), the expansion and the passage walk: a
            # query made of the other namespace's own words finds nothing of it.
            for query in (f"{theirs} Orion Project", "Dana Whitfield", FACTS[other]["document"]["text"]):
                found = await call_ok(client, "search", {"query": query, **ns})
                assert theirs not in words(found), (mine, query)
            mine_found = await call_ok(client, "search", {"query": "Orion Project", **ns})
            assert FACTS[mine]["word"] in words(mine_found)
            entities = await call_ok(client, "get_entities", {"names": ["Orion Project", "Dana Whitfield"], **ns})
            assert {e["type"] for e in entities["entities"]} == {n["type"] for n in FACTS[mine]["nodes"][:2]}
            assert theirs not in words(entities)
            other_org = FACTS[other]["nodes"][2]["name"]
            paths = await client.call_tool("find_paths", {"source": "Dana Whitfield", "target": other_org, **ns})
            assert paths.is_error and other_org in paths.content[0].text
            stats = await call_ok(client, "graph_stats", ns)
            assert (stats["nodes"], stats["edges"], stats["documents"]) == (3, 2, 1)
            for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "Orion"}),
                                    ("open_nodes", {"names": ["Orion Project", other_org]})):
                graph = await call_ok(client, tool, {**arguments, **ns})
                assert theirs not in words(graph) and other_org.lower() not in words(graph), (mine, tool)
                assert "orion project" in words(graph)
        # A call that names no namespace works in the server's default one, which holds nothing here.
        assert (await call_ok(client, "graph_stats", {}))["nodes"] == 0
        # A search there (or in a misspelt namespace) says that it holds nothing, not only that nothing is
        # relevant; one in a namespace that holds things but nothing relevant does not.
        for ns in ({}, {"namespace": "aplha"}):
            empty = await call_ok(client, "search", {"query": "Orion Project", **ns})
            assert empty["nothing_relevant"] and "holds nothing yet" in empty["hint"]
            assert empty["text"].endswith(empty["hint"]) and "list_namespaces" in empty["text"]
        unrelated = await call_ok(client, "search", {"query": "What is my blood type?", "namespace": "alpha"})
        assert unrelated["nothing_relevant"] and unrelated["hint"] is None
        listed = (await call_ok(client, "list_namespaces", {}))["namespaces"]
        assert [(n["name"], n["entities"], n["relations"], n["documents"], n["default"]) for n in listed] == [
            ("alpha", 3, 2, 1, False), ("beta", 3, 2, 1, False), ("default", 0, 0, 0, True)]
        assert all(n["last_write"] for n in listed[:2]) and listed[2]["last_write"] is None

    # Export of one namespace holds it alone; imported into another, it is a copy that stays apart.
    kb = reopened(services)
    out = io.StringIO()
    summary = export_jsonl(kb, out, namespace="beta")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert summary.nodes == 3 and {line["namespace"] for line in lines if "namespace" in line} == {"beta"}
    assert "telescope" not in out.getvalue()
    import_lines(kb, out.getvalue().splitlines(), namespace="gamma")
    assert kb.stats("gamma")["nodes"] == 3 and kb.stats("alpha")["nodes"] == 3
    with pytest.raises(InvalidInputError, match="holds the namespaces"):  # several namespaces do not fit in one
        both = io.StringIO()
        export_jsonl(kb, both)
        import_lines(kb, both.getvalue().splitlines(), namespace="delta")
    assert kb.stats("delta")["nodes"] == 0


async def test_resources_follow_the_default_namespace(tmp_path: Path, db_path: Path, plugin_manager, minilm) -> None:
    services = make_services(tmp_path, db_path, minilm, plugin_manager, namespace="beta")
    async with Client(build_server(services)) as client:
        await fill(client)
        stats = json.loads((await client.read_resource("duckgraph://stats")).contents[0].text)
        schema = json.loads((await client.read_resource("duckgraph://schema")).contents[0].text)
        assert stats["nodes"] == 3 and "Campaign" in stats["node_types"]
        assert schema["namespace"] == "beta" and "Project" not in words(schema)
        assert "telescope" not in words(await call_ok(client, "search", {"query": "Orion Project"}))


async def test_deleting_a_namespace_removes_its_rows_vectors_and_index_entries_only(services: Services) -> None:
    kb = services.knowledge_base
    async with Client(build_server(services, tool_set="all")) as client:
        await fill(client)
        await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Kept", "type": "Thing"}]})
        store = kb.store
        beta_nodes = [n.id for n in store.list_nodes("beta")]
        beta_edges = [e.id for e in store.list_edges("beta")]
        beta_chunks = [c.id for c in store.document_chunks("beta", ["notes"])]
        assert store.keyword_search("node", "Zephyrine", 5, "beta")

        refused = await client.call_tool("delete_namespace", {"namespace": "beta", "confirm": "alpha"})
        assert refused.is_error and "repeat its name" in refused.content[0].text
        assert kb.stats("beta")["nodes"] == 3
        missing = await client.call_tool("delete_namespace", {"namespace": "nowhere", "confirm": "nowhere"})
        assert missing.is_error and "no namespace 'nowhere'" in missing.content[0].text

        deleted = await call_ok(client, "delete_namespace", {"namespace": "beta", "confirm": "beta"})
        assert (deleted["entities"], deleted["relations"], deleted["documents"]) == (3, 2, 1)
        assert kb.stats("beta") == {**kb.stats("beta"), "nodes": 0, "edges": 0, "documents": 0, "chunks": 0}
        for kind, ids in (("node", beta_nodes), ("edge", beta_edges), ("chunk", beta_chunks)):
            assert store.get_vectors(kind, ids) == {}, kind
        assert store.keyword_search("node", "Zephyrine", 5, "beta") == []
        assert store.keyword_search("chunk", "sourdough", 5, "beta") == []
        assert "sourdough" not in words(await call_ok(client, "search", {"query": "sourdough", "namespace": "beta"}))
        # The others are untouched.
        assert "telescope" in words(await call_ok(client, "search", {"query": "Orion", "namespace": "alpha"}))
        assert kb.stats("alpha")["nodes"] == 3 and kb.stats("default")["nodes"] == 1
        assert [n["name"] for n in (await call_ok(client, "list_namespaces", {}))["namespaces"]] == [
            "alpha", "default"]

        # The default namespace is emptied, and stays listed as the default.
        emptied = await call_ok(client, "delete_namespace", {"namespace": "default", "confirm": "default"})
        assert "emptied" in emptied["message"]
        listed = (await call_ok(client, "list_namespaces", {}))["namespaces"]
        assert [(n["name"], n["entities"], n["default"]) for n in listed] == [("alpha", 3, False),
                                                                               ("default", 0, True)]
    # Gone from the file too, not only from the mirror.
    kb = reopened(services)
    assert kb.stats("beta")["nodes"] == 0 and kb.stats("alpha")["nodes"] == 3


async def test_deleting_a_namespace_removes_its_communities_and_reports(services: Services) -> None:
    store = services.knowledge_base.store
    async with Client(build_server(services, tool_set="all")) as client:
        await fill(client)
        for namespace in FACTS:
            assert (await call_ok(client, "build_communities", {"namespace": namespace}))["communities"] >= 1
        found = await call_ok(client, "global_search", {"query": "sourdough bakery", "namespace": "beta"})
        assert "sourdough" in words(found["reports"])  # the reports' index of beta is now held in memory
        alpha = [(c.id, c.title) for c in store.communities("alpha")]

        await call_ok(client, "delete_namespace", {"namespace": "beta", "confirm": "beta"})
        assert store.communities("beta") == [] and store.community_build("beta") is None
        assert "beta" not in store._reports._held  # noqa: SLF001 (its reports' index is let go too)
        assert "sourdough" not in words(await call_ok(client, "global_search", {"query": "sourdough bakery",
                                                                                "namespace": "beta"}))
        assert [(c.id, c.title) for c in store.communities("alpha")] == alpha  # the others untouched
    kb = reopened(services).open()
    assert kb.store.communities("beta") == [] and kb.store.community_build("beta") is None
    assert [(c.id, c.title) for c in kb.store.communities("alpha")] == alpha
    kb.close()


@pytest.mark.parametrize("bad", ["", "a b", "x" * 101, "proj;drop", "ünïcode", "@roots"])
async def test_a_bad_namespace_is_refused_and_nothing_is_written(services: Services, bad: str) -> None:
    async with Client(build_server(services, tool_set="all")) as client:
        for tool, arguments in (("add_knowledge_graph", {"nodes": [{"name": "A", "type": "Thing"}]}),
                                ("create_entities", {"entities": [{"name": "A", "entityType": "thing",
                                                                   "observations": []}]}),
                                ("search", {"query": "A"}), ("delete_namespace", {"confirm": bad})):
            result = await client.call_tool(tool, {**arguments, "namespace": bad})
            assert result.is_error and "namespace" in result.content[0].text, (tool, result.content)
            assert len(bad) <= 100 or bad not in result.content[0].text  # a long one by its length only
        assert (await call_ok(client, "list_namespaces", {}))["namespaces"][0]["entities"] == 0
    kb = reopened(services)
    with pytest.raises(InvalidInputError, match="invalid namespace"):  # the domain refuses it too
        kb.add_knowledge_graph([], [], namespace=bad or " ")
    assert kb.open().store.namespaces() == []


def roots_of(*uris: str):
    async def list_roots(context) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri) for uri in uris])

    return list_roots


async def test_the_default_namespace_is_the_clients_first_root_folder(tmp_path: Path, db_path: Path,
                                                                      plugin_manager, minilm, caplog) -> None:
    services = make_services(tmp_path, db_path, minilm, plugin_manager, namespace="@roots",
                             namespace_fallback="shared")

    def server():  # a server's session closes its knowledge base for good: one server per session
        return build_server(bootstrap(services.settings, plugin_manager=plugin_manager, embedder=minilm))

    # mode="legacy": the handshake-era protocol that hosts speak today, in which a server may ask for roots during
    # a call (the modern in-process path has no back-channel for it).
    node = {"nodes": [{"name": "Build system", "type": "Tool"}]}
    async with Client(server(), mode="legacy",
                      list_roots_callback=roots_of("file:///home/ana/My%20App", "file:///tmp/other")) as a:
        await call_ok(a, "add_knowledge_graph", node)
        assert (await call_ok(a, "graph_stats", {}))["nodes"] == 1
        stats = json.loads((await a.read_resource("duckgraph://stats")).contents[0].text)
        assert stats["nodes"] == 1
    async with Client(server(), mode="legacy", list_roots_callback=roots_of("file:///work/api-server/")) as b:
        await call_ok(b, "add_knowledge_graph", node)
        await call_ok(b, "add_knowledge_graph", {"nodes": [{"name": "Gateway", "type": "Service"}]})
        listed = (await call_ok(b, "list_namespaces", {}))["namespaces"]
        assert [(n["name"], n["entities"], n["default"]) for n in listed] == [
            ("My-App", 1, False), ("api-server", 2, True)]
        assert (await call_ok(b, "graph_stats", {"namespace": "My-App"}))["nodes"] == 1
    with caplog.at_level("WARNING"):
        async with Client(server(), mode="legacy") as c:  # offers no roots: the configured fallback
            await call_ok(c, "add_knowledge_graph", node)
            assert (await call_ok(c, "graph_stats", {}))["nodes"] == 1
        async with Client(server(), mode="legacy", list_roots_callback=roots_of()) as d:  # offers roots, lists none
            assert (await call_ok(d, "graph_stats", {}))["nodes"] == 1
    assert "'shared' (the fallback" in caplog.text and "does not offer MCP roots" in caplog.text
    assert "lists no roots" in caplog.text
    assert reopened(services).stats("shared")["nodes"] == 1


async def test_a_client_of_the_newest_protocol_gets_the_fallback_with_one_warning(
        tmp_path: Path, db_path: Path, plugin_manager, minilm, caplog) -> None:
    """On the newest protocol each call comes on a session of its own and the server cannot ask for roots: the
    fallback serves every call, and the log says why once, not at every call."""
    services = make_services(tmp_path, db_path, minilm, plugin_manager, namespace="@roots",
                             namespace_fallback="shared")
    with caplog.at_level("WARNING"):
        async with Client(build_server(services), list_roots_callback=roots_of("file:///work/api-server")) as client:
            await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "Gateway", "type": "Service"}]})
            for _ in range(3):
                assert (await call_ok(client, "graph_stats", {}))["nodes"] == 1
            listed = (await call_ok(client, "list_namespaces", {}))["namespaces"]
            assert [(n["name"], n["default"]) for n in listed] == [("shared", True)]
        other_file = make_services(tmp_path, tmp_path / "other.duckdb", minilm, plugin_manager, namespace="@roots")
        async with Client(build_server(other_file)) as other:
            for _ in range(3):  # offers no roots at all
                await call_ok(other, "graph_stats", {})
    warnings = [r.getMessage() for r in caplog.records if "the fallback" in r.getMessage()]
    assert len(warnings) == 2, warnings
    assert "lets a server ask nothing during a call" in warnings[0] and "does not offer MCP roots" in warnings[1]
