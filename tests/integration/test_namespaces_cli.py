"""Namespaces on the command line: `--namespace` (and DUCKGRAPH_NAMESPACE) on every command, `duckgraph
namespaces`, and export and import of one namespace. Real `duckgraph` processes on a real file, with the hashing
embedder of tests/fakes.py as an entry-point plugin (see tests/e2e/test_shared_file.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_shared_file import env  # noqa: F401 (the fixture)

DUCKGRAPH = [sys.executable, "-m", "duckgraph.core.cli"]


def run(env: dict[str, str], *args: str, **more_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DUCKGRAPH, *args], env={**env, **more_env}, capture_output=True, text=True,
                          timeout=120)


def memory_file(path: Path, *entities: tuple[str, str]) -> Path:
    path.write_text("".join(json.dumps({"type": "entity", "name": name, "entityType": kind, "observations": []})
                            + "\n" for name, kind in entities), encoding="utf-8")
    return path


def test_every_command_works_in_the_namespace_it_is_given(tmp_path: Path, env: dict[str, str]) -> None:
    db = str(tmp_path / "kb.duckdb")
    a = memory_file(tmp_path / "a.jsonl", ("Build cache", "Tool"), ("Linker", "Tool"))
    b = memory_file(tmp_path / "b.jsonl", ("Build cache", "Service"))
    assert run(env, "import", str(a), "--db", db, "--namespace", "proj-a").returncode == 0
    assert run(env, "import", str(b), "--db", db, DUCKGRAPH_NAMESPACE="proj-b").returncode == 0

    listed = json.loads(run(env, "namespaces", "--json", "--db", db, "--namespace", "proj-b").stdout)
    assert [(n["name"], n["entities"], n["default"]) for n in listed] == [
        ("proj-a", 2, False), ("proj-b", 1, True)]
    text = run(env, "namespaces", "--db", db).stdout
    assert "default (default): 0 entities" in text and "proj-a: 2 entities" in text

    stats = json.loads(run(env, "stats", "--json", "--db", db, DUCKGRAPH_NAMESPACE="proj-a").stdout)
    assert (stats["namespace"], stats["nodes"], stats["node_types"]) == ("proj-a", 2, {"Tool": 2})

    out = tmp_path / "b-export.jsonl"
    assert run(env, "export", "--db", db, "--namespace", "proj-b", "-o", str(out)).returncode == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(line["name"], line["type"]) for line in lines if line["kind"] == "node"] == [("Build cache", "Service")]
    # proj-c is near proj-a: started on purpose (tests/integration/test_cli_new_namespace.py).
    assert run(env, "import", str(out), "--db", db, "--namespace", "proj-c", "--new-namespace").returncode == 0
    stats = json.loads(run(env, "stats", "--json", "--db", db, "--namespace", "proj-c").stdout)
    assert stats["node_types"] == {"Service": 1}

    found = json.loads(run(env, "search", "Build cache", "--json", "--db", db, "--namespace", "proj-a").stdout)
    assert {n["type"] for n in found["nodes"]} == {"Tool"}

    refused = run(env, "stats", "--db", db, "--namespace", "a b")
    assert refused.returncode == 1 and "invalid namespace 'a b'" in refused.stderr
    refused = run(env, "import", str(a), "--db", db, DUCKGRAPH_NAMESPACE="no/spaces here")
    assert refused.returncode == 1 and "invalid namespace" in refused.stderr
    assert [n["name"] for n in json.loads(run(env, "namespaces", "--json", "--db", db).stdout)] == [
        "default", "proj-a", "proj-b", "proj-c"]


def test_duckgraph_namespaces_delete_needs_the_name_twice(tmp_path: Path, env: dict[str, str]) -> None:
    db = str(tmp_path / "kb.duckdb")
    for namespace in ("proj-a", "proj-b"):
        assert run(env, "import", str(memory_file(tmp_path / "m.jsonl", ("Linker", "Tool"))), "--db", db,
                   "--namespace", namespace, "--new-namespace").returncode == 0
    for refused_args in (("proj-a",), ("proj-a", "--confirm", "proj-b"), ("--confirm", "proj-a")):
        refused = run(env, "namespaces", "delete", *refused_args, "--db", db)
        assert refused.returncode == 2 and "nothing was deleted" in refused.stderr, refused.stderr
    missing = run(env, "namespaces", "delete", "nowhere", "--confirm", "nowhere", "--db", db)
    assert missing.returncode == 1 and "no namespace 'nowhere'" in missing.stderr

    deleted = run(env, "namespaces", "delete", "proj-a", "--confirm", "proj-a", "--db", db, "--json")
    assert deleted.returncode == 0 and json.loads(deleted.stdout)["entities"] == 1
    assert [(n["name"], n["entities"]) for n in json.loads(run(env, "namespaces", "--json", "--db", db).stdout)] == [
        ("default", 0), ("proj-b", 1)]
    emptied = run(env, "namespaces", "delete", "proj-b", "--confirm", "proj-b", "--db", db, "--namespace", "proj-b")
    assert emptied.returncode == 0 and "emptied" in emptied.stdout


def test_namespaces_list_refuses_a_name_or_confirm_rather_than_ignoring_them(tmp_path: Path,
                                                                           env: dict[str, str]) -> None:
    db = tmp_path / "kb.duckdb"
    for extra in (("extra",), ("--confirm", "proj-a")):
        refused = run(env, "namespaces", "list", *extra, "--db", str(db))
        assert refused.returncode == 2
        assert refused.stderr.endswith("duckgraph namespaces: error: namespaces list takes no NAME or --confirm (to "
                                       "delete one: duckgraph namespaces delete NAME --confirm NAME)\n")
    assert not db.exists()


def test_a_deleted_namespace_leaves_a_smaller_backup(fake_kb, tmp_path: Path) -> None:
    """Deleting a namespace frees its rows, its log of deletions (the `deletions` table) included; `backup` then
    writes a copy without them (DuckDB does not shrink a file in place)."""
    from duckgraph.core.domain import namespaces
    from duckgraph.core.domain.model import NodeInput

    fake_kb.add_knowledge_graph([NodeInput(name="Kept", type="Thing")], [], namespace="small")
    fake_kb.backup(tmp_path / "small.duckdb")
    for batch in range(5):
        fake_kb.add_knowledge_graph([NodeInput(name=f"n{batch}-{i}", type="Thing", description="words " * 50)
                                     for i in range(400)], [], namespace="big")
    fake_kb.backup(tmp_path / "before.duckdb")
    namespaces.delete_namespace(fake_kb, "big", "big")
    fake_kb.backup(tmp_path / "after.duckdb")
    small, before, after = ((tmp_path / f"{name}.duckdb").stat().st_size for name in ("small", "before", "after"))
    assert small < before and after < before, (small, before, after)
    assert after - small <= 2 * 256 * 1024, (small, before, after)  # a 256 KiB block or two of tables' layout
    assert fake_kb.stats("small")["nodes"] == 1 and fake_kb.stats() == {**fake_kb.stats(), "nodes": 1}


def test_the_space_of_a_deleted_namespace_is_reused_by_later_writes(db_path: Path) -> None:
    """DuckDB keeps the file's size after a delete and a checkpoint (each close checkpoints) but reuses the freed
    blocks: writing as much again after deleting a namespace grows the file far less than the first time."""
    from duckgraph.core.domain import namespaces
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import NodeInput
    from duckgraph.plugins.duckdb import DuckDBStore
    from tests.fakes import HashingEmbedder

    kb = KnowledgeBase(DuckDBStore(db_path), HashingEmbedder())

    def fill(namespace: str) -> int:
        with kb:
            for batch in range(3):
                kb.add_knowledge_graph([NodeInput(name=f"{batch}-{i}", type="Thing", description="words " * 80)
                                        for i in range(500)], [], namespace=namespace)
        return db_path.stat().st_size

    with kb:
        kb.add_knowledge_graph([NodeInput(name="Kept", type="Thing")], [], namespace="small")
    start = db_path.stat().st_size
    first = fill("big")
    with kb:
        namespaces.delete_namespace(kb, "big", "big")
    again = fill("again")
    assert again - first < 0.6 * (first - start), (start, first, again)


def test_doctor_says_which_namespace_and_why(tmp_path: Path, env: dict[str, str]) -> None:
    db = str(tmp_path / "kb.duckdb")
    text = run(env, "doctor", "--db", db, DUCKGRAPH_NAMESPACE="@roots", DUCKGRAPH_NAMESPACE_FALLBACK="shared").stdout
    assert "namespace: @roots (namespace is @roots: each client's first MCP root folder's name" in text
    assert "a client without roots gets 'shared'" in text
    report = json.loads(run(env, "doctor", "--json", "--db", db, "--namespace", "proj").stdout)
    assert report["namespace"]["default"] == "proj" and not report["namespace"]["from_roots"]
