"""A knowledge file in a hostile place, on real DuckDB files: read-only files and folders (as a real unprivileged
user where this runs as root), a full disk (a real small tmpfs where it can be mounted, a real file size limit in a
subprocess otherwise) and a writer killed at random moments during add_documents."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from duckgraph.core.domain.chunking import chunk_text
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError
from tests.fakes import HashingEmbedder

REPO_ROOT = Path(__file__).resolve().parents[2]
QUERY = "Marie Curie radium"


def child_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


def fill(kb: KnowledgeBase) -> None:
    kb.add_documents([
        DocumentInput(id="curie", title="Curie", text="Marie Curie discovered radium and polonium in Paris. " * 20),
        DocumentInput(id="pasta", title="Pasta", text="Pasta is cooked in boiling water with salt. " * 20),
    ])
    kb.add_knowledge_graph(
        [NodeInput(name="Marie Curie", type="Person", description="physicist"),
         NodeInput(name="Radium", type="Element")],
        [EdgeInput(source="Marie Curie", target="Radium", type="discovered")],
    )


def make_kb_file(path: Path) -> dict:
    """A filled knowledge file, closed; returns what reading it gives (stats, a search, vector counts)."""
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        fill(kb)
        return reads(kb)


def reads(kb: KnowledgeBase) -> dict:
    return json.loads(json.dumps({"stats": kb.stats(), "search": kb.search(QUERY).model_dump(),
                                  "vectors": kb.health()["vectors"]}))


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file in the folder with its content hash and modification time."""
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(folder.iterdir()) if p.is_file() and os.access(p, os.R_OK)}


# -- 1. read-only files and folders ----------------------------------------------------------------------------

READER = textwrap.dedent("""
    import json, os, sys
    from duckgraph.core.domain.model import DocumentInput, NodeInput
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.plugins.duckdb import DuckDBStore
    from duckgraph.ports import DuckgraphError
    from tests.fakes import HashingEmbedder

    if os.environ.get("PRETEND_WRITABLE"):  # make duckgraph's own checks pass: DuckDB itself must then refuse
        os.access = lambda *args, **kwargs: True
    out = {}
    for path in sys.argv[1:]:
        report = out[path] = {}
        try:
            kb = KnowledgeBase(DuckDBStore(path, use_vss=False), HashingEmbedder()).open()
        except DuckgraphError as exc:
            report["open_error"] = str(exc)
            continue
        with kb:
            report.update({"stats": kb.stats(), "search": kb.search(%r).model_dump(),
                           "vectors": kb.health()["vectors"], "read_only": kb.health()["read_only"]})
            writes = {
                "graph": lambda: kb.add_knowledge_graph([NodeInput(name="Newcomer", type="Thing")], []),
                "documents": lambda: kb.add_documents([DocumentInput(id="new", text="A new document.")]),
            }
            for name, write in writes.items():
                try:
                    write()
                    report[name] = "written"
                except DuckgraphError as exc:
                    report[name] = str(exc)
            for name, variable in (("backup", "BACKUP_TO"), ("backup_refused", "NO_BACKUP_TO")):
                folder = os.environ.get(variable)
                if folder:
                    try:
                        report[name] = kb.backup(os.path.join(folder, f"copy-{len(out)}.duckdb"))
                    except DuckgraphError as exc:
                        report[name] = str(exc)
    print(json.dumps(out))
""" % QUERY)


def _nobody() -> tuple[int, int] | None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


@pytest.fixture(scope="module")
def nobody():
    """Runs Python code as the unprivileged user `nobody` (root ignores file permissions, so tests that need them
    to bite must not run as root). Skips where that is impossible."""
    ids = _nobody()
    if ids is None:
        pytest.skip("needs to run as root with setpriv and a `nobody` user to switch to")
    home = Path(tempfile.mkdtemp(prefix="duckgraph-nobody-home-"))
    os.chown(home, *ids)

    def run(code: str, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["setpriv", f"--reuid={ids[0]}", f"--regid={ids[1]}", "--clear-groups", sys.executable, "-c", code, *args],
            env={**child_env(home), **(extra_env or {})}, cwd=home, capture_output=True, text=True, timeout=60,
        )

    probe = run("import os, duckgraph.plugins.duckdb, tests.fakes; print(os.getuid())")
    if probe.returncode != 0 or probe.stdout.strip() != str(ids[0]):
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip(f"`nobody` cannot run this Python and the repository: {probe.stderr[-300:]}")
    run.ids = ids
    run.home = home
    yield run
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def public_dir():
    """A folder outside pytest's private tmp dir (0700), so that another user can reach it."""
    folder = Path(tempfile.mkdtemp(prefix="duckgraph-hostile-"))
    folder.chmod(0o755)
    yield folder
    for path in folder.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)
    shutil.rmtree(folder, ignore_errors=True)


def test_read_only_file_and_folder_as_an_unprivileged_user(nobody, public_dir: Path):
    """Real permissions: a 0444 file and a file in a folder the user cannot write open read-only; searches work,
    writes say the file is read-only and why, and not a byte on disk changes. A missing file in such a folder and
    an unreadable file are clear errors naming the file."""
    uid, gid = nobody.ids
    ro_file_dir, ro_dir = public_dir / "ro-file", public_dir / "ro-folder"
    ro_file_dir.mkdir(mode=0o777)
    ro_file_dir.chmod(0o777)  # the folder is writable: only the file is not
    ro_dir.mkdir(mode=0o755)  # owned by root: `nobody` cannot create the write-ahead log here
    expected = make_kb_file(ro_file_dir / "kb.duckdb")
    assert make_kb_file(ro_dir / "kb.duckdb") == expected
    make_kb_file(ro_file_dir / "secret.duckdb")
    (ro_file_dir / "kb.duckdb").chmod(0o444)
    os.chown(ro_dir / "kb.duckdb", uid, gid)  # the file itself is writable by `nobody`
    (ro_file_dir / "secret.duckdb").chmod(0o000)
    before = {folder: fingerprint(folder) for folder in (ro_file_dir, ro_dir)}

    files = [ro_file_dir / "kb.duckdb", ro_dir / "kb.duckdb", ro_dir / "new.duckdb", ro_file_dir / "secret.duckdb"]
    copies = nobody.home / "copies"
    copies.mkdir()
    os.chown(copies, uid, gid)
    done = nobody(READER, *map(str, files), extra_env={"BACKUP_TO": str(copies), "NO_BACKUP_TO": str(ro_dir)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    reasons = {files[0]: "the file is not writable by this user",
               files[1]: f"its folder {ro_dir} is not writable by this user (DuckDB keeps its write-ahead log there)"}
    for path, reason in reasons.items():
        got = report[str(path)]
        assert {k: got[k] for k in ("stats", "search", "vectors")} == expected
        assert got["read_only"] == reason
        for write in ("graph", "documents"):
            assert got[write].startswith(
                f"this knowledge file is read-only: {path} ({reason}). Searches and reads work")
        # A read-only file can be backed up (somewhere this user may write, and only there).
        assert got["backup"]["nodes"] == expected["stats"]["nodes"]
        assert got["backup"]["chunks"] == expected["stats"]["chunks"]
        assert got["backup_refused"] == f"cannot write a backup into {ro_dir}: the folder is not writable by this user"
    assert report[str(files[2])]["open_error"] == (
        f"cannot create {files[2]}: the folder {ro_dir} is not writable by this user. "
        "Choose another file with --db or DUCKGRAPH_DB."
    )
    unreadable = report[str(files[3])]["open_error"]
    assert unreadable.startswith(f"cannot open {files[3]}: ") and "Permission denied" in unreadable
    assert {folder: fingerprint(folder) for folder in (ro_file_dir, ro_dir)} == before
    assert not (ro_dir / "new.duckdb").exists()
    assert sorted(p.name for p in copies.iterdir()) == ["copy-1.duckdb", "copy-2.duckdb"]
    with KnowledgeBase(DuckDBStore(copies / "copy-1.duckdb"), HashingEmbedder()) as copy:
        assert reads(copy) == expected

    # When duckgraph's own checks are fooled, DuckDB's refusal still ends in a read-only open, not a failure.
    fooled = nobody(READER, str(files[0]), extra_env={"PRETEND_WRITABLE": "1"})
    assert fooled.returncode == 0, fooled.stderr
    got = json.loads(fooled.stdout)[str(files[0])]
    assert got["read_only"].startswith("DuckDB cannot open it for writing: IO Error: Cannot open file")
    assert "Permission denied" in got["read_only"]
    assert got["search"] == expected["search"]
    assert got["graph"].startswith(f"this knowledge file is read-only: {files[0]} (DuckDB cannot open it")
    assert fingerprint(ro_file_dir) == before[ro_file_dir]

    # The command line says so too.
    doctor = nobody("import sys; from duckgraph.core.cli import main; sys.exit(main(sys.argv[1:]))",
                    "doctor", "--json", "--db", str(files[0]))
    warnings = json.loads(doctor.stdout)["warnings"]
    assert ("the file is read-only (the file is not writable by this user): searches work, writes are refused"
            in warnings), doctor.stdout
    assert fingerprint(ro_file_dir) == before[ro_file_dir]


def test_read_only_file_simulated(db_path: Path, monkeypatch):
    """The same decision where no unprivileged user is available: os.access says the file is not writable."""
    expected = make_kb_file(db_path)
    before = fingerprint(db_path.parent)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path) == db_path and mode & os.W_OK
                        else real_access(path, mode, **kw))
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert reads(kb) == expected
        assert kb.health()["read_only"] == "the file is not writable by this user"
        with pytest.raises(StoreError, match=f"^this knowledge file is read-only: {db_path} \\(the file is not"):
            kb.add_knowledge_graph([NodeInput(name="Newcomer", type="Thing")], [])
    assert fingerprint(db_path.parent) == before


def test_read_only_store_option(db_path: Path):
    expected = make_kb_file(db_path)
    before = fingerprint(db_path.parent)
    with KnowledgeBase(DuckDBStore(db_path, read_only=True), HashingEmbedder()) as kb:
        assert reads(kb) == expected
        with pytest.raises(StoreError, match="read-only: .* \\(opened with the store option read_only = true\\)"):
            kb.add_documents([DocumentInput(id="new", text="A new document.")])
    assert fingerprint(db_path.parent) == before


# -- 2. a full disk ---------------------------------------------------------------------------------------------


#: Megabytes of text in few rows: what fills a disk is bytes, and every row costs time to insert.
BIG_CHUNKS = {"chunk_chars": 100_000, "chunk_overlap": 0}


def big_documents(total_chars: int, prefix: str = "big") -> list[DocumentInput]:
    """Incompressible text in long words: many bytes for DuckDB to write, few words for the hashing embedder."""
    rng = random.Random(total_chars)
    documents, size = [], 1_000_000
    for n in range(0, total_chars, size):
        words = [rng.randbytes(400).hex() for _ in range(size // 801)]
        documents.append(DocumentInput(id=f"{prefix}{n // size}", text=" ".join(words)))
    return documents


@pytest.fixture
def small_disk():
    """A real 8 MB file system (tmpfs), where this process may mount one."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    folder = Path(tempfile.mkdtemp(prefix="duckgraph-small-disk-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        folder.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        if subprocess.run(["umount", str(folder)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        folder.rmdir()


def test_full_disk_on_a_small_file_system(small_disk: Path):
    path = small_disk / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder(), **BIG_CHUNKS) as kb:
        fill(kb)
        before = reads(kb)
        free = shutil.disk_usage(small_disk).free
        with pytest.raises(StoreError) as caught:
            kb.add_documents(big_documents(free + 2_000_000))
        message = str(caught.value)
        assert message.startswith(f"could not write to {path}: disk full (")
        assert "No space left on device" in message
        assert "Nothing of this change was saved; everything stored before is intact" in message
        assert "Free some disk space and try again." in message
        assert reads(kb) == before  # the batch was rolled back and the store keeps working
        kb.add_knowledge_graph([NodeInput(name="After the failure", type="Thing")], [])
        after = kb.stats()
    assert after["nodes"] == before["stats"]["nodes"] + 1
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        assert kb.stats() == after
        assert kb.store.get_documents(["big0"], "default") == []
        assert kb.health()["vectors"] == {"node": after["nodes"], "edge": after["edges"], "chunk": after["chunks"]}


FULL_DISK = textwrap.dedent("""
    import json, os, resource, signal, sys
    from duckgraph.core.domain.model import NodeInput
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.plugins.duckdb import DuckDBStore
    from duckgraph.ports import DuckgraphError
    from tests.fakes import HashingEmbedder
    from tests.integration.test_hostile_environment import BIG_CHUNKS, QUERY, big_documents, reads

    path, mode = sys.argv[1], sys.argv[2]
    kb = KnowledgeBase(DuckDBStore(path), HashingEmbedder(), **BIG_CHUNKS).open()
    documents = big_documents(4_000_000)
    if mode == "checkpoint":
        # DuckDB then folds a commit into the file instead of its log: the failure comes from a checkpoint.
        kb.store._con.execute("SET checkpoint_threshold = '1MB'")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 64_000, resource.RLIM_INFINITY))
    report = {}
    try:
        kb.add_documents(documents)
        report["error"] = None
    except DuckgraphError as exc:
        report["error"] = str(exc)
    report["reads"] = reads(kb)
    try:
        kb.add_knowledge_graph([NodeInput(name="After the failure", type="Thing")], [])
        report["small_write"] = "ok"
    except DuckgraphError as exc:
        report["small_write"] = str(exc)
    report["stats"] = kb.stats()
    kb.close()  # its checkpoint may fail too: the log keeps the data
    print(json.dumps(report))
""")


@pytest.mark.parametrize("mode", ["log", "checkpoint"])
def test_full_disk_with_a_file_size_limit(db_path: Path, tmp_path: Path, mode: str):
    """A real EFBIG in a subprocess (RLIMIT_FSIZE): once while DuckDB appends the batch to its log, once while it
    writes a checkpoint (DuckDB then invalidates the database; the store reopens the file and carries on)."""
    expected = make_kb_file(db_path)
    (tmp_path / "home").mkdir()
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(db_path), mode], env=child_env(tmp_path / "home"),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    error = report["error"]
    assert error is not None and error.startswith(
        f"could not write to {db_path}: disk full or file size limit reached (")
    assert "File too large" in error
    assert "Nothing of this change was saved; everything stored before is intact" in error
    if mode == "checkpoint":
        assert "Failed to create checkpoint" in error and "duckgraph reopened the file" in error
    assert report["reads"] == expected
    assert report["small_write"] == "ok"
    assert report["stats"]["nodes"] == expected["stats"]["nodes"] + 1
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        stats = kb.stats()
        assert stats == report["stats"]
        assert kb.store.get_documents(["big0"], "default") == []
        assert kb.health()["vectors"] == {"node": stats["nodes"], "edge": stats["edges"], "chunk": stats["chunks"]}
        assert kb.search(QUERY).anchors[0].name == "Marie Curie"


# -- 3. a writer killed during add_documents -------------------------------------------------------------------

BATCHES = textwrap.dedent("""
    def batch_documents(batch, size):
        return [DocumentInput(id=f"b{batch}-d{n}", title=f"Batch {batch} document {n}",
                              text=f"Batch {batch} document {n}. " + " ".join(f"w{batch}x{n}x{k}" for k in range(400)))
                for n in range(size)]
""")
CRASH_INGEST = textwrap.dedent("""
    import os, sys, traceback
    import duckdb  # before forking (the store imports it on open): every worker starts at once
    from duckgraph.core.domain.model import DocumentInput
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder
""") + BATCHES + textwrap.dedent("""
    def ingest(path, size):
        kb = KnowledgeBase(DuckDBStore(path, use_vss=False), HashingEmbedder()).open()
        print("started", os.getpid(), flush=True)
        batch = 0
        while True:  # the same ingest from the start every time, as a user re-running it would
            result = kb.add_documents(batch_documents(batch, size))
            print(batch, "unchanged" if all(d.unchanged for d in result.documents) else "written", flush=True)
            batch += 1

    # One ingesting process per line read, forked from this one so that it starts without paying for the imports.
    path, size = sys.argv[1], int(sys.argv[2])
    while sys.stdin.readline():
        worker = os.fork()
        if worker == 0:
            try:
                ingest(path, size)
            except BaseException:
                traceback.print_exc()
            os._exit(1)
        _, status = os.waitpid(worker, 0)
        print("ended", os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1, flush=True)
""")
namespace: dict = {"DocumentInput": DocumentInput}
exec(BATCHES, namespace)
batch_documents = namespace["batch_documents"]


def check_whole_batches(path: Path, size: int) -> int:
    """Every batch wholly present or wholly absent, present ones a prefix, every document with exactly its own
    chunks and vectors (no duplicates); returns how many batches are present."""
    with KnowledgeBase(DuckDBStore(path, use_vss=False), HashingEmbedder()) as kb:
        documents = kb.store.list_documents("default", limit=100_000)
        per_batch = Counter(d.id.split("-")[0] for d in documents)
        assert set(per_batch.values()) <= {size}, per_batch
        present = sorted(int(b[1:]) for b in per_batch)
        assert present == list(range(len(present)))
        expected = {d.id: d for i in present for d in batch_documents(i, size)}
        assert {d.id: (d.title, d.text) for d in documents} == {i: (d.title, d.text) for i, d in expected.items()}
        chunks = kb.store.document_chunks("default", list(expected))
        by_document: dict[str, list] = {}
        for chunk in chunks:
            by_document.setdefault(chunk.document_id, []).append(chunk)
        for doc_id, doc in expected.items():
            assert [(c.ordinal, c.text) for c in sorted(by_document[doc_id], key=lambda c: c.ordinal)] == list(
                enumerate(chunk_text(doc.text)))
        stats = kb.stats()
        assert stats["chunks"] == len(chunks) == len({c.id for c in chunks})
        assert kb.health()["vectors"]["chunk"] == stats["chunks"]
        return len(present)


def test_killed_ingest_leaves_whole_batches_and_reruns_idempotently(db_path: Path, tmp_path: Path):
    size, rounds = 15, 5
    rng = random.Random(2024)
    (tmp_path / "home").mkdir()
    progress = []
    launcher = subprocess.Popen(
        [sys.executable, "-c", CRASH_INGEST, str(db_path), str(size)], cwd=REPO_ROOT,
        env={**child_env(tmp_path / "home"), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        for _ in range(rounds):
            launcher.stdin.write("go\n")
            launcher.stdin.flush()
            line = launcher.stdout.readline()
            assert line.startswith("started "), f"{line!r} {launcher.stderr.read() if not line else ''}"
            worker = int(line.split()[1])
            # The first run stores one batch before its random moment, so that there is something to keep.
            printed = [launcher.stdout.readline().strip()] if not progress else []
            assert printed in ([], ["0 written"]), printed
            time.sleep(rng.uniform(0.05, 1.0))
            os.kill(worker, signal.SIGKILL)
            while not (line := launcher.stdout.readline().strip()).startswith("ended"):
                assert line, f"the launcher died: {launcher.stderr.read()}"
                printed.append(line)
            assert line == f"ended {int(signal.SIGKILL)}", f"the ingest ended on its own: {launcher.stderr.read()}"
            # Batches this run found already stored were left alone.
            assert all(line.endswith("unchanged") for line in printed[: progress[-1] if progress else 0])
            progress.append(check_whole_batches(db_path, size))
    finally:
        launcher.kill()
        launcher.wait()
        for pipe in (launcher.stdin, launcher.stdout, launcher.stderr):
            pipe.close()
    assert progress == sorted(progress) and progress[-1] >= 1, progress

    # Re-running the interrupted ingest to its end: stored batches change nothing, the rest is added once.
    with KnowledgeBase(DuckDBStore(db_path, use_vss=False), HashingEmbedder()) as kb:
        stats = kb.stats()
        for batch in range(progress[-1] + 1):
            result = kb.add_documents(batch_documents(batch, size))
            stored = batch < progress[-1]
            assert [d.unchanged for d in result.documents] == [stored] * size
            assert (result.chunks_written == 0) == stored
        assert kb.stats()["documents"] == stats["documents"] + size
    assert check_whole_batches(db_path, size) == progress[-1] + 1
