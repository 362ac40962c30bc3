"""A call cancelled by its MCP client (notifications/cancelled) on a server that forwards it to the owner of the
file: the owner must stop it as it stops its own cancelled calls (none of its commits starts from then on).
Before, the forwarding server only stopped waiting, and the owner went on and stored the cancelled write.

Real parts: two `duckgraph serve` subprocesses on one real DuckDB file, driven over stdio by the official MCP
client (the fixtures of test_shared_file.py), with a slow hashing embedder so that add_documents runs for
seconds at the owner.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.test_shared_file import (  # noqa: F401 (fixtures)
    SERVE,
    anyio_backend,
    call_ok,
    client_pid,
    env,
    owner_pid,
    sharing,
    wait_for,
)

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

TIMEOUT_SECONDS = 120
#: 30 documents of ~7 passages each: 7 embedding batches of 32, each 0.5 s with the slow embedder.
DOCUMENTS = [{"id": f"hangar-{i}", "title": f"Hangar {i}",
              "text": "\n\n".join(f"Zeppelin hangar {i} section {j} houses the airship LZ {i}{j}. " * 8
                                  for j in range(8))} for i in range(30)]


@pytest.fixture
def slow_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with the slow embedder as plugin "slow", and chosen."""
    site = Path(env["PYTHONPATH"].split(":")[0])
    dist_info = site / "duckgraph_test_slow-0.1.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: duckgraph-test-slow\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[duckgraph]\nslow = tests.slow_embedder_plugin\n")
    return {**env, "DUCKGRAPH_EMBEDDER": "slow", "SLOW_EMBEDDER_SECONDS": "0.5"}


@asynccontextmanager
async def session(db: Path, env: dict[str, str], log: Path) -> AsyncIterator[Client]:
    """As test_shared_file.session, in the handshake-era mode where cancelling a call sends notifications/cancelled."""
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(db)], env=env, cwd=db.parent)
    with log.open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            yield client


def lines(log: Path, pattern: str) -> list[str]:
    return [line for line in log.read_text(encoding="utf-8").splitlines() if re.search(pattern, line)]


@pytest.mark.anyio
async def test_a_forwarded_add_documents_cancelled_by_its_client_is_not_stored(tmp_path, slow_env):
    db = tmp_path / "kb.duckdb"
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, slow_env, a_log) as a, session(db, slow_env, b_log) as b:
            await a.list_tools()
            a_pid = owner_pid(db)
            b_pid = await wait_for(lambda: client_pid(b_log))
            assert a_pid and b_pid and a_pid != b_pid

            embedding = anyio.Event()

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                embedding.set()

            async with anyio.create_task_group() as tasks:
                async def calling() -> None:
                    await b.call_tool("add_documents", {"documents": DOCUMENTS}, progress_callback=on_progress)
                    raise AssertionError("the cancelled add_documents answered")

                tasks.start_soon(calling)
                await embedding.wait()  # the owner runs it (its progress came back through b)
                tasks.cancel_scope.cancel()  # the client sends notifications/cancelled to b

            # Wait until the owner says how the cancelled call ended, or (before: it was never cancelled) until
            # the documents are stored.
            ended = r"the cancelled call \(add_documents\) for another server (stopped|finished)"
            while not lines(a_log, ended):
                if (await call_ok(a, "graph_stats", {}))["documents"]:
                    break
                await anyio.sleep(0.1)
            stats = await call_ok(b, "graph_stats", {})
            assert (stats["documents"], stats["chunks"]) == (0, 0), "the cancelled add_documents was stored"
            assert lines(b_log, r"call \d+ \(add_documents\) was cancelled: the server that owns the file "
                                rf"\(pid {a_pid}\) is told to stop it")
            assert lines(a_log, r"call \(add_documents\) for another server was cancelled before it committed: "
                                r"nothing was stored")
            assert lines(a_log, r"the cancelled call \(add_documents\) for another server stopped before it "
                                r"committed: nothing was stored")

            # The connection to the owner is still good: the same call, not cancelled, is stored.
            added = await call_ok(b, "add_documents", {"documents": DOCUMENTS[:2]})
            assert len(added["documents"]) == 2
            assert (await call_ok(a, "graph_stats", {}))["documents"] == 2
    for log in (a_log, b_log):
        assert "Traceback" not in log.read_text()
