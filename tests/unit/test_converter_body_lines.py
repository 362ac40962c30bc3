"""Body text that reads as Markdown structure stays text (plugins/converters/support.py `markdown`): a paragraph
"# of open bugs ...", a table headed "#", a fence-like line, a line after an HTML <br>. Converted as they were,
the chunker read them as headings: their words became a section's name and were in no passage, and the slide's
title was replaced."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from duckgraph.core.domain.chunking import chunk_sections
from duckgraph.plugins.converters.epub import EpubConverter
from duckgraph.plugins.converters.html import HtmlConverter
from duckgraph.plugins.converters.office import DocxConverter, PptxConverter
from duckgraph.plugins.converters.pdf import PdfConverter
from duckgraph.plugins.converters.support import Heading, markdown

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")


def test_only_headings_read_as_headings():
    text = markdown([Heading(2, "Plan\nfor  Q3"), "# of open bugs: 12\n  ## two\n```\n~~~ tilde\n#hashtag #",
                     "####### seven", Heading(9, "Deep")])
    assert text == ("## Plan for Q3\n\n\\# of open bugs: 12\n  \\## two\n\\```\n\\~~~ tilde\n#hashtag #\n\n"
                    "####### seven\n\n###### Deep")
    assert chunk_sections(text) == [
        ("Plan for Q3", "\\# of open bugs: 12\n  \\## two\n\\```\n\\~~~ tilde\n#hashtag #\n\n####### seven")]


def test_a_docx_s_hash_lines_table_and_fence_stay_in_its_passages():
    document = docx.Document()
    document.add_paragraph("Sprint plan for the Kestrel release.")
    table = document.add_table(rows=3, cols=3)
    for r, row in enumerate([["#", "Task", "Owner"], ["1", "Write spec", "Ann"], ["2", "Review", "Bo"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    document.add_paragraph("# of open bugs is 12 and the freeze is Friday.")
    broken = document.add_paragraph("Blockers:")
    broken.add_run().add_break()  # a line break within the paragraph: its next line starts with "#"
    broken.add_run("## none today")
    document.add_paragraph("```")  # would open a code block that hides the heading below
    document.add_heading("Risks", 1)
    document.add_paragraph("The vendor may slip.")
    data = io.BytesIO()
    document.save(data)
    text = DocxConverter().convert(data.getvalue(), "plan.docx").text
    assert chunk_sections(text) == [
        ("", "Sprint plan for the Kestrel release.\n\n\\# | Task | Owner\n\n1 | Write spec | Ann\n\n2 | Review | Bo"
             "\n\n\\# of open bugs is 12 and the freeze is Friday.\n\nBlockers:\n\\## none today\n\n\\```"),
        ("Risks", "The vendor may slip.")]


def test_a_slide_keeps_its_title_over_a_table_headed_hash_and_notes():
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Backlog"
    table = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([["#", "Item"], ["1", "Kestrel login"], ["2", "Kestrel export"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    slide.notes_slide.notes_text_frame.text = "Say:\n# 3 blockers left"
    data = io.BytesIO()
    deck.save(data)
    text = PptxConverter().convert(data.getvalue(), "backlog.pptx").text
    assert chunk_sections(text) == [("Backlog", "\\# | Item\n\n1 | Kestrel login\n\n2 | Kestrel export\n\nSay:\n"
                                          "\\# 3 blockers left")]


def test_an_epub_paragraph_and_a_pdf_line_starting_with_hash_are_text(tmp_path: Path):
    from ebooklib import epub
    from fpdf import FPDF

    book = epub.EpubBook()
    book.set_identifier("bugs")
    book.set_title("Bugs")
    chapter = epub.EpubHtml(title="Status", file_name="ch1.xhtml")
    chapter.content = "<html><body><h1>Status</h1><p># of open bugs is 12.</p></body></html>"
    book.add_item(chapter)
    book.spine = [chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    epub.write_epub(str(tmp_path / "b.epub"), book)
    text = EpubConverter().convert((tmp_path / "b.epub").read_bytes(), "b.epub").text
    assert chunk_sections(text) == [("Status", "\\# of open bugs is 12.")]

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.multi_cell(0, 10, "Status", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "# of open bugs is 12 and the freeze is Friday, so the team plans the last fixes now.",
                   new_x="LMARGIN", new_y="NEXT")
    text = PdfConverter().convert(bytes(pdf.output()), "status.pdf").text
    assert chunk_sections(text) == [("Status", "\\# of open bugs is 12 and the freeze is Friday, so the team plans the "
                                         "last fixes now.")]


def test_an_html_line_after_a_break_or_in_pre_starting_with_hash_is_text():
    page = (b"<html><body><article><h1>Bugs</h1><p># of open bugs is 12 and the freeze is Friday, soon for us.</p>"
            b"<p>Blockers for the whole release this week are listed here:<br/>\n# none today, good news for all.</p>"
            b"<pre>make test\n# runs the unit tests\n## then the rest</pre></article></body></html>")
    text = HtmlConverter().convert(page, "https://example.com/bugs").text
    assert chunk_sections(text) == [("Bugs", (
        "\\# of open bugs is 12 and the freeze is Friday, soon for us.\n\nBlockers for the whole release this week "
        "are listed here:\n\n\\# none today, good news for all.\n\nmake test\n\\# runs the unit tests\n"
        "\\## then the rest"))]
