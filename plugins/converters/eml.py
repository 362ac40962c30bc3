"""Email messages (.eml, message/rfc822) through the standard library's `email` package (policy.default: headers
decoded, bodies decoded from base64 or quoted-printable to text in their charset). The Subject is the title and
the Date header the time; the text is the header lines From, To, Cc and Date, then the body: its text/plain part
(with the message's other inline text/plain parts after it), else its HTML part read as an HTML file is (html.py),
then the attachments, each named with its type and size (their bytes are no text). A message that has no text
part says so in its text. Quoted replies and signatures are the message's text and are kept."""

from __future__ import annotations

from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage

from duckgraph.plugins.converters.html import HtmlConverter
from duckgraph.plugins.converters.support import iso, markdown
from duckgraph.ports.converter import ConversionError, ConvertedDocument, DocumentConverter

#: The header lines that start the text, in this order.
_SHOWN = ("From", "To", "Cc", "Date")
#: A file with none of these is no email message (a text file named .eml, a damaged message).
_EMAIL_HEADERS = ("From", "To", "Subject", "Date", "Message-ID")
_BODY_TYPES = ("text/plain", "text/html")


class EmlConverter(DocumentConverter):
    id = "eml"
    suffixes = (".eml",)
    media_types = ("message/rfc822",)

    def convert(self, data: bytes, name: str) -> ConvertedDocument:
        try:
            message = message_from_bytes(data, policy=policy.default)
            if not any(message.get(header) for header in _EMAIL_HEADERS):
                raise ConversionError(f"not a readable EML file (no email headers: none of "
                                      f"{', '.join(_EMAIL_HEADERS)})")
            headers = {header: " ".join(str(message.get(header, "")).split()) for header in {*_SHOWN, "Subject"}}
            date = message["Date"].datetime if message.get("Date") is not None else None
            body = _body(message, name)
            attachments = [_described(part) for part in _attachments(message, body[0] if body else None)]
        except ConversionError:
            raise
        except Exception as exc:  # the parser is lenient: what it still raises (a charset Python does not know)
            raise ConversionError(f"not a readable EML file ({type(exc).__name__}: {exc})") from exc
        blocks = ["\n".join(f"{header}: {headers[header]}" for header in _SHOWN if headers[header])]
        blocks.append(body[1] if body else "This message has no text part.")
        if attachments:
            blocks.append("Attachments:\n" + "\n".join(f"- {a}" for a in attachments))
        return ConvertedDocument(text="\n\n".join(b for b in blocks if b), title=headers["Subject"], time=iso(date))


def _body(message: EmailMessage, name: str) -> tuple[EmailMessage, str] | None:
    """The message's body part and its text as Markdown: the text/plain part, with the other inline text/plain
    parts after it (a mail program that puts an image amid the text cuts it in several), else the HTML part
    converted by the HTML converter; None when it has neither."""
    if (plain := message.get_body(preferencelist=("plain",))) is not None:
        texts = [plain.get_content()] + [part.get_content() for part in _leaves(message) if part is not plain
                                         and part.get_content_type() == "text/plain" and not _attached(part)]
        return plain, markdown(text.strip() for text in texts if text.strip())
    if (html := message.get_body(preferencelist=("html",))) is not None:
        try:
            return html, HtmlConverter().convert(html.get_content().encode("utf-8"), name).text
        except ConversionError as exc:  # says the HTML was the message's (MissingExtraError stays one)
            raise type(exc)(f"its HTML part: {exc}") from exc
    return None


def _attachments(message: EmailMessage, body: EmailMessage | None) -> Iterator[EmailMessage]:
    """The parts that are no text of the message: attached or named files, and what is neither plain text nor
    HTML (an image, a calendar invitation, an attached message); not the HTML twin of a text/plain body."""
    for part in _leaves(message):
        if part is not body and (_attached(part) or part.get_content_type() not in _BODY_TYPES):
            yield part


def _attached(part: EmailMessage) -> bool:
    return part.is_attachment() or bool(part.get_filename())


def _leaves(part: EmailMessage) -> Iterator[EmailMessage]:
    """The parts that hold content, in order; an attached message is one part (its own parts are not read)."""
    if part.get_content_maintype() == "multipart" and part.is_multipart():
        for sub in part.iter_parts():
            yield from _leaves(sub)
    else:
        yield part


def _described(part: EmailMessage) -> str:
    """An attachment as "budget.xlsx (application/vnd.ms-excel, 48.2 KB)": an attached message without a file name
    is named by its subject."""
    payload = part.get_payload(decode=True)  # None for an attached message
    size = len(payload) if payload is not None else len(part.as_bytes())
    named = part.get_filename()
    if not named and part.get_content_type() == "message/rfc822" and (inner := part.get_content()) is not None:
        named = " ".join(str(inner.get("Subject", "")).split())
    return f"{named or 'unnamed'} ({part.get_content_type()}, {_size(size)})"


def _size(count: int) -> str:
    for unit, scale in (("MB", 2**20), ("KB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
