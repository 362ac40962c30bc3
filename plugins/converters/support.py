"""What the built-in converters share: importing their library, reading a file with it, and dates as ISO 8601."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from types import ModuleType

from duckgraph.ports.converter import DOCUMENTS_EXTRA, ConversionError, ConvertedDocument, MissingExtraError

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


def from_blocks(blocks: list[str], title: str, time: str | None) -> ConvertedDocument:
    """Text blocks (headings as Markdown `#` lines) as one document; ConversionError when only headings are there."""
    if not any(not block.startswith("#") for block in blocks):
        raise ConversionError("no text in it")
    return ConvertedDocument(text="\n\n".join(blocks), title=title.strip(), time=time)


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
