"""HTML through trafilatura: the main text without navigation, footers and ads, its headings kept as Markdown,
and the title and date the page states (htmldate reads them from the metadata and the page). A line of text that
would read as a heading is escaped (`\\# of open bugs`, see `support.markdown`)."""

from __future__ import annotations

from copy import deepcopy
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
        url = name if name.startswith(("http://", "https://")) else None
        options = dict(url=url, output_format="markdown", include_formatting=True, include_comments=False)
        page = _line_starts_escaped(deepcopy(tree))  # a copy: the metadata is read from the page as it is
        # A short page may not look like an article: then recall is favoured over cutting boilerplate.
        text = trafilatura.extract(page, **options) or trafilatura.extract(page, favor_recall=True, **options)
        if not text or not text.strip():
            raise ConversionError("no main text found in the page")
        meta = trafilatura.extract_metadata(tree, default_url=url)
        return ConvertedDocument(text=text, title=(meta.title or "").strip() if meta else "",
                                 time=meta.date if meta and meta.date else None)


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
