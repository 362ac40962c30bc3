"""`duckgraph ingest`: text files and folders kept as documents, a folder mirrored (changed files replaced, with
`prune` the documents of files that are gone deleted).

A file's document id is its canonical absolute path: the folder given, resolved (`notes/`, `./notes`,
`~/notes` and `/home/me/notes/` are one folder, symlinks followed), then the file's path inside it. So a folder
ingested however it is typed is stored once; pruning touches only the documents under that folder's path (never
those of another folder that happens to have the same name); and the id tells whoever reads a passage (a model
included) where the file is. The price: a moved folder is a new folder (docs/storage.md says how to move one).

Ingest stays inside the folders it is given: a symbolic link (to a file or a folder) that leads out of them is
skipped and reported, unless `follow_symlinks` (a link that stays inside is read where it is). A file longer than
one document may be (MAX_DOCUMENT_CHARS) is stored as several, cut at paragraph or line breaks: the first keeps
the file's id, the others are `<id>#part-2`, `<id>#part-3`... And one file never stops the rest: a file that
cannot be read or stored is skipped with the reason, and the rest of the folder is stored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from duckgraph.ports import DuckgraphError, InvalidInputError, WriteBatch

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import AddDocumentsResult, DocumentInput

SUFFIXES = {".txt", ".md", ".markdown"}
#: Documents per `add_documents` call: a failed batch costs no more than this many files' work.
BATCH = 20
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*:[ \t]*(.*?)[ \t]*$")


@dataclass
class FileDocument:
    """One file to store: its id (see the module) and where it is; `refused` says why it is not read."""

    id: str
    path: Path
    refused: str = ""


@dataclass
class IngestReport:
    stored: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    split: dict[str, int] = field(default_factory=dict)  # path of a file stored as several documents -> how many
    pruned: list[str] = field(default_factory=list)
    nodes_pruned: int = 0
    edges_pruned: int = 0
    results: list[AddDocumentsResult] = field(default_factory=list)


def find_files(paths: Sequence[str], *, follow_symlinks: bool = False) -> list[FileDocument]:
    """The .txt and .md files of `paths` (files, or folders searched recursively), each once, in path order.

    A file given by name is read wherever it is; in a folder, a symbolic link that leads out of the folders given
    is returned `refused` unless `follow_symlinks`."""
    found: dict[str, FileDocument] = {}
    roots = folders(paths)
    for argument in paths:
        given = Path(argument).expanduser()
        if given.is_dir():
            folder = given.resolve()
            for path, refused in _walk(folder, roots, follow_symlinks):
                document_id = path.as_posix()  # inside the folder, symlink or not
                found.setdefault(document_id, FileDocument(document_id, path, refused))
        elif given.is_file():
            path = given.resolve()
            found.setdefault(path.as_posix(), FileDocument(path.as_posix(), path))
        else:
            raise DuckgraphError(f"{argument} does not exist")
    return sorted(found.values(), key=lambda f: f.id)


def _walk(folder: Path, roots: Sequence[Path], follow_symlinks: bool) -> Iterator[tuple[Path, str]]:
    """The .txt and .md files under `folder`, each with why it is not read ("" when it is), and the links to folders
    that are not entered, with why. A real folder is entered once, so a link loop ends."""
    seen = {folder}
    for top, dirs, names in os.walk(folder, followlinks=True):
        here = Path(top)
        entered = []
        for name in sorted(dirs):
            path = here / name
            if refused := _outside(path, roots, follow_symlinks):
                yield path, refused
            elif (real := path.resolve()) not in seen:
                seen.add(real)
                entered.append(name)
        dirs[:] = entered
        for name in sorted(names):
            path = here / name
            if path.suffix.lower() in SUFFIXES and path.is_file():
                yield path, _outside(path, roots, follow_symlinks)


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _outside(path: Path, roots: Sequence[Path], follow_symlinks: bool) -> str:
    """Why `path` (found in a folder) is not read: it is a link out of the folders given; "" when it may be read."""
    target = path.resolve()
    if follow_symlinks or _inside(target, roots):
        return ""
    return (f"a symbolic link to {target}, outside the folders given: not followed (ingest the file by name, or "
            "pass --follow-symlinks)")


def read_documents(file: FileDocument) -> list[DocumentInput]:
    """The file as documents (none when it holds no text): Markdown front matter, when present, gives the title
    (else the file name) and the date (kept in the metadata), and is left out of the text. A text longer than a
    document may be is cut into several (see the module)."""
    from duckgraph.core.domain.model import MAX_DOCUMENT_CHARS, DocumentInput

    text = file.path.read_text(encoding="utf-8")
    title, metadata = file.path.stem, {}
    if file.path.suffix.lower() != ".txt" and (match := _FRONT_MATTER.match(text)):
        fields = _front_matter(match.group(1))
        title = fields.get("title") or title
        if fields.get("date"):
            metadata["date"] = fields["date"]
        text = text[match.end():]
    if not text.strip():
        return []
    parts = [part for part in _split(text, MAX_DOCUMENT_CHARS) if part.strip()]
    if len(parts) == 1:
        return [DocumentInput(id=file.id, title=title, text=parts[0], metadata=metadata)]
    return [DocumentInput(id=file.id if n == 1 else f"{file.id}#part-{n}", title=f"{title} (part {n} of {len(parts)})",
                          text=part, metadata=metadata) for n, part in enumerate(parts, start=1)]


def _split(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, each cut at the last paragraph break, else line break, else
    space in its second half (else at the limit)."""
    parts = []
    while len(text) > limit:
        cut = next((at + len(mark) for mark in ("\n\n", "\n", " ") if (at := text.rfind(mark, limit // 2, limit)) > 0),
                   limit)
        parts.append(text[:cut])
        text = text[cut:]
    return [*parts, text]


def _front_matter(block: str) -> dict[str, str]:
    """The top-level `key: value` lines of a YAML front matter block, values unquoted (no YAML parser needed for
    the two fields used; nested or list values are ignored)."""
    fields = {}
    for line in block.splitlines():
        if (match := _FIELD.match(line)) and match.group(2):
            value = match.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            fields[match.group(1).lower()] = value
    return fields


def ingest(kb: KnowledgeBase, files: Sequence[FileDocument], *, extract: bool, prune: Sequence[Path] = (),
           progress: Callable[[int, int, str], None] | None = None, label: Callable[[str], None] | None = None,
           on_batch: Callable[[AddDocumentsResult], None] | None = None) -> IngestReport:
    """Store `files` (unchanged ones are left as they are, changed ones replaced), then delete the documents under
    the `prune` folders (see `folders`) whose file is not among `files`, with what they alone supported.
    `label` hears which files a batch holds ("files 1-20 of 35") before its `progress`."""
    from duckgraph.core.domain.ingest import MAX_TOTAL_DOCUMENT_CHARS

    report = IngestReport()
    present = {f.id for f in files}
    batch: list[tuple[FileDocument, DocumentInput]] = []
    first = 0  # the number of the batch's first file

    def flush(last: int) -> None:
        if batch:
            if label is not None:
                label(f"files {first + 1}-{last} of {len(files)}")
            _store(kb, batch, report, extract=extract, progress=progress, on_batch=on_batch)
            batch.clear()

    for number, file in enumerate(files):
        documents = _documents(file, report)
        present.update(d.id for d in documents)
        # A batch of at most BATCH documents that add_documents takes in one call (its limit on characters).
        if batch and (len(batch) + len(documents) > BATCH
                      or sum(len(d.text) for _, d in batch) + sum(len(d.text) for d in documents)
                      > MAX_TOTAL_DOCUMENT_CHARS):
            flush(number)
            first = number
        if not batch:
            first = number
        batch += [(file, d) for d in documents]
    flush(len(files))
    for folder in prune:
        _prune(kb, folder, present, report)
    return report


def _documents(file: FileDocument, report: IngestReport) -> list[DocumentInput]:
    """The file's documents; none, and the reason in `report.skipped`, when it is refused or cannot be read."""
    if file.refused:
        report.skipped.append((str(file.path), file.refused))
        return []
    try:
        documents = read_documents(file)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: pydantic's, e.g. a too long id
        report.skipped.append((str(file.path), " ".join(str(exc).split())[:300]))
        return []
    if not documents:
        report.skipped.append((str(file.path), "no text"))
    elif len(documents) > 1:
        report.split[str(file.path)] = len(documents)
    return documents


def _store(kb: KnowledgeBase, batch: Sequence[tuple[FileDocument, DocumentInput]], report: IngestReport, *,
           extract: bool, progress: Callable[[int, int, str], None] | None,
           on_batch: Callable[[AddDocumentsResult], None] | None) -> None:
    """Store a batch in one call; when the call refuses it, each file on its own, so that one bad file is
    skipped with the reason and the others are stored."""
    try:
        result = kb.add_documents([d for _, d in batch], extract=extract, progress=progress)
    except InvalidInputError as exc:
        files = list(dict.fromkeys(file.id for file, _ in batch))
        if len(files) == 1:
            report.skipped.append((str(batch[0][0].path), " ".join(str(exc).split())[:300]))
            return
        for file_id in files:
            _store(kb, [(f, d) for f, d in batch if f.id == file_id], report, extract=extract, progress=progress,
                   on_batch=on_batch)
        return
    for stored in result.documents:
        (report.unchanged if stored.unchanged else report.stored).append(stored.id)
    report.results.append(result)
    if on_batch is not None:
        on_batch(result)


def _prune(kb: KnowledgeBase, folder: Path, present: set[str], report: IngestReport) -> None:
    prefix = folder.as_posix().rstrip("/") + "/"
    with kb.writing(vectors=False) as writer:  # read and delete as one step: no write slips in between
        gone = [d for d in _document_ids(kb) if d.startswith(prefix) and d not in present]
        if gone:
            summary = writer.commit(WriteBatch(delete_documents=[(kb.namespace, d) for d in gone]))
            report.pruned += gone
            report.nodes_pruned += summary.nodes_deleted
            report.edges_pruned += summary.edges_deleted


def _document_ids(kb: KnowledgeBase, page: int = 1_000) -> list[str]:
    ids, offset = [], 0
    while batch := kb.store.list_documents(kb.namespace, offset=offset, limit=page):
        ids += [d.id for d in batch]
        offset += len(batch)
    return ids


def folders(paths: Sequence[str]) -> list[Path]:
    """The folders among `paths`, resolved: what pruning looks under (also one with no file left)."""
    return sorted({Path(p).expanduser().resolve() for p in paths if Path(p).expanduser().is_dir()})
