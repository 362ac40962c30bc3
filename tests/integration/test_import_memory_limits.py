"""`duckgraph import` of files that hold what the tools refuse, on real DuckDB files with the instant hashing
embedder: a reference memory.jsonl over the tools' limits keeps each entity with what fits and says what was left
out (never a placeholder for an entity the file holds), and which lines it merged into an entity of another type
whose name differs only in case; a duckgraph export with an invalid namespace or an inverted period is refused as
the tools refuse them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain import memory_server as memory_compat
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.limits import MAX_OBSERVATION_CHARS, MAX_OBSERVATIONS
from duckgraph.core.domain.model import MemoryEntityInput, RelationInput
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder
from tests.integration.test_transfer import cli_env  # noqa: F401  (the fixture)

OVER = MAX_OBSERVATIONS + 30


def open_kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()


def lines(*objects: dict) -> list[str]:
    return [json.dumps(o) + "\n" for o in objects]


def entity(name: str, entity_type: str | None, observations) -> dict:
    line = {"type": "entity", "name": name, "observations": observations}
    return line if entity_type is None else {**line, "entityType": entity_type}


def relation(source: str, target: str, label: str) -> dict:
    return {"type": "relation", "from": source, "to": target, "relationType": label}


def entities(kb: KnowledgeBase) -> dict[str, tuple[str, list[str]]]:
    return {e.name: (e.entityType, e.observations) for e in memory_compat.read_graph(kb, limit=1_000).entities}


LONG_LIVED = lines(
    entity("default_user", "person", [f"fact {i}" for i in range(OVER)]),
    entity("Long Note", "note", ["short fact", "x" * (MAX_OBSERVATION_CHARS + 1), "bad\x00", "last fact"]),
    entity("Acme", "company", ["makes widgets"]),
    relation("default_user", "Acme", "works at"),
    relation("Long Note", "Acme", "about"),
)


def test_an_entity_over_the_limits_keeps_its_type_and_what_fits_and_no_placeholder_is_made(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    summary = import_lines(kb, LONG_LIVED, source="memory.jsonl")
    assert (summary.nodes_created, summary.edges_created, summary.placeholders, summary.skipped) == (3, 2, [], [])
    stored = entities(kb)
    assert stored["default_user"] == ("person", [f"fact {i}" for i in range(MAX_OBSERVATIONS)])
    assert stored["Long Note"] == ("note", ["short fact", "last fact"])
    assert {(r.from_, r.to) for r in memory_compat.read_graph(kb).relations} == {("default_user", "Acme"),
                                                                                 ("Long Note", "Acme")}
    # Each left-out observation by line and position, with the tools' reason in their words.
    assert summary.partly_imported == [
        (f"line 1: entity 'default_user': observations {MAX_OBSERVATIONS + 1} to {OVER} left out: an entity may "
         f"have at most {MAX_OBSERVATIONS:,} observations (the file's first {MAX_OBSERVATIONS:,} imported)"),
        (f"line 2: entity 'Long Note': observation 2 left out: may have at most {MAX_OBSERVATION_CHARS:,} "
         f"characters (this one has {MAX_OBSERVATION_CHARS + 1:,})"),
        "line 2: entity 'Long Note': observation 3 left out: must not contain control characters",
    ]
    # Importing the file again changes nothing and says again what is left out.
    again = import_lines(kb, LONG_LIVED, source="memory.jsonl")
    assert (again.nodes_created, again.nodes_updated, again.nodes_unchanged) == (0, 0, 3)
    assert again.partly_imported[0].endswith(f"({MAX_OBSERVATIONS:,} are stored, 0 of the file's new ones imported)")
    assert again.partly_imported[1:] == summary.partly_imported[1:]
    kb.close()


def test_the_command_reports_what_it_left_out_and_creates_no_false_placeholder(cli_env, tmp_path, capsys):
    path = tmp_path / "memory.jsonl"
    path.write_text("".join(LONG_LIVED), encoding="utf-8")
    assert main(["import", str(path), "--db", str(tmp_path / "kb.duckdb")]) == 0
    err = capsys.readouterr().err
    assert "created 'default_user'" not in err and "type 'unknown'" not in err
    assert (f"duckgraph: imported in part line 1: entity 'default_user': observations {MAX_OBSERVATIONS + 1} to "
            f"{OVER} left out") in err
    assert "List should have" not in err and "String should have" not in err  # the tools' words, not pydantic's

    assert main(["import", str(path), "--db", str(tmp_path / "kb.duckdb"), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["partly_imported"]) == 3


def test_a_placeholder_is_still_made_and_said_for_a_name_the_file_does_not_hold(cli_env, tmp_path, capsys):
    path = tmp_path / "memory.jsonl"
    path.write_text("".join(lines(entity("Alice", "person", []), relation("Alice", "Nobody", "knows"))))
    assert main(["import", str(path), "--db", str(tmp_path / "kb.duckdb")]) == 0
    assert ("created 'Nobody' as an entity of type 'unknown': a relation names it, and neither the file nor the "
            "knowledge base has such an entity") in capsys.readouterr().err


def test_a_file_that_would_pass_a_stored_entity_over_the_limit_fills_it_and_imports_the_rest(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    first = [f"first {i}" for i in range(MAX_OBSERVATIONS - 50)]
    import_lines(kb, lines(entity("Bob", "person", first)))
    summary = import_lines(kb, lines(entity("Bob", "person", [f"second {i}" for i in range(60)]),
                                     entity("Carol", "person", ["unrelated"])), source="c2.jsonl")
    assert (summary.nodes_created, summary.nodes_updated) == (1, 1)
    stored = entities(kb)
    assert stored["Bob"][1] == [*first, *(f"second {i}" for i in range(50))]
    assert stored["Carol"] == ("person", ["unrelated"])
    assert summary.partly_imported == [
        (f"line 1: entity 'Bob': observations 51 to 60 left out: an entity may have at most {MAX_OBSERVATIONS:,} "
         f"observations ({MAX_OBSERVATIONS - 50:,} are stored, 50 of the file's new ones imported)")]
    kb.close()


def test_the_same_name_twice_keeps_the_first_type_as_create_entities_does(tmp_path):
    pair = [entity("Alice", "person", ["a"]), entity("alice", "organization", ["b"])]
    tool = open_kb(tmp_path / "tool.duckdb")
    memory_compat.create_entities(tool, [MemoryEntityInput.model_validate(e) for e in pair])
    kb = open_kb(tmp_path / "kb.duckdb")
    import_lines(kb, lines(*pair))
    assert entities(kb) == entities(tool) == {"Alice": ("person", ["a", "b"])}
    tool.close()
    kb.close()


HOMONYMS = lines(
    entity("Apple", "organization", ["tech company, prospect"]),
    entity("apple", "ingredient", ["6 Granny Smith for the pie"]),
    entity("Grandma pie", "recipe", []),
    entity("ALICE", "person", []), entity("alice", "people", []),  # one type in another number: nothing to say
    relation("Grandma pie", "apple", "has_ingredient"),
)
APPLE_MERGED = ("line 2: 'apple' (ingredient) was merged into 'Apple' (organization, line 1): names that differ only "
                "in case or spacing are one entity in duckgraph, while the reference server kept them apart; to keep "
                "them apart, rename it in the file before importing it (such as 'apple (ingredient)')")


def test_lines_whose_names_differ_only_in_case_and_whose_types_differ_are_said(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    summary = import_lines(kb, HOMONYMS, source="memory.jsonl")
    # Before: 3 entities created and nothing said, as if the file held no such pair.
    assert (summary.nodes_created, summary.names_resolved) == (3, 0)
    assert summary.homonyms_merged == [APPLE_MERGED]
    assert entities(kb)["Apple"] == ("organization", ["tech company, prospect", "6 Granny Smith for the pie"])
    kb.close()
    # A line whose name is a stored entity's but for case, of another type, is said the same way.
    kb = open_kb(tmp_path / "stored.duckdb")
    memory_compat.create_entities(kb, [MemoryEntityInput(name="Mercury", entityType="planet", observations=[]),
                                       MemoryEntityInput(name="Acme", entityType="unknown", observations=[])])
    summary = import_lines(kb, lines(entity("mercury", "band", ["sang in Queen"]), entity("ACME", "company", []),
                                     entity("Mercury", "element", [])))
    assert summary.homonyms_merged == [
        "line 1: 'mercury' (band) was merged into the stored 'Mercury' (planet): names that differ only in case or "
        "spacing are one entity in duckgraph, while the reference server kept them apart; to keep them apart, "
        "rename it in the file before importing it (such as 'mercury (band)')",
        "line 3: 'Mercury' (element) was merged into 'mercury' (band, line 1): names that differ only in case or "
        "spacing are one entity in duckgraph, while the reference server kept them apart; to keep them apart, "
        "rename it in the file before importing it (such as 'Mercury (element)')"]
    kb.close()


def test_the_command_says_which_lines_it_merged_across_types(cli_env, tmp_path, capsys):
    path = tmp_path / "memory.jsonl"
    path.write_text("".join(HOMONYMS), encoding="utf-8")
    assert main(["import", str(path), "--db", str(tmp_path / "kb.duckdb")]) == 0
    assert f"duckgraph: {APPLE_MERGED}\n" in capsys.readouterr().err
    assert main(["import", str(path), "--db", str(tmp_path / "again.duckdb"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["homonyms_merged"] == [APPLE_MERGED]


def test_a_stored_placeholder_takes_the_type_the_file_gives(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    memory_compat.create_entities(kb, [MemoryEntityInput(name="Alice", entityType="person", observations=[])])
    memory_compat.create_relations(kb, [RelationInput.model_validate(relation("Alice", "Acme", "works at"))])
    assert entities(kb)["Acme"] == ("unknown", [])
    summary = import_lines(kb, lines(entity("Acme", "company", ["makes widgets"]), entity("Alice", "robot", [])))
    assert (summary.nodes_updated, summary.nodes_unchanged) == (1, 1)
    assert entities(kb) == {"Alice": ("person", []), "Acme": ("company", ["makes widgets"])}  # Alice keeps hers
    kb.close()


def test_a_line_the_tools_take_in_part_is_kept_and_one_without_a_valid_name_is_skipped(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    summary = import_lines(kb, lines(
        entity("Typeless", None, ["kept"]),
        entity("Blank type", " ", ["kept too"]),
        entity("Listless", "thing", "not a list"),
        entity("\u200b", "person", ["lost with its name"]),
        relation("Typeless", "Listless", "knows"),
        relation("", "Typeless", "knows"),
    ))
    assert entities(kb) == {"Typeless": ("unknown", ["kept"]), "Blank type": ("unknown", ["kept too"]),
                            "Listless": ("thing", [])}
    assert summary.placeholders == [] and summary.edges_created == 1
    assert summary.partly_imported == [
        "line 1: entity 'Typeless': entityType: is required; imported with entityType 'unknown'",
        "line 2: entity 'Blank type': entityType: must not be empty; imported with entityType 'unknown'",
        "line 3: entity 'Listless': observations: must be a list; imported without observations",
    ]
    assert summary.skipped == ["line 4: invalid entity: name: must not be empty",
                               "line 6: invalid relation: from: must not be empty"]
    kb.close()


# -- a duckgraph export ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["bad ns", "a" * 101, "alpha\n", ""])
def test_a_line_in_a_namespace_no_tool_can_name_is_refused(tmp_path, namespace):
    kb = open_kb(tmp_path / "kb.duckdb")
    bad = lines({"kind": "node", "namespace": "default", "name": "A", "type": "T"},
                {"kind": "node", "namespace": namespace, "name": "X", "type": "T"})
    with pytest.raises(InvalidInputError, match=r"^file\.jsonl:2: invalid namespace .*: use 1 to 100 ASCII letters"):
        import_lines(kb, bad, source="file.jsonl")
    assert kb.store.namespaces() == [] and kb.stats()["nodes"] == 0  # nothing written
    # Into a namespace of the import's choosing, the file's own is replaced: its data can still be brought in.
    summary = import_lines(kb, bad[1:], source="file.jsonl", namespace="rescued")
    assert summary.nodes_created == 1 and kb.store.namespaces() == ["rescued"]
    kb.close()


def test_a_relation_that_ends_before_it_starts_is_refused_as_the_tools_refuse_it(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    inverted = lines({"kind": "node", "name": "Dana", "type": "Person"},
                     {"kind": "node", "name": "Acme", "type": "Organization"},
                     {"kind": "edge", "source": "Dana", "target": "Acme", "type": "WORKS_AT",
                      "valid_from": "2024-06-01", "valid_until": "2024-01-01"})
    with pytest.raises(InvalidInputError) as caught:
        import_lines(kb, inverted, source="file.jsonl")
    assert str(caught.value) == ("file.jsonl:3: invalid edge line: Dana -WORKS_AT-> Acme: valid_until (2024-01-01) "
                                 "is before valid_from (2024-06-01)")
    assert kb.stats()["nodes"] == 0
    kb.close()


def test_a_moment_out_of_range_in_utc_is_refused_with_its_line(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    early = lines({"kind": "node", "name": "A", "type": "T"}, {"kind": "node", "name": "B", "type": "T"},
                  {"kind": "edge", "source": "A", "target": "B", "type": "X", "valid_from": "0001-01-01T00:00:00+01:00"})
    with pytest.raises(InvalidInputError, match=r"^file\.jsonl:3: invalid edge line: valid_from: "):
        import_lines(kb, early, source="file.jsonl")
    kb.close()
