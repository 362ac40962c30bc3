"""`duckgraph ingest`: text files and folders kept as documents, a folder mirrored (changed files replaced, with
`prune` the documents of files that are gone deleted).

A file's document id is its canonical absolute path: the folder given, resolved (`notes/`, `./notes`,
`~/notes` and `/home/me/notes/` are one folder, symlinks followed), then the file's path inside it. So a folder
ingested however it is typed is stored once; pruning touches only the documents under that folder's path (never
those of another folder that happens to have the same name); and the id tells whoever reads a passage (a model
included) where the file is. The price: a moved folder is a new folder (docs/storage.md says how to move one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from duckgraph.ports import DuckgraphError, WriteBatch

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
    """One file to store: its id (see the module) and where it is."""

    id: str
    path: Path


@dataclass
class IngestReport:
    stored: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    pruned: list[str] = field(default_factory=list)
    nodes_pruned: int = 0
    edges_pruned: int = 0
    results: list[AddDocumentsResult] = field(default_factory=list)


def find_files(paths: Sequence[str]) -> list[FileDocument]:
    """The .txt and .md files of `paths` (files, or folders searched recursively), each once, in path order."""
    found: dict[str, FileDocument] = {}
    for argument in paths:
        given = Path(argument).expanduser()
        if given.is_dir():
            folder = given.resolve()
            for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES):
                document_id = (folder / path.relative_to(folder)).as_posix()  # inside the folder, symlink or not
                found.setdefault(document_id, FileDocument(document_id, path))
        elif given.is_file():
            path = given.resolve()
            found.setdefault(path.as_posix(), FileDocument(path.as_posix(), path))
        else:
            raise DuckgraphError(f"{argument} does not exist")
    return sorted(found.values(), key=lambda f: f.id)


def read_document(file: FileDocument) -> DocumentInput | None:
    """The file as a document (None when it holds no text): Markdown front matter, when present, gives the title
    (else the file name) and the date (kept in the metadata), and is left out of the text."""
    from duckgraph.core.domain.model import DocumentInput

    text = file.path.read_text(encoding="utf-8")
    title, metadata = file.path.stem, {}
    if file.path.suffix.lower() != ".txt" and (match := _FRONT_MATTER.match(text)):
        fields = _front_matter(match.group(1))
        title = fields.get("title") or title
        if fields.get("date"):
            metadata["date"] = fields["date"]
        text = text[match.end():]
    if not text.strip():
        return None
    return DocumentInput(id=file.id, title=title, text=text, metadata=metadata)


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
    report = IngestReport()
    for start in range(0, len(files), BATCH):
        documents = []
        for file in files[start:start + BATCH]:
            try:
                document = read_document(file)
            except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: pydantic's, e.g. a too long id
                report.skipped.append((str(file.path), " ".join(str(exc).split())[:300]))
                continue
            if document is None:
                report.skipped.append((str(file.path), "no text"))
            else:
                documents.append(document)
        if documents:
            if label is not None:
                label(f"files {start + 1}-{min(start + BATCH, len(files))} of {len(files)}")
            result = kb.add_documents(documents, extract=extract, progress=progress)
            for stored in result.documents:
                (report.unchanged if stored.unchanged else report.stored).append(stored.id)
            report.results.append(result)
            if on_batch is not None:
                on_batch(result)
    present = {f.id for f in files}
    for folder in prune:
        _prune(kb, folder, present, report)
    return report


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
