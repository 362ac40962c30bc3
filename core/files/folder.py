"""`duckgraph ingest`: files and folders kept as documents (text and Markdown read here, and a CSV or TSV file
given by name as a Markdown table; PDF, HTML, DOCX and the other formats by the converters plugins register, see
core/files/converters.py), a folder mirrored (changed files replaced, with `prune` the documents of files that are
gone deleted).

A file's document id is its canonical absolute path: the folder given, resolved (`notes/`, `./notes`,
`~/notes` and `/home/me/notes/` are one folder, symlinks followed), then the file's path inside it. So a folder
ingested however it is typed is stored once; pruning touches only the documents under that folder's path (never
those of another folder that happens to have the same name); and the id tells whoever reads a passage (a model
included) where the file is. The price: a moved folder is a new folder (docs/storage.md says how to move one).

A file in a folder whose suffix no converter reads (`run.log`, a `.rst` whose converter plugin is uninstalled) is
returned `refused` with that reason, so that it is listed as skipped and pruning keeps what was stored of it (a
file given by name is read as text, see `find_files`); the walk leaves out unsaid only such files that are hidden
or in hidden folders (`.git`, `.DS_Store`: machinery, not notes). Pruning deletes only the documents whose file is
not on disk any more: one that is there but was not read this time, for whatever reason, keeps its documents.

Ingest stays inside the folders it is given: a symbolic link (to a file or a folder) that leads out of them is
skipped and reported, unless `follow_symlinks` (then its files are named by the link's path). A link that stays
inside leads to a file or folder that has a path of its own there: its files are named by that path, whichever
path the walk takes first, so that a file reached two ways is stored once, and always under the same id (and a
document stored under a link's path by an older version is pruned once its file is read under its own). A link
that leads nowhere or in a loop, and what is no regular file (a named pipe, a socket), is skipped and reported.
What an `exclude` pattern matches (`duckgraph ingest` leaves out `TRASH` unless asked: what notes apps keep of
deleted notes) is left out of the walk, and pruning deletes what was stored of it. A file longer than one
document may be (MAX_DOCUMENT_CHARS) is stored as several, cut at paragraph or line breaks: the first keeps the
file's id, the others are `<id>#part-2`, `<id>#part-3`..., each after the first starting with the Markdown
headings it was cut under (a CSV's, with its table's header). And one file never stops the rest: a file that
cannot be read or stored is skipped with the reason, and the rest of the folder is stored. A file whose name is
not UTF-8, or holds a control character (a line break would cut every line that shows its id in two), is
skipped too: it has no id to be stored under until it is renamed.

A file stored as several documents is stored a part a call, each a transaction of its own, so that the work of
an interrupted ingest is not lost: a part stored is unchanged when the file is ingested again, which goes on at
the next part. When one fails after others stored, its first parts hold the new text and the rest what they held
before, and the report says so (`partly`); it is whole again once ingested again.

A document's time is the one it states (front matter `date`, a PDF's creation date, a page's date), else the
file's modification time (a page's Last-Modified). A stated time is part of the document: when it changes, the
document is replaced. The modification time is a fallback, not content (touching a file, a checkout or a copy
changes it alone): a document whose text, title and metadata are unchanged keeps the time it was stored with, and
is left as it is.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from pydantic import ValidationError

from duckgraph.core.domain.argument_errors import readable
from duckgraph.core.domain.chunking import markdown_headings, open_headings
from duckgraph.core.domain.document_ids import PART, all_ids, is_part_of, unambiguous_forms
from duckgraph.core.files.csv_table import TABLE_SUFFIXES, markdown_table
from duckgraph.core.files.front_matter import read_markdown
from duckgraph.core.files.plain_text import HEAD, binary, text_of
from duckgraph.ports import DuckgraphError, InvalidInputError, WriteBatch, part_title
from duckgraph.ports.names import INVISIBLE

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import AddDocumentsResult, DocumentInput
    from duckgraph.core.files.converters import Converter

#: Read here, without a converter.
SUFFIXES = {".txt", ".md", ".markdown"}
#: `FileDocument.unsupported` of a file whose name has no suffix.
NO_SUFFIX = "(no suffix)"
#: The `exclude` patterns of `duckgraph ingest` unless `--include-trash`: the folders where notes apps keep
#: deleted notes (Obsidian's `.trash`; the desktop's trash on a drive, `.Trash-1000`, or a Mac's) and old copies
#: (Logseq's `logseq/.recycle` and `logseq/bak`): a note deleted there must not come back in search.
TRASH = (".trash", ".Trash", ".Trashes", ".Trash-*", "**/logseq/.recycle", "**/logseq/bak")
#: Documents per `add_documents` call: a failed batch costs no more than this many files' work.
BATCH = 20
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")  # a crawled site's prefix, not a folder's


@dataclass
class Contents:
    """What a source holds; `time_stated`: the documents' time is one the source states, not a fallback (see the
    module)."""

    documents: list[DocumentInput] = field(default_factory=list)
    time_stated: bool = True


class Source(Protocol):
    """What `ingest` stores: a file, or a fetched page (core/web/); `path` names it in reports; `gone`: the source
    says it no longer exists (a page answering 404), so that pruning deletes its document."""

    id: str
    refused: str
    gone: bool

    @property
    def path(self) -> Path | str: ...

    def read(self) -> Contents: ...


@dataclass
class FileDocument:
    """One file to store: its id (see the module) and where it is; `refused` says why it is not read; `converter`
    reads it unless it is text or Markdown."""

    id: str
    path: Path
    refused: str = ""
    converter: Converter | None = None
    unsupported: str = ""  # a file in a folder that no converter reads: its suffix (NO_SUFFIX when it has none)
    binary: bool = False  # of those: binary data (an image, an archive), which reading as text does not help
    gone: bool = False  # a link that leads nowhere: what it led to is gone

    def read(self) -> Contents:
        return read_documents(self)


@dataclass
class IngestReport:
    stored: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # among `stored`: an older text was replaced
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    #: Among `skipped`: (path, its suffix, whether it is binary data).
    unsupported: list[tuple[str, str, bool]] = field(default_factory=list)
    partly: list[tuple[str, str]] = field(default_factory=list)  # (path, which parts hold its new text and why)
    split: dict[str, int] = field(default_factory=dict)  # path of a file stored as several documents -> how many
    pruned: list[str] = field(default_factory=list)
    prune_kept: list[str] = field(default_factory=list)  # under a folder pruned: not read this time, file still there
    emptied: list[str] = field(default_factory=list)  # the documents deleted because their file holds no text now
    nodes_pruned: int = 0
    edges_pruned: int = 0
    results: list[AddDocumentsResult] = field(default_factory=list)
    stopped_at: str = ""  # when an error stopped `ingest`: the files it was at ("files 21-40 of 45")


def find_files(paths: Sequence[str], *, follow_symlinks: bool = False,
               converters: Mapping[str, Converter] | None = None, exclude: Sequence[str] = (),
               left_out: dict[Path, str] | None = None) -> list[FileDocument]:
    """The files of `paths` (files, or folders searched recursively) that are text, Markdown or of a suffix in
    `converters` (the longest suffix a name ends with picks its converter: ".todo.txt" before ".txt"), each once,
    in path order.

    A file given by name is read wherever it is (by its converter, else as text); in a folder, a symbolic link
    that leads out of the folders given is returned `refused` unless `follow_symlinks`, and so is a file of
    another suffix, with `unsupported` set (but not a hidden one, or one in a hidden folder: see the module), and
    a link that leads nowhere or in a loop, and what is no regular file. Given by name, such a path is returned
    `refused` too, saying what it is; a path that is not there at all raises (nothing is read). A file reached in
    the folders under several paths (a link to it, or to a folder above it) is returned once, under its own path.
    The files and folders of a folder that one of the `exclude` patterns matches (see `excluded_by`) are left out,
    each in `left_out`, with the pattern."""
    converters = converters or {}
    found: dict[str, FileDocument] = {}
    roots = folders(paths)
    for argument in paths:
        given = Path(argument).expanduser()
        if given.is_dir():
            folder = given.resolve()
            walk = _walk(folder, roots, follow_symlinks, SUFFIXES | converters.keys(), exclude,
                         {} if left_out is None else left_out)
            for path, refused, unsupported, binary_data, gone in walk:
                document_id = path.as_posix()
                file = FileDocument(document_id, path, refused or _unfit_id(document_id), _converter(path, converters),
                                    unsupported, binary_data, gone)
                # Reached twice (a link `notes.md` to `log.txt`): read where either path lets it be read.
                if found.setdefault(document_id, file).refused and not file.refused:
                    found[document_id] = file
        elif given.is_file():
            path = given.resolve()
            named = FileDocument(path.as_posix(), path, _unfit_id(path.as_posix()),
                                 converter=_converter(path, converters))
            if found.setdefault(named.id, named).refused:  # a folder given before refused it: named, it is read
                found[named.id] = named
        else:
            why, gone = _not_read(given)
            if not why:  # a typo, more often than not: refused before anything is read
                raise DuckgraphError(f"{argument} does not exist: check the path; nothing was read")
            # Skipped with why, as in a folder: one path that cannot be read never stops the others. Named by the
            # path itself when its link leads nowhere or round (no file of its own).
            itself = _resolved(given.parent.absolute()) / given.name
            path = itself if gone else _resolved(itself)
            found.setdefault(path.as_posix(), FileDocument(path.as_posix(), path, why, gone=gone))
    return sorted(found.values(), key=lambda f: f.id)


def _not_read(path: Path, gone: str = "") -> tuple[str, bool]:
    """Why `path`, which is no file nor folder, is not read ("" when it is not there at all), and whether it is a
    link that leads nowhere (its file gone): a link to nothing (`gone` ends the parenthesis of why) or in a loop
    (`a.md` to `b.md`, `b.md` to `a.md`), or what is no regular file (a named pipe: reading it waits for a writer,
    maybe for ever)."""
    try:
        mode = os.lstat(path).st_mode
        if not stat.S_ISLNK(mode):
            return _not_regular(mode), False
        return _not_regular(os.stat(path).st_mode, f"a symbolic link to {os.readlink(path)}, which is "), False
    except (FileNotFoundError, NotADirectoryError):  # not there, or a link to something not there
        if not os.path.islink(path):
            return "", False
        return (f"a symbolic link to {os.readlink(path)}, which does not exist (moved, deleted, or on a drive not "
                f"mounted{gone}): fix or remove the link"), True
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return ("a symbolic link in a loop (it leads back to itself through other links), so it leads to no "
                    "file: fix or remove the link"), False
        return f"a path that cannot be looked at ({exc.strerror})", False


def _not_regular(mode: int, what: str = "") -> str:
    """Why a path of `mode` (no folder) is not read: it is no regular file; `what` starts the reason (a link's "a
    symbolic link to X, which is ")."""
    kind = ("a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "no file")
    return f"{what}not a regular file but {kind}: only files and folders are read"


def _binary(path: Path) -> bool:
    """Whether the file starts with binary data (`plain_text.binary`); not when it cannot be read: reading it by
    name says why."""
    try:
        with path.open("rb") as file:
            return binary(file.read(HEAD))
    except OSError:
        return False


def _unfit_id(document_id: str) -> str:
    """Why a path cannot be a document's id ("" when it can): a name that is not UTF-8 (Python holds its bytes as
    surrogates, which no stored text may hold), or a control character, a line break (U+2028 too) or an invisible
    character in it, or a path longer than an id may be."""
    from duckgraph.core.domain.limits import MAX_SOURCE_ID_CHARS
    from duckgraph.core.domain.model import breaks_line  # the tools' models: not imported by a server's start

    for ch in document_id:
        if unicodedata.category(ch) == "Cs":
            return (f"its name is not UTF-8 (byte 0x{ord(ch) - 0xDC00:02x}; written in another encoding, e.g. "
                    "Latin-1): rename it (e.g. convmv -f latin1 -t utf8 --notest FILE) and ingest it again")
        if unicodedata.category(ch) == "Cc" or breaks_line(ch):
            what = "a control character" if unicodedata.category(ch) == "Cc" else "a line or paragraph separator"
            return (f"its path holds {what} ({ch!r}), which would cut the lines that show a document's id: rename "
                    "it and ingest it again")
        if INVISIBLE.match(ch):  # a document id may not hold one (an id typed without it would name another)
            return f"its path holds an invisible character ({ch!r}), which no document id may hold: rename it and " \
                   "ingest it again"
    if len(document_id) > MAX_SOURCE_ID_CHARS:
        return (f"its path is {len(document_id)} characters long, and a document's id (the file's absolute path) may "
                f"have at most {MAX_SOURCE_ID_CHARS}: give it a shorter name, or move it to a folder with a shorter "
                "path, and ingest it again")
    return ""


def longest_suffix(name: str, suffixes: Collection[str]) -> str | None:
    """The longest of `suffixes` that `name` ends with (case aside), leaving a stem (".md" alone is no suffix, as
    for pathlib); None when there is none."""
    lowered = name.lower()
    found = [s for s in suffixes if len(lowered) > len(s) and lowered.endswith(s)]
    return max(found, key=len) if found else None


def _converter(path: Path, converters: Mapping[str, Converter]) -> Converter | None:
    suffix = longest_suffix(path.name, converters.keys())
    return None if suffix is None else converters[suffix]


def _walk(folder: Path, roots: Sequence[Path], follow_symlinks: bool, suffixes: Collection[str],
          exclude: Sequence[str], left_out: dict[Path, str]) -> Iterator[tuple[Path, str, str, bool, bool]]:
    """The files under `folder`, each with why it is not read ("" when it is), for one of none of `suffixes` its
    suffix and whether it is binary data, and whether it is gone; the links to folders that are not entered, the
    links that lead nowhere (gone: what they led to, moved or deleted, is pruned as a file gone is), and what is
    no file to read (a link in a loop, a named pipe), with why. A file of none of `suffixes` that is hidden or in
    a hidden folder is left out, and so is what `exclude` matches (added to `left_out`). A file or folder that a link inside the folders leads to is named by its own path, so that the
    order of the walk never decides its id; a real folder is entered once, so a link loop ends."""
    seen = {folder}
    for top, dirs, names in os.walk(folder, followlinks=True):
        here = Path(top)
        hidden = any(part.startswith(".") for part in here.relative_to(folder).parts)
        entered = []
        for name in sorted(dirs):
            path, real = here / name, _resolved(here / name)
            if _left_out(path, real, folder, roots, exclude, left_out):
                continue
            if refused := _outside(path, real, roots, follow_symlinks):
                yield path, refused, "", False, False
            elif real not in seen:
                seen.add(real)
                entered.append(name)
        dirs[:] = entered
        for name in sorted(names):
            path = here / name
            readable = longest_suffix(name, suffixes) is not None
            if not readable and (hidden or name.startswith(".")):
                continue  # hidden and not read: machinery, left out unsaid (see the module)
            real = _resolved(path)
            if _left_out(path, real, folder, roots, exclude, left_out):
                continue
            own = real if _inside(real, roots) else path  # its id: a link inside leads to a file of its own path
            if not path.is_file():  # a link that leads nowhere or in a loop, a named pipe: no file to read
                why, gone = _not_read(path, "; with --prune, what was stored of it is deleted")
                if why:  # else it went since the folder was listed
                    yield (path if gone else own), why, "", False, gone
            elif readable:
                yield own, _outside(path, real, roots, follow_symlinks), "", False, False
            else:
                suffix = path.suffix.lower() or NO_SUFFIX
                kind = "files without a suffix" if suffix == NO_SUFFIX else f"{suffix} files"
                binary_data = _binary(path)
                advice = "" if binary_data else "; to read it as text, give the file by name (duckgraph ingest FILE)"
                yield (own, f"no converter reads {kind} (a plugin can add one: docs/plugins.md){advice}", suffix,
                       binary_data, False)


def _resolved(path: Path) -> Path:
    """`path` resolved, links followed; itself when they lead in a loop (`_not_read` says so)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11 and 3.12's "Symlink loop"
        return path


def _left_out(path: Path, real: Path, folder: Path, roots: Sequence[Path], exclude: Sequence[str],
              left_out: dict[Path, str]) -> bool:
    """Whether an `exclude` pattern matches `path` (found in `folder`: its own name, the folders above it were
    matched when they were entered) or, for a link, the file or folder it leads to in the folders given (and the
    folders above that): so the path the walk takes never decides. Added to `left_out` under the path matched."""
    if pattern := excluded_by(path.relative_to(folder), exclude, whole=False):
        left_out[path] = pattern
        return True
    root = None if real == path else next((r for r in (folder, *roots) if _inside(real, [r])), None)
    if root is not None and (pattern := excluded_by(real.relative_to(root), exclude)):
        left_out[real] = pattern
        return True
    return False


def excluded_by(relative: PurePosixPath | Path, patterns: Sequence[str], *, whole: bool = True) -> str | None:
    """The first of `patterns` (see `unfit_pattern`) that matches the path `relative` (to the folder given) or, when
    `whole`, a folder above it; None when none does. A pattern without a slash matches a file or folder's name at
    any depth (`.trash`, `*.excalidraw.md`); one with a slash, the path from the folder (`Archive/2019`,
    `Daily/*.md`; as in fnmatch, its `*` matches slashes too), and at any depth when it starts with `**/`
    (`**/logseq/bak`). Case matters."""
    parts = PurePosixPath(relative).parts
    for pattern in patterns:
        bare = pattern.rstrip("/")
        for depth in range(1 if whole else len(parts), len(parts) + 1):
            if "/" not in bare:
                matched = fnmatchcase(parts[depth - 1], bare)
            else:
                above = "/".join(parts[:depth])
                matched = fnmatchcase(above, bare) or (bare.startswith("**/") and fnmatchcase(above, bare[3:]))
            if matched:
                return pattern
    return None


def unfit_pattern(pattern: str) -> str:
    """Why `pattern` cannot be an exclude pattern (see `excluded_by`), "" when it can: it is matched against paths
    inside the folder given, so it is neither empty, nor absolute, nor leads out."""
    bare = pattern.rstrip("/")
    if not bare or bare.startswith(("/", "~")) or ".." in bare.split("/"):
        return (f"--exclude {pattern!r}: a pattern is matched against the paths inside each folder given, relative "
                "to it (e.g. .trash, Archive/2019, '*.excalidraw.md'), so it cannot be empty, absolute or lead out "
                "with ..")
    return ""


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _outside(path: Path, target: Path, roots: Sequence[Path], follow_symlinks: bool) -> str:
    """Why `path` (found in a folder, leading to `target`) is not read: it is a link out of the folders given; ""
    when it may be read."""
    if follow_symlinks or _inside(target, roots):
        return ""
    return (f"a symbolic link to {target}, outside the folders given: not followed (ingest the file by name, or "
            "pass --follow-symlinks)")


def read_documents(file: FileDocument) -> Contents:
    """The file as documents (none when it holds no text), through its converter, else as text (UTF-8, see
    core/files/plain_text.py) or Markdown (front matter read only in Markdown: not in a .txt, code or configuration
    file), a CSV or TSV file as a Markdown table (core/files/csv_table.py). The time is the one it states, else
    its modification time. A text longer than a document may be is cut into several (see the module)."""
    head = ""  # a table's header, which starts each part of a long CSV
    if file.converter is not None:
        converted = file.converter.convert(file.path.read_bytes(), str(file.path))
        title, text, time, metadata = converted.title, converted.text, converted.time, dict(converted.metadata)
    else:
        suffix = file.path.suffix.lower()
        content = text_of(file.path.read_bytes(), file.path, text_suffix=suffix in SUFFIXES)
        # Front matter is a Markdown note's. In a code or configuration file (chunking.markdown_headings) a leading
        # "---" is its own text: a YAML file's first document, which front matter would take for metadata.
        markdown = suffix != ".txt" and markdown_headings(file.id, "", content)
        title, text, time, metadata = read_markdown(content, front_matter=markdown)
        if suffix in TABLE_SUFFIXES:
            text, head = markdown_table(text, suffix)
    modified = datetime.fromtimestamp(file.path.stat().st_mtime, timezone.utc).isoformat()
    return as_documents(file.id, title or file.path.stem, text, time, metadata, fallback_time=modified, head=head)


def as_documents(document_id: str, title: str, text: str, time: str | None, metadata: dict[str, str], *,
                 fallback_time: str | None = None, head: str = "") -> Contents:
    """`text` as one document, or several when it is longer than a document may be (see the module), each after
    the first starting with `head` (a table's header and delimiter lines); none when it is blank. Their time is
    `time`, the one the source states, else `fallback_time`. A time that is not ISO 8601 is left out (a front
    matter's "May 2nd"); the metadata keeps it."""
    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS, DocumentInput
    from duckgraph.core.domain.moments import parse_moment

    stated = bool(time)
    if not text.strip():
        return Contents([], stated)
    try:
        moment = parse_moment(time or fallback_time) if time or fallback_time else None
    except ValueError:
        moment = None
    parts = _split(text, MAX_DOCUMENT_CHARS, headings=markdown_headings(document_id, title, text), head=head)
    if len(parts) == 1:
        return Contents([DocumentInput(id=document_id, title=title, text=parts[0], metadata=metadata, time=moment)],
                        stated)
    return Contents([DocumentInput(id=document_id if n == 1 else f"{document_id}{PART}{n}",
                                   title=part_title(title, n, len(parts)), text=part, metadata=metadata,
                                   time=moment)
                     for n, part in enumerate(parts, start=1)], stated)


def _split(text: str, limit: int, *, headings: bool, head: str = "") -> list[str]:
    """The pieces of `text` that hold more than blanks, each of at most `limit` characters, cut at the last paragraph
    break, else line break, else space in its second half (else at the limit). With `headings` (Markdown's, see
    chunking.markdown_headings), a piece after the first starts with the heading lines it was cut under, so that
    its passages keep their section ("Big archive > Day 1405", not ""); and with `head`, with those lines (a
    table's header, so that its rows keep their columns' names)."""
    parts = []
    above: list[tuple[int, str]] = []  # the headings open where the next piece starts
    while text:
        carried = "".join(f"{'#' * level} {heading}\n" for level, heading in above) + (head if parts else "")
        if len(carried) > limit // 4:  # headings as long as a book's chapter (or a header) are none to repeat
            carried = ""
        room = limit - len(carried)
        cut = len(text) if len(text) <= room else next(
            (at + len(mark) for mark in ("\n\n", "\n", " ") if (at := text.rfind(mark, room // 2, room)) > 0), room)
        if text[:cut].strip():
            parts.append(carried + text[:cut])
        if headings:
            above = open_headings(text[:cut], above)
        text = text[cut:]
    return parts


def ingest(kb: KnowledgeBase, files: Sequence[Source], *, extract: bool, prune: Sequence[str] = (),
           excluded: Collection[Path] = (), progress: Callable[[int, int, str], None] | None = None,
           label: Callable[[str], None] | None = None, on_batch: Callable[[AddDocumentsResult], None] | None = None,
           namespace: str | None = None, report: IngestReport | None = None) -> IngestReport:
    """Store `files` (unchanged ones are left as they are, changed ones replaced) in `namespace` (default: the
    knowledge base's), delete the documents of those read whole that hold no text now (emptied: their text is
    gone), then delete the documents under the `prune` prefixes (a folder's, see `prefix`, or a crawled site's)
    whose source is gone: not among `files` (or `gone`), and, under a folder, whose file is not on disk. A source
    that exists but was not read this time (a link not followed, a file that could not be read, a suffix no
    converter reads, a file the walk did not return) keeps its documents, all its parts and, for a link to a
    folder, those of the files under it: they are counted in `prune_kept`. But the documents of what a folder's
    walk left out (`excluded`: files, and folders with the files under them) are pruned: they are not read any
    more. So is a document stored under a link's path (by a version that named a file so) whose file is stored
    under its own path now.
    `label` hears which files a batch holds ("files 1-20 of 35") before its `progress`. The report is filled in
    `report` when given: what was stored before an error that stops ingest (the embedder gone) stays there, with
    `stopped_at`."""
    namespace = kb.resolve_namespace(namespace)
    report = IngestReport() if report is None else report
    try:
        _ingest(kb, files, report, extract=extract, prune=prune, excluded=excluded, progress=progress, label=label,
                on_batch=on_batch, namespace=namespace)
    except BaseException:
        report.stopped_at = report.stopped_at or "the end, all files stored (deleting those of files gone)"
        raise
    return report


def _ingest(kb: KnowledgeBase, files: Sequence[Source], report: IngestReport, *, extract: bool,
            prune: Sequence[str], excluded: Collection[Path], progress: Callable[[int, int, str], None] | None,
            label: Callable[[str], None] | None, on_batch: Callable[[AddDocumentsResult], None] | None,
            namespace: str) -> None:
    present: set[str] = set()  # the documents read this time
    kept: list[str] = []  # the sources not read this time, though they exist: their documents stay
    emptied: list[Source] = []  # the sources read whole that hold no text now
    batch: list[tuple[Source, DocumentInput]] = []
    fallback_times: set[str] = set()  # the documents whose time is not stated (see the module)
    first = 0  # the number of the batch's first file

    def store(pairs: list[tuple[Source, DocumentInput]], where: str) -> bool:
        report.stopped_at = where  # cleared once stored: an error in between is where ingest stopped
        if label is not None:
            label(where)
        stored = _store(kb, _keep_stored_times(kb, pairs, fallback_times, namespace), report, extract=extract,
                        progress=progress, on_batch=on_batch, namespace=namespace)
        report.stopped_at = ""
        return stored

    def flush(last: int) -> None:
        if batch:
            store(batch, f"files {first + 1}-{last} of {len(files)}")
            batch.clear()

    for number, file in enumerate(files):
        if progress is not None:  # converting a PDF takes a while: say so between the batches' embedding
            progress(number, len(files), "reading files")
        report.stopped_at = f"file {number + 1} of {len(files)} (reading it)"
        contents = _contents(file, report)
        report.stopped_at = ""
        if contents is None:
            if not file.gone:
                kept.append(file.id)
            contents = Contents()
        elif not contents.documents:
            emptied.append(file)
        documents = contents.documents
        present.update(d.id for d in documents)
        if not contents.time_stated:
            fallback_times.update(d.id for d in documents)
        if len(documents) > 1 or not _fits(documents):  # a long file: a call for each part (see the module)
            flush(number)
            _store_parts(file, documents, report, store, f"file {number + 1} of {len(files)}")
            continue
        # A batch of files that add_documents takes in one call.
        if batch and not _fits([*(d for _, d in batch), *documents]):
            flush(number)
        if not batch:
            first = number
        batch += [(file, d) for d in documents]
    flush(len(files))
    _delete_emptied(kb, emptied, report, namespace)
    for start in prune:
        _prune(kb, start, present, set(kept), {p.as_posix() for p in excluded}, report, namespace)


def _fits(documents: Sequence[DocumentInput]) -> bool:
    """Whether `documents` make one batch: at most BATCH, within what add_documents takes in one call."""
    from duckgraph.core.domain.ingest import MAX_TOTAL_DOCUMENT_CHARS

    return len(documents) <= BATCH and sum(len(d.text) for d in documents) <= MAX_TOTAL_DOCUMENT_CHARS


def _store_parts(file: Source, documents: Sequence[DocumentInput], report: IngestReport,
                 store: Callable[[list[tuple[Source, DocumentInput]], str], bool], where: str) -> None:
    """Store the documents of a long file one call each, in order (`where` names the file for `store`'s label), so
    that each part stored stays stored when a later one fails or ingest is stopped, and a run again goes on where
    it stopped. When a call fails after others stored (see the module), the file is `partly` stored, not skipped,
    and its later parts are left as they are."""
    done = 0

    def partly(why: str) -> None:
        report.split.pop(str(file.path), None)
        report.partly.append((str(file.path), (
            f"parts 1-{done} of {len(documents)} hold its new text; part {done + 1} could not be stored ({why}), so "
            f"parts {done + 1}-{len(documents)} hold what they held before (an older text, or none): ingest it "
            "again")))

    for document in documents:
        try:
            stored = store([(file, document)], f"{where}, part {done + 1} of {len(documents)}")
        except BaseException as exc:
            if done:
                partly(" ".join(str(exc).split())[:300] or type(exc).__name__)
            raise
        if not stored:
            if done:
                partly(report.skipped.pop()[1])
            return
        done += 1


def _contents(file: Source, report: IngestReport) -> Contents | None:
    """The file's documents; None, and the reason in `report.skipped`, when it is refused or cannot be read (a
    format whose extra is missing: the reason says what to install)."""
    if file.refused:  # a name that is not UTF-8 shown as its bytes ("caf\\xe9.md"): no stream can write it as it is
        shown = os.fsencode(file.path).decode("utf-8", "backslashreplace")
        report.skipped.append((shown, file.refused))
        if isinstance(file, FileDocument) and file.unsupported:
            report.unsupported.append((shown, file.unsupported, file.binary))
        return None
    try:
        contents = file.read()
    except ValidationError as exc:  # the document pydantic refuses, e.g. a path longer than an id may be
        report.skipped.append((str(file.path), f"cannot be stored as a document: {readable(exc)}"))
        return None
    except (OSError, UnicodeDecodeError, ValueError, DuckgraphError) as exc:
        report.skipped.append((str(file.path), " ".join(str(exc).split())[:300]))
        return None
    if not contents.documents:
        report.skipped.append((str(file.path), "no text"))
    elif len(contents.documents) > 1:
        report.split[str(file.path)] = len(contents.documents)
    return contents


def _keep_stored_times(kb: KnowledgeBase, batch: Sequence[tuple[Source, DocumentInput]], fallback_times: set[str],
                       namespace: str) -> list[tuple[Source, DocumentInput]]:
    """The batch, where a document whose time is a fallback (see the module) and whose text, title and metadata are
    those stored takes the stored time, so that it is left as it is."""
    ids = [d.id for _, d in batch if d.id in fallback_times]
    store = kb.open().store
    # The id as stored: a file stored under its name's other Unicode form is the document add_documents replaces.
    named = unambiguous_forms(store, ids, namespace) if ids else {}
    stored = {d.id: d for d in store.get_documents([named.get(i, i) for i in ids], namespace)} if ids else {}
    kept = []
    for source, doc in batch:
        old = stored.get(named.get(doc.id, doc.id))
        if old is not None and (old.text, old.title, old.metadata) == (doc.text, doc.title or "", doc.metadata):
            doc = doc.model_copy(update={"time": old.time})
        kept.append((source, doc))
    return kept


def _store(kb: KnowledgeBase, batch: Sequence[tuple[Source, DocumentInput]], report: IngestReport, *,
           extract: bool, progress: Callable[[int, int, str], None] | None,
           on_batch: Callable[[AddDocumentsResult], None] | None, namespace: str) -> bool:
    """Store a batch in one call; when the call refuses it, each file on its own, so that one bad file is
    skipped with the reason and the others are stored. False when a file was skipped."""
    try:
        result = kb.add_documents([d for _, d in batch], extract=extract, progress=progress, namespace=namespace)
    except InvalidInputError as exc:
        files = list(dict.fromkeys(file.id for file, _ in batch))
        if len(files) == 1:
            path = str(batch[0][0].path)
            report.skipped.append((path, " ".join(str(exc).split())[:300]))
            report.split.pop(path, None)  # read as several documents, stored as none
            return False
        stored = [_store(kb, [(f, d) for f, d in batch if f.id == file_id], report, extract=extract,
                         progress=progress, on_batch=on_batch, namespace=namespace) for file_id in files]
        return all(stored)
    for stored in result.documents:
        (report.unchanged if stored.unchanged else report.stored).append(stored.id)
        if stored.replaced:
            report.replaced.append(stored.id)
    report.results.append(result)
    if on_batch is not None:
        on_batch(result)
    return True


def _delete_emptied(kb: KnowledgeBase, emptied: Sequence[Source], report: IngestReport, namespace: str) -> None:
    """Delete the documents of the sources that hold no text now (all their parts), with what they alone supported,
    as a changed file's old text is replaced: each one's skipped line in `report` says what was deleted."""
    with kb.writing(vectors=False) as writer:  # read and delete as one step: no write slips in between
        # Each file's id as stored (in its name's other Unicode form, see core/domain/document_ids.py)
        named = unambiguous_forms(kb.store, [f.id for f in emptied], namespace) if emptied else {}
        stored = {d.id for d in kb.store.get_documents([named.get(f.id, f.id) for f in emptied], namespace)
                  } if emptied else set()
        ids = all_ids(kb.store, namespace) if stored else []  # a file's parts exist only beside its first document
        for file in emptied:
            if (file_id := named.get(file.id, file.id)) not in stored:
                continue
            gone = [d for d in ids if d == file_id or is_part_of(d, file_id)]
            summary = writer.commit(WriteBatch(delete_documents=[(namespace, d) for d in gone]))
            report.emptied += gone
            report.skipped[report.skipped.index((str(file.path), "no text"))] = (str(file.path), (
                f"no text any more: its stored text was deleted ({len(gone)} documents, with "
                f"{summary.nodes_deleted} entities and {summary.edges_deleted} relations only they supported)"))


def _prune(kb: KnowledgeBase, prefix: str, present: set[str], kept: set[str], excluded: set[str],
           report: IngestReport, namespace: str) -> None:
    """Delete the documents under `prefix` not read this time (`present`) whose source is gone, or was left out
    (`excluded`, with its parts and, for a folder, the files under it). Not gone: a source not read this time
    though it exists (`kept`: with its parts and, for a link to a folder, the files under it), and, under a
    folder, a document whose file is on disk: what the walk returns is no list of the files there (a suffix no
    converter reads now, a file once given by name), so only the file's absence says it is gone. Unless that file
    was read this time under another id: the document is of a link's path, and its file is stored under its own."""
    on_disk = _URL.match(prefix) is None
    # A document read (or kept) this time under its id's other Unicode form is that one (add_documents replaced it,
    # see core/domain/document_ids.py): compared composed, so that pruning never deletes it.
    read_now = {unicodedata.normalize("NFC", i) for i in present}
    kept = {unicodedata.normalize("NFC", i) for i in kept}
    excluded = {unicodedata.normalize("NFC", i) for i in excluded}
    with kb.writing(vectors=False) as writer:  # read and delete as one step: no write slips in between
        gone = []
        for d in all_ids(kb.store, namespace):
            if not d.startswith(prefix) or (composed := unicodedata.normalize("NFC", d)) in read_now:
                continue
            if not _of_source(composed, excluded) and (
                    _of_source(composed, kept)
                    or (on_disk and _file_there(d, present) and not _read_elsewhere(d, read_now))):
                report.prune_kept.append(d)
            else:
                gone.append(d)
        if gone:
            summary = writer.commit(WriteBatch(delete_documents=[(namespace, d) for d in gone]))
            report.pruned += gone
            report.nodes_pruned += summary.nodes_deleted
            report.edges_pruned += summary.edges_deleted


def _of_source(document_id: str, sources: set[str]) -> bool:
    """Whether the document is one of `sources`': its own, one of its parts (`<id>#part-2`) or, for a folder (a link
    to one), a file under it (`<id>/...`). Looked up by the document's own id and those above it, not by testing
    every source's id as a prefix: a folder of thousands of files no converter reads keeps them all."""
    file, mark, number = document_id.rpartition(PART)
    if document_id in sources or (mark and number.isdigit() and file in sources):
        return True
    above = document_id
    while (cut := above.rfind("/")) > 0:
        above = above[:cut]
        if above in sources:
            return True
    return False


def _file_there(document_id: str, present: set[str]) -> bool:
    """Whether the file of a document under a folder is on disk: its own, or for a part (`<id>#part-2`) its file's
    when that file was not read this time (a part left over by a file read this time that shrank is gone)."""
    if _exists(document_id):
        return True
    file, mark, number = document_id.rpartition(PART)
    return bool(mark) and number.isdigit() and file not in present and _exists(file)


def _read_elsewhere(document_id: str, read_now: set[str]) -> bool:
    """Whether the document's file (one on disk) is a link's path whose file was read this time under its own path
    (composed, as `read_now`)."""
    file, mark, number = document_id.rpartition(PART)
    file = file if mark and number.isdigit() and not _exists(document_id) else document_id
    real = os.path.realpath(file)
    return real != file and unicodedata.normalize("NFC", real) in read_now


def _exists(path: str) -> bool:
    """Whether `path` is a file (or what a link leads to). Only its certain absence says no: a path that cannot be
    looked at (no permission, a loop of links, a drive's error) may hold the file, and pruning deletes for good."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: no path (a NUL in it)
        return False
    except OSError:
        return True


def folders(paths: Sequence[str]) -> list[Path]:
    """The folders among `paths`, resolved: what pruning looks under (also one with no file left)."""
    return sorted({Path(p).expanduser().resolve() for p in paths if Path(p).expanduser().is_dir()})


def prefix(folder: Path) -> str:
    """The start of the ids of the documents of the files under `folder`."""
    return folder.as_posix().rstrip("/") + "/"
