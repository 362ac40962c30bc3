"""A Markdown note's front matter: the leading block between two `---` lines that holds only YAML fields.

Its `title` and `date` give the document's title and time; its one-line fields are kept as the metadata. The
fields ingest does not read (an Obsidian meeting note's `attendees`, `tags`, `project`) are part of the note's
words: they are written as lines at the top of its text ("attendees: Ana, Ben", in the file's order, a list's
items joined), so that search finds them and reading the document shows them. No YAML parser is needed for that:
a field is a `key: value` line, with a list, a nested value or a block of text on the lines below it.
"""

from __future__ import annotations

import re

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
#: A top-level YAML field, `key: value` or `key:` (a list or nested value below it): as YAML, a colon starts a
#: value only before a space or the line's end ("9:30", "https://" are no fields).
_FIELD = re.compile(r"^([^\s#:'\"-][^:]*?)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
#: The items of a flow list (`[Ana, "Ben, Jr."]`): a quoted one may hold commas.
_FLOW_ITEM = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[^,]+)")
#: The fields ingest reads into the document's title and time: not repeated in its text.
_READ = frozenset({"title", "date"})


def read_markdown(text: str, *, front_matter: bool = True) -> tuple[str, str, str | None, dict[str, str]]:
    """(title, text, time, metadata) of a Markdown text: its front matter, when present, gives the title, the
    date (also kept in the metadata) and its other one-line fields as metadata, and is left out of the text, but
    for its fields other than the title and date, which start the text (see the module). A leading byte order
    mark (Notepad and some editors write one) is no text and would hide the front matter. A leading `---` block is
    front matter only when it is all YAML fields (see `_fields`): else it is the note's text (a note may start with
    a horizontal rule, and have another below), kept whole."""
    text = text.removeprefix("\ufeff")
    match = _FRONT_MATTER.match(text) if front_matter else None
    if match is None or (fields := _fields(match.group(1))) is None:
        return "", text, None, {}
    metadata = {key.lower(): _unquoted(value) for key, value, _ in fields if value and value[0] not in "|>"}
    title = metadata.pop("title", "")
    body = text[match.end():]
    properties = [f"{key}: {shown}" for key, value, below in fields
                  if key.lower() not in _READ and (shown := _shown(value, below))]
    text = "\n".join(properties) + "\n\n" + body if properties else body
    return title, text, metadata.get("date") or None, metadata


def _fields(block: str) -> list[tuple[str, str, list[str]]] | None:
    """The top-level fields of a YAML front matter block, in order, each as (key, the value on its line, the lines
    below it: a list's items, a nested value, a `|` or `>` block's text). None when the block is not all YAML
    fields: a line that is neither a field, nor a comment, nor below a field (indented, or a `- ` list item) is
    prose, so the block is text, not front matter (leaving out what it is not sure of would lose the note's
    words)."""
    fields: list[tuple[str, str, list[str]]] = []
    for line in block.splitlines():
        if match := _FIELD.match(line):
            fields.append((match.group(1), match.group(2) or "", []))
        elif fields and line.strip() and (line[0] in " \t" or line.startswith("-")):
            fields[-1][2].append(line)
        elif line.strip() and not line.startswith("#"):
            return None
    return fields or None


def _shown(value: str, below: list[str]) -> str:
    """A field's value as one line of text: a flow or block list's items joined with ", ", a block of text's lines
    with spaces; "" when it has none."""
    if value and value[0] in "|>":
        return " ".join(line.strip() for line in below if line.strip())
    if value:
        items = _FLOW_ITEM.findall(value[1:-1]) if _flow_list(value) else [value]
    else:  # a list or nested value below: its items, or its `key: value` lines, without comments and the keys
        # of the values nested deeper (`team:` above its own list)
        items = [item for line in below if not (item := line.strip().removeprefix("-").strip()).startswith("#")
                 and not item.endswith(":")]
    return ", ".join(shown for item in items if (shown := _unquoted(item.strip())))


def _flow_list(value: str) -> bool:
    # `[[Project]]` unquoted is an Obsidian link, not a list holding a list.
    return value.startswith("[") and value.endswith("]") and not value.startswith("[[")


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
