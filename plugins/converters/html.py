"""HTML through trafilatura: the main text without navigation, footers and ads, its headings kept as Markdown,
and the title and date the page states (htmldate reads them from the metadata and the page)."""

from __future__ import annotations

from duckgraph.plugins.converters.support import require
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
        # A short page may not look like an article: then recall is favoured over cutting boilerplate.
        text = trafilatura.extract(data, **options) or trafilatura.extract(data, favor_recall=True, **options)
        if not text or not text.strip():
            raise ConversionError("no main text found in the page")
        meta = trafilatura.extract_metadata(tree, default_url=url)
        return ConvertedDocument(text=text, title=(meta.title or "").strip() if meta else "",
                                 time=meta.date if meta and meta.date else None)
