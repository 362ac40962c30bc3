"""`duckgraph ingest` into a knowledge file open read-only is refused before anything is read, fetched, converted or
embedded (it embedded a whole folder, for minutes, only to be refused at its first write), and leaves the file as
it was. The command runs as a process on real files with the real default model: the file made read-only by the
store option, and, as the unprivileged user `nobody`, by a folder that user cannot write."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.integration.test_hostile_environment import nobody, public_dir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.model

CLI = [sys.executable, "-m", "duckgraph.core.cli"]
MAIN = "import sys; from duckgraph.core.cli import main; sys.exit(main(sys.argv[1:]))"


def memory(path: Path, minilm) -> Path:
    with KnowledgeBase(DuckDBStore(path), minilm) as kb:
        kb.add_documents([DocumentInput(id="tea", title="Tea", text="Tea came to Japan from China.")])
    return path


def notes(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for i in range(30):
        (folder / f"note-{i}.md").write_text(f"Note {i}: green tea is grown in Shizuoka. " * 30, encoding="utf-8")
    return folder


def fingerprint(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("what", ["folder", "url"])
def test_ingest_into_a_file_opened_read_only_is_refused_before_reading_anything(tmp_path: Path, minilm, what: str):
    db = memory(tmp_path / "mem" / "kb.duckdb", minilm)
    source = str(notes(tmp_path / "notes")) if what == "folder" else f"http://127.0.0.1:{closed_port()}/page"
    before = fingerprint(db.parent)
    config = tmp_path / "config.toml"
    config.write_text('[store]\nuse = "duckdb"\noptions = { read_only = true }\n', encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if not name.startswith("DUCKGRAPH_")}
    env.update(DUCKGRAPH_CONFIG=str(config), HF_HUB_OFFLINE="1")
    done = subprocess.run([*CLI, "ingest", source, "--db", str(db)], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stdout) == (1, "")
    # The store's refusal, alone: no "reading files", no "embedding passages", no fetch of the page.
    assert done.stderr == (
        f"duckgraph: this knowledge file is read-only: {db} (opened with the store option read_only = true). "
        "Searches and reads work; to add or change knowledge, make the file and its folder writable by this user, "
        "or copy it somewhere writable (duckgraph backup) and point --db / DUCKGRAPH_DB at the copy.\n")
    assert fingerprint(db.parent) == before


def test_ingest_into_a_file_whose_folder_the_user_cannot_write_is_refused_before_reading(
        nobody, public_dir: Path, minilm):  # noqa: F811 (fixtures)
    folder = public_dir / "root-owned"
    folder.mkdir()
    folder.chmod(0o755)  # root's: nobody can read the file in it, but DuckDB cannot write its log there
    db = memory(folder / "kb.duckdb", minilm)
    os.chown(db, *nobody.ids)
    source = notes(public_dir / "notes")
    before = fingerprint(folder)
    done = nobody(MAIN, "ingest", str(source), "--db", str(db))
    assert done.returncode == 1, done.stderr
    reason = f"its folder {folder} is not writable by this user (DuckDB keeps its write-ahead log there)"
    # The warning of the open, then the refusal: nothing between them was read or embedded.
    warning, refusal = done.stderr.splitlines()
    assert warning.endswith(f"{db} is read-only ({reason}): opened for reading only")
    assert refusal == (f"duckgraph: this knowledge file is read-only: {db} ({reason}). Searches and reads work; to "
                       "add or change knowledge, make the file and its folder writable by this user, or copy it "
                       "somewhere writable (duckgraph backup) and point --db / DUCKGRAPH_DB at the copy.")
    assert fingerprint(folder) == before
