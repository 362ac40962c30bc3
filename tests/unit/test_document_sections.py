"""Headings as passage boundaries (core/domain/chunking.py), PDF dates, the URL guard (core/web/fetch.py) and the
converter hook: a plugin's converter reads the formats it names, before the built-in one."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core.domain.chunking import chunk_sections, markdown_headings, sections
from duckgraph.core.files.converters import load_converters
from duckgraph.core.files.folder import find_files
from duckgraph.core.files.front_matter import read_markdown
from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.core.web.fetch import FetchError, check_url
from duckgraph.plugins.converters.support import pdf_date
from duckgraph.ports import hookimpl
from duckgraph.ports.converter import ConvertedDocument, DocumentConverter


def test_headings_cut_passages_and_name_their_section():
    text = ("Intro line.\n# Install\n## Linux\nRun apt.\n```sh\n# not a heading\n```\n## Mac ##\nRun brew.\n"
            "# Use\n### Deep\nRun it.\n# Empty\n")
    assert sections(text) == [("", "Intro line."), ("Install > Linux", "Run apt.\n```sh\n# not a heading\n```"),
                              ("Install > Mac", "Run brew."), ("Use > Deep", "Run it.")]
    assert chunk_sections("No heading here.") == [("", "No heading here.")]
    long = "# Big\n" + "A sentence of words. " * 120
    assert {s for s, _ in chunk_sections(long, 500, 50)} == {"Big"} and len(chunk_sections(long, 500, 50)) > 3


YAML = ("spring:\n  # WARNING: production database, read-only user\n  datasource:\n"
        "    url: jdbc:postgresql://db.prod:5432/orders\n  # Connection pool\n  hikari:\n    maximum-pool-size: 20")


@pytest.mark.parametrize(("document_id", "title", "text"), [
    ("config/application.yml", "", YAML), ("doc-7", "application.yml", YAML), ("deploy.sh", "", "# Push to ECR\nx"),
    ("/srv/app/Dockerfile", "Dockerfile", "# Base image\nFROM python"), (".env.local", "", "# Secrets\nA=1"),
    ("https://example.com/ops/install.sh?v=2", "", "# Install\nx"), ("C:\\ops\\setup.py", "", "# Setup\nx"),
    ("config/application.yml#part-2", "application.yml (part 2)", YAML), ("notes", "", "#!/bin/sh\n# Push\nx"),
])
def test_the_comment_lines_of_code_and_configuration_are_no_headings(document_id, title, text):
    # A "#" line there is a comment: it stays in the passage's text, which is not cut at it.
    assert not markdown_headings(document_id, title, text)
    assert chunk_sections(text, headings=False) == [("", text)]


@pytest.mark.parametrize(("document_id", "title"), [
    ("README.md", ""), ("notes/deploy.md", "deploy.sh"), ("meeting-2024-05-02", "Weekly sync"), ("report.pdf", ""),
    ("https://example.com/docs/index.php", "Docs"), ("notes.txt", ""), ("v1.2", ""),
])
def test_markdown_and_other_documents_keep_their_headings(document_id, title):
    assert markdown_headings(document_id, title, "# Install\nRun apt.\n# Use\nRun it.")


def test_front_matter_gives_title_time_and_metadata():
    assert read_markdown("---\ntitle: 'A: b'\ndate: 2024-05-02\nauthor: Kim\ntags:\n  - x\n---\nBody\n") == (
        "A: b", "author: Kim\ntags: x\n\nBody\n", "2024-05-02", {"date": "2024-05-02", "author": "Kim"})
    assert read_markdown("---\ntitle: x\n---\nBody", front_matter=False) == ("", "---\ntitle: x\n---\nBody", None, {})


@pytest.mark.parametrize("text", [
    "---\n\nDentist appointment on 12 June at 9:30 with Dr. Albers.\nBring the card.\n\n---\n\nMore text.\n",
    "---\ntitle: Plan\nWe met on Monday and chose the engine.\n---\nBody\n",  # a field, then prose
    "---\nhttps://example.com/agenda\n---\nBody\n", "---\n- milk\n- eggs\n---\n", "---\n\n---\nBody\n",
])
def test_a_leading_block_that_is_not_all_fields_is_the_note_s_text(text):
    """A note that starts with a horizontal rule lost all it held up to the next one (taken for front matter)."""
    assert read_markdown(text) == ("", text, None, {})


def test_front_matter_may_hold_comments_lists_blocks_and_names_with_spaces():
    text = ("---\n# Obsidian properties\ntitle: Plan\ndue date: 2024-05-01\ntags:\n- a\n- b\nsummary: >\n"
            "  folded\n  lines\nurl: https://example.com\n---\nBody\n")
    assert read_markdown(text) == (
        "Plan", "due date: 2024-05-01\ntags: a, b\nsummary: folded lines\nurl: https://example.com\n\nBody\n", None,
        {"due date": "2024-05-01", "url": "https://example.com"})


def test_front_matter_fields_ingest_does_not_read_start_the_text():
    """An Obsidian meeting note's attendees were kept only in the metadata: neither embedded, indexed nor shown, so
    "Who attended the planning meeting?" found nothing (probe 39 bug 2). They start the text, a line each in the
    file's order, a list's items joined; the title and date give the title and time, and are not repeated."""
    text = ("---\nattendees: [Ana Lima, \"Ben Ode, Jr.\", 'Cy']\ntitle: Q2 planning\nproject: \"[[Apollo]]\"\n"
            "Date: 2026-03-03\ntags:\n  - meeting  \n  # a comment\n  - q2\nempty:\nnone: []\nroom:\n  name: 4B\n"
            "  floors:\n    - 4\n---\n# Q2 planning\n\nWe chose Acme.\n")
    assert read_markdown(text) == (
        "Q2 planning", "attendees: Ana Lima, Ben Ode, Jr., Cy\nproject: [[Apollo]]\ntags: meeting, q2\n"
                       "room: name: 4B, 4\n\n# Q2 planning\n\nWe chose Acme.\n", "2026-03-03",
        {"attendees": "[Ana Lima, \"Ben Ode, Jr.\", 'Cy']", "project": "[[Apollo]]", "date": "2026-03-03",
         "none": "[]"})
    # Only the title and date: the text is the note's alone, as before.
    assert read_markdown("---\ntitle: Plan\ndate: 2024-05-02\n---\nBody\n")[1] == "Body\n"


def test_a_part_of_a_long_note_starts_under_the_headings_it_was_cut_under(monkeypatch):
    """Its first passage had no section, and the later ones lost the top heading ("Day 3", not "Archive > Day 3")."""
    from duckgraph.core.domain import model
    from duckgraph.core.files.folder import as_documents

    monkeypatch.setattr(model, "MAX_DOCUMENT_CHARS", 400)
    text = "# Archive\n" + "".join(f"\n## Day {n}\n\n" + f"On day {n} we walked a long way.\n\n" * 9
                                   for n in range(1, 7))
    parts = [d.text for d in as_documents("/notes/archive.md", "archive", text, None, {}).documents]
    assert len(parts) > 3 and all(len(part) <= 400 for part in parts)
    named = [[section for section, _ in sections(part)] for part in parts]
    assert any(before[-1] == after[0] for before, after in zip(named, named[1:]))  # a part cut inside a section
    days = [section for sections_of_part in named for section in sections_of_part]
    assert [day for n, day in enumerate(days) if n == 0 or days[n - 1] != day] == [
        f"Archive > Day {n}" for n in range(1, 7)]
    # A code or configuration file has no headings: its parts are its text cut, nothing added.
    code = [d.text for d in as_documents("/srv/app.yml", "app", text, None, {}).documents]
    assert "".join(code) == text


@pytest.mark.parametrize(("text", "iso"), [
    ("D:20240305101112Z", "2024-03-05T10:11:12+00:00"),
    ("D:20240305101112+02'00'", "2024-03-05T08:11:12+00:00"),
    ("D:2024", "2024-01-01T00:00:00"),
    ("yesterday", None),
])
def test_pdf_dates(text, iso):
    assert pdf_date(text) == iso


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "http://127.0.0.1/",
                                 "http://[::1]:8080/", "http://169.254.169.254/latest", "http://10.0.0.8/",
                                 "http://localhost/", "javascript:alert(1)"])
def test_only_public_http_urls_are_fetched(url):
    with pytest.raises(FetchError):
        check_url(url, allow_private=False)


def test_private_hosts_may_be_allowed_but_not_other_schemes():
    check_url("http://127.0.0.1:9/", allow_private=True)
    with pytest.raises(FetchError, match="only http"):
        check_url("file:///etc/passwd", allow_private=True)


class RstConverter(DocumentConverter):
    suffixes = (".rst", ".pdf")

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        return ConvertedDocument(text=data.decode().replace("===", "#"), title="from the plugin")


class RstPlugin:
    @hookimpl
    def register_converters(self, register):
        register("rst-test", RstConverter)


def test_a_plugin_converter_reads_its_formats_before_the_built_in(tmp_path: Path):
    pm = build_plugin_manager(load_entry_points=False)
    assert type(load_converters(pm).by_suffix[".pdf"].plugin).__name__ == "PdfConverter"
    assert load_converters(pm).by_media_type["text/html"].id == "html"
    pm.register(RstPlugin())
    converters = load_converters(pm)
    assert isinstance(converters.by_suffix[".pdf"].plugin, RstConverter)
    assert converters.by_suffix[".pdf"].id == "rst-test"
    (tmp_path / "a.rst").write_text("=== Title\nBody text.\n", encoding="utf-8")
    (tmp_path / "b.unknown").write_text("not read", encoding="utf-8")
    found, unknown = find_files([str(tmp_path)], converters=converters.by_suffix)
    [document] = found.read().documents
    assert (unknown.path.name, unknown.unsupported) == ("b.unknown", ".unknown")  # listed as skipped, never read
    assert unknown.refused.startswith("no converter reads .unknown files")
    assert (document.title, document.text) == ("from the plugin", "# Title\nBody text.\n")


def test_the_connection_goes_to_the_address_that_was_checked(monkeypatch):
    from duckgraph.core.web import fetch
    from tests.site_server import serve

    asked = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return {"site.invalid": ["127.0.0.1"], "evil.invalid": ["10.1.2.3"]}[host]

    monkeypatch.setattr(fetch, "resolve", resolve)
    with serve({"/a": ("text/plain", "pinned")}) as site:
        port = site.url.rsplit(":", 1)[1]
        fetcher = fetch.Fetcher(allow_private=True)
        try:  # the system cannot resolve .invalid names: the page comes only from the address checked
            response = fetcher.get(f"http://site.invalid:{port}/a")
        finally:
            fetcher.close()
        assert (response.body, response.url) == (b"pinned", f"http://site.invalid:{port}/a")
        assert site.hosts == [f"site.invalid:{port}"]  # the name is kept for the server
        with pytest.raises(FetchError, match=r"private, loopback or link-local address \(10\.1\.2\.3\)"):
            fetch.Fetcher().get(f"http://evil.invalid:{port}/a")
        assert asked == ["site.invalid", "evil.invalid"] and len(site.requests) == 1
