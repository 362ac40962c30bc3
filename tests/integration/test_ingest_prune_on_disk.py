"""`duckgraph ingest --prune` deletes only the documents of files gone from the disk; the files of a folder that no
converter reads are listed as skipped; `ingest --json` ends with the summary; a --db that is a link to nothing is
said as such by the commands that only read.

Probe findings: a file once given by name (`notes/run.log`) or read by a converter plugin since uninstalled was
pruned as "gone" by the next `ingest notes --prune`, since the folder walk returned only the files of suffixes it
reads; those files were left out without a word; `ingest --json` printed nothing when every file was skipped;
`stats` on a link to nothing said "no memory at PATH".

Real parts: the CLI's `main` in process, real files in tmp_path, real DuckDB files. The embedder is the tests'
hashing one, registered as a plugin: what is stored and pruned does not depend on the vectors.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from pathlib import Path

import pytest

from duckgraph.core import bootstrap as bootstrap_module
from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.files import folder
from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import hookimpl
from duckgraph.ports.converter import ConvertedDocument, DocumentConverter
from tests.fakes import HashingEmbedder


class RstConverter(DocumentConverter):
    suffixes = (".rst",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        return ConvertedDocument(text=data.decode())


class Plugins:
    def __init__(self, rst: bool) -> None:
        self.rst = rst

    @hookimpl
    def register_embedders(self, register):
        register("hashing", HashingEmbedder)

    @hookimpl
    def register_converters(self, register):
        if self.rst:  # the plugin installed; else uninstalled, or failing to load
            register("rst", RstConverter)


@pytest.fixture
def env(no_settings: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, bool]:
    """The working folder is tmp_path; `env["rst"]` says whether the .rst converter plugin is installed."""
    plugins = {"rst": False}

    def plugin_manager():
        pm = build_plugin_manager(load_entry_points=False)
        pm.register(Plugins(plugins["rst"]), name="test-plugins")
        return pm

    no_settings.setattr(bootstrap_module, "build_plugin_manager", plugin_manager)
    no_settings.setenv("DUCKGRAPH_EMBEDDER", "hashing")
    no_settings.chdir(tmp_path)
    return plugins


def run(*args: str, db: str = "kb.duckdb") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "--db", db])
    return code, out.getvalue().strip(), err.getvalue()


def documents(db: str = "kb.duckdb") -> list[str]:
    store = DuckDBStore(Path(db))
    store.open()
    try:
        return sorted(d.id for d in store.list_documents("default", limit=1000))
    finally:
        store.close()


def test_prune_keeps_a_file_given_by_name_that_the_folder_s_walk_does_not_read(env, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "plan.txt").write_text("The Quarn project ships in June.\n", encoding="utf-8")
    (notes / "run.log").write_text("hello from a log file\n", encoding="utf-8")
    log = (notes / "run.log").as_posix()
    assert run("ingest", "notes/run.log")[:2] == (0, "1 documents stored, 0 unchanged, 0 skipped, 1 passages")

    # Before the fix: "pruned 1 documents of files gone", run.log's document deleted though the file is there.
    code, summary, err = run("ingest", "notes", "--prune")
    assert (code, summary) == (0, "1 documents stored, 0 unchanged, 1 skipped, 1 passages; pruned 0 documents of "
                                  "files gone, with 0 entities and 0 relations only they supported; kept 1 "
                                  "documents of files that are there but were not read this time")
    assert f"skipped 1 file with the suffix .log, which no converter reads" in err and err.rstrip().endswith(log)
    assert documents() == [(notes / "plan.txt").as_posix(), log]

    (notes / "run.log").unlink()  # now it is gone
    code, summary, _ = run("ingest", "notes", "--prune")
    assert code == 0 and summary.endswith("0 skipped, 0 passages; pruned 1 documents of files gone, with 0 "
                                          "entities and 0 relations only they supported")
    assert documents() == [(notes / "plan.txt").as_posix()]


def test_prune_keeps_the_documents_of_a_converter_plugin_uninstalled(env, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.rst").write_text("Guide\n=====\n\nThe Vantor cluster reboots on Sundays.\n", encoding="utf-8")
    (docs / "notes.txt").write_text("The Vantor cluster has 12 nodes.\n", encoding="utf-8")
    env["rst"] = True
    assert run("ingest", "docs")[:2] == (0, "2 documents stored, 0 unchanged, 0 skipped, 2 passages")
    stored = documents()

    env["rst"] = False  # uninstalled, or failing to import after an upgrade
    code, summary, err = run("ingest", "docs", "--prune")
    assert (code, summary) == (0, "0 documents stored, 1 unchanged, 1 skipped, 0 passages; pruned 0 documents of "
                                  "files gone, with 0 entities and 0 relations only they supported; kept 1 "
                                  "documents of files that are there but were not read this time")
    assert f"skipped 1 file with the suffix .rst, which no converter reads (a plugin can add one" in err
    assert documents() == stored


def test_prune_keeps_every_part_of_a_long_file_not_read_and_deletes_the_parts_a_file_read_left_over(
        env, tmp_path, db_path, monkeypatch):
    from duckgraph.core.domain import model

    monkeypatch.setattr(model, "MAX_DOCUMENT_CHARS", 200)  # a long file without writing megabytes
    notes = tmp_path / "notes"
    notes.mkdir()
    paragraph = "The engine computed Bernoulli numbers all night long.\n\n"
    (notes / "big.log").write_text(paragraph * 10, encoding="utf-8")
    (notes / "big.txt").write_text(paragraph * 10, encoding="utf-8")
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        folder.ingest(kb, folder.find_files(["notes/big.log", "notes"]), extract=False)
        root = notes.resolve().as_posix()
        stored = sorted(d.id for d in kb.store.list_documents("default", limit=100))
        parts = [d for d in stored if d.startswith(f"{root}/big.log")]
        left_over = [d for d in stored if d.startswith(f"{root}/big.txt#part-")]
        assert len(parts) > 2 and f"{root}/big.log#part-2" in parts and len(left_over) == len(parts) - 1

        (notes / "big.txt").write_text(paragraph, encoding="utf-8")  # shrunk to one document
        report = folder.ingest(kb, folder.find_files(["notes"]), extract=False, prune=[folder.prefix(notes)])
        # big.log is there, not read by the walk: all its parts stay; big.txt's parts after the first are left over.
        assert sorted(report.prune_kept) == parts
        assert sorted(report.pruned) == left_over
        assert sorted(d.id for d in kb.store.list_documents("default", limit=100)) == [*parts, f"{root}/big.txt"]


def test_the_files_no_converter_reads_are_listed_as_skipped_by_suffix(env, tmp_path, caplog):
    notes = tmp_path / "notes"
    (notes / ".git").mkdir(parents=True)
    (notes / "plan.md").write_text("# Plan\n\nShip in June.\n", encoding="utf-8")
    (notes / "run.log").write_text("hello\n", encoding="utf-8")
    (notes / "Makefile").write_text("all:\n", encoding="utf-8")
    for n in range(5):
        (notes / f"photo{n}.png").write_bytes(b"\x89PNG")
    (notes / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")  # machinery: not listed
    (notes / ".DS_Store").write_bytes(b"\0")
    (notes / ".git" / "notes.md").write_text("A note in a hidden folder is read.\n", encoding="utf-8")
    root = notes.resolve().as_posix()

    with caplog.at_level(logging.INFO, logger="duckgraph.ingest"):
        code, summary, err = run("ingest", "notes")
    # Before the fix: "2 documents stored, 0 unchanged, 0 skipped", and not a word about the other files.
    assert (code, summary) == (0, "2 documents stored, 0 unchanged, 7 skipped, 2 passages")
    advice = ("which no converter reads (a plugin can add one: docs/plugins.md; to read a file as text, give it by "
              "name: duckgraph ingest FILE)")
    assert err.splitlines()[-3:] == [
        f"duckgraph: skipped 1 file without a suffix, {advice}: {root}/Makefile",
        f"duckgraph: skipped 1 file with the suffix .log, {advice}: {root}/run.log",
        f"duckgraph: skipped 5 files with the suffix .png, {advice}: {root}/photo0.png, {root}/photo1.png, "
        f"{root}/photo2.png and 2 more (--log-level INFO names them all)"]
    assert "HEAD" not in err and ".DS_Store" not in err
    logged = [r.getMessage() for r in caplog.records if r.name == "duckgraph.ingest"]
    assert [m.split(":")[0] for m in logged] == [f"skipped {root}/{name}" for name in
                                                 ("Makefile", *(f"photo{n}.png" for n in range(5)), "run.log")]
    assert documents() == [f"{root}/.git/notes.md", f"{root}/plan.md"]

    # A folder of such files alone: nothing to store, and why.
    only = tmp_path / "logs"
    only.mkdir()
    (only / "a.log").write_text("x\n", encoding="utf-8")
    code, summary, err = run("ingest", "logs")
    assert (code, summary) == (1, "")
    assert err == (f"duckgraph: no documents found in logs\nduckgraph: skipped 1 file with the suffix .log, {advice}: "
                   f"{only.resolve().as_posix()}/a.log\n")


def test_ingest_json_ends_with_the_summary_also_when_every_file_is_skipped(env, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "plan.txt").write_text("The Quarn project ships in June.\n", encoding="utf-8")
    (notes / "old.txt").write_text("An old note.\n", encoding="utf-8")
    (notes / "run.log").write_text("hello\n", encoding="utf-8")
    root = notes.resolve().as_posix()
    run("ingest", "notes", "notes/run.log")
    (notes / "old.txt").unlink()
    (notes / "plan.txt").write_bytes(b"\xff not UTF-8")  # every file skipped now

    code, out, err = run("ingest", "notes", "--prune", "--json")
    assert code == 0
    # Before the fix: nothing on stdout.
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert summary["stored"] == 0 and summary["unchanged"] == 0 and summary["passages"] == 0
    assert [(s["path"], s["why"].split(" (")[0]) for s in summary["skipped"]] == [
        (f"{root}/plan.txt", "duckgraph reads .txt files as UTF-8 text, and this one is not"),
        (f"{root}/run.log", "no converter reads .log files")]
    assert summary["pruned"] == [f"{root}/old.txt"]
    assert summary["kept"] == [f"{root}/plan.txt", f"{root}/run.log"]
    assert "pruned 1 documents of files gone" in err  # the summary line, on stderr as before


@pytest.mark.parametrize("command", [["stats"], ["search", "tea"], ["changes"], ["namespaces"], ["export"],
                                     ["communities", "build"], ["backup", "copy.duckdb"]],
                         ids=lambda c: c[0])
def test_the_commands_that_only_read_say_that_the_db_is_a_link_to_nothing(env, tmp_path, command):
    link = tmp_path / "memory.duckdb"
    target = tmp_path / "drive" / "x.duckdb"
    link.symlink_to(target)
    said = (f"duckgraph: {link} is a symbolic link to {target}, which does not exist: if the memory was moved or its "
            "drive is not mounted, mount it or point the link at the memory's file; to start a new memory there, give "
            f"--db (DUCKGRAPH_DB) the target itself, {target}\n")
    (tmp_path / "note.md").write_text("Maya likes tea.\n", encoding="utf-8")
    assert run("ingest", "note.md", db=str(link))[::2] == (1, said)  # as a command that writes says it
    # Before the fix: "no memory at PATH: check --db ...", as if the path were mistyped.
    assert run(*command, db=str(link))[::2] == (1, said)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty-config.toml", "memory.duckdb", "note.md"]


def test_communities_write_without_an_extractor_says_where_the_host_s_tools_are(env, tmp_path):
    (tmp_path / "note.md").write_text("Maya likes tea.\n", encoding="utf-8")
    assert run("ingest", "note.md")[0] == 0
    code, _, err = run("communities", "write")
    assert code == 1
    assert "communities_to_summarize and save_community_report, tools a server lists only with DUCKGRAPH_TOOLS=all" \
        in err
