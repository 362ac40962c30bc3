"""DOCX and PPTX text outside plain paragraphs: tables (a DOCX's nested ones), a slide's grouped shapes. They were
silently missing: a slide holding only a table and a group was "no text in it"."""

from __future__ import annotations

import io

import pytest

from duckgraph.plugins.converters.office import DocxConverter, PptxConverter

pptx = pytest.importorskip("pptx")
docx = pytest.importorskip("docx")


def test_a_slide_s_table_and_grouped_shapes_are_read_in_order():
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    slide.shapes.title.text = "Q3 owners"
    table = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Project", "Owner"
    table.cell(1, 0).text, table.cell(1, 1).text = "Billing revamp", "Priya Raman"
    table.cell(2, 0).merge(table.cell(2, 1))
    table.cell(2, 0).text = "Both teams meet\non Fridays"
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(1), Inches(4), Inches(4), Inches(1)).text_frame.text = "Approved by Dana Lee"
    inner = group.shapes.add_group_shape()  # a group within a group
    inner.shapes.add_textbox(Inches(1), Inches(5), Inches(4), Inches(1)).text_frame.text = "Reviewed by Sam Ortiz"
    slide.shapes.add_textbox(Inches(1), Inches(6), Inches(4), Inches(1)).text_frame.text = "Status: on track"
    only = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title, a table alone
    only.shapes.add_table(1, 1, Inches(1), Inches(1), Inches(2), Inches(1)).table.cell(0, 0).text = "Budget: 40k"
    data = io.BytesIO()
    deck.save(data)
    assert PptxConverter().convert(data.getvalue(), "deck.pptx").text == (
        "# Q3 owners\n\nProject | Owner\n\nBilling revamp | Priya Raman\n\nBoth teams meet on Fridays\n\n"
        "Approved by Dana Lee\n\nReviewed by Sam Ortiz\n\nStatus: on track\n\n# Slide 2\n\nBudget: 40k")


def test_a_docx_table_nested_in_a_cell_and_a_merged_cell_are_read_once_and_the_header_left_out():
    document = docx.Document()
    document.sections[0].header.paragraphs[0].text = "ACME Corp - Confidential"
    document.add_paragraph("Owners of the projects:")
    table = document.add_table(rows=3, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Project", "Owner"
    table.cell(1, 0).text = "Billing revamp"
    owner = table.cell(1, 1)
    owner.text = "Priya Raman"
    owner.add_paragraph("since May")
    nested = owner.add_table(rows=1, cols=2)
    nested.cell(0, 0).text, nested.cell(0, 1).text = "Deputy", "Dana Lee"
    table.cell(2, 0).merge(table.cell(2, 1)).text = "Reviewed weekly"
    document.add_paragraph("End of the list.")
    data = io.BytesIO()
    document.save(data)
    assert DocxConverter().convert(data.getvalue(), "owners.docx").text == (
        "Owners of the projects:\n\nProject | Owner\n\nBilling revamp | Priya Raman since May\n\nDeputy | Dana Lee"
        "\n\nReviewed weekly\n\nEnd of the list.")
