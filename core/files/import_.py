"""Import: a duckgraph export (see `duckgraph.core.files.jsonl_format`) or the reference memory server's
memory.jsonl, into a knowledge base.

Importing matches rows by natural keys (document id, entity name, the two ends and type of a relation), so
importing the same file twice changes nothing, and an import is one transaction: all of it or nothing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from duckgraph.core.domain.ingest import Progress, embed_in_batches
from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.model import MemoryEntityInput, RelationInput
from duckgraph.core.domain.memory_server import ORIGINAL_TYPE
from duckgraph.core.domain.texts import edge_text, node_text, passage_text
from duckgraph.core.files.jsonl_format import (
    FORMAT_VERSION,
    LINE_MODELS,
    ChunkLine,
    DocumentLine,
    EdgeLine,
    EvidenceLine,
    Line,
    MentionLine,
    MetaLine,
    NodeLine,
)
from duckgraph.ports import (
    ChunkRecord,
    DocumentRecord,
    EdgeRecord,
    EdgeWrite,
    EmbedderMismatchError,
    InvalidInputError,
    NodeRecord,
    Snapshot,
    entity_key,
    relation_type,
)

if TYPE_CHECKING:
    import numpy as np

    from duckgraph.core.domain.knowledge_base import KnowledgeBase, Writer


class ImportSummary(BaseModel):
    """What an import changed. Rows already stored as the file has them count as unchanged."""

    format: Literal["duckgraph", "memory"]
    documents_written: int = 0
    documents_unchanged: int = 0
    chunks_written: int = 0
    nodes_created: int = 0
    nodes_updated: int = 0
    nodes_unchanged: int = 0
    edges_created: int = 0
    edges_updated: int = 0
    edges_unchanged: int = 0
    mentions_added: int = 0
    evidence_added: int = 0
    texts_embedded: int = 0
    skipped: list[str] = Field(default_factory=list, description="Lines left out, and why.")


def import_file(
    kb: KnowledgeBase, path: str | Path, *, reembed: bool = False, progress: Progress | None = None
) -> ImportSummary:
    """Import a duckgraph export or a reference memory server memory.jsonl (told apart by their lines)."""
    path = Path(path).expanduser()
    try:
        with path.open(encoding="utf-8") as handle:
            return import_lines(kb, handle, source=str(path), reembed=reembed, progress=progress)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text: {exc}") from exc


def import_lines(
    kb: KnowledgeBase, lines: Iterable[str], *, source: str = "<input>", reembed: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import JSON Lines; every line is checked before anything is written, and the write is one transaction."""
    objects = _objects(lines, source)
    first = next(objects, None)
    if first is None:
        raise InvalidInputError(f"{source} holds no lines to import")
    stream = itertools.chain([first], objects)
    if "kind" in first[1]:
        return _NativeImport(kb, source, reembed, progress).run(stream)
    if first[1].get("type") in ("entity", "relation"):
        return _MemoryImport(kb, source, progress).run(stream)
    raise InvalidInputError(
        f"{source}:{first[0]}: neither a duckgraph export (lines with a \"kind\") nor a memory server file "
        "(lines with \"type\": \"entity\" or \"relation\")"
    )


def _objects(lines: Iterable[str], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's JSON objects with their line numbers, one at a time: the importer keeps what it needs of each
    (a validated line, a vector as float32) rather than every raw object of the file at once."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInputError(f"{source}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(obj, dict):
            raise InvalidInputError(f"{source}:{number}: a line must be a JSON object")
        yield number, obj


def _compact(line: Line) -> Line:
    """The line with its embedding as float32 (1.5 KB for 384 dimensions, against ~12 KB as a list of Python
    floats), kept so until the plan checks it: the file's lines are all held at once."""
    values = getattr(line, "embedding", None)
    if values is not None:
        import numpy as np

        line.embedding = np.asarray(values, dtype=np.float32)  # type: ignore[attr-defined]
    return line


def validation_problems(exc: ValidationError) -> str:
    """A validation error in one line, each problem as `field: message`, as the tools word them."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors())


@dataclass
class _Plan:
    """What an import will write, and what still needs a vector."""

    snapshot: Snapshot = field(default_factory=Snapshot)
    #: (item, text) pairs to embed: the item's `embedding` is set from the text's vector.
    to_embed: list[tuple[Any, str]] = field(default_factory=list)


class _Import:
    def __init__(self, kb: KnowledgeBase, source: str, progress: Progress | None) -> None:
        self.kb = kb
        self.store = kb.store
        self.source = source
        self.progress = progress

    def _fail(self, number: int, message: str) -> InvalidInputError:
        return InvalidInputError(f"{self.source}:{number}: {message}")

    def _embed_and_restore(self, writer: Writer, plan: _Plan, summary: ImportSummary) -> ImportSummary:
        embed_in_batches(self.kb.embedder, plan.to_embed, self.progress, "embedding")
        summary.texts_embedded = len(plan.to_embed)
        written = writer.restore(plan.snapshot)
        summary.documents_written = written.documents_written
        summary.chunks_written = written.chunks_written
        summary.nodes_created, summary.nodes_updated = written.nodes_created, written.nodes_updated
        summary.edges_created, summary.edges_updated = written.edges_created, written.edges_updated
        summary.mentions_added, summary.evidence_added = written.mentions_added, written.evidence_added
        return summary

    def _existing_nodes(self, keys: dict[str, set[str]]) -> dict[tuple[str, str], NodeRecord]:
        """Stored nodes by (namespace, key), for the keys wanted in each namespace (exact keys only)."""
        found: dict[tuple[str, str], NodeRecord] = {}
        for namespace, wanted in keys.items():
            for node in self.store.find_nodes(namespace, wanted):
                if node.key in wanted:
                    found[(namespace, node.key)] = node
        return found


class _NativeImport(_Import):
    def __init__(self, kb: KnowledgeBase, source: str, reembed: bool, progress: Progress | None) -> None:
        super().__init__(kb, source, progress)
        self.reembed = reembed

    def run(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> ImportSummary:
        lines = self._parse(objects)
        meta = next((line for _, line in lines if isinstance(line, MetaLine)), None)
        if meta is not None and meta.version > FORMAT_VERSION:
            raise InvalidInputError(
                f"{self.source} is version {meta.version} of the duckgraph format; this duckgraph reads up to "
                f"version {FORMAT_VERSION}: upgrade duckgraph"
            )
        with_vectors = any(getattr(line, "embedding", None) is not None for _, line in lines)
        if with_vectors and not self.reembed:
            self._check_embedder(meta)
        with self.kb.writing() as writer:
            plan, summary = self._plan(lines)
            return self._embed_and_restore(writer, plan, summary)

    def _parse(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> list[tuple[int, Line]]:
        parsed: list[tuple[int, Line]] = []
        for position, (number, obj) in enumerate(objects):
            kind = obj.get("kind")
            model = LINE_MODELS.get(kind) if isinstance(kind, str) else None
            if model is None:
                raise self._fail(number, f"unknown kind {kind!r}; expected one of {', '.join(LINE_MODELS)}")
            if model is MetaLine and position != 0:
                raise self._fail(number, "the meta line must be the first line")
            try:
                parsed.append((number, _compact(model.model_validate(obj))))
            except ValidationError as exc:
                raise self._fail(number, f"invalid {kind} line: {validation_problems(exc)}") from exc
        return parsed

    def _check_embedder(self, meta: MetaLine | None) -> None:
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

    def _vector(self, number: int, values: np.ndarray | None) -> np.ndarray | None:
        if values is None or self.reembed:
            return None
        import numpy as np

        if len(values) != self.kb.embedder.dimensions or not np.isfinite(values).all():
            raise self._fail(number, f"the embedding must be {self.kb.embedder.dimensions} finite numbers")
        return values

    def _plan(self, lines: list[tuple[int, Line]]) -> tuple[_Plan, ImportSummary]:
        default = self.kb.namespace
        plan, summary = _Plan(), ImportSummary(format="duckgraph")
        snapshot = plan.snapshot

        # Documents and their chunks: a document is written when it is new or differs in text, title,
        # metadata or passages; otherwise the stored one (and its chunk ids) stays.
        documents: dict[tuple[str, str], tuple[int, DocumentLine]] = {}
        chunks: dict[int, tuple[int, ChunkLine, str]] = {}  # file id -> (line, chunk, namespace)
        chunks_of: dict[tuple[str, str], list[ChunkLine]] = {}
        for number, line in lines:
            if isinstance(line, DocumentLine):
                key = (line.namespace or default, line.id)
                if key in documents:
                    raise self._fail(number, f"document {line.id!r} appears twice")
                documents[key] = (number, line)
            elif isinstance(line, ChunkLine):
                namespace = line.namespace or default
                if (namespace, line.document_id) not in documents:
                    raise self._fail(number, f"chunk of document {line.document_id!r}, which is not in the file "
                                             "before it")
                if line.id in chunks:
                    raise self._fail(number, f"chunk id {line.id} appears twice")
                chunks[line.id] = (number, line, namespace)
                chunks_of.setdefault((namespace, line.document_id), []).append(line)
        by_namespace: dict[str, list[str]] = {}
        for namespace, doc_id in documents:
            by_namespace.setdefault(namespace, []).append(doc_id)
        for namespace, ids in by_namespace.items():
            stored = {d.id: d for d in self.store.get_documents(ids, namespace)}
            stored_chunks: dict[str, list[tuple[int, str]]] = {}
            for chunk in self.store.document_chunks(namespace, ids):
                stored_chunks.setdefault(chunk.document_id, []).append((chunk.ordinal, chunk.text))
            for doc_id in ids:
                _, line = documents[(namespace, doc_id)]
                mine = sorted(chunks_of.get((namespace, doc_id), []), key=lambda c: c.ordinal)
                if len({c.ordinal for c in mine}) != len(mine):
                    raise InvalidInputError(f"{self.source}: document {doc_id!r} has two chunks with one ordinal")
                old = stored.get(doc_id)
                if (old is not None and (old.title, old.text, old.metadata) == (line.title, line.text, line.metadata)
                        and sorted(stored_chunks.get(doc_id, [])) == [(c.ordinal, c.text) for c in mine]):
                    summary.documents_unchanged += 1
                    continue
                snapshot.documents.append(DocumentRecord(
                    id=doc_id, namespace=namespace, text=line.text, title=line.title, metadata=line.metadata,
                    created_at=line.created_at,
                ))
                for chunk in mine:
                    number = chunks[chunk.id][0]
                    record = ChunkRecord(document_id=doc_id, ordinal=chunk.ordinal, text=chunk.text,
                                         embedding=self._vector(number, chunk.embedding))
                    snapshot.chunks.append(record)
                    if record.embedding is None:
                        plan.to_embed.append((record, passage_text(line.title, chunk.text)))

        # Nodes: the file's fields win; observations the stored node has and the file lacks are kept.
        nodes: dict[int, tuple[str, str]] = {}  # file id -> (namespace, key)
        wanted: dict[tuple[str, str], tuple[int, NodeLine]] = {}
        for number, line in lines:
            if isinstance(line, NodeLine):
                key = entity_key(line.name)
                namespace = line.namespace or default
                if not key:
                    raise self._fail(number, "the name is blank")
                if (namespace, key) in wanted:
                    raise self._fail(number, f"the entity {line.name!r} appears twice (names are compared "
                                             "ignoring case and spacing)")
                if line.id is not None:
                    if line.id in nodes:
                        raise self._fail(number, f"node id {line.id} appears twice")
                    nodes[line.id] = (namespace, key)
                wanted[(namespace, key)] = (number, line)
        keys: dict[str, set[str]] = {}
        for namespace, key in wanted:
            keys.setdefault(namespace, set()).add(key)

        # Edges name their ends by node id (or by name: an entity in the file or already stored).
        edge_lines: list[tuple[int, EdgeLine, str, str, str]] = []
        for number, line in lines:
            if isinstance(line, EdgeLine):
                namespace = line.namespace or default
                ends = []
                for role, node_id, name in (("source", line.source_id, line.source),
                                            ("target", line.target_id, line.target)):
                    if node_id is not None:
                        if node_id not in nodes:
                            raise self._fail(number, f"{role}_id {node_id} is not the id of a node line")
                        if nodes[node_id][0] != namespace:
                            raise self._fail(number, f"the {role} is in another namespace")
                        ends.append(nodes[node_id][1])
                    elif name and entity_key(name):
                        ends.append(entity_key(name))
                        keys.setdefault(namespace, set()).add(entity_key(name))
                    else:
                        raise self._fail(number, f"give the {role} as {role}_id or {role}")
                if ends[0] == ends[1]:
                    raise self._fail(number, "source and target are the same entity")
                edge_lines.append((number, line, namespace, ends[0], ends[1]))
        existing = self._existing_nodes(keys)
        for number, line, namespace, source, target in edge_lines:
            for key in (source, target):
                if (namespace, key) not in wanted and (namespace, key) not in existing:
                    raise self._fail(number, f"the entity {key!r} is neither in the file nor stored")

        observations = self.store.get_observations([n.id for n in existing.values()])
        names: dict[tuple[str, str], str] = {k: n.name for k, n in existing.items()}
        old_names = dict(names)
        for (namespace, key), (number, line) in wanted.items():
            names[(namespace, key)] = line.name
            old = existing.get((namespace, key))
            stored_observations = observations.get(old.id, []) if old is not None else []
            merged = list(dict.fromkeys([*stored_observations, *line.observations]))
            if len(merged) > MAX_OBSERVATIONS:  # the tools' limit (add_knowledge_graph words it the same way)
                raise self._fail(number, f"{line.name!r} would have {len(merged)} observations; the limit is "
                                         f"{MAX_OBSERVATIONS}")
            record = NodeRecord(
                namespace=namespace, key=key, name=line.name, type=line.type, description=line.description,
                aliases=tuple(line.aliases), properties=line.properties, observations=tuple(merged),
                created_at=line.created_at or (old.created_at if old else None),
                updated_at=line.updated_at,
            )
            if old is not None:
                unchanged = (
                    (old.name, old.type, old.description, old.aliases, old.properties, old.created_at)
                    == (record.name, record.type, record.description, record.aliases, record.properties,
                        record.created_at)
                    and merged == stored_observations and line.updated_at in (None, old.updated_at)
                )
                if unchanged:
                    summary.nodes_unchanged += 1
                    continue
                if node_text(record, merged) == node_text(old, stored_observations):
                    snapshot.nodes.append(record)  # same text: the stored vector stays
                    continue
            record.embedding = self._vector(number, line.embedding)
            if record.embedding is None:
                plan.to_embed.append((record, node_text(record, merged)))
            snapshot.nodes.append(record)

        # Edges: matched on their ends and type (and validity, for edges that no longer hold).
        stored_edges = self._stored_edges(existing)
        edges: dict[int, tuple[str, str, str, str, datetime | None, datetime | None]] = {}
        seen: set[tuple[Any, ...]] = set()
        for number, line, namespace, source, target in edge_lines:
            kind = relation_type(line.type)
            if not kind:
                raise self._fail(number, "the type must contain letters or digits, e.g. FOUNDED")
            identity = (namespace, source, target, kind, line.valid_until,
                        line.valid_from if line.valid_until is not None else None)
            if line.id is not None:
                if line.id in edges:
                    raise self._fail(number, f"edge id {line.id} appears twice")
                edges[line.id] = (namespace, source, target, kind, line.valid_from, line.valid_until)
            if identity in seen:
                raise self._fail(number, f"the relation {source} -{kind}-> {target} appears twice")
            seen.add(identity)
            write = EdgeWrite(
                namespace=namespace, source_key=source, target_key=target, type=kind,
                description=line.description, weight=line.weight, properties=line.properties,
                valid_from=line.valid_from, valid_until=line.valid_until, created_at=line.created_at,
                updated_at=line.updated_at,
            )
            old = stored_edges.get(identity)
            new_text = edge_text(write, {source: names[(namespace, source)], target: names[(namespace, target)]})
            if old is not None:
                write.created_at = write.created_at or old.created_at
                old_text = edge_text(
                    replace(write, description=old.description),
                    {source: old_names[(namespace, source)], target: old_names[(namespace, target)]},
                )
                same = (
                    (old.description, old.weight, old.properties, old.valid_from, old.created_at)
                    == (write.description, write.weight, write.properties, write.valid_from, write.created_at)
                    and line.updated_at in (None, old.updated_at)
                )
                if same and old_text == new_text:
                    summary.edges_unchanged += 1
                    continue
                if old_text == new_text:
                    snapshot.edges.append(write)
                    continue
            write.embedding = self._vector(number, line.embedding)
            if write.embedding is None:
                plan.to_embed.append((write, new_text))
            snapshot.edges.append(write)

        # Provenance, by natural keys.
        for number, line in lines:
            if isinstance(line, MentionLine):
                if line.node_id not in nodes or line.chunk_id not in chunks:
                    raise self._fail(number, "node_id and chunk_id must be ids of node and chunk lines")
                namespace, key = nodes[line.node_id]
                _, chunk, chunk_namespace = chunks[line.chunk_id]
                if chunk_namespace != namespace:
                    raise self._fail(number, "the node and the chunk are in different namespaces")
                snapshot.mentions.append((namespace, key, chunk.document_id, chunk.ordinal))
            elif isinstance(line, EvidenceLine):
                if line.edge_id not in edges or line.chunk_id not in chunks:
                    raise self._fail(number, "edge_id and chunk_id must be ids of edge and chunk lines")
                namespace, source, target, kind, valid_from, valid_until = edges[line.edge_id]
                _, chunk, chunk_namespace = chunks[line.chunk_id]
                if chunk_namespace != namespace:
                    raise self._fail(number, "the edge and the chunk are in different namespaces")
                snapshot.evidence.append((namespace, source, target, kind, valid_from, valid_until,
                                          chunk.document_id, chunk.ordinal))
        return plan, summary

    def _stored_edges(self, existing: dict[tuple[str, str], NodeRecord]) -> dict[tuple[Any, ...], EdgeRecord]:
        """Stored edges among the stored nodes the file names, by the identity the import matches on."""
        found: dict[tuple[Any, ...], EdgeRecord] = {}
        by_namespace: dict[str, dict[int, str]] = {}
        for (namespace, key), node in existing.items():
            by_namespace.setdefault(namespace, {})[node.id] = key
        for namespace, keys in by_namespace.items():
            for edge in self.store.edges_among(sorted(keys), namespace, include_expired=True):
                identity = (namespace, keys[edge.source_id], keys[edge.target_id], edge.type, edge.valid_until,
                            edge.valid_from if edge.valid_until is not None else None)
                found.setdefault(identity, edge)
        return found


class _MemoryImport(_Import):
    """The reference memory server's file: entities become nodes with their observations, relations edges.

    As in the reference, lines of another type are skipped; so are relations whose ends are not entities
    (in the file or stored) and relations of an entity with itself, each reported in `skipped`.
    """

    def run(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> ImportSummary:
        summary = ImportSummary(format="memory")
        entities: dict[str, tuple[str, str, list[str]]] = {}  # key -> (name, type, observations)
        relations: list[tuple[int, str, str, str]] = []
        for number, obj in objects:
            kind = obj.get("type")
            if kind == "entity":
                # Checked as create_entities checks its entities: the same names, sizes and characters.
                try:
                    entity = MemoryEntityInput.model_validate(obj)
                except ValidationError as exc:
                    summary.skipped.append(f"line {number}: invalid entity: {validation_problems(exc)}")
                    continue
                key = entity_key(entity.name)
                if key in entities:  # "Alice" and "alice" are one entity in duckgraph
                    first, _, known = entities[key]
                    entities[key] = (first, entity.entityType,
                                     list(dict.fromkeys([*known, *entity.observations])))
                else:
                    entities[key] = (entity.name, entity.entityType, list(dict.fromkeys(entity.observations)))
            elif kind == "relation":
                try:
                    relation = RelationInput.model_validate(obj)
                except ValidationError as exc:
                    summary.skipped.append(f"line {number}: invalid relation: {validation_problems(exc)}")
                    continue
                relations.append((number, relation.from_, relation.to, relation.relationType))
            else:
                summary.skipped.append(f"line {number}: unknown type {kind!r}")

        namespace = self.kb.namespace
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        with self.kb.writing() as writer:
            plan = _Plan()
            existing = self._existing_nodes({namespace: set(entities)})
            stored = {key: node for (_, key), node in existing.items()}
            observations = self.store.get_observations([n.id for n in stored.values()])
            for key, (name, entity_type, texts) in entities.items():
                old = stored.get(key)
                merged = list(dict.fromkeys([*observations.get(old.id, []), *texts])) if old else texts
                if len(merged) > MAX_OBSERVATIONS:  # as create_entities and add_observations refuse it
                    raise InvalidInputError(f"{self.source}: {name!r} would have {len(merged)} observations; the "
                                            f"limit is {MAX_OBSERVATIONS}")
                if old is None:
                    record = NodeRecord(namespace=namespace, key=key, name=name, type=entity_type,
                                        observations=tuple(texts), created_at=now, updated_at=now)
                    plan.to_embed.append((record, node_text(record, texts)))
                    plan.snapshot.nodes.append(record)
                    continue
                # A stored entity keeps its fields; the file's observations are added to it.
                before = observations.get(old.id, [])
                if merged == before:
                    summary.nodes_unchanged += 1
                    continue
                record = replace(old, observations=tuple(merged), updated_at=now, embedding=None)
                if node_text(record, merged) != node_text(old, before):
                    plan.to_embed.append((record, node_text(record, merged)))
                plan.snapshot.nodes.append(record)

            names = {key: name for key, (name, _, _) in entities.items()}
            names.update({key: node.name for key, node in stored.items()})
            unresolved = {n for _, source, target, _ in relations for n in (source, target)
                          if entity_key(n) not in names}
            found, _ = self.kb.curation.resolve(sorted(unresolved), namespace) if unresolved else ({}, [])
            others = {name: node for name, node in found.items()}
            names.update({node.key: node.name for node in others.values()})

            def key_of(name: str) -> str | None:
                if entity_key(name) in names:
                    return entity_key(name)
                return others[name].key if name in others else None

            ends = {key_of(n) for _, s, t, _ in relations for n in (s, t)} - {None}
            id_of = {key: node.id for key, node in stored.items()}
            id_of.update({node.key: node.id for node in others.values()})
            held = {(e.source_id, e.target_id, e.type)
                    for e in self.store.edges_among(sorted(id_of[k] for k in ends if k in id_of), namespace)}
            seen: set[tuple[str, str, str]] = set()
            for number, source, target, label in relations:
                source_key, target_key, kind = key_of(source), key_of(target), relation_type(label)
                if source_key is None or target_key is None:
                    missing = source if source_key is None else target
                    summary.skipped.append(f"line {number}: the relation {source} -{label}-> {target} names "
                                           f"{missing!r}, which is not an entity")
                    continue
                if not kind:
                    summary.skipped.append(f"line {number}: the relationType {label!r} has no letters or digits")
                    continue
                if source_key == target_key:
                    summary.skipped.append(f"line {number}: the relation {source} -{label}-> {target} joins an "
                                           "entity to itself")
                    continue
                identity = (source_key, target_key, kind)
                if identity in seen:  # the same relation twice in the file
                    continue
                seen.add(identity)
                if (id_of.get(source_key), id_of.get(target_key), kind) in held:
                    summary.edges_unchanged += 1
                    continue
                write = EdgeWrite(namespace=namespace, source_key=source_key, target_key=target_key, type=kind,
                                  properties={ORIGINAL_TYPE: label}, valid_from=now, created_at=now, updated_at=now)
                plan.to_embed.append((write, edge_text(write, names)))
                plan.snapshot.edges.append(write)
            summary.skipped.sort(key=lambda reason: int(reason.split(":")[0].removeprefix("line ")))
            return self._embed_and_restore(writer, plan, summary)
