"""A --db (DUCKGRAPH_DB) that names no usable memory file, in ways a path check misses: a memory cut short (a
partial copy), a named pipe or a device, a symbolic link to nothing, a path with a blank or a control character at
its ends, and a config folder named through a variable. Each is said in one line, without a traceback or a hang,
and nothing is created or changed.

Real parts: the CLI's `main` in process, `duckgraph` processes (a pipe must never hang the suite: each runs with a
timeout), `duckgraph serve` through the official MCP client, real DuckDB files, `duckgraph doctor` against a fake
Ollama (tests/ollama_server.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_doctor import env, use_ollama  # noqa: F401 (env is a fixture)
from tests.integration.test_transfer import cli_env  # noqa: F401 (a fixture)
from tests.ollama_server import FakeOllama

ROOT = Path(__file__).resolve().parents[2]


def memory_file(path: Path) -> Path:
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=f"Person {i}", type="person", observations=[f"likes tea {i}"])
                                for i in range(5)], [])
    return path


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "none.toml").write_text("", encoding="utf-8")
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
            "DUCKGRAPH_WARM_UP": "0", "DUCKGRAPH_CONFIG": str(tmp_path / "none.toml"), **extra}


# -- a memory cut short -----------------------------------------------------------------------------------------


def test_doctor_says_a_memory_cut_short_is_damaged_as_stats_does(env, tmp_path, capsys):
    # DuckDB opens the first 300 KB of a memory (its header is whole) and fails only when a query reads a block
    # beyond: the schema check doctor runs before opening the store met that as a traceback.
    whole = memory_file(tmp_path / "whole.duckdb")
    assert whole.stat().st_size > 1_000_000
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(whole.read_bytes()[:300_000])
    before, files = digest(cut), listing(tmp_path)
    damaged = f"{cut} is damaged (cut short or overwritten): DuckDB cannot read it (IO Error: Could not read enough"
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        assert main(["doctor", "--db", str(cut)]) == 1
    out = capsys.readouterr().out
    assert f"check database: FAILED: {damaged}" in out and f"problem:   {damaged}" in out
    assert f"Restore it from a backup with `duckgraph restore BACKUP --db {cut}`" in out
    assert main(["stats", "--db", str(cut)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"duckgraph: {damaged}") and err.count("\n") == 1
    assert digest(cut) == before and listing(tmp_path) == files


# -- a pipe, a device --------------------------------------------------------------------------------------------


def test_a_named_pipe_is_refused_by_doctor_and_the_commands_without_waiting_on_it(tmp_path):
    pipe = tmp_path / "memory.duckdb"
    os.mkfifo(pipe)
    note = tmp_path / "note.md"
    note.write_text("# Tea\n\nMaya likes tea.\n", encoding="utf-8")
    refused = (f"{pipe} is a named pipe (FIFO), not a file: a memory is kept in a regular file. Give --db "
               "(DUCKGRAPH_DB) the memory's file, or a new file name to start one; nothing was read")
    with FakeOllama() as ollama:
        options = json.dumps({"base_url": ollama.base_url, "model": "all-minilm"})
        environment = child_env(tmp_path, DUCKGRAPH_EMBEDDER="ollama", DUCKGRAPH_EMBEDDER_OPTIONS=options)
        files = listing(tmp_path)
        for command in (["stats"], ["search", "tea"], ["ingest", str(note)], ["doctor"]):
            # Opening a pipe to read waits for a writer: the timeout turns a hang into a failure, not a stuck suite.
            done = subprocess.run([sys.executable, "-m", "duckgraph.core.cli", *command, "--db", str(pipe)],
                                  capture_output=True, text=True, env=environment, cwd=tmp_path, timeout=90,
                                  check=False)
            assert done.returncode == 1, (command, done.stderr)
            if command == ["doctor"]:
                assert f"check database: FAILED: {refused}" in done.stdout
            else:
                assert done.stderr == f"duckgraph: {refused}\n", command
    assert listing(tmp_path) == files


def test_a_device_is_refused_not_called_an_empty_file_to_delete(cli_env, tmp_path, capsys):
    assert main(["stats", "--db", os.devnull]) == 1
    assert capsys.readouterr().err == (
        f"duckgraph: {os.devnull} is a character device, not a file: a memory is kept in a regular file. Give --db "
        "(DUCKGRAPH_DB) the memory's file, or a new file name to start one; nothing was read\n")


def test_an_export_to_a_pipe_is_written_through_it_and_a_backup_to_one_is_refused(cli_env, tmp_path, capsys):
    # `export -o /dev/null` (or /dev/stdout, or a shell's >(gzip > f)) renamed its finished file over the path: as
    # root it replaced /dev/null itself by a regular file. A pipe stands in for the device here.
    db = memory_file(tmp_path / "kb.duckdb")
    pipe = tmp_path / "out.jsonl"
    os.mkfifo(pipe)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.extend(pipe.read_text(encoding="utf-8").splitlines()), daemon=True)
    reader.start()
    assert main(["export", "--db", str(db), "-o", str(pipe)]) == 0
    reader.join(timeout=60)
    assert stat.S_ISFIFO(pipe.lstat().st_mode) and not (tmp_path / "out.jsonl.partial").exists()
    assert sum('"kind": "node"' in line or '"kind":"node"' in line for line in read) == 5, read[:3]
    capsys.readouterr()

    assert main(["backup", "--db", str(db), "--force", str(pipe)]) == 1
    assert capsys.readouterr().err == (
        f"duckgraph: {pipe} is a named pipe (FIFO), not a file: a backup is a database file; give it a file name, "
        "e.g. knowledge-backup.duckdb; nothing was written\n")
    assert stat.S_ISFIFO(pipe.lstat().st_mode)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_serve_on_a_named_pipe_answers_and_says_so_in_each_tool_call(tmp_path):
    pipe = tmp_path / "memory.duckdb"
    os.mkfifo(pipe)
    params = StdioServerParameters(command=sys.executable, args=["-m", "duckgraph.core.cli", "serve", "--db",
                                                                 str(pipe)], env=child_env(tmp_path), cwd=tmp_path)
    with (tmp_path / "serve.stderr").open("w", encoding="utf-8") as errlog, anyio.fail_after(120):
        async with Client(stdio_client(params, errlog=errlog)) as client:
            result = await client.call_tool("search", {"query": "Maya"})
    assert result.is_error
    assert f"{pipe} is a named pipe (FIFO), not a file" in result.content[0].text


# -- a symbolic link to nothing ------------------------------------------------------------------------------------


def test_doctor_fails_a_link_to_nothing_which_ingest_refuses(env, tmp_path, capsys):
    link = tmp_path / "memory.duckdb"
    link.symlink_to("nowhere/x.duckdb")
    target = tmp_path / "nowhere" / "x.duckdb"
    with FakeOllama() as ollama:
        use_ollama(env, ollama.base_url)
        assert main(["doctor", "--db", str(link)]) == 1
    out = capsys.readouterr().out
    problem = (f"{link} cannot be created: it is a symbolic link to nowhere/x.duckdb, which leads to no file. If the "
               "memory was moved or its drive is not mounted, mount it or point the link at the memory's file; to "
               f"start a new memory there, give --db (DUCKGRAPH_DB) the target itself, {target}")
    assert f"check database: FAILED: {problem}" in out and "check database: ok" not in out
    assert f"database:  {link} (no database yet, and it cannot be created: see the problem below)" in out


@pytest.mark.parametrize("folder_exists", [False, True], ids=["target-folder-gone", "target-folder-there"])
def test_a_link_to_nothing_is_refused_and_no_memory_is_started_behind_it(cli_env, tmp_path, capsys, folder_exists):
    # A link whose drive is not mounted (its folder may still be there, empty) must not get a new, empty memory.
    target = tmp_path / "drive" / "x.duckdb"
    if folder_exists:
        target.parent.mkdir()
    link = tmp_path / "memory.duckdb"
    link.symlink_to(target)
    note = tmp_path / "note.md"
    note.write_text("# Tea\n\nMaya likes tea.\n", encoding="utf-8")
    files = listing(tmp_path)
    assert main(["ingest", str(note), "--db", str(link)]) == 1
    assert capsys.readouterr().err == (
        f"duckgraph: {link} is a symbolic link to {target}, which does not exist: if the memory was moved or its "
        "drive is not mounted, mount it or point the link at the memory's file; to start a new memory there, give "
        f"--db (DUCKGRAPH_DB) the target itself, {target}\n")
    assert listing(tmp_path) == files and link.is_symlink() and not target.exists()
    assert main(["ingest", str(note), "--db", str(target)]) == 0  # the way the message gives
    assert main(["stats", "--db", str(link)]) == 0


# -- blanks and control characters in the path ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["--db", "DUCKGRAPH_DB"])
@pytest.mark.parametrize("shape, said", [
    ("{} ", "the path ends with a blank"),
    (" {}", "the path starts with a blank"),
    ("{}\n", "the path holds the control character '\\n'"),
    ("{}\t", "the path holds the control character '\\t'"),
    ("{}\r", "the path holds the control character '\\r'"),
], ids=["trailing-space", "leading-space", "newline", "tab", "carriage-return"])
def test_a_db_path_with_blanks_at_its_ends_or_control_characters_is_refused(cli_env, tmp_path, capsys,
                                                                           monkeypatch, where, shape, said):
    monkeypatch.chdir(tmp_path)  # a leading blank made the path relative: it was created here
    memory_file(tmp_path / "kb.duckdb")
    note = tmp_path / "note.md"
    note.write_text("# Tea\n\nMaya likes tea.\n", encoding="utf-8")
    given = shape.format(tmp_path / "kb.duckdb")
    if where == "--db":
        argv = ["ingest", str(note), "--db", given]
    else:
        monkeypatch.setenv("DUCKGRAPH_DB", given)
        argv = ["ingest", str(note)]
    files, before = listing(tmp_path), digest(tmp_path / "kb.duckdb")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("duckgraph: invalid settings (from ") and f"db = {given!r}: {said}" in err
    assert err.count("\n") == 1 and "write" in err
    assert listing(tmp_path) == files and digest(tmp_path / "kb.duckdb") == before


def test_a_config_path_with_a_trailing_blank_is_refused_as_such(cli_env, tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", f"{config} ")
    assert main(["stats", "--db", str(tmp_path / "kb.duckdb")]) == 1
    assert capsys.readouterr().err.startswith(
        f"duckgraph: DUCKGRAPH_CONFIG = '{config} ': the path ends with a blank: write it without")


# -- a config folder named through a variable ----------------------------------------------------------------------


@pytest.mark.parametrize("where", ["--config", "DUCKGRAPH_CONFIG"])
def test_a_config_folder_named_through_a_variable_is_called_a_folder(cli_env, tmp_path, capsys, monkeypatch, where):
    folder = tmp_path / "conf"
    folder.mkdir()
    monkeypatch.setenv("DG_TEST_CONF_HOME", str(tmp_path))
    argv = ["stats", "--db", str(tmp_path / "kb.duckdb")]
    if where == "--config":
        argv += ["--config", "$DG_TEST_CONF_HOME/conf"]
    else:
        monkeypatch.setenv("DUCKGRAPH_CONFIG", "${DG_TEST_CONF_HOME}/conf")
    files = listing(tmp_path)
    assert main(argv) == 1
    assert capsys.readouterr().err == (f"duckgraph: config file {folder} is a folder: give the TOML file's path with "
                                       f"--config (DUCKGRAPH_CONFIG), e.g. {folder / 'config.toml'}\n")
    assert listing(tmp_path) == files
