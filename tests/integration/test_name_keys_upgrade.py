"""A file whose stored loose forms of names (table node_names) follow the rule before schema 7, which dropped
every combining mark (the kana voicing marks too) and left ł, ø, æ... as they are: opening it upgrades it and
recomputes them, so that lookups and resolution follow the new rule on it as on a new file. Real DuckDB files."""

from __future__ import annotations

import logging
import re
import unicodedata
from pathlib import Path

import duckdb

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain import memory_server
from duckgraph.core.domain.model import MemoryEntityInput, NodeInput, RelationInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.schema import NAME_KEYS_VERSION, SCHEMA_VERSION
from duckgraph.ports import entity_key
from tests.fakes import HashingEmbedder
from tests.stored import file_meta


def old_loose_key(name: str) -> str:
    """The loose form as schema 6's duckgraph wrote it."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    bare = "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()
    return " ".join(re.findall(r"[^\W_]+", bare))


def as_schema_6_with_old_loose_forms(path: Path) -> None:
    """The file as schema 6 wrote it: no record of deletions, loose forms by the old rule."""
    con = duckdb.connect(str(path))
    try:
        con.execute("DROP TABLE deletions")
        names = con.execute("SELECT DISTINCT n.namespace, n.node_id, d.key FROM node_names n "
                            "JOIN nodes d ON d.id = n.node_id").fetchall()
        con.execute("DELETE FROM node_names")
        for namespace, node_id, key in names:
            for form in dict.fromkeys([key, old_loose_key(key)]):
                con.execute("INSERT INTO node_names VALUES (?, ?, ?)", [namespace, form, node_id])
        con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'name_keys'")
    finally:
        con.close()


def stored_forms(path: Path) -> dict[str, set[str]]:
    """Each node's name -> the keys node_names holds for it."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute("SELECT d.name, n.key FROM node_names n JOIN nodes d ON d.id = n.node_id").fetchall()
    finally:
        con.close()
    forms: dict[str, set[str]] = {}
    for name, key in rows:
        forms.setdefault(name, set()).add(key)
    return forms


def test_opening_a_file_of_schema_6_recomputes_the_loose_forms_of_its_names(db_path: Path) -> None:
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="バス", type="Product"), NodeInput(name="Łukasz Nowak", type="Person")],
                               [])
    as_schema_6_with_old_loose_forms(db_path)
    assert stored_forms(db_path) == {"バス": {"バス", "ハス"}, "Łukasz Nowak": {"łukasz nowak"}}  # the old rule's
    assert SCHEMA_VERSION == 7
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        # The stored forms are the new rule's: "Lukasz Nowak" is the stored person; "ハス" (a lotus) is no bus.
        result = kb.add_knowledge_graph([NodeInput(name="Lukasz Nowak", type="Person"),
                                         NodeInput(name="ハス", type="Product")], [])
        assert [(r.name, r.into) for r in result.resolved] == [("Lukasz Nowak", "Łukasz Nowak")]
        assert result.nodes_created == 1
    assert stored_forms(db_path) == {"バス": {"バス"}, "Łukasz Nowak": {"łukasz nowak", "lukasz nowak"},
                                     "ハス": {"ハス"}}
    meta = file_meta(db_path)
    assert meta["schema_version"] == "7" and meta["name_keys"] == NAME_KEYS_VERSION


def v3_loose_key(name: str) -> str:
    """The loose form as name keys version 3 wrote it: every symbol dropped, so "C++", "C#" and "C" were all "c"."""
    from duckgraph.ports.names import MARKS, unaccented

    return " ".join(re.findall(rf"[^\W_](?:[^\W_]|[{MARKS}])*", unaccented(name)))


def as_name_keys_3(path: Path) -> None:
    """The file's name index as name keys version 3 wrote it (every name and alias, with its loose form)."""
    con = duckdb.connect(str(path))
    try:
        names = con.execute("SELECT namespace, id, key, aliases FROM nodes").fetchall()
        con.execute("DELETE FROM node_names")
        for namespace, node_id, key, aliases in names:
            keys = [key, *(entity_key(alias) for alias in aliases)]
            for form in dict.fromkeys([*keys, *filter(None, map(v3_loose_key, keys))]):
                con.execute("INSERT INTO node_names VALUES (?, ?, ?)", [namespace, form, node_id])
        con.execute("UPDATE meta SET value = '3' WHERE key = 'name_keys'")
    finally:
        con.close()


def test_loose_forms_that_dropped_symbols_are_rebuilt_at_open(db_path: Path) -> None:
    """A file whose loose forms of names dropped every symbol (name keys version 3) gets them rebuilt when opened:
    its index no longer finds "C++" and "C#" by "c", nor ".NET" by "net"."""
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=name, type="Language") for name in ("C++", "C#", ".NET")], [])
    as_name_keys_3(db_path)
    assert stored_forms(db_path) == {"C++": {"c++", "c"}, "C#": {"c#", "c"}, ".NET": {".net", "net"}}
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert kb.store.find_nodes(kb.namespace, ["c", "net"]) == []
        assert [n.name for n in kb.store.find_nodes(kb.namespace, ["c#"])] == ["C#"]
    assert stored_forms(db_path) == {"C++": {"c++"}, "C#": {"c#"}, ".NET": {".net"}}
    assert file_meta(db_path)["name_keys"] == NAME_KEYS_VERSION == "4"


def test_aliases_that_name_keys_3_merged_are_named_when_the_keys_are_rebuilt(db_path: Path, caplog) -> None:
    """Keys 3 dropped symbols, so create_entities merged "C++" and "C#" into "C" (as its aliases, with their
    observations). Keys 4 keep them apart, but rebuilding the keys splits nothing (an alias may be meant): it says so
    in a WARNING naming them, and the store's health lists them (for doctor) while "C" has them. Aliases both rules
    join to their entity ("Jose" of "José"), or neither ("K8s"), are not named."""
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="C", type="Language", aliases=["C++", "C#"]),
                                NodeInput(name="José", type="Person", aliases=["Jose"]),
                                NodeInput(name="Kubernetes", type="Technology", aliases=["K8s"])], [])
        assert kb.store.health()["aliases_apart"] == []
    as_name_keys_3(db_path)
    assert stored_forms(db_path)["C"] == {"c", "c++", "c#"}  # the old keys alone cannot tell which alias was merged
    with caplog.at_level(logging.WARNING, logger="duckgraph.plugins.duckdb.schema"):
        with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
            assert kb.store.health()["aliases_apart"] == [
                {"namespace": "default", "name": "C", "aliases": ["C++", "C#"], "apart": ["C++", "C#"]}]
            kb.curation.update_entity("C", kb.namespace, aliases=["C#"])  # C++ split off, C# meant
            assert kb.add_knowledge_graph([NodeInput(name="C++", type="Language")], []).nodes_created == 1
            assert kb.store.health()["aliases_apart"] == [
                {"namespace": "default", "name": "C", "aliases": ["C#"], "apart": ["C#"]}]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "2 alias(es) that an older duckgraph joined to their entity's name" in warnings[0]
    assert "'C++' of 'C' (namespace 'default'); 'C#' of 'C' (namespace 'default')." in warnings[0]
    assert file_meta(db_path)["name_keys"] == "4"
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:  # kept in the file, not found again
        kb.curation.update_entity("C", kb.namespace, aliases=[])
        assert kb.store.health()["aliases_apart"] == []


def stored_types(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return [row[0] for row in con.execute("SELECT type FROM edges ORDER BY id").fetchall()]
    finally:
        con.close()


def test_relation_types_stored_without_their_marks_are_spelt_again_at_open(db_path: Path) -> None:
    """Rule 1 of relation types dropped combining marks ("काम करता है" -> क_म_करत_ह): a file it wrote gets the types
    of the memory tools' relations (whose spelling is kept) spelt again, so the same label names the same relation."""
    works = RelationInput.model_validate({"from": "राहुल", "to": "इन्फोसिस", "relationType": "काम करता है"})
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        memory_server.create_entities(kb, [MemoryEntityInput(name=name, entityType="x", observations=[])
                                           for name in ("राहुल", "इन्फोसिस")])
        memory_server.create_relations(kb, [works])
    assert stored_types(db_path) == ["काम_करता_है"]
    con = duckdb.connect(str(db_path))
    try:  # as rule 1 wrote it
        con.execute("UPDATE edges SET type = 'क_म_करत_ह'")
        con.execute("DELETE FROM meta WHERE key = 'relation_types'")
    finally:
        con.close()
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        assert memory_server.create_relations(kb, [works]) == []  # exists: not a second relation
        graph = memory_server.read_graph(kb)
        assert [(r.from_, r.relationType, r.to) for r in graph.relations] == [("राहुल", "काम करता है", "इन्फोसिस")]
    assert stored_types(db_path) == ["काम_करता_है"]
    assert file_meta(db_path)["relation_types"] == "2"
