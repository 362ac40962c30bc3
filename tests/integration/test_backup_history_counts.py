"""What `duckgraph backup`, `restore` and `compact` say a copy holds counts every relation stored, the ended ones
(history) included and named, so that a copy that lost history is caught by compact's check and never reported as
whole. Real DuckDB files; the commands run as a user runs them."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, RelationToDelete
from duckgraph.core.files.backup import compact
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import StoreError
from tests.fakes import HashingEmbedder
from tests.integration.test_backup import fill, table_contents
from tests.integration.test_compact import command_env, duckgraph

#: The relations of `history_file`: 3 of `fill` (one of them ended here), a past period, one that starts later.
STORED, ENDED = 5, 2


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    db = tmp_path / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
        kb.add_knowledge_graph([], [
            EdgeInput(source="Marie Curie", target="Paris", type="lived in", valid_from="1891-01-01",
                      valid_until="1934-07-04"),
            EdgeInput(source="Radium", target="Nobel Prize", type="subject of", valid_from="2999-01-01"),
        ])
        kb.end_relations([EndRelationInput(source="Marie Curie", target="University of Paris", type="worked at",
                                           ended_at="1934-07-04")])
        assert kb.stats()["edges"] == STORED - ENDED - 1  # what holds now: neither history nor the later one
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM edges").fetchone()[0] == STORED
    finally:
        con.close()
    return db


def opened(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder())


def test_the_store_counts_every_relation_and_those_ended_by_a_moment(history_file: Path):
    with opened(history_file) as kb:
        assert kb.store.relation_counts(datetime.now(timezone.utc)) == {"edges": STORED, "edges_ended": ENDED}
        # Before the two periods ended, none had: "ended" is of the moment asked about.
        assert kb.store.relation_counts(datetime(1900, 1, 1, tzinfo=timezone.utc)) == {"edges": STORED,
                                                                                       "edges_ended": 0}


def test_backup_restore_and_compact_report_the_ended_relations(tmp_path: Path, history_file: Path):
    env = command_env(tmp_path)
    with opened(history_file) as kb:
        report = kb.backup(tmp_path / "first.duckdb")
    assert (report["edges"], report["edges_ended"]) == (STORED, ENDED)

    done = duckgraph("backup", "--db", str(history_file), str(tmp_path / "copy.duckdb"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f": 6 entities, {STORED} relations ({ENDED} ended), 3 documents, " in done.stdout, done.stdout

    done = duckgraph("restore", str(tmp_path / "copy.duckdb"), "--db", str(tmp_path / "restored.duckdb"), "--json",
                     env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    restored = json.loads(done.stdout)
    assert (restored["nodes"], restored["edges"], restored["edges_ended"]) == (6, STORED, ENDED)

    done = duckgraph("compact", "--db", str(tmp_path / "restored.duckdb"), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f": 6 entities, {STORED} relations ({ENDED} ended), 3 documents, " in done.stdout, done.stdout
    # The history is in the compacted file, row for row.
    assert table_contents(tmp_path / "restored.duckdb")["edges"] == table_contents(history_file)["edges"]


def test_a_compact_copy_that_lost_history_is_not_put_in_place(history_file: Path):
    rows = table_contents(history_file)

    def losing_history(path: Path) -> KnowledgeBase:
        kb = opened(path)
        if path != history_file:  # the copy: its past period is gone, while what holds now is the same
            with kb:
                deleted = kb.curation.delete_relations(
                    [RelationToDelete(source="Marie Curie", target="Paris", type="lived in", valid_from="1891-01-01")],
                    "default")
                assert len(deleted.deleted) == 1, deleted
        return kb

    with pytest.raises(StoreError) as refused:
        compact(history_file, losing_history)

    chunks = len(rows["chunks"])
    assert str(refused.value) == (
        f"could not compact {history_file}: the compact copy holds 6 entities, {STORED - 1} relations ({ENDED - 1} "
        f"ended), 3 documents, {chunks} passages, 2 namespaces, the file 6 entities, {STORED} relations ({ENDED} "
        f"ended), 3 documents, {chunks} passages, 2 namespaces; {history_file} is unchanged")
    assert table_contents(history_file) == rows
