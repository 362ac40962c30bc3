"""recent_changes lists what writes deleted or replaced, on a real DuckDB file: an entity deleted (with its facts), a
relation deleted, observations deleted, entities merged, documents deleted (ingest --prune) or re-added with another
text, in time order with the rest, within the namespace, span and page asked for. A large deletion names a bounded
number of things; the record is part of the file (a backup keeps it) and a file of schema 6 is upgraded to hold it.
The instant hashing embedder: what is checked here is the store, not the vectors."""

from __future__ import annotations

import io
import time
from datetime import timedelta
from pathlib import Path

import duckdb

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput, RelationRef
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.schema import LABEL_CHARS, NAMED_PER_WRITE, SCHEMA_VERSION
from duckgraph.ports import NodeRecord, WriteBatch
from tests.fakes import HashingEmbedder

NODES = [NodeInput(name="Ada Lovelace", type="Person", observations=["Wrote the first program.", "Born in 1815."]),
         NodeInput(name="Analytical Engine", type="Machine"), NodeInput(name="Charles Babbage", type="Person")]
EDGES = [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="WROTE_FOR", valid_from="1843-09-01"),
         EdgeInput(source="Charles Babbage", target="Analytical Engine", type="DESIGNED")]


def lines(kb: KnowledgeBase, **options) -> list[str]:
    """recent_changes' lines without their moments."""
    return [line.split(" ", 4)[4] for line in kb.recent_changes(**options).text.splitlines() if line.startswith("- ")]


def later() -> None:
    time.sleep(0.01)  # a later moment than the write before, as between two calls


def test_a_deleted_entity_is_listed_with_its_facts_newest_first(fake_kb):
    fake_kb.add_knowledge_graph(NODES, EDGES)
    later()
    fake_kb.curation.delete_entities(["Ada Lovelace"], "default")
    result = fake_kb.recent_changes()
    assert lines(fake_kb)[:2] == ["entity deleted: Ada Lovelace [Person]",
                                  "fact deleted: Ada Lovelace wrote for Analytical Engine (since 1843-09-01)"]
    # What is left of the first write follows, older; the structured result says the same, in the same order.
    assert lines(fake_kb)[2:] == ["entity created: Analytical Engine [Machine]", "entity created: Charles Babbage [Person]",
                                  "fact added: Charles Babbage designed Analytical Engine"]
    assert [(c.change, c.subject) for c in result.changes][:2] == [
        ("entity deleted", "Ada Lovelace [Person]"),
        ("fact deleted", "Ada Lovelace wrote for Analytical Engine (since 1843-09-01)")]
    assert result.changes[0].at > result.changes[2].at


def test_a_deleted_relation_and_deleted_observations_are_listed(fake_kb):
    fake_kb.add_knowledge_graph(NODES, EDGES)
    later()
    fake_kb.curation.delete_relations([RelationRef(source="Charles Babbage", target="Analytical Engine",
                                                   type="DESIGNED")], "default")
    later()
    fake_kb.curation.delete_observations("Ada Lovelace", ["Born in 1815."], "default")
    assert lines(fake_kb)[:3] == ["entity updated: Ada Lovelace [Person]",
                                  "observations deleted: Ada Lovelace [Person]: Born in 1815.",
                                  "fact deleted: Charles Babbage designed Analytical Engine"]


def test_a_merge_lists_each_source_as_merged_into_the_target(fake_kb):
    fake_kb.add_knowledge_graph([*NODES, NodeInput(name="Lady Lovelace", type="Person")],
                                [*EDGES, EdgeInput(source="Lady Lovelace", target="Charles Babbage", type="KNEW")])
    later()
    fake_kb.curation.merge_entities(["Lady Lovelace"], "Ada Lovelace", "default")
    newest = lines(fake_kb)
    assert "entity merged: Lady Lovelace [Person] into Ada Lovelace (1 relation moved)" in newest
    # The fact moved to the target: counted on the merge's line, not deleted.
    assert not [line for line in newest if line.startswith(("fact deleted", "entity deleted"))]


def test_documents_pruned_and_replaced_are_listed(fake_kb, tmp_path: Path):
    from duckgraph.core.files import folder

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "engine.md").write_text("# The engine\n\nIt computed Bernoulli numbers.", encoding="utf-8")
    (notes / "old.md").write_text("# Old\n\nNotes nobody needs.", encoding="utf-8")
    folder.ingest(fake_kb, folder.find_files([str(notes)]), extract=False)
    (engine, engine_title), (old, _) = sorted((d.id, d.title) for d in fake_kb.store.list_documents("default"))
    later()
    (notes / "old.md").unlink()
    (notes / "engine.md").write_text("# The engine\n\nIt was never finished.", encoding="utf-8")
    folder.ingest(fake_kb, folder.find_files([str(notes)]), extract=False, prune=[folder.prefix(notes)])
    # The replaced document is listed once, as replaced, with its title; the pruned one by its id.
    assert engine_title
    assert sorted(lines(fake_kb)) == sorted([f"document deleted: {old}", f"document replaced: {engine}: {engine_title}"])
    # Stored again as it is, a document is neither added nor replaced.
    later()
    folder.ingest(fake_kb, folder.find_files([str(notes)]), extract=False)
    assert len(fake_kb.recent_changes().changes) == 2


def test_deletions_keep_to_their_namespace_span_and_page(fake_kb):
    fake_kb.add_knowledge_graph(NODES, EDGES)
    fake_kb.add_knowledge_graph(NODES, EDGES, namespace="other")
    later()
    mark = fake_kb.recent_changes(namespace="other").changes[0].at + timedelta(microseconds=1)
    later()
    fake_kb.curation.delete_entities(["Charles Babbage"], "other")
    assert not [line for line in lines(fake_kb) if "deleted" in line]
    other = lines(fake_kb, namespace="other", since=mark)
    assert other == ["entity deleted: Charles Babbage [Person]",
                     "fact deleted: Charles Babbage designed Analytical Engine"]
    assert lines(fake_kb, namespace="other", until=mark)[0].startswith("entity created")
    # Paged: the deletions take their places among the other changes.
    every = fake_kb.recent_changes(namespace="other").changes
    assert [c.change for c in every[:2]] == ["entity deleted", "fact deleted"]
    page = fake_kb.recent_changes(namespace="other", limit=1, offset=1)
    assert [c.subject for c in page.changes] == [every[1].subject] and page.next_offset == 2


def test_a_large_deletion_names_a_bounded_number_of_short_labels_quickly(fake_kb, db_path: Path):
    count = 10_000
    long_type = "T" * 250  # an entity's label, "Name [Type]", would be longer than the log keeps
    nodes = [NodeRecord(namespace="default", key=f"n{i}", name=f"N{i:05d}", type=long_type) for i in range(count)]
    with fake_kb.writing(vectors=False) as writer:
        ids = list(writer.commit(WriteBatch(nodes=nodes)).node_ids.values())
    started = time.perf_counter()
    with fake_kb.writing(vectors=False) as writer:
        assert writer.commit(WriteBatch(delete_nodes=ids)).nodes_deleted == count
    took = time.perf_counter() - started
    changes = fake_kb.recent_changes(limit=1_000, offset=0).changes
    named = [c.subject for c in changes if c.change == "entity deleted"]
    assert len(named) == 1_000 and named[0] == f"N00000 [{long_type}"[:LABEL_CHARS]
    assert all(len(s) == LABEL_CHARS for s in named)
    last = fake_kb.recent_changes(limit=5, offset=NAMED_PER_WRITE).changes[0]
    assert (last.change, last.subject) == ("entity deleted", f"… and {count - NAMED_PER_WRITE:,} more, "
                                                             "not named one by one")
    fake_kb.close()
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        assert con.execute("SELECT count(*), max(length(label)) FROM deletions").fetchone() == (
            NAMED_PER_WRITE + 1, LABEL_CHARS)
    finally:
        con.close()
    assert took < 10, took  # the record is one statement, whatever the count


def test_a_backup_keeps_what_was_deleted_and_an_export_does_not_carry_it(fake_kb, tmp_path: Path):
    from duckgraph.core.files.export import export_jsonl
    from duckgraph.core.files.import_ import import_lines

    fake_kb.add_knowledge_graph(NODES, EDGES)
    fake_kb.curation.delete_entities(["Ada Lovelace"], "default")
    assert "entity deleted: Ada Lovelace [Person]" in lines(fake_kb)
    fake_kb.backup(tmp_path / "copy.duckdb")
    with KnowledgeBase(DuckDBStore(tmp_path / "copy.duckdb"), HashingEmbedder()) as copy:
        assert lines(copy) == lines(fake_kb)
    # An export holds what is stored, not what was deleted (docs/export-import.md).
    exported = io.StringIO()
    export_jsonl(fake_kb, exported)
    with KnowledgeBase(DuckDBStore(tmp_path / "imported.duckdb"), HashingEmbedder()) as imported:
        import_lines(imported, exported.getvalue().splitlines())
        assert lines(imported) == [line for line in lines(fake_kb) if "deleted" not in line]


def as_schema_6(path: Path) -> None:
    """The file as schema 6 wrote it: no record of deletions."""
    con = duckdb.connect(str(path))
    try:
        con.execute("DROP TABLE deletions")
        con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    finally:
        con.close()


def tables_and_version(path: Path) -> tuple[set[str], str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return ({row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()},
                con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
    finally:
        con.close()


def test_a_file_of_schema_6_is_upgraded_and_lists_later_deletions(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph(NODES, EDGES)
    as_schema_6(db_path)
    assert SCHEMA_VERSION == 7
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        # Upgraded at open, the log empty: what was written before is listed as before.
        assert not [line for line in lines(kb) if "deleted" in line] and len(lines(kb)) == 5
        kb.curation.delete_entities(["Ada Lovelace"], "default")
        assert lines(kb)[:2] == ["entity deleted: Ada Lovelace [Person]",
                                 "fact deleted: Ada Lovelace wrote for Analytical Engine (since 1843-09-01)"]
    tables, version = tables_and_version(db_path)
    assert "deletions" in tables and version == "7"
    # The copy kept before the upgrade is the file as schema 6 wrote it.
    tables, version = tables_and_version(db_path.with_name("kb.schema6.duckdb"))
    assert "deletions" not in tables and version == "6"
