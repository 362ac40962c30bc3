"""Options a command would silently ignore are refused, changing nothing, run as the `duckgraph` command a user runs
(a subprocess) on real DuckDB files: `--namespace` of backup, restore and compact, which act on the whole file (the
namespace of DUCKGRAPH_NAMESPACE or the config file is every command's default, and is not refused); ingest's crawl
options without --crawl or URLs, --prune and --follow-symlinks without a folder; communities' options of another
action. And `duckgraph doctor` says what left each file beside the knowledge file (an interrupted compact's
temporary copy, `compact --keep-old`'s and restore's kept files) and what to do with it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder
from tests.integration.test_backup import REPO_ROOT, fill
from tests.integration.test_compact import KILLED_COMPACT, command_env, duckgraph, files


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "env"
    folder.mkdir()
    return command_env(folder)


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    """A knowledge file of two namespaces ("default" and "other"), and a backup of it, in a folder of their own."""
    folder = tmp_path / "memory"
    folder.mkdir()
    db = folder / "kb.duckdb"
    with KnowledgeBase(DuckDBStore(db), HashingEmbedder()) as kb:
        fill(kb)
        kb.backup(folder / "backup.duckdb")
    return db


WHOLE_FILE = {
    "backup": (["backup", "copy.duckdb"], "backup takes no --namespace (given: 'other'): it copies the whole file, "
                                          "every namespace. To save one namespace, export it: duckgraph export "
                                          "--namespace NAME -o FILE"),
    "restore": (["restore", "backup.duckdb"], "restore takes no --namespace (given: 'other'): it puts the backup in "
                                              "place of the whole file, every namespace. To bring back one namespace, "
                                              "restore the backup into another file"),
    "compact": (["compact"], "compact takes no --namespace (given: 'other'): it rewrites the whole file, every "
                             "namespace at once (there is no compacting one namespace): run it without --namespace. "
                             "Nothing was changed"),
}


@pytest.mark.parametrize("command", sorted(WHOLE_FILE))
def test_an_explicit_namespace_of_a_whole_file_command_is_refused_and_changes_nothing(memory: Path, env, command):
    argv, message = WHOLE_FILE[command]
    folder = memory.parent
    before = files(folder)

    done = duckgraph(*argv, "--db", str(memory), "--namespace", "other", env=env, cwd=folder)

    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"usage: duckgraph {command}") and f"duckgraph {command}: error: {message}" in (
        done.stderr), done.stderr
    assert files(folder) == before  # no copy written, nothing replaced or kept aside, no temporary file
    assert sorted(p.name for p in folder.iterdir()) == ["backup.duckdb", "kb.duckdb"]  # not even a lock file
    # Not offered in the command's help, where it would read as "the namespace to act on".
    help_text = duckgraph(command, "--help", env=env, cwd=folder).stdout
    assert "--namespace" not in help_text and "--db" in help_text


@pytest.mark.parametrize("source", ["DUCKGRAPH_NAMESPACE", "config"])
@pytest.mark.parametrize("command", sorted(WHOLE_FILE))
def test_the_namespace_of_the_environment_or_config_file_is_no_refusal(memory: Path, env, command, source):
    argv, _ = WHOLE_FILE[command]
    if source == "config":
        config = memory.parent.parent / "config.toml"
        config.write_text('namespace = "other"\n', encoding="utf-8")
        env = {**env, "DUCKGRAPH_CONFIG": str(config)}
    else:
        env = {**env, "DUCKGRAPH_NAMESPACE": "other"}

    done = duckgraph(*argv, "--db", str(memory), "--json", env=env, cwd=memory.parent)

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["nodes"] == 6 and result["documents"] == 3  # the whole file's counts, both namespaces


def test_export_namespace_saves_that_namespace_alone(memory: Path, env):
    """What the backup refusal points to: `duckgraph export --namespace NAME`."""
    done = duckgraph("export", "--db", str(memory), "--namespace", "other", "-o", "other.jsonl", env=env,
                     cwd=memory.parent)

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (memory.parent / "other.jsonl").read_text(encoding="utf-8").splitlines()]
    rows = [line for line in lines if line["kind"] not in ("meta", "end")]
    assert [(row["kind"], row["name"]) for row in rows] == [("node", "Other Thing")]
    assert {row["namespace"] for row in rows} == {"other"}


def test_doctor_names_what_compact_keep_old_and_restore_left_and_what_to_do(memory: Path, env):
    folder = memory.parent
    assert duckgraph("compact", "--keep-old", "--db", str(memory), env=env, cwd=folder).returncode == 0
    [compacted] = [p for p in folder.iterdir() if ".before-compact-" in p.name]
    restored = duckgraph("restore", "backup.duckdb", "--db", str(memory), "--json", env=env, cwd=folder)
    assert restored.returncode == 0, restored.stderr
    [replaced] = json.loads(restored.stdout)["kept"]

    done = duckgraph("doctor", "--db", str(memory), "--json", env=env, cwd=folder)

    warnings = json.loads(done.stdout)["warnings"]
    assert [w for w in warnings if str(compacted) in w] == [
        f"{compacted} ({compacted.stat().st_size / 2**20:.1f} MB) is {memory} as it was before a compact, kept by "
        "`duckgraph compact --keep-old`: open it with --db to read it; delete it once the compacted file works"]
    assert [w for w in warnings if replaced in w] == [
        f"{replaced} ({Path(replaced).stat().st_size / 2**20:.1f} MB) is the file that `duckgraph restore` replaced "
        f"at {memory}, kept aside with its write-ahead log (if it had one): `--db {replaced}` opens it with its last "
        "writes; delete it (and its .wal) once the restored file is what you want"]
    text = duckgraph("doctor", "--db", str(memory), env=env, cwd=folder).stdout
    assert f"warning:   {compacted} (" in text and f"warning:   {replaced} (" in text


def test_doctor_says_an_interrupted_compact_left_its_copy_and_what_to_do(memory: Path, env):
    killed = subprocess.run([sys.executable, "-c", KILLED_COMPACT, str(memory)], env=env, cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=300, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    [left] = [p for p in memory.parent.iterdir() if p.name.startswith(".kb.duckdb.")]

    done = duckgraph("doctor", "--db", str(memory), "--json", env=env, cwd=memory.parent)

    warnings = json.loads(done.stdout)["warnings"]
    assert [w for w in warnings if str(left) in w] == [
        f"1 temporary files left by a restore or compact of {memory} that was interrupted "
        f"({left.stat().st_size / 2**20:.1f} MB): {left}. They are unfinished copies, not a memory: delete them (the "
        f"next backup, restore or compact of {memory} does too)"]
    assert not [w for w in warnings if "before-compact" in w]  # killed before anything was kept aside


INGEST = [
    (["https://example.com/guide/", "--depth", "1"], "--depth goes with --crawl (without it only the pages given "
                                                     "are fetched); nothing was read"),
    (["https://example.com/", "--max-pages", "3", "--depth", "0"], "--depth and --max-pages go with --crawl"),
    (["notes/a.txt", "--crawl"], "--crawl follows the links of the http(s) URLs given, and none was given"),
    (["notes/a.txt", "--prune"], "--prune deletes the documents of files gone from the folders given (with --crawl, "
                                 "of pages gone from a crawled site), and no folder was given; nothing was read"),
    (["https://example.com/guide/", "--prune"], "and no folder was given (pages given without --crawl are never "
                                                "pruned)"),
    (["notes/a.txt", "--follow-symlinks"], "--follow-symlinks follows the symbolic links inside the folders given, "
                                           "and no folder was given"),
]


@pytest.mark.parametrize(("argv", "message"), INGEST, ids=[" ".join(argv[1:]) for argv, _ in INGEST])
def test_ingest_refuses_an_option_it_would_ignore_before_reading_anything(tmp_path: Path, env, argv, message):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("The Quarn project ships in June.\n", encoding="utf-8")

    done = duckgraph("ingest", *argv, "--db", "kb.duckdb", env=env, cwd=tmp_path)

    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("duckgraph: ") and message in done.stderr, done.stderr
    assert not (tmp_path / "kb.duckdb").exists()  # refused before the file was created or a page fetched


def test_ingest_takes_prune_and_follow_symlinks_with_a_folder(tmp_path: Path, env):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("The Quarn project ships in June.\n", encoding="utf-8")

    done = duckgraph("ingest", "notes", "--prune", "--follow-symlinks", "--db", "kb.duckdb", env=env, cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 documents stored")


@pytest.mark.parametrize(("argv", "flags"), [
    (["build", "--level", "1"], "--level"),
    (["build", "--token-budget", "500", "--limit", "5"], "--token-budget or --limit"),
    (["search", "themes", "--limit", "5"], "--limit"),
    (["write", "--level", "0", "--token-budget", "500"], "--level or --token-budget"),
])
def test_communities_refuses_an_option_of_another_action(memory: Path, env, argv, flags):
    before = files(memory.parent)

    done = duckgraph("communities", *argv, "--db", str(memory), env=env, cwd=memory.parent)

    assert done.returncode == 2, done.stderr
    assert done.stderr.rstrip().endswith(
        f"duckgraph communities: error: communities {argv[0]} takes no {flags}: --level and --token-budget go with "
        "search, --limit with write; nothing was done"), done.stderr
    assert files(memory.parent) == before


def test_communities_search_takes_its_options_and_their_defaults(memory: Path, env):
    assert duckgraph("communities", "build", "--db", str(memory), env=env, cwd=memory.parent).returncode == 0
    for extra in ([], ["--level", "0", "--token-budget", "300"]):
        done = duckgraph("communities", "search", "Curie radium", *extra, "--db", str(memory), "--json", env=env,
                         cwd=memory.parent)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"]
