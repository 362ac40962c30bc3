"""The progress bar on a terminal (a real pseudo-terminal of a set width): each update rewrites the whole line, so a
shorter line leaves nothing of the longer one before ("21/5027/27" read as 21 of 5027), and fits in the width, so
that \\r rewrites the same row instead of wrapping onto new ones. To a file or a pipe it writes plain lines.

The rows are read back through a small model of a terminal (overwrite at the cursor, \\r to column 0, wrap at the
last column), which is what a user sees."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import unicodedata
from pathlib import Path

import pytest

from duckgraph.core.terminal import ProgressBar
from tests.e2e.test_shared_file import console_script, env  # noqa: F401 (the fixture)


def terminal(columns: int) -> tuple[int, int]:
    """A pseudo-terminal (master, slave) `columns` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return master, slave


def read_all(master: int, process: subprocess.Popen | None = None) -> str:
    """What was written to the terminal, until its writers are gone (EIO) or nothing more comes."""
    data = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30 if process else 0.2)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer closed its end
            break
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8")


def cells(char: str) -> int:
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def screen(text: str, columns: int) -> list[tuple[str, list[str]]]:
    """Each \\r-rewrite of the progress line (the text between two \\r) and the screen's rows after it."""
    rows, row, col, seen = [[]], 0, 0, []
    for part in text.replace("\r\n", "\n").split("\r"):
        for char in part:
            if char == "\n":
                row, col = row + 1, 0
            else:
                width = cells(char)
                if col + width > columns:  # the terminal wraps onto the next row
                    row, col = row + 1, 0
                while len(rows) <= row:
                    rows.append([])
                line = rows[row]
                line.extend(" " * (col + width - len(line)))
                line[col:col + width] = [char] + [""] * (width - 1)  # a wide character takes two cells
                col += width
            while len(rows) <= row:
                rows.append([])
        col = 0
        seen.append((part, ["".join(r).rstrip() for r in rows]))
    return seen


def test_each_update_clears_the_longer_line_before_and_fits_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = terminal(50)
    stream = os.fdopen(slave, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", stream)
    bar = ProgressBar()
    bar.label = "files 1-20 of 50"
    updates = [(27, 50, "embedding passages"), (21, 50, "reading"), (21, 50, ""), (9, 10, "a-long-name-" * 8),
               (10, 10, "東京の資料 \x1b[2J.md")]
    for done, total, message in updates:
        bar.update(done, total, message)
    bar.finish()
    stream.close()
    seen = screen(read_all(master), 50)
    os.close(master)

    rewrites = [(part, rows) for part, rows in seen if part.strip()]
    assert len(rewrites) == len(updates)
    for (part, rows), (done, total, _) in zip(rewrites, updates):
        line = part.rstrip("\n")
        # One row only, shown whole: nothing of the line before is left after it, nothing wrapped.
        assert [r for r in rows if r] == [line.rstrip()], rows
        assert sum(map(cells, line)) <= 49 and line.rstrip().endswith(f"{done}/{total}")
    # Too narrow for the bar: left out, the message and the count whole.
    assert rewrites[1][0].rstrip() == "files 1-20 of 50: reading 21/50"
    assert "..." in rewrites[3][0]
    assert "\x1b" not in rewrites[4][0] and "\\x1b[2J" in rewrites[4][0]  # shown, not obeyed


def test_a_shorter_line_leaves_nothing_of_the_longer_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = terminal(200)
    stream = os.fdopen(slave, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", stream)
    bar = ProgressBar()
    bar.label = "files 1-20 of 50"
    bar.update(27, 50, "embedding passages")
    bar.update(21, 50, "reading")
    stream.close()
    seen = screen(read_all(master), 200)
    os.close(master)
    assert [r for r in seen[-1][1] if r] == [f"files 1-20 of 50: reading [{'#' * 12}{'.' * 18}] 21/50"]


def test_a_narrow_terminal_keeps_the_count_on_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    master, slave = terminal(20)
    stream = os.fdopen(slave, "w", encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", stream)
    bar = ProgressBar()
    bar.label = "files 21-40 of 50"
    for done in range(21, 41):
        bar.update(done, 50, "reading files")
    bar.finish()
    stream.close()
    seen = screen(read_all(master), 20)
    os.close(master)
    final = seen[-1][1]
    assert [r for r in final if r] == ["files 21-4... 40/50"]


def test_ingest_on_a_narrow_terminal_rewrites_one_row(tmp_path: Path, env: dict[str, str]) -> None:
    """The installed command, its stderr a terminal 30 columns wide, ingesting files of names of every length."""
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(25):
        (notes / f"note-{'x' * (i * 3)}{i}.md").write_text(f"# Note {i}\n\nThe linker {i} reads the cache.\n",
                                                             encoding="utf-8")
    master, slave = terminal(30)
    process = subprocess.Popen([console_script(), "ingest", str(notes), "--db", str(tmp_path / "kb.duckdb")],
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    text = read_all(master, process)
    os.close(master)
    assert process.wait(timeout=120) == 0, text
    assert "25 documents stored" in process.stdout.read().decode()
    seen = screen(text, 30)
    progress = [(part, rows) for part, rows in seen if "/" in part and "\n" not in part]
    assert progress, text
    for part, rows in progress:
        assert len(part) <= 29, part
        assert rows[-1] == part.rstrip(), (part, rows[-1])  # the whole row is this update, nothing left before


def test_to_a_file_the_bar_writes_plain_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = (tmp_path / "err.txt").open("w", encoding="utf-8")
    monkeypatch.setattr(sys, "stderr", log)
    bar = ProgressBar()
    bar.label = "files 1-2 of 2"
    bar.update(1, 2, "reading " + "long-name-" * 10)
    bar.update(2, 2, "reading")
    bar.finish()
    log.close()
    assert (tmp_path / "err.txt").read_text(encoding="utf-8") == (
        f"files 1-2 of 2: reading {'long-name-' * 10} [{'#' * 15}{'.' * 15}] 1/2\n"
        f"files 1-2 of 2: reading [{'#' * 30}] 2/2\n")
