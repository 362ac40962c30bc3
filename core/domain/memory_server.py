"""The reference MCP memory server's use cases (@modelcontextprotocol/server-memory) over a knowledge base.

Entities are nodes (entityType is the node type, observations the node's observations) and relations are
edges. Where duckgraph's model differs, the difference is deliberate and small:

- Names are matched as everywhere in duckgraph: ignoring case and spacing, and by a unique alias. Creating
  "alice" when "Alice" exists skips it, as the reference skips an existing name.
- Edge types are stored in UPPER_SNAKE_CASE, so "works at" and "WORKS_AT" are one relation. The spelling the
  caller used is kept in the edge's properties and is what every result shows.
- Relations join existing entities: one naming an unknown entity, or an entity and itself, is refused with
  an error instead of being stored dangling.
- search_nodes is semantic (anchor & expand), not a substring filter; read_graph is paginated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.model import (
    AddedObservations,
    MemoryEntity,
    MemoryEntityInput,
    MemoryGraph,
    MemoryRelation,
    ObservationAddition,
    ObservationDeletion,
    ObservationResult,
    ObservationsDeleted,
    RelationInput,
)
from duckgraph.ports import (
    EdgeRecord,
    EdgeWrite,
    InvalidInputError,
    NodeRecord,
    NotFoundError,
    WriteBatch,
    entity_key,
    relation_type,
)

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase, Writer

#: Edge property holding the relation type as the caller spelt it ("works at"; the edge type is WORKS_AT).
ORIGINAL_TYPE = "relationType"
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1_000
#: Relations one read_graph page or open_nodes call returns at most (hubs would make the answer explode).
MAX_RELATIONS = 5_000


# -- writing ---------------------------------------------------------------------------------------------


def create_entities(kb: KnowledgeBase, entities: Sequence[MemoryEntityInput]) -> list[MemoryEntity]:
    """Create the entities whose names are new; existing names (and repeats in the call) are skipped.
    Returns the entities created, as stored."""
    namespace = kb.namespace
    with kb.writing() as writer:
        keys = [entity_key(e.name) for e in entities]
        existing = {n.key for n in kb.store.find_nodes(namespace, keys)}
        new: dict[str, MemoryEntityInput] = {}
        for entity, key in zip(entities, keys):
            if key not in existing and key not in new:
                new[key] = entity
        records = [
            NodeRecord(namespace=namespace, key=key, name=e.name, type=e.entityType,
                       observations=tuple(dict.fromkeys(e.observations)))
            for key, e in new.items()
        ]
        if records:
            kb.embed_records(namespace, records)
            writer.commit(WriteBatch(nodes=records))
    return [MemoryEntity(name=r.name, entityType=r.type, observations=list(r.observations or ())) for r in records]


def create_relations(kb: KnowledgeBase, relations: Sequence[RelationInput]) -> list[MemoryRelation]:
    """Create the relations that do not exist yet (same ends, same type after normalisation); returns them
    as the caller wrote them. Refuses the whole call if a relation names an unknown entity."""
    namespace = kb.namespace
    with kb.writing() as writer:
        found, missing = kb.curation.resolve([n for r in relations for n in (r.from_, r.to)], namespace)
        if missing:
            raise NotFoundError(
                f"no entity named {', '.join(repr(m) for m in dict.fromkeys(missing))}: relations join existing "
                "entities, so create it with create_entities first (or use the exact name of a stored one)"
            )
        for i, relation in enumerate(relations):
            label = f"relations[{i}] ({relation.from_} -{relation.relationType}-> {relation.to})"
            if not relation_type(relation.relationType):
                raise InvalidInputError(f"{label}: the relationType must contain letters or digits, e.g. works_at")
            if found[relation.from_].id == found[relation.to].id:
                raise InvalidInputError(f"{label}: from and to are the same entity")
        ends = {n.id: n for n in found.values()}
        existing = {(e.source_id, e.target_id, e.type) for e in kb.store.edges_among(sorted(ends), namespace)}
        created: list[RelationInput] = []
        writes: list[EdgeWrite] = []
        for relation in relations:
            source, target = found[relation.from_], found[relation.to]
            identity = (source.id, target.id, relation_type(relation.relationType))
            if identity in existing:
                continue
            existing.add(identity)
            created.append(relation)
            writes.append(EdgeWrite(namespace=namespace, source_key=source.key, target_key=target.key,
                                    type=identity[2], properties={ORIGINAL_TYPE: relation.relationType}))
        if writes:
            kb.embed_records(namespace, edges=writes, names={n.key: n.name for n in ends.values()})
            writer.commit(WriteBatch(edges=writes))
    return [MemoryRelation(from_=r.from_, to=r.to, relationType=r.relationType) for r in created]


def add_observations(kb: KnowledgeBase, additions: Sequence[ObservationAddition]) -> list[AddedObservations]:
    """Add observations to existing entities, skipping ones they already have; one transaction. An unknown
    entity fails the whole call, as in the reference."""
    namespace = kb.namespace
    with kb.writing() as writer:
        found, missing = kb.curation.resolve([a.entityName for a in additions], namespace)
        if missing:
            raise NotFoundError(f"Entity with name {missing[0]} not found; create it with create_entities first")
        current, state = _observation_state(kb, found.values())
        results = []
        for addition in additions:
            texts = state[found[addition.entityName].id]
            added = [t for t in dict.fromkeys(addition.contents) if t not in texts]
            texts.extend(added)
            results.append(AddedObservations(entityName=addition.entityName, addedObservations=added))
        _commit_observations(kb, writer, found.values(), current, state)
    return results


def delete_observations(kb: KnowledgeBase, deletions: Sequence[ObservationDeletion]) -> ObservationsDeleted:
    """Remove the given observations; entities that do not exist are ignored (and listed), as in the reference."""
    namespace = kb.namespace
    with kb.writing() as writer:
        found, missing = kb.curation.resolve([d.entityName for d in deletions], namespace)
        current, state = _observation_state(kb, found.values())
        removed: dict[int, list[str]] = {}
        for deletion in deletions:
            if deletion.entityName not in found:
                continue
            node_id = found[deletion.entityName].id
            doomed = set(deletion.observations)
            removed.setdefault(node_id, []).extend(t for t in state[node_id] if t in doomed)
            state[node_id] = [t for t in state[node_id] if t not in doomed]
        _commit_observations(kb, writer, found.values(), current, state)
    names = {r.id: r.name for r in found.values()}
    return ObservationsDeleted(
        success=True, message="Observations deleted successfully",
        removed=[ObservationResult(entity=names[i], removed=texts) for i, texts in removed.items() if texts],
        not_found=list(dict.fromkeys(missing)),
    )


def _observation_state(
    kb: KnowledgeBase, records: Iterable[NodeRecord]
) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """The stored observations of the records, and a copy of them to change."""
    ids = list({r.id for r in records if r.id is not None})
    stored = kb.store.get_observations(ids)
    current = {i: list(stored.get(i, [])) for i in ids}
    return current, {i: list(texts) for i, texts in current.items()}


def _commit_observations(
    kb: KnowledgeBase, writer: Writer, records: Iterable[NodeRecord], current: dict[int, list[str]],
    state: dict[int, list[str]],
) -> None:
    by_id = {r.id: r for r in records}
    changed = [by_id[i] for i in state if state[i] != current[i]]
    for record in changed:
        if len(state[record.id]) > MAX_OBSERVATIONS:
            raise InvalidInputError(
                f"{record.name!r} would have {len(state[record.id])} observations; the limit is {MAX_OBSERVATIONS}: "
                "delete some with delete_observations first"
            )
    if changed:
        nodes = [replace(r, source_ids=(), source_chunk_ids=(), observations=tuple(state[r.id])) for r in changed]
        kb.embed_records(kb.namespace, nodes)
        writer.commit(WriteBatch(nodes=nodes))


# -- reading ---------------------------------------------------------------------------------------------


def read_graph(kb: KnowledgeBase, *, offset: int = 0, limit: int = DEFAULT_PAGE_SIZE) -> MemoryGraph:
    """A page of entities in creation order, with the relations that start at them (so every relation is on
    exactly one page); `next_offset` is set when more entities remain."""
    if offset < 0 or not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidInputError(f"offset must be 0 or more and limit between 1 and {MAX_PAGE_SIZE}")
    kb.open()
    records = kb.store.list_nodes(kb.namespace, offset=offset, limit=limit + 1)
    more = len(records) > limit
    records = records[:limit]
    page = {r.id for r in records}
    edges = kb.store.neighbors(sorted(page), kb.namespace, limit=MAX_RELATIONS + 1)
    truncated = len(edges) > MAX_RELATIONS
    graph = _graph(kb, records, [e for e in edges[:MAX_RELATIONS] if e.source_id in page])
    graph.next_offset = offset + limit if more else None
    graph.relations_truncated = True if truncated else None
    return graph


def search_nodes(kb: KnowledgeBase, query: str) -> MemoryGraph:
    """The entities a query is about and their on-topic surroundings (anchor & expand), best first, with the
    relations among them. A blank query matches everything in the reference: it gives the first page."""
    if not query.strip():
        return read_graph(kb)
    found = kb.search(query, max_passages=0)
    ids = [n.id for n in found.nodes]
    records = {r.id: r for r in kb.store.get_nodes(ids)}
    return _graph(kb, [records[i] for i in ids if i in records], kb.store.edges_among(ids, kb.namespace))


def open_nodes(kb: KnowledgeBase, names: Sequence[str]) -> MemoryGraph:
    """The named entities (names that match nothing are skipped) and every relation with at least one end
    among them, as in the reference."""
    found, _ = kb.curation.resolve(names, kb.namespace)
    records = sorted({r.id: r for r in found.values()}.values(), key=lambda r: r.id)
    edges = kb.store.neighbors([r.id for r in records], kb.namespace, limit=MAX_RELATIONS + 1)
    graph = _graph(kb, records, edges[:MAX_RELATIONS])
    graph.relations_truncated = True if len(edges) > MAX_RELATIONS else None
    return graph


def _graph(kb: KnowledgeBase, records: Sequence[NodeRecord], edges: Sequence[EdgeRecord]) -> MemoryGraph:
    """Entities in the given order and relations in creation order, in the reference's shape."""
    observations = kb.store.get_observations([r.id for r in records])
    names = {r.id: r.name for r in records}
    others = {i for e in edges for i in (e.source_id, e.target_id)} - names.keys()
    names.update({n.id: n.name for n in kb.store.get_nodes(others)})
    return MemoryGraph(
        entities=[MemoryEntity(name=r.name, entityType=r.type, observations=observations.get(r.id, []))
                  for r in records],
        relations=[memory_relation(e, names) for e in sorted(edges, key=lambda e: e.id)
                   if e.source_id in names and e.target_id in names],
    )


def memory_relation(edge: EdgeRecord, names: dict[int, str]) -> MemoryRelation:
    """An edge as {from, to, relationType}, with the type as the caller spelt it when it was recorded."""
    original = edge.properties.get(ORIGINAL_TYPE)
    spelled = original if isinstance(original, str) and relation_type(original) == edge.type else edge.type
    return MemoryRelation(from_=names[edge.source_id], to=names[edge.target_id], relationType=spelled)
