"""The converter port: a file's bytes in, its text out as Markdown, whose `#` headings become passage boundaries
and each passage's section ("Installation > Linux")."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from duckgraph.ports.errors import DuckgraphError

#: What the built-in converters of PDF, HTML, DOCX, PPTX and EPUB need.
DOCUMENTS_EXTRA = "pip install 'duckgraph[documents]'"


class ConversionError(DuckgraphError):
    """A file that cannot be turned into text: damaged, encrypted, or (a scanned PDF) holding no text at all."""


class MissingExtraError(ConversionError):
    """The library a format needs is not installed; the message says what to install."""


@dataclass(slots=True)
class ConvertedDocument:
    #: The text as Markdown: lines starting with `#` to `######` are headings.
    text: str
    title: str = ""
    #: When the document says it was written or published (ISO 8601), else None.
    time: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


class DocumentConverter(ABC):
    """Turns files of some formats into text. Registered as a class, built without arguments; constructing one
    must be cheap: import its libraries in `convert` and raise MissingExtraError when they are missing."""

    #: File name endings it reads, a tuple, each lower case with its leading dot: (".pdf",); several parts are
    #: allowed (".todo.txt"), the longest suffix a name ends with picking its converter.
    suffixes: tuple[str, ...] = ()
    #: Media types it reads when a URL answers with them: ("application/pdf",).
    media_types: tuple[str, ...] = ()

    @abstractmethod
    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        """The text of `data`: a file, `name` being its absolute path, or a page, `name` being its URL (so not a
        title: `PurePath(name).stem` is one). Raise ConversionError saying why there is none; any other exception,
        or a result that is not a ConvertedDocument, skips the file too, reported as this converter's failure."""
