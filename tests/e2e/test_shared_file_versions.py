"""Servers of two duckgraph versions on one knowledge file: the second forwards no call to an owner that serves other
tools (its MCP client would check the owner's answers against the listing the second server gave it, and a tool
only one of them has would be unknown to the owner). Each call fails with the reason and the fix, said once in the
server's log too, whichever of the two owns the file; `duckgraph doctor` says it; once the other server stops, this
one takes the file over and its calls work.

Real parts: real `duckgraph serve` subprocesses on a real DuckDB file, driven over stdio by the MCP SDK's client (the
hashing embedder as plugin, as in test_shared_file.py); the other version is this code started with another tool
listing's hash (`tool_listing.surface`), as a version whose tools differ gives.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from duckgraph.core import sharing
from duckgraph.core.mcp import tool_listing
from tests.e2e.test_shared_file import (  # noqa: F401 (env is a fixture)
    SERVE,
    TIMEOUT_SECONDS,
    env,
    owner_pid,
    session,
    stop,
    wait_for,
)

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

OTHER_TOOLS = "0123456789abcdef"
#: `duckgraph serve` of a version whose tools differ: this code, with another hash of its tool listing.
OTHER_SERVE = [sys.executable, "-c", textwrap.dedent(f"""
    from duckgraph.core.mcp import tool_listing
    tool_listing.surface = lambda: {OTHER_TOOLS!r}
    from duckgraph.core.cli import main
    raise SystemExit(main())
"""), "serve"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def idle(command: list[str], db: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A server whose host never talks to it (stdin stays open): it owns the file if it is the first."""
    with log.open("a", encoding="utf-8") as errlog:
        return subprocess.Popen([*command, "--db", str(db)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=errlog, env=env, cwd=db.parent)


def refusal(owner: int, theirs: str, ours: str) -> str:
    return (f"(pid {owner}, version 0.1.0) runs another duckgraph version, which serves other tools than this one "
            f"(version 0.1.0; tools {theirs}, here {ours}). No call is sent to it")


@pytest.mark.anyio
@pytest.mark.parametrize("owner_is", ["other", "this"])
async def test_no_call_goes_to_an_owner_that_serves_other_tools(tmp_path, env, owner_is):
    db = tmp_path / "kb.duckdb"
    owner_command, client_command = (OTHER_SERVE, SERVE) if owner_is == "other" else (SERVE, OTHER_SERVE)
    theirs, ours = (OTHER_TOOLS, tool_listing.surface()) if owner_is == "other" else (tool_listing.surface(),
                                                                                      OTHER_TOOLS)
    owner = idle(owner_command, db, env, tmp_path / "owner.log")
    client_log = tmp_path / "client.log"
    try:
        await wait_for(lambda: owner_pid(db) == owner.pid)
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with session(db, env, client_log, client_command) as client:
                assert (await client.list_tools()).tools  # its own listing: answered here
                expected = refusal(owner.pid, theirs, ours)
                for tool, arguments in [("graph_stats", {}),
                                        ("add_knowledge_graph", {"nodes": [{"name": "Lena Park", "type": "Person"}]})]:
                    result = await client.call_tool(tool, arguments)
                    assert result.is_error, (tool, result)
                    text = result.content[0].text
                    assert expected in text, text
                    assert "stop that server" in text and "run the same duckgraph version" in text
                logged = [line for line in client_log.read_text(encoding="utf-8").splitlines() if " ERROR " in line]
                assert sum(expected in line for line in logged) == 1, logged  # once, not at each call

                stop(owner)  # as the error says: the waiting server takes the file over
                await wait_for(lambda: owner_pid(db) not in (None, owner.pid))
                stats = await client.call_tool("graph_stats", {})
                assert not stats.is_error, stats
                assert stats.structured_content["nodes"] == 0, "the refused write was not stored"
    finally:
        owner.kill()
        owner.wait()


@pytest.mark.anyio
async def test_doctor_says_the_owner_serves_other_tools(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    owner = idle(OTHER_SERVE, db, env, tmp_path / "owner.log")
    try:
        await wait_for(lambda: owner_pid(db) == owner.pid)
        doctor = subprocess.run([sys.executable, "-m", "duckgraph.core.cli", "doctor", "--db", str(db)],
                                capture_output=True, text=True, env=env, cwd=tmp_path, timeout=TIMEOUT_SECONDS)
    finally:
        stop(owner)
    problems = [line for line in doctor.stdout.splitlines() if line.startswith("problem:")]
    assert any(refusal(owner.pid, OTHER_TOOLS, tool_listing.surface()) in line for line in problems), doctor.stdout
    assert doctor.returncode == 1
