"""The command line's standard streams: text for a terminal (what the knowledge base holds is printed with its
control characters made visible), the progress bar, and JSON Lines on stdin/stdout in UTF-8 whatever the locale.

Stored texts come from anywhere (documents, imports, models), and a terminal obeys the escape sequences in what it
prints: a stored OSC 52 writes the clipboard, others clear the screen or retitle the window. So text bound for a
terminal shows every control character (C0 but tab and line feed, DEL, C1) and every bidirectional control as an
escape such as \\x1b or \\u202e. Output to a file or a pipe is left as it is (it is data, not a display). JSON
escapes C0 controls itself; on a terminal the rest (DEL, C1, bidirectional controls) become JSON's \\u escapes, so
it stays JSON that reads back the same.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import shutil
import sys
import unicodedata
from json import dumps as json_string  # `json` is a parameter name here
from typing import Any, TextIO

# Bidirectional controls reorder what is shown (a "Trojan Source" line reads differently from what it holds).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str, *, json: bool = False) -> str:
    """`text` with its control characters as visible escapes: ESC as \\x1b, RLO as \\u202e; with `json` (text that is
    JSON, whose strings are the only place such characters can be), all as \\u escapes."""
    if json:
        return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


def for_stream(text: str, stream: TextIO, *, json: bool = False) -> str:
    """`text` as it should be written to `stream`: escaped when `stream` is a terminal, and such that the stream's
    encoding can write it (see `encodable`)."""
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        interactive = False
    return encodable(escape_controls(text, json=json) if interactive else text, stream, json=json)


_NON_ASCII = re.compile("[^\x00-\x7f]")


def encodable(text: str, stream: TextIO, *, json: bool = False) -> str:
    """`text` as `stream`'s encoding can write it, where a character it lacks would raise UnicodeEncodeError half
    way through the output (a stored "日本" on cp1252: PYTHONIOENCODING, a redirected Windows console). JSON on a
    stream that is not UTF-8 becomes ASCII, its other characters \\u escapes, as `json.dumps` writes it: the same
    JSON whatever the encoding, where raw "é" would reach a UTF-8 reader as a cp1252 byte. Other text keeps what
    the encoding has and shows the rest as Python's escapes (\\u65e5), as Python's stderr does."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):  # not a real file (a StringIO): it takes any str
        return text
    try:
        if codecs.lookup(encoding).name == "utf-8":
            return text
    except LookupError:
        return text  # the stream could not have been opened with it: nothing to match
    if json:
        return _NON_ASCII.sub(lambda m: json_string(m.group())[1:-1], text)  # json.dumps' own \u escapes
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)


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


class ProgressBar:
    """A one-line progress bar on stderr (plain lines when stderr is not a terminal)."""

    def __init__(self, width: int = 30) -> None:
        self.width = width
        self.label = ""
        self._interactive = sys.stderr.isatty()
        self._last: tuple[str, int] | None = None
        self._shown = 0  # the columns the line on the terminal takes now

    def update(self, done: int, total: int, message: str) -> None:
        filled = self.width * done // max(total, 1)
        bar = f" [{'#' * filled}{'.' * (self.width - filled)}] "
        if self._interactive:
            # One column short of the width: a line that fills the last one wraps on some terminals, and each \r
            # then rewrites a new row.
            width = columns(sys.stderr) - 1
            line = self._fitted(f"{done}/{total}", bar, message, width)
            shown = display_width(line)
            # \r only moves back: spaces blank the rest of a longer line before ("21/50" over "27/50" left
            # "21/5027/50"). Spaces rather than an escape sequence, which not every console obeys.
            print("\r" + line + " " * max(0, min(self._shown, width) - shown), end="", file=sys.stderr, flush=True)
            self._shown = shown
            ProgressBar._unfinished = self
        elif self._last != (message, 10 * done // max(total, 1)):
            line = f"{self.label}: {message}{bar}{done}/{total}"
            print(line, file=sys.stderr, flush=True)
        self._last = (message, 10 * done // max(total, 1))

    def _fitted(self, count: str, bar: str, message: str, width: int) -> str:
        """The terminal line, at most `width` columns: the message is cut first, then the bar left out, then the
        label cut; the count goes last."""
        message = escape_controls(message)  # a file name or page title: its escape sequences would be obeyed
        head = f"{self.label}: "
        for middle in (bar, " "):
            room = width - display_width(head + middle + count)
            if room >= min(12, display_width(message)):
                return head + fit(message, room) + middle + count
        room = width - len(count) - 1
        return fit(self.label, room) + " " + count if room >= 4 else fit(count, width)

    def finish(self) -> None:
        if self._interactive and self._last is not None:
            print(file=sys.stderr)
        self._shown = 0
        if ProgressBar._unfinished is self:
            ProgressBar._unfinished = None

    #: The bar whose line the terminal shows without its line feed yet (see `end_line`).
    _unfinished: ProgressBar | None = None

    @classmethod
    def end_line(cls) -> None:
        """End the line of a bar left unfinished (the command was interrupted), so that what follows is not
        written after its count."""
        if cls._unfinished is not None:
            cls._unfinished.finish()


class _Utf8Writer:
    """Text written as UTF-8 bytes to a binary stream."""

    def __init__(self, binary: Any) -> None:
        self.binary = binary

    def write(self, text: str) -> int:
        self.binary.write(text.encode("utf-8"))
        return len(text)


def utf8_stdout() -> Any:
    """Standard output for JSON Lines: UTF-8 whatever the locale's encoding (PYTHONIOENCODING, cp1252 on a
    redirected Windows console), as `-o FILE` writes them, and "\n" line ends; not a file that half fails on the
    first character that encoding lacks, or that a reader takes for UTF-8 and gets wrong."""
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # a text stream a caller of main() put there: it takes text, there are no bytes to choose
        return sys.stdout
    sys.stdout.flush()  # anything printed before stays before
    return _Utf8Writer(binary)


def utf8_stdin() -> Any:
    """Standard input read as UTF-8 (universal newlines), as `import FILE` reads a file, whatever the locale's
    encoding: a latin-1 locale would otherwise read "Müller" as "MÃ¼ller" and store it. Detach it when done, so
    that sys.stdin's own bytes stay open."""
    binary = getattr(sys.stdin, "buffer", None)
    return io.TextIOWrapper(binary, encoding="utf-8") if binary is not None else sys.stdin
