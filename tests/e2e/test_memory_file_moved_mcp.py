"""A server's memory file deleted while it runs (`rm -rf` of its folder), seen by an MCP client: DuckDB keeps
writing the file it opened, so before this was checked the writes were acknowledged and vanished with the process,
and the server exited 0 with nothing on stderr. Now each write is refused with what happened and what to do
(including how to copy the deleted file out of the running server), the refusal is logged, reads still answer,
and a new server started on the same path keeps its writes when the old one stops.

Real parts: `duckgraph serve` subprocesses over stdio, driven by the MCP SDK's client, on real DuckDB files; the
embedder is the hashing fake of tests/fakes.py as an entry-point plugin (no model is loaded).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from duckgraph.core import sharing
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_shared_file import call_ok, session
from tests.e2e.ui_server import child_env

pytestmark = [pytest.mark.anyio,
              pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0", DUCKGRAPH_LOG_LEVEL="INFO")


def graph(name: str) -> dict:
    return {"nodes": [{"name": name, "type": "Person", "description": f"{name} was written"}]}


def stored_names(db: Path) -> set[str]:
    store = DuckDBStore(db)
    store.open()
    try:
        return {record.name for record in store.list_nodes("default")}
    finally:
        store.close()


async def test_writes_to_a_deleted_memory_are_refused_and_its_copy_can_be_rescued(tmp_path: Path, env: dict[str, str]) -> None:
    db, log = tmp_path / "notes" / "mem.duckdb", tmp_path / "serve.log"
    db.parent.mkdir()
    async with session(db, env, log) as client:
        await call_ok(client, "add_knowledge_graph", graph("Before Move"))
        shutil.rmtree(db.parent)
        refusals = [await client.call_tool("add_knowledge_graph", graph("After Move")),
                    await client.call_tool("add_documents", {"documents": [{"id": "doc-after",
                                                                             "text": "A note written after. " * 40}]})]
        for result in refusals:
            assert result.is_error
            assert (f"the memory file {db} was deleted while this server ran; nothing was written. What it held is "
                    "only in this server's open copy now, lost when the server stops") in result.content[0].text
        found = await call_ok(client, "get_entities", {"names": ["Before Move", "After Move"]})
        assert [entity["name"] for entity in found["entities"]] == ["Before Move"]  # reads answer; nothing added
        # What the refusal says to do, done while the server runs: copy the deleted file (and its log) out of it.
        copy = re.search(r"`(cp /proc/\d+/fd/\d+ RESCUED/mem\.duckdb[^`]*)`", refusals[0].content[0].text)[1]
        rescued = tmp_path / "rescued"
        rescued.mkdir()
        subprocess.run(copy.replace("RESCUED", str(rescued)), shell=True, check=True, timeout=60)
    written = log.read_text(encoding="utf-8")
    assert f"write refused: the memory file {db} was deleted while this server ran" in written
    assert not db.parent.exists()  # the server made nothing there, not even on stopping
    assert stored_names(rescued / "mem.duckdb") == {"Before Move"}


async def test_a_new_server_on_the_path_of_a_deleted_memory_keeps_its_writes(tmp_path: Path, env: dict[str, str]) -> None:
    """The old server still holds the deleted file when a new one starts a memory at the same path. Stopping the old
    one must not touch the new file: DuckDB's checkpoint on closing deletes the write-ahead log at the path by name,
    which is now the new file's, holding its last writes (lost if the new server is then killed)."""
    db = tmp_path / "notes" / "mem.duckdb"
    db.parent.mkdir()
    deleted, new_written, old_stopped = anyio.Event(), anyio.Event(), anyio.Event()

    async def new_server() -> None:  # a task of its own: the SDK's sessions end in the order they began, per task
        await deleted.wait()
        async with session(db, env, tmp_path / "new.log") as new:
            await call_ok(new, "add_knowledge_graph", graph("New Note"))
            pid = json.loads(db.with_name(db.name + ".lock").read_text())["pid"]  # the new file's owner
            new_written.set()
            await old_stopped.wait()
            assert db.with_name(db.name + ".wal").exists()  # its last write, in its log alone
            os.kill(pid, signal.SIGKILL)  # so that nothing but that log keeps it

    with anyio.fail_after(300):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(new_server)
            async with session(db, env, tmp_path / "old.log") as old:
                await call_ok(old, "add_knowledge_graph", graph("Old Note"))
                shutil.rmtree(db.parent)
                db.parent.mkdir()  # made again by hand (the new server would make it; the session starts in it)
                deleted.set()
                await new_written.wait()
                refused = await old.call_tool("add_knowledge_graph", graph("Old Again"))
                assert refused.is_error and (f"the memory file {db} was deleted while this server ran, and another "
                                             "file is there now; nothing was written") in refused.content[0].text
            old_stopped.set()
    assert stored_names(db) == {"New Note"}
