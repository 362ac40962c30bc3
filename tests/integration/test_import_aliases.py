"""Import resolves a file's name that is a stored entity's alias onto that entity, as the tools do (an entity line as
add_knowledge_graph / create_entities, a relation's end as create_relations), says so in its summary, refuses an
alias several stored entities share, and never resolves a name the file itself defines as an entity apart; and it
says which stored values of a relation the file's line replaced. Real DuckDB files; the command as a subprocess."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from duckgraph.core.domain import memory_server
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, MemoryEntityInput, NodeInput
from duckgraph.core.files import import_ as import_module
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.core.files.import_summary import MAX_REPLACED_LISTED
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder
from tests.integration.test_compact import command_env, duckgraph

META = {"kind": "meta", "format": "duckgraph", "version": 1}


def _kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder())


def _lines(objects: list[dict]) -> list[str]:
    return [json.dumps(o) for o in objects]


def _store_robert(path: Path, *more: NodeInput) -> None:
    with _kb(path) as kb:
        kb.add_knowledge_graph([
            NodeInput(name="Robert Smith", type="Person", description="engineer", aliases=["Bob Smith"],
                      properties={"team": "core"}),
            NodeInput(name="Alice", type="Person"),
            *more,
        ], [])


def _rows(path: Path) -> dict[str, list]:
    with duckdb.connect(str(path), read_only=True) as con:
        nodes = con.execute("SELECT name, description, aliases, properties FROM nodes ORDER BY name").fetchall()
        edges = con.execute("SELECT s.name, e.type, t.name FROM edges e JOIN nodes s ON s.id = e.source_id "
                            "JOIN nodes t ON t.id = e.target_id ORDER BY 1, 2, 3").fetchall()
        observations = con.execute("SELECT n.name, o.text FROM observations o JOIN nodes n ON n.id = o.node_id "
                                   "ORDER BY 1, 2").fetchall()
    return {"nodes": nodes, "edges": edges, "observations": observations}


# -- a name that is an alias of one stored entity -------------------------------------------------------------


def test_another_host_s_export_lands_on_the_entity_its_name_is_an_alias_of(tmp_path) -> None:
    # Host 1 knows him as "Bob Smith"; host 2 stores "Robert Smith" with that alias.
    with _kb(tmp_path / "host1.duckdb") as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Bob Smith", type="person", description="likes tea", aliases=["Bobby"],
                       properties={"team": "platform", "city": "Leeds"}, observations=["plays chess"]),
             NodeInput(name="Alice", type="Person")],
            [EdgeInput(source="Bob Smith", target="Alice", type="KNOWS")])
        out = io.StringIO()
        export_jsonl(kb, out)
    exported = out.getvalue().splitlines()
    host2 = tmp_path / "host2.duckdb"
    _store_robert(host2)

    with _kb(host2) as kb:
        summary = import_lines(kb, exported)
    assert (summary.names_resolved, summary.resolved) == (1, ["Bob Smith -> Robert Smith"])
    assert summary.nodes_created == 0 and summary.edges_created == 1
    # add_knowledge_graph's merge: the stored description goes on, the line's is added; a property value the file
    # replaced is said, as for any line.
    assert (summary.nodes_values_replaced, summary.values_replaced) == (1, ["Robert Smith (properties)"])
    rows = _rows(host2)
    assert [name for name, *_ in rows["nodes"]] == ["Alice", "Robert Smith"]
    robert = rows["nodes"][1]
    assert robert[1] == "engineer; likes tea"  # joined as merge_entities joins descriptions
    assert robert[2] == ["Bob Smith", "Bobby"]
    assert json.loads(robert[3]) == {"team": "platform", "city": "Leeds"}
    assert rows["edges"] == [("Robert Smith", "KNOWS", "Alice")]
    assert rows["observations"] == [("Robert Smith", "plays chess")]

    with _kb(host2) as kb:  # importing it again changes nothing
        again = import_lines(kb, exported)
    assert (again.nodes_created, again.nodes_updated, again.edges_created, again.edges_updated) == (0, 0, 0, 0)
    assert (again.nodes_values_replaced, again.resolved) == (0, ["Bob Smith -> Robert Smith"])
    assert _rows(host2) == rows


def test_the_command_says_which_names_it_resolved_and_which_relation_values_it_replaced(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Robert Smith", type="Person", aliases=["Bob Smith"]),
             NodeInput(name="Alice", type="Person")],
            [EdgeInput(source="Robert Smith", target="Alice", type="KNOWS", description="met at school",
                       weight=0.5, properties={"since": "1999"})])
    file = tmp_path / "other.jsonl"
    file.write_text("\n".join(_lines([
        META,
        {"kind": "node", "id": 1, "name": "Alice", "type": "Person"},
        {"kind": "node", "id": 2, "name": "Bob Smith", "type": "Person", "observations": ["likes tea"]},
        {"kind": "edge", "source_id": 2, "target_id": 1, "type": "KNOWS", "description": "colleagues"},
    ])) + "\n", encoding="utf-8")
    env = command_env(tmp_path / "env")
    done = duckgraph("import", str(file), "--db", str(db), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0 entities created" in done.stdout and "0 relations created, 1 updated" in done.stdout
    assert ("duckgraph: 1 name of the file resolved to a stored entity (an alias of it), and imported onto it: "
            "Bob Smith -> Robert Smith") in done.stderr
    assert ("duckgraph: 1 relation had stored values replaced by the file's: Robert Smith -KNOWS-> Alice "
            "(description, weight, properties)") in done.stderr
    assert _rows(db)["observations"] == [("Robert Smith", "likes tea")]

    again = duckgraph("import", str(file), "--db", str(db), "--json", env=env, cwd=tmp_path)
    summary = json.loads(again.stdout)
    assert (summary["edges_unchanged"], summary["edges_values_replaced"], summary["relation_values_replaced"]) \
        == (1, 0, [])
    assert "replaced" not in again.stderr


def test_a_memory_server_file_s_entity_and_relations_land_on_the_entity_of_the_alias(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    _store_robert(db, NodeInput(name="Carol", type="Person", aliases=["Caz"]))
    lines = _lines([
        {"type": "entity", "name": "Bob Smith", "entityType": "Person", "observations": ["likes tea"]},
        {"type": "relation", "from": "Bob Smith", "to": "Alice", "relationType": "knows"},
        {"type": "relation", "from": "Alice", "to": "Caz", "relationType": "knows"},  # an end with no entity line
    ])
    with _kb(db) as kb:
        summary = import_lines(kb, lines)
        graph = memory_server.open_nodes(kb, ["Robert Smith"])
    assert summary.resolved == ["Bob Smith -> Robert Smith", "Caz -> Carol"] and summary.names_resolved == 2
    assert (summary.nodes_created, summary.edges_created, summary.placeholders) == (0, 2, [])
    assert [e.observations for e in graph.entities] == [["likes tea"]]
    rows = _rows(db)
    assert [name for name, *_ in rows["nodes"]] == ["Alice", "Carol", "Robert Smith"]
    assert rows["edges"] == [("Alice", "KNOWS", "Carol"), ("Robert Smith", "KNOWS", "Alice")]
    with _kb(db) as kb:
        again = import_lines(kb, lines)
    assert (again.nodes_created, again.nodes_updated, again.edges_created, again.nodes_unchanged) == (0, 0, 0, 1)


def test_import_resolves_as_create_entities_does(tmp_path) -> None:
    # The same stored graph, the same entity sent by create_entities and by a memory file: the same result.
    for way in ("tool", "file"):
        db = tmp_path / f"{way}.duckdb"
        _store_robert(db)
        with _kb(db) as kb:
            if way == "tool":
                memory_server.create_entities(kb, [MemoryEntityInput(name="Bob Smith", entityType="Person",
                                                                     observations=["likes tea"])])
            else:
                import_lines(kb, _lines([{"type": "entity", "name": "Bob Smith", "entityType": "Person",
                                          "observations": ["likes tea"]}]))
        assert _rows(db)["observations"] == [("Robert Smith", "likes tea")], way


def test_an_alias_of_an_entity_of_another_type_is_not_resolved(tmp_path) -> None:
    # Resolution's rule 2 holds for entities of the same type only, as in the tools.
    db = tmp_path / "kb.duckdb"
    _store_robert(db)
    with _kb(db) as kb:
        summary = import_lines(kb, _lines([META, {"kind": "node", "name": "Bob Smith", "type": "Band"}]))
    assert (summary.nodes_created, summary.names_resolved) == (1, 0)


# -- a name that is an alias of several stored entities -------------------------------------------------------


@pytest.mark.parametrize("lines", [
    [META, {"kind": "node", "name": "Alice", "type": "Person"},
     {"kind": "node", "name": "Bob Smith", "type": "Person", "observations": ["likes tea"]}],
    [META, {"kind": "edge", "source": "Bob Smith", "target": "Alice", "type": "KNOWS"}],
    [{"type": "entity", "name": "Bob Smith", "entityType": "Person", "observations": ["likes tea"]}],
], ids=["duckgraph node", "duckgraph edge by name", "memory entity"])
def test_an_alias_of_several_stored_entities_refuses_the_import(tmp_path, lines) -> None:
    db = tmp_path / "kb.duckdb"
    _store_robert(db, NodeInput(name="Roberta Smith", type="Person", aliases=["Bob Smith"]))
    before = _rows(db)
    with _kb(db) as kb, pytest.raises(InvalidInputError) as refused:
        import_lines(kb, _lines(lines), source="f.jsonl")
    assert f"f.jsonl:{len(lines)}: the entity 'Bob Smith' is not stored, but it is an alias of several stored " \
           "entities ('Robert Smith', 'Roberta Smith')" in str(refused.value)
    assert "nothing was imported: write the exact name of one of them in the file" in str(refused.value)
    assert _rows(db) == before


# -- names the file defines stay the file's ---------------------------------------------------------------------


def test_an_entity_the_file_defines_is_never_merged_into_another_entity_of_the_file(tmp_path, monkeypatch) -> None:
    # Host 1 keeps "Bob Smith" and "Robert Smith" apart; host 2 has "Bob Smith" as Robert's alias. Importing host
    # 1's export keeps them apart, as add_knowledge_graph keeps two nodes of one call apart, even when the two
    # lines are planned in different batches of the file.
    monkeypatch.setattr(import_module, "BATCH_LINES", 2)
    with _kb(tmp_path / "host1.duckdb") as kb:
        kb.add_knowledge_graph([NodeInput(name="Bob Smith", type="Person", observations=["the son"]),
                                NodeInput(name="Robert Smith", type="Person", observations=["the father"])],
                               [EdgeInput(source="Bob Smith", target="Robert Smith", type="CHILD_OF")])
        out = io.StringIO()
        export_jsonl(kb, out)
    host2 = tmp_path / "host2.duckdb"
    _store_robert(host2)
    with _kb(host2) as kb:
        summary = import_lines(kb, out.getvalue().splitlines())
    assert (summary.names_resolved, summary.nodes_created) == (0, 1)
    rows = _rows(host2)
    assert rows["edges"] == [("Bob Smith", "CHILD_OF", "Robert Smith")]
    assert rows["observations"] == [("Bob Smith", "the son"), ("Robert Smith", "the father")]


def test_an_export_imported_back_resolves_each_name_to_itself(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    _store_robert(db)
    with _kb(db) as kb:  # an entity named as another's alias: of another type, the tools keep it apart
        kb.add_knowledge_graph([NodeInput(name="Bob Smith", type="Band", observations=["a band"])],
                               [EdgeInput(source="Bob Smith", target="Alice", type="KNOWS")])
        out = io.StringIO()
        export_jsonl(kb, out)
    before = _rows(db)
    assert [name for name, *_ in before["nodes"]] == ["Alice", "Bob Smith", "Robert Smith"]
    with _kb(db) as kb:
        summary = import_lines(kb, out.getvalue().splitlines())
    assert (summary.names_resolved, summary.nodes_created, summary.edges_created) == (0, 0, 0)
    assert _rows(db) == before
    fresh = tmp_path / "fresh.duckdb"
    with _kb(fresh) as kb:
        summary = import_lines(kb, out.getvalue().splitlines())
    assert summary.names_resolved == 0 and _rows(fresh) == before


def test_a_name_defined_after_the_line_resolved_onto_it_is_refused(tmp_path, monkeypatch) -> None:
    # A hand-written file defines "Robert Smith" only after a document line, in a later batch: "Bob Smith" was
    # already imported onto the stored Robert Smith, so the two the file keeps apart would become one.
    monkeypatch.setattr(import_module, "BATCH_LINES", 2)
    db = tmp_path / "kb.duckdb"
    _store_robert(db)
    before = _rows(db)
    lines = _lines([META, {"kind": "node", "id": 1, "name": "Bob Smith", "type": "Person"},
                    {"kind": "document", "id": "notes", "text": "Bob and Robert."},
                    {"kind": "node", "id": 2, "name": "Robert Smith", "type": "Person"}])
    with _kb(db) as kb, pytest.raises(InvalidInputError) as refused:
        import_lines(kb, lines, source="f.jsonl")
    assert ("f.jsonl:4: the entity 'Robert Smith' is the stored entity that line 2's 'Bob Smith' (an alias of it) "
            "was imported onto") in str(refused.value)
    assert "put the file's node lines together" in str(refused.value)
    assert _rows(db) == before


def test_an_edge_naming_one_entity_by_its_name_and_its_alias_is_refused(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    _store_robert(db)
    before = _rows(db)
    with _kb(db) as kb, pytest.raises(InvalidInputError) as refused:
        import_lines(kb, _lines([META, {"kind": "edge", "source": "Bob Smith", "target": "Robert Smith",
                                        "type": "KNOWS"}]), source="f.jsonl")
    assert "f.jsonl:2: source and target are the same entity, 'Robert Smith'" in str(refused.value)
    assert _rows(db) == before


# -- a relation's stored values replaced ----------------------------------------------------------------------


def test_the_relations_whose_stored_values_the_file_replaced_are_counted_and_listed(tmp_path) -> None:
    count = MAX_REPLACED_LISTED + 3
    db = tmp_path / "kb.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Acme", type="Organization"),
             *(NodeInput(name=f"Person {i:02}", type="Person") for i in range(count))],
            [EdgeInput(source=f"Person {i:02}", target="Acme", type="WORKS_AT", description="stored")
             for i in range(count)])
        summary = import_lines(kb, _lines([META, *(
            {"kind": "edge", "source": f"Person {i:02}", "target": "Acme", "type": "WORKS_AT",
             "description": "the file's"} for i in range(count))]))
    assert summary.edges_values_replaced == count and summary.edges_updated == count
    assert summary.relation_values_replaced == [f"Person {i:02} -WORKS_AT-> Acme (description)"
                                                for i in range(MAX_REPLACED_LISTED)]


def test_filling_in_a_relation_loses_nothing_but_reopening_an_ended_one_loses_its_end(tmp_path) -> None:
    db = tmp_path / "kb.duckdb"
    with _kb(db) as kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Tom Reyes", type="Person"), NodeInput(name="Acme", type="Organization"),
             NodeInput(name="Initech", type="Organization")],
            [EdgeInput(source="Tom Reyes", target="Acme", type="WORKS_AT"),
             EdgeInput(source="Tom Reyes", target="Initech", type="WORKS_AT", valid_from=datetime(2020, 1, 1),
                       valid_until=datetime(2022, 1, 1))])
        summary = import_lines(kb, _lines([
            META,
            # a blank description and an unknown start filled in
            {"kind": "edge", "source": "Tom Reyes", "target": "Acme", "type": "WORKS_AT",
             "description": "since spring", "valid_from": "2023-03-01T00:00:00Z"},
            # the same start, no end: the stored period is written over, its end gone
            {"kind": "edge", "source": "Tom Reyes", "target": "Initech", "type": "WORKS_AT",
             "valid_from": "2020-01-01T00:00:00Z"},
        ]))
    assert summary.edges_updated == 2
    assert summary.relation_values_replaced == ["Tom Reyes -WORKS_AT-> Initech (valid_until)"]
