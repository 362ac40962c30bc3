"""HTML through trafilatura: the main text without navigation, footers and ads, its headings and tables kept as
Markdown, a short page's as a long one's; and the title and the date the page states (htmldate reads the date from
its meta tags, JSON-LD, <time> elements and URL, else from a full date written in it; it does not guess one from a
year). A line of text that would read as a heading is escaped (`\\# of open bugs`, see `support.markdown`). What a
reader of the page does not see is dropped first (`_hidden_dropped`): hidden text is where a page plants
instructions for a model."""

from __future__ import annotations

import re
from configparser import ConfigParser
from copy import deepcopy
from functools import cache
from typing import Any

from duckgraph.plugins.converters.support import escaped, require
from duckgraph.ports.converter import ConversionError, ConvertedDocument, DocumentConverter


class HtmlConverter(DocumentConverter):
    id = "html"
    suffixes = (".html", ".htm", ".xhtml")
    media_types = ("text/html", "application/xhtml+xml")

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        trafilatura = require("trafilatura", "HTML")
        tree = trafilatura.load_html(data)
        if tree is None:
            raise ConversionError("not readable as HTML")
        if isinstance(tree.tag, str) and _gone(tree):  # a fragment whose one element is hidden
            raise ConversionError("no main text found in the page (all of it is hidden)")
        tree = _hidden_dropped(tree)  # the metadata too: a hidden <h1> could otherwise give the title
        url = name if name.startswith(("http://", "https://")) else None
        options = dict(url=url, output_format="markdown", include_formatting=True, include_comments=False)
        page = _line_starts_escaped(deepcopy(tree))  # a copy: the metadata is read from the page as it is
        # A page with no main text at all (only a list of links, say) is kept whole rather than refused.
        text = (trafilatura.extract(page, config=_short_main_text_accepted(), **options)
                or trafilatura.extract(page, favor_recall=True, **options))
        if not text or not text.strip():
            raise ConversionError("no main text found in the page")
        # Not htmldate's extensive search: it guesses from any year in the text, a footer's "© 2019" (or "valid from
        # March 2025") giving a page that states no date 1 January of that year.
        meta = trafilatura.extract_metadata(_copyright_year_dropped(tree), default_url=url, extensive=False)
        return ConvertedDocument(text=text, title=(meta.title or "").strip() if meta else "",
                                 time=meta.date if meta and meta.date else None)


@cache
def _short_main_text_accepted() -> ConfigParser:
    """trafilatura's settings without a MIN_EXTRACTED_SIZE: a main text shorter than it (250 characters) counts as
    a failed extraction, and its fallbacks take over, the last of them the text of the whole page as plain lines (the
    menu, the sidebar, a table one cell a line). A short page's main text is short: it is kept, as a long page's."""
    config = require("trafilatura.settings", "HTML").use_config()
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "0")
    return config


def _copyright_year_dropped(tree: Any) -> Any:
    """`tree` without its `<meta itemprop="copyrightYear">`: htmldate takes that year (its 1 January) for the page's
    date when no other meta tag states one, before it reads the page's JSON-LD and <time> elements; but it is the
    year of the rights, not the date of the text."""
    for meta in [meta for meta in tree.iter("meta") if (meta.get("itemprop") or "").lower() == "copyrightyear"]:
        meta.drop_tree()
    return tree


def _line_starts_escaped(tree: Any) -> Any:
    """`tree` with a "#" escaped where it starts a line after a <br> or a newline in <pre>: trafilatura escapes
    one that starts a block, not these (it escapes backticks and tildes, so fences, itself)."""
    for br in tree.iter("br"):
        if br.tail:
            text = br.tail.lstrip()
            br.tail = br.tail[:len(br.tail) - len(text)] + escaped(text, fences=False)
    for pre in tree.iter("pre"):
        for node in pre.iter():
            for part in ("text", "tail") if node is not pre else ("text",):
                if "\n" in (value := getattr(node, part) or ""):
                    first, *rest = value.split("\n")
                    setattr(node, part, "\n".join([first, *(escaped(line, fences=False) for line in rest)]))
    return tree


#: Elements whose content is never shown as the page's text: <noscript> shows only where scripts are off, which
#: is no browser a person reads with; a <template>'s content is inert until a script copies it.
_NEVER_SHOWN = frozenset({"noscript", "template"})
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_IMPORTANT = re.compile(r"!\s*important\s*$", re.IGNORECASE)


def _hidden_dropped(tree: Any) -> Any:
    """`tree` without what a person does not see: elements with the `hidden` attribute (not `until-found`, which
    the browser's find reveals, as it does a closed <details>), an inline style of `display: none` (or
    `content-visibility: hidden`), with `aria-hidden="true"`, <noscript> and <template>, each with its content
    (trafilatura drops every <input>, a hidden one's value with it); and the text of an inline `visibility:
    hidden` (or `collapse`), which its children inherit unless they say `visible` again. <html> and <body> are
    exempt: a page hidden whole until its scripts run (against a flash of unstyled text) shows that text. Only
    inline styles are read: a stylesheet's rules are not."""
    # The root itself is not looked at: a page whose root is hidden has no text to keep (`convert` says so).
    dropped = [element for element in tree.iterdescendants() if isinstance(element.tag, str) and _gone(element)]
    for element in dropped:
        # drop_tree keeps the element's tail, the text after it, which belongs to its parent. One inside an
        # element dropped before is already gone with it: dropping it from that detached subtree changes nothing.
        element.drop_tree()
    _invisible_text_cleared(tree, hidden=False)
    return tree


def _gone(element: Any) -> bool:
    tag = element.tag.lower()
    if tag in _NEVER_SHOWN:
        return True
    if tag in ("html", "body"):
        return False
    hidden = element.get("hidden")
    return ((hidden is not None and hidden.strip().lower() != "until-found")
            or (element.get("aria-hidden") or "").strip().lower() == "true"
            or (style := _style(element)).get("display") == "none" or style.get("content-visibility") == "hidden")


def _invisible_text_cleared(element: Any, hidden: bool) -> None:
    """The text of each element under `visibility: hidden` cleared (its own, and the tails of its children, which
    sit inside it), a child that says `visibility: visible` kept. Recursive: a page nests at most a few hundred
    deep (lxml's parser refuses deeper trees), well within Python's limit."""
    if element.tag not in ("html", "body"):
        visibility = _style(element).get("visibility")
        hidden = visibility in ("hidden", "collapse") or (hidden and visibility != "visible")
    if hidden:
        element.text = None
    for child in element:
        if hidden:
            child.tail = None
        if isinstance(child.tag, str):
            _invisible_text_cleared(child, hidden)


def _style(element: Any) -> dict[str, str]:
    """An element's inline style as {property: value}, both lowercased, read as a browser does: declarations
    split at ";", spaces and comments ignored, a later declaration winning over an earlier one unless that one
    is `!important` and the later is not. Only the keywords looked up here are compared, so no value needs more
    than this (none of them can hold a ";")."""
    style = element.get("style")
    if not style:
        return {}
    declarations: dict[str, tuple[str, bool]] = {}
    for declaration in _CSS_COMMENT.sub(" ", style).split(";"):
        name, colon, value = declaration.partition(":")
        if not colon:
            continue
        value = value.strip()
        important = _IMPORTANT.search(value) is not None
        value, name = _IMPORTANT.sub("", value).strip().lower(), name.strip().lower()
        if name not in declarations or important or not declarations[name][1]:
            declarations[name] = (value, important)
    return {name: value for name, (value, _) in declarations.items()}
