"""Several `duckgraph serve` processes on one knowledge file, as when a chat app, an editor and a CLI agent each
spawn their own server: the first owns the file, the others forward their calls to it (core/sharing/), and one
of them takes the file over when the owner goes, without losing an acknowledged write.

Real parts: real server subprocesses on a real DuckDB file, driven over stdio by the MCP SDK's client. The
embedder is the hashing fake of tests/fakes.py, made visible to the children as an entry-point plugin (no model
is loaded).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from duckgraph.core import sharing
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.skipif(not sharing.supported(), reason="needs flock and Unix sockets")

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]
TIMEOUT_SECONDS = 120
#: What a server logs when its warm-up is done.
WARMED_UP = "knowledge base open and embedder ready"
CLIENT_LINE = re.compile(r"this server \(pid (\d+)\) is its client")
UNKNOWN_OUTCOME = "unknown whether the change was stored"

DOCUMENT = {
    "id": "doc-rubin", "title": "Vera Rubin",
    "text": "Vera Rubin was an American astronomer who worked at the Carnegie Institution for Science. With Kent "
            "Ford she measured galaxy rotation curves, the first strong evidence for dark matter.",
}
NODES = [
    {"name": "Vera Rubin", "type": "Person", "description": "American astronomer", "source_ids": ["doc-rubin"]},
    {"name": "Carnegie Institution for Science", "type": "Organization", "source_ids": ["doc-rubin"]},
    {"name": "Kent Ford", "type": "Person", "description": "American astronomer", "source_ids": ["doc-rubin"]},
]
EDGES = [
    {"source": "Vera Rubin", "target": "Carnegie Institution for Science", "type": "WORKED_AT",
     "source_ids": ["doc-rubin"]},
    {"source": "Vera Rubin", "target": "Kent Ford", "type": "COLLABORATED_WITH", "source_ids": ["doc-rubin"]},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The children's whole environment: offline, a private HOME, and the hashing embedder as plugin "fake"."""
    site = tmp_path / "site"
    dist_info = site / "duckgraph_test_fake-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: duckgraph-test-fake\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[duckgraph]\nfake = tests.fake_embedder_plugin\n")
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
        "DUCKGRAPH_EMBEDDER": "fake", "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_LOG_LEVEL": "INFO",
    }


def console_script() -> str:
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which("duckgraph", path=folder)
        if found:
            return found
    raise AssertionError("the duckgraph console script is not installed next to this Python")


@asynccontextmanager
async def session(db: Path, env: dict[str, str], log: Path, command: list[str] = SERVE) -> AsyncIterator[Client]:
    """An MCP session with a new `duckgraph serve --db db` child, its stderr in `log`."""
    params = StdioServerParameters(command=command[0], args=[*command[1:], "--db", str(db)], env=env,
                                   cwd=db.parent)
    with log.open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


def idle_server(db: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    """A server whose host never talks to it (stdin stays open): it serves the other servers if it owns the file."""
    with log.open("a", encoding="utf-8") as errlog:
        return subprocess.Popen([*SERVE, "--db", str(db)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=errlog, env=env, cwd=db.parent)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def wait_for(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await anyio.sleep(0.05)
    return value


def owner_pid(db: Path) -> int | None:
    info = sharing.holder(db)
    return info.get("pid") if info else None


def client_pid(log: Path) -> int | None:
    found = CLIENT_LINE.findall(log.read_text(encoding="utf-8")) if log.exists() else []
    return int(found[-1]) if found else None


def node_names(db: Path) -> list[str]:
    """Every entity in the file, read directly (no server running), one entry per stored row."""
    store = DuckDBStore(db)
    store.open()
    try:
        return [n.name for n in store.list_nodes("default", limit=1_000_000)]
    finally:
        store.close()


def edge_triples(db: Path) -> list[tuple[int, str, int]]:
    store = DuckDBStore(db)
    store.open()
    try:
        return [(e.source_id, e.type, e.target_id) for e in store.list_edges("default", limit=1_000_000)]
    finally:
        store.close()


async def call_ok(client: Client, tool: str, arguments: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments, **kwargs)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


def unordered(value: Any) -> Any:
    """Lists as sorted ones: the store orders types of equal count arbitrarily, from one call to the next."""
    if isinstance(value, dict):
        return {key: unordered(item) for key, item in value.items()}
    if isinstance(value, list):
        return sorted((unordered(item) for item in value), key=lambda item: json.dumps(item, sort_keys=True))
    return value


def comparable(result: Any) -> dict[str, Any]:
    """A tool result with its JSON text parsed (dicts then compare without order, as for the stats' types)."""
    dumped = result.model_dump()
    for item in dumped["content"]:
        try:
            item["text"] = json.loads(item["text"])
        except (KeyError, ValueError):
            pass
    return dumped


def loaded_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


# -- a second server is a client of the first -----------------------------------------------------------------


@pytest.mark.anyio
async def test_a_second_server_is_a_client_of_the_first_with_the_same_results_and_errors(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, env, a_log) as a, session(db, env, b_log, [console_script(), "serve"]) as b:
            a_tools = (await a.list_tools()).tools
            b_tools = (await b.list_tools()).tools
            assert [t.model_dump() for t in b_tools] == [t.model_dump() for t in a_tools]
            a_pid = owner_pid(db)
            b_pid = await wait_for(lambda: client_pid(b_log))
            assert a_pid and b_pid and a_pid != b_pid
            assert f"held by duckgraph pid {a_pid}" in b_log.read_text()

            # Writes through the client are seen through the owner, and the other way round.
            progress: list[tuple] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append((done, total, message))

            docs = await call_ok(b, "add_documents", {"documents": [DOCUMENT]}, progress_callback=on_progress)
            assert docs["documents"][0]["chunk_ids"]
            assert progress and progress[-1][0] == progress[-1][1], "progress is relayed from the owner"
            added = await call_ok(b, "add_knowledge_graph", {"nodes": NODES[:2], "edges": EDGES[:1]})
            assert (added["nodes_created"], added["edges_created"]) == (2, 1)
            seen = await call_ok(a, "get_entities", {"names": ["Vera Rubin"]})
            assert [e["name"] for e in seen["entities"]] == ["Vera Rubin"]
            added = await call_ok(a, "add_knowledge_graph", {"nodes": NODES[2:], "edges": EDGES[1:]})
            assert (added["nodes_created"], added["edges_created"]) == (1, 1)
            seen = await call_ok(b, "get_entities", {"names": ["Kent Ford", "Vera Rubin"]})
            assert {e["name"] for e in seen["entities"]} == {"Kent Ford", "Vera Rubin"}

            # The same call gives the same result through either server, errors included.
            calls = [
                ("search", {"query": "Where did Vera Rubin work?"}),
                ("graph_stats", {}),
                ("find_paths", {"source": "Kent Ford", "target": "Carnegie Institution for Science"}),
                ("get_entities", {"names": ["Vera Rubin", "Nobody"]}),
                # model-fixable failures: a domain error, an argument the schema refuses, a missing entity
                ("add_knowledge_graph", {"edges": [{"source": "Vera Rubin", "target": "Nobody", "type": "KNOWS"}]}),
                ("search", {"query": "Vera Rubin", "hops": 9}),
                ("merge_entities", {"sources": ["Nobody"], "target": "Vera Rubin"}),
                ("add_knowledge_graph", {"nodes": [{"name": "Kent Ford", "type": "Person"}],
                                         "edges": [{"source": "Kent Ford", "target": "Kent Ford", "type": "IS",
                                                    "weight": float("nan")}]}),
                ("no_such_tool", {}),
            ]
            for tool, arguments in calls:
                through_a = await a.call_tool(tool, arguments)
                through_b = await b.call_tool(tool, arguments)
                assert comparable(through_b) == comparable(through_a), tool
            errors = [(await b.call_tool(t, args)) for t, args in calls[4:]]
            assert all(e.is_error for e in errors)
            assert "the target entity 'Nobody' does not exist" in errors[0].content[0].text
            for uri in ("duckgraph://stats", "duckgraph://schema"):
                through_a, through_b = await a.read_resource(uri), await b.read_resource(uri)
                assert [unordered(json.loads(c.text)) for c in through_b.contents] == \
                    [unordered(json.loads(c.text)) for c in through_a.contents], uri

            # `duckgraph doctor` says who owns the file, and reads its health through the owner.
            doctor = subprocess.run([*SERVE[:-1], "doctor", "--json", "--db", str(db)], capture_output=True,
                                    text=True, env=env, timeout=60)
            report = json.loads(doctor.stdout)
            assert report["sharing"]["owner_pid"] == a_pid, report
            assert report["sharing"]["client_pids"] == [b_pid], report
            assert report["store"]["path"] == str(db) and report["problems"] == [], report
            text = subprocess.run([*SERVE[:-1], "doctor", "--db", str(db)], capture_output=True, text=True,
                                  env=env, timeout=60).stdout
            assert f"owned by the duckgraph server pid {a_pid}" in text

            # `duckgraph backup` cannot open the held file itself: the owner makes the copy.
            copy = tmp_path / "copy.duckdb"
            backup = subprocess.run([*SERVE[:-1], "backup", str(copy), "--json", "--db", str(db)],
                                    capture_output=True, text=True, env=env, timeout=60)
            assert backup.returncode == 0, backup.stderr
            assert json.loads(backup.stdout)["nodes"] == len(NODES)
            assert sorted(node_names(copy)) == sorted(n["name"] for n in NODES)
            # Not onto the file's own write-ahead log or lock, forced or not (issue 29): the owner refuses.
            for own in (db.with_name("kb.duckdb.wal"), sharing.lock_path(db)):
                before = own.read_bytes() if own.exists() else None
                refused = subprocess.run([*SERVE[:-1], "backup", own.name, "--force", "--db", str(db)],
                                         capture_output=True, text=True, env=env, timeout=60, cwd=db.parent)
                assert refused.returncode == 1 and f"{own} is the knowledge file's" in refused.stderr, refused.stderr
                assert (own.read_bytes() if own.exists() else None) == before
            assert owner_pid(db) == a_pid

            # The client has forwarded every call: it never opened the file nor embedded anything.
            if Path(f"/proc/{b_pid}/maps").exists():
                libraries = loaded_libraries(b_pid)
                assert "duckdb" not in libraries, [line for line in libraries.splitlines() if "duckdb" in line]

    for log in (a_log, b_log):
        assert "Traceback" not in log.read_text()
    assert sharing.holder(db) is None, "the lock is released when the servers stop"
    assert not sharing.socket_path(db).exists()
    assert sorted(node_names(db)) == sorted(n["name"] for n in NODES)


@pytest.mark.anyio
async def test_a_client_with_the_memory_tool_set_and_one_with_another_namespace(tmp_path, env):
    """A client exposes its own tool set (the owner runs any of them); a client configured with another namespace
    works in that namespace on the owner, never in the owner's."""
    db = tmp_path / "kb.duckdb"
    memory_env = {**env, "DUCKGRAPH_TOOLS": "memory"}
    other_env = {**env, "DUCKGRAPH_NAMESPACE": "elsewhere"}
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with session(db, env, tmp_path / "a.log") as a, \
                session(db, memory_env, tmp_path / "m.log") as m, session(db, other_env, tmp_path / "o.log") as o:
            await a.list_tools()
            assert "create_entities" in {t.name for t in (await m.list_tools()).tools}
            await wait_for(lambda: client_pid(tmp_path / "m.log") and client_pid(tmp_path / "o.log"))
            created = await call_ok(m, "create_entities", {"entities": [
                {"name": "Ada Lovelace", "entityType": "person", "observations": ["wrote the first program"]},
                {"name": "Analytical Engine", "entityType": "machine", "observations": []}]})
            assert [e["name"] for e in created["entities"]] == ["Ada Lovelace", "Analytical Engine"]
            await call_ok(m, "create_relations", {"relations": [
                {"from": "Ada Lovelace", "to": "Analytical Engine", "relationType": "programmed"}]})
            # An end that does not exist is created (type 'unknown'), as the reference keeps such a relation.
            kept = await call_ok(m, "create_relations", {"relations": [
                {"from": "Ada Lovelace", "to": "Nobody", "relationType": "knows"}]})
            assert "'Nobody' did not exist" in kept["relations"][0]["note"]
            opened = await call_ok(m, "open_nodes", {"names": ["Ada Lovelace"]})
            assert opened["entities"][0]["observations"] == ["wrote the first program"]
            # The memory tools' resource is read on the owner too, in the client's namespace.
            [graph] = (await m.read_resource("memory://knowledge-graph")).contents
            assert json.loads(graph.text) == await call_ok(m, "read_graph", {"limit": 1_000})
            seen = await call_ok(a, "get_entities", {"names": ["Ada Lovelace"]})
            assert seen["entities"][0]["type"] == "person"

            assert (await call_ok(o, "graph_stats", {}))["nodes"] == 0
            await call_ok(o, "add_knowledge_graph", {"nodes": [{"name": "Ada Lovelace", "type": "Novelist"}]})
            assert (await call_ok(o, "get_entities", {"names": ["Ada Lovelace"]}))["entities"][0]["type"] == "Novelist"
            assert (await call_ok(a, "get_entities", {"names": ["Ada Lovelace"]}))["entities"][0]["type"] == "person"
            assert (await call_ok(a, "graph_stats", {"namespace": "elsewhere"}))["nodes"] == 1
    assert sorted(node_names(db)) == ["Ada Lovelace", "Analytical Engine", "Nobody"]  # the default namespace's


# -- the owner killed: the client takes over -------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_client_takes_over_when_the_owner_is_killed(tmp_path, env):
    """Reads in flight are sent again; the write the owner was running is reported as unknown (never as done);
    writes waiting for their turn go to the new owner; every acknowledged write is in the file."""
    db = tmp_path / "kb.duckdb"
    owner = idle_server(db, env, tmp_path / "owner.log")
    acked: set[str] = set()
    unknown: set[str] = set()
    failures: list[str] = []
    try:
        a_pid = await wait_for(lambda: owner_pid(db))
        assert a_pid == owner.pid
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with session(db, env, tmp_path / "b.log") as b:
                for i in range(5):
                    await call_ok(b, "add_knowledge_graph", {"nodes": [{"name": f"before {i}", "type": "Item"}]})
                    acked.add(f"before {i}")

                async def write(name: str) -> None:
                    result = await b.call_tool("add_knowledge_graph", {"nodes": [{"name": name, "type": "Item"}]})
                    if not result.is_error:
                        acked.add(name)
                    elif UNKNOWN_OUTCOME in result.content[0].text:
                        unknown.add(name)
                    else:
                        failures.append(result.content[0].text)

                async def read(i: int) -> None:
                    result = await b.call_tool("get_entities", {"names": [f"before {i % 5}"]})
                    if result.is_error:
                        failures.append(result.content[0].text)

                async with anyio.create_task_group() as group:
                    for i in range(60):
                        group.start_soon(write, f"during {i}")
                        group.start_soon(read, i)
                    await wait_for(lambda: len(acked) >= 8)  # mid-run
                    owner.send_signal(signal.SIGKILL)

                assert failures == []
                assert len(unknown) <= 1, unknown  # only the write that was running; the queued ones went on
                assert len(acked) + len(unknown) == 65
                b_pid = client_pid(tmp_path / "b.log")
                assert owner_pid(db) == b_pid, "the client now owns the file"
                assert f"(pid {a_pid}) has stopped: this process (pid {b_pid}) takes it over" in \
                    (tmp_path / "b.log").read_text()

                for i in range(5):
                    await call_ok(b, "add_knowledge_graph", {"nodes": [{"name": f"after {i}", "type": "Item"}]})
                    acked.add(f"after {i}")
                found = await call_ok(b, "get_entities", {"names": sorted(acked)})
                assert found["not_found"] == []
    finally:
        owner.kill()
        owner.wait()
    stored = node_names(db)
    assert len(stored) == len(set(stored)), "no write applied twice"
    assert acked <= set(stored), "every acknowledged write is in the file"
    assert set(stored) <= acked | unknown


@pytest.mark.anyio
async def test_a_client_that_takes_over_warms_up_as_an_owner_does(tmp_path, env):
    """A client loads no model (the owner embeds); once it owns the file, its warm-up opens the file and readies
    the embedder, as an owner's does at start."""
    db = tmp_path / "kb.duckdb"
    warm = {**env, "DUCKGRAPH_WARM_UP": "1"}
    owner_log, log = tmp_path / "owner.log", tmp_path / "b.log"
    owner = idle_server(db, warm, owner_log)
    try:
        await wait_for(lambda: owner_pid(db) == owner.pid)
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with session(db, warm, log) as b:
                await b.list_tools()
                b_pid = await wait_for(lambda: client_pid(log))
                await wait_for(lambda: WARMED_UP in owner_log.read_text())
                owner.kill()
                owner.wait()
                await wait_for(lambda: owner_pid(db) == b_pid)
                await wait_for(lambda: WARMED_UP in log.read_text())
                await call_ok(b, "add_knowledge_graph", {"nodes": [{"name": "after", "type": "Item"}]})
    finally:
        owner.kill()
        owner.wait()
    text = log.read_text()
    assert text.count(WARMED_UP) == 1 and text.index(WARMED_UP) > text.index("takes it over"), text
    assert "Traceback" not in text and "warm-up failed" not in text, text


# -- four servers under load --------------------------------------------------------------------------------


SERVERS = 4
OPS_PER_SERVER = 1_000
IN_FLIGHT = 8
#: Generous: on a 2-core machine the owner's DuckDB work (one connection, so one call at a time) sets the pace.
LOAD_TIMEOUT_SECONDS = 600


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.anyio
async def test_four_servers_on_one_file_under_mixed_load(tmp_path, env):
    """4 servers x 1,000 tool calls, all at once (8 in flight per server). 1 in 10 is a write (an entity; every
    third write also a relation to the server's previous entity); the reads check that what was acknowledged, to
    this server or another, is seen: 2 in 10 a get_entities (it must be found), 3 in 10 a search for its name (it
    must be an anchor), 2 in 10 a find_paths between two of them, 2 in 10 a graph_stats (it must count at least
    the writes acknowledged before it was sent). Then every acknowledged write is in the file exactly once."""
    db = tmp_path / "kb.duckdb"
    acked: dict[int, list[str]] = {k: [] for k in range(SERVERS)}
    edges: list[tuple[str, str]] = []
    failures: list[str] = []
    counts = {"write": 0, "read": 0}
    started = time.perf_counter()
    with anyio.fail_after(LOAD_TIMEOUT_SECONDS):
        async with AsyncExitStack() as stack:
            clients: list[Client] = [await stack.enter_async_context(session(db, env, tmp_path / "s0.log"))]
            await clients[0].list_tools()
            owner = await wait_for(lambda: owner_pid(db))  # the first one started owns the file

            for k in range(1, SERVERS):  # one after the other: a session is entered and left in this task
                clients.append(await stack.enter_async_context(session(db, env, tmp_path / f"s{k}.log")))
                await clients[-1].list_tools()
            pids = [owner] + [await wait_for(lambda k=k: client_pid(tmp_path / f"s{k}.log"))
                              for k in range(1, SERVERS)]
            cpu_before = [cpu_seconds(pid) for pid in pids] if Path("/proc/self/stat").exists() else []
            ready = time.perf_counter()

            async def run(k: int, client: Client) -> None:
                limit = anyio.Semaphore(IN_FLIGHT)
                rng = random.Random(k)

                async def write(i: int) -> None:
                    name = f"s{k}-{i}"
                    arguments: dict[str, Any] = {"nodes": [{"name": name, "type": "Item",
                                                            "description": f"written by server {k}"}]}
                    previous = acked[k][-1] if acked[k] and i % 30 == 0 else None
                    if previous:
                        arguments["edges"] = [{"source": name, "target": previous, "type": "FOLLOWS"}]
                    result = await client.call_tool("add_knowledge_graph", arguments)
                    counts["write"] += 1
                    if result.is_error:
                        failures.append(result.content[0].text)
                        return
                    acked[k].append(name)
                    if previous:
                        edges.append((name, previous))

                def acknowledged(mine: bool) -> list[str]:
                    return list(acked[k]) if mine else [n for j in acked if j != k for n in acked[j]]

                async def read_entity(i: int) -> None:
                    pool = acknowledged(mine=i % 10 == 1)
                    names = rng.sample(pool, 1) if pool else ["nothing yet"]
                    found = await client.call_tool("get_entities", {"names": names})
                    counts["read"] += 1
                    if found.is_error or (pool and found.structured_content["not_found"]):
                        failures.append(f"get_entities {names}: {found.content[0].text[:200]}")

                async def search(i: int) -> None:
                    pool = acknowledged(mine=i % 2 == 0)
                    name = rng.choice(pool) if pool else "nothing yet"
                    found = await client.call_tool("search", {"query": name, "hops": 1, "max_passages": 0})
                    counts["read"] += 1
                    anchors = [] if found.is_error else [a["name"] for a in found.structured_content["anchors"]]
                    if found.is_error or (pool and name not in anchors):
                        failures.append(f"search {name}: {found.content[0].text[:200]}")

                async def find_paths() -> None:
                    pool = acknowledged(mine=True)
                    if len(pool) < 2:
                        pool = ["nothing yet", "nothing either"]
                    source, target = rng.sample(pool, 2)
                    paths = await client.call_tool("find_paths", {"source": source, "target": target})
                    counts["read"] += 1
                    if paths.is_error != (pool[0] == "nothing yet"):  # unknown names are the model's to fix
                        failures.append(f"find_paths {source} {target}: {paths.content[0].text[:200]}")

                async def read_stats() -> None:
                    floor = sum(len(names) for names in acked.values())
                    stats = await client.call_tool("graph_stats", {})
                    counts["read"] += 1
                    if stats.is_error or stats.structured_content["nodes"] < floor:
                        failures.append(f"graph_stats {stats.content[0].text[:200]} below {floor}")

                async def op(i: int) -> None:
                    async with limit:
                        if i % 10 == 0:
                            await write(i)
                        elif i % 10 <= 2:
                            await read_entity(i)
                        elif i % 10 <= 5:
                            await search(i)
                        elif i % 10 <= 7:
                            await find_paths()
                        else:
                            await read_stats()

                async with anyio.create_task_group() as group:
                    for i in range(OPS_PER_SERVER):
                        group.start_soon(op, i)

            async with anyio.create_task_group() as group:
                for k, client in enumerate(clients):
                    group.start_soon(run, k, client)
            finished = time.perf_counter()
            cpu = [round(cpu_seconds(pid) - before, 1) for pid, before in zip(pids, cpu_before)]
            assert owner_pid(db) == owner
    print(f"\n{SERVERS} servers x {OPS_PER_SERVER} calls: servers up in {ready - started:.1f} s, "
          f"{counts['write'] + counts['read']} calls ({counts['write']} writes) in {finished - ready:.1f} s; "
          f"CPU seconds meanwhile: owner {cpu[:1]}, clients {cpu[1:]}, this process {time.process_time():.1f}")
    assert failures == [], failures[:5]
    assert counts == {"write": SERVERS * OPS_PER_SERVER // 10, "read": SERVERS * OPS_PER_SERVER * 9 // 10}
    stored = node_names(db)
    assert sorted(stored) == sorted(n for names in acked.values() for n in names), "each write once, none lost"
    triples = edge_triples(db)
    assert len(triples) == len(set(triples)) == len(edges)


# -- kill -9 the owner again and again -------------------------------------------------------------------------


ROUNDS = 5


@pytest.mark.anyio
async def test_owners_killed_again_and_again_lose_no_acknowledged_write(tmp_path, env):
    """Two writing sessions and spare idle servers; every second the owner, whichever it is, gets SIGKILL (a
    killed writer's session is reopened on a new server). At the end every acknowledged write is in the file,
    once, and nothing else is there but writes whose outcome was reported as unknown."""
    db = tmp_path / "kb.duckdb"
    acked: set[str] = set()
    unknown: set[str] = set()
    failures: list[str] = []
    spares: list[subprocess.Popen] = []
    killed: list[int] = []
    sequence = itertools.count()
    done = anyio.Event()

    async def writer(w: int) -> None:
        sessions = 0
        while not done.is_set():
            sessions += 1
            try:
                async with session(db, env, tmp_path / f"w{w}.log") as client:

                    async def write_loop() -> None:
                        while not done.is_set():
                            name = f"w{w}-{next(sequence)}"
                            try:
                                result = await client.call_tool("add_knowledge_graph",
                                                                {"nodes": [{"name": name, "type": "Item"}]})
                            except BaseException:  # this session's server was killed with the call in flight
                                unknown.add(name)
                                raise
                            if not result.is_error:
                                acked.add(name)
                            elif UNKNOWN_OUTCOME in result.content[0].text:
                                unknown.add(name)
                            else:
                                failures.append(result.content[0].text)

                    async with anyio.create_task_group() as group:
                        for _ in range(3):
                            group.start_soon(write_loop)
            except Exception:  # noqa: BLE001 - the server of this session was the owner and was killed
                await anyio.sleep(0.1)

    try:
        with anyio.fail_after(TIMEOUT_SECONDS * 2):
            spares.append(idle_server(db, env, tmp_path / "spare.log"))
            await wait_for(lambda: owner_pid(db))
            async with anyio.create_task_group() as group:
                for w in range(2):
                    group.start_soon(writer, w)
                await wait_for(lambda: len(acked) >= 10)
                for _ in range(ROUNDS):
                    spares.append(idle_server(db, env, tmp_path / "spare.log"))
                    await anyio.sleep(1.0)
                    before = len(acked)
                    victim = await wait_for(lambda: owner_pid(db))
                    os.kill(victim, signal.SIGKILL)
                    killed.append(victim)
                    await wait_for(lambda: owner_pid(db) not in (None, victim))
                    await wait_for(lambda: len(acked) > before + 3)  # writes go on under the new owner
                done.set()
            async with session(db, env, tmp_path / "final.log") as client:
                await call_ok(client, "add_knowledge_graph", {"nodes": [{"name": "final", "type": "Item"}]})
                acked.add("final")
    finally:
        for spare in spares:
            stop(spare)
    print(f"\nkilled {len(killed)} owners; {len(acked)} writes acknowledged, {len(unknown)} with unknown outcome")
    assert len(killed) == ROUNDS and failures == [], failures[:5]
    assert sharing.holder(db) is None
    stored = node_names(db)
    assert len(stored) == len(set(stored)), "no write applied twice"
    assert acked <= set(stored), f"acknowledged writes lost: {sorted(acked - set(stored))[:10]}"
    assert set(stored) <= acked | unknown


# -- a program that is not duckgraph holds the file ----------------------------------------------------------


HOLDER = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('holding', flush=True); sys.stdin.read()"


@pytest.mark.anyio
async def test_a_file_held_by_another_program_is_reported_with_its_name_and_pid(tmp_path, env):
    db = tmp_path / "kb.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with anyio.fail_after(TIMEOUT_SECONDS):
            async with session(db, env, tmp_path / "a.log") as a, session(db, env, tmp_path / "b.log") as b:
                assert (await a.list_tools()).tools and (await b.list_tools()).tools  # the handshake still works
                await wait_for(lambda: client_pid(tmp_path / "b.log"))
                for client in (a, b):  # the owner, and its client through it
                    result = await client.call_tool("add_knowledge_graph",
                                                    {"nodes": [{"name": "Ada", "type": "Person"}]})
                    assert result.is_error
                    message = result.content[0].text
                    assert str(db) in message and f"(PID {holder.pid})" in message, message
                    assert "locked" in message and "internal error" not in message
        stats = subprocess.run([*SERVE[:-1], "stats", "--db", str(db)], capture_output=True, text=True, env=env,
                               timeout=60)
        assert stats.returncode == 1
        assert str(db) in stats.stderr and f"(PID {holder.pid})" in stats.stderr, stats.stderr
        assert "Traceback" not in stats.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


@pytest.mark.anyio
async def test_a_command_refused_a_file_a_duckgraph_server_holds_names_that_server_once(tmp_path, env):
    """The lock error alone spoke of "another program" that duckgraph does not share with, and a second line then
    of a duckgraph server: one message now names the server and what to do."""
    db = tmp_path / "kb.duckdb"
    warm = {**env, "DUCKGRAPH_WARM_UP": "1"}  # the owner opens the file at start
    log = tmp_path / "owner.log"
    owner = idle_server(db, warm, log)
    try:
        await wait_for(lambda: owner_pid(db) == owner.pid)
        await wait_for(lambda: WARMED_UP in log.read_text(), timeout=TIMEOUT_SECONDS)
        stats = subprocess.run([*SERVE[:-1], "stats", "--db", str(db)], capture_output=True, text=True, env=env,
                               timeout=60)
    finally:
        stop(owner)
    assert stats.returncode == 1
    assert stats.stderr == (
        f"duckgraph: {db} is in use by a duckgraph MCP server (`duckgraph serve`, pid {owner.pid}, which an MCP "
        "client started): use the memory through that client or `duckgraph ui` (which works beside it), or stop "
        "it. `duckgraph doctor` and `duckgraph "
        "backup` work while it runs.\n")
