"""`duckgraph ingest` of real PDF, DOCX, HTML and Markdown files and of a site served on 127.0.0.1: the text
without navigation, headings as sections shown with the passages, the documents' own times, bad files reported
(a scanned PDF, a damaged one, a missing extra) without stopping the rest; a crawl within one site that honours
robots.txt and the sitemap, and replaces only the pages that changed. Real DuckDB file, real default model."""

from __future__ import annotations

import contextlib
import io
import sys
from datetime import datetime
from pathlib import Path

import pytest

from duckgraph.core.cli import main
from duckgraph.plugins.duckdb import DuckDBStore
from tests.documents import ARTICLE, write_eml, write_mixed_folder, write_pdf, write_scanned_pdf
from tests.site_server import serve

pytestmark = pytest.mark.model


@pytest.fixture
def env(tmp_path: Path, monkeypatch) -> Path:
    for name in ("DUCKGRAPH_DB", "DUCKGRAPH_NAMESPACE", "DUCKGRAPH_STORE", "DUCKGRAPH_EMBEDDER", "DUCKGRAPH_EXTRACTOR",
                 "DUCKGRAPH_FETCH_PRIVATE_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    monkeypatch.setenv("DUCKGRAPH_FETCH_DELAY", "0.01")  # polite in use, quick in tests
    return tmp_path


def run(db: Path, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*args, "--db", str(db)])
    return code, out.getvalue().strip(), err.getvalue()


def stored(db: Path) -> tuple[dict, dict]:
    """The documents by id, and each document's chunks as (section, text)."""
    store = DuckDBStore(db)
    store.open()
    try:
        documents = {d.id: d for d in store.list_documents("default", limit=1000)}
        chunks = {}
        for chunk in store.document_chunks("default", list(documents)):
            chunks.setdefault(chunk.document_id, []).append((chunk.section, chunk.text))
        return documents, chunks
    finally:
        store.close()


def test_a_folder_of_mixed_documents_keeps_text_sections_titles_and_times(env):
    folder = write_mixed_folder(env / "docs")
    db = env / "kb.duckdb"
    code, summary, _ = run(db, "ingest", str(folder))
    assert (code, summary) == (0, "4 documents stored, 0 unchanged, 0 skipped, 10 passages")
    documents, chunks = stored(db)
    pdf, docx, html, md = (documents[(folder / name).resolve().as_posix()]
                           for name in ("manual.pdf", "guide.docx", "flange.html", "release.md"))
    assert (pdf.title, pdf.time) == ("Widget Manual", datetime(2024, 3, 5))
    assert [s for s, _ in chunks[pdf.id]] == ["Installation", "Troubleshooting"]
    assert "quarter turn" in chunks[pdf.id][1][1] and "quarter turn" not in chunks[pdf.id][0][1]
    assert (docx.title, docx.time) == ("Ops Guide", datetime(2022, 1, 10))
    assert chunks[docx.id] == [("Backups", "Backups run nightly at 02:00 to the tape robot in the basement."),
                               ("Restores", "A restore needs a ticket approved by two administrators.")]
    assert (html.title, html.time) == ("Flange News", datetime(2023, 6, 1))
    for boilerplate in ("About us", "Shop the catalogue", "Cookie settings"):
        assert boilerplate not in html.text
    assert [s for s, _ in chunks[html.id]] == ["Flange News", "Flange News > Early years", "Flange News > Adoption"]
    assert (md.title, md.time, md.metadata) == ("Release notes", datetime(2024, 5, 2),
                                                {"date": "2024-05-02", "author": "Kim"})
    # Its front matter's author, which ingest does not read, starts its text (a passage before the headings).
    assert chunks[md.id] == [("", "author: Kim"), ("Release 2 > Fixes", "The parrot no longer squawks at midnight."),
                             ("Release 2 > Known issues", "The kettle whistles twice.")]

    # Again: nothing changed, nothing replaced; a changed file is replaced.
    assert run(db, "ingest", str(folder))[1] == "0 documents stored, 4 unchanged, 0 skipped, 0 passages"
    (folder / "release.md").write_text("---\ntitle: Release notes\ndate: 2024-05-03\n---\n## Fixes\n\nAll.\n",
                                       encoding="utf-8")
    assert run(db, "ingest", str(folder))[1] == ("1 documents stored (1 replaced), 3 unchanged, 0 skipped, "
                                                 "1 passages")

    # The time a PDF states is part of it: the same text with another creation date replaces it; the same file
    # written again (a new modification time) does not.
    manual = folder / "manual.pdf"
    sections = {"Installation": "Run the installer.", "Troubleshooting": "Tighten it a quarter turn."}
    write_pdf(manual, sections, title="Widget Manual", created=datetime(2024, 3, 5))
    assert run(db, "ingest", str(manual))[1].startswith("1 documents stored (1 replaced)")
    write_pdf(manual, sections, title="Widget Manual", created=datetime(2025, 1, 1))
    assert run(db, "ingest", str(manual))[1].startswith("1 documents stored (1 replaced)")
    assert stored(db)[0][pdf.id].time == datetime(2025, 1, 1)
    write_pdf(manual, sections, title="Widget Manual", created=datetime(2025, 1, 1))
    assert run(db, "ingest", str(manual))[1] == "0 documents stored, 1 unchanged, 0 skipped, 0 passages"


def test_search_shows_the_section_and_the_file_of_the_answer(env):
    folder = write_mixed_folder(env / "docs")
    db = env / "kb.duckdb"
    run(db, "ingest", str(folder))
    code, text, _ = run(db, "search", "What should I do when the widget hums?", "--max-passages", "1")
    assert code == 0
    passage = text.split("Passages:\n", 1)[1].splitlines()[0]
    assert passage.startswith(f"[{(folder / 'manual.pdf').resolve().as_posix()}#")
    assert "Widget Manual § Troubleshooting: If the widget hums" in passage
    code, text, _ = run(db, "search", "Who approves a restore?", "--max-passages", "1")
    assert "Ops Guide § Restores: A restore needs a ticket" in text


def test_bad_files_are_reported_with_why_and_the_rest_is_stored(env, monkeypatch):
    folder = env / "docs"
    folder.mkdir()
    write_scanned_pdf(folder / "scan.pdf")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    (folder / "ok.md").write_text("# Notes\n\nThe kettle whistles twice.\n", encoding="utf-8")
    db = env / "kb.duckdb"
    code, summary, err = run(db, "ingest", str(folder))
    assert (code, summary) == (0, "1 documents stored, 0 unchanged, 2 skipped, 1 passages")
    # Each reason names the converter that gave it.
    assert "scan.pdf: converter 'pdf': no text in its 1 pages: a scanned PDF? Run OCR on it first" in err
    assert "broken.pdf: converter 'pdf': not a readable PDF" in err

    # A format whose library is missing is reported with the install command, not skipped silently.
    write_pdf(folder / "manual.pdf", {"Intro": "A PDF that needs pdfminer."})
    monkeypatch.setitem(sys.modules, "pdfminer.high_level", None)
    code, summary, err = run(db, "ingest", str(folder / "manual.pdf"))
    assert (code, summary) == (0, "0 documents stored, 0 unchanged, 1 skipped, 0 passages")
    assert "manual.pdf: converter 'pdf': reading PDF needs the documents extra" in err
    assert "pip install 'duckgraph[documents]'" in err


def test_a_folder_of_email_messages_is_stored_as_mail_and_found(env):
    """`duckgraph ingest mail/` skipped every .eml ("to read a file as text, give it by name"), and one given by name
    was stored as raw MIME (base64 and quoted-printable bodies, the HTML part, the attachment's bytes) with the
    ingest's time, not the Date header's (probe 39 bug 1)."""
    folder = env / "mail"
    folder.mkdir()
    write_eml(folder / "deck.eml", {
        "From": "Sarah Kim <sarah.kim@northwind.example>", "To": "Alex Rivera <alex.rivera@northwind.example>",
        "Subject": "Q4 budget deck for Thursday", "Date": "Tue, 24 Nov 2026 08:47:00 -0500"},
        plain="Hi Alex,\n\nPlease update the Q4 budget deck. The budget review with the CFO is on Thursday December "
              "3, 2026 at 2pm in the large conference room.\n\n-- \nSarah Kim\n",
        html="<p>Hi Alex,</p><p>Please update the Q4 budget deck.</p>",
        attachments=(("Q4-budget-draft.xlsx", "application/octet-stream", b"PK" + bytes(318)),))
    write_eml(folder / "pricing.eml", {"From": "Zoë Müller <zoe.mueller@acme.example>", "Subject": "Re: pricing",
                                       "Date": "Fri, 23 Oct 2026 05:30:00 -0500"},
              plain="I spoke with our CFO, José Núñez: €37 per seat per month.\n", encoding="quoted-printable")
    (folder / "notes.eml").write_text("Just some words, saved with the wrong suffix.\n", encoding="utf-8")
    db = env / "kb.duckdb"
    code, summary, err = run(db, "ingest", str(folder))
    assert code == 0 and summary.startswith("2 documents stored, 0 unchanged, 1 skipped, ")  # passages: chunking's
    assert "notes.eml: converter 'eml': not a readable EML file (no email headers" in err
    documents, chunks = stored(db)
    deck, pricing = (documents[(folder / name).resolve().as_posix()] for name in ("deck.eml", "pricing.eml"))
    assert (deck.title, deck.time) == ("Q4 budget deck for Thursday", datetime(2026, 11, 24, 13, 47))
    assert deck.text.startswith("From: Sarah Kim <sarah.kim@northwind.example>\n"
                                "To: Alex Rivera <alex.rivera@northwind.example>\n"
                                "Date: Tue, 24 Nov 2026 08:47:00 -0500\n\nHi Alex,\n\nPlease update the Q4 budget")
    assert deck.text.endswith("-- \nSarah Kim\n\nAttachments:\n- Q4-budget-draft.xlsx (application/octet-stream, "
                              "320 bytes)")
    for raw in ("Content-Transfer-Encoding", "base64", "<p>", "UEsAAA"):
        assert raw not in deck.text
    assert (pricing.title, pricing.time) == ("Re: pricing", datetime(2026, 10, 23, 10, 30))
    assert "José Núñez: €37 per seat" in pricing.text and "=C3=" not in pricing.text

    code, text, _ = run(db, "search", "When is the budget review with the CFO?", "--max-passages", "1")
    assert code == 0
    passage = text.split("Passages:\n", 1)[1].splitlines()[0]
    assert passage.startswith(f"[{deck.id}#") and "The budget review with the CFO is on Thursday December 3" in passage


def site_pages(other: str) -> dict[str, tuple[str, str]]:
    html = "text/html; charset=utf-8"
    return {
        "/robots.txt": ("text/plain", "User-agent: *\nDisallow: /private/\n"),
        "/sitemap.xml": ("application/xml", '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                                            'sitemap/0.9"><url><loc>SITE/hidden</loc></url></urlset>'),
        "/": (html, "<html><head><title>Home</title></head><body><article><h1>Welcome</h1><p>The widget shop "
                    "sells widgets, flanges and gaskets to factories all over Norway.</p><p><a href='/news'>News"
                    "</a> <a href='/private/keys'>Keys</a> <a href='" + other + "/'>Partner</a></p></article>"
                    "</body></html>"),
        "/news": ("text/html", ARTICLE.replace('href="/about"', 'href="/history#top"')),
        "/history": ("text/markdown", "# History\n\nThe shop opened in Bergen in 1962, selling gaskets first.\n"),
        "/hidden": ("text/plain", "This page is only in the sitemap: the warehouse is in Trondheim."),
        "/private/keys": ("text/plain", "The safe's combination is 1234."),
    }


def test_a_crawl_stays_on_the_site_honours_robots_and_replaces_what_changed(env, monkeypatch):
    db = env / "kb.duckdb"
    with serve({"/": ("text/html", "<html><body><p>Another site.</p></body></html>")}) as other, \
            serve({}) as site:
        site.pages.update(site_pages(other.url))
        site.pages["/sitemap.xml"] = ("application/xml", site.pages["/sitemap.xml"][1].replace("SITE", site.url))

        # Loopback is refused unless allowed: a fetching server must opt in to reach its own network.
        code, summary, err = run(db, "ingest", site.url + "/")
        assert summary.startswith("0 documents stored") and "private, loopback or link-local" in err
        assert site.requests == []

        monkeypatch.setenv("DUCKGRAPH_FETCH_PRIVATE_HOSTS", "1")
        code, summary, err = run(db, "ingest", site.url + "/", "--crawl", "--depth", "2")
        assert (code, summary.split(",")[0]) == (0, "4 documents stored")
        assert f"skipped {site.url}/private/keys: forbidden by the site's robots.txt" in err
        assert f"skipped {site.url}/shop: HTTP 404 Not Found" in err  # the article's navigation links it
        documents, chunks = stored(db)
        assert sorted(documents) == sorted(site.url + p for p in ("/", "/news", "/history", "/hidden"))
        assert documents[site.url + "/news"].title == "Flange News"
        assert chunks[site.url + "/history"] == [("History", "The shop opened in Bergen in 1962, selling gaskets "
                                                             "first.")]
        assert other.requests == []  # a link to another site is not followed
        assert "/private/keys" not in [path for path, _ in site.requests]
        agents = {agent for _, agent in site.requests}
        assert len(agents) == 1 and agents.pop().startswith("duckgraph/")  # one clear User-Agent

        # The same crawl again: only the page that changed is replaced.
        site.pages["/hidden"] = ("text/plain", "This page is only in the sitemap: the warehouse moved to Oslo.")
        code, summary, _ = run(db, "ingest", site.url + "/", "--crawl", "--depth", "2")
        assert summary.startswith("1 documents stored (1 replaced), 3 unchanged, 2 skipped")
        assert "Oslo" in stored(db)[0][site.url + "/hidden"].text

        # Without --crawl only the page given is fetched; --max-pages bounds a crawl.
        site.requests.clear()
        run(db, "ingest", site.url + "/news")
        assert [p for p, _ in site.requests] == ["/robots.txt", "/news"]
        site.requests.clear()
        run(db, "ingest", site.url + "/", "--crawl", "--max-pages", "1")
        assert [p for p, _ in site.requests if p not in ("/robots.txt", "/sitemap.xml")] == ["/"]


def test_prune_after_a_whole_crawl_deletes_the_pages_gone_from_the_url_s_folder(env, monkeypatch):
    monkeypatch.setenv("DUCKGRAPH_FETCH_PRIVATE_HOSTS", "1")
    db = env / "kb.duckdb"

    def index(*links: str) -> tuple[str, str]:
        anchors = " ".join(f"<a href='{link}'>{link}</a>" for link in links)
        return ("text/html", "<html><head><title>Docs</title></head><body><article><h1>Docs</h1><p>The manuals of "
                             f"the widget shop, for gaskets and flanges alike.</p><p>{anchors}</p></article></body>"
                             "</html>")

    with serve({"/docs/": index("/docs/a", "/docs/b", "/docs/c", "/blog"),
                "/docs/a": ("text/plain", "Gaskets are replaced yearly."),
                "/docs/b": ("text/plain", "Flanges are tightened a quarter turn."),
                "/docs/c": ("text/plain", "Widgets hum when loose."),
                "/blog": ("text/plain", "The shop's blog.")}) as site:
        crawl = ("ingest", site.url + "/docs/", "--crawl", "--depth", "1", "--prune")
        assert run(db, *crawl)[1].startswith("5 documents stored")
        # A page that fails to load makes the crawl partial: nothing is pruned (what it links to would look gone).
        site.pages["/docs/"] = index("/docs/a", "/docs/c")
        site.pages["/docs/a"] = ("status", "503")
        code, summary, err = run(db, *crawl)
        assert "pruned 0 documents" in summary
        assert f"not pruning {site.url}/docs/: the crawl was not whole ({site.url}/docs/a could not be fetched)" in err
        # A whole crawl: b (no longer linked) and c (now 404) are gone; the blog is outside /docs/ and stays.
        site.pages["/docs/a"] = ("text/plain", "Gaskets are replaced yearly.")
        del site.pages["/docs/c"]
        code, summary, err = run(db, *crawl)
        assert "pruned 2 documents" in summary and "not pruning" not in err
        assert sorted(stored(db)[0]) == sorted(site.url + p for p in ("/docs/", "/docs/a", "/blog"))
        # A crawl cut at --max-pages prunes nothing either.
        site.pages["/docs/"] = index("/docs/a")
        code, summary, err = run(db, *crawl, "--max-pages", "1")
        assert "pruned 0 documents" in summary and "stopped at 1 pages" in err


def test_sections_survive_export_and_import(env):
    folder = write_mixed_folder(env / "docs")
    db, copy, dump = env / "kb.duckdb", env / "copy.duckdb", env / "kb.jsonl"
    run(db, "ingest", str(folder))
    assert run(db, "export", "-o", str(dump))[0] == 0
    assert run(copy, "import", str(dump))[0] == 0
    assert stored(copy)[1] == stored(db)[1]
