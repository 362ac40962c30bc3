"""A short saved page is read as a long one is (plugins/converters/html.py): its menu, sidebar and footer dropped,
its table a Markdown table. It was read whole, as plain lines ("Home | Shop | About us ... Popular posts", a price
list one cell after another): under 250 characters of main text trafilatura gives up on the main text. And a page's
time is a date it states, never one guessed from a year in its text: a footer's "© 2019" made a page that states
no date one of 1 January 2019, hidden from a search for what is recent."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckgraph.core.domain.chunking import chunk_sections
from duckgraph.plugins.converters.html import HtmlConverter

MENU = ('<div class="menu"><a href="/">Home</a> | <a href="/shop">Shop</a> | <a href="/about">About us</a> | '
        '<a href="/contact">Contact</a> | <a href="/careers">Careers</a> | <a href="/blog">Blog</a></div>')
SIDEBAR = ('<div class="sidebar"><h3>Popular posts</h3><ul><li><a href="/p1">Ten tips for summer</a></li>'
           '<li><a href="/p2">Why we love bikes</a></li></ul></div>')
FOOTER = "<footer>Imprint | Privacy | Terms</footer>"
PRICES = ("<table><tr><th>Item</th><th>Price</th><th>Stock</th></tr><tr><td>Blue widget</td><td>12.50</td><td>40</td>"
          "</tr><tr><td>Red widget</td><td>14.00</td><td>0</td></tr></table>")
PRICE_LIST = ("# Price list\n\nAll prices include VAT.\n\n| Item | Price | Stock | \n|---|---|---|\n"
              "| Blue widget | 12.50 | 40 | \n| Red widget | 14.00 | 0 |")


def page(body: str, head: str = "") -> str:
    return f"<!doctype html><html><head><title>Store</title>{head}</head><body>{body}</body></html>"


def converted(tmp_path: Path, html: str):
    """`html` saved as a file and converted as ingest reads it."""
    path = tmp_path / "page.html"
    path.write_text(html, encoding="utf-8")
    return HtmlConverter().convert(path.read_bytes(), str(path))


def test_a_short_page_is_stored_without_its_menu_sidebar_and_footer(tmp_path: Path):
    html = page(f'{MENU}<div class="content"><p>Our store is open Monday to Friday from 9 to 18.</p></div>'
                f"{SIDEBAR}{FOOTER}")
    assert converted(tmp_path, html).text == "Our store is open Monday to Friday from 9 to 18."


def test_a_short_page_s_table_is_a_markdown_table_kept_with_its_header(tmp_path: Path):
    html = page(f"<nav><a href='/'>Home</a></nav><main><h1>Price list</h1><p>All prices include VAT.</p>{PRICES}"
                f"</main>{FOOTER}")
    text = converted(tmp_path, html).text
    assert text == PRICE_LIST
    assert chunk_sections(text) == [("Price list", PRICE_LIST.removeprefix("# Price list\n\n"))]


#: Short pages whose text is not in an article's paragraphs: all of it is kept.
PLAIN = {
    "text-in-the-body": ("Gaskets last ten years away from sunlight.", "Gaskets last ten years away from sunlight."),
    "a-div": ("<div>Gaskets last ten years away from sunlight.</div>", "Gaskets last ten years away from sunlight."),
    "spans": ("<div><span>Opening hours</span>: <span>9 to 18</span></div>", "Opening hours: 9 to 18"),
    "lines": ("Gaskets last ten years<br>Flanges a quarter turn", "Gaskets last ten years\n\nFlanges a quarter turn"),
    "a-list": ("<ul><li>Milk from the farm</li><li>Eggs, a dozen</li></ul>", "- Milk from the farm\n- Eggs, a dozen"),
    "a-table-alone": (PRICES, PRICE_LIST.split("\n\n", 2)[2]),
    "only-links": ("<ul><li><a href='/a'>Annual report 2024</a></li><li><a href='/b'>Annual report 2023</a></li>"
                   "</ul>", "Annual report 2024\nAnnual report 2023"),
}


@pytest.mark.parametrize(("body", "text"), PLAIN.values(), ids=PLAIN.keys())
def test_a_short_page_keeps_its_text(tmp_path: Path, body: str, text: str):
    assert converted(tmp_path, page(body)).text == text


COPYRIGHT_YEAR = '<meta itemprop="copyrightYear" content="2019">'
PRICING = "<main><h1>Pricing</h1><p>The Pro plan costs 49 euros per month.</p>{}</main>{}"
#: Years a page's text mentions, and a copyright year in its metadata: none of them is the date of the page.
UNDATED = {
    "copyright-sign-in-the-footer": page(PRICING.format("", "<footer>© 2019 Example GmbH</footer>")),
    "copyright-in-the-footer": page(PRICING.format("", "<footer>Copyright 2024</footer>")),
    "a-month-in-the-text": page(PRICING.format("<p>Prices are valid from March 2025.</p>", "")),
    "a-year-in-the-heading": page("<h1>Annual report 2020</h1><p>Sales grew by a tenth.</p>"),
    "a-copyright-year-meta-tag": page(PRICING.format("", ""), COPYRIGHT_YEAR),
}


@pytest.mark.parametrize("html", UNDATED.values(), ids=UNDATED.keys())
def test_a_year_in_a_page_is_not_its_date(tmp_path: Path, html: str):
    # No time: ingest takes the file's modification time (a web page's Last-Modified) instead.
    assert converted(tmp_path, html).time is None


#: Where a page states its date (in its head, or in its body), a copyright year on it too.
STATED = {
    "a-meta-tag": ('<meta property="article:published_time" content="2023-06-01">', ""),
    "json-ld": ('<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Article", '
                '"datePublished": "2023-06-01T10:00:00Z"}</script>', ""),
    "a-time-element": ("", '<p>Posted on <time datetime="2023-06-01">1 June</time>.</p>'),
}


@pytest.mark.parametrize(("head", "body"), STATED.values(), ids=STATED.keys())
def test_the_date_a_page_states_is_its_date(tmp_path: Path, head: str, body: str):
    html = page(PRICING.format(body, "<footer>© 2019 Example GmbH</footer>"), head + COPYRIGHT_YEAR)
    assert converted(tmp_path, html).time == "2023-06-01"
