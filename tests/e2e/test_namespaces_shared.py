"""Servers with different default namespaces on one file: the first owns it, the others forward their calls, and
each call runs on the owner in the namespace its own client asked for (the argument, else its server's default,
its MCP roots included). Real `duckgraph serve` subprocesses over stdio, as in test_shared_file.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import ListRootsResult, Root

from duckgraph.core import sharing
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_shared_file import SERVE, TIMEOUT_SECONDS, call_ok, client_pid, env, wait_for  # noqa: F401

pytestmark = [pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets"), pytest.mark.anyio]

WRITES = 12


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def session(db: Path, env: dict[str, str], log: Path, roots: list[str] | None = None) -> AsyncIterator[Client]:
    """An MCP session with a new `duckgraph serve` child; with `roots`, the client offers them (as editors do)."""

    async def list_roots(context) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri) for uri in roots or []])

    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(db)], env=env, cwd=db.parent)
    with log.open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy",
                          list_roots_callback=list_roots if roots is not None else None) as client:
            yield client


def names_by_namespace(db: Path) -> dict[str, list[str]]:
    store = DuckDBStore(db)
    store.open()
    try:
        return {ns: sorted(n.name for n in store.list_nodes(ns, limit=100_000)) for ns in store.namespaces()}
    finally:
        store.close()


async def write_many(client: Client, prefix: str, namespace: str | None = None) -> None:
    for i in range(WRITES):
        await call_ok(client, "add_knowledge_graph", {
            "nodes": [{"name": "Shared Name", "type": prefix, "observations": [f"{prefix} fact {i}"]},
                      {"name": f"{prefix} {i}", "type": "Item"}],
            "edges": [{"source": "Shared Name", "target": f"{prefix} {i}", "type": "HAS"}],
            **({"namespace": namespace} if namespace else {})})


async def test_servers_with_different_defaults_write_to_one_file_concurrently(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, {**env, "DUCKGRAPH_NAMESPACE": "team-a"}, tmp_path / "a.log") as a, \
                session(db, {**env, "DUCKGRAPH_NAMESPACE": "team-b"}, tmp_path / "b.log") as b, \
                session(db, {**env, "DUCKGRAPH_NAMESPACE": "@roots"}, tmp_path / "r.log",
                        roots=["file:///home/dev/checkout-service"]) as r:
            await a.list_tools()
            await wait_for(lambda: client_pid(tmp_path / "b.log") and client_pid(tmp_path / "r.log"))
            async with anyio.create_task_group() as group:
                group.start_soon(write_many, a, "A")
                group.start_soon(write_many, b, "B")
                group.start_soon(write_many, r, "R")
                group.start_soon(write_many, b, "X", "extra")  # the argument wins over the default
            for client, kind in ((a, "A"), (b, "B"), (r, "R")):
                shared = (await call_ok(client, "get_entities", {"names": ["Shared Name"]}))["entities"][0]
                assert shared["type"] == kind
                assert sorted(shared["observations"]) == sorted(f"{kind} fact {i}" for i in range(WRITES))
                assert (await call_ok(client, "graph_stats", {}))["nodes"] == WRITES + 1
            listed = {n["name"]: n for n in (await call_ok(b, "list_namespaces", {}))["namespaces"]}
            assert sorted(listed) == ["checkout-service", "extra", "team-a", "team-b"]
            assert listed["team-b"]["default"] and not listed["team-a"]["default"]
            assert all(listed[ns]["entities"] == WRITES + 1 and listed[ns]["relations"] == WRITES for ns in listed)
            stats = (await a.read_resource("duckgraph://stats")).contents[0].text
            assert '"A"' in stats and '"B"' not in stats
            # A client's resource read runs in its own default namespace on the owner.
            assert '"B"' in (await b.read_resource("duckgraph://stats")).contents[0].text
            refused = await b.call_tool("add_knowledge_graph", {"nodes": [{"name": "x", "type": "T"}],
                                                                "namespace": "no spaces"})
            assert refused.is_error and "invalid namespace" in refused.content[0].text
            # Deleting one namespace through a client leaves the others.
            await call_ok(r, "delete_namespace", {"namespace": "extra", "confirm": "extra"})
            assert "extra" not in {n["name"] for n in (await call_ok(a, "list_namespaces", {}))["namespaces"]}
    found = names_by_namespace(db)
    assert sorted(found) == ["checkout-service", "team-a", "team-b"]
    for namespace, kind in (("team-a", "A"), ("team-b", "B"), ("checkout-service", "R")):
        assert found[namespace] == sorted(["Shared Name", *(f"{kind} {i}" for i in range(WRITES))])
