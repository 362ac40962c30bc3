"""A short session ended as MCP clients end it: the official client closes the server's stdin and kills the
process ~2 s later. The server must have checkpointed and closed its file by then, so that the `.duckdb` alone
(copied without its `.wal`) holds what the session wrote, and removed its socket."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

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
async def test_a_session_ended_right_after_one_write_leaves_it_in_the_duckdb_file_alone(tmp_path, db_path):
    home = tmp_path / "home"
    home.mkdir()
    # A fresh HOME: no ONNX export cached, so the warm-up is still loading or exporting the model at the end.
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "DUCKGRAPH_LOG_LEVEL": "INFO"}
    params = StdioServerParameters(command=SERVE[0], args=[*SERVE[1:], "--db", str(db_path)], env=env, cwd=tmp_path)
    log = tmp_path / "stderr.log"
    with log.open("w", encoding="utf-8") as errlog, anyio.fail_after(TIMEOUT_SECONDS):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            written = await call_ok(client, "add_knowledge_graph", {
                "nodes": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "Analytical Engine", "type": "Machine"}],
                "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "WROTE_PROGRAM_FOR"}]})
            assert written["nodes_created"] == 2
            closing = time.monotonic()
        ended = time.monotonic() - closing  # the client waits for the exit, and kills the server after 2 s

    stderr = log.read_text(encoding="utf-8")
    assert ended < 2.0, f"the server took {ended:.2f} s to exit after stdin closed\n{stderr}"
    assert "released" in stderr and "Traceback" not in stderr, stderr  # it closed the file itself, unkilled
    left = sorted(p.name for p in tmp_path.iterdir())
    assert "kb.duckdb.wal" not in left and "kb.duckdb.sock" not in left, left

    copy = tmp_path / "elsewhere" / "copy.duckdb"
    copy.parent.mkdir()
    shutil.copyfile(db_path, copy)  # the .duckdb alone, as a user copying "the database" would
    with duckdb.connect(str(copy), read_only=True) as con:
        names = {row[0] for row in con.execute("SELECT name FROM nodes").fetchall()}
    assert {"Ada Lovelace", "Analytical Engine"} <= names


def test_a_stopped_knowledge_base_is_not_opened_again_by_a_late_call(tmp_path, db_path, plugin_manager):
    """The warm-up or a call the client left running may reach the file after the server closed it for good:
    it fails, and the file stays closed (no `.wal` appears, another process can open it)."""
    from duckgraph.core.bootstrap import bootstrap
    from duckgraph.core.config import load_settings
    from duckgraph.ports import StoreError

    kb = bootstrap(load_settings(None, db=str(db_path))).knowledge_base
    kb.open()
    kb.close(final=True)
    with pytest.raises(StoreError, match="stopping"):
        kb.open()
    with pytest.raises(StoreError, match="stopping"), kb.writing(vectors=False):
        pass
    assert not Path(f"{db_path}.wal").exists()
    with duckdb.connect(str(db_path)) as con:  # not held by this process any more
        assert con.execute("SELECT count(*) FROM meta").fetchone()[0] > 0
