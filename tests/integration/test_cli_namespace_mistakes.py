"""A namespace named by mistake on the command line: mistyped or in the wrong case (names are case-sensitive), or
`@roots`, which only `duckgraph serve` follows. Run as the `duckgraph` command a user runs (a subprocess) on a real
DuckDB file. An export of a namespace that holds nothing was an empty file and exit status 0 (then deleting the real
namespace lost the memory); stats printed zeros alone; `namespaces delete` said only that there is none; and
`--namespace @roots` was the fallback namespace for stats, an invalid name for export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from duckgraph.core.domain.namespaces import namespace_hint
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_cli_ignored_options import env  # noqa: F401 (a fixture: a home and config of its own)
from tests.integration.test_compact import duckgraph, files

CASE_HINT = "did you mean 'work' (names are case-sensitive)? The file's namespaces are 'personal', 'work'"


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """A knowledge file of the namespaces "work" (2 entities, 1 relation) and "personal" (1 entity); the default
    namespace holds nothing. In a folder of its own, named "projects"."""
    folder = tmp_path / "projects"
    folder.mkdir()
    db = folder / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada", type="Person"), NodeInput(name="Compiler", type="Project")],
                               [EdgeInput(source="Ada", target="Compiler", type="leads")], namespace="work")
        kb.add_knowledge_graph([NodeInput(name="Garden", type="Place")], [], namespace="personal")
    return db


def counts(db: Path, env: dict[str, str]) -> list[tuple[str, int, int]]:
    listed = duckgraph("namespaces", "--json", "--db", str(db), env=env, cwd=db.parent)
    assert listed.returncode == 0, listed.stderr
    return [(n["name"], n["entities"], n["relations"]) for n in json.loads(listed.stdout)]


HELD = [("default", 0, 0), ("personal", 1, 0), ("work", 2, 1)]


@pytest.mark.parametrize("output", ["file", "stdout"])
@pytest.mark.parametrize("export_format", ["duckgraph", "memory-jsonl"])
def test_an_export_of_a_namespace_that_holds_nothing_is_refused_with_the_one_meant(memory, env, export_format,
                                                                                    output):
    folder = memory.parent
    before = files(folder)
    target = ["-o", str(folder / "backup.jsonl")] if output == "file" else []

    done = duckgraph("export", "--namespace", "Work", "--format", export_format, *target, "--db", str(memory),
                     env=env, cwd=folder)

    assert done.returncode == 1 and done.stdout == "", (done.returncode, done.stdout)
    written = " (" + str(folder / "backup.jsonl") + " was not written)" if output == "file" else ""
    assert done.stderr == f"duckgraph: the namespace 'Work' holds nothing: {CASE_HINT}. Nothing was exported{written}\n"
    assert files(folder) == before  # neither the file nor its .partial
    assert counts(memory, env) == HELD


def test_a_misspelt_namespace_is_refused_with_the_near_one_and_the_right_one_exports(memory, env):
    folder = memory.parent
    done = duckgraph("export", "--namespace", "wrok", "--db", str(memory), env=env, cwd=folder)
    assert done.returncode == 1 and done.stdout == ""
    assert ("the namespace 'wrok' holds nothing: did you mean 'work'? The file's namespaces are 'personal', 'work'. "
            "Nothing was exported") in done.stderr
    far = duckgraph("export", "--namespace", "holiday", "--db", str(memory), env=env, cwd=folder)
    assert far.returncode == 1 and "did you mean" not in far.stderr
    assert "the namespace 'holiday' holds nothing: the file's namespaces are 'personal', 'work'." in far.stderr

    out = folder / "work.jsonl"
    done = duckgraph("export", "--namespace", "work", "-o", str(out), "--db", str(memory), env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    nodes = [line["name"] for line in map(json.loads, out.read_text(encoding="utf-8").splitlines())
             if line["kind"] == "node"]
    assert sorted(nodes) == ["Ada", "Compiler"]


def test_an_empty_default_namespace_exports_and_says_so(memory, env):
    """The configured namespace of a new file holds nothing yet, and that is no mistake: exported, said, exit 0."""
    folder = memory.parent
    out = folder / "memory.jsonl"
    done = duckgraph("export", "--format", "memory-jsonl", "-o", str(out), "--db", str(memory), env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == ""
    assert ("duckgraph: the namespace 'default' (the configured one) holds nothing yet: the file's namespaces are "
            "'personal', 'work'; its export holds nothing") in done.stderr
    # DUCKGRAPH_NAMESPACE is the configured namespace too.
    done = duckgraph("export", "--format", "memory-jsonl", "--db", str(memory), env={**env,
                     "DUCKGRAPH_NAMESPACE": "Work"}, cwd=folder)
    assert done.returncode == 0 and done.stdout == ""
    assert f"the namespace 'Work' (the configured one) holds nothing yet: {CASE_HINT}" in done.stderr


def test_stats_of_a_namespace_that_holds_nothing_says_which_one_was_meant(memory, env):
    folder = memory.parent
    done = duckgraph("stats", "--namespace", "Work", "--db", str(memory), env=env, cwd=folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("0 nodes, 0 edges, 0 documents, 0 passages (namespace Work)")
    assert done.stderr == f"duckgraph: the namespace 'Work' holds nothing yet: {CASE_HINT}\n"

    done = duckgraph("stats", "--json", "--namespace", "Work", "--db", str(memory), env=env, cwd=folder)
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout)["hint"] == f"the namespace 'Work' holds nothing yet: {CASE_HINT}"

    held = duckgraph("stats", "--json", "--namespace", "work", "--db", str(memory), env=env, cwd=folder)
    assert "hint" not in json.loads(held.stdout) and held.stderr == ""


def test_deleting_a_namespace_that_is_not_there_says_which_one_was_meant(memory, env):
    folder = memory.parent
    before = files(folder)
    done = duckgraph("namespaces", "delete", "Work", "--confirm", "Work", "--db", str(memory), env=env, cwd=folder)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"duckgraph: there is no namespace 'Work': {CASE_HINT}; nothing was deleted\n"
    assert files(folder) == before and counts(memory, env) == HELD


ROOTS_REFUSED = ("takes no --namespace @roots: @roots is for `duckgraph serve`: the client's roots name the "
                 "namespace; on the command line give the namespace's name (`duckgraph namespaces` lists them); "
                 "nothing was done")


@pytest.mark.parametrize("argv", [["stats"], ["export"], ["search", "Ada"], ["namespaces"], ["changes"],
                                  ["import", "memory.jsonl"], ["ingest", "notes.txt"], ["ui"]],
                         ids=lambda argv: argv[0])
def test_roots_on_the_command_line_is_refused_by_every_command_but_serve(memory, env, argv):
    folder = memory.parent
    (folder / "memory.jsonl").write_text('{"type": "entity", "name": "Bob", "entityType": "Person", '
                                         '"observations": []}\n', encoding="utf-8")
    (folder / "notes.txt").write_text("Ada leads the compiler project.\n", encoding="utf-8")
    before = files(folder)

    done = duckgraph(*argv, "--namespace", "@roots", "--db", str(memory), env=env, cwd=folder)

    assert done.returncode == 2, done.stderr
    assert f"duckgraph {argv[0]}: error: {argv[0]} {ROOTS_REFUSED}" in done.stderr, done.stderr
    assert files(folder) == before and counts(memory, env) == HELD


def test_deleting_the_roots_namespace_is_refused_with_the_same_reason(memory, env):
    done = duckgraph("namespaces", "delete", "@roots", "--confirm", "@roots", "--db", str(memory), env=env,
                     cwd=memory.parent)
    assert done.returncode == 1
    assert "@roots is for `duckgraph serve`: the client's roots name the namespace" in done.stderr
    assert counts(memory, env) == HELD


def test_roots_from_the_environment_is_the_fallback_namespace_and_said(memory, env):
    """DUCKGRAPH_NAMESPACE=@roots, set for the server and so in the shell too: the command works in the fallback
    namespace, as a client without roots does, and says so (with the namespace this folder would be)."""
    folder = memory.parent
    roots = {**env, "DUCKGRAPH_NAMESPACE": "@roots", "DUCKGRAPH_NAMESPACE_FALLBACK": "work"}

    done = duckgraph("stats", "--json", "--db", str(memory), env=roots, cwd=folder)

    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["namespace"], stats["nodes"], stats["edges"]) == ("work", 2, 1)
    assert done.stderr == (
        "duckgraph: the namespace setting is @roots, which only `duckgraph serve` follows (each client's roots name "
        "its namespace): stats uses the fallback namespace 'work' (namespace_fallback, DUCKGRAPH_NAMESPACE_FALLBACK); "
        "give --namespace NAME for another (a client whose root is this folder uses 'projects')\n")
    # A namespace given on the command line is used, and nothing is said.
    given = duckgraph("stats", "--json", "--namespace", "personal", "--db", str(memory), env=roots, cwd=folder)
    assert json.loads(given.stdout)["nodes"] == 1 and given.stderr == ""
    # An export of the whole file names no namespace: nothing to say.
    whole = duckgraph("export", "-o", str(folder / "all.jsonl"), "--db", str(memory), env=roots, cwd=folder)
    assert whole.returncode == 0 and "@roots" not in whole.stderr


def test_the_hint_names_at_most_ten_namespaces_and_every_case_variant() -> None:
    names = [f"team-{i:02}" for i in range(12)]
    assert namespace_hint("team-07x", names) == ("did you mean 'team-07'? The file's namespaces are " + ", ".join(
        f"'team-{i:02}'" for i in range(10)) + " and 2 more (`duckgraph namespaces` lists them all)")
    assert namespace_hint("work", ["WORK", "Work", "home"]).startswith(
        "did you mean 'WORK' or 'Work' (names are case-sensitive)?")
    assert namespace_hint("work", []) == "the file holds no namespace yet"
