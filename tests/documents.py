"""Real documents of each format, written by the tests: a PDF with two sections (fpdf2), a Word file with headings
(python-docx), an HTML page with navigation and a footer around its article, Markdown with front matter, and email
messages as a mail program saves them (the standard library's `email`)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

ARTICLE = """<html><head><title>Flange News</title>
<meta property="article:published_time" content="2023-06-01"></head><body>
<nav><a href="/">Home</a> <a href="/about">About us</a> <a href="/shop">Shop the catalogue</a></nav>
<article><h1>Flange News</h1>
<p>The blue flange was invented in Oslo by Kari Nordmann in 1931 after many years of patient work.</p>
<h2>Early years</h2><p>Kari first tried copper, which bent under load and failed in the cold winters of 1929.</p>
<h2>Adoption</h2><p>By 1950 every widget factory in Norway used the blue flange on its assembly lines.</p>
</article><footer>Copyright Flange Inc. Privacy policy. Cookie settings.</footer></body></html>"""


def write_pdf(path: Path, sections: dict[str, str], *, title: str = "", created: datetime | None = None) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    if title:
        pdf.set_title(title)
    if created:
        pdf.set_creation_date(created)
    for heading, text in sections.items():
        pdf.set_font("Helvetica", "B", 18)
        pdf.multi_cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 11)
        pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
    pdf.output(str(path))
    return path


def write_scanned_pdf(path: Path) -> Path:
    """A PDF whose page holds a drawing and no text, as a scan without OCR does."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")
    pdf.output(str(path))
    return path


def write_docx(path: Path, title: str, sections: dict[str, str], created: datetime) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    document.core_properties.created = created
    document.add_heading(title, 0)
    for heading, text in sections.items():
        document.add_heading(heading, 1)
        document.add_paragraph(text)
    document.save(str(path))
    return path


def write_mixed_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_pdf(folder / "manual.pdf", {
        "Installation": "Run the installer and choose the folder where the widget lives. " * 3,
        "Troubleshooting": "If the widget hums, tighten the blue flange by a quarter turn clockwise. " * 3,
    }, title="Widget Manual", created=datetime(2024, 3, 5, tzinfo=timezone.utc))
    write_docx(folder / "guide.docx", "Ops Guide", {
        "Backups": "Backups run nightly at 02:00 to the tape robot in the basement.",
        "Restores": "A restore needs a ticket approved by two administrators.",
    }, created=datetime(2022, 1, 10, tzinfo=timezone.utc))
    (folder / "flange.html").write_text(ARTICLE, encoding="utf-8")
    (folder / "release.md").write_text(
        "---\ntitle: Release notes\ndate: 2024-05-02\nauthor: Kim\n---\n# Release 2\n\n## Fixes\n\n"
        "The parrot no longer squawks at midnight.\n\n## Known issues\n\nThe kettle whistles twice.\n",
        encoding="utf-8")
    return folder


def write_pptx(path: Path, title: str, slides: dict[str, str]) -> Path:
    import pptx

    deck = pptx.Presentation()
    deck.core_properties.title = title
    for heading, text in slides.items():
        slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
        slide.shapes.title.text = heading
        slide.placeholders[1].text = text
    deck.save(str(path))
    return path


def write_epub(path: Path, title: str, chapters: dict[str, str]) -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("test-book")
    book.set_title(title)
    book.add_metadata("DC", "date", "2021-09-30")
    items = []
    for number, (heading, text) in enumerate(chapters.items(), start=1):
        item = epub.EpubHtml(title=heading, file_name=f"ch{number}.xhtml")
        item.content = f"<html><body><h1>{heading}</h1><div><p>{text}</p></div></body></html>"
        book.add_item(item)
        items.append(item)
    book.toc = items
    book.spine = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    epub.write_epub(str(path), book)
    return path


def write_eml(path: Path, headers: dict[str, str], *, plain: str | None = None, html: str | None = None,
              attachments: tuple[tuple[str, str, bytes], ...] = (), charset: str = "utf-8",
              encoding: str = "base64") -> Path:
    """An .eml file: `headers` (non-ASCII ones RFC 2047-encoded), a text/plain body in `charset` and the transfer
    `encoding`, an HTML part (the plain body's alternative, or the body alone), and attachments (name, media type,
    bytes)."""
    from email.message import EmailMessage

    message = EmailMessage()
    for name, value in headers.items():
        message[name] = value
    if plain is not None:
        message.set_content(plain, charset=charset, cte=encoding)
    if html is not None:
        add = message.add_alternative if plain is not None else message.set_content
        add(html, subtype="html", cte=encoding)
    for name, media_type, data in attachments:
        maintype, subtype = media_type.split("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    path.write_bytes(message.as_bytes())
    return path
