"""Hosts whose environments differ share one knowledge file whose path is too long for a Unix socket beside it.

The owner's socket then lies in a runtime folder that each process picks from its own environment: a host with
XDG_RUNTIME_DIR (a desktop session) listens in `$XDG_RUNTIME_DIR/duckgraph/`, one without it (cron, ssh, an MCP
host that clears its environment) would look in `$TMPDIR/duckgraph-UID/`. The owner writes where it listens into
the lock file and the others connect there, whichever took the file over.

Real parts: real `duckgraph serve` subprocesses with different environments on a real DuckDB file, driven over stdio
by the MCP SDK's client (the hashing embedder as plugin, as in test_shared_file.py), and the real `duckgraph doctor`
and `duckgraph backup` from a third environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from duckgraph.core import sharing
from duckgraph.core.sharing.lock import MAX_SOCKET_PATH_BYTES
from tests.e2e.test_shared_file import (  # noqa: F401 (env is a fixture)
    SERVE,
    TIMEOUT_SECONDS,
    env,
    idle_server,
    owner_pid,
    session,
    stop,
    wait_for,
)

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

#: Well under OWNER_WAIT_SECONDS (30 s), which a client that looks in the wrong folder waits before it fails.
ANSWER_SECONDS = 20


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def folders() -> Iterator[dict[str, Path]]:
    """Short runtime and temporary folders of the hosts (a socket path must fit in 100 bytes)."""
    made = {name: Path(tempfile.mkdtemp(prefix=f"dg-{name}-", dir="/tmp")) for name in ("xdg", "tmp_b", "tmp_c")}
    yield made
    for folder in made.values():
        shutil.rmtree(folder, ignore_errors=True)


def long_db(tmp_path: Path) -> Path:
    folder = tmp_path / ("a-rather-long-folder-name-for-notes/" * 3)
    folder.mkdir(parents=True)
    db = folder / "memory.duckdb"
    assert len(os.fsencode(str(db) + ".sock")) > MAX_SOCKET_PATH_BYTES
    return db


def text(result) -> str:
    return result.content[0].text


@pytest.mark.anyio
async def test_hosts_with_and_without_a_runtime_folder_share_a_file_with_a_long_path(tmp_path, env, folders):
    db = long_db(tmp_path)
    with_xdg = {**env, "XDG_RUNTIME_DIR": str(folders["xdg"]), "TMPDIR": str(folders["tmp_c"])}
    without = {**env, "TMPDIR": str(folders["tmp_b"])}  # no XDG_RUNTIME_DIR, as under cron or ssh

    host_a = idle_server(db, with_xdg, tmp_path / "a.log")
    try:
        await wait_for(lambda: owner_pid(db) == host_a.pid)
        announced = Path(json.loads(sharing.lock_path(db).read_text())["socket"])
        assert announced.parent == folders["xdg"] / "duckgraph"
        await wait_for(announced.is_socket)
        async with session(db, without, tmp_path / "b.log") as host_b:
            with anyio.fail_after(ANSWER_SECONDS):
                added = await host_b.call_tool("add_knowledge_graph",
                                               {"nodes": [{"name": "From B", "type": "Person"}]})
                assert not added.is_error, text(added)
                found = await host_b.call_tool("search", {"query": "From B"})
            assert not found.is_error and "From B" in text(found), text(found)
            assert f"is held by duckgraph pid {host_a.pid}" in (tmp_path / "b.log").read_text()  # B is a client

            # The commands that ask the owner, run where no XDG_RUNTIME_DIR is set.
            doctor = subprocess.run([*SERVE[:-1], "doctor", "--json", "--db", str(db)], capture_output=True,
                                    text=True, env=without, timeout=TIMEOUT_SECONDS)
            report = json.loads(doctor.stdout)
            assert report["sharing"]["owner_pid"] == host_a.pid, report["sharing"]
            copy = tmp_path / "copy.duckdb"
            backup = subprocess.run([*SERVE[:-1], "backup", str(copy), "--db", str(db)], capture_output=True,
                                    text=True, env=without, timeout=TIMEOUT_SECONDS)
            assert backup.returncode == 0 and copy.is_file(), backup.stderr

            # A stops: B takes the file over and listens in its own folder, which a host with XDG_RUNTIME_DIR
            # would not pick; such a host finds it all the same.
            stop(host_a)
            await wait_for(lambda: owner_pid(db) not in (None, host_a.pid))
            announced = Path(json.loads(sharing.lock_path(db).read_text())["socket"])
            assert announced.parent == folders["tmp_b"] / f"duckgraph-{os.getuid()}"
            await wait_for(announced.is_socket)
            async with session(db, with_xdg, tmp_path / "c.log") as host_c:
                with anyio.fail_after(ANSWER_SECONDS):
                    found = await host_c.call_tool("search", {"query": "From B"})
                assert not found.is_error and "From B" in text(found), text(found)
                assert f"is held by duckgraph pid {owner_pid(db)}" in (tmp_path / "c.log").read_text()
    finally:
        stop(host_a)
