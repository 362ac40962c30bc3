"""The built-in document converters (ports/converter.py): PDF, HTML, DOCX, PPTX, EPUB and email (.eml). Their
libraries are the `documents` extra (email's is the standard library's, but for an HTML-only message's HTML),
imported only when a file is converted, so a missing one is reported for the file it concerns."""

from duckgraph.ports import hookimpl


@hookimpl
def register_converters(register):
    from duckgraph.plugins.converters.eml import EmlConverter
    from duckgraph.plugins.converters.epub import EpubConverter
    from duckgraph.plugins.converters.html import HtmlConverter
    from duckgraph.plugins.converters.office import DocxConverter, PptxConverter
    from duckgraph.plugins.converters.pdf import PdfConverter

    for converter in (PdfConverter, HtmlConverter, DocxConverter, PptxConverter, EpubConverter, EmlConverter):
        register(converter.id, converter)
