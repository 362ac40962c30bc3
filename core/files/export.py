"""Export: a whole knowledge base as JSON Lines, in the format of `duckgraph.core.files.jsonl_format`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from pydantic import BaseModel

from duckgraph.core.domain.moments import iso_utc
from duckgraph.core.files.jsonl_format import FORMAT, FORMAT_VERSION
from duckgraph.core.files.paths import Permissions, give_permissions, permissions_for
from duckgraph.ports import ChunkRecord, DuckgraphError, EdgeRecord, InvalidInputError
from duckgraph.ports.store import special_file

if TYPE_CHECKING:
    import numpy as np

    from duckgraph.core.domain.knowledge_base import KnowledgeBase

#: Rows read from the store at a time while exporting.
PAGE = 1_000

T = TypeVar("T")


class ExportSummary(BaseModel):
    documents: int = 0
    chunks: int = 0
    nodes: int = 0
    edges: int = 0
    mentions: int = 0
    edge_evidence: int = 0
    community_reports: int = 0
    embeddings: bool = False


def export_jsonl(
    kb: KnowledgeBase, out: TextIO, *, embeddings: bool = False, namespace: str | None = None
) -> ExportSummary:
    """Write every namespace of the knowledge base (or only `namespace`) to `out` as JSON Lines (see the module
    docstring)."""
    only = None if namespace is None else kb.resolve_namespace(namespace)
    kb.open()
    store = kb.store
    info = store.embedder_info()
    embeddings = embeddings and info is not None  # a file never bound to an embedder has no vectors
    summary = ExportSummary(embeddings=embeddings)
    health = store.health()
    _write(out, {
        "kind": "meta", "format": FORMAT, "version": FORMAT_VERSION, "schema_version": health.get("schema_version"),
        "embedder": None if info is None else {"id": info[0], "dimensions": info[1]}, "embeddings": embeddings,
    })
    namespaces = [ns for ns in store.namespaces() if only is None or ns == only]

    chunk_ids: dict[int, int] = {}  # database id -> id in the file
    for namespace in namespaces:
        for documents in _pages(lambda offset: store.list_documents(namespace, offset=offset, limit=PAGE)):
            chunks = store.document_chunks(namespace, [d.id for d in documents])
            vectors = store.get_vectors("chunk", [c.id for c in chunks]) if embeddings else {}
            marks = store.extraction_marks([c.id for c in chunks])
            by_document: dict[str, list[ChunkRecord]] = {}
            for chunk in chunks:
                by_document.setdefault(chunk.document_id, []).append(chunk)
            for document in documents:
                _write(out, {
                    "kind": "document", "namespace": namespace, "id": document.id, "title": document.title,
                    "text": document.text, "metadata": document.metadata, "created_at": _time(document.created_at),
                    **({"time": _time(document.time)} if document.time else {}),
                })
                summary.documents += 1
                for chunk in sorted(by_document.get(document.id, []), key=lambda c: c.ordinal):
                    chunk_ids[chunk.id] = len(chunk_ids) + 1
                    _write(out, {
                        "kind": "chunk", "id": chunk_ids[chunk.id], "namespace": namespace,
                        "document_id": chunk.document_id, "ordinal": chunk.ordinal, "text": chunk.text,
                        **({"section": chunk.section} if chunk.section else {}),
                        **({"extracted_by": marks[chunk.id]} if chunk.id in marks else {}),
                    }, vectors.get(chunk.id))
                    summary.chunks += 1

    nodes = [n for ns in namespaces
             for n in read_all(lambda offset, ns=ns: store.list_nodes(ns, offset=offset, limit=PAGE))]
    nodes.sort(key=lambda n: (n.namespace, *_time_key(n.created_at), n.id))  # creation order (jsonl_format)
    node_ids = {n.id: i for i, n in enumerate(nodes, start=1)}
    for page in _chunked(nodes, PAGE):
        observations = store.get_observations([n.id for n in page])
        by_hand = store.written_by_hand("node", [n.id for n in page])
        vectors = store.get_vectors("node", [n.id for n in page]) if embeddings else {}
        for node in page:
            _write(out, {
                "kind": "node", "id": node_ids[node.id], "namespace": node.namespace, "name": node.name,
                "type": node.type, "description": node.description, "aliases": list(node.aliases),
                "properties": node.properties, "observations": observations.get(node.id, []),
                "created_at": _time(node.created_at), "updated_at": _time(node.updated_at),
                **({"by_hand": True} if node.id in by_hand else {}),
            }, vectors.get(node.id))
            summary.nodes += 1

    by_id = {n.id: n for n in nodes}
    namespace_of: dict[int, str] = {}
    edges: list[EdgeRecord] = []
    for namespace in namespaces:
        for edge in read_all(lambda offset, ns=namespace: store.list_edges(ns, offset=offset, limit=PAGE,
                                                                       include_expired=True)):
            if edge.source_id in by_id and edge.target_id in by_id:
                edges.append(edge)
                namespace_of[edge.id] = namespace
    edges.sort(key=lambda e: (namespace_of[e.id], *_time_key(e.created_at), e.id))
    edge_ids = {e.id: i for i, e in enumerate(edges, start=1)}
    for page in _chunked(edges, PAGE):
        vectors = store.get_vectors("edge", [e.id for e in page]) if embeddings else {}
        by_hand = store.written_by_hand("edge", [e.id for e in page])
        for edge in page:
            _write(out, {
                "kind": "edge", "id": edge_ids[edge.id], "namespace": namespace_of[edge.id],
                "source_id": node_ids[edge.source_id], "target_id": node_ids[edge.target_id],
                "source": by_id[edge.source_id].name, "target": by_id[edge.target_id].name, "type": edge.type,
                "description": edge.description, "weight": edge.weight, "properties": edge.properties,
                "valid_from": _time(edge.valid_from), "valid_until": _time(edge.valid_until),
                "created_at": _time(edge.created_at), "updated_at": _time(edge.updated_at),
                **({"by_hand": True} if edge.id in by_hand else {}),
            }, vectors.get(edge.id))
            summary.edges += 1

    mentions = sorted(
        (node_ids[node_id], chunk_ids[chunk_id])
        for page in _chunked(nodes, PAGE)
        for chunk_id, node_id in store.chunks_mentioning([n.id for n in page], limit=2**62)
        if chunk_id in chunk_ids and node_id in node_ids
    )
    for node_id, chunk_id in mentions:
        _write(out, {"kind": "mention", "node_id": node_id, "chunk_id": chunk_id})
    summary.mentions = len(mentions)
    evidence = sorted(
        (edge_ids[edge_id], chunk_ids[chunk_id])
        for page in _chunked(edges, PAGE)
        for edge_id, chunk_id in store.edge_evidence([e.id for e in page])
        if chunk_id in chunk_ids and edge_id in edge_ids
    )
    for edge_id, chunk_id in evidence:
        _write(out, {"kind": "edge_evidence", "edge_id": edge_id, "chunk_id": chunk_id})
    summary.edge_evidence = len(evidence)
    summary.community_reports = _write_reports(out, kb, namespaces, node_ids)
    # Last: a file without it was cut short (an export to standard output stopped midway ends on a whole line).
    _write(out, {"kind": "end", "lines": {
        "document": summary.documents, "chunk": summary.chunks, "node": summary.nodes, "edge": summary.edges,
        "mention": summary.mentions, "edge_evidence": summary.edge_evidence,
        "community_report": summary.community_reports}})
    return summary


def write_file(output: str | Path, memory: Path | None, write: Callable[[TextIO], T]) -> T:
    """Call `write` with the file `output` open for UTF-8 text, and return what it returns.

    The text goes to `output`.partial beside the file and is renamed over it once whole, so an interrupted export
    leaves no half file. Through a symbolic link the link's target is written and the link stays (as restore and
    compact keep a --db link): a link to a synced folder keeps being updated. The partial has its final
    permissions from the start (`permissions_for`: a file written over keeps its mode and owner, a new one gets
    the memory file's). A device or a pipe (/dev/null, /dev/stdout, a shell's >(gzip > f)) is written as it is:
    renamed over, the device itself would be replaced by a file. Errors name `output` as the user gave it.
    """
    path = Path(output).expanduser().resolve()
    try:
        kind = special_file(path.stat().st_mode)
    except OSError:
        kind = None
    if kind:
        try:
            with path.open("w", encoding="utf-8", newline="\n") as out:
                return write(out)
        except OSError as exc:
            raise DuckgraphError(f"cannot write {output} ({kind}): {exc.strerror or exc}") from exc
    _check_folder(output, path)
    permissions = permissions_for(path, memory)
    partial = path.with_name(path.name + ".partial")
    try:
        out = _create(partial, permissions)
    except OSError as exc:
        raise _not_written(output, path, exc) from exc
    try:
        with out:
            try:
                give_permissions(partial, permissions, fd=out.fileno())
            except InvalidInputError as exc:  # an owner this user cannot give: before a line is written
                raise InvalidInputError(f"cannot write {output}: {exc}; nothing was written") from exc
            result = write(out)
        os.replace(partial, path)
    except BaseException as exc:
        partial.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise _not_written(output, path, exc) from exc
        raise
    return result


def _check_folder(output: str | Path, path: Path) -> None:
    """Refuse a file whose folder is missing, in the user's words: the folder, not the partial file's name."""
    folder = path.parent
    if folder.is_dir():
        return
    given = Path(output).expanduser().parent
    shown = given if given.resolve() == folder else folder  # the folder as the user wrote it, unless a link moved it
    what = f"{shown} is not a folder" if folder.exists() else f"the folder {shown} does not exist"
    raise InvalidInputError(f"cannot write {output}: {what}; create it first or choose another file; nothing was "
                            "written")


def _create(partial: Path, permissions: Permissions) -> TextIO:
    """Create `partial` with `permissions.mode` (narrowed by the umask) from the first moment it exists."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(partial, flags, permissions.mode)
    except FileExistsError:
        # Left by an export that was killed: opened as it is, it would keep its own permissions (or be a link).
        partial.unlink()
        fd = os.open(partial, flags, permissions.mode)
    return os.fdopen(fd, "w", encoding="utf-8", newline="\n")


def _not_written(output: str | Path, path: Path, exc: OSError) -> DuckgraphError:
    if isinstance(exc, PermissionError) and not os.access(path.parent, os.W_OK | os.X_OK):
        why = f"the folder {path.parent} is not writable by this user"
    else:
        why = exc.strerror or str(exc)
    kept = f"{output} is unchanged" if path.exists() else "nothing was written"
    return DuckgraphError(f"cannot write {output}: {why}; {kept}")


def _write_reports(out: TextIO, kb: KnowledgeBase, namespaces: Sequence[str], node_ids: dict[int, int]) -> int:
    """The reports a model or the host wrote, with their communities' members (see jsonl_format)."""
    from duckgraph.core.domain.communities.transfer import written_reports

    lines = sorted(
        (namespace, c.level, sorted(node_ids[m] for m in c.members if m in node_ids), c.title, c.summary, c.author,
         c.stale) for namespace in namespaces for c in written_reports(kb, namespace))
    lines = [line for line in lines if line[2]]  # a community of nodes all left out (none: they are exported)
    for namespace, level, members, title, summary, author, stale in lines:
        _write(out, {"kind": "community_report", "namespace": namespace, "level": level, "members": members,
                     "title": title, "summary": summary, "author": author, "stale": stale})
    return len(lines)


def _write(out: TextIO, obj: dict[str, Any], vector: np.ndarray | None = None) -> None:
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if vector is not None:
        # Nine significant digits give back the very same float32; written by hand, the line stays the same.
        line = line[:-1] + ',"embedding":[' + ",".join(f"{x:.9g}" for x in vector.tolist()) + "]}"
    out.write(line + "\n")


def _time(value: datetime | None) -> str | None:
    # With its zone ("Z"): stored times are naive UTC, and a reader of the file must not take them for local time.
    return None if value is None else iso_utc(value, "microseconds")


def _time_key(value: datetime | None) -> tuple[bool, datetime]:
    return (value is not None, value or datetime.min)


def _pages(read: Callable[[int], list[Any]]) -> Iterator[list[Any]]:
    offset = 0
    while True:
        page = read(offset)
        if page:
            yield page
        if len(page) < PAGE:
            return
        offset += len(page)


def read_all(read: Callable[[int], list[Any]]) -> list[Any]:
    """Every row of a paged read, `read(offset)` giving PAGE rows at a time."""
    return [item for page in _pages(read) for item in page]


def _chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
