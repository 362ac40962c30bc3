"""The reference MCP memory server's use cases (@modelcontextprotocol/server-memory) over a knowledge base.

Entities are nodes (entityType is the node type, observations the node's observations) and relations are
edges. Where duckgraph's model differs, the difference is deliberate and small:

- Names are matched as everywhere in duckgraph: ignoring case and spacing, and by a unique alias. Creating
  "Alice" when "Alice" exists skips it, as the reference does; creating "alice" (which the reference would keep
  as a second entity) adds its observations to "Alice" and says so (`merged_into`). A spelling that is a stored
  name up to accents and punctuation ("Jose" for "José", "orders_db" for "orders-db") is that entity when created
  (same type) or named as a relation's end (the only entity so named), and becomes its alias (said in `note`), so
  every later call by it reaches that entity.
- Edge types are stored in UPPER_SNAKE_CASE, so "works at" and "WORKS_AT" are one relation. The spelling the
  caller used is kept in the edge's properties and is what every result shows.
- Relations join entities: an end that does not exist is created as an entity of type 'unknown' (the reference
  stores such a relation dangling), and a relation whose ends are one entity is not stored; both are reported in
  the relation's `note`.
- search_nodes returns what the reference's substring match returns first, then the entities duckgraph's search
  finds relevant by meaning (its anchors, not the neighbours it walks to).
- read_graph, search_nodes and open_nodes answer a page within a token bound (memory_pages.py), with
  `next_offset` when more remain; the reference's answers have no bound, which hosts cut.
- An entity's or a relation's description (add_knowledge_graph and extraction write them; the reference has
  none) is an extra `description` key of it in those answers, not an observation: the reference's keys stay as
  they are, and no text is listed as an observation that delete_observations cannot remove or that a client
  copying the graph would store as one.

Results have the reference's shape; the few extra fields are optional and only present when they say something.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.curation import aliased_elsewhere_note
from duckgraph.core.domain.limits import MAX_OBSERVATION_CHARS, MAX_OBSERVATIONS
from duckgraph.core.domain.memory_pages import Entry, fill, note
from duckgraph.core.domain.moments import short
from duckgraph.core.domain.node_merge import with_aliases
from duckgraph.core.domain.observations import (
    absent_observations,
    named_observations,
    nearest_observation,
    new_observations,
)
from duckgraph.core.domain.replaced_facts import Rival, rivals, two_current
from duckgraph.core.domain.resolution import (
    PLACEHOLDER_TYPE,
    NameKeys,
    NameResolver,
    is_unknown_type,
    look_alike_note,
    look_alikes,
    lookup_keys,
    same_type,
    types_agree,
    is_self_reference,
    self_reference_hint,
)
from duckgraph.core.domain.model import (
    ORIGINAL_TYPE,
    AddedObservations,
    AddObservationsResult,
    CreatedEntity,
    CreatedRelation,
    GraphEntity,
    GraphRelation,
    MemoryEntities,
    MemoryEntityInput,
    MemoryGraph,
    ObservationAddition,
    ObservationDeletion,
    ObservationsDeleted,
    RelationInput,
    RemovedObservations,
    UnmatchedObservation,
    edge_properties,
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

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1_000
#: Relations read for a read_graph page, or for one entity of a search_nodes or open_nodes page, at most: more than
#: an answer holds (memory_pages.TEXT_TOKENS), so only a hub's relations are cut by it.
MAX_RELATIONS = 5_000
#: Observations delete_observations looks for the nearest stored text of, and names in its hint, at most.
NEAREST_LOOKED_UP = 10
#: Entities whose observations and relations a page reads at a time: a page takes them until one does not fit.
ENTRIES_READ = 100


# -- writing ---------------------------------------------------------------------------------------------


def create_entities(
    kb: KnowledgeBase, entities: Sequence[MemoryEntityInput], *, namespace: str | None = None
) -> MemoryEntities:
    """Create the entities whose names are new, in one transaction, and return them as the reference does.

    An entity named exactly as a stored one (the very string sent) is skipped, as in the reference; the result's
    `note` says when it came with observations the stored one lacks, which were not added. One named as a stored
    (or earlier in the call) entity but for case, spacing or invisible characters, or named as add_knowledge_graph
    resolves a new name onto a stored entity of its type (an alias of it, or its name up to accents and
    punctuation), is one entity in duckgraph, where the reference keeps two: its observations are added to the
    existing entity and it is returned with `merged_into`, so nothing the caller sent is lost. A spelling merged
    other than by case or spacing becomes an alias of the entity, and a type given other than the stored one is not
    applied (its `note` says either). A name merged so by case or spacing but given another known type than the
    entity's is, as to add_knowledge_graph (rule 1b), the one stored entity of the type given that has it as an
    alias, if one has ("paris" as a Person is Paris Dubois, not the City "Paris"; its `note` says so). A placeholder
    (made by create_relations for a missing end, see `_is_placeholder`) is filled in: it takes the given type and
    observations, and counts as created; so does any entity of type 'unknown' take the type of a name merged into it.
    """
    namespace = kb.resolve_namespace(namespace)
    with kb.writing() as writer:
        names = NameKeys()
        keys = [names.key(e.name) for e in entities]
        found = kb.store.find_nodes(namespace, lookup_keys([e.name for e in entities], names))
        by_key = {n.key: n for n in found}
        # A new name that is the alias of one stored entity of its type (a merged duplicate's old name), or its
        # name up to accents and punctuation, is that entity, as add_knowledge_graph resolves it (resolution.py's
        # rule 2); so is a stored name but for case or spacing written with another known type than that entity's,
        # for the one stored entity of the type given that has it as an alias (rule 1b: "paris" as a Person is Paris
        # Dubois, not the City "Paris"). Never one that another name of the call names, nor one another name was
        # resolved to.
        resolver = NameResolver(keys=names)
        resolver.add(found)
        claimed = set(keys)
        into: dict[str, str] = {}
        owners: dict[tuple[str, str], str] = {}  # rule 1b's entities, by key and type given
        for entity, key in zip(entities, keys):
            if key in into:
                continue
            if key in by_key:
                typed = (key, names.type(entity.entityType))
                if typed not in owners and _another_type_merged(entity, by_key[key]):
                    match = resolver.alias_owner(entity.name, entity.entityType)
                    if match is not None and match.key not in claimed:
                        owners[typed] = match.key
                        claimed.add(match.key)
                continue
            match = resolver.match(entity.name, entity.entityType)
            if match is not None and match.key not in claimed:
                into[key] = match.key
                claimed.add(match.key)
        keys = [owners.get((k, names.type(e.entityType)), k) if k in by_key and _another_type_merged(e, by_key[k])
                else into.get(k, k) for e, k in zip(entities, keys)]
        stored = {k: by_key[k] for k in keys if k in by_key}
        texts = {r.id: list(t) for r, t in zip(stored.values(), _stored_observations(kb, stored.values()))}
        by_hand = kb.store.written_by_hand("node", [r.id for r in stored.values()])
        changed: dict[str, NodeRecord] = {}
        fresh: set[str] = set()  # keys created (or placeholders filled) by this call
        results: list[CreatedEntity] = []
        skipped: dict[str, _Skipped] = {}  # by stored name
        for entity, key in zip(entities, keys):
            given = new_observations((), entity.observations)
            record = changed.get(key) or stored.get(key)
            if record is None:
                changed[key] = NodeRecord(namespace=namespace, key=key, name=entity.name, type=entity.entityType,
                                          observations=tuple(given), by_hand=True)
                fresh.add(key)
                results.append(CreatedEntity(name=entity.name, entityType=entity.entityType, observations=given))
                continue
            # The name as sent: "Alice " or "Al<ZERO WIDTH SPACE>ice" is stored as "Alice" but is another name to the
            # reference, which would keep its observations; so it is merged, as "alice" is.
            exact = record.name == entity.sent_name
            current = list(record.observations) if record.observations is not None else texts[record.id]
            placeholder = key not in fresh and _is_placeholder(record, current, by_hand)
            if exact and key not in fresh and not placeholder:
                # The reference's rule for a stored name, said when it drops what the entity lacks, or when the type
                # given is another: following "add them with add_observations" would put them on another thing.
                lacking = new_observations(current, given)
                other = entity.entityType if not types_agree(entity.entityType, record.type) else None
                if lacking or other:
                    said = skipped.setdefault(record.name, _Skipped(record.type))
                    said.lacking += len(lacking)
                    if other and not said.other:
                        # The name as an alias of one entity of the type given is that entity to
                        # add_knowledge_graph (resolution.py's rule 1b): the one to add the observations to.
                        said.other, owner = other, resolver.alias_owner(entity.name, other)
                        said.owner = owner.name if owner is not None else None
                continue
            added = new_observations(current, given)
            # An entity of type 'unknown' says nothing of what it is: the type given is what is known.
            retyped = placeholder or (is_unknown_type(record.type) and not is_unknown_type(entity.entityType))
            kind = entity.entityType if retyped else record.type
            # A spelling merged by rule 2 (accents, punctuation) becomes an alias, as add_knowledge_graph records
            # it: every later call naming the entity that way (add_observations, create_relations, the deletes,
            # which match by key or alias only) then reaches it rather than missing it or making a second one.
            aliases = with_aliases(record.name, record.aliases, [entity.name], names.key)
            changed[key] = replace(record, type=kind, aliases=tuple(aliases), observations=tuple([*current, *added]),
                                   source_ids=(), source_chunk_ids=(), by_hand=True)
            if placeholder:
                fresh.add(key)
            if placeholder and record.name == entity.name:  # the reference never stored it: created, however sent
                results.append(CreatedEntity(name=entity.name, entityType=kind, observations=given))
            else:
                alias = _alias_note(entity.name, record.name) if len(aliases) > len(record.aliases) else None
                homonym = by_key.get(names.key(entity.name))
                owned = _alias_owner_note(entity, homonym, record, added) if homonym and homonym.key != key else None
                notes = [_cleaned_note(entity), alias, owned, _type_note(entity, record.name, kind, added)]
                results.append(CreatedEntity(name=entity.name, entityType=kind, observations=added,
                                             merged_into=record.name, note="; ".join(filter(None, notes)) or None))
        # A new name that looks the same as a stored one but uses other letters stays apart (it may be written so
        # on purpose) and is said: a reader could not tell the two apart (resolution.look_alikes).
        alike = look_alikes(kb.store, namespace, [r.name for r in results if r.merged_into is None])
        for result in results:
            if result.merged_into is None and result.name in alike:
                result.note = look_alike_note(result.name, alike[result.name][0])
        records = list(changed.values())
        for record in records:
            _check_observation_count(record, len(record.observations or ()))
        if records:
            kb.embed_records(namespace, records)
            writer.commit(WriteBatch(nodes=records))
    # An entity created as "me" or "User" is the user (resolution.SELF_REFERENCES): its note says so.
    selves = self_reference_hint(kb.store, namespace, [r.name for r in results if r.merged_into is None], merge=False)
    for result in results:
        if selves and result.merged_into is None and is_self_reference(result.name):
            result.note = "; ".join(filter(None, [result.note, selves]))
    return MemoryEntities(entities=results, note=_skipped_note(skipped))


def create_relations(
    kb: KnowledgeBase, relations: Sequence[RelationInput], *, namespace: str | None = None
) -> list[CreatedRelation]:
    """Create the relations that do not exist yet (same ends, same type after normalisation), in one
    transaction; returns them as the caller wrote them.

    The reference stores a relation whatever its ends; duckgraph's relations join entities, so an end that does
    not exist is created as a placeholder entity of type 'unknown' (create_entities later gives it its type and
    observations) and the relation says so in `note`. An end that is no stored name or alias but is, for exactly
    one stored entity (any type: ends have none), its name or an alias up to accents and punctuation ("orders_db"
    for "orders-db", as open_nodes finds it) is that entity, and becomes its alias once a relation is stored with
    it; the `note` says which entity it was taken as. With several such entities it is a placeholder, and the
    `note` names them. A relation whose ends are one entity ("Maya Chen" and "maya chen" are one here) is not
    stored and is returned with a `note` saying so.
    """
    namespace = kb.resolve_namespace(namespace)
    for i, relation in enumerate(relations):
        if not relation_type(relation.relationType):
            raise InvalidInputError(f"relations[{i}] ({relation.from_} -{relation.relationType}-> {relation.to}): "
                                    "the relationType must contain letters or digits, e.g. works_at")
    with kb.writing() as writer:
        found, missing = kb.curation.resolve([n for r in relations for n in (r.from_, r.to)], namespace)
        elsewhere = kb.curation.aliased_elsewhere(found, namespace)
        # A placeholder for an end that names one stored entity but for accents and punctuation would split that
        # entity in two (open_nodes, a read, already finds it by that spelling): the end is that entity.
        near, alike = _near_ends(kb, missing, namespace)
        found.update(near)
        missing = [name for name in missing if name not in near]
        new_ends = placeholders(kb, missing, namespace)
        for name in missing:
            found[name] = new_ends[entity_key(name)]
        ends = {n.key: n for n in found.values()}
        key_of = {n.id: n.key for n in ends.values() if n.id is not None}
        existing = {(key_of[e.source_id], key_of[e.target_id], e.type)
                    for e in kb.store.edges_among(sorted(key_of), namespace)}
        # A relation that had ended (end_relations) is stored again from now: its note says so.
        ended: dict[tuple[str, str, str], datetime] = {}
        for e in kb.store.edges_among(sorted(key_of), namespace, include_expired=True):
            identity = (key_of[e.source_id], key_of[e.target_id], e.type)
            if identity not in existing and e.valid_until is not None:
                ended[identity] = max(e.valid_until, ended.get(identity, e.valid_until))
        results: list[CreatedRelation] = []
        writes: list[EdgeWrite] = []
        written: list[CreatedRelation] = []  # the result of each of `writes`
        spellings: dict[str, list[str]] = {}  # entity key -> the ends taken as it, to record as its aliases
        for relation in relations:
            source, target = found[relation.from_], found[relation.to]
            identity = (source.key, target.key, relation_type(relation.relationType))
            taken = [name for name in dict.fromkeys((relation.from_, relation.to)) if name in near]
            if source.key == target.key:
                why = _taken_note(taken, found, stored=False) if taken else "names match ignoring case"
                results.append(_created(relation, f"not stored: {relation.from_!r} and {relation.to!r} are one "
                                                  f"entity here ({source.name!r}; {why})"))
                continue
            if identity in existing:
                continue
            existing.add(identity)
            for name in taken:
                spellings.setdefault(found[name].key, []).append(name)
            new = [n.name for n in (source, target) if n.id is None]
            notes = [_taken_note(taken, found) if taken else None, _placeholder_note(new, alike),
                     _reopened_note(ended.get(identity)),
                     *(aliased_elsewhere_note(name, found[name], elsewhere[name], "the relation was stored with",
                                              "delete_relations removes this one: create it again with the exact "
                                              "name of the one meant")
                       for name in dict.fromkeys((relation.from_, relation.to)) if name in elsewhere)]
            results.append(_created(relation, "; ".join(n for n in notes if n) or None))
            written.append(results[-1])
            writes.append(EdgeWrite(namespace=namespace, source_key=source.key, target_key=target.key,
                                    type=identity[2], properties={ORIGINAL_TYPE: relation.relationType},
                                    by_hand=True))
        # A second relation of a type its source held once: the caller may have meant it to replace the first.
        for rival in rivals(kb.store, writes, {n.key: n.id for n in ends.values() if n.id is not None}, namespace):
            result, write = written[rival.index], writes[rival.index]
            note = _rival_note(rival, result, ends[write.source_key].name, ends[write.target_key].name)
            result.note = "; ".join(filter(None, [result.note, note]))
        used = {key for w in writes for key in (w.source_key, w.target_key)}
        nodes = [n for key, n in new_ends.items() if key in used]
        # The same store write as add_knowledge_graph's for a resolved name: the spelling joins the aliases.
        nodes += [replace(ends[key], source_ids=(), source_chunk_ids=(),
                          aliases=tuple(with_aliases(ends[key].name, ends[key].aliases, spelt, entity_key)))
                  for key, spelt in spellings.items()]
        if writes:
            kb.embed_records(namespace, nodes, edges=writes, names={n.key: n.name for n in ends.values()})
            writer.commit(WriteBatch(nodes=nodes, edges=writes))
    # A placeholder made for "me" or "User" is the user (resolution.SELF_REFERENCES): its relations say so.
    created = [n.name for n in new_ends.values() if n.key in used and is_self_reference(n.name)]
    selves = self_reference_hint(kb.store, namespace, created, merge=False)
    for result in results:
        if selves and {result.from_, result.to} & set(created):
            result.note = "; ".join(filter(None, [result.note, selves]))
    return results


def _is_placeholder(record: NodeRecord, observations: Sequence[str], by_hand: set[int]) -> bool:
    """Whether a stored entity is still the placeholder create_relations made: type 'unknown' and nothing written
    about it since. An entity written by hand (create_entities, add_observations) is the user's own, even of type
    'unknown' and empty: create_entities skips it as the reference skips any stored name."""
    return (record.type == PLACEHOLDER_TYPE and not observations and not record.description
            and record.id not in by_hand)


def placeholders(kb: KnowledgeBase, missing: Sequence[str], namespace: str) -> dict[str, NodeRecord]:
    """A placeholder entity for each missing name (one per key, spelt as first given). A name that is an alias
    of several entities is refused: which one was meant cannot be told, and a new entity would hide them."""
    keys: dict[str, str] = {}
    for name in missing:
        keys.setdefault(entity_key(name), name)
    if shared := kb.curation.alias_owners(list(keys.values()), namespace):
        name, owners = next(iter(shared.items()))
        raise InvalidInputError(f"{name!r} is an alias of several entities ({', '.join(map(repr, owners))}): use the "
                                "exact name of one")
    return {key: NodeRecord(namespace=namespace, key=key, name=name, type=PLACEHOLDER_TYPE, observations=())
            for key, name in keys.items()}


def _near_ends(
    kb: KnowledgeBase, missing: Sequence[str], namespace: str
) -> tuple[dict[str, NodeRecord], dict[str, list[str]]]:
    """Of the ends `missing` (no stored name or alias), those that are the name or an alias of exactly one stored
    entity up to accents and punctuation (resolution's rule 2 without a type: ends have none), with that entity;
    and those that are so for several, with their names (none is taken: which one was meant cannot be told)."""
    if not missing:
        return {}, {}
    keys = NameKeys()
    resolver = NameResolver(keys=keys)
    resolver.add(kb.store.find_nodes(namespace, lookup_keys(missing, keys)))
    near: dict[str, NodeRecord] = {}
    alike: dict[str, list[str]] = {}
    for name in dict.fromkeys(missing):
        candidates = resolver.candidates(name)
        if len(candidates) == 1:
            near[name] = candidates[0]
        elif candidates:
            alike[name] = sorted(r.name for r in candidates)
    return near, alike


def _taken_note(taken: Sequence[str], found: dict[str, NodeRecord], *, stored: bool = True) -> str:
    """Which entity each end in `taken` (from `_near_ends`) was taken as; `stored`: the relation was stored, so
    the spelling was recorded as an alias."""
    alias = " and is now its alias" if stored else ""
    return "; ".join(f"{name!r} was taken as {found[name].name!r} (the same name but for accents and "
                     f"punctuation){alias}" for name in taken)


def _placeholder_note(names: Sequence[str], alike: dict[str, list[str]]) -> str | None:
    if not names:
        return None
    listed = " and ".join(repr(n) for n in names)
    note = (f"{listed} did not exist: created with entityType {PLACEHOLDER_TYPE!r} to keep the relation "
            "(create_entities with the same name gives it a type and observations)")
    several = [f"{n!r} is {' and '.join(map(repr, alike[n]))} but for accents and punctuation, so it was taken as "
               "none of them (give the exact name of the one meant)" for n in names if n in alike]
    return "; ".join([note, *several])


def _reopened_note(ended_on: datetime | None) -> str | None:
    if ended_on is None:
        return None
    return (f"it had ended on {short(ended_on)}: stored again, it holds again from now (delete_relations removes "
            "this new period; the ended one stays as history)")


def _cleaned_note(entity: MemoryEntityInput) -> str | None:
    """A merged entity's note when its name was sent with spaces around it or invisible characters: why a name the
    same as the stored one was merged rather than skipped (repr: what was dropped shows, escaped)."""
    if entity.sent_name == entity.name:
        return None
    return (f"sent as {entity.sent_name!r}, which is {entity.name!r} once extra spaces and invisible characters are "
            "dropped, as they are from every name")


def _another_type_merged(entity: MemoryEntityInput, same: NodeRecord) -> bool:
    """Whether `entity`, of the key of the stored `same`, would be merged into it (not an exact repeat, which is
    skipped) though given another known type (not `types_agree`): rule 1b's case, as add_knowledge_graph applies it."""
    return same.name != entity.sent_name and not types_agree(entity.entityType, same.type)


def _alias_owner_note(entity: MemoryEntityInput, homonym: NodeRecord, owner: NodeRecord,
                      added: Sequence[str]) -> str:
    """A merged entity's note when rule 1b took its name as `owner`, not as `homonym`, the entity of its name: where
    the observations went, and how to move them if `homonym` was meant."""
    taken = (f"{entity.name!r} is {homonym.name!r} ({homonym.type}) but for case or spacing, and an alias of "
             f"{owner.name!r} ({owner.type}): with entityType {entity.entityType!r} it is {owner.name!r}")
    if not added:
        return f"{taken}; nothing was added to it"
    count = f"{len(added)} observation{'s' if len(added) > 1 else ''}"
    return (f"{taken}, so the observations listed were added to {owner.name!r}. If the {homonym.type} "
            f"{homonym.name!r} was meant, move them: delete_observations with entityName {owner.name!r} and the "
            f"{count} listed here, then add_observations with entityName {homonym.name!r}")


def _own_name(name: str, kind: str) -> str:
    """A name of its own for an entity of type `kind` whose name another entity has: "Paris (person)"."""
    return f"{name} ({kind})"


def _type_note(entity: MemoryEntityInput, name: str, kind: str, added: Sequence[str]) -> str | None:
    """A merged entity's note when the type given is another than the one it keeps (`same_type`): what was added to
    the stored entity `name`, and how to undo it if the entity given is another one."""
    if is_unknown_type(entity.entityType) or same_type(entity.entityType, kind):
        return None
    own = _own_name(entity.name, entity.entityType)
    undo = (f"undo this: delete_observations with entityName {name!r} and the {len(added)} observation"
            f"{'s' if len(added) > 1 else ''} listed here removes {'them' if len(added) > 1 else 'it'} from {name!r}; "
            f"then create it under a name of its own, such as {own!r}") if added else (
            f"nothing was added to {name!r}: create it under a name of its own, such as {own!r}")
    return (f"the entityType {entity.entityType!r} was not applied: {name!r} keeps its type {kind!r}. If "
            f"{entity.name!r} is another entity, not this {kind}, {undo}")


@dataclass
class _Skipped:
    """What the exact repeats of a stored name that create_entities skipped came with."""

    kind: str  # the stored entity's type
    lacking: int = 0  # observations given that it does not hold
    other: str | None = None  # the other type given (not `types_agree`), if one was
    owner: str | None = None  # the one entity of type `other` that has the name as an alias (rule 1b), if one has


def _skipped_note(skipped: dict[str, _Skipped]) -> str | None:
    """The result's note for the exact repeats of stored names skipped, each with what to do."""
    if not skipped:
        return None

    def lacking(count: int) -> str:
        return (f"{count} observation{'s' if count > 1 else ''} it does not hold {'were' if count > 1 else 'was'} "
                "not added")

    same = [f"{name!r} exists, so it was skipped: {lacking(it.lacking)}" for name, it in skipped.items()
            if it.other is None]
    said = [f"{'; '.join(same)}. Add them with add_observations."] if same else []
    # Another type given: the entity sent is likely another thing of the same name, which the stored one is not.
    for name, it in skipped.items():
        if it.other is None:
            continue
        dropped, add = (f": {lacking(it.lacking)}", f"; if it is that {it.kind}, add them with add_observations") \
            if it.lacking else ("", "")
        if it.owner is not None:  # that other thing is stored already: a qualified name would duplicate it
            meant = (f"add them to it (add_observations with entityName {it.owner!r})" if it.lacking else
                     f"it is stored already: name it {it.owner!r}")
            said.append(f"{name!r} exists with entityType {it.kind!r}, not {it.other!r}, so it was skipped{dropped}. "
                        f"{name!r} is an alias of the {it.other} {it.owner!r}: if that is the entity meant, {meant}, "
                        f"rather than creating another{add}.")
        else:
            said.append(f"{name!r} exists with entityType {it.kind!r}, not {it.other!r}, so it was skipped{dropped}. "
                        "If it is another entity, create it under a name of its own, such as "
                        f"{_own_name(name, it.other)!r}{add}.")
    return " ".join(said)


def _rival_note(rival: Rival, relation: CreatedRelation, source: str, target: str) -> str:
    # delete_relations: the memory tools have no end_relations.
    return (two_current(source, relation.relationType, rival.held_target, target)
            + "delete_relations removes it")


def _alias_note(spelling: str, name: str) -> str:
    return (f"{spelling!r} is now an alias of {name!r} (the same name but for accents and punctuation), so later "
            "calls with either name reach this entity")


def _created(relation: RelationInput, note: str | None) -> CreatedRelation:
    return CreatedRelation(from_=relation.from_, to=relation.to, relationType=relation.relationType, note=note)


def _stored_observations(kb: KnowledgeBase, records: Iterable[NodeRecord]) -> list[list[str]]:
    records = list(records)
    stored = kb.store.get_observations([r.id for r in records])
    return [stored.get(r.id, []) for r in records]


def _check_observation_count(record: NodeRecord, count: int) -> None:
    if count > MAX_OBSERVATIONS:
        raise InvalidInputError(
            f"{record.name!r} would have {count} observations; the limit is {MAX_OBSERVATIONS}: "
            "delete some with delete_observations first"
        )


def add_observations(
    kb: KnowledgeBase, additions: Sequence[ObservationAddition], *, namespace: str | None = None
) -> AddObservationsResult:
    """Add observations to existing entities, skipping ones they already have; one transaction. An unknown
    entity fails the whole call, as in the reference. A name that is one entity's name and others' alias adds to
    the entity it names, and the `note` says so, with how to move them to another."""
    namespace = kb.resolve_namespace(namespace)
    with kb.writing() as writer:
        found, missing = kb.curation.resolve([a.entityName for a in additions], namespace)
        if missing:
            # The reference's message, then what the name likely meant: create_entities with it could otherwise
            # make a second entity beside the one meant (a spelling of another type is not merged).
            meant = kb.curation.did_you_mean(missing[:1], namespace).get(missing[0])
            advice = (f"{_did_you_mean(meant)} Otherwise create it with create_entities first"
                      if meant else "create it with create_entities first")
            raise NotFoundError(f"Entity with name {missing[0]} not found; {advice}")
        current, state = _observation_state(kb, found.values())
        results = []
        for addition in additions:
            texts = state[found[addition.entityName].id]
            added = new_observations(texts, addition.contents)
            texts.extend(added)
            results.append(AddedObservations(entityName=addition.entityName, addedObservations=added))
        _commit_observations(kb, writer, found.values(), current, state, namespace)
        elsewhere = kb.curation.aliased_elsewhere(found, namespace)
    notes = [aliased_elsewhere_note(name, found[name], others, "the observations were added to",
                                    f"move them: delete_observations with entityName {found[name].name!r} and the "
                                    "observations added, then add_observations with the exact name of the one meant")
             for name, others in elsewhere.items()]
    return AddObservationsResult(results=results, note="; ".join(notes) or None)


def delete_observations(
    kb: KnowledgeBase, deletions: Sequence[ObservationDeletion], *, namespace: str | None = None
) -> ObservationsDeleted:
    """Remove the given observations; entities that do not exist are ignored (and listed), as in the reference.
    A text that names none of its entity's observations is ignored too, as in the reference, and listed in
    `unmatched` with the entity's observation most like it: the fact it meant to remove is still stored."""
    namespace = kb.resolve_namespace(namespace)
    with kb.writing() as writer:
        found, missing = kb.curation.resolve([d.entityName for d in deletions], namespace)
        current, state = _observation_state(kb, found.values())
        removed: dict[int, list[str]] = {}
        unmatched: list[UnmatchedObservation] = []
        for deletion in deletions:
            if deletion.entityName not in found:
                continue
            record = found[deletion.entityName]
            # By the text as a reader sees it: one stored decomposed or with other spacing is found too.
            doomed = named_observations(state[record.id], deletion.observations)
            # Against what was stored: a text removed by an earlier deletion of the call is no miss.
            for text in absent_observations(current[record.id], deletion.observations):
                near = nearest_observation(state[record.id], text) if len(unmatched) < NEAREST_LOOKED_UP else None
                unmatched.append(UnmatchedObservation(entity=record.name, observation=text, nearest=near))
            removed.setdefault(record.id, []).extend(doomed)
            gone = set(doomed)
            state[record.id] = [t for t in state[record.id] if t not in gone]
        _commit_observations(kb, writer, found.values(), current, state, namespace)
    names = {r.id: r.name for r in found.values()}
    return ObservationsDeleted(
        success=True, message="Observations deleted successfully",
        removed=[RemovedObservations(entity=names[i], removed=texts) for i, texts in removed.items() if texts],
        not_found=list(dict.fromkeys(missing)), unmatched=unmatched,
        hints=_missing_hints(kb, list(dict.fromkeys(missing)), namespace) + _unmatched_hints(unmatched),
    )


def _did_you_mean(meant: Sequence[str]) -> str:
    return f"did you mean {' or '.join(map(repr, meant))}?"


def _missing_hints(kb: KnowledgeBase, missing: Sequence[str], namespace: str) -> list[str]:
    """delete_observations' hint for the entity names that matched nothing: the stored names each likely meant, as
    add_observations' error gives them."""
    if not missing:
        return []
    shown = missing[:NEAREST_LOOKED_UP]
    meant = kb.curation.did_you_mean(shown, namespace)
    listed = " or ".join(f"{name!r}" + (f" ({_did_you_mean(meant[name])})" if meant.get(name) else "")
                         for name in shown)
    more = f" or {len(missing) - len(shown)} more names" if len(missing) > len(shown) else ""
    return [f"No entity is named {listed}{more}: nothing was removed for {'it' if len(missing) == 1 else 'them'} "
            "(see not_found). Give each name as stored (search_nodes finds it)."]


def _unmatched_hints(unmatched: Sequence[UnmatchedObservation]) -> list[str]:
    """delete_observations' hint for the texts that named no observation of their entity: what is still stored."""
    if not unmatched:
        return []
    listed = "; ".join(f"{u.observation!r} of {u.entity!r}" + (f" (stored: {u.nearest!r})" if u.nearest else "")
                       for u in unmatched[:NEAREST_LOOKED_UP])
    more = f" and {len(unmatched) - NEAREST_LOOKED_UP} more" if len(unmatched) > NEAREST_LOOKED_UP else ""
    return [f"Not stored, so nothing was removed for: {listed}{more} (see unmatched). Delete an observation by its "
            "text as stored (open_nodes lists them)."]


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
    state: dict[int, list[str]], namespace: str,
) -> None:
    by_id = {r.id: r for r in records}
    changed = [by_id[i] for i in state if state[i] != current[i]]
    for record in changed:
        _check_observation_count(record, len(state[record.id]))
    if changed:
        nodes = [replace(r, source_ids=(), source_chunk_ids=(), observations=tuple(state[r.id]),
                         by_hand=not set(state[r.id]) <= set(current[r.id])) for r in changed]  # observations added
        kb.embed_records(namespace, nodes)
        writer.commit(WriteBatch(nodes=nodes))


# -- reading ---------------------------------------------------------------------------------------------


def read_graph(
    kb: KnowledgeBase, *, offset: int = 0, limit: int = DEFAULT_PAGE_SIZE, namespace: str | None = None
) -> MemoryGraph:
    """A page of entities in creation order, with every relation that starts at them (so every relation is on
    exactly one page); `next_offset` is set when more entities remain.

    A page holds `limit` entities or fewer: it ends before the first entity that does not fit in an answer with
    its relations (memory_pages.py), or whose relations it did not read whole (it reads MAX_RELATIONS at most), so
    no relation is left behind. Only an entity that alone does not fit (or starts more than MAX_RELATIONS) comes
    alone on its page, cut (`relations_truncated`, `observations_truncated`, said in the note): the rest of it is
    on no page."""
    if offset < 0 or not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidInputError(f"offset must be 0 or more and limit between 1 and {MAX_PAGE_SIZE}")
    namespace = kb.resolve_namespace(namespace)
    kb.open()
    records = kb.store.list_nodes(namespace, offset=offset, limit=limit + 1)
    more = len(records) > limit
    records = records[:limit]
    # Outgoing edges only, by source then id: a hub's incoming edges (on their sources' pages) cannot crowd the
    # page's own out, and when the cap cuts, every entity before the source it cut at has all of its relations.
    edges = kb.store.edges_from([r.id for r in records], namespace, limit=MAX_RELATIONS + 1)
    unread = edges[MAX_RELATIONS].source_id if len(edges) > MAX_RELATIONS else None  # the first not read whole
    owned: dict[int, list[EdgeRecord]] = {}
    for edge in edges[:MAX_RELATIONS]:
        owned.setdefault(edge.source_id, []).append(edge)
    read = [r for r in records if unread is None or r.id <= unread]  # list_nodes is in id order
    entries = (entry for start in range(0, len(read), ENTRIES_READ)
               for entry in _entries(kb, read[start:start + ENTRIES_READ], owned, {unread}))
    page = fill(entries)
    graph = page.graph()
    graph.next_offset = offset + page.taken if more or page.taken < len(records) else None
    graph.note = note(page, first=offset, found=None, next_offset=graph.next_offset,
                      again="call read_graph with offset={next}")
    return graph


def search_nodes(
    kb: KnowledgeBase, query: str, *, offset: int = 0, namespace: str | None = None
) -> MemoryGraph:
    """Every entity the reference's match finds (the query inside the name, type or an observation, ignoring
    case), then the entities duckgraph's search finds relevant by meaning themselves (its anchors, above the
    relevance floor; not the neighbours it walks to, which are shown through the relations), with every relation
    that has an end among them, as in the reference: a page of them from `offset` (memory_pages.py).

    The substring matches come first, those the search ranks best first, the others in creation order; then the
    search's other anchors, best first. Nothing matches: nothing is returned. An empty query matches every
    entity, as in the reference; one longer than any observation may be is inside no entity and matches nothing.
    """
    if offset < 0:
        raise InvalidInputError("offset must be 0 or more")
    namespace = kb.resolve_namespace(namespace)
    kb.open()
    if len(query) > MAX_OBSERVATION_CHARS:  # names and types are shorter still: nothing can hold it
        return MemoryGraph(entities=[], relations=[])
    found = kb.search(query, namespace=namespace, max_passages=0) if query.strip() else None
    rank = {n.id: i for i, n in enumerate(found.nodes)} if found else {}
    matched = kb.store.nodes_containing(namespace, query, limit=MAX_PAGE_SIZE + 1)
    substring = sorted(matched[:MAX_PAGE_SIZE], key=lambda i: rank.get(i, len(rank)))  # stable: creation order
    ids = list(dict.fromkeys([*substring, *(n.id for n in found.anchors)] if found else substring))
    records = {r.id: r for r in kb.store.get_nodes(ids)}
    graph = _page(kb, [records[i] for i in ids if i in records], offset, namespace,
                  again="call search_nodes with the same query and offset={next}, or narrow the query")
    if len(matched) > MAX_PAGE_SIZE:
        graph.entities_truncated = True
        graph.note = " ".join(filter(None, [graph.note, (
            f"More than {MAX_PAGE_SIZE:,} entities contain the query, and only the first {MAX_PAGE_SIZE:,} of them "
            "are read: narrow the query to find the others.")]))
    return graph


def open_nodes(
    kb: KnowledgeBase, names: Sequence[str], *, offset: int = 0, namespace: str | None = None
) -> MemoryGraph:
    """The named entities (names that match nothing are skipped) and every relation with at least one end
    among them, as in the reference: a page of them from `offset`, in creation order (memory_pages.py). A name is
    matched as duckgraph stores it (case and spacing ignored, a unique alias) and, failing that, by the one entity
    it names up to punctuation and accents ("Dr Patel": "Dr. Patel"): a read, so a near miss finds what the caller
    meant rather than nothing. The note names what a name not found likely meant: the entities it is an alias of
    (several, so none was opened), or the stored names it is likely a spelling of (`not_found_message`)."""
    if offset < 0:
        raise InvalidInputError("offset must be 0 or more")
    namespace = kb.resolve_namespace(namespace)
    found, missing = kb.curation.resolve(names, namespace, loose=True)
    records = sorted({r.id: r for r in found.values()}.values(), key=lambda r: r.id)
    graph = _page(kb, records, offset, namespace,
                  again="call open_nodes with the same names and offset={next}, or open fewer names at a time")
    # A blank name (allowed, as in the reference) names nothing anyone meant.
    if missing := [name for name in dict.fromkeys(missing) if name.strip()]:
        skipped = kb.curation.not_found_message(missing, namespace, any_found=bool(found), memory_tools=True)
        graph.note = " ".join(filter(None, [graph.note, f"Skipped: {skipped}."]))
    return graph


def _page(kb: KnowledgeBase, records: Sequence[NodeRecord], offset: int, namespace: str, again: str) -> MemoryGraph:
    """The page of `records` (the entities an answer found, in its order) from `offset`, each with the relations
    that touch it."""
    page = fill(_touching_entries(kb, records[offset:], namespace))
    graph = page.graph()
    graph.next_offset = offset + page.taken if offset + page.taken < len(records) else None
    graph.note = note(page, first=offset, found=len(records), next_offset=graph.next_offset, again=again)
    if offset and offset >= len(records):
        graph.note = f"offset={offset} is past the {len(records):,} entities found: there is nothing more to read."
    return graph


def _touching_entries(kb: KnowledgeBase, records: Sequence[NodeRecord], namespace: str) -> Iterator[Entry]:
    """An entry for each of `records`, in order, with the relations that touch it and no entity before it; read
    ENTRIES_READ entities at a time, as the page takes them, or one at a time where hubs are among them."""
    shown: set[int] = set()
    for start in range(0, len(records), ENTRIES_READ):
        batch = records[start:start + ENTRIES_READ]
        ends = kb.store.neighbor_ends([r.id for r in batch], namespace, limit=MAX_RELATIONS + 1)
        if len(ends[0]) > MAX_RELATIONS and len(batch) > 1:  # not all read: each one's own, MAX_RELATIONS at most
            for record in batch:
                one = kb.store.neighbor_ends([record.id], namespace, limit=MAX_RELATIONS + 1)
                yield from _touching(kb, [record], one, shown)
        else:
            yield from _touching(kb, batch, ends, shown)


def _touching(kb: KnowledgeBase, batch: Sequence[NodeRecord], ends: Sequence[Any], shown: set[int]) -> Iterator[Entry]:
    """The entries of `batch`, given the ends of the relations that touch it (`GraphStore.neighbor_ends`): each
    relation not `shown` yet comes with the first entity of the batch it touches."""
    edge_ids, sources, targets = (a.tolist() for a in ends[:3])
    place = {r.id: i for i, r in enumerate(batch)}
    owner: dict[int, int] = {}
    for edge, source, target in zip(edge_ids[:MAX_RELATIONS], sources, targets):
        if edge not in shown:
            owner[edge] = batch[min(place[n] for n in (source, target) if n in place)].id
    shown.update(owner)
    owned: dict[int, list[EdgeRecord]] = {}
    for edge in kb.store.get_edges(owner):
        owned.setdefault(owner[edge.id], []).append(edge)
    unread = {batch[0].id} if len(edge_ids) > MAX_RELATIONS else set()  # a batch of one only: see above
    yield from _entries(kb, batch, owned, unread)


def _entries(
    kb: KnowledgeBase, records: Sequence[NodeRecord], owned: dict[int, list[EdgeRecord]], unread: set[int | None]
) -> Iterator[Entry]:
    """An entry for each record, in the reference's shape, with its relations among `owned` in creation order;
    those in `unread` have more than were read."""
    observations = kb.store.get_observations([r.id for r in records])
    edges = [e for r in records for e in owned.get(r.id, ())]
    names = {r.id: r.name for r in records}
    others = {i for e in edges for i in (e.source_id, e.target_id)} - names.keys()
    names.update({n.id: n.name for n in kb.store.get_nodes(others)})
    for record in records:
        mine = sorted(owned.get(record.id, ()), key=lambda e: e.id)
        yield Entry(entity=GraphEntity(name=record.name, entityType=record.type,
                                       observations=observations.get(record.id, []),
                                       description=record.description or None),
                    relations=[(e.id, memory_relation(e, names)) for e in mine
                               if e.source_id in names and e.target_id in names],
                    more_relations=record.id in unread)


def memory_relation(edge: EdgeRecord, names: dict[int, str]) -> GraphRelation:
    """An edge as {from, to, relationType}, with the type as the caller spelt it when it was recorded, and its
    description and properties when it has them."""
    original = edge.properties.get(ORIGINAL_TYPE)
    spelled = original if isinstance(original, str) and relation_type(original) == edge.type else edge.type
    return GraphRelation(from_=names[edge.source_id], to=names[edge.target_id], relationType=spelled,
                         description=edge.description or None, properties=edge_properties(edge.properties) or None)
