"""Options mix with a command's positionals in any order, and a command's arguments that do not go together exit 2
with its usage: the installed `duckgraph` command run as a subprocess on a real DuckDB file, with the hashing embedder
of tests/fakes.py as an entry-point plugin (see tests/e2e/test_shared_file.py).

Before, an option between an action and its optional argument (`communities search --db F "main themes"`,
`namespaces delete --db F NAME`) was refused as "unrecognized arguments: main themes"; `export --format memory-jsonl
--embeddings` and `namespaces delete NAME` without --confirm exited 1 while other option conflicts exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_shared_file import console_script, env  # noqa: F401 (the fixture)


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([console_script(), *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def db(tmp_path: Path, env: dict[str, str]) -> str:
    """A knowledge file holding a few related entities in "default" and one in "scratch", with its communities."""
    memory = tmp_path / "memory.jsonl"
    lines = [{"type": "entity", "name": name, "entityType": "Tool", "observations": [f"{name} builds code"]}
             for name in ("Linker", "Compiler", "Build cache")]
    lines += [{"type": "relation", "from": "Compiler", "to": "Linker", "relationType": "calls"},
              {"type": "relation", "from": "Linker", "to": "Build cache", "relationType": "reads"}]
    memory.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    path = str(tmp_path / "kb.duckdb")
    assert run(env, "import", str(memory), "--db", path).returncode == 0
    scratch = tmp_path / "scratch.jsonl"
    scratch.write_text(json.dumps(lines[0]) + "\n", encoding="utf-8")
    assert run(env, "import", str(scratch), "--db", path, "--namespace", "scratch").returncode == 0
    assert run(env, "communities", "build", "--db", path).returncode == 0
    return path


def namespaces(env: dict[str, str], db: str) -> list[str]:
    return [n["name"] for n in json.loads(run(env, "namespaces", "--json", "--db", db).stdout)]


def test_options_may_come_between_an_action_and_its_argument(env: dict[str, str], db: str) -> None:
    after = run(env, "communities", "search", "main themes", "--db", db)
    assert after.returncode == 0, after.stderr
    for args in (("communities", "search", "--db", db, "main themes"),
                 ("communities", "--db", db, "search", "main themes"),
                 ("communities", "search", "--json", "main themes", "--db", db)):
        done = run(env, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert "unrecognized" not in done.stderr
        if "--json" in args:
            assert json.loads(done.stdout)["text"] + "\n" == after.stdout  # print's line feed
        else:
            assert done.stdout == after.stdout

    deleted = run(env, "namespaces", "delete", "--db", db, "scratch", "--confirm", "scratch")
    assert deleted.returncode == 0, deleted.stderr
    assert "scratch" not in namespaces(env, db)


def test_arguments_that_do_not_go_together_exit_2_with_the_usage_and_change_nothing(
        tmp_path: Path, env: dict[str, str], db: str) -> None:
    out = tmp_path / "export.jsonl"
    refused = run(env, "export", "--db", db, "--format", "memory-jsonl", "--embeddings", "-o", str(out))
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: duckgraph export")
    assert refused.stderr.endswith("duckgraph export: error: --embeddings has no place in a memory-jsonl file: leave "
                                   "it out, or use --format duckgraph; nothing was written\n")
    assert not out.exists() and not Path(f"{out}.partial").exists()

    for args, error in (
            (("scratch",), "namespaces delete takes NAME and --confirm NAME (the name twice: it deletes everything "
                           "in that namespace for good); nothing was deleted"),
            (("--confirm", "scratch"), "namespaces delete takes NAME and --confirm NAME"),
            (("scratch", "--confirm", "Scratch"), "--confirm must repeat the name to delete: 'scratch' (got "
                                                  "'Scratch'); nothing was deleted")):
        refused = run(env, "namespaces", "delete", *args, "--db", db)
        assert refused.returncode == 2, (args, refused.stderr)
        assert refused.stderr.startswith("usage: duckgraph namespaces")
        assert f"duckgraph namespaces: error: {error}" in refused.stderr
    assert namespaces(env, db) == ["default", "scratch"]
