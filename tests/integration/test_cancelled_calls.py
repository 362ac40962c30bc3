"""A tool call's cancellation reaches the knowledge base's commits (core/mcp/tools/common.py `call`,
core/domain/cancellation.py `Cancellation`): what committed before it stays stored, and the log says so; no
commit starts after it. Run here on a real DuckDB file without the MCP session around the call (the cases where
the client cancels before the commit: tests/e2e/test_cancelled_writes.py)."""

from __future__ import annotations

import logging
import threading

import anyio
import anyio.to_thread
import pytest

from duckgraph.core.domain.model import NodeInput
from duckgraph.core.mcp.tools.common import call

WAIT_SECONDS = 30


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_call_cancelled_after_its_commit_keeps_it_and_commits_nothing_more(fake_kb, caplog):
    committed, resume, ended = threading.Event(), threading.Event(), threading.Event()

    def two_writes() -> None:  # as an extracting add_documents: the documents, then a passage's graph
        try:
            fake_kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
            committed.set()
            assert resume.wait(WAIT_SECONDS)
            fake_kb.add_knowledge_graph([NodeInput(name="Grace Hopper", type="Person")], [])
        finally:
            ended.set()

    caplog.set_level(logging.INFO, logger="duckgraph")
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call, two_writes)
        assert await anyio.to_thread.run_sync(committed.wait, WAIT_SECONDS)
        tasks.cancel_scope.cancel()
    assert "two_writes was cancelled after it committed: it is stored; it commits nothing more" in caplog.messages
    resume.set()
    assert await anyio.to_thread.run_sync(ended.wait, WAIT_SECONDS)
    with anyio.fail_after(WAIT_SECONDS):  # logged as the worker thread ends the call
        while "the cancelled two_writes stopped before its next commit: nothing more was stored" not in caplog.messages:
            await anyio.sleep(0.02)
    assert [n.name for n in fake_kb.store.find_nodes("default", {"ada lovelace", "grace hopper"})] == ["Ada Lovelace"]


@pytest.mark.anyio
async def test_a_call_that_is_not_cancelled_commits_as_before(fake_kb, caplog):
    caplog.set_level(logging.INFO, logger="duckgraph")
    added = await call(fake_kb.add_knowledge_graph, [NodeInput(name="Ada Lovelace", type="Person")], [])
    assert [n.name for n in added.nodes] == ["Ada Lovelace"] and added.nodes_created == 1
    assert not [m for m in caplog.messages if "cancel" in m]
