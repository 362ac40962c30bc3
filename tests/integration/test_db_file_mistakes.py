"""The wrong file given as the memory (--db / DUCKGRAPH_DB): a mistyped path, another program's SQLite file, a text
file, an empty file, a folder. Each is refused with one line naming the file and what to do, and nothing is
created or changed; commands that write still create a new memory.

Real parts: the CLI's `main` and `duckgraph serve` processes on real DuckDB files, SQLite files made with Python's
sqlite3, `duckgraph doctor` against a fake Ollama (tests/ollama_server.py), the MCP server through the official
client.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from duckgraph.core.cli import _parser, main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_doctor import env, use_ollama  # noqa: F401 (env is a fixture)
from tests.integration.test_transfer import cli_env  # noqa: F401 (a fixture)
from tests.ollama_server import FakeOllama

ROOT = Path(__file__).resolve().parents[2]
READING = [["stats"], ["search", "Maya"], ["changes"], ["namespaces"], ["communities", "search", "tea"],
           ["communities", "build"], ["export", "-o", "OUT"], ["backup", "OUT"]]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sqlite_file(path: Path, *, tables: bool) -> Path:
    """Another program's SQLite database: with a table and a row, or with no table left (its schema emptied)."""
    con = sqlite3.connect(path)
    if tables:
        con.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        con.execute("INSERT INTO notes (body) VALUES ('precious')")
    else:
        con.execute("PRAGMA user_version = 7")
        con.execute("CREATE TABLE t (x)")
        con.execute("DROP TABLE t")
    con.commit()
    con.close()
    assert path.stat().st_size > 0
    return path


def memory_file(path: Path) -> Path:
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Maya", type="person", observations=["likes tea"])], [])
    return path


# -- 1. a path that is not there ------------------------------------------------------------------------------


@pytest.mark.parametrize("command", READING, ids=lambda c: " ".join(c))
def test_a_command_that_reads_refuses_a_missing_file_and_creates_nothing(cli_env, tmp_path, capsys, command):
    memory_file(tmp_path / "notes" / "memory.duckdb")
    typo = tmp_path / "notse" / "memory.duckdb"
    out = tmp_path / "out.jsonl"
    argv = [str(out) if arg == "OUT" else arg for arg in command]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main([*argv, "--db", str(typo)]) == 1
    err = capsys.readouterr().err
    assert err == (f"duckgraph: no memory at {typo}: check --db / DUCKGRAPH_DB (or the config file's db); "
                   "`duckgraph doctor` shows which file is used. Nothing was created\n")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # no folder, file or export


def test_commands_that_write_still_create_the_file(cli_env, tmp_path, capsys):
    new = tmp_path / "new" / "deeper" / "kb.duckdb"
    note = tmp_path / "note.md"
    note.write_text("# Zebra migrations\n\nZebras migrate in the dry season.\n", encoding="utf-8")
    assert main(["ingest", str(note), "--db", str(new)]) == 0
    assert new.is_file()
    assert main(["stats", "--db", str(new), "--json"]) == 0
    assert '"documents": 1' in capsys.readouterr().out


# -- 2. another program's file, an empty file, a folder ---------------------------------------------------------


@pytest.mark.parametrize("tables", [True, False], ids=["sqlite", "sqlite-no-tables"])
@pytest.mark.parametrize("command", [["stats"], ["ingest", "NOTE"], ["search", "precious"], ["import", "EXPORT"]],
                         ids=lambda c: c[0])
def test_a_sqlite_file_is_refused_as_such_and_left_as_it_was(cli_env, tmp_path, capsys, tables, command):
    db = sqlite_file(tmp_path / "app.db", tables=tables)
    (tmp_path / "note.md").write_text("# a note\n", encoding="utf-8")
    (tmp_path / "kb.jsonl").write_text('{"type":"entity","name":"Maya","entityType":"person","observations":[]}\n',
                                       encoding="utf-8")
    argv = [{"NOTE": str(tmp_path / "note.md"), "EXPORT": str(tmp_path / "kb.jsonl")}.get(a, a) for a in command]
    before, files = digest(db), sorted(os.listdir(tmp_path))
    assert main([*argv, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"duckgraph: {db} is not a duckdb memory (it looks like a SQLite database): duckgraph "
                          "left it as it is.")
    assert err.count("\n") == 1 and "Traceback" not in err and "extension" not in err
    assert digest(db) == before and sorted(os.listdir(tmp_path)) == files  # no .wal, nothing written
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == (
        ["notes"] if tables else [])
    con.close()


@pytest.mark.parametrize("content, said", [
    (b"hello, this is my notes file\n", "is not a duckdb memory (it looks like a text file)"),
    ("caf\u00e9 ".encode() * 1000, "is not a duckdb memory (it looks like a text file)"),  # é cut at byte 4096
    (b"", "is empty (0 bytes): it holds no memory, and DuckDB cannot open an empty file. Delete it and duckgraph "
          "creates a new memory there"),
], ids=["text", "long-text", "empty"])
def test_a_text_or_empty_file_says_what_it_is_not_damaged(cli_env, tmp_path, capsys, content, said):
    db = tmp_path / "memory.duckdb"
    db.write_bytes(content)
    assert main(["stats", "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"duckgraph: {db} {said}") and err.count("\n") == 1, err
    assert content == b"" or "damaged" not in err
    assert db.read_bytes() == content and sorted(os.listdir(tmp_path)) == ["empty-config.toml", "memory.duckdb"]


def test_doctor_reports_a_sqlite_file_as_a_problem_without_a_traceback(env, tmp_path, capsys):
    db = sqlite_file(tmp_path / "app.db", tables=False)
    before = digest(db)
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        assert main(["doctor", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    problem = f"{db} is not a duckdb memory (it looks like a SQLite database)"
    assert f"check database: FAILED: {problem}" in out and f"problem:   {problem}" in out
    assert digest(db) == before


def test_the_memory_connection_never_fetches_an_extension(tmp_path, monkeypatch):
    """DuckDB would install and load sqlite_scanner (from extensions.duckdb.org) for a function of it; the store's
    connection has no such automatism, and vss, which the store loads itself from its package, still loads."""
    import duckdb

    monkeypatch.setenv("HOME", str(tmp_path))  # where DuckDB would install it
    store = DuckDBStore(tmp_path / "kb.duckdb", vector_index="hnsw")
    store.open()
    try:
        with pytest.raises(duckdb.CatalogException, match="sqlite_scan"):
            store._con.execute("SELECT * FROM sqlite_scan('app.db', 'notes')")
        assert store.health()["vss"]["loaded"] is True
    finally:
        store.close()
    assert not (tmp_path / ".duckdb").exists()


# -- 3. the settings and the report ----------------------------------------------------------------------------


def test_a_config_folder_is_called_a_folder(cli_env, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "conf"
    folder.mkdir()
    assert main(["stats", "--config", str(folder), "--db", str(tmp_path / "kb.duckdb")]) == 1
    assert capsys.readouterr().err == (f"duckgraph: config file {folder} is a folder: give the TOML file's path with "
                                       f"--config (DUCKGRAPH_CONFIG), e.g. {folder / 'config.toml'}\n")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(folder))
    assert main(["stats", "--db", str(tmp_path / "kb.duckdb")]) == 1
    assert f"config file {folder} is a folder" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["conf", "empty-config.toml"]


def test_doctor_does_not_call_a_database_it_cannot_create_ok(env, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    db = blocker / "kb.duckdb"
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        assert main(["doctor", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    problem = f"{db} cannot be created: {blocker} is not a writable folder for this user"
    assert f"check database: FAILED: {problem}" in out and "check database: ok" not in out
    assert f"database:  {db} (no database yet, and it cannot be created: see the problem below)" in out


def test_an_unknown_option_shows_the_commands_own_usage(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["stats", "--bogus"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: duckgraph stats ") and "[--json]" in err
    assert err.endswith("duckgraph stats: error: unrecognized arguments: --bogus\n")


def test_help_says_where_demo_writes_and_explains_every_communities_option():
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    demo_db = next(a for a in commands["demo"]._actions if a.dest == "db")
    assert "temporary file" in demo_db.help and "user data" not in demo_db.help
    stats_db = next(a for a in commands["stats"]._actions if a.dest == "db")
    assert "user data dir" in stats_db.help
    assert [a.dest for a in commands["communities"]._actions if not a.help] == []


# -- 4. serve ---------------------------------------------------------------------------------------------------


def child_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
            "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_CONFIG": str(tmp_path / "none.toml")}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_serve_on_a_folder_answers_the_handshake_and_says_so_in_each_tool_call(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    params = StdioServerParameters(command=sys.executable, args=["-m", "duckgraph.core.cli", "serve", "--db",
                                                                 str(folder)], env=child_env(tmp_path), cwd=tmp_path)
    with (tmp_path / "serve.stderr").open("w", encoding="utf-8") as errlog, anyio.fail_after(120):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for tool, arguments in (("search", {"query": "Maya"}), ("add_documents", {"documents": [
                    {"id": "d1", "text": "Maya likes tea."}]})):
                result = await client.call_tool(tool, arguments)
                assert result.is_error
                assert f"{folder} is a folder, not a file: give the store (--db, DUCKGRAPH_DB) the memory's file " \
                       f"name, e.g. {folder / 'knowledge.duckdb'}" in result.content[0].text
    assert os.listdir(folder) == []


def test_serve_in_a_terminal_says_what_it_waits_for_and_keeps_serving(tmp_path):
    """`duckgraph serve` typed in a terminal: one line on stderr says it waits for an MCP client, then it answers
    MCP on that terminal's input as it would a client's."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "duckgraph.core.cli", "serve", "--db",
                                str(tmp_path / "kb.duckdb")], stdin=secondary, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=child_env(tmp_path), cwd=tmp_path)
    os.close(secondary)

    def line(stream) -> bytes:
        """The next line of the child's stream, failing (not hanging) when none comes."""
        deadline = time.monotonic() + 60
        while not select.select([stream], [], [], 1)[0]:
            assert process.poll() is None and time.monotonic() < deadline, "no line came"
        return stream.readline()

    try:
        hint = line(process.stderr).decode()
        assert hint.startswith("duckgraph: serving MCP on standard input and output: it waits for an MCP client")
        assert "docs/clients.md" in hint
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "tty", "version": "0"}}}
        os.write(primary, json.dumps(request).encode() + b"\n")
        answer = json.loads(line(process.stdout))
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"]
    finally:
        os.write(primary, b"\x04")  # Ctrl-D: the end of its input
        try:
            process.wait(30)
        finally:
            process.kill()
            os.close(primary)
            process.stdout.close()
            process.stderr.close()
