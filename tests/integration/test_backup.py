"""`duckgraph backup` and KnowledgeBase.backup on real DuckDB files: the copy opens directly, holds the same rows,
vectors and search results, is one consistent moment even while another thread writes, and a destination is either
the whole copy or untouched."""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError, StoreError
from tests.fakes import HashingEmbedder

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "duckgraph.core.cli"]
QUERIES = ["who discovered radium", "pasta in boiling water", "Paris university physics", "Nobel Prize"]


def fill(kb: KnowledgeBase) -> None:
    """Documents, entities, relations, observations-free updates, a replaced document and a second namespace."""
    kb.add_documents([
        DocumentInput(id="curie", title="Curie", text="Marie Curie discovered radium and polonium in Paris. " * 30),
        DocumentInput(id="pasta", title="Pasta", text="Pasta is cooked in boiling water with salt. " * 30),
        DocumentInput(id="old", text="A document that is replaced below. " * 20),
    ])
    kb.add_knowledge_graph(
        [NodeInput(name="Marie Curie", type="Person", description="physicist and chemist"),
         NodeInput(name="Radium", type="Element"), NodeInput(name="Paris", type="City"),
         NodeInput(name="University of Paris", type="University"), NodeInput(name="Nobel Prize", type="Award")],
        [EdgeInput(source="Marie Curie", target="Radium", type="discovered", source_ids=["curie"]),
         EdgeInput(source="Marie Curie", target="University of Paris", type="worked at"),
         EdgeInput(source="Marie Curie", target="Nobel Prize", type="won", description="1903 and 1911")],
    )
    kb.add_documents([DocumentInput(id="old", text="The replacement text about Paris cafes. " * 20)])
    kb.add_knowledge_graph([NodeInput(name="Radium", type="Element", description="radioactive metal")], [])
    kb.add_knowledge_graph([NodeInput(name="Other Thing", type="Thing")], [], namespace="other")


@pytest.fixture
def kb(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as knowledge_base:
        fill(knowledge_base)
        yield knowledge_base


def searches(kb: KnowledgeBase) -> list[dict]:
    return [kb.search(query, max_passages=3).model_dump() for query in QUERIES]


def all_vectors(kb: KnowledgeBase) -> dict[str, dict[int, list[float]]]:
    store = kb.store
    ids = {
        "node": [n.id for ns in store.namespaces() for n in store.list_nodes(ns, limit=10_000)],
        "edge": [e.id for ns in store.namespaces() for e in store.list_edges(ns, limit=10_000, include_expired=True)],
        "chunk": [c.id for ns in store.namespaces()
                  for c in store.document_chunks(ns, [d.id for d in store.list_documents(ns, limit=10_000)])],
    }
    return {kind: {i: v.tolist() for i, v in store.get_vectors(kind, ids[kind]).items()} for kind in ids}


def table_contents(path: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in tables}
    finally:
        con.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_copy_opens_directly_with_the_same_rows_vectors_and_searches(kb: KnowledgeBase, db_path: Path, tmp_path: Path):
    dest = tmp_path / "copies" / "kb-backup.duckdb"
    dest.parent.mkdir()
    stats, vectors, results, health = kb.stats(), all_vectors(kb), searches(kb), kb.health()
    assert stats["nodes"] == 6 and stats["edges"] == 3 and stats["documents"] == 3

    report = kb.backup(dest)

    assert report == {"path": str(dest), "bytes": dest.stat().st_size, "nodes": stats["nodes"],
                      "edges": stats["edges"], "edges_ended": 0,  # none of the relations has ended
                      "documents": stats["documents"], "chunks": stats["chunks"]}
    assert sorted(p.name for p in dest.parent.iterdir()) == ["kb-backup.duckdb"]  # no temporary file left
    assert kb.stats() == stats  # the source is still open and unchanged
    with KnowledgeBase(DuckDBStore(dest), HashingEmbedder()) as copy:
        assert copy.stats() == stats
        assert copy.store.namespaces() == ["default", "other"]
        assert copy.health()["vectors"] == health["vectors"]
        assert all_vectors(copy) == vectors
        assert searches(copy) == results
        # Sequences carried over: a write to the copy gets fresh ids and does not collide.
        added = copy.add_knowledge_graph([NodeInput(name="Pierre Curie", type="Person")], [])
        others = [n.id for n in copy.store.list_nodes("default", limit=100) if n.name != "Pierre Curie"]
        assert added.nodes[0].id > max(others)
        written = copy.add_documents([DocumentInput(id="new", text="Pierre Curie worked with Marie. " * 10)])
        assert written.chunks_written >= 1
    kb.close()
    source, copied = table_contents(db_path), table_contents(dest)
    assert set(source) == set(copied)
    for table in source:
        if table != "meta":
            assert len(source[table]) <= len(copied[table])
    # Row for row before the writes to the copy: compare against a second, untouched backup.
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as again:
        again.backup(tmp_path / "second.duckdb")
    assert table_contents(tmp_path / "second.duckdb") == source


def test_the_copy_is_one_moment_while_another_thread_writes(db_path: Path, tmp_path: Path):
    batch = 5
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        stop = threading.Event()
        failures: list[BaseException] = []

        def writer() -> None:
            i = 0
            try:
                while not stop.is_set():
                    nodes = [NodeInput(name=f"item {i} {j}", type="Thing", description=f"part {j} of {i}")
                             for j in range(batch)]
                    kb.add_knowledge_graph(nodes, [EdgeInput(source=f"item {i} 0", target=f"item {i} 1", type="next")])
                    kb.add_documents([DocumentInput(id=f"doc {i}", text=f"Batch {i} text. " * 5)])
                    i += 1
            except BaseException as exc:  # reported below
                failures.append(exc)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            copies = []
            for n in range(3):
                while kb.stats()["nodes"] < (n + 1) * batch * 2 and thread.is_alive():
                    time.sleep(0.01)
                copies.append(kb.backup(tmp_path / f"copy{n}.duckdb"))
        finally:
            stop.set()
            thread.join(timeout=30)
        assert not failures, failures
    for report in copies:
        with KnowledgeBase(DuckDBStore(report["path"]), HashingEmbedder()) as copy:
            stats = copy.stats()
            vectors = copy.health()["vectors"]
        assert stats["nodes"] == report["nodes"] and stats["chunks"] == report["chunks"]
        assert stats["nodes"] % batch == 0 and stats["edges"] == stats["nodes"] // batch  # whole batches only
        assert stats["documents"] in (stats["edges"], stats["edges"] - 1)
        assert vectors == {"node": stats["nodes"], "edge": stats["edges"], "chunk": stats["chunks"]}
    assert len({r["nodes"] for r in copies}) == len(copies)  # taken at different moments


def test_existing_destination_is_refused_unless_forced(kb: KnowledgeBase, tmp_path: Path):
    dest = tmp_path / "kb-backup.duckdb"
    dest.write_text("something precious")
    stale_wal = tmp_path / "kb-backup.duckdb.wal"
    with pytest.raises(InvalidInputError, match="exists.*--force"):
        kb.backup(dest)
    assert dest.read_text() == "something precious"

    stale_wal.write_bytes(b"not a log of the copy")  # a log of the replaced file must not be replayed onto the copy
    kb.backup(dest, force=True)
    assert not stale_wal.exists()
    with KnowledgeBase(DuckDBStore(dest), HashingEmbedder()) as copy:
        assert copy.stats() == kb.stats()


def test_bad_destinations_are_refused_before_anything_is_written(kb: KnowledgeBase, db_path: Path, tmp_path: Path):
    with pytest.raises(InvalidInputError, match="folder .*missing.* does not exist"):
        kb.backup(tmp_path / "missing" / "kb.duckdb")
    with pytest.raises(InvalidInputError, match="is a folder"):
        kb.backup(tmp_path)
    with pytest.raises(InvalidInputError, match="is the knowledge file"):
        kb.backup(db_path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.duckdb", "kb.duckdb.wal"]  # the open source's own


def test_no_file_of_a_database_is_ever_a_backup_destination(kb: KnowledgeBase, db_path: Path, tmp_path: Path,
                                                             monkeypatch):
    """Issue 29: `backup --force` onto the file's own .wal lost acknowledged writes, onto its .lock it made the
    next server a second owner. Every name for them is refused, forced or not, before anything is written."""
    wal, lock, sock = (db_path.with_name(db_path.name + suffix) for suffix in (".wal", ".lock", ".sock"))
    wal_before = wal.read_bytes()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link-to-wal").symlink_to(wal)
    (tmp_path / "link-to-db").symlink_to("kb.duckdb")
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).close()
    cases = {
        db_path: "the knowledge file", wal: "the knowledge file's write-ahead log", lock: "lock file",
        sock: "socket", Path("kb.duckdb.wal"): "write-ahead log", Path("sub/../kb.duckdb.lock"): "lock file",
        tmp_path / "link-to-wal": "write-ahead log", tmp_path / "link-to-db": "the knowledge file",
        other.with_name("other.duckdb.wal"): f"the write-ahead log of the database {other}",
        other.with_name("other.duckdb.lock"): f"the lock file of the database {other}",
    }
    for destination, reason in cases.items():
        for force in (False, True):
            with pytest.raises(InvalidInputError, match=rf"{re.escape(str(destination))} is .*{re.escape(reason)}.*nothing was written"):
                kb.backup(destination, force=force)
    assert wal.read_bytes() == wal_before and not lock.exists() and not sock.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.duckdb", "kb.duckdb.wal", "link-to-db", "link-to-wal",
                                                          "other.duckdb", "sub"]
    # A database no process uses may be replaced (a newer backup over an older one); one in use may not.
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('open', flush=True); sys.stdin.read()", str(other)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(InvalidInputError, match=rf"{other} is a DuckDB database \(open in a DuckDB process\)"):
            kb.backup(other, force=True)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    other.with_name("other.duckdb.wal").write_bytes(b"changes not yet in the file")
    with pytest.raises(InvalidInputError, match="it has a write-ahead log"):
        kb.backup(other, force=True)
    other.with_name("other.duckdb.wal").unlink()
    kb.backup(other, force=True)
    with KnowledgeBase(DuckDBStore(other), HashingEmbedder()) as copy:
        assert copy.stats() == kb.stats()


def test_unwritable_folder_is_a_clear_error(kb: KnowledgeBase, tmp_path: Path, monkeypatch):
    """Root writes anywhere, so the permission check is simulated here; test_hostile_environment runs the real one
    as an unprivileged user."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == tmp_path / "locked"
                        else real_access(path, mode, **kw))
    (tmp_path / "locked").mkdir()
    with pytest.raises(StoreError, match="cannot write a backup into .*locked: the folder is not writable"):
        kb.backup(tmp_path / "locked" / "kb.duckdb")


def test_a_read_only_store_can_be_backed_up(kb: KnowledgeBase, db_path: Path, tmp_path: Path):
    stats = kb.stats()
    kb.close()
    before = digest(db_path)
    with KnowledgeBase(DuckDBStore(db_path, read_only=True), HashingEmbedder()) as ro:
        ro.backup(tmp_path / "copy.duckdb")
    assert digest(db_path) == before
    with KnowledgeBase(DuckDBStore(tmp_path / "copy.duckdb"), HashingEmbedder()) as copy:
        assert copy.stats() == stats


# -- the command ---------------------------------------------------------------------------------------------


@pytest.fixture
def child_env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO_ROOT)}


def run_cli(args: list[str], env: dict[str, str], cwd: Path, file_size_limit: int | None = None):
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, resource.RLIM_INFINITY))

    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
                          preexec_fn=limit if file_size_limit else None)


def test_backup_command(kb: KnowledgeBase, db_path: Path, tmp_path: Path, child_env, capsys, monkeypatch):
    stats = kb.stats()
    kb.close()
    done = run_cli(["backup", "--db", str(db_path), "out.duckdb"], child_env, tmp_path)  # a real process
    assert done.returncode == 0, done.stderr
    dest = tmp_path / "out.duckdb"
    assert f"to {dest}" in done.stdout and f"{stats['nodes']} entities" in done.stdout
    with KnowledgeBase(DuckDBStore(dest), HashingEmbedder()) as copy:
        assert copy.stats() == stats

    # The refusals, in this process (the same code, without paying a start-up per case).
    monkeypatch.setenv("HOME", child_env["HOME"])
    monkeypatch.setenv("DUCKGRAPH_CONFIG", "")
    before = digest(dest)
    assert main(["backup", "--db", str(db_path), str(dest)]) == 1
    assert f"duckgraph: {dest} exists; choose another name, or replace it with --force" in capsys.readouterr().err
    assert digest(dest) == before

    assert main(["backup", "--db", str(db_path), str(dest), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"] == stats["nodes"]

    assert main(["backup", "--db", str(db_path), str(tmp_path / "nope" / "x.duckdb")]) == 1
    assert f"the folder {tmp_path / 'nope'} does not exist" in capsys.readouterr().err

    assert main(["backup", "--db", str(tmp_path / "absent.duckdb"), str(tmp_path / "x.duckdb")]) == 1
    assert f"no memory at {tmp_path / 'absent.duckdb'}" in capsys.readouterr().err
    assert not (tmp_path / "absent.duckdb").exists() and not (tmp_path / "x.duckdb").exists()


def test_a_backup_that_runs_out_of_space_leaves_nothing_behind(kb: KnowledgeBase, db_path: Path, tmp_path: Path,
                                                                 child_env):
    """A real write failure (EFBIG from a file size limit) while the copy is written: the command says so, the
    destination folder holds nothing new, and a destination being replaced is untouched."""
    kb.close()
    out = tmp_path / "out"
    out.mkdir()
    (out / "kept.duckdb").write_text("the previous backup")
    limit = 300_000
    assert db_path.stat().st_size > limit
    for target, extra in ((out / "new.duckdb", []), (out / "kept.duckdb", ["--force"])):
        done = run_cli(["backup", "--db", str(db_path), str(target), *extra], child_env, tmp_path, limit)
        assert done.returncode == 1, done.stderr
        assert (f"duckgraph: backup to {target} failed, nothing was written there: could not write the copy"
                in done.stderr)
        assert "disk full or file size limit reached" in done.stderr and "File too large" in done.stderr
        assert "Traceback" not in done.stderr
        assert sorted(p.name for p in out.iterdir()) == ["kept.duckdb"]
        assert (out / "kept.duckdb").read_text() == "the previous backup"
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as source:  # the source is fine
        assert source.stats()["nodes"] == 6
