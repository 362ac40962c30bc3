"""Ctrl-C (SIGINT) and SIGTERM sent to the `duckgraph` command (a subprocess, on real DuckDB files): the command stops,
its clean-up runs, and it says in one line what it did and did not do, without a traceback; the exit status is
130 after Ctrl-C and 143 after SIGTERM (128 + the signal). An interruption that lands inside a DuckDB query (DuckDB
raises RuntimeError "Query interrupted" for it) is an interruption too, never a failure to work around.

The signal is sent once the command is known to be where the test wants it: the child writes a marker to stderr
just before that point, and waits there (forever, but for the signal), which the signal reaches a moment after the
marker. A stall inside DuckDB is a query that never ends on the store's connection; a stall in Python code waits on
an event."""

from __future__ import annotations

import json
import os
import pty
import queue
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_backup import fill
from tests.integration.test_compact import command_env

#: Generous: a guard against a child that hangs, never a measure of speed.
WAIT = int(os.environ.get("DUCKGRAPH_TEST_WAIT", 300))

#: How long the child has to go from its marker into what it stalls in: a signal sent sooner may land before.
SETTLE = 0.5

#: Code run in the child before the command: `stall_in_duckdb` and `stall`, for the patches of each test.
STALLS = textwrap.dedent('''
    import os, sys, threading

    def stall_in_duckdb(con, *, cancel=False, fd=2):
        """Say STALLED on `fd` (stderr), then run a query on `con` that never ends: a signal sent a moment after
        the marker lands inside DuckDB. With `cancel` the query is stopped once interrupted (DuckDB lets it run on
        otherwise). (A marker written from inside the query, by a Python function it called, hung now and then:
        that function needs the GIL.)"""
        os.write(fd, b"STALLED\\n")
        try:
            con.execute("SELECT count(*) FROM range(9223372036854775807) t(i) WHERE hash(i) = 0")
        except BaseException:
            if cancel:
                con.interrupt()
            raise
        raise AssertionError("the query that never ends ended")

    def stall():
        """Say STALLED on stderr, then wait for a signal."""
        print("STALLED", file=sys.stderr, flush=True)
        threading.Event().wait()
''')

RUN_MAIN = "\nfrom duckgraph.core.cli import main\nsys.exit(main())\n"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The commands' environment (tests/integration/test_compact.py), with the embedder "slow" available too."""
    folder = tmp_path / "env"
    folder.mkdir()
    variables = command_env(folder)
    (folder / "site" / "duckgraph_test_fake-0.1.dist-info" / "entry_points.txt").write_text(
        "[duckgraph]\nfake = tests.fake_embedder_plugin\nslow = tests.slow_embedder_plugin\n")
    return variables


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    folder = tmp_path / "memory"
    folder.mkdir()
    db = folder / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
    return db


def start(*args: str, env: dict[str, str], cwd: Path, patch: str = "") -> subprocess.Popen:
    """`duckgraph ARGS`, after `patch` (code run first in the child, with STALLS defined)."""
    command = [sys.executable, "-c", STALLS + patch + RUN_MAIN, *args] if patch else \
        [sys.executable, "-m", "duckgraph.core.cli", *args]
    return subprocess.Popen(command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def signal_at(process: subprocess.Popen, marker: str, sig: signal.Signals) -> tuple[int, str, str]:
    """Send `sig` once a line of the child's stderr holds `marker`; its exit status, stdout and whole stderr."""
    lines: queue.Queue[str | None] = queue.Queue()
    out: list[str] = []

    def read_stderr() -> None:
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    readers = [threading.Thread(target=read_stderr, daemon=True),
               threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    seen = []
    while True:
        try:
            line = lines.get(timeout=WAIT)
        except queue.Empty:
            line = ""
        if not line:
            ended = process.poll()
            kill(process)
            pytest.fail(f"{f'the command ended ({ended})' if line is None else 'nothing'} before {marker!r} on "
                        f"stderr: {''.join(seen)}")
        seen.append(line)
        if marker in line:
            break
    time.sleep(SETTLE)  # the child goes from the marker into the query (or the wait) it stalls in
    process.send_signal(sig)
    try:
        process.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        kill(process)
        pytest.fail(f"still running {WAIT} s after {sig.name}: {''.join(seen)}")
    for reader in readers:
        reader.join(WAIT)
    while (line := lines.get()) is not None:
        seen.append(line)
    return process.returncode, "".join(out), "".join(seen)


def kill(process: subprocess.Popen) -> None:
    """End a child that hangs (the test fails): none is left behind."""
    if process.poll() is None:
        process.kill()
        process.wait()


def counts(db: Path) -> dict[str, int]:
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        stats = kb.store.stats()
    return {key: stats[key] for key in ("nodes", "edges", "documents", "chunks")}


SIGNALS = [pytest.param(signal.SIGINT, 130, "interrupted", id="ctrl-c"),
           pytest.param(signal.SIGTERM, 143, "stopped by SIGTERM", id="sigterm")]


def test_ctrl_c_while_vss_loads_stops_the_command_instead_of_going_on_without_vss(memory: Path, env):
    """Loading vss is the first DuckDB statement of every command that opens the file: Ctrl-C there must stop the
    command, not be logged as vss failing to load (after which the command went on and exited 0)."""
    patch = textwrap.dedent('''
        import duckdb
        from duckgraph.plugins.duckdb import vector_search

        class LoadStalls:
            """The store's connection, whose LOAD of vss is interrupted by Ctrl-C (a real DuckDB interruption)."""
            def __init__(self, con):
                self.con = con
            def execute(self, statement, *args):
                if statement.startswith("LOAD"):
                    stall_in_duckdb(duckdb.connect(), cancel=True)
                return self.con.execute(statement, *args)

        load_vss = vector_search.VectorSearch.load_vss
        vector_search.VectorSearch.load_vss = lambda self, con: load_vss(self, LoadStalls(con))
    ''')
    process = start("stats", "--db", str(memory), env=env, cwd=memory.parent, patch=patch)

    code, out, err = signal_at(process, "STALLED", signal.SIGINT)

    assert code == 130, err
    assert err.splitlines()[-1] == "duckgraph: stats interrupted: it only reads: nothing was changed"
    assert "vss could not be loaded" not in err and "Traceback" not in err
    assert out == ""  # no stats: the command did not go on


@pytest.mark.parametrize(("sig", "status", "how"), SIGNALS)
def test_a_signal_during_a_backups_copy_ends_it_in_one_line_leaving_no_copy(memory: Path, env, sig, status, how):
    """Ctrl-C during a DuckDB query (here backup's COPY FROM DATABASE) surfaces as DuckDB's RuntimeError "Query
    interrupted"; it printed a traceback and exited 1. SIGTERM killed the command without its clean-up."""
    patch = textwrap.dedent('''
        from duckgraph.plugins.duckdb import maintenance

        class CopyStalls:
            """The store's connection, whose COPY never ends."""
            def __init__(self, con):
                self.con = con
            def execute(self, statement, *args):
                if statement.startswith("COPY FROM DATABASE"):
                    stall_in_duckdb(self.con)
                return self.con.execute(statement, *args)
            def __getattr__(self, name):
                return getattr(self.con, name)

        backup = maintenance.backup
        maintenance.backup = lambda con, *args: backup(CopyStalls(con), *args)
    ''')
    before = counts(memory)
    destination = memory.parent / "copy.duckdb"
    process = start("backup", "--db", str(memory), str(destination), env=env, cwd=memory.parent, patch=patch)

    code, out, err = signal_at(process, "STALLED", sig)

    assert code == status, err
    assert err.splitlines()[-1] == (f"duckgraph: backup {how}: no copy was made at {destination} (a file there "
                                    "before is left as it was); the memory's file is unchanged")
    assert "Traceback" not in err and "Query interrupted" not in err and out == ""
    assert [p.name for p in memory.parent.iterdir() if p.suffix != ".lock"] == ["kb.duckdb"]  # no copy, no part
    assert counts(memory) == before


def exported(memory: Path, env: dict[str, str], folder: Path) -> Path:
    """The memory exported as JSON Lines, without vectors (an import embeds it, with its progress bar)."""
    path = folder / "kb.jsonl"
    done = subprocess.run([sys.executable, "-m", "duckgraph.core.cli", "export", "--db", str(memory), "-o",
                           str(path)], env=env, cwd=folder, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    return path


def import_stalls(fd: int = 2) -> str:
    """The patch with which an import's transaction stalls inside DuckDB, saying STALLED on `fd`."""
    return textwrap.dedent(f'''
        from duckgraph.plugins.duckdb import store

        restore_snapshot = store.restore_snapshot

        def stalling(writer, *args):
            stall_in_duckdb(writer.con, fd={fd})  # inside the import's transaction
            return restore_snapshot(writer, *args)

        store.restore_snapshot = stalling
    ''')


def test_ctrl_c_inside_the_import_transaction_imports_nothing_and_says_so(memory: Path, env, tmp_path: Path):
    """Import exited 130 with nothing on stderr; a Ctrl-C inside its transaction (a DuckDB statement) printed a
    traceback. It says that nothing was imported, and the file takes the import again."""
    exported_file = exported(memory, env, tmp_path)
    fresh = tmp_path / "fresh.duckdb"
    process = start("import", str(exported_file), "--db", str(fresh), env=env, cwd=tmp_path, patch=import_stalls())

    code, out, err = signal_at(process, "STALLED", signal.SIGINT)

    assert code == 130, err
    assert err.splitlines()[-1] == ("duckgraph: import interrupted: nothing was imported (an import is one "
                                    f"transaction) and {fresh} was not created: run it again")
    assert "Traceback" not in err and out == ""
    assert not fresh.exists()  # a new file is removed (tests/integration/test_import_new_file_failure.py)
    again = subprocess.run([sys.executable, "-m", "duckgraph.core.cli", "import", str(exported_file), "--db",
                            str(fresh)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=WAIT)
    assert again.returncode == 0, again.stderr
    nodes = sum(json.loads(line)["kind"] == "node" for line in exported_file.read_text(encoding="utf-8").splitlines())
    assert counts(fresh)["nodes"] == nodes > 0


def test_on_a_terminal_the_line_that_says_so_starts_a_line_of_its_own(memory: Path, env, tmp_path: Path):
    """On a terminal the progress bar's line has no line feed until the bar is finished, and an interruption left
    it unfinished: what the command said next was written after its count ("14/14duckgraph: import ...")."""
    exported_file = exported(memory, env, tmp_path)
    master, slave = pty.openpty()
    # STALLED goes to stdout here: stderr is the terminal, whose text the test reads whole.
    process = subprocess.Popen([sys.executable, "-c", STALLS + import_stalls(fd=1) + RUN_MAIN, "import",
                                str(exported_file), "--db", str(tmp_path / "fresh.duckdb")], env=env, cwd=tmp_path,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""

    def read_terminal() -> bytes:
        try:
            return os.read(master, 65536)
        except OSError:  # EIO: the command ended, and with it the terminal's last writer
            return b""

    while True:  # the terminal is read meanwhile: a full one would stop the command
        ready, _, _ = select.select([master, process.stdout], [], [], WAIT)
        if not ready:
            kill(process)
            pytest.fail(f"no STALLED: {shown!r}")
        if master in ready:
            shown += read_terminal()
        if process.stdout in ready:
            assert process.stdout.readline() == b"STALLED\n", shown
            break
    time.sleep(SETTLE)
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=WAIT)
    except subprocess.TimeoutExpired:
        kill(process)
        pytest.fail(f"still running {WAIT} s after SIGINT: {shown!r}")
    while chunk := read_terminal():
        shown += chunk
    os.close(master)

    assert process.returncode == 130
    text = shown.decode("utf-8")
    assert "import: embedding [" in text
    said = [line for line in text.split("\r\n") if "interrupted" in line]
    assert said == ["duckgraph: import interrupted: nothing was imported (an import is one transaction) and "
                    f"{tmp_path / 'fresh.duckdb'} was not created: run it again"]


def notes(folder: Path, number: int) -> Path:
    folder.mkdir()
    for n in range(number):
        (folder / f"n{n:02d}.md").write_text(f"Note {n}: Ada Lovelace item {n}.\n", encoding="utf-8")
    return folder


#: The second batch of files (files 21-40) waits for the signal before it is stored.
SECOND_BATCH_STALLS = textwrap.dedent('''
    from duckgraph.core.files import folder

    store = folder._store
    calls = []

    def stalling(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            stall()
        return store(*args, **kwargs)

    folder._store = stalling
''')


@pytest.mark.parametrize(("sig", "status", "how"), SIGNALS)
def test_an_interrupted_ingest_says_what_it_stored_and_that_it_was_interrupted(tmp_path: Path, env, sig, status,
                                                                              how):
    """It said "ingest stopped at files 21-40 of 45 by the error below", and no error followed; SIGTERM killed it
    before it said anything."""
    folder = notes(tmp_path / "notes", 45)
    db = tmp_path / "kb.duckdb"
    process = start("ingest", str(folder), "--db", str(db), env=env, cwd=tmp_path, patch=SECOND_BATCH_STALLS)

    code, out, err = signal_at(process, "STALLED", sig)

    assert code == status, err
    assert out == "20 documents stored, 0 unchanged, 0 skipped, 20 passages\n"
    assert err.splitlines()[-1] == (f"duckgraph: ingest {how} at files 21-40 of 45: what is counted above is stored: "
                                    "run it again to store the rest (stored files are left as they are)")
    assert "error below" not in err and "Traceback" not in err
    assert counts(db)["documents"] == 20


def test_ingest_json_into_a_reader_that_stops_still_says_what_was_not_stored(tmp_path: Path, env):
    """`ingest --json | head`: the JSON summary for the reader gone failed before the line on stderr that says
    where ingest stopped, so stderr read as a whole run."""
    folder = notes(tmp_path / "notes", 45)
    db = tmp_path / "kb.duckdb"
    # The second batch waits until the reader has closed its end of the pipe: its result is then written to nobody.
    patch = textwrap.dedent('''
        import select
        from duckgraph.core.files import folder

        store = folder._store
        calls = []

        def after_the_reader(*args, **kwargs):
            calls.append(1)
            if len(calls) == 2:
                gone = select.poll()
                gone.register(1, 0)  # reports only the error of a pipe whose reader closed it
                gone.poll()
            return store(*args, **kwargs)

        folder._store = after_the_reader
    ''')
    process = subprocess.Popen([sys.executable, "-c", STALLS + patch + RUN_MAIN, "ingest", str(folder), "--json",
                                "--db", str(db)], env={**env, "PYTHONUNBUFFERED": "1"}, cwd=tmp_path,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(process.stdout.readline())  # the first batch's result
    assert len(first["documents"]) == 20
    process.stdout.close()  # the reader stops, as `head -1` does
    try:
        err = process.communicate(timeout=WAIT)[1]
    except subprocess.TimeoutExpired:
        kill(process)
        pytest.fail("ingest did not end once its reader was gone")
    code = process.returncode

    assert code == 141, err
    lines = err.splitlines()
    assert lines[-2].startswith("40 documents stored, 0 unchanged, 0 skipped, 40 passages"), err
    assert lines[-1] == ("duckgraph: ingest stopped at files 21-40 of 45 because its standard output was closed (the "
                         "reader stopped early); what is counted above is stored: run it again to store the rest "
                         "(stored files are left as they are)")
    assert counts(db)["documents"] == 40


def test_sigterm_during_an_export_removes_its_partial_file_and_keeps_the_one_there(memory: Path, env):
    """timeout(1), systemd or kill stopped `export -o FILE` without its clean-up: FILE.partial stayed."""
    patch = textwrap.dedent('''
        from duckgraph.core.files import export

        def half_written(kb, out, **options):
            out.write('{"kind": "meta"}\\n')
            out.flush()
            stall()

        export.export_jsonl = half_written
    ''')
    target = memory.parent / "kb.jsonl"
    target.write_text("the export before\n", encoding="utf-8")
    process = start("export", "--db", str(memory), "-o", str(target), env=env, cwd=memory.parent, patch=patch)

    code, out, err = signal_at(process, "STALLED", signal.SIGTERM)

    assert code == 143, err
    assert err.splitlines()[-1] == (f"duckgraph: export stopped by SIGTERM: {target} was not written (a file there "
                                    "before is left as it was)")
    assert "Traceback" not in err and out == ""
    assert target.read_text(encoding="utf-8") == "the export before\n"
    assert not target.with_name("kb.jsonl.partial").exists()


def test_a_sigterm_lost_in_a_finalizer_still_stops_the_command(memory: Path, env):
    """The exception of a SIGTERM that lands in a finalizer is only printed (as one DuckDB drops, or turns into an
    error of its own): the command went on with SIGTERM ignored (the demo hung in CI). It is delivered again."""
    patch = textwrap.dedent('''
        from duckgraph.core.files import export

        class Finalized:
            def __del__(self):
                stall()  # the signal lands here, where an exception is only printed

        def half_written(kb, out, **options):
            out.write('{"kind": "meta"}\\n')
            out.flush()
            Finalized()  # freed at once
            threading.Event().wait()

        export.export_jsonl = half_written
    ''')
    target = memory.parent / "kb.jsonl"
    process = start("export", "--db", str(memory), "-o", str(target), env=env, cwd=memory.parent, patch=patch)

    code, out, err = signal_at(process, "STALLED", signal.SIGTERM)

    assert code == 143, err
    assert err.splitlines()[-1] == f"duckgraph: export stopped by SIGTERM: {target} was not written (a file there " \
                                   "before is left as it was)"
    assert "Traceback" not in err and "Exception ignored" not in err
    assert not target.exists() and not target.with_name("kb.jsonl.partial").exists()


def test_sigterm_during_the_demo_removes_its_temporary_folder(tmp_path: Path, env):
    """The demo's temporary folder (a whole knowledge file) stayed in the temp folder after SIGTERM."""
    temp = tmp_path / "temp"
    temp.mkdir()
    slow = {**env, "DUCKGRAPH_EMBEDDER": "slow", "SLOW_EMBEDDER_SECONDS": "3600", "TMPDIR": str(temp)}
    process = start("demo", env=slow, cwd=tmp_path)  # the real command: it waits in the embedder

    code, out, err = signal_at(process, "Loading the demo knowledge base", signal.SIGTERM)

    assert code == 143, err
    assert err.splitlines()[-1] == "duckgraph: demo stopped by SIGTERM: its temporary file was removed"
    assert "Traceback" not in err
    assert list(temp.iterdir()) == []
