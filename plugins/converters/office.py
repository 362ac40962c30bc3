"""Word (DOCX) through python-docx and PowerPoint (PPTX) through python-pptx: paragraphs styled as headings (a
slide's title) become Markdown headings, and only they (a body line such as "# of open bugs" is escaped, see
`support.markdown`); the title and creation date come from the document's properties.

A table is read one line per row, its cells joined with " | " (a table nested in a cell: its rows on the lines
after that row's); a slide's grouped shapes are read as the shapes they hold. A DOCX's headers and footers are
left out: they repeat on every page (a company name, "Confidential", a page number) and are no part of its text."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

from duckgraph.plugins.converters.support import Heading, from_blocks, iso, reading
from duckgraph.ports.converter import ConvertedDocument, DocumentConverter


class DocxConverter(DocumentConverter):
    id = "docx"
    suffixes = (".docx",)
    media_types = ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        with reading("DOCX", "docx") as docx:
            document = docx.Document(io.BytesIO(data))
        blocks: list[str | Heading] = []
        title = document.core_properties.title or ""
        for item in document.iter_inner_content():
            if hasattr(item, "rows"):
                blocks += _docx_table(item)
                continue
            text, style = item.text.strip(), (item.style.name if item.style is not None else "")
            if not text:
                continue
            if style == "Title":
                title = title or text
            elif style.startswith("Heading") and style[7:].strip().isdigit():
                blocks.append(Heading(int(style[7:]), text))
            else:
                blocks.append(text)
        return from_blocks(blocks, title, iso(document.core_properties.created))


def _docx_table(table: Any) -> list[str]:
    """A DOCX table's lines (see the module): a cell's paragraphs on its row's line, its tables after it."""
    lines = []
    for row in table.rows:
        cells, nested = [], []
        # A merged cell is the same cell under each column it spans: read once.
        for cell in {id(cell._tc): cell for cell in row.cells}.values():
            words = []
            for item in cell.iter_inner_content():
                if hasattr(item, "rows"):
                    nested += _docx_table(item)
                else:
                    words.append(item.text)
            cells.append(" ".join(words))
        lines += _row(cells) + nested
    return lines


def _row(cells: Iterable[str]) -> list[str]:
    """A table row as one line (each cell's text on one line), none when its cells are all empty."""
    texts = [" ".join(text.split()) for text in cells]
    return [" | ".join(texts)] if any(texts) else []


class PptxConverter(DocumentConverter):
    id = "pptx"
    suffixes = (".pptx",)
    media_types = ("application/vnd.openxmlformats-officedocument.presentationml.presentation",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        with reading("PPTX", "pptx") as pptx:
            deck = pptx.Presentation(io.BytesIO(data))
        blocks: list[str | Heading] = []
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            heading = title_shape.text_frame.text.strip() if title_shape is not None else ""
            blocks.append(Heading(1, heading or f"Slide {number}"))
            blocks += _pptx_shapes(slide.shapes, None if title_shape is None else title_shape.shape_id)
            if slide.has_notes_slide and (notes := slide.notes_slide.notes_text_frame.text.strip()):
                blocks.append(notes)
        return from_blocks(blocks, deck.core_properties.title or "", iso(deck.core_properties.created))


def _pptx_shapes(shapes: Iterable[Any], title_id: int | None) -> Iterator[str]:
    """The text blocks of `shapes` but the title's, in order: a text frame's paragraphs, a table's rows (see the
    module), a group's shapes."""
    for shape in shapes:
        if shape.shape_id == title_id:
            continue
        if hasattr(shape, "shapes"):  # a group
            yield from _pptx_shapes(shape.shapes, title_id)
        elif getattr(shape, "has_table", False):
            for row in shape.table.rows:  # a merged cell's text is in its first cell; the others are spanned
                yield from _row(cell.text_frame.text for cell in row.cells if not cell.is_spanned)
        elif shape.has_text_frame:
            yield from (p for p in (" ".join(par.text.split()) for par in shape.text_frame.paragraphs) if p)
