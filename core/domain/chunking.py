"""Splitting documents into passages small enough to embed well, and at their Markdown headings: each passage
knows its section, the path of headings above it ("Installation > Linux"). A code or configuration file is no
Markdown: its "#" lines are comments (`markdown_headings`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

#: all-MiniLM-L6-v2 reads 256 word pieces, roughly 1,000 characters of English.
DEFAULT_CHUNK_CHARS = 1_000
DEFAULT_OVERLAP_CHARS = 150
#: The passage path's separator, between the headings of a section and the ones above it.
SECTION_SEPARATOR = " > "
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_BREAKS = (re.compile(r"\n\s*\n"), re.compile(r"(?<=[.!?])\s+"), re.compile(r"\s+"))
#: The suffixes of code and configuration files, whose "#" lines are comments ("  # production database" in YAML,
#: "# Push to ECR" in a shell script), a preprocessor's ("# define") or code, never Markdown headings. Not the
#: suffixes of web pages (".php", ".html"): a page fetched by its URL is converted to Markdown.
_CODE_SUFFIXES = frozenset(
    ".bash .bat .c .cc .cfg .cjs .cmake .conf .cpp .cs .cxx .dockerfile .env .ex .exs .fish .go .gradle .h .hcl .hpp "
    ".ini .java .jl .js .json .jsx .kt .kts .lua .mjs .mk .nim .nix .pl .pm .properties .ps1 .py .pyi .r .rb .rs "
    ".scala .service .sh .sql .swift .tcl .tf .tfvars .toml .ts .tsx .yaml .yml .zsh".split())
#: Code and configuration files known by their whole name, and the start of the names of their variants
#: (".env.local", "Dockerfile.dev").
_CODE_NAMES = frozenset(
    ".bash_profile .bashrc .dockerignore .editorconfig .env .gitattributes .gitignore .npmrc .profile .zshrc brewfile "
    "cmakelists.txt constraints.txt containerfile dockerfile gemfile gnumakefile justfile makefile pipfile procfile "
    "rakefile requirements.txt vagrantfile".split())
_CODE_NAME_STARTS = (".env.", "dockerfile.", "containerfile.", "makefile.")
_MARKDOWN_SUFFIXES = (".md", ".markdown")


def chunk_text(text: str, max_chars: int = DEFAULT_CHUNK_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS) -> list[str]:
    """Passages of at most `max_chars`, cut at paragraph, then sentence, then word boundaries.

    Consecutive passages share up to `overlap` characters so a fact split by a cut is still whole in one.
    """
    text = text.strip()
    if len(text) <= max_chars:
        return [text] if text else []
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + max_chars, len(text))
        if end < len(text):
            end = _best_cut(text, start, end)
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        next_start = max(end - overlap, start + 1)
        # Start the overlap at a word boundary so no passage begins mid-word.
        space = text.find(" ", next_start, end)
        start = space + 1 if space != -1 else end
    return chunks


def _best_cut(text: str, start: int, end: int) -> int:
    window = text[start:end]
    for pattern in _BREAKS:
        cuts = [m.end() for m in pattern.finditer(window) if m.end() > len(window) // 2]
        if cuts:
            return start + cuts[-1]
    return end


def chunk_sections(text: str, max_chars: int = DEFAULT_CHUNK_CHARS, overlap: int = DEFAULT_OVERLAP_CHARS, *,
                   headings: bool = True) -> list[tuple[str, str]]:
    """(section, passage) pairs: `text` cut at its Markdown headings, then each section as `chunk_text` cuts it.
    A passage never spans two sections; the heading lines themselves are left out (the section names them). Without
    `headings` (a code or configuration file: `markdown_headings`), the text is one section, "", every line kept."""
    parts = sections(text) if headings else [("", text)]
    return [(section, passage) for section, body in parts for passage in chunk_text(body, max_chars, overlap)]


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
