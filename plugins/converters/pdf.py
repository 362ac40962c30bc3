"""PDF through pdfminer.six: its layout analysis gives each line's font size, so lines set larger than the body
text become headings (PDFs rarely say which lines are headings); the title and date come from the document info."""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

from duckgraph.plugins.converters.support import Heading, markdown, pdf_date, reading
from duckgraph.ports.converter import ConversionError, ConvertedDocument, DocumentConverter

#: A line at least this much larger than the body text, and short, is a heading.
HEADING_RATIO = 1.15
HEADING_CHARS = 200


class PdfConverter(DocumentConverter):
    id = "pdf"
    suffixes = (".pdf",)
    media_types = ("application/pdf",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        with reading("PDF", "pdfminer.high_level") as high_level:
            pages = list(high_level.extract_pages(io.BytesIO(data)))
            info = _info(data)
        lines = [line for page in pages for line in _lines(page)]
        if not any(text.strip() for _, text in lines):
            raise ConversionError(f"no text in its {len(pages)} pages: a scanned PDF? Run OCR on it first (for "
                                  "example `ocrmypdf in.pdf out.pdf`) and ingest the result")
        title = _text(info.get("Title"))
        time = next(filter(None, (pdf_date(_text(info.get(key))) for key in ("CreationDate", "ModDate"))), None)
        return ConvertedDocument(text=_markdown(lines), title=title, time=time)


def _info(data: bytes) -> dict[str, Any]:
    from pdfminer.pdfdocument import PDFDocument
    from pdfminer.pdfparser import PDFParser
    from pdfminer.pdftypes import resolve1

    document = PDFDocument(PDFParser(io.BytesIO(data)))
    return {key: resolve1(value) for info in document.info for key, value in info.items()}


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        from pdfminer.utils import decode_text

        value = decode_text(value)
    return value.strip() if isinstance(value, str) else ""


def _lines(page: Any) -> list[tuple[float, str]]:
    """(font size, text) of each line of a page in reading order; a blank line ("", size 0) between text boxes."""
    from pdfminer.layout import LTChar, LTTextContainer, LTTextLine

    found: list[tuple[float, str]] = []
    for box in _reading_order([box for box in page if isinstance(box, LTTextContainer)]):
        for line in box:
            if isinstance(line, LTTextLine) and (text := " ".join(line.get_text().split())):
                sizes = [round(ch.size, 1) for ch in line if isinstance(ch, LTChar)]
                found.append((Counter(sizes).most_common(1)[0][0] if sizes else 0.0, text))
        found.append((0.0, ""))
    return found


def _reading_order(boxes: list[Any]) -> list[Any]:
    """The text boxes of a page in the order they are read, top to bottom, a column at a time (an XY cut).

    pdfminer's own order groups boxes by nearness, which can put every heading after the text it heads. Here,
    boxes split by a gap from the top to the bottom are columns, read left to right, when some of them stand side
    by side (a heading at another indent above its text is no column); otherwise the top band (boxes split from
    those below by a gap across the page) is read first, and the rest again, where columns may begin."""
    if len(boxes) < 2:
        return boxes
    columns = _split(boxes, lambda b: (b.x0, b.x1))
    bands = _split(boxes, lambda b: (-b.y1, -b.y0))
    column_of = {id(box): i for i, column in enumerate(columns) for box in column}
    if len(columns) > 1 and any(len({column_of[id(box)] for box in band}) > 1 for band in bands):
        return [box for column in columns for box in _reading_order(column)]
    if len(bands) > 1:
        return _reading_order(bands[0]) + _reading_order([box for band in bands[1:] for box in band])
    return sorted(boxes, key=lambda b: (-b.y1, b.x0))  # overlapping boxes: top to bottom, then left to right


def _split(boxes: list[Any], span: Any) -> list[list[Any]]:
    """`boxes` in groups whose spans (start, end along one axis) overlap, separated by gaps, in order."""
    groups: list[list[Any]] = []
    end = 0.0
    for box in sorted(boxes, key=span):
        start, stop = span(box)
        if groups and start < end:
            groups[-1].append(box)
            end = max(end, stop)
        else:
            groups.append([box])
            end = stop
    return groups


def _markdown(lines: list[tuple[float, str]]) -> str:
    """Lines as Markdown (see `support.markdown`): those set larger than the body as headings (the largest size
    level 1), the others joined into paragraphs."""
    weights = Counter()
    for size, text in lines:
        weights[size] += len(text)
    body = max((size for size in weights if size), key=lambda s: weights[s], default=0.0)
    heading_sizes = sorted({s for s, t in lines if _is_heading(s, t, body)}, reverse=True)
    out: list[str | Heading] = []
    paragraph: list[str] = []

    def close() -> None:
        if paragraph:
            out.append(" ".join(paragraph))
            paragraph.clear()

    previous = 0.0  # the size of the heading line just before, within one text box: a heading set on two lines
    for size, text in lines:
        if not text:
            close()
            previous = 0.0
        elif _is_heading(size, text, body):
            close()
            if size == previous:
                out[-1] = Heading(out[-1].level, out[-1].text + " " + text)
            else:
                out.append(Heading(heading_sizes.index(size) + 1, text))
            previous = size
        else:
            paragraph.append(text)
            previous = 0.0
    close()
    return markdown(out)


def _is_heading(size: float, text: str, body: float) -> bool:
    return bool(body) and size >= body * HEADING_RATIO and len(text) <= HEADING_CHARS
