"""EPUB through EbookLib: the chapters in reading order, their XHTML headings as Markdown headings (a book's
chapters hold no navigation to remove, so they are read whole with lxml rather than trafilatura)."""

from __future__ import annotations

import io
from typing import Any

from duckgraph.plugins.converters.support import Heading, from_blocks, reading, require
from duckgraph.ports.converter import ConvertedDocument, DocumentConverter

_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = {"p", "li", "pre", "blockquote", "dt", "dd", "td", "th", "figcaption", *_HEADINGS}


class EpubConverter(DocumentConverter):
    id = "epub"
    suffixes = (".epub",)
    media_types = ("application/epub+zip",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        ebooklib, html = require("ebooklib", "EPUB"), require("lxml.html", "EPUB")
        with reading("EPUB", "ebooklib.epub") as epub:
            book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": True})
        blocks: list[str | Heading] = []
        for item_id, _ in book.spine:
            item = book.get_item_with_id(item_id)
            if item is not None and item.get_type() == ebooklib.ITEM_DOCUMENT and (content := item.get_content()):
                blocks += _blocks(html.fromstring(content))
        titles, dates = book.get_metadata("DC", "title"), book.get_metadata("DC", "date")
        return from_blocks(blocks, titles[0][0] if titles else "", dates[0][0].strip() if dates else None)


def _blocks(root: Any) -> list[str | Heading]:
    """The text blocks of a chapter: its headings, and each innermost block element's text."""
    found = []
    for element in root.iter(*_BLOCKS):
        if element.tag not in _HEADINGS and any(child.tag in _BLOCKS for child in element.iterdescendants()):
            continue  # its inner blocks are read on their own
        text = " ".join(element.text_content().split())
        if text:
            found.append(Heading(_HEADINGS[element.tag], text) if element.tag in _HEADINGS else text)
    return found
