"""`duckgraph ingest` on what is no plain UTF-8 note (probe 39 D): links in a loop, named pipes, text in UTF-16 or
Windows-1252, binary files, and CSV, TSV and log files. Real files in tmp_path (a real link loop, a real fifo),
the real DuckDB file and the real default model.

A link loop stopped the whole ingest with a traceback; a pipe given by name "did not exist", and in a folder was
passed over without a word; given by name, a pipe or a link loop stopped the other paths given too (probe 39 V);
UTF-16 without a byte order mark, and text with NUL bytes, were stored as "M\\x00e\\x00e\\x00t..."; a photo was
advised to be read as text; a CSV was stored as prose, so that its rows after the first passage said no column's
name, and search folded its rows onto one line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.integration import test_ingest_folder
from tests.integration.test_ingest_folder import command, documents, ingest

notes = test_ingest_folder.notes  # the folder of three notes, its fixture

pytestmark = pytest.mark.model


def test_a_link_loop_is_skipped_with_why_and_the_rest_is_stored(notes, db_path, capsys):
    (notes / "a.md").symlink_to("b.md")
    (notes / "b.md").symlink_to("a.md")
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 2 skipped, 3 passages")
    err = capsys.readouterr().err
    for name in ("a.md", "b.md"):
        assert (f"skipped {notes.resolve() / name}: a symbolic link in a loop (it leads back to itself through other "
                "links), so it leads to no file: fix or remove the link\n") in err
    assert sorted(Path(d).name for d in documents(db_path)) == ["ada.md", "babbage.txt", "turing.md"]

    # Given by name, it is skipped saying so, not "does not exist".
    assert ingest(db_path, "notes/a.md") == (0, "0 documents stored, 0 unchanged, 1 skipped, 0 passages")
    assert f"skipped {notes.resolve() / 'a.md'}: a symbolic link in a loop" in capsys.readouterr().err


def test_a_named_pipe_is_said_to_be_no_regular_file(notes, db_path, capsys):
    os.mkfifo(notes / "pipe.txt")
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 1 skipped, 3 passages")
    assert (f"skipped {notes.resolve() / 'pipe.txt'}: not a regular file but a named pipe: only files and folders "
            "are read\n") in capsys.readouterr().err

    assert ingest(db_path, "notes/pipe.txt") == (0, "0 documents stored, 0 unchanged, 1 skipped, 0 passages")
    assert (f"skipped {notes.resolve() / 'pipe.txt'}: not a regular file but a named pipe: only files and folders "
            "are read\n") in capsys.readouterr().err


def test_paths_given_by_name_that_cannot_be_read_are_skipped_and_the_others_stored(notes, db_path, capsys):
    # Probe 39 V: `ingest contacts.csv pipe` stored nothing, not even the CSV, and exited 1.
    (notes / "contacts.csv").write_text("name,city\nAda,London\nAlan,Wilmslow\n", encoding="utf-8")
    os.mkfifo(notes / "pipe")
    (notes / "loop1").symlink_to("loop2")
    (notes / "loop2").symlink_to("loop1")
    (notes / "moved.md").symlink_to("gone.md")
    code, summary = ingest(db_path, "notes/contacts.csv", "notes/pipe", "notes/loop1", "notes/moved.md", "notes/ada.md")
    assert (code, summary) == (0, "2 documents stored, 0 unchanged, 3 skipped, 2 passages")
    err = capsys.readouterr().err
    root = notes.resolve()
    assert f"skipped {root / 'pipe'}: not a regular file but a named pipe: only files and folders are read\n" in err
    assert f"skipped {root / 'loop1'}: a symbolic link in a loop (it leads back to itself through other links)" in err
    assert (f"skipped {root / 'moved.md'}: a symbolic link to gone.md, which does not exist (moved, deleted, or on a "
            "drive not mounted): fix or remove the link\n") in err
    assert sorted(Path(d).name for d in documents(db_path)) == ["ada.md", "contacts.csv"]

    # A path that is not there at all is a typo: refused before anything is read, the other paths too.
    assert ingest(db_path, "notes/babbage.txt", "notes/nothere.md")[0] == 1
    assert "duckgraph: notes/nothere.md does not exist: check the path; nothing was read\n" in capsys.readouterr().err
    assert sorted(Path(d).name for d in documents(db_path)) == ["ada.md", "contacts.csv"]


def _advised(err: str, path: Path) -> str:
    """The shell command the reason `path` was skipped for advises."""
    line = next(line for line in err.splitlines() if line.startswith(f"duckgraph: skipped {path}: "))
    return line.split("convert it in its folder (", 1)[1].rsplit(") and ingest it again", 1)[0]


@pytest.mark.parametrize(("name", "data", "said"), [
    ("meeting.txt", "Meeting room code is 7788.\n".encode("utf-16-le"),
     "it is UTF-16LE text (without a byte order mark), and duckgraph reads .txt files as UTF-8"),
    ("notepad note.txt", "Meeting room code is 7788.\n".encode("utf-16"),
     "it is UTF-16 text (with a byte order mark), and duckgraph reads .txt files as UTF-8"),
    ("café.md", "Meeting room code is 7788 \u2013 Crème brûlée.\n".encode("cp1252"),
     "duckgraph reads .md files as UTF-8 text, and this one is not (byte 0x96 at 26): if it is Windows-1252 or "
     "Latin-1 (Western European)"),
])
def test_text_in_another_encoding_is_skipped_with_the_command_that_converts_it(notes, db_path, capsys, name, data,
                                                                               said):
    (notes / name).write_bytes(data)
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 1 skipped, 3 passages")
    err = capsys.readouterr().err
    path = notes.resolve() / name
    assert f"skipped {path}: {said}" in err
    # The command runs as it is given, in the file's folder, and converts the file where it is.
    subprocess.run(["sh", "-c", _advised(err, path)], cwd=notes, check=True)
    assert ingest(db_path, "notes") == (0, "1 documents stored, 3 unchanged, 0 skipped, 1 passages")
    assert "Meeting room code is 7788" in documents(db_path)[path.as_posix()][1]


def test_text_with_nul_bytes_is_no_text(notes, db_path, capsys):
    (notes / "nul.txt").write_bytes(b"Hello\x00\x00world\x00 the wifi password is tulip42\x00\x01\x02\x03")
    assert ingest(db_path, "notes") == (0, "3 documents stored, 0 unchanged, 1 skipped, 3 passages")
    assert (f"skipped {notes.resolve() / 'nul.txt'}: it holds NUL bytes, so it is no text but binary data (an image, "
            "an archive...)\n") in capsys.readouterr().err
    assert not any("\x00" in text for _, text, _ in documents(db_path).values())


PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108020000009077053e")


def test_a_binary_file_is_never_advised_to_be_read_as_text(notes, db_path, capsys):
    (notes / "photo.png").write_bytes(PNG)
    (notes / "guide.rst").write_text("Install\n=======\nRun make.\n", encoding="utf-8")
    assert ingest(db_path, "notes")[0] == 0
    err = capsys.readouterr().err
    root = notes.resolve()
    assert ("skipped 1 file with the suffix .png, which no converter reads (a plugin can add one: docs/plugins.md): "
            f"{root / 'photo.png'}\n") in err
    # A text file of a suffix no converter reads may still be read as text, by name.
    assert ("skipped 1 file with the suffix .rst, which no converter reads (a plugin can add one: docs/plugins.md; to "
            f"read a file as text, give it by name: duckgraph ingest FILE): {root / 'guide.rst'}\n") in err

    assert ingest(db_path, "notes/photo.png") == (0, "0 documents stored, 0 unchanged, 1 skipped, 0 passages")
    assert (f"skipped {root / 'photo.png'}: it holds NUL bytes, so it is no text but binary data (an image, an "
            "archive...); no converter reads .png files (a plugin can add one: docs/plugins.md)\n"
            ) in capsys.readouterr().err


HOTELS = "| Hotels | 8000 | 9500 | 14250 | 7000 |"
HEADER = "| category | Q1 | Q2 | Q3 | Q4 |\n| --- | --- | --- | --- | --- |\n"


def _budget() -> str:
    """A budget of 40 rows, the hotels' 35th: past the first passage."""
    rows = [f"{name},{1000 + n},{2000 + n},{3000 + n},{4000 + n}" for n, name in enumerate(
        ["Salaries", "Office rent", "Electricity", "Water", "Internet", "Phones", "Laptops", "Monitors", "Printers",
         "Paper", "Coffee", "Snacks", "Cleaning", "Security", "Insurance", "Legal fees", "Accounting", "Consulting",
         "Recruiting", "Training", "Conferences", "Books", "Software licenses", "Cloud hosting", "Domain names",
         "Advertising", "Trade shows", "Sponsorships", "Gifts", "Team events", "Furniture", "Repairs", "Parking",
         "Taxis"])]
    return "\n".join(["category,Q1,Q2,Q3,Q4", *rows, "Hotels,8000,9500,14250,7000", "Flights,5100,5200,5300,5400",
                      "Meals,900,950,990,1020", "Postage,120,130,140,150", "Couriers,300,310,320,330",
                      "Bank fees,75,80,85,90"]) + "\n"


def test_a_csv_row_past_the_first_passage_is_found_under_its_header(notes, db_path):
    (notes / "budget.csv").write_text(_budget(), encoding="utf-8")
    budget = (notes / "budget.csv").resolve().as_posix()
    assert ingest(db_path, "notes/budget.csv")[0] == 0
    title, text, _ = documents(db_path)[budget]
    assert title == "budget" and text.startswith(HEADER) and f"\n{HOTELS}\n" in text
    assert text.index(HOTELS) > 1_000  # past the first passage

    code, answer = command(db_path, "search", "How much was budgeted for hotels in Q3?", "--max-passages", "1")
    passage = answer.split("Passages:\n", 1)[1].split("\nMore passages", 1)[0]
    assert code == 0 and passage.startswith(f"[{budget}#")
    # Shown a row a line (after render's CODE_LINE), below the header that names its columns.
    rows = [line.removeprefix("  | ") for line in passage.splitlines()[1:]]
    assert rows[:2] == HEADER.splitlines() and HOTELS in rows
    shown = command(db_path, "documents", "show", budget)[1]
    assert HEADER.splitlines()[0] in shown and HOTELS in shown


def test_csv_dialects_tsv_and_log_files_keep_their_rows_and_lines(notes, db_path):
    (notes / "prices.csv").write_text('name;price;note\nWidget;1,50;"red; small"\n"Gadget ""Pro""";12,00;"two\n'
                                      'lines | one bar"\n', encoding="utf-8")
    (notes / "people.tsv").write_text("name\tphone\nMaria Garcia\t+34 612 345 678\n", encoding="utf-8")
    (notes / "server.log").write_text("10:00 INFO started\n10:01 ERROR disk /dev/sda1 full on host web-07\n",
                                      encoding="utf-8")
    assert ingest(db_path, "notes/prices.csv", "notes/people.tsv", "notes/server.log")[0] == 0
    stored = documents(db_path)
    root = notes.resolve().as_posix()
    # The semicolon sniffed (the comma is the decimal mark), quoted cells whole, a bar escaped, a line break a space.
    assert stored[f"{root}/prices.csv"][1] == (
        "| name | price | note |\n| --- | --- | --- |\n| Widget | 1,50 | red; small |\n"
        '| Gadget "Pro" | 12,00 | two lines \\| one bar |\n')
    assert stored[f"{root}/people.tsv"][1] == "| name | phone |\n| --- | --- |\n| Maria Garcia | +34 612 345 678 |\n"

    answer = command(db_path, "search", "disk full on host web-07", "--max-passages", "1")[1]
    assert "\n  | 10:00 INFO started\n  | 10:01 ERROR disk /dev/sda1 full on host web-07" in answer


def test_a_csv_or_tsv_document_added_by_id_is_shown_a_row_a_line(real_kb):
    """add_documents stores a text as given: a TSV named by its id was folded onto one line, its cells run together
    ("Maria Garcia +34 612 345 678 Madrid Ana Lopez Ruiz ...")."""
    from duckgraph.core.domain.model import DocumentInput

    tsv = "name\tphone\tcity\nMaria Garcia\t+34 612 345 678\tMadrid\nAna Lopez Ruiz\t+34 699 111 222\tSan Sebastian\n"
    real_kb.add_documents([DocumentInput(id="people.tsv", text=tsv)])
    text = real_kb.search("Maria Garcia phone", max_passages=1).text
    assert "\n  | Maria Garcia\t+34 612 345 678\tMadrid\n  | Ana Lopez Ruiz\t" in text
