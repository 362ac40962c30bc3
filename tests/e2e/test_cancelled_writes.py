"""A write the client cancels (notifications/cancelled: a user who presses stop, a host that times out) gets no
answer, as MCP says, and stores nothing unless it had committed already; the server log says which. The calls run
on worker threads that cannot be stopped midway: before, a cancelled add_documents of 100 documents was stored
all the same, and the host, told nothing, could send it again.

The official client drives the real server in memory over the handshake-era protocol (mode="legacy": cancelling
the call's scope sends notifications/cancelled), on a real DuckDB file with the real model."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from duckgraph.core.bootstrap import Services
from duckgraph.core.mcp.server import build_server
from tests.e2e.test_mcp_inmemory import make_services

pytestmark = pytest.mark.model

WAIT_SECONDS = 30
COMMON = "duckgraph.core.mcp.tools.common"  # the logger that says what a cancelled call did


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def services(tmp_path, db_path, plugin_manager, minilm) -> Services:
    return make_services(tmp_path, db_path, minilm, plugin_manager)


class Gate:
    """Wraps a function so that, once armed, its next call on a worker thread says it arrived and waits for the
    test to open the gate (before the wrapped function runs, or after it with `after=True`)."""

    def __init__(self, function: Callable[..., Any], *, after: bool = False) -> None:
        self._function, self._after = function, after
        self.armed = False
        self.arrived = threading.Event()
        self.opened = threading.Event()
        self.thread: int | None = None  # the worker thread of the call held
        self.calls = 0  # calls while armed

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.armed or threading.current_thread().name != "AnyIO worker thread":
            return self._function(*args, **kwargs)
        self.calls += 1
        result = self._function(*args, **kwargs) if self._after else None
        if not self.arrived.is_set():
            self.thread = threading.get_ident()
            self.arrived.set()
            assert self.opened.wait(WAIT_SECONDS), "the test never opened the gate"
        return result if self._after else self._function(*args, **kwargs)


async def wait_for(caplog: pytest.LogCaptureFixture, found: Callable[[logging.LogRecord], bool], what: str
                   ) -> logging.LogRecord:
    with anyio.fail_after(WAIT_SECONDS):
        while True:
            for record in list(caplog.records):
                if record.name == COMMON and found(record):
                    return record
            await anyio.sleep(0.02)
    raise AssertionError(what)  # pragma: no cover (fail_after raises first)


async def cancel_at_gate(client: Client, caplog: pytest.LogCaptureFixture, gate: Gate, tool: str,
                         arguments: dict[str, Any]) -> None:
    """Call `tool` and cancel the call through the client once it reaches `gate`; returns once the server has
    taken the cancellation (it logs it, before and after this change: only what it says differs)."""
    gate.armed = True
    async with anyio.create_task_group() as tasks:
        async def calling() -> None:
            await client.call_tool(tool, arguments)
            raise AssertionError(f"the cancelled {tool} answered")

        tasks.start_soon(calling)
        assert await anyio.to_thread.run_sync(gate.arrived.wait, WAIT_SECONDS), f"{tool} never reached the gate"
        tasks.cancel_scope.cancel()  # the client sends notifications/cancelled
    await wait_for(caplog, lambda r: "cancelled" in r.getMessage() and r.thread != gate.thread,
                   f"the server never took the cancellation of {tool}")


async def ended(caplog: pytest.LogCaptureFixture, gate: Gate) -> None:
    """Wait until the worker thread of the cancelled call has said how it ended (after it committed, or not)."""
    await wait_for(caplog, lambda r: r.thread == gate.thread, "the cancelled call never ended")


async def stats(client: Client) -> dict[str, Any]:
    result = await client.call_tool("graph_stats", {})
    assert not result.is_error, result
    return result.structured_content


def said(caplog: pytest.LogCaptureFixture, pattern: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == COMMON and re.search(pattern, r.getMessage())]


@pytest.mark.anyio
async def test_a_cancelled_add_documents_stores_nothing_and_stops_embedding(services, minilm, monkeypatch, caplog):
    """Cancelled while the model embeds the first of four batches: nothing is stored, the other batches are not
    embedded, the log says so, and the server answers the next calls, whose writes are stored."""
    gate = Gate(minilm.embed_documents)
    monkeypatch.setattr(minilm, "embed_documents", gate)
    documents = [{"id": f"hangar-{i}", "text": f"Zeppelin hangar {i} houses the airship LZ {i}."} for i in range(100)]
    caplog.set_level(logging.INFO, logger="duckgraph")
    async with Client(build_server(services), mode="legacy") as client:
        await cancel_at_gate(client, caplog, gate, "add_documents", {"documents": documents})
        gate.opened.set()
        await ended(caplog, gate)
        assert (await stats(client))["documents"] == 0  # before: 100, stored after the cancellation
        assert (await stats(client))["chunks"] == 0
        assert gate.calls == 1, "the embedding went on after the cancellation"  # 100 passages: 4 batches of 32
        assert said(caplog, r"^call \d+ \(add_documents\) was cancelled before it committed: nothing was stored$")
        assert said(caplog, r"^the cancelled call \d+ \(add_documents\) stopped before it committed: nothing was "
                            r"stored$")

        added = await client.call_tool("add_documents", {"documents": documents[:3]})
        assert not added.is_error, added
        assert (await stats(client))["documents"] == 3
        found = await client.call_tool("search", {"query": "Which airship does hangar 2 house?"})
        assert "hangar-2" in {p["document_id"] for p in found.structured_content["passages"]}


SEED = {"nodes": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "Charles Babbage", "type": "Person"}],
        "edges": [{"source": "Ada Lovelace", "target": "Charles Babbage", "type": "WORKED_WITH"}]}


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments"), [
    ("add_knowledge_graph", {"nodes": [{"name": "Grace Hopper", "type": "Person"}],
                             "edges": [{"source": "Grace Hopper", "target": "Ada Lovelace", "type": "ADMIRED"}]}),
    ("delete_entities", {"names": ["Charles Babbage"]}),
    ("delete_relations", {"relations": [{"source": "Ada Lovelace", "target": "Charles Babbage",
                                         "type": "WORKED_WITH"}]}),
])
async def test_a_write_cancelled_while_it_waits_for_its_turn_changes_nothing(services, monkeypatch, caplog, tool,
                                                                              arguments):
    """Another write holds the file (here: the test) while the call waits for its turn; the client cancels it.
    When its turn comes it must not commit: before, the entity was added or deleted all the same."""
    kb = services.knowledge_base
    caplog.set_level(logging.INFO, logger="duckgraph")
    async with Client(build_server(services), mode="legacy") as client:
        seeded = await client.call_tool("add_knowledge_graph", SEED)
        assert not seeded.is_error, seeded
        before = await stats(client)
        gate = Gate(kb.writing)  # says when the call reaches the write path, where it waits for the turn
        gate.opened.set()
        monkeypatch.setattr(kb, "writing", gate)
        turn = kb.writes_paused()
        turn.__enter__()  # the other write
        try:
            await cancel_at_gate(client, caplog, gate, tool, arguments)
        finally:
            turn.__exit__(None, None, None)  # the call's turn comes
        await ended(caplog, gate)
        after = await stats(client)
        assert (after["nodes"], after["edges"]) == (before["nodes"], before["edges"]) == (2, 1)
        assert said(caplog, rf"^call \d+ \({tool}\) was cancelled before it committed: nothing was stored$")
        assert said(caplog, rf"^the cancelled call \d+ \({tool}\) stopped before it committed: nothing was stored$")

        gate.armed = False
        done = await client.call_tool(tool, arguments)  # the same call, not cancelled, is stored
        assert not done.is_error, done
        assert (await stats(client))["nodes"] == {"add_knowledge_graph": 3, "delete_entities": 1,
                                                  "delete_relations": 2}[tool]


@pytest.mark.anyio
async def test_a_write_cancelled_while_it_commits_is_stored_and_the_log_says_so(services, monkeypatch, caplog):
    """A commit under way is not undone: the client learns nothing, so the log is where the user reads that it
    is stored (and need not be sent again)."""
    store = services.knowledge_base.store
    gate = Gate(store.write, after=True)  # holds the call once the store has committed its transaction
    monkeypatch.setattr(store, "write", gate)
    caplog.set_level(logging.INFO, logger="duckgraph")
    async with Client(build_server(services), mode="legacy") as client:
        await cancel_at_gate(client, caplog, gate, "add_knowledge_graph", SEED)
        gate.opened.set()
        await ended(caplog, gate)
        assert (await stats(client))["nodes"] == 2
        assert said(caplog, r"^call \d+ \(add_knowledge_graph\) was cancelled while it commits: what it commits is "
                            r"stored")
        assert said(caplog, r"^the cancelled call \d+ \(add_knowledge_graph\) finished after its cancellation: what "
                            r"it committed is stored$")
