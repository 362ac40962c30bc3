"""A file written before schema 5 has no by-hand marks (nodes_by_hand, edges_by_hand): the upgrade infers them, so
what was curated by hand before it is not deleted with the documents it was also extracted from. Real DuckDB files:
the schema-4 file is one written by this code with schema 5's tables dropped (all that MIGRATIONS[5] adds)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from duckgraph.core.domain import memory_server
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import (
    DocumentInput,
    EdgeInput,
    MemoryEntityInput,
    NodeInput,
    RelationInput,
)
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION

from tests.fakes import HashingEmbedder

NOTE = "Vera Rubin and Kent Ford worked at the Carnegie Institution. Omar Reed visited; Kent Ford mentored him."


def open_kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()


def write_history(path: Path) -> None:
    """Extracted knowledge, some of it curated by hand, and a relation whose missing end is a placeholder."""
    kb = open_kb(path)
    kb.add_documents([DocumentInput(id="doc1", text=NOTE)])
    kb.add_knowledge_graph(
        [NodeInput(name=name, type=kind, source_ids=["doc1"]) for name, kind in (
            ("Vera Rubin", "Person"), ("Kent Ford", "Person"), ("Carnegie Institution", "Organization"),
            ("Omar Reed", "Person"))],
        [EdgeInput(source="Vera Rubin", target="Kent Ford", type="COLLABORATED_WITH", source_ids=["doc1"])])
    kb.curation.add_observations("Kent Ford", ["Built the spectrograph."], "default")  # curated: observations
    kb.curation.update_entity("Omar Reed", "default", properties={"role": "visitor"})  # curated: properties
    # A relation stated with the memory tools, then extracted too (it gains evidence).
    memory_server.create_relations(kb, [RelationInput.model_validate(
        {"from": "Kent Ford", "to": "Omar Reed", "relationType": "mentored"})])
    kb.add_knowledge_graph([], [EdgeInput(source="Kent Ford", target="Omar Reed", type="MENTORED",
                                          source_ids=["doc1"])])
    # Written by hand without provenance; and a placeholder, the end of a relation to a name not stored.
    kb.add_knowledge_graph([NodeInput(name="Handmade Widget", type="Thing")], [])
    memory_server.create_relations(kb, [RelationInput.model_validate(
        {"from": "Kent Ford", "to": "Ghost Entity", "relationType": "knows"})])
    kb.close()


def as_schema_4(path: Path) -> None:
    con = duckdb.connect(str(path))
    try:
        con.execute("DROP TABLE nodes_by_hand")
        con.execute("DROP TABLE edges_by_hand")
        con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    finally:
        con.close()


def after_replacing_the_document(path: Path) -> tuple[set[str], set[str], dict[str, list[str]], str | None]:
    """Names and relation types left once doc1's text is replaced, Kent Ford's observations, and what
    create_entities says of the placeholder's name."""
    kb = open_kb(path)
    try:
        kb.add_documents([DocumentInput(id="doc1", text="Rewritten: nothing about those people any more.")])
        nodes = {n.name: n for n in kb.store.list_nodes("default", limit=100)}
        types = {e.type for e in kb.store.list_edges("default", limit=100)}
        kent = nodes["Kent Ford"].id if "Kent Ford" in nodes else None
        observations = kb.store.get_observations([kent]) if kent is not None else {}
        ghost = memory_server.create_entities(kb, [MemoryEntityInput(name="Ghost Entity", entityType="Person",
                                                                     observations=["Seen once."])]).entities
        return set(nodes), types, {"Kent Ford": observations.get(kent, [])}, ghost[0].merged_into if ghost else "skipped"
    finally:
        kb.close()


def test_an_upgraded_file_keeps_what_was_curated_by_hand_as_a_file_of_this_version_does(tmp_path):
    current, upgraded = tmp_path / "current.duckdb", tmp_path / "upgraded.duckdb"
    for path in (current, upgraded):
        write_history(path)
    as_schema_4(upgraded)

    kept = after_replacing_the_document(upgraded)
    assert kept == after_replacing_the_document(current)
    names, types, observations, placeholder = kept
    # Extracted only: gone with the old text. Curated (observations, properties) or stated by hand: kept.
    assert names == {"Kent Ford", "Omar Reed", "Handmade Widget", "Ghost Entity"}
    assert types == {"MENTORED", "KNOWS"}
    assert observations == {"Kent Ford": ["Built the spectrograph."]}
    assert placeholder is None  # still a placeholder after the upgrade: create_entities fills it in
    con = duckdb.connect(str(upgraded), read_only=True)
    try:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    finally:
        con.close()
