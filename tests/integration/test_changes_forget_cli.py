"""`duckgraph changes forget`: the record of what was deleted or changed (texts the memory no longer holds: a property's
old value, an observation deleted) is forgotten from the command line, all of it or that of a span, in one
namespace; the other lines stay; after `duckgraph compact` the file holds none of its texts. Refused while a server
holds the file, and with the options of a listing. Real `duckgraph` processes on a real DuckDB file, with the
hashing embedder of tests/fakes.py as an entry-point plugin (see tests/e2e/test_shared_file.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_shared_file import WARMED_UP, env, idle_server, owner_pid, stop, wait_for  # noqa: F401 (env)
from tests.fakes import HashingEmbedder

DUCKGRAPH = [sys.executable, "-m", "duckgraph.core.cli"]
SECRET, KEPT = "ZEPHYRQUAIL", "MARROWGLEN"


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DUCKGRAPH, *args], env=env, capture_output=True, text=True, timeout=120)


def file_bytes(db: Path) -> bytes:
    """The file and its write-ahead log, if any."""
    return b"".join(path.read_bytes() for path in (db, db.with_name(db.name + ".wal")) if path.exists())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Lena's diagnosis kept as a property and an observation, both since changed: only the record holds it. The
    namespace `work` has a record of its own."""
    path = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Lena", type="person", properties={"dx": SECRET},
                                          observations=[f"has {SECRET} cancer", "likes tea"])], [])
        time.sleep(0.01)
        kb.curation.update_entity("Lena", kb.namespace, properties={"dx": "none"},
                                  remove_observations=[f"has {SECRET} cancer"])
        kb.add_knowledge_graph([NodeInput(name="Ada", type="person", properties={"team": KEPT})], [],
                               namespace="work")
        time.sleep(0.01)
        kb.curation.update_entity("Ada", "work", properties={"team": "search"})
    return path


def test_the_record_is_forgotten_and_a_compacted_file_keeps_none_of_its_texts(db: Path, env: dict[str, str]) -> None:
    listed = run(env, "changes", "--db", str(db))
    assert f"properties changed: Lena [person]: dx: {SECRET} -> none" in listed.stdout, listed.stderr
    assert f"observations deleted: Lena [person]: has {SECRET} cancer" in listed.stdout
    assert SECRET.encode() in file_bytes(db)  # the check below can see the word where it is

    done = run(env, "changes", "forget", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("forgot 2 lines of the record of what was deleted or changed in the namespace 'default'; "
                           "their texts stay in the file's free blocks until `duckgraph compact`\n")
    after = run(env, "changes", "--db", str(db)).stdout
    assert SECRET not in after
    # The lines read from what the memory holds stay.
    assert [line.split(" UTC ", 1)[1] for line in after.splitlines()] == [
        "entity updated: Lena [person]", "entity created: Lena [person]"]
    assert KEPT in run(env, "changes", "--db", str(db), "--namespace", "work").stdout  # another namespace's stays

    compacted = run(env, "compact", "--db", str(db))
    assert compacted.returncode == 0, compacted.stderr
    assert SECRET.encode() not in file_bytes(db)
    assert KEPT.encode() in file_bytes(db)
    again = run(env, "changes", "forget", "--db", str(db), "--json")
    assert json.loads(again.stdout) == {"namespace": "default", "forgotten": 0}


def test_forget_until_a_moment_keeps_the_later_lines(tmp_path: Path, env: dict[str, str]) -> None:
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Lena", type="person", properties={"dx": "first"})], [])
        time.sleep(0.01)
        kb.curation.update_entity("Lena", kb.namespace, properties={"dx": "second"})
        time.sleep(0.01)
        moment = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        time.sleep(0.01)
        kb.curation.update_entity("Lena", kb.namespace, properties={"dx": "third"})

    done = run(env, "changes", "forget", "--until", moment, "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("forgot 1 line of the record of what was deleted or changed in the namespace ")
    changed = [line for line in run(env, "changes", "--db", str(db)).stdout.splitlines() if "properties" in line]
    assert [line.split(" UTC ", 1)[1] for line in changed] == [
        "properties changed: Lena [person]: dx: second -> third"]


def test_a_listings_options_are_refused_and_nothing_is_forgotten(db: Path, env: dict[str, str]) -> None:
    refused = run(env, "changes", "forget", "--limit", "5", "--db", str(db))
    assert refused.returncode == 2
    assert ("changes forget takes no --limit: it forgets every line of the span (--since, --until) or of the "
            "namespace; nothing was forgotten") in refused.stderr
    empty = run(env, "changes", "forget", "--since", "2024-06-01", "--until", "2024-06-01", "--db", str(db))
    assert empty.returncode == 1 and "until (2024-06-01) must be after since (2024-06-01)" in empty.stderr
    assert SECRET in run(env, "changes", "--db", str(db)).stdout


def test_forget_is_refused_while_a_server_holds_the_file(db: Path, env: dict[str, str], tmp_path: Path) -> None:
    owner = idle_server(db, {**env, "DUCKGRAPH_WARM_UP": "1"}, tmp_path / "owner.log")  # it opens the file at start

    async def held() -> None:
        await wait_for(lambda: owner_pid(db) == owner.pid)
        await wait_for(lambda: WARMED_UP in (tmp_path / "owner.log").read_text(), timeout=120)

    try:
        anyio.run(held)
        refused = run(env, "changes", "forget", "--db", str(db))
    finally:
        stop(owner)
    assert refused.returncode == 1
    assert f"{db} is in use by a duckgraph MCP server" in refused.stderr, refused.stderr
    assert SECRET in run(env, "changes", "--db", str(db)).stdout
