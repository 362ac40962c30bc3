"""What each batch of a duckgraph export writes: its documents and their chunks, its nodes (a name resolved onto the
stored entity it is an alias of, as the tools resolve it), its edges, their provenance and the community reports it
carries, matched with what is stored by natural keys. A batch's lines may name the lines of earlier batches, never
later ones: what they may name is kept in small maps on disk (`SpilledMap`), never the lines themselves. The
import that reads the file and writes each batch's plan is core/files/import_.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.communities.transfer import CarriedReport
from duckgraph.core.domain.limits import MAX_OBSERVATIONS, over_limits
from duckgraph.core.domain.node_merge import combined, with_aliases
from duckgraph.core.domain.resolution import NameKeys, NameResolver, lookup_keys
from duckgraph.core.domain.texts import edge_text, node_text, passage_text
from duckgraph.core.files.import_base import Import, Plan, ambiguous, ambiguous_message
from duckgraph.core.files.import_periods import PeriodChecks
from duckgraph.core.files.import_summary import (
    ImportSummary,
    note_document_replaced,
    note_edge_replaced,
    note_replaced,
    note_resolved,
)
from duckgraph.core.files.jsonl_format import (
    BY_HAND_SINCE,
    MARKED_SINCE,
    STARTS_SINCE,
    ChunkLine,
    CommunityReportLine,
    DocumentLine,
    EdgeLine,
    EvidenceLine,
    Line,
    MentionLine,
    MetaLine,
    NodeLine,
)
from duckgraph.core.files.spill import SpilledMap
from duckgraph.ports import (
    ChunkRecord,
    DocumentRecord,
    EdgeWrite,
    InvalidInputError,
    NodeRecord,
    Snapshot,
    entity_key,
    relation_type,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    import numpy as np

#: Marks inferred at the end of an older export (`BatchPlanner.inferred_marks`) written at a time.
MARKS_AT_A_TIME = 2_000


def inferred_by_hand(line: NodeLine | EdgeLine) -> bool | None:
    """Whether a node or edge line of an export taken before the marks (`BY_HAND_SINCE`) was written by hand, by the
    rule the upgrade to them applies to a file in place (plugins/duckdb/schema.py, MIGRATIONS[5]: SQL of the store,
    which the core cannot share; keep the two alike): erring towards keeping, a line is marked when it has what the
    extractor never writes (observations, properties), a node still the placeholder of a relation's end (type
    'unknown', nothing else) is not, and any other is marked unless provenance names it (None: said by the mention
    or edge_evidence lines, which come after it)."""
    if line.properties or (isinstance(line, NodeLine) and line.observations):
        return True
    if isinstance(line, NodeLine) and line.type == "unknown" and not line.description:
        return False
    return None


def _merged_into(old: NodeRecord, line: NodeLine, observations: list[str]) -> NodeRecord:
    """A node line resolved onto the stored entity `old` (its name is an alias of it), merged as add_knowledge_graph
    merges a node it resolves so: the entity keeps its name and type; the line's description is added after the
    stored one unless it says nothing new, its name and aliases become aliases, its properties are added (its
    values win, said by `note_replaced`), its observations are added. The line's vector is of another text."""
    description = combined(old.description, line.description)  # over the limit: refused by the caller
    aliases = with_aliases(old.name, old.aliases, [line.name, *line.aliases], entity_key)
    return replace(old, description=description, aliases=tuple(aliases), properties={**old.properties,
                   **line.properties}, observations=tuple(observations), embedding=None, updated_at=None,
                   by_hand=line.by_hand)


class BatchPlanner:
    """Plans each batch of one import of a duckgraph export (`plan`), and keeps what later lines may refer to (the
    file's ids and keys of earlier lines). `file` is the import: its errors name the file and line."""

    def __init__(self, file: Import, reembed: bool) -> None:
        self.kb = file.kb
        self.store = file.store
        self.source = file.source
        self._fail = file._fail
        self._existing_nodes = file._existing_nodes
        self.reembed = reembed
        # On disk (SpilledMap), so that memory does not grow with the file.
        self.documents = SpilledMap()  # as a set: (namespace, document id)
        self.chunks = SpilledMap()  # file id -> (namespace, document id, ordinal)
        self.nodes = SpilledMap()  # file id -> (namespace, key)
        self.names = SpilledMap()  # (namespace, key) -> name, of the file's nodes
        self.edges = SpilledMap()  # file id -> (namespace, source, target, type, valid_from, valid_until)
        #: The periods of the file's relations, and the stored periods its lines write over or overlap.
        self.periods = PeriodChecks(self.store, self._fail)
        #: As a set: (namespace, key) of every node line parsed so far, which holds every node line of the run of
        #: node lines being planned (see the import's `_parse`, which adds them): no line is resolved onto an
        #: entity the file names itself.
        self.defined = SpilledMap()
        #: (namespace, key a line names) -> key of the stored entity that name was resolved to (an alias of it).
        self.resolved = SpilledMap()
        #: (namespace, stored key) -> (line number, name) of the node line resolved onto that stored entity.
        self.onto = SpilledMap()
        self.any_resolved = False  # whether `resolved` and `onto` hold anything: most imports look them up never
        #: The line numbers of the current batch's nodes, chunks and edges: a line names only lines before it
        #: (those of earlier batches are), whatever the batch size.
        self.batch_lines: dict[tuple[str, Any], int] = {}
        self.reports: list[CarriedReport] = []  # written community reports, put back after a build
        #: Of an export taken before the marks (`BY_HAND_SINCE`): the file ids of the node and edge lines marked by
        #: hand unless provenance names them, which any later batch may hold (`inferred_marks`, once all is read).
        self.before_by_hand = False
        self.unproven_nodes = SpilledMap()  # as a set
        self.unproven_edges = SpilledMap()  # as a set

    def close(self) -> None:
        for spilled in (self.documents, self.chunks, self.nodes, self.names, self.edges, self.defined,
                        self.resolved, self.onto, self.unproven_nodes, self.unproven_edges):
            spilled.close()
        self.periods.close()

    def _vector(self, number: int, values: np.ndarray | None) -> np.ndarray | None:
        if values is None or self.reembed:
            return None
        import numpy as np

        if len(values) != self.kb.embedder.dimensions or not np.isfinite(values).all():
            raise self._fail(number, f"the embedding must be {self.kb.embedder.dimensions} finite numbers")
        return values

    def plan(self, lines: list[tuple[int, Line]], summary: ImportSummary, meta: MetaLine | None) -> Plan:
        """What one batch writes. Its lines may refer to the lines of earlier batches (by the maps of `self`),
        not to later ones: an export writes documents, chunks, nodes, edges and then their provenance."""
        plan = Plan()
        plan.snapshot.before_marks = meta is None or (meta.schema_version or 0) < MARKED_SINCE
        # Every export states its schema version: a file that does not (written by hand) says by_hand and
        # valid_from in its lines as it means them.
        version = None if meta is None else meta.schema_version
        self.before_by_hand = version is not None and version < BY_HAND_SINCE
        if version is not None:
            self._as_upgraded(lines, version)
        self.batch_lines = {}
        self._plan_documents(lines, plan, summary)
        wanted, existing, edge_lines = self._plan_nodes(lines, plan, summary)
        self._plan_edges(wanted, existing, edge_lines, plan, summary)
        self._plan_provenance(lines, plan)
        self._plan_reports(lines)
        return plan

    def _as_upgraded(self, lines: list[tuple[int, Line]], version: int) -> None:
        """The node and edge lines of an export of schema `version` as the upgrades since give a file in place."""
        for _, line in lines:
            if isinstance(line, EdgeLine) and version < STARTS_SINCE and line.valid_from == line.created_at:
                line.valid_from = None  # a creation time stored as the start (MIGRATIONS[2]): unknown
            if isinstance(line, (NodeLine, EdgeLine)) and self.before_by_hand and not line.by_hand:
                inferred = inferred_by_hand(line)
                if inferred is None and line.id is not None:
                    (self.unproven_nodes if isinstance(line, NodeLine) else self.unproven_edges).add(line.id)
                else:
                    line.by_hand = inferred is not False  # without an id, no provenance names it

    def inferred_marks(self) -> Iterator[Snapshot]:
        """The marks of the nodes and edges of an export taken before them that no provenance of the file named
        (`inferred_by_hand`), once the whole file is read; a few at a time."""
        for unproven, field in ((self.unproven_nodes, "nodes_by_hand"), (self.unproven_edges, "edges_by_hand")):
            ids = list(unproven)
            keys = self.nodes if unproven is self.unproven_nodes else self.edges
            for start in range(0, len(ids), MARKS_AT_A_TIME):
                yield Snapshot(**{field: [keys[i] for i in ids[start:start + MARKS_AT_A_TIME]]})

    def _plan_reports(self, lines: list[tuple[int, Line]]) -> None:
        for number, line in lines:
            if isinstance(line, CommunityReportLine):
                ends = [self.nodes.get(member) for member in line.members]
                if None in ends or any(self._after(("node", m), number) for m in line.members):
                    raise self._fail(number, "members must be ids of node lines before it")
                if {namespace for namespace, _ in ends} != {line.namespace or self.kb.namespace}:
                    raise self._fail(number, "the members must be nodes of the report's namespace")
                self.reports.append(CarriedReport(
                    namespace=line.namespace or self.kb.namespace, level=line.level,
                    keys=tuple(key for _, key in ends), title=line.title, summary=line.summary, author=line.author,
                    stale=line.stale))

    def _plan_documents(self, lines: list[tuple[int, Line]], plan: Plan, summary: ImportSummary) -> None:
        # Documents and their chunks: a document is written when it is new or differs in text, title,
        # metadata or passages; otherwise the stored one (and its chunk ids) stays.
        default = self.kb.namespace
        documents: dict[tuple[str, str], tuple[int, DocumentLine]] = {}
        chunk_lines: dict[int, int] = {}  # file id -> line number, of this batch's chunks
        chunks_of: dict[tuple[str, str], list[ChunkLine]] = {}
        for number, line in lines:
            if isinstance(line, DocumentLine):
                key = (line.namespace or default, line.id)
                if key in self.documents:
                    raise self._fail(number, f"document {line.id!r} appears twice")
                self.documents.add(key)
                documents[key] = (number, line)
            elif isinstance(line, ChunkLine):
                namespace = line.namespace or default
                if (namespace, line.document_id) not in documents:
                    raise self._fail(number, f"chunk of document {line.document_id!r}, which is not in the file "
                                             "before it (a document's chunks follow its line)")
                if line.id in self.chunks:
                    raise self._fail(number, f"chunk id {line.id} appears twice")
                self.chunks[line.id] = (namespace, line.document_id, line.ordinal)
                self.batch_lines[("chunk", line.id)] = number
                chunk_lines[line.id] = number
                chunks_of.setdefault((namespace, line.document_id), []).append(line)
        by_namespace: dict[str, list[str]] = {}
        for namespace, doc_id in documents:
            by_namespace.setdefault(namespace, []).append(doc_id)
        snapshot = plan.snapshot
        for namespace, ids in by_namespace.items():
            stored = {d.id: d for d in self.store.get_documents(ids, namespace)}
            stored_chunks: dict[str, list[tuple[int, str, str]]] = {}
            for chunk in self.store.document_chunks(namespace, ids):
                stored_chunks.setdefault(chunk.document_id, []).append((chunk.ordinal, chunk.text, chunk.section))
            for doc_id in ids:
                _, line = documents[(namespace, doc_id)]
                mine = sorted(chunks_of.get((namespace, doc_id), []), key=lambda c: c.ordinal)
                if len({c.ordinal for c in mine}) != len(mine):
                    raise InvalidInputError(f"{self.source}: document {doc_id!r} has two chunks with one ordinal")
                old = stored.get(doc_id)
                same_passages = sorted(stored_chunks.get(doc_id, [])) == [(c.ordinal, c.text, c.section) for c in mine]
                if (old is not None and (old.title, old.text, old.metadata, old.time)
                        == (line.title, line.text, line.metadata, line.time) and same_passages):
                    summary.documents_unchanged += 1
                    continue
                document = DocumentRecord(
                    id=doc_id, namespace=namespace, text=line.text, title=line.title, metadata=line.metadata,
                    created_at=line.created_at, time=line.time,
                )
                if old is not None:
                    note_document_replaced(summary, old, document, same_passages)
                snapshot.documents.append(document)
                for chunk in mine:
                    # Its namespace too: a batch may hold the same document id in several namespaces.
                    record = ChunkRecord(document_id=doc_id, ordinal=chunk.ordinal, text=chunk.text,
                                         section=chunk.section, namespace=namespace,
                                         embedding=self._vector(chunk_lines[chunk.id], chunk.embedding),
                                         extracted_by=chunk.extracted_by)
                    snapshot.chunks.append(record)
                    if record.embedding is None:
                        plan.to_embed.append((record, passage_text(line.title, chunk.text, chunk.section)))

    def _plan_nodes(
        self, lines: list[tuple[int, Line]], plan: Plan, summary: ImportSummary
    ) -> tuple[dict[tuple[str, str], tuple[int, NodeLine]], dict[tuple[str, str], NodeRecord],
               list[tuple[int, EdgeLine, str, str, str]]]:
        # Nodes: the file's fields win; observations the stored node has and the file lacks are kept.
        default = self.kb.namespace
        wanted: dict[tuple[str, str], tuple[int, NodeLine]] = {}
        for number, line in lines:
            if isinstance(line, NodeLine):
                key = entity_key(line.name)
                namespace = line.namespace or default
                if not key:
                    raise self._fail(number, "the name is blank")
                if (namespace, key) in self.names:
                    raise self._fail(number, f"the entity {line.name!r} appears twice (names are compared "
                                             "ignoring case and spacing)")
                if self.any_resolved and (namespace, key) in self.onto:
                    first, name = self.onto[(namespace, key)]
                    raise self._fail(number, f"the entity {line.name!r} is the stored entity that line {first}'s "
                                             f"{name!r} (an alias of it) was imported onto, as the file named no "
                                             f"entity {line.name!r} before it; nothing was imported: put the file's "
                                             "node lines together, before its edge lines (as duckgraph export "
                                             "writes them), so that the two stay apart")
                if line.id is not None:
                    if line.id in self.nodes:
                        raise self._fail(number, f"node id {line.id} appears twice")
                    self.nodes[line.id] = (namespace, key)
                    self.batch_lines[("node", line.id)] = number
                wanted[(namespace, key)] = (number, line)
                self.batch_lines[("key", (namespace, key))] = number
                self.names[(namespace, key)] = line.name
        keys: dict[str, set[str]] = {}
        for namespace, key in wanted:
            keys.setdefault(namespace, set()).add(key)

        # Edges name their ends by node id (or by name: an entity earlier in the file or already stored).
        edge_lines: list[tuple[int, EdgeLine, str, str, str]] = []
        by_name: dict[tuple[str, str], str] = {}  # (namespace, key) -> name, of ends given by name
        for number, line in lines:
            if isinstance(line, EdgeLine):
                namespace = line.namespace or default
                ends = []
                for role, node_id, name in (("source", line.source_id, line.source),
                                            ("target", line.target_id, line.target)):
                    if node_id is not None:
                        if node_id not in self.nodes or self._after(("node", node_id), number):
                            raise self._fail(number, f"{role}_id {node_id} is not the id of a node line before "
                                                     "it")
                        if self.nodes[node_id][0] != namespace:
                            raise self._fail(number, f"the {role} is in another namespace")
                        ends.append(self.nodes[node_id][1])
                    elif name and entity_key(name):
                        ends.append(entity_key(name))
                        by_name.setdefault((namespace, ends[-1]), name)
                    else:
                        raise self._fail(number, f"give the {role} as {role}_id or {role}")
                    keys.setdefault(namespace, set()).add(ends[-1])
                if ends[0] == ends[1]:
                    raise self._fail(number, "source and target are the same entity")
                edge_lines.append((number, line, namespace, ends[0], ends[1]))
        # As stored before the import: each of the file's nodes is written by its own batch, so no earlier batch
        # changed these (the store's reads need not show a batch before the commit).
        existing = self._existing_nodes(keys)
        merged_into = self._resolve_lines(wanted, existing, summary)
        unknown: dict[str, dict[str, int]] = {}  # namespace -> {name given: line number}, of ends neither here
        for number, line, namespace, source, target in edge_lines:
            for key in (source, target):
                in_file = (namespace, key) in self.names and not self._after(("key", (namespace, key)), number)
                if in_file or (namespace, key) in existing or (self.any_resolved and (namespace, key) in self.resolved):
                    continue
                if (namespace, key) in by_name and (namespace, key) not in self.defined:
                    unknown.setdefault(namespace, {}).setdefault(by_name[(namespace, key)], number)
                else:  # a node line of the file after it: never another entity the name is an alias of
                    raise self._fail(number, f"the entity {key!r} is neither in the file (before it) nor stored")
        self._resolve_ends(unknown, existing, summary)
        if self.any_resolved:
            edge_lines = [(number, line, namespace, *(self.resolved.get((namespace, k), k) for k in (source, target)))
                          for number, line, namespace, source, target in edge_lines]
        # The entities names of an earlier batch were resolved to, which this batch's edges name by those names.
        later: dict[str, set[str]] = {}
        for _, _, namespace, *ends in edge_lines:
            for key in ends:
                if (namespace, key) not in existing and (namespace, key) not in wanted:
                    later.setdefault(namespace, set()).add(key)
        existing.update(self._existing_nodes(later))
        for number, line, namespace, source, target in edge_lines:
            if source == target:
                one = existing[(namespace, source)].name if (namespace, source) in existing else source
                raise self._fail(number, f"source and target are the same entity, {one!r}: the line names it by "
                                         "its name and an alias of it, or by two of its aliases; nothing was "
                                         "imported: remove the line")

        observations = self.store.get_observations([n.id for n in existing.values()])
        by_hand = self.store.written_by_hand("node", [n.id for n in existing.values() if n.id is not None])
        snapshot = plan.snapshot
        for (namespace, key), (number, line) in wanted.items():
            resolved = merged_into.get((namespace, key))
            old = existing.get((namespace, key)) if resolved is None else resolved
            stored_observations = observations.get(old.id, []) if old is not None else []
            merged = list(dict.fromkeys([*stored_observations, *line.observations]))
            if len(merged) > MAX_OBSERVATIONS:  # the tools' limit (add_knowledge_graph words it the same way)
                raise self._fail(number, f"{line.name!r} would have {len(merged)} observations; the limit is "
                                         f"{MAX_OBSERVATIONS}")
            if resolved is not None:
                self._plan_merged(number, line, resolved, stored_observations, merged, by_hand, plan, summary)
                continue
            record = NodeRecord(
                namespace=namespace, key=key, name=line.name, type=line.type, description=line.description,
                aliases=tuple(line.aliases), properties=line.properties, observations=tuple(merged),
                created_at=line.created_at or (old.created_at if old else None),
                updated_at=line.updated_at, by_hand=line.by_hand,
            )
            if old is not None:
                unchanged = (
                    (old.name, old.type, old.description, old.aliases, old.properties, old.created_at)
                    == (record.name, record.type, record.description, record.aliases, record.properties,
                        record.created_at)
                    and merged == stored_observations and line.updated_at in (None, old.updated_at)
                    and (old.id in by_hand or not line.by_hand)
                )
                if unchanged:
                    summary.nodes_unchanged += 1
                    continue
                note_replaced(summary, old, record)
                if node_text(record, merged) == node_text(old, stored_observations):
                    snapshot.nodes.append(record)  # same text: the stored vector stays
                    continue
            record.embedding = self._vector(number, line.embedding)
            if record.embedding is None:
                plan.to_embed.append((record, node_text(record, merged)))
            snapshot.nodes.append(record)
        return wanted, existing, edge_lines

    def _resolve_lines(self, wanted: dict[tuple[str, str], tuple[int, NodeLine]],
                       existing: dict[tuple[str, str], NodeRecord], summary: ImportSummary
                       ) -> dict[tuple[str, str], NodeRecord]:
        """The stored entity each node line whose name no entity has is imported onto, by the line's key: one
        whose alias the name is (or its name or an alias up to accents and punctuation), of the line's type, as
        add_knowledge_graph and create_entities resolve a new name (core/domain/resolution.py, rule 2). Never one
        the file names itself or another line was imported onto: those stay apart, as the tools keep them. A name
        that is an alias of several such entities refuses the import: which one is meant cannot be told. The
        entity is added to `existing`, and the line's id and name map to its key."""
        by_namespace: dict[str, list[tuple[str, int, NodeLine]]] = {}
        for (namespace, key), (number, line) in wanted.items():
            if (namespace, key) not in existing:
                by_namespace.setdefault(namespace, []).append((key, number, line))
        merged_into: dict[tuple[str, str], NodeRecord] = {}
        for namespace, new in by_namespace.items():
            keys = NameKeys()
            resolver = NameResolver(keys=keys)
            resolver.add(self.store.find_nodes(namespace, lookup_keys([line.name for _, _, line in new], keys)))
            for key, number, line in new:
                match = resolver.match(line.name, line.type)
                if match is None:
                    if owners := ambiguous(resolver, line.name, line.type):
                        raise self._fail(number, ambiguous_message(line.name, owners))
                    if self.any_resolved:  # an edge before it resolved the name: not the edges after it
                        self.resolved.pop((namespace, key), None)
                    continue
                if (namespace, match.key) in self.defined or (namespace, match.key) in self.onto:
                    self.resolved.pop((namespace, key), None)
                    continue
                self.any_resolved = True
                self.onto[(namespace, match.key)] = (number, line.name)
                self.resolved[(namespace, key)] = match.key
                if line.id is not None:
                    self.nodes[line.id] = (namespace, match.key)
                existing[(namespace, match.key)] = match
                merged_into[(namespace, key)] = match
                note_resolved(summary, line.name, match.name)
        return merged_into

    def _resolve_ends(self, unknown: dict[str, dict[str, int]], existing: dict[tuple[str, str], NodeRecord],
                      summary: ImportSummary) -> None:
        """Edge ends given by a name that is no entity of the file or the store: the stored entity it is an alias
        of, as the relation tools resolve an end (`Curation.resolve`); refused when there is none, or several."""
        for namespace, names in unknown.items():
            found, missing = self.kb.curation.resolve(list(names), namespace)
            if missing:
                name = missing[0]
                owners = sorted({r.name for r in self.store.find_nodes(namespace, [entity_key(name)])
                                 if entity_key(name) in {entity_key(a) for a in r.aliases}})
                if len(owners) > 1:
                    raise self._fail(names[name], ambiguous_message(name, owners))
                raise self._fail(names[name], f"the entity {entity_key(name)!r} is neither in the file (before it) "
                                              "nor stored")
            for name, node in found.items():
                existing[(namespace, node.key)] = node
                if (namespace, entity_key(name)) not in self.resolved:
                    self.any_resolved = True
                    self.resolved[(namespace, entity_key(name))] = node.key
                    note_resolved(summary, name, node.name)

    def _plan_merged(self, number: int, line: NodeLine, old: NodeRecord, stored_observations: list[str],
                     merged: list[str], by_hand: set[int], plan: Plan, summary: ImportSummary) -> None:
        """Plan a node line resolved onto the stored entity `old` (see `_merged_into`)."""
        record = _merged_into(old, line, merged)
        if over := over_limits(record.description, record.properties):
            raise self._fail(number, f"{line.name!r} is {old.name!r} here (an alias of it), and the two together "
                                     f"would have {over}; nothing was imported: shorten the line's description or "
                                     "properties, or give it a name of its own in the file to keep it apart")
        if ((old.description, old.aliases, old.properties) == (record.description, record.aliases,
                                                                 record.properties)
                and merged == stored_observations and (old.id in by_hand or not line.by_hand)):
            summary.nodes_unchanged += 1
            return
        note_replaced(summary, old, record, appended=True)
        if node_text(record, merged) != node_text(old, stored_observations):
            plan.to_embed.append((record, node_text(record, merged)))
        plan.snapshot.nodes.append(record)

    def _plan_edges(
        self, wanted: dict[tuple[str, str], tuple[int, NodeLine]], existing: dict[tuple[str, str], NodeRecord],
        edge_lines: list[tuple[int, EdgeLine, str, str, str]], plan: Plan, summary: ImportSummary,
    ) -> None:
        # Edges: matched on their ends and type (and validity, for edges that no longer hold).
        stored_edges = self.periods.stored_edges(existing)
        by_hand = self.store.written_by_hand("edge", [e.id for rows in stored_edges.values() for e in rows])
        old_names = {k: n.name for k, n in existing.items()}

        def name(namespace: str, key: str) -> str:
            return self.names.get((namespace, key)) or old_names[(namespace, key)]

        for number, line, namespace, source, target in edge_lines:
            kind = relation_type(line.type)
            if not kind:
                raise self._fail(number, "the type must contain letters or digits, e.g. FOUNDED")
            if line.id is not None:
                if line.id in self.edges:
                    raise self._fail(number, f"edge id {line.id} appears twice")
                self.edges[line.id] = (namespace, source, target, kind, line.valid_from, line.valid_until)
                self.batch_lines[("edge", line.id)] = number
            relation = (namespace, source, target, kind)
            period = (line.valid_from, line.valid_until)
            label = f"{name(namespace, source)} -{kind}-> {name(namespace, target)}"
            self.periods.check_file_overlap(number, relation, period, label)
            old = self.periods.stored_period(relation, period, stored_edges.get(relation, []), number, label)
            write = EdgeWrite(
                namespace=namespace, source_key=source, target_key=target, type=kind,
                description=line.description, weight=line.weight, properties=line.properties,
                valid_from=line.valid_from, valid_until=line.valid_until, created_at=line.created_at,
                updated_at=line.updated_at, by_hand=line.by_hand,
            )
            new_text = edge_text(write, {source: name(namespace, source), target: name(namespace, target)})
            if old is not None:
                write.created_at = write.created_at or old.created_at
                old_text = edge_text(
                    replace(write, description=old.description),
                    {source: old_names[(namespace, source)], target: old_names[(namespace, target)]},
                )
                same = (
                    (old.description, old.weight, old.properties, old.valid_from, old.valid_until, old.created_at)
                    == (write.description, write.weight, write.properties, write.valid_from, write.valid_until,
                        write.created_at)
                    and line.updated_at in (None, old.updated_at)
                    and (old.id in by_hand or not line.by_hand)
                )
                if same and old_text == new_text:
                    summary.edges_unchanged += 1
                    continue
                note_edge_replaced(summary, label, old, write)
                if old_text == new_text:
                    plan.snapshot.edges.append(write)
                    continue
            write.embedding = self._vector(number, line.embedding)
            if write.embedding is None:
                plan.to_embed.append((write, new_text))
            plan.snapshot.edges.append(write)

    def _after(self, line: tuple[str, Any], number: int) -> bool:
        """Whether the line named (a node, chunk or edge of the current batch) comes after line `number`."""
        return self.batch_lines.get(line, 0) > number

    def _plan_provenance(self, lines: list[tuple[int, Line]], plan: Plan) -> None:
        # Provenance, by natural keys.
        for number, line in lines:
            if isinstance(line, MentionLine):
                if (line.node_id not in self.nodes or line.chunk_id not in self.chunks
                        or self._after(("node", line.node_id), number)
                        or self._after(("chunk", line.chunk_id), number)):
                    raise self._fail(number, "node_id and chunk_id must be ids of node and chunk lines before it")
                namespace, key = self.nodes[line.node_id]
                if self.before_by_hand:
                    self.unproven_nodes.pop(line.node_id, None)
                chunk_namespace, document_id, ordinal = self.chunks[line.chunk_id]
                if chunk_namespace != namespace:
                    raise self._fail(number, "the node and the chunk are in different namespaces")
                plan.snapshot.mentions.append((namespace, key, document_id, ordinal))
            elif isinstance(line, EvidenceLine):
                if (line.edge_id not in self.edges or line.chunk_id not in self.chunks
                        or self._after(("edge", line.edge_id), number)
                        or self._after(("chunk", line.chunk_id), number)):
                    raise self._fail(number, "edge_id and chunk_id must be ids of edge and chunk lines before it")
                namespace, source, target, kind, valid_from, valid_until = self.edges[line.edge_id]
                if self.before_by_hand:
                    self.unproven_edges.pop(line.edge_id, None)
                chunk_namespace, document_id, ordinal = self.chunks[line.chunk_id]
                if chunk_namespace != namespace:
                    raise self._fail(number, "the edge and the chunk are in different namespaces")
                plan.snapshot.evidence.append((namespace, source, target, kind, valid_from, valid_until,
                                               document_id, ordinal))
