"""Splitting documents into passages small enough to embed well, and at their Markdown headings: each passage
knows its section, the path of headings above it ("Installation > Linux"). A code or configuration file is no
Markdown: its "#" lines are comments (`markdown_headings`). A Markdown table is cut between its rows, and each
passage of it after the first starts with its header row and delimiter line (`_Table`). An email's quoted messages
and its signature start passages of their own (`mail_blocks`), so that a reply's own words are one: its vector is
not taken over by the history it quotes, nor by a legal disclaimer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

#: all-MiniLM-L6-v2 reads 256 word pieces, roughly 1,000 characters of English.
DEFAULT_CHUNK_CHARS = 1_000
DEFAULT_OVERLAP_CHARS = 150
#: The passage path's separator, between the headings of a section and the ones above it.
SECTION_SEPARATOR = " > "
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
#: Where a sentence ends: the space after its final stop.
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_BREAKS = (re.compile(r"\n\s*\n"), SENTENCE_BREAK, re.compile(r"\s+"))
#: Where a sentence or a line starts: the overlap of the next passage starts there where it can (`chunk_text`).
_OPENING = re.compile(r"(?<=[.!?])\s+|\n\s*")
#: A Markdown table's delimiter line, below its header row: "|---|:--:|", "--- | ---".
TABLE_DELIMITER = re.compile(r"^ {0,3}(?=[^|]*\|)\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?\s*$")
#: The suffixes of code and configuration files, whose "#" lines are comments ("  # production database" in YAML,
#: "# Push to ECR" in a shell script), a preprocessor's ("# define") or code, never Markdown headings; and of data
#: and log files (".csv", ".tsv", ".log"), a line a row or an event, which folded together run into each other.
#: Not the suffixes of web pages (".php", ".html"): a page fetched by its URL is converted to Markdown.
_CODE_SUFFIXES = frozenset(
    ".bash .bat .c .cc .cfg .cjs .cmake .conf .cpp .cs .csv .cxx .dockerfile .env .ex .exs .fish .go .gradle .h .hcl "
    ".hpp .ini .java .jl .js .json .jsx .kt .kts .log .lua .mjs .mk .nim .nix .pl .pm .properties .ps1 .py .pyi .r "
    ".rb .rs .scala .service .sh .sql .swift .tcl .tf .tfvars .toml .ts .tsv .tsx .yaml .yml .zsh".split())
#: Code and configuration files known by their whole name, and the start of the names of their variants
#: (".env.local", "Dockerfile.dev").
_CODE_NAMES = frozenset(
    ".bash_profile .bashrc .dockerignore .editorconfig .env .gitattributes .gitignore .npmrc .profile .zshrc brewfile "
    "cmakelists.txt constraints.txt containerfile dockerfile gemfile gnumakefile justfile makefile pipfile procfile "
    "rakefile requirements.txt vagrantfile".split())
_CODE_NAME_STARTS = (".env.", "dockerfile.", "containerfile.", "makefile.")
_MARKDOWN_SUFFIXES = (".md", ".markdown")
#: The quote markers that start a line of a quoted message: "> ", "> > ", or ">>" as RFC 3676 writes them.
_QUOTE_MARKERS = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+")
#: The line that introduces a quoted message: "On Tue, Mar 3, 2026 at 10:02 Sarah <sarah@x.com> wrote:", which a
#: mail program may wrap, its "On ..." a line or two above.
_ATTRIBUTION = re.compile(r"\bwrote:\s*$", re.IGNORECASE)
_ATTRIBUTION_START = re.compile(r"^\s*On\s")
#: The line above a forwarded or Outlook-quoted message, and the first two lines of its header block.
_SEPARATOR = re.compile(r"^\s*-{2,}\s*(?:Original Message|Forwarded message)\s*-{2,}\s*$", re.IGNORECASE)
_HEADER_FROM = re.compile(r"^\s*From:\s*\S", re.IGNORECASE)
_HEADER_SENT = re.compile(r"^\s*(?:Sent|Date):\s*\S", re.IGNORECASE)
#: The signature delimiter line: "-- " (RFC 3676), often written without its space.
_SIGNATURE = re.compile(r"^--[ \t]?$")
#: The list of an email's attached files below its text, as the email converter writes it ("Attachments:", then a
#: "- name (type, size)" line each): it is no part of the signature above it.
_ATTACHMENTS = re.compile(r"^Attachments:[ \t\r]*$")


def chunk_text(text: str, max_chars: int = DEFAULT_CHUNK_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS) -> list[str]:
    """Passages of at most `max_chars`, cut at paragraph, then sentence, then word boundaries; a Markdown table
    between its rows, each passage of its rows after the first starting with its header row and delimiter line.

    Consecutive passages share up to `overlap` characters so a fact split by a cut is still whole in one; the
    shared part starts at a sentence or a line where one starts within it.
    """
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    tables = _tables(text, max_chars)
    chunks: list[str] = []
    start = 0
    while start < len(text):
        table = next((t for t in tables if t.body <= start < t.end), None)
        head = text[table.start:table.body] if table else ""  # a table's rows are read by its header
        end = min(start + max_chars - len(head), len(text))
        if end < len(text):
            end = _best_cut(text, start, end, tables)
        piece = text[start:end].strip()
        if piece:
            chunks.append(head + piece)
        if end >= len(text):
            break
        next_start = max(end - overlap, start + 1)
        # Start the overlap at a sentence or a line where one starts within it, else at a word boundary: no
        # passage begins mid-word, nor mid-sentence where it can help it; in a table, at a row.
        opening = _OPENING.search(text, next_start, end)
        if opening and opening.end() < end:
            start = opening.end()
        else:
            space = text.find(" ", next_start, end)
            start = space + 1 if space != -1 else end
        start = next((t.row_start(text, start, end) for t in tables if t.start < start < t.end), start)
    return chunks


def _best_cut(text: str, start: int, end: int, tables: list[_Table]) -> int:
    window = text[start:end]
    tables = [t for t in tables if t.start < end and t.end > start]  # those the window holds part of
    for pattern in _BREAKS:
        cuts = [m.end() for m in pattern.finditer(window)
                if m.end() > len(window) // 2 and not any(t.inside_row(text, start + m.end()) for t in tables)]
        if cuts:
            return start + cuts[-1]
    if not tables:
        return end
    # Rows longer than half a passage: the end of one, or the start of the table, in the window's first half
    # rather than a cut inside a row; a row longer than a passage is cut as prose is.
    rows = [cut for t in tables for cut in [t.start, *range(max(start, t.body) + 1, min(end, t.end + 1))]
            if start < cut < end and text[cut - 1] == "\n" and not t.inside_row(text, cut)]
    return max(rows) if rows else _best_cut(text, start, end, [])


@dataclass(frozen=True)
class _Table:
    """A Markdown table of a text: its header row and delimiter line from `start` to `body` (the start of its
    first row), its rows to `end` (the end of the last one). A cut falls between two rows, not inside one nor in
    the header, so that a passage of its rows holds them whole below the header repeated (`chunk_text`)."""

    start: int
    body: int
    end: int

    def inside_row(self, text: str, cut: int) -> bool:
        """Whether cutting at `cut` splits the header or a row of the table, or leaves the header without rows."""
        return self.start < cut <= self.body or (self.body < cut < self.end and text[cut - 1] != "\n")

    def row_start(self, text: str, start: int, end: int) -> int:
        """`start` moved to the start of the row it is in (the row after, not before it: no later than `end`), or
        to the table's first row from its header."""
        if start <= self.body:
            return min(self.body, end) if start > self.start else start
        if text[start - 1] == "\n":
            return start
        newline = text.find("\n", start, end)
        return newline + 1 if newline != -1 else end


def _tables(text: str, max_chars: int) -> list[_Table]:
    """The Markdown tables of `text` outside fenced code blocks: a row with a "|" above a delimiter line, and the
    lines with a "|" below it. Not a table whose header takes half a passage: repeated, it would crowd out the rows."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found: list[_Table] = []
    fenced = False
    i = 0
    while i + 2 < len(lines):
        if _FENCE.match(lines[i]):
            fenced = not fenced
        elif (not fenced and "|" in lines[i] and TABLE_DELIMITER.match(lines[i + 1])
              and starts[i + 2] - starts[i] <= max_chars // 2):
            last = i + 2  # the line after the last row
            while last < len(lines) and "|" in lines[last] and lines[last].strip():
                last += 1
            if last > i + 2:
                found.append(_Table(starts[i], starts[i + 2], starts[last - 1] + len(lines[last - 1].rstrip("\r"))))
            i = last
            continue
        i += 1
    return found


def chunk_sections(text: str, max_chars: int = DEFAULT_CHUNK_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS, *,
                   headings: bool = True) -> list[tuple[str, str]]:
    """(section, passage) pairs: `text` cut at its Markdown headings, then each section as `chunk_text` cuts it.
    A passage never spans two sections; the heading lines themselves are left out (the section names them). Without
    `headings` (a code or configuration file: `markdown_headings`), the text is one section, "", every line kept.
    Quoted messages and signatures start passages of their own (`mail_blocks`), not in a code or configuration
    file, whose ">" and "--" lines are code."""
    parts = sections(text) if headings else [("", text)]
    return [(section, passage) for section, body in parts for block in (mail_blocks(body) if headings else [body])
            for passage in chunk_text(block, max_chars, overlap)]


def mail_blocks(text: str) -> list[str]:
    """`text` cut into blocks where an email's quoted message starts (its lines starting with ">", with the
    attribution line above them: "On ... Sarah wrote:"; a forwarded or Outlook-quoted message's header block,
    "From: ..." then "Sent: ..." or "Date: ...", with the "-----Original Message-----" line above it) and where a
    signature starts (its "-- " delimiter line) and ends (an email's attachments list below it), outside fenced
    code blocks. A quote starts a block after a blank line or an attribution only: a ">" line right below text (a
    Python prompt's ">>>" below its output) goes on with it. The lines that hold nothing but quote markers at
    either end of a block are left out."""
    lines = text.split("\n")
    depth = [_quote_depth(line) for line in lines]
    content = [_QUOTE_MARKERS.sub("", line) for line in lines]
    cuts = [0]
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        if fenced or i == 0:
            continue
        start = None
        if _SIGNATURE.match(content[i].rstrip("\r")) or _SEPARATOR.match(content[i]):
            start = i
        elif _HEADER_FROM.match(content[i]) and i + 1 < len(lines) and _HEADER_SENT.match(content[i + 1]):
            start = i - 1 if _SEPARATOR.match(content[i - 1]) else i
        elif depth[i] > depth[i - 1]:
            start = _quote_start(depth, content, i)
        elif _ATTACHMENTS.match(line) and not lines[i - 1].strip() and is_signature(content[cuts[-1]]):
            start = i
        if start is not None and start > cuts[-1]:
            cuts.append(start)
    blocks = []
    for first, end in zip(cuts, [*cuts[1:], len(lines)]):
        while first < end and not content[first].strip():
            first += 1
        while end > first and not content[end - 1].strip():
            end -= 1
        if first < end:
            blocks.append("\n".join(lines[first:end]))
    return blocks


def _quote_depth(line: str) -> int:
    markers = _QUOTE_MARKERS.match(line)
    return markers.group().count(">") if markers else 0


def _quote_start(depth: list[int], content: list[str], i: int) -> int | None:
    """Where the quote whose first line is `i` starts its block: at its attribution line (with the "On ..." line
    or two above a wrapped one), else at `i` when a blank line is above it, else nowhere (None)."""
    above = i - 1
    while above >= 0 and depth[above] < depth[i] and not content[above].strip():
        above -= 1
    if above < 0 or depth[above] >= depth[i]:
        return i if above < i - 1 else None
    if not _ATTRIBUTION.search(content[above]):
        return i if above < i - 1 else None
    for start in range(above, max(above - 3, -1), -1):
        if depth[start] != depth[above] or not content[start].strip():
            break
        if _ATTRIBUTION_START.match(content[start]):
            return start
    return above


def is_signature(text: str) -> bool:
    """Whether a passage is an email's signature, its own or a quoted one: it starts with the "-- " delimiter line,
    as `mail_blocks` starts one."""
    return bool(_SIGNATURE.match(_QUOTE_MARKERS.sub("", text.lstrip().split("\n", 1)[0]).rstrip("\r")))


def unquoted(text: str) -> str:
    """A passage's words as a reply that quotes them holds them: each line without its quote markers, the lines
    that only introduce a quote (an attribution, "-----Original Message-----") left out, whitespace collapsed."""
    return " ".join(word for line in text.splitlines() if not _ATTRIBUTION.search(line)
                    and not _SEPARATOR.match(content := _QUOTE_MARKERS.sub("", line)) for word in content.split())


def markdown_headings(document_id: str, title: str, text: str) -> bool:
    """Whether the document's "#" lines may be Markdown headings: not when its id, or its title where the id names
    no Markdown file, names a code or configuration file (`_CODE_SUFFIXES`, `_CODE_NAMES`: "config/app.yml",
    "deploy.sh", "Dockerfile", ".env"), nor when the text starts with a script's "#!" line. There they are
    comments, which a heading would cut out of the passage's text."""
    if text.startswith("#!"):
        return False
    names = [_file_name(document_id)]
    if not names[0].endswith(_MARKDOWN_SUFFIXES):
        names.append(_file_name(title))
    return not any(name in _CODE_NAMES or name.startswith(_CODE_NAME_STARTS)
                   or ("." in name[1:] and name[name.rindex("."):] in _CODE_SUFFIXES) for name in names)


def keeps_lines(document_id: str, title: str, text: str) -> bool:
    """Whether a passage is code or configuration, whose line breaks and indentation are part of what it says: a
    passage of a code or configuration file (not `markdown_headings`: by its document's id or title, or a "#!"
    line, which only the file's first passage starts with), or one holding a fence of a Markdown code block. Not
    which of its lines lie inside the block: a passage cut from a long block may hold its closing fence alone."""
    return not markdown_headings(document_id, title, text) or any(_FENCE.match(line) for line in text.splitlines())


def _file_name(name: str) -> str:
    """The last part of a path or URL, lower case, without a URL's query or fragment or a long file's part mark
    ("docs/app.yml#part-2": `document_ids.PART`)."""
    return re.split(r"[/\\]", re.split(r"[?#]", name.strip(), maxsplit=1)[0])[-1].lower()


def sections(text: str) -> list[tuple[str, str]]:
    """(section path, body) of each part of `text` that has a body, in order; "" is the path of the text before
    the first heading. `#` lines inside fenced code blocks are code, not headings."""
    found: list[tuple[str, str]] = []
    body: list[str] = []
    above: list[tuple[int, str]] = []

    def close() -> None:
        if "".join(body).strip():
            found.append((SECTION_SEPARATOR.join(h for _, h in above), "\n".join(body)))
        body.clear()

    for path, line in _scan(text):
        if line is None:  # a heading
            close()
            above = path
        else:
            body.append(line)
    close()
    return found


def open_headings(text: str, above: list[tuple[int, str]] | None = None) -> list[tuple[int, str]]:
    """The (level, heading) path open at the end of `text` (which starts below the headings `above`), from the top
    down: the headings its next line is under."""
    path = above or []
    for path, _ in _scan(text, path):
        pass
    return path


def _scan(text: str, above: list[tuple[int, str]] | None = None) -> Iterator[tuple[list[tuple[int, str]],
                                                                                   str | None]]:
    """Each line of `text` with the (level, heading) path it is under, from the top down (starting below `above`);
    for a heading line, the path it opens and None. `#` lines inside fenced code blocks are code."""
    path = above or []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)) and match.group(2).strip():
            level = len(match.group(1))
            path = [*(entry for entry in path if entry[0] < level), (level, " ".join(match.group(2).split()))]
            yield path, None
            continue
        yield path, line
