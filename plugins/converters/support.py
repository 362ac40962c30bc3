"""What the built-in converters share: importing their library, reading a file with it, and dates as ISO 8601."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from types import ModuleType
from typing import NamedTuple

from duckgraph.ports.converter import DOCUMENTS_EXTRA, ConversionError, ConvertedDocument, MissingExtraError

#: A line that Markdown (and so the chunker's sections) reads as a heading (or a code fence), up to its marker.
_HEADING_MARK = r"#{1,6}(?:[ \t]|$)"
_STRUCTURE = re.compile(rf"^( {{0,3}})(?={_HEADING_MARK}|```|~~~)")
_HEADING_LINE = re.compile(rf"^( {{0,3}})(?={_HEADING_MARK})")
_PDF_DATE = re.compile(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(Z|[+-]\d{2}'?\d{2}'?)?")


def require(module: str, format_name: str) -> ModuleType:
    """`module`, imported; MissingExtraError naming the install command when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # The ImportError's own text: a library may be installed and still miss one of its dependencies.
        raise MissingExtraError(f"reading {format_name} needs the documents extra ({module} cannot be imported: "
                                f"{exc}): {DOCUMENTS_EXTRA}") from exc


@contextmanager
def reading(format_name: str, module: str) -> Iterator[ModuleType]:
    """`module` (see `require`) for opening a file of `format_name` in the block; what the library raises there
    becomes a ConversionError naming the file's format (libraries raise many unrelated types for a damaged, locked
    or mislabelled file)."""
    library = require(module, format_name)
    try:
        yield library
    except ConversionError:
        raise
    except Exception as exc:
        raise ConversionError(f"not a readable {format_name} file ({type(exc).__name__}: {exc})") from exc


class Heading(NamedTuple):
    """A heading block: its level (1-6) and its text."""

    level: int
    text: str


def markdown(blocks: Iterable[str | Heading]) -> str:
    """Blocks as Markdown, a blank line between them: a Heading as a `#` line, and a text block with each line
    Markdown reads as a heading or code fence escaped with a backslash (`\\# of open bugs`, as trafilatura does):
    such a line is text of the document, and read as structure its words would name a section instead of being
    in a passage (or a fence would hide the headings after it)."""
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * min(max(block.level, 1), 6) + " " + " ".join(block.text.split()))  # one line
        else:
            out.append("\n".join(escaped(line) for line in block.splitlines()))
    return "\n\n".join(out)


def escaped(line: str, *, fences: bool = True) -> str:
    """`line` with a backslash before its start when Markdown reads it as a heading (or, with `fences`, a code
    fence); unchanged otherwise."""
    return (_STRUCTURE if fences else _HEADING_LINE).sub(r"\1\\", line, count=1)


def from_blocks(blocks: list[str | Heading], title: str, time: str | None) -> ConvertedDocument:
    """Text blocks and headings as one document (see `markdown`); ConversionError when only headings are there."""
    if all(isinstance(block, Heading) for block in blocks):
        raise ConversionError("no text in it")
    return ConvertedDocument(text=markdown(blocks), title=title.strip(), time=time)


def iso(value: datetime | None) -> str | None:
    """A datetime as ISO 8601 (UTC when it has a zone), None for None."""
    if value is None:
        return None
    return value.astimezone(timezone.utc).isoformat() if value.tzinfo else value.isoformat()


def pdf_date(text: str) -> str | None:
    """A PDF date string (D:YYYYMMDDHHmmSSOHH'mm') as ISO 8601; None when it is not one."""
    match = _PDF_DATE.match(text.strip())
    if not match:
        return None
    year, month, day, hour, minute, second, zone = match.groups()
    try:
        moment = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
                          int(second or 0))
        if zone:
            digits = zone.replace("'", "")
            offset = timedelta(0) if zone == "Z" else (
                (1 if digits[0] == "+" else -1) * timedelta(hours=int(digits[1:3]), minutes=int(digits[3:5])))
            moment = moment.replace(tzinfo=timezone(offset))
    except ValueError:
        return None
    return iso(moment)
