"""The built-in converters (plugins/converters/) on real files the tests write: text, title, time and headings of
each format, and the reasons given for files they cannot read."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from duckgraph.plugins.converters.eml import EmlConverter
from duckgraph.plugins.converters.epub import EpubConverter
from duckgraph.plugins.converters.html import HtmlConverter
from duckgraph.plugins.converters.office import DocxConverter, PptxConverter
from duckgraph.plugins.converters.pdf import PdfConverter
from duckgraph.ports.converter import ConversionError
from tests.documents import ARTICLE, write_docx, write_eml, write_epub, write_pdf, write_pptx, write_scanned_pdf


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


SARAH = {"From": "Sarah Kim <sarah.kim@northwind.example>", "To": "Alex Rivera <alex.rivera@northwind.example>",
         "Cc": "Zoë Müller <zoe.mueller@acme.example>", "Subject": "Q4 budget deck – Thursday",
         "Date": "Tue, 24 Nov 2026 08:47:00 -0500", "Message-ID": "<1@northwind.example>"}
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def test_eml_headers_the_plain_body_in_its_charset_and_attachments_by_name(tmp_path: Path):
    """An .eml was skipped in a folder, and given by name stored as raw MIME: header lines, base64 bodies, the HTML
    part and the attachment's bytes, timed at the ingest (probe 39 bug 1)."""
    plain = ("Hi Alex,\n\nThe budget review with the CFO is on Thursday December 3 at 2pm.\n# of seats: 350\n\n"
             "-- \nSarah Kim\n\nOn Mon, Nov 23, 2026 Alex Rivera wrote:\n> Is the review still on?\n")
    path = write_eml(tmp_path / "deck.eml", SARAH, plain=plain, html="<p>Hi Alex, <b>the HTML twin</b></p>",
                     attachments=(("Q4-budget.xlsx", XLSX, b"PK" + bytes(2046)),))
    converted = EmlConverter().convert(path.read_bytes(), str(path))
    assert converted.text == (
        "From: Sarah Kim <sarah.kim@northwind.example>\nTo: Alex Rivera <alex.rivera@northwind.example>\n"
        "Cc: Zoë Müller <zoe.mueller@acme.example>\nDate: Tue, 24 Nov 2026 08:47:00 -0500\n\n"
        "Hi Alex,\n\nThe budget review with the CFO is on Thursday December 3 at 2pm.\n\\# of seats: 350\n\n"
        "-- \nSarah Kim\n\nOn Mon, Nov 23, 2026 Alex Rivera wrote:\n> Is the review still on?\n\n"
        f"Attachments:\n- Q4-budget.xlsx ({XLSX}, 2.0 KB)")
    assert (converted.title, converted.time) == ("Q4 budget deck – Thursday", "2026-11-24T13:47:00+00:00")
    # Quoted-printable in a charset of its own, decoded to text.
    path = write_eml(tmp_path / "cfo.eml", {"From": "zoe@acme.example", "Subject": "Re: pricing"},
                     plain="I spoke with our CFO, José Núñez.\n", charset="iso-8859-1", encoding="quoted-printable")
    assert b"Jos=E9 N=FA=F1ez" in path.read_bytes()
    converted = EmlConverter().convert(path.read_bytes(), str(path))
    assert (converted.text, converted.title, converted.time) == (
        "From: zoe@acme.example\n\nI spoke with our CFO, José Núñez.", "Re: pricing", None)


def test_eml_without_a_plain_part_reads_its_html_and_one_without_text_says_so(tmp_path: Path):
    path = write_eml(tmp_path / "news.eml", {"From": "news@example.com", "Subject": "Flange News"}, html=ARTICLE)
    converted = EmlConverter().convert(path.read_bytes(), str(path))
    assert converted.text == "From: news@example.com\n\n" + HtmlConverter().convert(ARTICLE.encode(), "x").text
    assert "The blue flange was invented" in converted.text and "<p>" not in converted.text
    path = write_eml(tmp_path / "scan.eml", {"From": "scanner@example.com", "Subject": "Scan"},
                     attachments=(("scan.pdf", "application/pdf", b"%PDF" * 600),))
    assert EmlConverter().convert(path.read_bytes(), str(path)).text == (
        "From: scanner@example.com\n\nThis message has no text part.\n\n"
        "Attachments:\n- scan.pdf (application/pdf, 2.3 KB)")


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
                                                (PptxConverter(), b"PK no"), (EpubConverter(), b"PK no"),
                                                (EmlConverter(), b"PK no"),
                                                (EmlConverter(), b"Subject: x\nContent-Type: text/plain; "
                                                                 b"charset=x-unknown\n\nHi\n")])
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
