"""The built-in converters (plugins/converters/) on real files the tests write: text, title, time and headings of
each format, and the reasons given for files they cannot read."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from duckgraph.plugins.converters.epub import EpubConverter
from duckgraph.plugins.converters.html import HtmlConverter
from duckgraph.plugins.converters.office import DocxConverter, PptxConverter
from duckgraph.plugins.converters.pdf import PdfConverter
from duckgraph.ports.converter import ConversionError
from tests.documents import ARTICLE, write_docx, write_epub, write_pdf, write_pptx, write_scanned_pdf


def test_pdf_headings_title_and_date(tmp_path: Path):
    path = write_pdf(tmp_path / "a.pdf", {"Installation": "Run the installer.", "Troubleshooting": "Tighten it."},
                     title="Widget Manual", created=datetime(2024, 3, 5, 10, 0, tzinfo=timezone.utc))
    converted = PdfConverter().convert(path.read_bytes(), str(path))
    assert converted.text == "# Installation\n\nRun the installer.\n\n# Troubleshooting\n\nTighten it."
    assert (converted.title, converted.time) == ("Widget Manual", "2024-03-05T10:00:00+00:00")


def test_pdf_text_in_reading_order(tmp_path: Path):
    """pdfminer groups text boxes by nearness: headings that fpdf2 set at another indent (a cell after a
    multi_cell starts at the right margin) came after all the text they head. Read top to bottom instead, and a
    page in two columns a column at a time (probe bug 2)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    for heading, text in (("Troubleshooting", "Tighten the screws."), ("Warranty", "Two years."),
                          ("Disposal", "Recycle it.")):
        pdf.set_font("Helvetica", size=20)
        pdf.cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, text)
    converted = PdfConverter().convert(bytes(pdf.output()), "manual.pdf")
    assert converted.text == ("# Troubleshooting\n\nTighten the screws.\n\n# Warranty\n\nTwo years.\n\n"
                              "# Disposal\n\nRecycle it.")

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.multi_cell(0, 10, "Flanges", new_x="LMARGIN", new_y="NEXT")
    top = pdf.get_y()
    pdf.set_font("Helvetica", "", 11)
    for x, text in ((10, "Copper bends. " * 20 + "\n\nCold winters. " * 5), (110, "Factories adopt. " * 20)):
        pdf.set_xy(x, top)
        pdf.multi_cell(85, 5, text, align="L")  # the left column runs on below the right one
    text = PdfConverter().convert(bytes(pdf.output()), "paper.pdf").text
    assert text.startswith("# Flanges\n\nCopper bends.")
    assert text.rindex("Copper bends.") < text.rindex("Cold winters.") < text.index("Factories adopt."), text


def test_pdf_without_text_or_not_a_pdf(tmp_path: Path):
    with pytest.raises(ConversionError, match="scanned PDF"):
        PdfConverter().convert(write_scanned_pdf(tmp_path / "s.pdf").read_bytes(), "s.pdf")
    with pytest.raises(ConversionError, match="not a readable PDF"):
        PdfConverter().convert(b"%PDF-1.4 nothing", "x.pdf")


def test_html_main_text_without_navigation():
    converted = HtmlConverter().convert(ARTICLE.encode(), "https://example.com/news")
    assert converted.text.startswith("# Flange News\n\nThe blue flange was invented")
    assert "## Adoption" in converted.text and "About us" not in converted.text and "Cookie" not in converted.text
    assert (converted.title, converted.time) == ("Flange News", "2023-06-01")


def test_docx_and_pptx(tmp_path: Path):
    path = write_docx(tmp_path / "g.docx", "Ops Guide", {"Backups": "Nightly.", "Restores": "Ask twice."},
                      created=datetime(2022, 1, 10, tzinfo=timezone.utc))
    converted = DocxConverter().convert(path.read_bytes(), str(path))
    assert converted.text == "# Backups\n\nNightly.\n\n# Restores\n\nAsk twice."
    assert (converted.title, converted.time) == ("Ops Guide", "2022-01-10T00:00:00+00:00")
    path = write_pptx(tmp_path / "d.pptx", "Roadmap", {"Q1": "Ship the flange.", "Q2": "Sell the flange."})
    converted = PptxConverter().convert(path.read_bytes(), str(path))
    assert converted.text == "# Q1\n\nShip the flange.\n\n# Q2\n\nSell the flange."
    assert converted.title == "Roadmap"
    with pytest.raises(ConversionError, match="not a readable DOCX"):
        DocxConverter().convert(b"PK not a zip", "x.docx")


def test_epub_chapters(tmp_path: Path):
    path = write_epub(tmp_path / "b.epub", "Tea", {"Green tea": "Steep it briefly.", "Black tea": "Steep longer."})
    converted = EpubConverter().convert(path.read_bytes(), str(path))
    assert "# Green tea\n\nSteep it briefly." in converted.text and "# Black tea\n\nSteep longer." in converted.text
    assert (converted.title, converted.time) == ("Tea", "2021-09-30")


@pytest.mark.parametrize("converter, damaged", [(PdfConverter(), b"%PDF-1.4 nothing"), (DocxConverter(), b"PK no"),
                                                (PptxConverter(), b"PK no"), (EpubConverter(), b"PK no")])
def test_every_converter_names_its_format_for_a_damaged_file(converter, damaged):
    with pytest.raises(ConversionError, match=rf"^not a readable {converter.id.upper()} file \(\w+"):
        converter.convert(damaged, "x")


def test_a_missing_library_names_the_extra_and_only_headings_is_no_text(monkeypatch):
    import sys

    from duckgraph.plugins.converters.support import Heading, from_blocks
    from duckgraph.ports.converter import MissingExtraError

    monkeypatch.setitem(sys.modules, "docx", None)  # an import of it fails as if it were not installed
    with pytest.raises(MissingExtraError, match=r"reading DOCX needs the documents extra .*duckgraph\[documents\]"):
        DocxConverter().convert(b"", "x.docx")
    with pytest.raises(ConversionError, match="no text in it"):
        from_blocks([Heading(1, "Only"), Heading(2, "Headings")], "t", None)
