"""Text for a terminal: what the knowledge base holds is printed with its control characters made visible.

Stored texts come from anywhere (documents, imports, models), and a terminal obeys the escape sequences in what it
prints: a stored OSC 52 writes the clipboard, others clear the screen or retitle the window. So text bound for a
terminal shows every control character (C0 but tab and line feed, DEL, C1) and every bidirectional control as an
escape such as \\x1b or \\u202e. Output to a file or a pipe is left as it is (it is data, not a display). JSON
escapes C0 controls itself; on a terminal the rest (DEL, C1, bidirectional controls) become JSON's \\u escapes, so
it stays JSON that reads back the same.
"""

from __future__ import annotations

import os
import re
import shutil
import unicodedata
from typing import TextIO

# Bidirectional controls reorder what is shown (a "Trojan Source" line reads differently from what it holds).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str, *, json: bool = False) -> str:
    """`text` with its control characters as visible escapes: ESC as \\x1b, RLO as \\u202e; with `json` (text that is
    JSON, whose strings are the only place such characters can be), all as \\u escapes."""
    if json:
        return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


def for_stream(text: str, stream: TextIO, *, json: bool = False) -> str:
    """`text` as it should be written to `stream`: escaped when `stream` is a terminal."""
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        interactive = False
    return escape_controls(text, json=json) if interactive else text


def columns(stream: TextIO) -> int:
    """The width of the terminal `stream` writes to, in columns: COLUMNS when set, else the terminal's own (stderr's
    terminal, even when stdout is redirected), else shutil's fallback (80)."""
    if os.environ.get("COLUMNS", "").isdigit() and int(os.environ["COLUMNS"]) > 0:
        return int(os.environ["COLUMNS"])
    try:
        return os.get_terminal_size(stream.fileno()).columns or shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):  # not a real file, or no terminal behind it
        return shutil.get_terminal_size().columns


def display_width(text: str) -> int:
    """How many columns `text` (no control characters) takes on a terminal: wide East Asian characters take two,
    combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def fit(text: str, width: int) -> str:
    """`text` cut to at most `width` columns, ending in "..." when cut (ASCII: any encoding shows it as 3 columns)."""
    if display_width(text) <= width:
        return text
    if width < 4:
        return "." * max(width, 0)
    room, kept = width - 3, []
    for char in text:
        room -= display_width(char)
        if room < 0:
            break
        kept.append(char)
    return "".join(kept) + "..."
