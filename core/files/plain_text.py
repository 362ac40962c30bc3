"""A file that no converter reads, read as text: its bytes as UTF-8 text, or why they are none, with what to do.

Text holds no NUL byte: bytes with one are binary data (an image, an archive), or text in UTF-16 or UTF-32, whose
Latin letters are each followed by a NUL. Without a byte order mark such text is valid UTF-8 too, and would be
stored as "M\\x00e\\x00e\\x00t..." that no search finds. So it is refused, saying which it is: for text, the
`iconv` command that converts it in place (the file keeps its path, so its document keeps its id); for binary
data, that no converter reads it, never to read it as text. A file that is not UTF-8 without a NUL is most often
Windows-1252 or Latin-1, as Western European text written on Windows is: the command converts from that."""

from __future__ import annotations

import codecs
import shlex
from pathlib import Path

from duckgraph.ports import DuckgraphError

#: What is read of a file in a folder to tell text from binary data (`binary`).
HEAD = 8192
#: The byte order marks of the encodings duckgraph does not read, each with the name iconv takes for it (UTF-32's
#: before UTF-16's, which starts it).
_MARKS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
          (codecs.BOM_UTF16_BE, "UTF-16"))


def text_of(data: bytes, path: Path, *, text_suffix: bool) -> str:
    """The file's text (line breaks made "\\n", as Python's text files make them); a DuckgraphError that says why it
    is none and what to do. `text_suffix`: the file's suffix is one of text (`.txt`, `.md`); binary data of another
    suffix is told that a plugin can add a converter for it."""
    if unread := _unread_encoding(data[:HEAD]):
        encoding, marked = unread
        raise DuckgraphError(f"it is {encoding} text ({'with' if marked else 'without'} a byte order mark), and "
                             f"duckgraph reads {_kind(path)} as UTF-8: convert it in its folder "
                             f"({_iconv(encoding, path)}) and ingest it again")
    if b"\0" in data:
        advice = "" if text_suffix else f"; no converter reads {_kind(path)} (a plugin can add one: docs/plugins.md)"
        raise DuckgraphError(f"it holds NUL bytes, so it is no text but binary data (an image, an archive...){advice}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{data[exc.start]:02x} at {exc.start}"
        try:
            data.decode("cp1252")
        except UnicodeDecodeError:  # not Western European: its encoding is for whoever knows it to say
            raise DuckgraphError(f"duckgraph reads {_kind(path)} as UTF-8 text, and this one is not ({where}): "
                                 f"convert it from its encoding in its folder ({_iconv('ENCODING', path)}; iconv -l "
                                 "lists the encodings)") from exc
        raise DuckgraphError(f"duckgraph reads {_kind(path)} as UTF-8 text, and this one is not ({where}): if it is "
                             f"Windows-1252 or Latin-1 (Western European), convert it in its folder "
                             f"({_iconv('WINDOWS-1252', path)}) and ingest it again") from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def binary(head: bytes) -> bool:
    """Whether the first bytes of a file are binary data, which reading as text does not help: a NUL byte, and not
    UTF-16 or UTF-32 text (see the module)."""
    return b"\0" in head and _unread_encoding(head) is None


def _unread_encoding(head: bytes) -> tuple[str, bool] | None:
    """The encoding of a text that starts with `head`, when it is one duckgraph does not read, and whether a byte
    order mark says it: UTF-16 or UTF-32 by its mark, or UTF-16 without one, whose NUL bytes fall on every other
    byte and which reads as text."""
    for mark, encoding in _MARKS:
        if head.startswith(mark):
            return encoding, True
    if b"\0" not in head:
        return None
    # A Latin letter's high byte is the NUL: the second of two in little-endian order, the first in big-endian.
    encoding = "UTF-16LE" if head[1::2].count(0) > head[0::2].count(0) else "UTF-16BE"
    try:  # not final: a pair of surrogates may be cut at the end
        text = codecs.getincrementaldecoder(encoding)().decode(head[:len(head) // 2 * 2])
    except UnicodeDecodeError:
        return None
    return (encoding, False) if text and all(c.isprintable() or c in "\t\n\r\f" for c in text) else None


def _kind(path: Path) -> str:
    suffix = path.suffix.lower()
    return f"{suffix} files" if suffix else "files without a suffix"


def _iconv(encoding: str, path: Path) -> str:
    """The shell command that converts the file to UTF-8 in place, run in its folder: iconv, into a file beside it
    that then replaces it (only if iconv read it all). Its name is said once, in a variable, so that a long one
    leaves the reason short enough to be shown whole."""
    name = path.name if not path.name.startswith("-") else f"./{path.name}"  # else iconv takes it for an option
    return f'f={shlex.quote(name)}; iconv -f {encoding} -t UTF-8 "$f" > "$f.utf8" && mv "$f.utf8" "$f"'
