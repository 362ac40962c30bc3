"""Reads for a person browsing the memory (the web UI, core/ui/) that no MCP tool answers: the passages that
mention an entity, its neighbours with their types (to draw them), the most connected entities, the
namespaces, the communities of a level with one community's entities drawn, what deleting a passage's document
deletes, an entity's fields as the Edit dialog shows them (with their fingerprint) and what a merge brings along.
Everything else the UI shows comes from the tools themselves."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.curation import EVERY_PERIOD, RELATIONS_READ, entity_fingerprint, merged_properties
from duckgraph.core.domain import moments
from duckgraph.core.domain.document_ids import PART, all_ids, is_part_of
from duckgraph.ports import InvalidInputError, NotFoundError, entity_key, tokens
from duckgraph.ports.periods import joined_periods

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase

MAX_PASSAGES = 50
MAX_NEIGHBOURS = 200
MAX_CONNECTED = 100
MAX_COMMUNITIES = 500


def entity_passages(kb: KnowledgeBase, namespace: str, name: str, limit: int = 10, offset: int = 0) -> dict[str, Any]:
    """The passages an entity was extracted from (its provenance): `limit` of them from `offset` on, in the order
    they were stored, each page in document order; `next_offset` reads the next page (None: no more)."""
    if offset < 0:
        raise InvalidInputError(f"offset must be 0 or more, not {offset}")
    record = kb.curation.require([name], namespace)[name]
    limit = max(1, min(limit, MAX_PASSAGES))
    pairs = kb.store.chunks_mentioning([record.id], limit=offset + limit + 1)
    ids = sorted({chunk for chunk, _ in pairs})
    chunks = kb.store.get_chunks(ids[offset: offset + limit])
    titles = kb.store.document_titles({c.document_id for c in chunks}, namespace)
    chunks.sort(key=lambda c: (c.document_id, c.ordinal))
    more = len(ids) > offset + limit
    return {
        "entity": record.name,
        "passages": [{"document_id": c.document_id, "chunk_id": c.id, "title": titles.get(c.document_id, ""),
                      "text": c.text} for c in chunks],
        "truncated": more,
        "next_offset": offset + limit if more else None,
        "words": tokens(" ".join([record.name, *record.aliases])),
    }


def neighbourhood(kb: KnowledgeBase, namespace: str, name: str, limit: int = 60) -> dict[str, Any]:
    """An entity and its strongest relations with the entities at their other ends (names and types), as a
    small graph to draw."""
    record = kb.curation.require([name], namespace)[name]
    limit = max(1, min(limit, MAX_NEIGHBOURS))
    edges = kb.store.neighbors([record.id], namespace, limit=limit + 1)
    nodes = {n.id: n for n in kb.store.get_nodes({i for e in edges[:limit] for i in (e.source_id, e.target_id)})}
    nodes[record.id] = record
    return {
        "center": record.name,
        "nodes": [{"name": n.name, "type": n.type} for n in nodes.values()],
        "edges": [{"source": nodes[e.source_id].name, "target": nodes[e.target_id].name, "type": e.type,
                   "description": e.description} for e in edges[:limit]
                  if e.source_id in nodes and e.target_id in nodes],
        "truncated": len(edges) > limit,
    }


def most_connected(kb: KnowledgeBase, namespace: str, limit: int = 20) -> dict[str, Any]:
    """The entities with the most relations that still hold, most first."""
    kb.open()
    ranked = kb.store.most_connected(namespace, limit=max(1, min(limit, MAX_CONNECTED)))
    nodes = {n.id: n for n in kb.store.get_nodes([node_id for node_id, _ in ranked])}
    return {"entities": [{"name": nodes[i].name, "type": nodes[i].type, "relations": degree}
                         for i, degree in ranked if i in nodes]}


def namespaces(kb: KnowledgeBase, namespace: str) -> dict[str, Any]:
    """The namespaces of the file, and the one this process uses by default."""
    kb.open()
    return {"namespaces": kb.store.namespaces(), "default": kb.namespace}


def communities(kb: KnowledgeBase, namespace: str, level: int = 0, limit: int = 100) -> dict[str, Any]:
    """The communities of one level (0: the coarsest; a coarser one split no finer counts at finer levels too),
    largest first, with their reports as global_search shows them, the levels there are and how fresh the last
    build is."""
    from duckgraph.core.domain.communities.hierarchy import level_view

    kb.open()
    build_mark, found = kb.communities.listing(namespace)
    levels = sorted({c.level for c in found})
    if found and level not in levels:
        raise InvalidInputError(f"level {level} does not exist: this namespace has levels 0 to {levels[-1]}")
    view = sorted(level_view(found, level), key=lambda c: (-len(c.members), c.id))
    freshness = kb.communities.freshness(namespace, build_mark)
    return {"levels": levels, "level": level if found else None, "total": len(view),
            "communities": [r.model_dump(mode="json") for r in
                            kb.communities.reports(build_mark, view[: max(1, min(limit, MAX_COMMUNITIES))])],
            "freshness": freshness.model_dump(mode="json") if freshness else None}


def community(kb: KnowledgeBase, namespace: str, id: int, limit: int = 60) -> dict[str, Any]:
    """One community's report and its entities drawn with the relations among them: its key entities (the
    anchors of the drawing) first, then other members up to `limit`. The report as global_search shows it."""
    kb.open()
    build_mark, found = kb.communities.listing(namespace)
    chosen = next((c for c in found if c.id == id), None)
    if chosen is None:
        raise NotFoundError(f"no community {id} in namespace {namespace!r}: it may have been rebuilt")
    (report,) = kb.communities.reports(build_mark, [chosen])
    limit = max(1, min(limit, MAX_NEIGHBOURS))
    members = set(chosen.members)
    # The key entities as shown: an extractive report's by their names now (one renamed since the build too).
    keys = {r.id: r for r in kb.curation.resolve([e.name for e in report.key_entities], namespace)[0].values()
            if r.id in members}
    nodes = {**keys, **{n.id: n for n in kb.store.get_nodes(chosen.members[:limit]) if n.id not in keys}}
    nodes = dict(list(nodes.items())[:limit])
    edges = list({e.id: e for e in kb.store.neighbors(list(nodes), namespace, limit=20 * len(nodes))
                  if e.source_id in nodes and e.target_id in nodes}.values())
    return {
        "report": report.model_dump(mode="json"),
        "nodes": [{"name": n.name, "type": n.type, "anchor": i in keys} for i, n in nodes.items()],
        "edges": [{"source": nodes[e.source_id].name, "target": nodes[e.target_id].name, "type": e.type,
                   "description": e.description} for e in edges],
        "truncated": len(members) > len(nodes),
    }


def document(kb: KnowledgeBase, namespace: str, id: str) -> dict[str, Any]:
    """The whole document that the stored document `id` (a passage's document_id) is part of, as delete_documents
    deletes it: a long file's later part (`<file>#part-2`) is its file's, when the file is stored; its id and
    title, its parts' ids (the file's first) and how many passages they hold."""
    kb.open()
    file = id.rpartition(PART)[0]
    whole = file if is_part_of(id, file) and kb.store.document_titles([file], namespace) else id
    titles = kb.store.document_titles([whole], namespace)
    if whole not in titles:
        raise NotFoundError(f"no document {id!r} in the namespace {namespace!r} (deleted meanwhile?)")
    parts = [whole, *(d for d in all_ids(kb.store, namespace) if is_part_of(d, whole))]
    return {"id": whole, "title": titles[whole], "parts": parts,
            "passages": len(kb.store.document_chunks(namespace, parts))}


def entity_fields(kb: KnowledgeBase, namespace: str, name: str) -> dict[str, Any]:
    """An entity's id and fields that the Edit dialog shows, as stored now, and their `fingerprint`, which the dialog's
    save sends back (update_entity's expected_fingerprint): refused, nothing changed, if the entity changed since."""
    record = kb.curation.require([name], namespace)[name]
    observations = kb.store.get_observations([record.id]).get(record.id, [])
    # `id`: whether an entity read again is still this one (renamed, say), or another its name now names (merged).
    return {"id": record.id, "name": record.name, "type": record.type, "description": record.description,
            "aliases": list(record.aliases), "properties": record.properties, "observations": observations,
            "fingerprint": entity_fingerprint(record, observations)}


def merge_preview(kb: KnowledgeBase, namespace: str, sources: list[str], target: str) -> dict[str, Any]:
    """What merging `sources` into `target` (merge_entities) brings along, to say before it is confirmed: for each
    source, its names that become the target's aliases, how many observations, properties, relations (of every
    period) and passages it adds, as the merge adds them: what the target (or a source before it) has already is not
    counted again; `relations_folded`: its relations that repeat one the target will have (same type and other end,
    periods that overlap), joined into it; `relations_between`: those between the merged entities, which go, as they
    would join the target to itself (each counted once, on the first source's line); and each property whose values
    differ, with the value the target keeps (`kept`, `kept_from`) and the source's that becomes an observation.
    Refused as merge_entities refuses names of no entity."""
    into, merged_from = kb.curation.merging(sources, target, namespace)
    ids = {into.id, *(o.id for o in merged_from)}
    observations = kb.store.get_observations(list(ids))
    properties, differing = merged_properties(into, merged_from)
    node_ids, chunk_ids = kb.store.links(list(ids), [], namespace).node_chunks
    passages_of: dict[int, set[int]] = {}
    for node, chunk in zip(node_ids, chunk_ids, strict=True):
        passages_of.setdefault(int(node), set()).add(int(chunk))
    # The relations as the store will join them (ports/periods.py, as `_apply_merges` does): each end merged named
    # as the target; one between the merged entities is a loop, which goes.
    every = sorted(kb.store.neighbors(list(ids), namespace, as_of=EVERY_PERIOD, limit=RELATIONS_READ),
                   key=lambda e: e.id)
    end = {i: into.id for i in ids}
    joined, _ = joined_periods([(e.id, namespace, end.get(e.source_id, e.source_id), end.get(e.target_id, e.target_id),
                                 e.type, e.valid_from, e.valid_until) for e in every
                                if not (e.source_id in ids and e.target_id in ids)], moments.now())
    # A relation of the target's own is kept: what joins it adds nothing, nor what joins a source's kept one.
    kept_by_target = {joined.get(e.id, e.id) for e in every if into.id in (e.source_id, e.target_id)}
    names = {entity_key(n) for n in (into.name, *into.aliases)}
    texts = {entity_key(t) for t in observations.get(into.id, [])}
    seen_passages = set(passages_of.get(into.id, ()))
    counted: set[int] = set()  # a relation between two sources is on the first one's line
    brought = []
    for other in merged_from:
        aliases = [n for n in dict.fromkeys((other.name, *other.aliases)) if entity_key(n) not in names]
        names.update(map(entity_key, aliases))
        added = [t for t in dict.fromkeys(observations.get(other.id, [])) if entity_key(t) not in texts]
        texts.update(map(entity_key, added))
        own = [e for e in every if other.id in (e.source_id, e.target_id) and e.id not in counted]
        counted.update(e.id for e in own)
        between = [e for e in own if e.source_id in ids and e.target_id in ids]
        folded = [e for e in own if e not in between and (e.id in joined or e.id in kept_by_target)]
        passages = passages_of.get(other.id, set()) - seen_passages
        seen_passages |= passages
        brought.append({"name": other.name, "aliases": aliases, "observations": len(added),
                        "properties": len(other.properties), "relations": len(own) - len(between) - len(folded),
                        "relations_folded": len(folded), "relations_between": len(between),
                        "passages": len(passages)})
    # The value kept is the target's own, else that of the last source that has the property.
    holders = {k: o.name for o in (*merged_from, into) for k in o.properties}
    return {"target": into.name, "sources": brought,
            "conflicts": [{"property": k, "kept": properties[k], "kept_from": holders[k], "value": v,
                           "source": o.name} for o, k, v in differing]}


VIEWS: dict[str, Callable[..., dict[str, Any]]] = {
    "entity_passages": entity_passages, "neighbourhood": neighbourhood, "most_connected": most_connected,
    "namespaces": namespaces, "communities": communities, "community": community, "document": document,
    "entity_fields": entity_fields, "merge_preview": merge_preview,
}


def run(kb: KnowledgeBase, view: str, namespace: str | None, arguments: dict[str, Any]) -> dict[str, Any]:
    """One of VIEWS by name, in `namespace` (None: the knowledge base's own)."""
    if view not in VIEWS:
        raise InvalidInputError(f"unknown view {view!r}; the views are {', '.join(sorted(VIEWS))}")
    from duckgraph.core.domain.namespaces import check_namespace

    function = VIEWS[view]
    namespace = check_namespace(namespace) if namespace else kb.namespace
    try:
        inspect.signature(function).bind(kb, namespace, **arguments)
    except TypeError as exc:
        raise InvalidInputError(f"bad arguments for the view {view!r}: {exc}") from exc
    return function(kb, namespace, **arguments)
