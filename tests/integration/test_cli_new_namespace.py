"""`duckgraph ingest --namespace NAME` and `duckgraph import FILE --namespace NAME` into a namespace the file does not
hold yet: a typo ("wrok" for "work", "Work") scattered the documents into a namespace of their own, without a word.
Now a new name near one the file holds is refused before anything is fetched, read or written (exit status 2, the
one meant named, and --new-namespace to start it on purpose); a new name near none is started and said on stderr.

Run as the `duckgraph` command a user runs (a subprocess) on a real DuckDB file, as test_cli_namespace_mistakes.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_ignored_options import env  # noqa: F401 (a fixture: a home and config of its own)
from tests.integration.test_cli_namespace_mistakes import HELD, counts, memory  # noqa: F401 (memory: a fixture)
from tests.integration.test_compact import duckgraph, files
from tests.site_server import serve

NEAR = "did you mean 'work'? The file's namespaces are 'personal', 'work'"
CASE = "did you mean 'work' (names are case-sensitive)? The file's namespaces are 'personal', 'work'"
MEMORY_JSONL = '{"type": "entity", "name": "Bob", "entityType": "Person", "observations": ["likes tea"]}\n'


def refused(command: str, namespace: str, hint: str) -> str:
    return (f"duckgraph {command}: error: the file holds no namespace {namespace!r} and this {command} would start "
            f"it: {hint}. Nothing was written; give the namespace meant, or --new-namespace to start {namespace!r} "
            "on purpose\n")


@pytest.fixture
def sources(memory: Path) -> Path:  # noqa: F811
    """notes.txt, memory.jsonl (a memory server's) and work.jsonl (a duckgraph export of 'work') beside the file."""
    folder = memory.parent
    (folder / "notes.txt").write_text("Ada leads the compiler project.\n", encoding="utf-8")
    (folder / "memory.jsonl").write_text(MEMORY_JSONL, encoding="utf-8")
    return folder


ARGVS = {
    "ingest": ["ingest", "notes.txt"],
    "import memory.jsonl": ["import", "memory.jsonl"],
    "import an export": ["import", "work.jsonl"],
}


def export_of_work(memory: Path, env: dict[str, str]) -> None:  # noqa: F811
    done = duckgraph("export", "--namespace", "work", "-o", "work.jsonl", "--db", str(memory), env=env,
                     cwd=memory.parent)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("namespace, hint", [("wrok", NEAR), ("Work", CASE)], ids=["misspelt", "miscased"])
@pytest.mark.parametrize("which", list(ARGVS))
def test_a_new_namespace_near_one_the_file_holds_is_refused_and_nothing_is_written(memory, env, sources, which,  # noqa: F811
                                                                                   namespace, hint):
    export_of_work(memory, env)
    before = files(sources)

    done = duckgraph(*ARGVS[which], "--namespace", namespace, "--db", str(memory), env=env, cwd=sources)

    command = ARGVS[which][0]
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout, done.stderr)
    assert done.stderr.endswith(refused(command, namespace, hint)), done.stderr
    assert files(sources) == before and counts(memory, env) == HELD


def test_an_import_from_standard_input_is_refused_before_it_is_read(memory, env, sources):  # noqa: F811
    import subprocess

    from tests.integration.test_compact import CLI

    done = subprocess.run([*CLI, "import", "-", "--namespace", "wrok", "--db", str(memory)], input=MEMORY_JSONL,
                          env=env, cwd=sources, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and done.stderr.endswith(refused("import", "wrok", NEAR)), done.stderr
    assert counts(memory, env) == HELD


def test_a_page_is_not_fetched_for_a_refused_namespace_and_is_with_new_namespace(memory, env, sources):  # noqa: F811
    page = "<html><head><title>Compiler</title></head><body><p>Ada leads the compiler project.</p></body></html>"
    private = {**env, "DUCKGRAPH_FETCH_PRIVATE_HOSTS": "1"}
    with serve({"/compiler.html": ("text/html", page)}) as site:
        url = site.url + "/compiler.html"
        done = duckgraph("ingest", url, "--namespace", "wrok", "--db", str(memory), env=private, cwd=sources)
        assert done.returncode == 2 and done.stderr.endswith(refused("ingest", "wrok", NEAR)), done.stderr
        assert site.requests == []  # refused before the page was fetched
        assert counts(memory, env) == HELD

        done = duckgraph("ingest", url, "--namespace", "wrok", "--new-namespace", "--db", str(memory), env=private,
                         cwd=sources)
        assert done.returncode == 0, done.stderr
        assert "/compiler.html" in [path for path, _ in site.requests]
    listed = json.loads(duckgraph("namespaces", "--json", "--db", str(memory), env=env, cwd=sources).stdout)
    assert [(n["name"], n["documents"]) for n in listed] == [("default", 0), ("personal", 0), ("work", 0),
                                                             ("wrok", 1)]


@pytest.mark.parametrize("which", list(ARGVS))
def test_new_namespace_starts_it_on_purpose_and_says_so_once(memory, env, sources, which):  # noqa: F811
    export_of_work(memory, env)
    argv = [*ARGVS[which], "--namespace", "Work", "--new-namespace", "--db", str(memory)]

    done = duckgraph(*argv, env=env, cwd=sources)

    assert done.returncode == 0, done.stderr
    command = ARGVS[which][0]
    assert f"duckgraph: the namespace 'Work' is new: this {command} starts it (as --new-namespace asks)\n" in done.stderr
    held = {name: (entities, relations) for name, entities, relations in counts(memory, env)}
    assert held["work"] == (2, 1) and held["personal"] == (1, 0)
    assert "Work" in held and (which == "ingest" or held["Work"] != (0, 0))
    # Again: the namespace is there now, so the same command line is neither refused nor said.
    again = duckgraph(*argv, env=env, cwd=sources)
    assert again.returncode == 0 and "is new" not in again.stderr, again.stderr


@pytest.mark.parametrize("which", ["ingest", "import memory.jsonl"])
def test_a_new_namespace_near_none_is_started_and_said(memory, env, sources, which):  # noqa: F811
    done = duckgraph(*ARGVS[which], "--namespace", "holiday", "--db", str(memory), env=env, cwd=sources)

    assert done.returncode == 0, done.stderr
    command = ARGVS[which][0]
    assert (f"duckgraph: the namespace 'holiday' is new: this {command} starts it (the file's namespaces are "
            "'personal', 'work')\n") in done.stderr
    assert "holiday" in [name for name, _, _ in counts(memory, env)]


def test_a_namespace_the_file_holds_and_a_new_file_are_written_without_a_word(memory, env, sources):  # noqa: F811
    done = duckgraph("ingest", "notes.txt", "--namespace", "work", "--db", str(memory), env=env, cwd=sources)
    assert done.returncode == 0 and "namespace" not in done.stderr, done.stderr
    # A file not there yet holds no namespace to mistake one for.
    fresh = sources / "fresh.duckdb"
    done = duckgraph("ingest", "notes.txt", "--namespace", "wrok", "--db", str(fresh), env=env, cwd=sources)
    assert done.returncode == 0 and "namespace" not in done.stderr, done.stderr
    assert counts(fresh, env) == [("default", 0, 0), ("wrok", 0, 0)]


@pytest.mark.parametrize("which", ["ingest", "import memory.jsonl"])
def test_new_namespace_without_namespace_is_refused_before_anything_is_done(memory, env, sources, which):  # noqa: F811
    before = files(sources)
    done = duckgraph(*ARGVS[which], "--new-namespace", "--db", str(memory), env=env, cwd=sources)
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith(
        "error: --new-namespace goes with --namespace NAME (it lets this command start the namespace NAME when its "
        "name is near one the file holds); nothing was done\n"), done.stderr
    assert files(sources) == before and counts(memory, env) == HELD


def test_the_next_of_a_series_is_started_and_a_typo_of_it_still_refused(memory, env, sources):  # noqa: F811
    # proj-b beside proj-a is as near as a typo, but a series is started one after another: each was refused and
    # had to be run again with --new-namespace. A typo of a member (proj_a) is still refused.
    def run(*argv: str):
        return duckgraph(*argv, "--db", str(memory), env=env, cwd=sources)

    done = run("ingest", "notes.txt", "--namespace", "proj-a")
    assert done.returncode == 0, done.stderr

    done = run("ingest", "notes.txt", "--namespace", "proj-b")
    assert done.returncode == 0, done.stderr
    assert ("duckgraph: the namespace 'proj-b' is new: this ingest starts it (the file's namespaces are 'personal', "
            "'proj-a', 'work')\n") in done.stderr
    done = run("import", "memory.jsonl", "--namespace", "proj-c")
    assert done.returncode == 0, done.stderr
    assert "the namespace 'proj-c' is new: this import starts it (the file's namespaces are 'personal'" in done.stderr

    listed = json.loads(run("namespaces", "--json").stdout)
    assert [(n["name"], n["entities"], n["documents"]) for n in listed] == [
        ("default", 0, 0), ("personal", 1, 0), ("proj-a", 0, 1), ("proj-b", 0, 1), ("proj-c", 1, 0), ("work", 2, 0)]

    before = files(sources)  # after a read: the first open after the import rewrites the file, refused or not
    done = run("ingest", "notes.txt", "--namespace", "proj_a")
    assert done.returncode == 2 and done.stderr.endswith(refused("ingest", "proj_a", (
        "did you mean 'proj-a'? The file's namespaces are 'personal', 'proj-a', 'proj-b', 'proj-c', 'work'"))), \
        done.stderr
    assert files(sources) == before
