"""Text for a terminal: what the knowledge base holds is printed with its control characters made visible.

Stored texts come from anywhere (documents, imports, models), and a terminal obeys the escape sequences in what it
prints: a stored OSC 52 writes the clipboard, others clear the screen or retitle the window. So text bound for a
terminal shows every control character (C0 but tab and line feed, DEL, C1) and every bidirectional control as an
escape such as \\x1b or \\u202e. Output to a file or a pipe is left as it is (it is data, not a display). JSON
escapes C0 controls itself; on a terminal the rest (DEL, C1, bidirectional controls) become JSON's \\u escapes, so
it stays JSON that reads back the same.
"""

from __future__ import annotations

import re
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
