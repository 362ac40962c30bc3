"""The keyword index saved in the file (plugins/duckdb/saved_keywords.py) on real files: a reopen reads it instead of
splitting every text again, and finds exactly what an index built from the tables finds; one saved from other rows
(a write it did not see), by other code or unreadable is never used: the index is built from the tables."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import duckdb
import pytest

from duckgraph.plugins.duckdb import DuckDBStore, keyword_texts, saved_keywords
from duckgraph.plugins.duckdb.mirror.keywords import KINDS, KeywordIndex
from duckgraph.ports import ChunkRecord, DocumentRecord, EdgeWrite, NodeRecord, WriteBatch, entity_key
from tests.integration.test_keyword_index import SESSION, node

QUERIES = [("node", "INC-142"), ("node", "orders-db v2.4"), ("node", "on call rotation"), ("edge", "owns checkout"),
           ("edge", "reorganisation 2023"), ("chunk", "refund policy"), ("chunk", "Runbook 502"),
           ("node", "zqxj nothing")]


def fill(store: DuckDBStore) -> None:
    store.write(WriteBatch(
        nodes=[node(*entity) for entity in SESSION] + [node("Other Checkout", namespace="other")],
        edges=[EdgeWrite("default", entity_key("Payments Team"), entity_key("Checkout Service"), "OWNS",
                         description="since the 2023 reorganisation")],
        documents=[DocumentRecord(namespace="default", id="runbook", title="Runbook: checkout 502",
                                  text="Restart the pods. The refund policy allows 30 days.")],
        chunks=[ChunkRecord(namespace="default", document_id="runbook", ordinal=0,
                            text="Restart the pods. The refund policy allows 30 days.")]))


def found(store: DuckDBStore) -> list[list[tuple[int, float]]]:
    return [store.keyword_search(kind, query, 5, namespace) for kind, query in QUERIES
            for namespace in ("default", "other")]


def built_from_tables(store: DuckDBStore) -> list[list[tuple[int, float]]]:
    """What an index built from the tables finds, as an open without a saved index builds it."""
    index = KeywordIndex()
    index.build({kind: keyword_texts.all_rows(store._con, store._graph, kind) for kind in KINDS})
    kept, store._keywords = store._keywords, index
    try:
        return found(store)
    finally:
        store._keywords = kept


def reopened(path: Path, **options) -> DuckDBStore:
    store = DuckDBStore(path, **options)
    store.open()
    return store


def test_a_reopen_reads_the_saved_index_and_finds_what_a_build_finds(db_path: Path):
    store = reopened(db_path)
    fill(store)
    before = found(store)
    assert any(before) and not store._keywords.read_from_file
    store.close()

    store = reopened(db_path)
    try:
        assert store._keywords.read_from_file, "the reopen split every text again"
        assert found(store) == before == built_from_tables(store)
        assert "read from the file" in store.health()["keyword_index"]
        # a write after the read is findable at once, and saved at close
        store.write(WriteBatch(nodes=[node("Billing Gateway", description="handles INC-999 retries")]))
        assert found(store) == built_from_tables(store)
        assert store.keyword_search("node", "INC-999", 5, "default")
    finally:
        store.close()
    store = reopened(db_path)
    try:
        assert store._keywords.read_from_file
        hits = store.keyword_search("node", "INC-999", 5, "default")
        assert store.get_nodes([hits[0][0]])[0].name == "Billing Gateway"
        assert found(store) == built_from_tables(store)
    finally:
        store.close()


def test_an_index_saved_before_a_write_it_did_not_see_is_built_again(db_path: Path, caplog):
    store = reopened(db_path)
    fill(store)
    store.close()
    # another program (an older duckgraph, a user's SQL) changes a text the index holds, and a passage's title
    con = duckdb.connect(str(db_path))
    con.execute("UPDATE nodes SET description = 'mentions the word xylophone' WHERE name = 'Orders DB'")
    con.execute("UPDATE documents SET title = 'Playbook' WHERE id = 'runbook'")
    con.close()

    with caplog.at_level(logging.INFO, logger="duckgraph.plugins.duckdb.saved_keywords"):
        store = reopened(db_path)
    try:
        assert not store._keywords.read_from_file
        assert "from other rows" in caplog.text
        hits = store.keyword_search("node", "xylophone", 5, "default")
        assert [n.name for n in store.get_nodes([i for i, _ in hits])] == ["Orders DB"]
        assert store.keyword_search("chunk", "playbook", 5, "default")
        assert not store.keyword_search("chunk", "runbook", 5, "default")
    finally:
        store.close()
    store = reopened(db_path)  # the close saved the index built
    try:
        assert store._keywords.read_from_file and store.keyword_search("node", "xylophone", 5, "default")
    finally:
        store.close()


@pytest.mark.parametrize("spoil", ["code", "data"])
def test_an_index_saved_by_other_code_or_unreadable_is_built_again(db_path: Path, spoil: str, caplog):
    store = reopened(db_path)
    fill(store)
    before = found(store)
    store.close()
    con = duckdb.connect(str(db_path))
    if spoil == "code":  # another duckgraph's splitting, or another version's
        info = json.loads(con.execute("SELECT info FROM keyword_index").fetchone()[0])
        con.execute("UPDATE keyword_index SET info = ?", [json.dumps({**info, "code": "another"})])
    else:
        con.execute("UPDATE keyword_index SET data = ?", [b"not an index"])
    con.close()

    with caplog.at_level(logging.INFO, logger="duckgraph.plugins.duckdb.saved_keywords"):
        store = reopened(db_path)
    try:
        assert not store._keywords.read_from_file
        assert ("by other code" if spoil == "code" else "unreadable") in caplog.text
        assert found(store) == before
    finally:
        store.close()


def test_a_read_only_open_saves_nothing_and_an_unchanged_index_is_not_saved_again(db_path: Path):
    store = reopened(db_path)
    fill(store)
    store.close()
    con = duckdb.connect(str(db_path))
    con.execute("DELETE FROM keyword_index")
    con.close()

    store = reopened(db_path, read_only=True)
    assert not store._keywords.read_from_file and found(store)
    store.close()
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT count(*) FROM keyword_index").fetchone()[0] == 0
    con.close()

    store = reopened(db_path)  # builds and saves
    store.close()
    con = duckdb.connect(str(db_path), read_only=True)
    saved_at = con.execute("SELECT saved_at FROM keyword_index").fetchone()[0]
    con.close()
    store = reopened(db_path)  # reads; nothing changed: nothing saved
    assert store._keywords.read_from_file
    store.close()
    con = duckdb.connect(str(db_path), read_only=True)
    assert con.execute("SELECT saved_at FROM keyword_index").fetchone()[0] == saved_at
    con.close()


def test_the_fingerprint_changes_with_every_column_a_text_is_made_of(db_path: Path):
    store = reopened(db_path)
    fill(store)
    store.write(WriteBatch(nodes=[node("Cache Layer", "cache", "Redis in front of orders.", ["Alias cache-1"],
                                       aliases=("cl",), properties={"tier": "gold"})]))
    store.close()
    con = duckdb.connect(str(db_path))
    changes = [
        "UPDATE nodes SET name = 'Cache Tier' WHERE key = 'cache layer'",
        "UPDATE nodes SET aliases = ['ct'] WHERE key = 'cache layer'",
        "UPDATE nodes SET properties = '{\"tier\": \"silver\"}' WHERE key = 'cache layer'",
        "UPDATE nodes SET type = 'store' WHERE key = 'cache layer'",
        "UPDATE nodes SET description = 'changed' WHERE key = 'cache layer'",
        "UPDATE observations SET text = 'changed' WHERE text = 'Alias cache-1'",
        "UPDATE edges SET description = 'changed'",
        "UPDATE edges SET type = 'RUNS'",
        "UPDATE chunks SET text = 'changed'",
        "UPDATE chunks SET section = 'Intro'",
        "UPDATE documents SET title = 'changed'",
        "DELETE FROM observations WHERE text = 'On call rotation weekly'",
    ]
    seen = {saved_keywords.fingerprint(con)}
    for change in changes:
        assert con.execute(change).fetchone()[0] > 0, change
        seen.add(saved_keywords.fingerprint(con))
        assert len(seen) == len(changes[: changes.index(change) + 1]) + 1, f"{change} left the fingerprint as it was"
    # Equal rows (a table without a key, written by hand or by older code) add up rather than cancel: a pair of
    # them replaced by another pair changes it too.
    node_id = con.execute("SELECT id FROM nodes WHERE key = 'cache layer'").fetchone()[0]
    con.execute("INSERT INTO observations SELECT ?, 'kazoo', now() FROM range(2)", [node_id])
    paired = saved_keywords.fingerprint(con)
    con.execute("UPDATE observations SET text = 'banjo' WHERE text = 'kazoo'")
    assert saved_keywords.fingerprint(con) != paired
    con.close()


def test_an_import_saves_the_index_it_leaves_so_the_next_open_reads_it(db_path: Path, tmp_path: Path):
    """An import replaces the mirror wholesale (it is reloaded on the next read); its close builds and saves the
    keyword index, so that the next open, perhaps of a command that only reads, neither builds nor writes it."""
    import io

    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.files.export import export_jsonl
    from duckgraph.core.files.import_ import import_lines
    from tests.fakes import HashingEmbedder

    store = reopened(db_path)
    fill(store)
    before = found(store)
    store.close()
    exported = io.StringIO()
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        export_jsonl(kb, exported, embeddings=True)
    target = tmp_path / "imported.duckdb"
    with KnowledgeBase(DuckDBStore(target), HashingEmbedder()) as kb:
        import_lines(kb, exported.getvalue().splitlines())
    saved_at = duckdb_value(target, "SELECT saved_at FROM keyword_index")

    store = reopened(target)
    try:
        assert store._keywords.read_from_file, "the import's close did not save the index it left"
        assert [[hit[1] for hit in hits] for hits in found(store)] == [[hit[1] for hit in hits] for hits in before]
        assert found(store) == built_from_tables(store)
    finally:
        store.close()
    assert duckdb_value(target, "SELECT saved_at FROM keyword_index") == saved_at  # the reading open wrote nothing


def duckdb_value(path: Path, query: str):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(query).fetchone()[0]
    finally:
        con.close()


def test_the_saved_index_holds_no_word_of_a_deleted_row_nor_a_deleted_namespace_name(db_path: Path):
    """The in-memory vocabulary keeps every word it met; what is saved keeps only those some row holds, and the
    namespaces some row is in, so that deleting a thing also deletes its words from the file."""
    store = reopened(db_path)
    fill(store)
    store.write(WriteBatch(nodes=[node("Zanzibarian Ledger", description="quixotically private", namespace="gone")]))
    doomed = [n.id for n in store.get_nodes([i for i, _ in store.keyword_search("node", "zanzibarian", 5, "gone")])]
    assert doomed
    store.write(WriteBatch(delete_nodes=doomed))
    store.close()

    blob = duckdb_value(db_path, "SELECT data FROM keyword_index")
    assert b"zanzibar" not in blob and b"quixot" not in blob and b'"gone"' not in blob
    store = reopened(db_path)
    try:
        assert store._keywords.read_from_file
        assert found(store) == built_from_tables(store)
        assert not store.keyword_search("node", "zanzibarian", 5, "gone")
    finally:
        store.close()
