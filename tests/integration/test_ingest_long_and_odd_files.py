"""`duckgraph ingest` on a file too long for one `add_documents` call, on files whose name cannot be a document id,
and stopped by an error part-way: real files, the real DuckDB file and the real default model.

Small limits stand for the real ones (2,000,000 characters a document, 20,000,000 a call): a file over the call's
limit was skipped ("1 skipped" beside "split into 11"), a name that is not UTF-8 was skipped with pydantic's dump,
one with a line break was stored and cut search's "[id#n]" line in two, and an error that stopped ingest hid what
was stored before it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from duckgraph.core.domain import ingest as ingest_module
from duckgraph.core.domain import model
from duckgraph.ports import EmbedderError
from tests.integration import test_ingest_folder
from tests.integration.test_ingest_folder import documents, ingest

notes = test_ingest_folder.notes  # the folder of three notes, its fixture

pytestmark = pytest.mark.model


def _paragraphs(word: str, count: int) -> str:
    """`count` paragraphs of 100 characters: with a document's limit at 300, three to a part."""
    return "".join(f"{word} paragraph {n:03d} ".ljust(98, ".") + "\n\n" for n in range(count))


@pytest.fixture
def small_limits(monkeypatch):
    """300 characters a document, 700 a call: a 20-paragraph file is 7 parts, stored a part a call."""
    monkeypatch.setattr(model, "MAX_DOCUMENT_CHARS", 300)
    monkeypatch.setattr(ingest_module, "MAX_TOTAL_DOCUMENT_CHARS", 700)


def _failing_on(monkeypatch, marker: str) -> None:
    """The real embedder fails, as an Ollama gone would, on the passages holding `marker`."""
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    real = SentenceTransformersEmbedder.embed_batch

    def embed_batch(self, texts):
        if any(marker in text for text in texts):
            raise EmbedderError("the embedder is gone")
        return real(self, texts)

    monkeypatch.setattr(SentenceTransformersEmbedder, "embed_batch", embed_batch)


def test_a_file_longer_than_one_call_is_stored_in_several_calls(notes, db_path, small_limits, capsys):
    (notes / "log.txt").write_text(_paragraphs("Engine", 20), encoding="utf-8")
    log = (notes / "log.txt").resolve().as_posix()

    code, summary = ingest(db_path, "notes")
    assert code == 0
    assert summary.startswith("10 documents stored, 0 unchanged, 0 skipped, ")
    assert summary.endswith(" passages (1 long files split into 7 documents)")
    assert "skipped" not in capsys.readouterr().err
    stored = documents(db_path)
    parts = [log] + [f"{log}#part-{n}" for n in range(2, 8)]
    assert set(parts) <= set(stored) and len(stored) == 10
    assert "".join(stored[p][1] for p in parts) == _paragraphs("Engine", 20)
    assert ingest(db_path, "notes")[1].startswith("0 documents stored, 10 unchanged, 0 skipped")


def test_a_long_file_whose_later_call_fails_is_reported_partly_stored(notes, db_path, small_limits, capsys):
    (notes / "log.txt").write_text(_paragraphs("Old", 20), encoding="utf-8")
    assert ingest(db_path, "notes")[0] == 0
    (notes / "log.txt").write_text(_paragraphs("New", 20), encoding="utf-8")
    log = (notes / "log.txt").resolve().as_posix()
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as failing:
        _failing_on(failing, "New paragraph 007")  # in part 3: the second call
        code, summary = ingest(db_path, "notes")
    err = capsys.readouterr().err
    assert code == 1
    assert summary.startswith("2 documents stored (2 replaced), 2 unchanged, 0 skipped, ")
    assert summary.endswith(" passages, 1 long files partly stored")  # not "split into 7", not "skipped"
    assert (f"duckgraph: partly stored {log}: parts 1-2 of 7 hold its new text; part 3 could not be stored (the "
            "embedder is gone), so parts 3-7 hold what they held before (an older text, or none): ingest it again\n"
            "duckgraph: ingest stopped at file 3 of 4, part 3 of 7 by the error below; what is counted above is "
            "stored: run it again to store the rest (stored files are left as they are)\n"
            "duckgraph: the embedder is gone\n") in err
    stored = documents(db_path)
    assert stored[log][1].startswith("New") and stored[f"{log}#part-2"][1].startswith("New")
    assert stored[f"{log}#part-3"][1].startswith("Old")

    code, summary = ingest(db_path, "notes")
    assert code == 0 and summary.startswith("5 documents stored (5 replaced), 5 unchanged, 0 skipped")
    stored = documents(db_path)
    assert all(stored[f"{log}#part-{n}"][1].startswith("New") for n in range(2, 8))


def test_a_long_file_interrupted_keeps_the_parts_stored_and_a_run_again_goes_on_at_the_next(notes, db_path,
                                                                                           monkeypatch, capsys):
    """A file split into parts that one call takes was stored in one transaction: Ctrl-C at its last part lost all
    of it (minutes of embedding, for a big note), and a run again began from its first part."""
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    monkeypatch.setattr(model, "MAX_DOCUMENT_CHARS", 300)  # 7 parts; one call (20,000,000 characters) takes them
    (notes / "log.txt").write_text(_paragraphs("Engine", 20), encoding="utf-8")
    log = (notes / "log.txt").resolve().as_posix()
    real = SentenceTransformersEmbedder.embed_batch

    def embed_batch(self, texts):
        if any("Engine paragraph 007" in text for text in texts):  # in part 3
            raise KeyboardInterrupt
        return real(self, texts)

    with pytest.MonkeyPatch.context() as interrupted:
        interrupted.setattr(SentenceTransformersEmbedder, "embed_batch", embed_batch)
        code, summary = ingest(db_path, "notes")
    assert code == 130
    assert summary.startswith("4 documents stored, 0 unchanged, 0 skipped, ")  # ada, babbage, parts 1 and 2
    err = capsys.readouterr().err
    assert (f"duckgraph: partly stored {log}: parts 1-2 of 7 hold its new text; part 3 could not be stored "
            "(KeyboardInterrupt)") in err
    assert err.endswith("duckgraph: ingest interrupted at file 3 of 4, part 3 of 7: what is counted above is stored: "
                        "run it again to store the rest (stored files are left as they are)\n")
    assert {log, f"{log}#part-2"} <= set(documents(db_path)) and f"{log}#part-3" not in documents(db_path)

    code, summary = ingest(db_path, "notes")  # parts 1 and 2 are not embedded again
    assert code == 0 and summary.startswith("6 documents stored, 4 unchanged, 0 skipped, 6 passages")
    stored = documents(db_path)
    assert "".join(stored[p][1] for p in [log, *(f"{log}#part-{n}" for n in range(2, 8))]) == _paragraphs("Engine",
                                                                                                         20)


def test_an_error_that_stops_ingest_comes_after_what_was_stored_before_it(notes, db_path, monkeypatch, capsys):
    for n in range(25):  # two batches of files: 1-20, 21-28
        (notes / f"n{n:02d}.md").write_text(f"Note {n}: Ada Lovelace item {n}.\n", encoding="utf-8")
    _failing_on(monkeypatch, "Note 22:")

    code, summary = ingest(db_path, "notes")
    assert code == 1
    assert summary == "20 documents stored, 0 unchanged, 0 skipped, 20 passages"
    assert capsys.readouterr().err.endswith(
        "duckgraph: ingest stopped at files 21-28 of 28 by the error below; what is counted above is stored: run it "
        "again to store the rest (stored files are left as they are)\nduckgraph: the embedder is gone\n")
    assert len(documents(db_path)) == 20


def test_an_error_before_anything_is_stored_is_said_alone(notes, db_path, monkeypatch, capsys):
    _failing_on(monkeypatch, "Lovelace")
    assert ingest(db_path, "notes") == (1, "")
    err = capsys.readouterr().err
    # the file this ingest created holds nothing: it is removed, and that is said on the same line
    assert err.endswith("ingest: reading files [####################..........] 2/3\nduckgraph: the embedder is gone; "
                        f"{db_path} was not created\n")
    assert not db_path.exists()


def test_a_file_whose_parts_no_call_takes_is_skipped_not_split(notes, db_path, monkeypatch, capsys):
    monkeypatch.setattr(model, "MAX_DOCUMENT_CHARS", 300)
    monkeypatch.setattr(ingest_module, "MAX_TOTAL_DOCUMENT_CHARS", 250)
    (notes / "log.txt").write_text(_paragraphs("Engine", 20), encoding="utf-8")
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 1 skipped, 3 passages")
    assert "the limit is 250" in capsys.readouterr().err


def test_a_name_that_cannot_be_a_document_id_is_skipped_with_why(notes, db_path, capsys):
    root = notes.resolve()
    with open(os.fsencode(root) + b"/caf\xe9.md", "wb") as file:  # a Latin-1 name
        file.write(b"Marie Curie in a file whose name is not UTF-8.")
    (notes / "new\nline.md").write_text("Ada Lovelace in a file with a line break in its name.", encoding="utf-8")
    deep = root / ("d" * 60) / ("e" * 60) / ("f" * 60)
    deep.mkdir(parents=True)
    (deep / "long.md").write_text("Alan Turing, deep down.", encoding="utf-8")
    too_long = len((deep / "long.md").as_posix())
    assert too_long > 200

    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 3 skipped, 3 passages")
    err = capsys.readouterr().err
    assert (f"skipped {root}/caf\\xe9.md: its name is not UTF-8 (byte 0xe9; written in another encoding, e.g. "
            "Latin-1): rename it (e.g. convmv -f latin1 -t utf8 --notest FILE) and ingest it again\n") in err
    assert (f"skipped {root}/new\nline.md: its path holds a control character ('\\n'), which would cut the lines "
            "that show a document's id: rename it and ingest it again\n") in err
    # Said where the path is looked at, with what to do (it was pydantic's "id: may have at most 200 characters").
    assert (f"skipped {deep}/long.md: its path is {too_long} characters long, and a document's id (the file's "
            "absolute path) may have at most 200: give it a shorter name, or move it to a folder with a shorter path, "
            "and ingest it again\n") in err
    assert "pydantic" not in err
    assert sorted(Path(d).name for d in documents(db_path)) == ["ada.md", "babbage.txt", "turing.md"]


def test_a_file_given_by_name_that_cannot_be_a_document_id_is_skipped(notes, db_path, capsys):
    (notes / "tab\there.md").write_text("Grace Hopper.", encoding="utf-8")
    code, summary = ingest(db_path, str(notes / "tab\there.md"))
    assert (code, summary) == (0, "0 documents stored, 0 unchanged, 1 skipped, 0 passages")
    assert "its path holds a control character ('\\t')" in capsys.readouterr().err


def test_a_file_whose_name_holds_a_line_separator_is_skipped_with_why(notes, db_path, capsys):
    # U+2028 and U+2029 are no control characters, but a reader of the text breaks the line there: the file was
    # stored, and search's "[id#n]" line was cut in two.
    root = notes.resolve()
    (notes / "line\u2028sep.md").write_text("Ada Lovelace in a file with a line separator in its name.",
                                            encoding="utf-8")
    (notes / "para\u2029sep.md").write_text("Ada Lovelace again.", encoding="utf-8")

    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 2 skipped, 3 passages")
    err = capsys.readouterr().err
    for name, separator in (("line", "\u2028"), ("para", "\u2029")):
        assert (f"skipped {root}/{name}{separator}sep.md: its path holds a line or paragraph separator "
                f"({separator!r}), which would cut the lines that show a document's id: rename it and ingest it "
                "again\n") in err
    assert sorted(Path(d).name for d in documents(db_path)) == ["ada.md", "babbage.txt", "turing.md"]
