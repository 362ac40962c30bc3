"""A server that keeps running folds its writes into the `.duckdb` file once they pause (after
settings.QUIET_CHECKPOINT_SECONDS), not only at its stop or at 256 MB of write-ahead log, which an agent's calls
reach after hours: a copy of the file alone, taken while the server runs (by a sync or backup tool), holds what was
written. The wait polls with a generous deadline: nothing here measures a speed."""

from __future__ import annotations

import os
import shutil
import time

import anyio
import duckdb
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.e2e.test_mcp_stdio import SERVE, TIMEOUT_SECONDS, call_ok

pytestmark = pytest.mark.model


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_running_server_s_writes_reach_the_file_once_they_pause(tmp_path, db_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(db_path)], env=env, cwd=tmp_path)
    wal = db_path.with_name(db_path.name + ".wal")
    copy = tmp_path / "synced" / "kb.duckdb"
    copy.parent.mkdir()
    log = tmp_path / "stderr.log"
    with log.open("w", encoding="utf-8") as errlog, anyio.fail_after(2 * TIMEOUT_SECONDS):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            written = await call_ok(client, "add_knowledge_graph", {
                "nodes": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "Analytical Engine", "type": "Machine"}],
                "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "WROTE_PROGRAM_FOR"}]})
            assert written["nodes_created"] == 2
            deadline = time.monotonic() + TIMEOUT_SECONDS
            while wal.exists() and time.monotonic() < deadline:  # DuckDB deletes the log once it is in the file
                await anyio.sleep(0.1)
            assert not wal.exists(), f"the running server kept its writes in {wal}\n{log.read_text()}"
            shutil.copyfile(db_path, copy)  # the .duckdb alone, as a sync tool copies it
            # The server goes on: it answers, and writes again.
            assert (await call_ok(client, "add_knowledge_graph", {
                "nodes": [{"name": "Charles Babbage", "type": "Person"}], "edges": []}))["nodes_created"] == 1

    with duckdb.connect(str(copy), read_only=True) as con:
        assert {row[0] for row in con.execute("SELECT name FROM nodes").fetchall()} == {"Ada Lovelace",
                                                                                         "Analytical Engine"}
        assert con.execute("SELECT count(*) FROM edges").fetchone()[0] == 1
    stderr = log.read_text(encoding="utf-8")
    assert "checkpoint" not in stderr.lower() and "Traceback" not in stderr, stderr  # no failure logged
