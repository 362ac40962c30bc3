"""Import: a duckgraph export (see `duckgraph.core.files.jsonl_format`) or the reference memory server's
memory.jsonl, into a knowledge base.

Importing matches rows by natural keys (document id, entity name, the two ends and type of a relation), so
importing the same file twice changes nothing, and an import is one transaction: all of it or nothing. An export is
read, checked and written a batch of lines at a time (in that one transaction), so memory does not grow with it.

This module tells the two apart and reads an export, a batch at a time; `import_plan` plans what each batch writes
(with `import_periods`, the checks of its relations' validity periods), `memory_import` reads the memory server's
file, and `import_base` holds what both imports share.
"""

from __future__ import annotations

import itertools
import json
import pickle
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from duckgraph.core.domain.communities.transfer import restore as restore_reports
from duckgraph.core.domain.ingest import Progress
from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.core.files.import_base import Import
from duckgraph.core.files.import_plan import BatchPlanner
from duckgraph.core.files.import_summary import ImportSummary
from duckgraph.core.files.jsonl_format import (
    COUNTED,
    ENDS_SINCE,
    FORMAT_VERSION,
    LINE_MODELS,
    ChunkLine,
    EdgeLine,
    EndLine,
    Line,
    MetaLine,
    NodeLine,
)
from duckgraph.core.files.memory_import import MemoryImport
from duckgraph.core.domain.argument_errors import readable
from duckgraph.ports import (
    EmbedderMismatchError,
    InvalidInputError,
    Snapshot,
    WriteSummary,
    entity_key,
)

#: Lines of a duckgraph export checked, embedded and written at a time: what an import holds in memory (about
#: 8 KB a line with vectors), however long the file.
BATCH_LINES = 2_000

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase


def import_file(
    kb: KnowledgeBase, path: str | Path, *, reembed: bool = False, progress: Progress | None = None,
    namespace: str | None = None, allow_incomplete: bool = False,
) -> ImportSummary:
    """Import a duckgraph export or a reference memory server memory.jsonl (told apart by their lines); with
    `namespace`, all of it into that namespace (a file of one namespace only)."""
    path = Path(path).expanduser()
    try:
        with path.open(encoding="utf-8") as handle:
            return import_lines(kb, handle, source=str(path), reembed=reembed, progress=progress, namespace=namespace,
                                allow_incomplete=allow_incomplete)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text: {exc}") from exc


def import_lines(
    kb: KnowledgeBase, lines: Iterable[str], *, source: str = "<input>", reembed: bool = False,
    progress: Progress | None = None, namespace: str | None = None, allow_incomplete: bool = False,
) -> ImportSummary:
    """Import JSON Lines in one transaction: a line refused anywhere in the file leaves nothing written.
    `namespace`: where every line goes (default: a line's own namespace, else the knowledge base's).
    `allow_incomplete`: import a duckgraph export that lacks lines its end line counts, or its end line (cut
    short), rather than refuse it; the summary's `completeness` says what it lacks."""
    into = None if namespace is None else check_namespace(namespace)
    objects = _objects(lines, source, allow_incomplete)
    first = next(objects, None)
    if first is None:
        raise InvalidInputError(f"{source} holds no lines to import")
    stream = itertools.chain([first], objects)
    if "kind" in first[1]:
        return _NativeImport(kb, source, reembed, progress, into, allow_incomplete).run(stream)
    if first[1].get("type") in ("entity", "relation"):
        return MemoryImport(kb, source, progress, into).run(stream)
    raise InvalidInputError(
        f"{source}:{first[0]}: neither a duckgraph export (lines with a \"kind\") nor a memory server file "
        "(lines with \"type\": \"entity\" or \"relation\")"
    )


def _objects(lines: Iterable[str], source: str, allow_incomplete: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's JSON objects with their line numbers, one at a time: the importer keeps what it needs of each
    (a validated line, a vector as float32) rather than every raw object of the file at once. A last line that is
    no JSON and has no line break was cut in its middle (a copy or a disk that stopped short): refused as an
    incomplete file, or, with `allow_incomplete`, left out (the missing end line then says the file is cut)."""
    ahead = iter(lines)
    line = next(ahead, None)
    for number in itertools.count(1):
        if line is None:
            return
        following = next(ahead, None)
        if number == 1:  # a byte order mark (Notepad and some editors write one) is no JSON
            line = line.removeprefix("\ufeff")
        if not line.strip():
            line = following
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if following is None and not line.endswith("\n"):
                if allow_incomplete:
                    return
                raise InvalidInputError(
                    f"{source}:{number}: the file ends in the middle of this line: it is incomplete (copied or "
                    "written only in part); nothing was imported. Export the memory again (`duckgraph export -o "
                    "FILE` writes the whole file or none), or import the lines before it with --allow-incomplete"
                ) from exc
            raise InvalidInputError(f"{source}:{number}: not JSON ({exc.msg})") from exc
        line = following
        if not isinstance(obj, dict):
            raise InvalidInputError(f"{source}:{number}: a line must be a JSON object")
        yield number, obj


def _in_creation_order(lines: Iterable[tuple[int, Line]]) -> Iterator[tuple[int, Line]]:
    """The lines, each run of node lines and each run of edge lines in the order of their created_at (those without
    one last: they are created now), then file order. New rows get their ids in the order they are written, and ids
    are creation order (read_graph, `export --format memory-jsonl`), while an export sorts these lines by name. A
    run waits in a temporary file, not in memory."""
    with closing(sqlite3.connect("")) as db:  # "": a temporary file, removed when closed
        db.execute("CREATE TABLE run (late INTEGER, at TEXT, number INTEGER, line BLOB)")
        for kind, run in itertools.groupby(lines, key=lambda item: type(item[1])):
            if kind not in (NodeLine, EdgeLine):
                yield from run
                continue
            db.execute("DELETE FROM run")
            db.executemany("INSERT INTO run VALUES (?, ?, ?, ?)", (
                (line.created_at is None, line.created_at.isoformat(timespec="microseconds") if line.created_at
                 else "", number, pickle.dumps(line, protocol=pickle.HIGHEST_PROTOCOL))
                for number, line in run))
            for number, blob in db.execute("SELECT number, line FROM run ORDER BY late, at, number"):
                yield number, pickle.loads(blob)


def _listed(held: dict[str, int]) -> str:
    """Counts of lines by kind, in words: "3 document, 40 chunk and 2,000 node lines"."""
    if not held:
        return "its meta line"
    counts = [f"{count:,} {kind}" for kind, count in held.items()]
    return (f"{', '.join(counts[:-1])} and {counts[-1]}" if len(counts) > 1 else counts[0]) + " lines"


def _compact(line: Line) -> Line:
    """The line with its embedding as float32 (1.5 KB for 384 dimensions, against ~12 KB as a list of Python
    floats): a batch's lines are held until the batch is written."""
    values = getattr(line, "embedding", None)
    if values is not None:
        import numpy as np

        line.embedding = np.asarray(values, dtype=np.float32)  # type: ignore[attr-defined]
    return line


class _NativeImport(Import):
    """A duckgraph export, read BATCH_LINES lines at a time: each batch is checked, embedded where it lacks
    vectors and handed to the store, then forgotten; all batches are one transaction. What later lines may refer
    to (the file's ids and keys of earlier lines) is kept in small maps (its `BatchPlanner`'s), never the lines
    themselves."""

    def __init__(self, kb: KnowledgeBase, source: str, reembed: bool, progress: Progress | None,
                 into: str | None, allow_incomplete: bool) -> None:
        super().__init__(kb, source, progress, into)
        self.reembed = reembed
        self.allow_incomplete = allow_incomplete
        self.meta: MetaLine | None = None
        self.end: EndLine | None = None
        self.held: Counter[str] = Counter()  # lines of each kind read, for the end line's counts
        self.embedder_checked = False
        #: What each batch writes, and the maps of what later lines may refer to.
        self.planner = BatchPlanner(self, reembed)

    def run(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> ImportSummary:
        try:
            return self._run(objects)
        finally:
            self.planner.close()

    def _run(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> ImportSummary:
        lines = self._parse(objects)
        first = next(lines, None)  # None: the one object `import_lines` saw is an end line
        if first is not None and isinstance(first[1], MetaLine):
            self.meta = first[1]
            if self.meta.version > FORMAT_VERSION:
                raise InvalidInputError(
                    f"{self.source} is version {self.meta.version} of the duckgraph format; this duckgraph reads "
                    f"up to version {FORMAT_VERSION}: upgrade duckgraph"
                )
            if self.meta.embeddings and not self.reembed:  # before the embedder is bound to a fresh file
                self._check_embedder()
        summary = ImportSummary(format="duckgraph")
        with self.kb.writing() as writer, writer.restoring() as restore:
            batch: list[tuple[int, Line]] = []
            for number, line in _in_creation_order(itertools.chain([first] if first else [], lines)):
                # A document and the chunks after it go in one batch: it is compared with the stored one whole.
                if len(batch) >= BATCH_LINES and not isinstance(line, ChunkLine):
                    self._write(restore, batch, summary)
                    batch = []
                batch.append((number, line))
            self._check_complete(summary)  # the whole file is read: before its last batch is embedded
            self._write(restore, batch, summary)
            for marks in self.planner.inferred_marks():  # of an older export: its provenance is all read now
                restore(marks)
            self.planner.periods.check_stored_overlaps()  # before the commit: a refusal leaves nothing written
        if self.planner.reports:  # derived data on the graph just committed: after the import's transaction
            summary.community_reports_restored, problems = restore_reports(self.kb, self.planner.reports)
            summary.skipped += problems
        return summary

    def _parse(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[tuple[int, Line]]:
        for position, (number, obj) in enumerate(objects):
            kind = obj.get("kind")
            model = LINE_MODELS.get(kind) if isinstance(kind, str) else None
            if model is None:
                raise self._fail(number, f"unknown kind {kind!r}; expected one of {', '.join(LINE_MODELS)}")
            if self.end is not None:
                raise self._fail(number, "a line after the end line, which an export writes last: the file holds "
                                         "more than one export, or lines were added after it; nothing was imported: "
                                         "import each export on its own, or remove the end line")
            if model is MetaLine and position != 0:
                raise self._fail(number, "the meta line must be the first line")
            try:
                line = model.model_validate(obj)
            except ValidationError as exc:
                raise self._fail(number, f"invalid {kind} line: {readable(exc)}") from exc
            if getattr(line, "embedding", None) is not None and not self.reembed and not self.embedder_checked:
                self._check_embedder()
            if isinstance(line, EndLine):
                self.end = line
                continue
            self.held[line.kind] += 1
            if self.into is not None and not isinstance(line, MetaLine):
                self._move(number, line)
            elif line.namespace is not None:
                # As the tools check it: a namespace no tool or command can name would hold data out of reach.
                try:
                    check_namespace(line.namespace)
                except InvalidInputError as exc:
                    raise self._fail(number, f"{exc}; nothing was imported: fix the line, or import with "
                                             "--namespace NAME to put every line into NAME") from None
            if isinstance(line, NodeLine) and (key := entity_key(line.name)):
                # `_in_creation_order` reads a whole run of node lines before it yields the first, so when a batch
                # of them is planned, every line of their run has been noted here.
                self.planner.defined.add((line.namespace or self.kb.namespace, key))
            yield number, _compact(line)

    def _check_complete(self, summary: ImportSummary) -> None:
        """Refuse a file that lacks lines its end line counts, or the end line an export of format version
        `ENDS_SINCE` writes last, unless `allow_incomplete`: it was cut short, and would import as a smaller
        memory. An older file (or one without a meta line) is imported with the warning that this is not known."""
        held = {kind: self.held[kind] for kind in COUNTED if self.held[kind]}
        if self.end is not None:
            counted = {kind: count for kind, count in self.end.lines.items() if count}
            if held == counted:
                summary.complete = True
                return
            differ = "; ".join(f"{kind} lines: {self.held[kind]:,}, the end line says {counted.get(kind, 0):,}"
                               for kind in COUNTED if self.held[kind] != counted.get(kind, 0))
            fewer = all(self.held[kind] <= counted.get(kind, 0) for kind in COUNTED)
            problem = (f"{self.source} {'is incomplete' if fewer else 'was changed since it was exported'}: its "
                       f"lines do not match the counts of its end line ({differ})")
        elif self.meta is not None and self.meta.version >= ENDS_SINCE:
            problem = (f"{self.source} is incomplete: it ends after {_listed(held)} without the end line that an "
                       "export writes last: the export was stopped midway, or the file was cut")
        else:
            why = ("it has no meta line: written by hand, or not from the start of an export" if self.meta is None
                   else f"it was written by a duckgraph before version {ENDS_SINCE} of the format")
            summary.completeness = (f"{self.source} has no end line ({why}): whether it holds the whole export "
                                    "cannot be checked; if the export was stopped midway, what it lacks is not "
                                    "imported")
            return
        if not self.allow_incomplete:
            raise InvalidInputError(
                f"{problem}; nothing was imported. Export the memory again (`duckgraph export -o FILE` writes the "
                "whole file or none), or import what the file holds with --allow-incomplete")
        summary.complete = False
        summary.completeness = f"{problem}; imported what it holds (--allow-incomplete)"

    def _move(self, number: int, line: Line) -> None:
        """Put the line in `into`; a file that holds several namespaces cannot go into one."""
        if line.namespace is not None:
            if self.from_namespace not in (None, line.namespace):
                raise self._fail(number, f"the file holds the namespaces {self.from_namespace!r} and "
                                         f"{line.namespace!r}; it goes into one namespace only if it holds one: "
                                         "import it without a namespace, or export one namespace at a time")
            self.from_namespace = line.namespace
        line.namespace = self.into

    def _write(self, restore: Callable[[Snapshot], WriteSummary], batch: list[tuple[int, Line]],
               summary: ImportSummary) -> None:
        self._embed_and_restore(restore, self.planner.plan(batch, summary, self.meta), summary)

    def _check_embedder(self) -> None:
        meta = self.meta
        if meta is None or meta.embedder is None:
            raise InvalidInputError(
                f"{self.source} has embeddings but no meta line naming the embedder they come from; import it "
                "with --re-embed to compute them again"
            )
        self.kb.open()
        stored = self.store.embedder_info()
        configured_id = self.kb.embedder.id
        theirs = (meta.embedder.id, meta.embedder.dimensions)
        if stored is not None and stored != theirs:
            raise EmbedderMismatchError(
                f"the vectors in {self.source} come from {theirs[0]!r} ({theirs[1]} dimensions) but "
                f"{getattr(self.store, 'path', 'the knowledge base')} holds vectors of {stored[0]!r} ({stored[1]} "
                "dimensions): import into another file, or use --re-embed to compute the vectors again"
            )
        if configured_id != theirs[0] or self.kb.embedder.dimensions != theirs[1]:
            raise EmbedderMismatchError(
                f"the vectors in {self.source} come from {theirs[0]!r} ({theirs[1]} dimensions) but "
                f"{configured_id!r} is configured: configure {theirs[0]!r}, or use --re-embed to compute the "
                "vectors with the configured embedder"
            )
        self.embedder_checked = True
