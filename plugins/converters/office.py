"""Word (DOCX) through python-docx and PowerPoint (PPTX) through python-pptx: paragraphs styled as headings (a
slide's title) become Markdown headings; the title and creation date come from the document's properties."""

from __future__ import annotations

import io

from duckgraph.plugins.converters.support import from_blocks, iso, reading
from duckgraph.ports.converter import ConvertedDocument, DocumentConverter


class DocxConverter(DocumentConverter):
    id = "docx"
    suffixes = (".docx",)
    media_types = ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        with reading("DOCX", "docx") as docx:
            document = docx.Document(io.BytesIO(data))
        blocks, title = [], document.core_properties.title or ""
        for item in document.iter_inner_content():
            if hasattr(item, "rows"):  # a table: one line per row
                blocks += [" | ".join(cell.text.strip() for cell in row.cells) for row in item.rows]
                continue
            text, style = item.text.strip(), (item.style.name if item.style is not None else "")
            if not text:
                continue
            if style == "Title":
                title = title or text
            elif style.startswith("Heading") and style[7:].strip().isdigit():
                blocks.append("#" * min(int(style[7:]), 6) + " " + text)
            else:
                blocks.append(text)
        return from_blocks(blocks, title, iso(document.core_properties.created))


class PptxConverter(DocumentConverter):
    id = "pptx"
    suffixes = (".pptx",)
    media_types = ("application/vnd.openxmlformats-officedocument.presentationml.presentation",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        with reading("PPTX", "pptx") as pptx:
            deck = pptx.Presentation(io.BytesIO(data))
        blocks = []
        for number, slide in enumerate(deck.slides, start=1):
            title_shape = slide.shapes.title
            heading = title_shape.text_frame.text.strip() if title_shape is not None else ""
            blocks.append(f"# {heading or f'Slide {number}'}")
            for shape in slide.shapes:
                if shape.has_text_frame and (title_shape is None or shape.shape_id != title_shape.shape_id):
                    blocks += [p for p in (" ".join(par.text.split()) for par in shape.text_frame.paragraphs) if p]
            if slide.has_notes_slide and (notes := slide.notes_slide.notes_text_frame.text.strip()):
                blocks.append(notes)
        return from_blocks(blocks, deck.core_properties.title or "", iso(deck.core_properties.created))


