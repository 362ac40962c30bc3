"""`duckgraph ingest` mirrors a folder: real files in tmp_path, the real DuckDB file and the real default model.

A document's id is the file's canonical absolute path (core/files/folder.py), so the folder typed two ways is
stored once; unchanged files are skipped, changed ones replaced, and `--prune` deletes the documents of files that
are gone with the entities and relations only they supported."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.cli import main
from duckgraph.core.config import load_settings
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore

pytestmark = pytest.mark.model


@pytest.fixture
def notes(tmp_path: Path, monkeypatch) -> Path:
    for name in ("DUCKGRAPH_DB", "DUCKGRAPH_NAMESPACE", "DUCKGRAPH_STORE", "DUCKGRAPH_EMBEDDER", "DUCKGRAPH_EXTRACTOR"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "ada.md").write_text("Ada Lovelace wrote the first program for the Analytical Engine.\n", encoding="utf-8")
    (folder / "babbage.txt").write_text("Charles Babbage designed the Analytical Engine.\n", encoding="utf-8")
    (folder / "sub" / "turing.md").write_text("Alan Turing worked at Bletchley Park.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return folder


def ingest(db: Path, *args: str) -> tuple[int, str]:
    return command(db, "ingest", *args)


def command(db: Path, *args: str) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*args, "--db", str(db)])
    return code, out.getvalue().strip()


def documents(db: Path) -> dict[str, tuple[str, str, dict]]:
    store = DuckDBStore(db)
    store.open()
    try:
        return {d.id: (d.title, d.text, d.metadata) for d in store.list_documents("default", limit=1000)}
    finally:
        store.close()


def test_a_folder_typed_two_ways_is_stored_once_and_unchanged_files_are_skipped(notes, tmp_path, db_path):
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 0 skipped, 3 passages")
    code, summary = ingest(db_path, f"{notes.resolve()}/")  # absolute, with a trailing slash
    assert (code, summary) == (0, "0 documents stored, 3 unchanged, 0 skipped, 0 passages")
    root = notes.resolve().as_posix()
    assert sorted(documents(db_path)) == [f"{root}/ada.md", f"{root}/babbage.txt", f"{root}/sub/turing.md"]
    # A file given alone, relative to another working folder, is the same document too.
    assert ingest(db_path, "./notes/../notes/sub/turing.md")[1].startswith("0 documents stored, 1 unchanged")


def test_a_changed_file_is_replaced(notes, db_path):
    ingest(db_path, "notes")
    (notes / "babbage.txt").write_text("Charles Babbage designed the Difference Engine.\n", encoding="utf-8")
    assert ingest(db_path, "notes") == (0, "1 documents stored (1 replaced), 2 unchanged, 0 skipped, 1 passages")
    stored = documents(db_path)
    assert len(stored) == 3
    assert stored[(notes / "babbage.txt").resolve().as_posix()][1] == "Charles Babbage designed the Difference Engine.\n"
    stats = DuckDBStore(db_path)
    stats.open()
    try:
        assert stats.stats()["chunks"] == 3  # the old passage went with the old text
    finally:
        stats.close()


def test_a_file_whose_modification_time_alone_changed_is_left_as_it_is(notes, db_path):
    import os
    from datetime import datetime

    def times() -> dict[str, datetime | None]:
        store = DuckDBStore(db_path)
        store.open()
        try:
            return {d.id: d.time for d in store.list_documents("default", limit=1000)}
        finally:
            store.close()

    babbage = (notes / "babbage.txt").resolve().as_posix()
    os.utime(notes / "babbage.txt", (1_500_000_000, 1_500_000_000))
    ingest(db_path, "notes")
    assert times()[babbage] == datetime(2017, 7, 14, 2, 40)  # the modification time, when nothing states one
    # Touched (a checkout, a copy): the time is a fallback, not content, so nothing is replaced or embedded again.
    for name in ("ada.md", "babbage.txt", "sub/turing.md"):
        os.utime(notes / name, (1_700_000_000, 1_700_000_000))
    assert ingest(db_path, "notes") == (0, "0 documents stored, 3 unchanged, 0 skipped, 0 passages")
    assert times()[babbage] == datetime(2017, 7, 14, 2, 40)
    # A new text brings its own modification time.
    (notes / "babbage.txt").write_text("Charles Babbage designed the Difference Engine.\n", encoding="utf-8")
    os.utime(notes / "babbage.txt", (1_700_000_000, 1_700_000_000))
    assert ingest(db_path, "notes") == (0, "1 documents stored (1 replaced), 2 unchanged, 0 skipped, 1 passages")
    assert times()[babbage] == datetime(2023, 11, 14, 22, 13, 20)


def add_babbage_graph(db_path, root: str, *more: EdgeInput) -> None:
    """Babbage (supported by babbage.txt alone), the Analytical Engine (by it and ada.md), the Difference Engine
    (added by hand, no provenance), what joins them, and `more` relations."""
    kb = bootstrap(load_settings(None, db=str(db_path))).knowledge_base
    with kb:
        kb.add_knowledge_graph(
            [NodeInput(name="Charles Babbage", type="Person", source_ids=[f"{root}/babbage.txt"]),
             NodeInput(name="Analytical Engine", type="Machine", source_ids=[f"{root}/babbage.txt", f"{root}/ada.md"]),
             NodeInput(name="Difference Engine", type="Machine")],  # no provenance: added by hand
            [EdgeInput(source="Charles Babbage", target="Analytical Engine", type="DESIGNED",
                       source_ids=[f"{root}/babbage.txt"]),
             EdgeInput(source="Analytical Engine", target="Difference Engine", type="SUCCEEDED",
                       source_ids=[f"{root}/ada.md"]),
             *more])


def test_prune_deletes_the_documents_of_files_gone_with_what_only_they_supported(notes, tmp_path, db_path):
    other = tmp_path / "elsewhere" / "notes"  # another folder of the same name: never pruned with this one
    other.mkdir(parents=True)
    (other / "kept.md").write_text("Grace Hopper worked at Harvard University.\n", encoding="utf-8")
    ingest(db_path, "notes", str(other))
    root = notes.resolve().as_posix()
    add_babbage_graph(db_path, root)
    (notes / "babbage.txt").unlink()

    assert ingest(db_path, "notes")[1].startswith("0 documents stored, 2 unchanged")  # without --prune: kept
    assert f"{root}/babbage.txt" in documents(db_path)

    code, summary = ingest(db_path, "notes", "--prune")
    assert code == 0
    assert summary == ("0 documents stored, 2 unchanged, 0 skipped, 0 passages; pruned 1 documents of files gone, "
                       "with 1 entities and 1 relations only they supported")
    assert sorted(documents(db_path)) == sorted([f"{root}/ada.md", f"{root}/sub/turing.md",
                                                 (other / "kept.md").resolve().as_posix()])
    store = DuckDBStore(db_path)
    store.open()
    try:
        names = {n.name for n in store.list_nodes("default", limit=100)}
        types = {e.type for e in store.list_edges("default", limit=100)}
        chunks = store.stats()["chunks"]
    finally:
        store.close()
    # Babbage was supported by the deleted file alone; the Analytical Engine by ada.md too; the Difference
    # Engine by nothing (added by hand), so it stays with the relation ada.md supports.
    assert names == {"Analytical Engine", "Difference Engine"}
    assert types == {"SUCCEEDED"}
    assert chunks == 3

    # A folder emptied of files is pruned as well.
    for path in notes.rglob("*.*"):
        path.unlink()
    code, summary = ingest(db_path, "notes", "--prune")
    assert code == 0 and "pruned 2 documents" in summary
    assert sorted(documents(db_path)) == [(other / "kept.md").resolve().as_posix()]


def test_an_empty_folder_is_pruned_only_when_asked(notes, db_path, capsys):
    """An empty folder is what a drive not mounted looks like: --prune alone must not delete everything under it."""
    assert ingest(db_path, "notes")[0] == 0
    stored = sorted(documents(db_path))
    shutil.rmtree(notes)
    notes.mkdir()  # the mount point, with the drive gone
    code, _ = ingest(db_path, "notes", "--prune")
    assert code == 1
    assert f"not pruning {notes.resolve()}: the folder is empty" in capsys.readouterr().err
    assert sorted(documents(db_path)) == stored
    assert main(["ingest", "notes", "--prune-empty", "--db", str(db_path)]) == 2
    assert "--prune-empty goes with --prune" in capsys.readouterr().err
    code, summary = ingest(db_path, "notes", "--prune", "--prune-empty")
    assert code == 0 and "pruned 3 documents" in summary
    assert documents(db_path) == {}


def test_prune_keeps_the_documents_of_files_that_exist_but_were_skipped(notes, tmp_path, db_path, capsys):
    """A link not followed this time and a file that cannot be read are skipped, not gone: their documents stay
    (probe bug 3: a link ingested with --follow-symlinks was pruned as "files gone" without it)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "s.txt").write_text("The office moves in May.\n", encoding="utf-8")
    (notes / "linked").symlink_to(shared, target_is_directory=True)
    assert ingest(db_path, "notes", "--follow-symlinks")[1].startswith("4 documents stored")
    (notes / "babbage.txt").write_bytes(b"\xff\xfe not UTF-8 any more")
    root = notes.resolve().as_posix()
    before = set(documents(db_path))

    code, summary = ingest(db_path, "notes", "--prune")
    assert (code, summary) == (0, ("0 documents stored, 2 unchanged, 2 skipped, 0 passages; pruned 0 documents of "
                                   "files gone, with 0 entities and 0 relations only they supported; kept 2 "
                                   "documents of files that are there but were not read this time"))
    assert f"skipped {root}/linked: a symbolic link" in capsys.readouterr().err
    assert set(documents(db_path)) == before

    shutil.rmtree(shared)  # now the link leads nowhere: its file is gone
    assert "pruned 1 documents of files gone" in ingest(db_path, "notes", "--prune")[1]
    assert set(documents(db_path)) == before - {f"{root}/linked/s.txt"}


def test_an_emptied_file_s_text_is_deleted_with_what_only_it_supported(notes, db_path, capsys):
    """A file emptied is a changed file whose text is gone: its document goes, with or without --prune (probe
    bug 10: it was skipped as "no text" and search kept serving the old text)."""
    ingest(db_path, "notes")
    root = notes.resolve().as_posix()
    add_babbage_graph(db_path, root)
    (notes / "babbage.txt").write_text("  \n", encoding="utf-8")
    capsys.readouterr()

    assert ingest(db_path, "notes") == (0, "0 documents stored, 2 unchanged, 1 skipped, 0 passages; deleted 1 "
                                           "documents of files that hold no text now")
    assert capsys.readouterr().err.endswith(
        f"skipped {root}/babbage.txt: no text any more: its stored text was deleted (1 documents, with 1 entities "
        "and 1 relations only they supported)\n")
    assert sorted(documents(db_path)) == [f"{root}/ada.md", f"{root}/sub/turing.md"]
    kb = _hashing_kb(db_path)
    try:
        assert {n.name for n in kb.store.list_nodes("default", limit=100)} == {"Analytical Engine",
                                                                               "Difference Engine"}
    finally:
        kb.close()
    assert ingest(db_path, "notes", "--prune")[1].endswith("pruned 0 documents of files gone, with 0 entities and "
                                                           "0 relations only they supported")
    assert capsys.readouterr().err.endswith(f"skipped {root}/babbage.txt: no text\n")  # nothing left to delete


def test_a_changed_file_s_re_ingest_removes_what_only_its_old_text_supported(notes, db_path):
    ingest(db_path, "notes")
    root = notes.resolve().as_posix()
    add_babbage_graph(db_path, root, EdgeInput(source="Analytical Engine", target="Difference Engine",
                                               type="FOLLOWED"))  # by hand
    (notes / "babbage.txt").write_text("Charles Babbage designed the Difference Engine.\n", encoding="utf-8")

    code, summary = ingest(db_path, "notes")
    assert code == 0
    assert summary == ("1 documents stored (1 replaced, with 0 entities and 1 relations only their old text "
                       "supported; 1 entities and 0 relations the new text still names kept), 2 unchanged, 0 skipped, "
                       "1 passages")
    store = DuckDBStore(db_path)
    store.open()
    try:
        names = {n.name for n in store.list_nodes("default", limit=100)}
        types = {e.type for e in store.list_edges("default", limit=100)}
        sources = {}
        for name in ("analytical engine", "charles babbage"):
            node = store.find_nodes("default", [name])[0]
            sources[name] = {store.chunk_documents([c])[c] for c, _ in store.chunks_mentioning([node.id])}
    finally:
        store.close()
    # DESIGNED stood on the old text alone, and the new one no longer names the Analytical Engine: it goes.
    # Babbage stood on it alone too, but the new text (stored without extraction) still names him: he stays, on
    # it. The Analytical Engine stays on ada.md (and no longer on babbage.txt); what was added by hand stays.
    assert names == {"Charles Babbage", "Analytical Engine", "Difference Engine"}
    assert types == {"SUCCEEDED", "FOLLOWED"}
    assert sources == {"analytical engine": {f"{root}/ada.md"}, "charles babbage": {f"{root}/babbage.txt"}}


def test_markdown_front_matter_gives_the_title_and_the_date(notes, db_path):
    (notes / "meeting.md").write_text(
        '---\ntitle: "Design review: the engine"\ndate: 2024-05-02\ntags:\n  - engine\n---\n'
        "We chose the Analytical Engine.\n", encoding="utf-8")
    (notes / "plain.md").write_text("---\nnot: front matter\n", encoding="utf-8")  # never closed: plain text
    ingest(db_path, "notes")
    stored = documents(db_path)
    title, text, metadata = stored[(notes / "meeting.md").resolve().as_posix()]
    assert title == "Design review: the engine"
    assert metadata == {"date": "2024-05-02"}
    assert text == "tags: engine\n\nWe chose the Analytical Engine.\n"  # the fields ingest does not read start it
    assert stored[(notes / "ada.md").resolve().as_posix()][0] == "ada"  # no front matter: the file's name
    assert stored[(notes / "plain.md").resolve().as_posix()][:2] == ("plain", "---\nnot: front matter\n")


def test_front_matter_fields_are_searched_and_shown_with_the_note(notes, db_path):
    """The attendees of an Obsidian meeting note, in its front matter, were kept in the metadata alone: "Who
    attended the March 3 planning meeting?" was answered "Nothing relevant" (probe 39 bug 2)."""
    meetings = notes / "meetings"
    meetings.mkdir()
    (meetings / "2026-03-03-planning.md").write_text(
        "---\ntitle: Q2 planning meeting\ndate: 2026-03-03\nattendees: Sarah Kim, Alex Rivera, Raj Patel, Mei Lin\n"
        "---\n# Q2 planning meeting\n\n## Decisions\n- We will evaluate Acme Corp and Globex as collaboration "
        "vendors; decision by end of April.\n", encoding="utf-8")
    (meetings / "2026-03-10-retro.md").write_text(
        "---\ntitle: Sprint retro\ndate: 2026-03-10\nattendees:\n  - Priya Shah\n  - Tom Becker\n---\n"
        "# Sprint retro\n\n- Deploys were slow; Tom will look at the CI cache.\n", encoding="utf-8")
    ingest(db_path, "notes/meetings")
    planning = (meetings / "2026-03-03-planning.md").resolve().as_posix()
    title, text, metadata = documents(db_path)[planning]
    assert text.startswith("attendees: Sarah Kim, Alex Rivera, Raj Patel, Mei Lin\n\n# Q2 planning meeting\n")
    assert metadata == {"date": "2026-03-03", "attendees": "Sarah Kim, Alex Rivera, Raj Patel, Mei Lin"}
    retro = documents(db_path)[(meetings / "2026-03-10-retro.md").resolve().as_posix()]
    assert retro[1].startswith("attendees: Priya Shah, Tom Becker\n\n") and retro[2] == {"date": "2026-03-10"}

    code, answer = command(db_path, "search", "Who attended the March 3 planning meeting?", "--max-passages", "1")
    first = answer.split("Passages:\n", 1)[1].splitlines()[0]
    assert first.startswith(f"[{planning}#") and "attendees: Sarah Kim, Alex Rivera, Raj Patel, Mei Lin" in first
    assert code == 0 and "attendees: Sarah Kim, Alex Rivera" in command(db_path, "documents", "show", planning)[1]


K8S = ("---\napiVersion: v1\nkind: Service\nmetadata:\n  name: payments\n---\napiVersion: apps/v1\n"
       "kind: Deployment\ntitle: rollout\ndate: 2024-05-02\n")


def test_a_yaml_file_starting_with_a_document_start_is_stored_whole(notes, db_path):
    """A YAML file's leading "---" starts its first document: read as a Markdown note's front matter, that document
    (the Service named payments) became metadata and left the text. Front matter is a Markdown note's only."""
    (notes / "k8s.yml").write_text(K8S, encoding="utf-8")
    (notes / "compose.yaml").write_text("---\nservices:\n  db:\n    image: postgres:16\n---\n", encoding="utf-8")
    (notes / "meeting.md").write_text("---\ntitle: Rollout review\ndate: 2024-05-02\n---\nWe ship payments.\n",
                                      encoding="utf-8")
    ingest(db_path, "notes/k8s.yml", "notes/compose.yaml", "notes/meeting.md")
    stored = documents(db_path)
    assert stored[(notes / "k8s.yml").resolve().as_posix()] == ("k8s", K8S, {})
    assert stored[(notes / "compose.yaml").resolve().as_posix()] == (
        "compose", "---\nservices:\n  db:\n    image: postgres:16\n---\n", {})
    # A Markdown note's front matter still gives its title and date.
    assert stored[(notes / "meeting.md").resolve().as_posix()] == ("Rollout review", "We ship payments.\n",
                                                                   {"date": "2024-05-02"})


def test_a_byte_order_mark_hides_neither_the_front_matter_nor_is_stored(notes, db_path):
    """Notepad and some editors start UTF-8 with a byte order mark (probe bug 7: the front matter was stored as
    text, the title was the file's name)."""
    (notes / "bom.md").write_bytes("\ufeff---\ntitle: Garden Plan\ndate: 2024-05-01\n---\nWe plant in May.\n"
                                   .encode("utf-8"))
    (notes / "bom.txt").write_bytes("\ufeffTomatoes need sun.\n".encode("utf-8"))
    ingest(db_path, "notes")
    stored = documents(db_path)
    assert stored[(notes / "bom.md").resolve().as_posix()] == ("Garden Plan", "We plant in May.\n",
                                                               {"date": "2024-05-01"})
    assert stored[(notes / "bom.txt").resolve().as_posix()][1] == "Tomatoes need sun.\n"


# -- issue 29: links out of the folder, big files, one bad file ------------------------------------------------


def test_a_link_out_of_the_folder_is_skipped_unless_follow_symlinks(notes, tmp_path, db_path, capsys):
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("The launch code is 0000.\n", encoding="utf-8")
    (notes / "notes.txt").symlink_to(secret)  # notes.txt -> a file outside the folder
    (notes / "linked").symlink_to(secret.parent, target_is_directory=True)  # a folder outside
    (notes / "again.md").symlink_to(notes / "ada.md")  # a link that stays inside: its file's, stored once
    code, summary = ingest(db_path, "notes")
    assert (code, summary) == (0, "3 documents stored, 0 unchanged, 2 skipped, 3 passages")
    err = capsys.readouterr().err
    assert f"skipped {notes.resolve() / 'notes.txt'}: a symbolic link to {secret}, outside the folders given" in err
    assert "--follow-symlinks" in err and f"skipped {notes.resolve() / 'linked'}" in err
    assert not any("launch code" in text for _, text, _ in documents(db_path).values())

    code, summary = ingest(db_path, "notes", "--follow-symlinks")
    assert (code, summary) == (0, "2 documents stored, 3 unchanged, 0 skipped, 2 passages")
    root = notes.resolve().as_posix()
    assert {f"{root}/notes.txt", f"{root}/linked/secret.txt"} <= set(documents(db_path))


def _hashing_kb(db: Path):
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from tests.fakes import HashingEmbedder

    return KnowledgeBase(DuckDBStore(db), HashingEmbedder()).open()


def test_a_file_over_the_document_limit_is_stored_as_several_and_the_rest_of_the_folder_too(notes, db_path):
    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS
    from duckgraph.core.files import folder

    paragraph = "The engine computed Bernoulli numbers. " * 25 + "\n\n"
    (notes / "big.txt").write_text(paragraph * (MAX_DOCUMENT_CHARS // len(paragraph) + 10), encoding="utf-8")
    kb = _hashing_kb(db_path)
    report = folder.ingest(kb, folder.find_files([str(notes)]), extract=False)
    kb.close()
    big = (notes / "big.txt").resolve().as_posix()
    assert report.skipped == [] and report.split == {str(notes.resolve() / "big.txt"): 2}
    stored = documents(db_path)
    assert {big, f"{big}#part-2", f"{notes.resolve().as_posix()}/ada.md"} <= set(stored) and len(stored) == 5
    assert stored[big][0] == "big (part 1 of 2)" and stored[big][1].endswith("\n\n")  # cut at a paragraph
    assert len(stored[big][1]) <= MAX_DOCUMENT_CHARS
    assert stored[big][1] + stored[f"{big}#part-2"][1] == (notes / "big.txt").read_text(encoding="utf-8")
    with _hashing_kb(db_path) as kb:  # the text reads on from the first part's last passage into the second's
        chunks = kb.store.document_chunks("default", [big, f"{big}#part-2"])
        last = max((c for c in chunks if c.document_id == big), key=lambda c: c.ordinal)
        first = next(c for c in chunks if c.document_id == f"{big}#part-2" and c.ordinal == 0)
        assert kb.store.adjacent_chunks([last.id], "default")[last.id][1] == first.id


def test_prune_keeps_every_part_of_a_long_file_skipped_this_time(notes, db_path):
    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS
    from duckgraph.core.files import folder

    paragraph = "The engine computed Bernoulli numbers. " * 25 + "\n\n"
    (notes / "big.txt").write_text(paragraph * (MAX_DOCUMENT_CHARS // len(paragraph) + 10), encoding="utf-8")
    with _hashing_kb(db_path) as kb:
        folder.ingest(kb, folder.find_files([str(notes)]), extract=False)
    before = set(documents(db_path))
    (notes / "big.txt").write_bytes(b"\xff\xfe not UTF-8 any more")
    with _hashing_kb(db_path) as kb:
        report = folder.ingest(kb, folder.find_files([str(notes)]), extract=False, prune=[folder.prefix(notes)])
    assert [Path(p).name for p, _ in report.skipped] == ["big.txt"] and report.pruned == []
    assert set(documents(db_path)) == before


def test_one_file_the_store_refuses_does_not_stop_the_others(notes, db_path, monkeypatch):
    from duckgraph.core.domain import ingest as ingest_module
    from duckgraph.core.files import folder

    # A small limit per call stands for the real 20M characters: batches keep under it, and a file over it is
    # refused alone, with the reason, while the others are stored.
    monkeypatch.setattr(ingest_module, "MAX_TOTAL_DOCUMENT_CHARS", 120)
    (notes / "long.md").write_text("Too long for one call. " * 10, encoding="utf-8")
    (notes / "bad.txt").write_bytes(b"\xff\xfe not UTF-8")
    kb = _hashing_kb(db_path)
    report = folder.ingest(kb, folder.find_files([str(notes)]), extract=False)
    kb.close()
    assert sorted(Path(p).name for p, _ in report.skipped) == ["bad.txt", "long.md"]
    assert "the limit is 120" in dict(report.skipped)[str(notes.resolve() / "long.md")]
    assert len(report.stored) == 3 and len(documents(db_path)) == 3


def test_extract_without_an_extractor_is_refused_before_any_file_is_read(notes, db_path, monkeypatch, capsys):
    """It used to skip every file ("no extractor is configured"), store nothing, and exit 0."""
    from duckgraph.core.files import folder

    monkeypatch.setattr(folder, "find_files", lambda *a, **kw: pytest.fail("files were read"))
    assert main(["ingest", "notes", "--extract", "--db", str(db_path)]) == 1
    assert capsys.readouterr().err == (
        "duckgraph: --extract needs an extractor and none is configured: configure one (DUCKGRAPH_EXTRACTOR=ollama, "
        "or an [extractor] section in the config file; see docs/ollama.md), or run without --extract to store the "
        "documents only; nothing was read\n")
    assert not db_path.exists()


# -- probe 37: a notes vault (a leading rule, links inside, trash folders, a link to nothing) ------------------


def test_a_note_that_starts_with_a_rule_is_stored_whole(notes, db_path):
    """The text between a leading "---" and the next was taken for front matter and dropped (kept neither in the
    text nor in the metadata)."""
    text = "---\n\nDentist appointment on 12 June at 9:30 with Dr. Albers.\n\n---\n\nMore text after rule.\n"
    (notes / "rule.md").write_text(text, encoding="utf-8")
    ingest(db_path, "notes")
    assert documents(db_path)[(notes / "rule.md").resolve().as_posix()] == ("rule", text, {})


@pytest.mark.parametrize("link", ["Areas/heron-link", "Zoo/heron-link"])  # walked before the folder, and after
def test_a_link_to_a_folder_inside_stores_its_notes_once_under_their_own_path(notes, db_path, link):
    """Walked first, the link's path was the notes' id: the folder's own documents were kept, never updated, and
    after an edit search showed the stale copy first; --prune never removed it."""
    plan = notes / "Projects" / "Heron" / "Plan.md"
    plan.parent.mkdir(parents=True)
    plan.write_text("Heron uses Kafka 3.7 for its event bus.\n", encoding="utf-8")
    assert ingest(db_path, "notes")[1].startswith("4 documents stored")
    (notes / link).parent.mkdir()
    (notes / link).symlink_to(Path("../Projects/Heron"), target_is_directory=True)
    assert ingest(db_path, "notes", "--prune") == (0, (
        "0 documents stored, 4 unchanged, 0 skipped, 0 passages; pruned 0 documents of files gone, with 0 entities "
        "and 0 relations only they supported"))
    plan.write_text("Heron uses NATS 2.10 for its event bus.\n", encoding="utf-8")
    assert ingest(db_path, "notes", "--prune")[1].startswith("1 documents stored (1 replaced), 3 unchanged")
    stored = documents(db_path)
    assert [text for key, (_, text, _) in stored.items() if "Heron uses" in text] == [
        "Heron uses NATS 2.10 for its event bus.\n"]
    assert plan.resolve().as_posix() in stored


def test_a_link_to_a_note_inside_stores_it_once_and_prunes_what_its_path_held(notes, tmp_path, db_path):
    """A link to a note was a second document (the same passage twice in every search); one stored under a link's
    path that way is pruned once its note is read under its own."""
    from duckgraph.core.domain.model import DocumentInput

    (notes / "inbox").mkdir()
    link = notes / "inbox" / "ada-link.md"
    link.symlink_to(Path("../ada.md"))
    with bootstrap(load_settings(None, db=str(db_path))).knowledge_base as kb:  # what an older version stored
        kb.add_documents([DocumentInput(id=link.as_posix(), text="Ada Lovelace wrote the first program.\n")],
                         extract=False)
    code, summary = ingest(db_path, "notes", "--prune")
    assert code == 0 and summary.startswith("3 documents stored, 0 unchanged, 0 skipped, 3 passages; pruned 1 ")
    root = notes.resolve().as_posix()
    assert sorted(documents(db_path)) == [f"{root}/ada.md", f"{root}/babbage.txt", f"{root}/sub/turing.md"]


def test_trash_folders_are_left_out_saying_so_and_exclude_leaves_out_more(notes, db_path, capsys):
    """Obsidian's .trash and Logseq's backups were stored and searchable, and a document deleted by hand came back
    with the next ingest; nothing could be left out."""
    for name in (".trash/Old secret.md", "logseq/bak/pages/p.md", "logseq/pages/p.md", "Archive/2019/a.md",
                 "Areas/old.md"):
        (notes / name).parent.mkdir(parents=True, exist_ok=True)
        (notes / name).write_text(f"Note {name}.\n", encoding="utf-8")
    (notes / "Areas" / "link").symlink_to(Path("../Archive/2019"), target_is_directory=True)
    root = notes.resolve().as_posix()
    read = {f"{root}/{name}" for name in ("ada.md", "babbage.txt", "sub/turing.md", "logseq/pages/p.md")}

    code, summary = ingest(db_path, "notes", "--exclude", "Archive/2019", "--exclude", "old.md")
    assert (code, summary) == (0, "4 documents stored, 0 unchanged, 0 skipped, 4 passages")
    assert set(documents(db_path)) == read  # Archive/2019 by its own path, and by the link to it
    assert (f"duckgraph: left out {root}/.trash, {root}/logseq/bak: where notes apps keep deleted notes and old "
            "copies (with --prune, what was stored of them is deleted); give --include-trash to read them\n"
            ) in capsys.readouterr().err

    assert ingest(db_path, "notes", "--include-trash")[1].startswith("4 documents stored, 4 unchanged")
    assert f"{root}/.trash/Old secret.md" in documents(db_path)
    assert "left out" not in capsys.readouterr().err
    code, out = ingest(db_path, "notes", "--prune", "--exclude", "Areas", "--json")  # the link in it too, not 2019
    assert capsys.readouterr().err.endswith(
        "0 documents stored, 5 unchanged, 0 skipped, 0 passages; pruned 3 documents of files gone or left out, with 0 "
        "entities and 0 relations only they supported\n")
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert summary["left_out"] == [{"path": f"{root}/.trash", "pattern": ".trash"},
                                   {"path": f"{root}/Areas", "pattern": "Areas"},
                                   {"path": f"{root}/logseq/bak", "pattern": "**/logseq/bak"}]
    assert sorted(summary["pruned"]) == [f"{root}/.trash/Old secret.md", f"{root}/Areas/old.md",
                                         f"{root}/logseq/bak/pages/p.md"]
    assert set(documents(db_path)) == read | {f"{root}/Archive/2019/a.md"}


@pytest.mark.parametrize(("arguments", "why"), [
    (["notes", "--exclude", "../notes/ada.md"], "--exclude '../notes/ada.md': a pattern is matched against the "
                                                "paths inside each folder given, relative to it"),
    (["notes", "--exclude", "/abs"], "--exclude '/abs': a pattern"),
    (["notes/ada.md", "--exclude", "x"], "--exclude acts on what a folder holds, and no folder was given"),
    (["notes/ada.md", "--include-trash"], "--include-trash acts on what a folder holds, and no folder was given"),
])
def test_an_exclude_pattern_that_can_match_nothing_is_refused_before_reading(notes, db_path, capsys, arguments,
                                                                            why):
    assert ingest(db_path, *arguments) == (2, "")
    err = capsys.readouterr().err
    assert err.startswith(f"duckgraph: {why}") and err.endswith("; nothing was read\n")
    assert not db_path.exists()


def test_a_link_that_leads_nowhere_is_skipped_with_why(notes, db_path, capsys):
    """A link to a note moved, or on a drive not mounted, was neither read nor reported."""
    (notes / "b.md").symlink_to("/mnt/not-mounted/b.md")
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 1 skipped, 3 passages")
    assert (f"skipped {notes.resolve()}/b.md: a symbolic link to /mnt/not-mounted/b.md, which does not exist (moved, "
            "deleted, or on a drive not mounted; with --prune, what was stored of it is deleted): fix or remove the "
            "link\n") in capsys.readouterr().err
