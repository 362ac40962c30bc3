"""A memory file deleted, moved or replaced while a knowledge base has it open (its folder removed with `rm -rf`,
renamed, a restore by hand). DuckDB keeps writing the file it opened, wherever it now is, so a write would be
acknowledged and land in a file nobody opens at that path again, or vanish with the process. The store compares
the file at its path with the one it opened before each commit: a write is refused with what happened and what to
do, and nothing is written; reads go on; closing leaves the file now at the path (and its write-ahead log) alone.

Real parts: DuckDB files in a temporary folder, the store and the knowledge base; the hashing embedder of
tests/fakes.py (nothing here depends on the embedder)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError
from tests.fakes import HashingEmbedder
from tests.fresh_interpreter import run_python


def node(name: str) -> NodeInput:
    return NodeInput(name=name, type="Person")


def names(kb: KnowledgeBase) -> set[str]:
    return {record.name for record in kb.store.list_nodes(kb.namespace)}


def wal(path: Path) -> Path:
    return path.with_name(path.name + ".wal")


def names_in(path: Path) -> set[str]:
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        return names(kb)


def test_a_write_to_a_deleted_file_is_refused_and_nothing_comes_back(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "notes" / "mem.duckdb"
    kb = KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()
    try:
        kb.add_knowledge_graph([node("Before")], [])
        shutil.rmtree(path.parent)
        with pytest.raises(StoreError) as refused:
            kb.add_knowledge_graph([node("After")], [])
        said = str(refused.value)
        assert said.startswith(f"the memory file {path} was deleted while this server ran; nothing was written.")
        assert "lost when the server stops" in said and f"/proc/{os.getpid()}/fd/" in said
        assert f"it starts a new, empty memory at {path}" in said
        assert names(kb) == {"Before"}  # reads answer from the open file; the refused write left nothing
        assert any(r.levelname == "ERROR" and r.getMessage() == f"write refused: {said}" for r in caplog.records)
        health = kb.health()  # what `duckgraph doctor` shows, asked of the server that holds the file
        assert health["read_only"] == said and health["space"] is None
    finally:
        kb.close()
    assert not path.parent.exists()  # closing created nothing there


def test_a_moved_file_refuses_writes_until_it_is_back(tmp_path: Path) -> None:
    path = tmp_path / "notes" / "mem.duckdb"
    moved = tmp_path / "elsewhere"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([node("Before")], [])
        path.parent.rename(moved)
        with pytest.raises(StoreError, match=f"^the memory file {path} was moved to {moved / path.name} while this "
                                             "server ran; nothing was written. .*move it back"):
            kb.add_knowledge_graph([node("While moved")], [])
        moved.rename(path.parent)
        kb.add_knowledge_graph([node("Back")], [])  # the same file at its path again: writes go on
    assert names_in(path) == {"Before", "Back"}


def test_a_replaced_file_and_its_log_are_left_alone(tmp_path: Path) -> None:
    """A restore by hand: the open file and its log moved aside, and another memory put at the path by another
    process, which stopped without folding its last write into the file (killed, as a crashed server): that write
    is only in the log at the path. DuckDB's checkpoint at close deletes the log at the path by name, so the old
    store must close without one, or the new file loses that write."""
    path, aside = tmp_path / "mem.duckdb", tmp_path / "mem.before.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as old:
        old.add_knowledge_graph([node("Old")], [])
        path.rename(aside)
        wal(path).rename(wal(aside))
        # Another process: DuckDB shares one database between the connections of a process that open one path.
        run_python("""
            import os, sys
            from duckgraph.core.domain.knowledge_base import KnowledgeBase
            from duckgraph.core.domain.model import NodeInput
            from duckgraph.plugins.duckdb import DuckDBStore
            from tests.fakes import HashingEmbedder

            kb = KnowledgeBase(DuckDBStore(sys.argv[1]), HashingEmbedder()).open()
            kb.add_knowledge_graph([NodeInput(name="New", type="Person")], [])
            os._exit(0)  # killed: no close, no checkpoint
        """, str(path))
        assert wal(path).exists()  # the new file's write is in its log alone
        with pytest.raises(StoreError, match=f"^the memory file {path} was replaced by another file while this "
                                             "server ran; nothing was written. The file this server opened is now "
                                             f"{aside}"):
            old.add_knowledge_graph([node("Old again")], [])
    assert wal(path).exists()  # the old store's close left the new file's log alone
    assert names_in(path) == {"New"}
    assert names_in(aside) == {"Old"}  # the old file, with its write, where it was moved


def test_every_write_of_the_store_is_checked(tmp_path: Path) -> None:
    """Not only the tools' writes: the store's other transactions (an extraction mark) are refused too."""
    path = tmp_path / "notes" / "mem.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([node("Before")], [])
        shutil.rmtree(path.parent)
        with pytest.raises(StoreError, match="was deleted while this server ran; nothing was written"):
            kb.store.mark_extracted([1], "an-extractor")
