"""Use cases that read and curate the graph: open, update, merge and delete entities, observations, paths."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from difflib import SequenceMatcher
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.ingest import Progress, embed_in_batches
from duckgraph.core.domain.limits import (
    MAX_DESCRIPTION_CHARS,
    MAX_OBSERVATION_CHARS,
    MAX_OBSERVATIONS,
    over_limits,
)
from duckgraph.core.domain.moments import iso_utc, now, period, short
from duckgraph.core.domain.model import (
    DeletedSummary,
    EntitiesResult,
    EntityDetail,
    GraphPage,
    MergeResult,
    ObservationResult,
    PathResult,
    RelationRef,
    RelationsDeleted,
    RelationToDelete,
    ResultEdge,
    UpdatedEntity,
    edge_properties,
)
from duckgraph.core.domain.namespaces import check_namespace, empty_namespace_hint
from duckgraph.core.domain.node_merge import joined_sentences
from duckgraph.core.domain.observations import absent_observations, named_observations, new_observations
from duckgraph.core.domain.resolution import NameKeys, NameResolver, is_unknown_type, lookup_keys
from duckgraph.core.domain.texts import edge_text
from duckgraph.ports import (
    EdgeRecord,
    EdgeWrite,
    InvalidInputError,
    NodeRecord,
    NotFoundError,
    TimeFilter,
    WriteBatch,
    WriteSummary,
    entity_key,
    relation_type,
    terms,
)
from duckgraph.ports.names import dotless_i_key

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase, Writer
    from duckgraph.ports import GraphStore

MAX_PATH_HOPS = 4
#: Neighbours read per node and hop while looking for paths: hubs would otherwise make the search explode.
PATH_FANOUT = 200
#: Relations of one entity read while matching those named to end or delete (a hub's are many).
RELATIONS_READ = 100_000
#: Stored names suggested at most for a name get_entities found no entity for (see `GraphCuration.did_you_mean`).
SUGGESTIONS = 3
#: Names not found that an error or hint names, and looks for suggestions for (`GraphCuration.not_found_message`).
SUGGESTED_NAMES = 10
#: Stored periods, or relations between two entities, that a hint of delete_relations or end_relations lists.
LISTED_IN_HINT = 5
#: Entities keyword search reads per name not found, among which suggestions are looked for.
SUGGESTION_CANDIDATES = 20
#: Passages keyword search reads after delete_entities, among which those that still name a deleted entity are
#: looked for: at most what the store reads by point lookups (a larger list scans the table of passages).
NAMING_CANDIDATES = 50
#: Letters a one-word name must have to be suggested the names it begins a word of ("UserRepo": "UserRepository"),
#: and each half of one looked up by its halves for a typo (shorter ones would name half the graph).
WORD_PREFIX = 4
#: How alike (difflib's ratio, 0 to 1) a stored name must be to one not found to be suggested: "postgres 17
#: migration" and "postgresql 17 migration" are 0.95 alike; "payments api" and "payments team" 0.8.
NEAR_SPELLING = 0.85
#: Every period of a relation: as of the end of time with history, nothing has not begun and all that ended is kept.
EVERY_PERIOD = TimeFilter(as_of=datetime.max, history=True)


def not_ended() -> TimeFilter:
    """The relations that hold now or later: the one that holds now and those that have not begun (planned)."""
    return TimeFilter(after=now())


class GraphCuration:
    """Reading and editing the graph by entity name. Every change is one transaction."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb

    @property
    def store(self):
        return self.kb.store

    # -- reading ---------------------------------------------------------------------------------------

    def resolve(
        self, names: Sequence[str], namespace: str, *, loose: bool = False
    ) -> tuple[dict[str, NodeRecord], list[str]]:
        """Nodes by name (exact key first, else an alias only one node has, else the one entity whose name or alias
        is the name up to the case of the Turkish i's, `dotless_i_key`: "Istanbul" for "İstanbul"), and the names
        not found. `loose`, for reads only, adds a last resort: the one entity whose name or alias is the name up to
        accents and punctuation ("Dr Patel": "Dr. Patel"); writes never use it, so nothing is written to an entity
        by a looser rule than the one that names it."""
        namespace = check_namespace(namespace)  # every use case by name comes through here, before it writes
        self.kb.open()
        keys = NameKeys()
        # A name of another case of an i ("istanbul") has another key but the same loose form: looked up by it too.
        wanted = lookup_keys(names, keys) if loose else {keys.key(n) for n in names} | {
            keys.loose(n) for n in names if "i" in keys.key(n) or "ı" in keys.key(n)}
        records = self.store.find_nodes(namespace, [k for k in wanted if k])
        near = NameResolver(keys=keys)
        if loose:
            near.add(records)
        by_key = {r.key: r for r in records}
        by_alias: dict[str, list[NodeRecord]] = {}
        by_case: dict[str, list[NodeRecord]] = {}
        for record in records:
            by_case.setdefault(dotless_i_key(record.key), []).append(record)
            for alias in record.aliases:
                by_alias.setdefault(entity_key(alias), []).append(record)
                by_case.setdefault(dotless_i_key(entity_key(alias)), []).append(record)
        found: dict[str, NodeRecord] = {}
        missing: list[str] = []
        for name in names:
            key = keys.key(name)
            if key in by_key:
                found[name] = by_key[key]
            elif len(by_alias.get(key, [])) == 1:
                found[name] = by_alias[key][0]
            elif len(cased := {r.id: r for r in by_case.get(dotless_i_key(key), [])}) == 1:
                found[name] = next(iter(cased.values()))
            elif loose and len(matches := near.candidates(name)) == 1:
                found[name] = matches[0]
            else:
                missing.append(name)
        return found, missing

    def did_you_mean(self, names: Sequence[str], namespace: str) -> dict[str, list[str]]:
        """For names that matched no entity, the stored names each most likely meant (at most `SUGGESTIONS`, names
        with none left out): those it equals up to accents and punctuation or is an alias of (resolution's rule 2,
        any type), then, among the entities keyword search (and, for a one-word name, substring search) finds for
        it, those whose name or last path segment starts with its words ("Priya": "Priya Raman", "deploy.sh":
        "./scripts/deploy.sh") or, for one word of `WORD_PREFIX` letters or more, with that word ("UserRepo":
        "UserRepository"), and those spelt nearly as it is ("postgres 17 migration": "PostgreSQL 17 migration",
        "Hohenzolern": "Hohenzollern")."""
        namespace = check_namespace(namespace)
        self.kb.open()
        keys = NameKeys()
        resolver = NameResolver(keys=keys)
        resolver.add(self.store.find_nodes(namespace, lookup_keys(names, keys)))
        suggestions: dict[str, list[str]] = {}
        for name in dict.fromkeys(names):
            given = keys.loose(name)
            ranked = [i for i, _ in self.store.keyword_search("node", name, SUGGESTION_CANDIDATES, namespace)]
            if word := len(given) >= WORD_PREFIX and " " not in given:
                # One word shares no keyword with a longer word it begins ("userrepo", "userrepository") nor with
                # itself misspelt: looked up as a substring, and by its halves, one of which a typo leaves whole.
                half = len(given) // 2
                parts = [name, given[:half], given[half + 1:]] if half >= WORD_PREFIX else [name]
                ranked += [i for part in parts
                           for i in self.store.nodes_containing(namespace, part, limit=SUGGESTION_CANDIDATES)]
            ranked = list(dict.fromkeys(ranked))
            found = {n.id: n for n in self.store.get_nodes(ranked)}
            nearby = [found[i].name for i in ranked if i in found] if given else []
            starting = [n for n in nearby if self._begins(given, n, keys, word=word)]
            close = [n for n in nearby if SequenceMatcher(None, given, keys.loose(n)).ratio() >= NEAR_SPELLING]
            meant = [r.name for r in resolver.candidates(name)] + starting + close
            if meant := list(dict.fromkeys(meant))[:SUGGESTIONS]:
                suggestions[name] = meant
        return suggestions

    @staticmethod
    def _begins(given: str, name: str, keys: NameKeys, *, word: bool) -> bool:
        """Whether stored `name`, or its last path segment ("deploy.sh" of "./scripts/deploy.sh"), starts with the
        words of `given` (a loose form), or, when `given` is one `word` (of `WORD_PREFIX` letters or more), with it."""
        return any(part == given or part.startswith(given if word else given + " ")
                   for part in {keys.loose(name), keys.loose(name.replace("\\", "/").rsplit("/", 1)[-1])})

    def require(self, names: Sequence[str], namespace: str, *, loose: bool = False) -> dict[str, NodeRecord]:
        """`resolve`'s nodes, or a NotFoundError naming the names not found and what they likely meant
        (`did_you_mean`)."""
        found, missing = self.resolve(names, namespace, loose=loose)
        if missing:
            raise NotFoundError(self.not_found_message(missing, namespace, any_found=bool(found)))
        return found

    def not_found_message(self, missing: Sequence[str], namespace: str, *, any_found: bool = False,
                          memory_tools: bool = False) -> str:
        """"no entity named ..." for `missing` (names `resolve` found nothing for), and what to give instead: the
        exact name of one of the entities a name is an alias of, or the names it likely meant (`did_you_mean`), or
        that the namespace holds nothing. What update_entity and merge_entities refuse with, and the delete and
        end tools' hints say (`any_found`: some other name of the call was found, so the namespace holds some;
        `memory_tools`: said to the reference memory server's tools, which find names with search_nodes)."""
        missing = list(dict.fromkeys(missing))
        # Suggestions cost a keyword search each: a call naming hundreds of absent names gets them for the first.
        shown = missing[:SUGGESTED_NAMES]
        more = f" and {len(missing) - len(shown)} more" if len(missing) > len(shown) else ""
        named = f"no entity named {', '.join(repr(m) for m in shown)}{more}"
        # In a namespace that holds nothing (a misspelt one), searching there would not help: say so.
        if not any_found and (empty := empty_namespace_hint(self.kb, namespace, memory_tools=memory_tools)):
            return f"{named}. {empty}"
        owners = self.alias_owners(shown, namespace)
        advice = [f"{'it' if len(missing) == 1 else repr(m)} is an alias of several entities "
                  f"({', '.join(map(repr, owners[m]))}): use the exact name of one" for m in shown if m in owners]
        rest = [m for m in shown if m not in owners]
        meant = self.did_you_mean(rest, namespace) if rest else {}
        said = "; ".join(" or ".join(map(repr, meant[m])) + (f" for {m!r}" if len(missing) > 1 else "")
                         for m in rest if m in meant)
        look_up = "call search_nodes" if memory_tools else "search"
        if said:
            advice.append(f"did you mean {said}? Otherwise {look_up} first to find the exact name")
        elif rest or more:
            advice.append(f"{look_up} first to find the exact name")
        return "; ".join([named, *advice])

    def alias_owners(self, names: Sequence[str], namespace: str) -> dict[str, list[str]]:
        """Of `names`, those that are an alias of several entities (so none is meant), with those entities' names."""
        keys = NameKeys()
        records = self.store.find_nodes(namespace, {keys.key(n) for n in names})
        owners: dict[str, list[str]] = {}
        for name in names:
            key = keys.key(name)
            having = sorted({r.name for r in records if key in {entity_key(a) for a in r.aliases}})
            if len(having) > 1:
                owners[name] = having
        return owners

    def aliased_elsewhere(self, found: dict[str, NodeRecord], namespace: str) -> dict[str, list[NodeRecord]]:
        """Of the names `resolve` found by an entity's own name, those that are an alias of other entities too, with
        those entities: the name reached the entity it names (a name comes first), where the caller may have meant
        another (`aliased_elsewhere_note`)."""
        keys = NameKeys()
        named = {name: record for name, record in found.items() if keys.key(name) == record.key}
        if not named:
            return {}
        records = self.store.find_nodes(namespace, {keys.key(n) for n in named})
        others: dict[str, list[NodeRecord]] = {}
        for name, record in named.items():
            key = keys.key(name)
            if having := [r for r in records if r.id != record.id and key in {entity_key(a) for a in r.aliases}]:
                others[name] = having
        return others

    def get_entities(
        self, names: Sequence[str], namespace: str, *, max_edges: int = 50, relations_offset: int = 0
    ) -> tuple[list[EntityDetail], list[str]]:
        """The entities named, each with `max_edges` of its relations (strongest first) after `relations_offset`."""
        found, missing = self.resolve(names, namespace)
        records = list({r.id: r for r in found.values()}.values())
        observations = self.store.get_observations([r.id for r in records])
        details = []
        for record in records:
            # Every period: what was true before, and a planned fact that has not begun, are part of what is known
            # (and can only be ended or deleted once seen).
            edges = self.store.neighbors([record.id], namespace, as_of=EVERY_PERIOD, limit=max_edges + 1,
                                         offset=relations_offset)
            more = len(edges) > max_edges
            details.append(EntityDetail(
                id=record.id, name=record.name, type=record.type, description=record.description,
                aliases=list(record.aliases), properties=record.properties,
                observations=observations.get(record.id, []), relations=self._named_edges(edges[:max_edges]),
                relations_truncated=more, next_relations_offset=relations_offset + max_edges if more else None,
            ))
        return details, missing

    def read_entities(
        self, names: Sequence[str], namespace: str, *, relations_offset: int = 0
    ) -> EntitiesResult:
        """get_entities' answer: the entities, the names not found with what they likely meant, and a hint when the
        namespace holds nothing or `relations_offset` is past an entity's relations (an empty page read alone
        says "no relations")."""
        details, missing = self.get_entities(names, namespace, relations_offset=relations_offset)
        notes = [empty_namespace_hint(self.kb, namespace)] if missing and not details else []
        for detail in details if relations_offset else ():
            if not detail.relations:
                total = len(self.store.neighbors([detail.id], namespace, as_of=EVERY_PERIOD, limit=relations_offset))
                notes.append(f"{detail.name} has no relations" if not total else
                             f"{detail.name} has {total} relation{'s' if total > 1 else ''}: "
                             f"relations_offset={relations_offset} is past {'them' if total > 1 else 'it'}")
        return EntitiesResult(entities=details, not_found=missing,
                              did_you_mean=self.did_you_mean(missing, namespace) if missing else {},
                              hint="; ".join(filter(None, notes)) or None)

    def page(self, namespace: str, *, offset: int, limit: int) -> GraphPage:
        """A page of entities with the relations among them; `next_offset` is None on the last page."""
        namespace = check_namespace(namespace)
        self.kb.open()
        records = self.store.list_nodes(namespace, offset=offset, limit=limit + 1)
        more = len(records) > limit
        records = records[:limit]
        observations = self.store.get_observations([r.id for r in records])
        edges = self.store.edges_among([r.id for r in records], namespace)
        names = {r.id: r.name for r in records}
        return GraphPage(
            entities=[EntityDetail(id=r.id, name=r.name, type=r.type, description=r.description,
                                   aliases=list(r.aliases), properties=r.properties,
                                   observations=observations.get(r.id, []), relations=[]) for r in records],
            relations=[_result_edge(e, names) for e in edges],
            offset=offset,
            next_offset=offset + limit if more else None,
        )

    def relations_not_ended(
        self, source: NodeRecord, target: NodeRecord, type: str, namespace: str
    ) -> list[EdgeRecord]:
        """The stored relations `source -type-> target` that have not ended (see `not_ended`): what
        delete_relations and end_relations name by ends and type."""
        return self._relations(source, target, type, namespace, not_ended())

    def _relations(self, source: NodeRecord, target: NodeRecord, type: str, namespace: str,
                   when: TimeFilter) -> list[EdgeRecord]:
        kind = relation_type(type)
        return [e for e in self.store.neighbors([source.id], namespace, as_of=when, limit=RELATIONS_READ)
                if e.source_id == source.id and e.target_id == target.id and e.type == kind]

    def _named_edges(self, edges: Sequence[EdgeRecord]) -> list[ResultEdge]:
        names = {n.id: n.name for n in self.store.get_nodes({i for e in edges for i in (e.source_id, e.target_id)})}
        return [_result_edge(e, names) for e in edges if e.source_id in names and e.target_id in names]

    # -- editing ---------------------------------------------------------------------------------------

    def update_entity(
        self,
        name: str,
        namespace: str,
        *,
        new_name: str | None = None,
        type: str | None = None,
        description: str | None = None,
        aliases: Sequence[str] | None = None,
        properties: dict[str, Any] | None = None,
        add_observations: Sequence[str] = (),
        remove_observations: Sequence[str] = (),
        expected_fingerprint: str | None = None,
    ) -> UpdatedEntity:
        """Change an entity in place; a rename keeps every edge and the old name as an alias. Observations to
        remove must be the entity's (else nothing changes and the error lists them). `expected_fingerprint`: the
        entity's `entity_fingerprint` when the caller read it; checked under the write lock, in the same step as
        the commit, so a change another client wrote since is never replaced (nothing changes, the error says so).
        A name that is another entity's alias too names the entity whose name it is: the answer's `hint` says so."""
        with self.kb.writing() as writer:
            found = self.require([name], namespace)
            record = found[name]
            elsewhere = self.aliased_elsewhere(found, namespace).get(name)
            updated = replace(record, source_ids=(), source_chunk_ids=())
            current = self.store.get_observations([record.id]).get(record.id, [])
            if expected_fingerprint is not None and entity_fingerprint(record, current) != expected_fingerprint:
                raise InvalidInputError(
                    f"{record.name!r} changed since it was read (another client wrote to it); nothing was changed. "
                    "Read it again and make the change to what is stored now")
            if add_observations or remove_observations:
                absent = absent_observations(current, remove_observations)
                if absent:
                    raise InvalidInputError(
                        f"{record.name!r} has no observation {', '.join(repr(t) for t in absent)}; nothing was "
                        "changed. get_entities lists its observations exactly as stored"
                    )
                final, _, _ = _observations_after(record.name, current, add_observations, remove_observations)
                if final != current:
                    updated.observations = tuple(final)
            if new_name is not None and entity_key(new_name) != record.key:
                clash, _ = self.resolve([new_name], namespace)
                if new_name in clash and clash[new_name].key == entity_key(new_name):
                    raise InvalidInputError(
                        f"an entity named {clash[new_name].name!r} exists already; to combine the two use "
                        f"merge_entities(sources=[{record.name!r}], target={clash[new_name].name!r})"
                    )
                updated.aliases = _unique([*record.aliases, record.name], exclude=new_name)
                updated.key, updated.name = entity_key(new_name), new_name
            elif new_name is not None:
                updated.name = new_name  # only the spelling changes
            if type is not None:
                updated.type = type
            if description is not None:
                updated.description = description[:MAX_DESCRIPTION_CHARS]
            if aliases is not None:
                updated.aliases = _unique(aliases, exclude=updated.name)
            if properties is not None:
                updated.properties = properties
            self._refuse_names_of_others(record, updated, namespace)
            updated.by_hand = True  # curated: it stays when documents it was extracted from go
            # Edges' vectors name their ends, nothing else of them: rewriting them for another change would list
            # every fact of the entity as updated in recent_changes.
            renamed = [record.id] if updated.name != record.name else []
            self._commit_with_vectors(writer, WriteBatch(nodes=[updated]), namespace, renamed=renamed)
        detail = self.get_entities([updated.name], namespace)[0][0]
        hint = aliased_elsewhere_note(name, record, elsewhere, "the change was made to", "give its exact name, and "
                                      f"undo this change with update_entity on {updated.name!r}") if elsewhere else None
        return UpdatedEntity(**detail.model_dump(), hint=hint)

    def _refuse_names_of_others(self, record: NodeRecord, updated: NodeRecord, namespace: str) -> None:
        """Refuse a name or alias `updated` gives `record` that another entity has as its name or alias, as a rename
        onto another's name is refused: a lookup by it would still find the other entity (a name comes first), or
        find none once two entities share it as an alias, breaking calls that reached the other one by it. Those
        `record` has already are not checked again (add_knowledge_graph may have stored a shared alias)."""
        own = {record.key, *(entity_key(a) for a in record.aliases)}
        new = {entity_key(n): n for n in (updated.name, *updated.aliases) if entity_key(n) not in own}
        if not new:
            return
        others = [r for r in self.store.find_nodes(namespace, new) if r.id != record.id]
        problems = []
        for key, given in new.items():
            named = [r.name for r in others if r.key == key]
            aliased = sorted(r.name for r in others if key in {entity_key(a) for a in r.aliases})
            if named:
                spelt = "" if named[0] == given else f" ({named[0]!r})"
                problems.append(f"{given!r} is the name of another entity{spelt}: if the two are one, use "
                                f"merge_entities(sources=[{named[0]!r}], target={record.name!r})")
            elif len(aliased) == 1:
                problems.append(f"{given!r} is an alias of {aliased[0]!r} already: if the two are one, use "
                                f"merge_entities(sources=[{aliased[0]!r}], target={record.name!r}), else remove it "
                                f"from the aliases of {aliased[0]!r} first (update_entity)")
            elif aliased:
                problems.append(f"{given!r} is an alias of {' and '.join(map(repr, aliased))} already: if "
                                f"{record.name!r} is one of them, merge the two with merge_entities, else remove it "
                                "from their aliases first (update_entity)")
        if problems:
            raise InvalidInputError(f"{'; '.join(problems)}; nothing was changed (a name or an alias names one "
                                    "entity only)")

    def merge_entities(self, sources: Sequence[str], target: str, namespace: str, *,
                       progress: Progress | None = None) -> MergeResult:
        """Fold `sources` into `target`: edges, provenance, observations, names (as aliases) and properties.
        `progress` hears of the vectors of the moved relations being computed again (a hub's thousands take
        minutes with a local model)."""
        with self.kb.writing() as writer:
            into, merged_from = self.merging(sources, target, namespace)
            observations = self.store.get_observations([into.id, *(n.id for n in merged_from)])
            result = replace(into, source_ids=(), source_chunk_ids=())
            # A target of type 'unknown' (a relation's placeholder end) takes the first source's real type: what
            # the merge knows of the entity, where 'unknown' says nothing.
            typed = (next((o for o in merged_from if not is_unknown_type(o.type)), None)
                     if is_unknown_type(into.type) else None)
            if typed is not None:
                result.type = typed.type
            description = into.description
            for other in merged_from:
                if other.description and other.description.casefold() not in description.casefold():
                    description = joined_sentences(description, other.description)
            result.description = description
            result.aliases = _unique(
                [*into.aliases, *(n for other in merged_from for n in (other.name, *other.aliases))], exclude=into.name
            )
            result.properties, differing = merged_properties(into, merged_from)
            result.observations = tuple(_unique(
                [*observations.get(into.id, []), *(t for o in merged_from for t in observations.get(o.id, [])),
                 *(_property_observation(o.name, k, v) for o, k, v in differing)]
            ))
            if over := over_limits(result.description, result.properties, len(result.observations)):
                raise InvalidInputError(
                    f"merged, {into.name!r} would have {over}: shorten what the entities hold with update_entity "
                    "first (description, properties, remove_observations); nothing was merged")
            for o, k, v in differing:
                if len(kept := _property_observation(o.name, k, v)) > MAX_OBSERVATION_CHARS:
                    raise InvalidInputError(
                        f"{o.name!r}'s {k} differs from {into.name!r}'s and would be kept as an observation of "
                        f"{len(kept)} characters (the limit is {MAX_OBSERVATION_CHARS}): shorten or remove it with "
                        "update_entity first; nothing was merged")
            batch = WriteBatch(nodes=[result], merges=[(into.id, [n.id for n in merged_from])])
            # The edges that move to the target name a source: only they need new vectors (the target's own
            # edges name the same ends as before; rewriting them would list each as updated in recent_changes).
            moved = {e.id for e in self.store.neighbors([n.id for n in merged_from], namespace, as_of=not_ended(),
                                                         limit=RELATIONS_READ)}
            # Relations between the entities merged (any period) become self-loops: the store deletes them (and
            # records them as deleted facts); the rest of what it deletes are duplicates joined into one.
            ids = {into.id, *(n.id for n in merged_from)}
            every = self.store.neighbors([n.id for n in merged_from], namespace, as_of=EVERY_PERIOD,
                                         limit=RELATIONS_READ)
            loops = [e for e in every if e.source_id in ids and e.target_id in ids]
            names = {into.id: into.name, **{n.id: n.name for n in merged_from}}
            # The moved relations' new vectors are derived data: recent_changes lists the merge ("entity merged",
            # with the count of relations that moved), not each of them as updated.
            summary = self._commit_with_vectors(writer, batch, namespace, renamed=[into.id], only=moved,
                                                logged=False, progress=progress,
                                                message=f"computing the vectors of the relations moved to {into.name}")
        hints = [f"{o.name}'s {k}: {_value(v)} was not kept as a property ({into.name!r} keeps "
                 f"{_value(result.properties[k])}); it is an observation of {into.name!r} now: "
                 "update_entity changes either" for o, k, v in differing]
        if typed is not None:
            hints.append(f"{into.name!r} had type {into.type!r}: it takes {result.type!r} from {typed.name!r}")
        if len(every) > len(loops):
            count = len(every) - len(loops)
            hints.append(f"{count:,} relation{'s' if count > 1 else ''} moved to {into.name!r}, "
                         f"{'their' if count > 1 else 'its'} vectors computed again to name it; recent_changes lists "
                         "the merge with this count, not each relation")
        if loops:
            listed = [f"{names[e.source_id]} -{e.type}-> {names[e.target_id]}" for e in loops[:LISTED_IN_HINT]]
            hints.append(
                f"{len(loops)} relation{'s' if len(loops) > 1 else ''} between the merged entities "
                f"({', '.join(listed)}{', ...' if len(loops) > LISTED_IN_HINT else ''}) would join {into.name!r} "
                "to itself: deleted "
                f"(recent_changes lists {'them' if len(loops) > 1 else 'it'})")
        return MergeResult(
            target=into.name, merged=[n.name for n in merged_from], aliases=list(result.aliases),
            edges_collapsed=summary.edges_deleted - len(loops), edges_deleted=len(loops), hints=hints,
        )

    def merging(self, sources: Sequence[str], target: str, namespace: str) -> tuple[NodeRecord, list[NodeRecord]]:
        """The entity `target` names and the others `sources` name, each once: what merge_entities merges (a
        NotFoundError for names of no entity, an InvalidInputError when all name the target)."""
        if not sources:
            raise InvalidInputError("name at least one source entity to merge into the target")
        found = self.require([*sources, target], namespace)
        into = found[target]
        merged_from = list({found[s].id: found[s] for s in sources if found[s].id != into.id}.values())
        if not merged_from:
            raise InvalidInputError(f"the sources and the target are all the entity {into.name!r}")
        return into, merged_from

    def delete_entities(self, names: Sequence[str], namespace: str, *, memory_tools: bool = False) -> DeletedSummary:
        """Delete exactly the named entities (by name: case, spacing and the Turkish i's aside) with their edges.
        A name that is only an alias of an entity (a merged duplicate's old name, say) is refused, the whole call
        with it: deleting the entity it now names would destroy what the merge kept. `memory_tools`: asked in the
        memory tools' words (entityNames), so the advice names only what they can do (search_nodes, no
        update_entity); the words tell, since a memory client sharing a file is served by a server of every tool."""
        with self.kb.writing(vectors=False) as writer:
            found, missing = self.resolve(names, namespace)
            _refuse_aliases(found, memory_tools=memory_tools)
            ids = sorted({r.id for r in found.values()})
            summary = writer.commit(WriteBatch(delete_nodes=ids)) if ids else None
        hints = [self.not_found_message(missing, namespace, any_found=bool(found), memory_tools=memory_tools)
                 ] if missing else []
        hints += [aliased_elsewhere_note(name, found[name], others, "what was deleted is",
                                         "it was not deleted: give its exact name to delete it")
                  for name, others in self.aliased_elsewhere(found, namespace).items()]
        return DeletedSummary(
            deleted=sorted({r.name for r in found.values()}), not_found=missing,
            edges_deleted=summary.edges_deleted if summary else 0,
            hints=hints + self._documents_naming({r.id: r for r in found.values()}.values(), namespace),
        )

    def _documents_naming(self, deleted: Iterable[NodeRecord], namespace: str) -> list[str]:
        """A hint naming the stored documents whose passages still name one of the `deleted` entities (every word
        of its name or of an alias), with how to delete them: deleting an entity leaves its documents, which search
        still shows and an extractor would read it from again, and the default tool set cannot delete them. One
        keyword lookup of all the names together, among whose best passages the naming ones are looked for."""
        names = {n: entity.name for entity in deleted for n in (entity.name, *entity.aliases)}
        words = [(set(terms(n)), name) for n, name in names.items()]
        words = [(w, name) for w, name in words if w]
        if not words:
            return []
        found = [i for i, _ in self.store.keyword_search("chunk", " ".join(names), NAMING_CANDIDATES, namespace)]
        texts = {c.id: c for c in self.store.get_chunks(found)}
        documents: dict[str, None] = {}
        named: dict[str, None] = {}
        for chunk in (texts[i] for i in found if i in texts):
            held = set(terms(chunk.text))
            if hits := [name for w, name in words if w <= held]:
                documents[chunk.document_id] = None
                named.update(dict.fromkeys(hits))
        if not documents:
            return []
        ids, count = list(documents), len(documents)
        shown = ", ".join(map(repr, ids[:LISTED_IN_HINT])) + (", ..." if count > LISTED_IN_HINT else "")
        at_least = "at least " if len(found) == NAMING_CANDIDATES else ""  # the lookup read no further
        them = "them" if count > 1 else "it"
        return [f"{at_least}{count} stored document{'s' if count > 1 else ''} still {'have' if count > 1 else 'has'} "
                f"passages naming {' and '.join(map(repr, named))} ({shown}): search still finds {them}, and an "
                f"extractor could read the entity from {them} again. To forget it there too, delete {them}: "
                "delete_documents (in the `all` tool set), `duckgraph documents delete ID...`, or the web UI "
                "(`duckgraph ui`)"]

    def delete_relations(self, relations: Sequence[RelationRef], namespace: str) -> RelationsDeleted:
        """Delete the named relations that hold now or have not begun (as stored: names and type), or, given its
        `valid_from`, exactly the stored period that starts then (an ended one too: a mistaken past period);
        `valid_from` given as null names the period with no known start. Report the ones that match nothing (as
        given), with hints (`relation_hints`). A plain RelationRef names no period."""
        with self.kb.writing(vectors=False) as writer:
            found, _ = self.resolve([n for r in relations for n in (r.source, r.target)], namespace)
            doomed: dict[int, RelationRef] = {}
            missing: list[RelationRef] = []
            for relation in relations:
                source, target = found.get(relation.source), found.get(relation.target)
                if source is None or target is None:
                    missing += [] if relation in missing else [relation]
                    continue
                named, start = _named_start(relation)
                matches = ([e for e in self._relations(source, target, relation.type, namespace, EVERY_PERIOD)
                            if e.valid_from == start] if named
                           else self.relations_not_ended(source, target, relation.type, namespace))
                for edge in matches:
                    doomed[edge.id] = RelationRef(source=source.name, target=target.name, type=edge.type)
                if not matches and relation not in missing:
                    missing.append(relation)
            if doomed:
                writer.commit(WriteBatch(delete_edges=sorted(doomed)))
        return RelationsDeleted(deleted=list(doomed.values()), not_found=missing,
                                hints=self.relation_hints(missing, namespace))

    def relation_hints(self, relations: Sequence[RelationRef], namespace: str, *, ending: bool = False) -> list[str]:
        """Why each of `relations` (as delete_relations, or with `ending` end_relations, was given them) matched
        nothing, and what to send instead: an end no entity is named (`not_found_message`); the relation's stored
        periods when none holds now or later (or none starts at the `valid_from` named), each with the valid_from
        that names it; the relations stored between its two ends when none has its type (a misspelt type)."""
        if not relations:
            return []
        found, absent = self.resolve([n for r in relations for n in (r.source, r.target)], namespace)
        hints = [self.not_found_message(absent, namespace, any_found=bool(found))] if absent else []
        seen: set[tuple[str, bool, datetime | None]] = set()
        for relation in relations:
            source, target = found.get(relation.source), found.get(relation.target)
            named, start = _named_start(relation)
            label = relation.label()
            if source is None or target is None or (label, named, start) in seen:
                continue
            seen.add((label, named, start))
            every = sorted(self._relations(source, target, relation.type, namespace, EVERY_PERIOD),
                           key=lambda e: (e.valid_from is not None, e.valid_from or datetime.min))
            if every:
                periods = ", ".join(period(e.valid_from, e.valid_until) or "with no dates"
                                    for e in every[:LISTED_IN_HINT]) + (", ..." if len(every) > LISTED_IN_HINT else "")
                options = " or ".join(f"{_sent(e.valid_from)} (the period "
                                      f"{period(e.valid_from, e.valid_until) or 'with no dates'})"
                                      for e in every[:LISTED_IN_HINT])
                if ending:
                    hints.append(
                        f"{label}: no stored period holds now or later (its periods: {periods}): it has ended. To "
                        f"change when it ended, delete that period with delete_relations, giving this relation "
                        f"with valid_from {options}, then add it again with add_knowledge_graph with that "
                        "valid_from (none for null) and the valid_until you mean")
                else:
                    hints.append(
                        f"{label}: no stored period {'starts then' if named else 'holds now or later'} (its "
                        f"periods: {periods}); to delete one, give this relation with valid_from {options}")
                continue
            between = [e for e in self.store.neighbors([source.id], namespace, as_of=EVERY_PERIOD,
                                                       limit=RELATIONS_READ)
                       if {e.source_id, e.target_id} == {source.id, target.id}]
            names = {source.id: source.name, target.id: target.name}
            stored = list(dict.fromkeys(f"{names[e.source_id]} -{e.type}-> {names[e.target_id]}" for e in between))
            if stored:
                more = ", ..." if len(stored) > LISTED_IN_HINT else ""
                hints.append(f"{label}: no relation of type {relation_type(relation.type)} joins them; stored between "
                             f"them: {', '.join(stored[:LISTED_IN_HINT])}{more}")
            else:
                hints.append(f"{label}: no relation joins {source.name} and {target.name}; get_entities lists "
                             "each one's relations")
        return hints

    def add_observations(self, name: str, texts: Sequence[str], namespace: str) -> ObservationResult:
        return self._change_observations(name, namespace, add=texts)

    def delete_observations(self, name: str, texts: Sequence[str], namespace: str) -> ObservationResult:
        return self._change_observations(name, namespace, remove=texts)

    def _change_observations(
        self, name: str, namespace: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> ObservationResult:
        with self.kb.writing() as writer:
            record = self.require([name], namespace)[name]
            current = self.store.get_observations([record.id]).get(record.id, [])
            final, added, removed = _observations_after(record.name, current, add, remove)
            if final != current:
                updated = replace(record, source_ids=(), source_chunk_ids=(), observations=tuple(final),
                                  by_hand=bool(added))
                self._commit_with_vectors(writer, WriteBatch(nodes=[updated]), namespace)
        return ObservationResult(entity=record.name, added=added, removed=removed)

    def _commit_with_vectors(
        self, writer: Writer, batch: WriteBatch, namespace: str, renamed: Sequence[int] = (),
        only: set[int] | None = None, *, logged: bool = True, progress: Progress | None = None,
        message: str = "computing the vectors of the renamed entity's relations",
    ) -> WriteSummary:
        """Commit with fresh vectors for the batch's nodes and, for the `renamed` (or merged into) nodes, for their
        edges (`only` those ids, when given; see `_refresh_edge_vectors` for `logged`, `progress`, `message`)."""
        self.kb.embed_records(namespace, batch.nodes)
        summary = writer.commit(batch)
        if renamed:
            self._refresh_edge_vectors(writer, list(renamed), namespace, only, logged=logged, progress=progress,
                                       message=message)
        return summary

    def _refresh_edge_vectors(self, writer: Writer, node_ids: list[int], namespace: str,
                              only: set[int] | None = None, *, logged: bool = True,
                              progress: Progress | None = None,
                              message: str = "computing the vectors of the renamed entity's relations") -> None:
        """Edges are embedded as sentences naming both ends: re-embed those of renamed or merged nodes that have not
        ended (of `only`, when given), each written with its own period so the write finds exactly its row.
        `logged`: the edges count as changed (their updated_at moves, recent_changes lists each as updated), as a
        rename's do; else only their vectors are written (a merge, whose own entry says what moved). `progress`
        hears of each embedder call, with `message`."""
        edges = [e for e in self.store.neighbors(node_ids, namespace, as_of=not_ended(), limit=RELATIONS_READ)
                 if only is None or e.id in only]
        if not edges:
            return
        nodes = {n.id: n for n in self.store.get_nodes({i for e in edges for i in (e.source_id, e.target_id)})}
        writes = [
            EdgeWrite(namespace=namespace, source_key=nodes[e.source_id].key, target_key=nodes[e.target_id].key,
                      type=e.type, description=e.description, weight=e.weight, properties=e.properties,
                      valid_from=e.valid_from, valid_until=e.valid_until)
            for e in edges if e.source_id in nodes and e.target_id in nodes
        ]
        names = {n.key: n.name for n in nodes.values()}
        # Embedded here rather than by `kb.embed_records` so that each embedder call is reported: a hub's thousands
        # of relations take minutes, and a client that hears nothing meanwhile gives up.
        embed_in_batches(self.kb.embedder, [(w, edge_text(w, names)) for w in writes], progress, message)
        # Without `renamed`, a row written again with its values as stored keeps its updated_at: only its vector
        # is replaced, so recent_changes does not list it.
        writer.commit(WriteBatch(edges=writes, renamed=node_ids if logged else []))

    # -- paths -----------------------------------------------------------------------------------------

    def find_paths(
        self, source: str, target: str, namespace: str, *, max_hops: int = 3, max_paths: int = 5
    ) -> PathResult:
        """The shortest chains of relations (either direction) from `source` to `target`."""
        if not 1 <= max_hops <= MAX_PATH_HOPS:
            raise InvalidInputError(f"max_hops must be between 1 and {MAX_PATH_HOPS}")
        found = self.require([source, target], namespace, loose=True)  # a read: names as open_nodes takes them
        start, goal = found[source].id, found[target].id
        if start == goal:
            raise InvalidInputError(f"{source!r} and {target!r} are the same entity")
        # Breadth-first from both ends, one hop of the smaller frontier at a time, until they meet. A read takes at
        # most PATH_FANOUT relations per node, strongest first, so a hub's list is cut; meeting in the middle finds a
        # path through a hub from the two ends' own neighbours, without reading the hub's list.
        ahead, back = _Reach(start), _Reach(goal)
        meeting: list[int] = []
        while not meeting and ahead.frontier and back.frontier and ahead.depth + back.depth < max_hops:
            forward = (len(ahead.frontier), ahead.depth) <= (len(back.frontier), back.depth)
            side, other = (ahead, back) if forward else (back, ahead)
            side.step(self.store, namespace, other)
            meeting = [n for n in side.frontier if n in other.parents]
        if meeting:  # keep only the meetings of the shortest length
            hops = min(ahead.depth_of[n] + back.depth_of[n] for n in meeting)
            meeting = [n for n in meeting if ahead.depth_of[n] + back.depth_of[n] == hops]
        chains = [[*there, *reversed(home)] for n in meeting
                  for there in _unwind(n, start, ahead.parents, max_paths)
                  for home in _unwind(n, goal, back.parents, max_paths)]
        chains.sort(key=lambda chain: -sum(e.weight for e in chain))  # strongest first; stable, so ties as read
        names = {n.id: n.name for n in self.store.get_nodes(
            {i for c in chains for e in c for i in (e.source_id, e.target_id)} | set(ahead.cut) | set(back.cut))}
        rendered = list(dict.fromkeys(_render_chain(chain, start, names) for chain in chains))[:max_paths]
        ends = found[source].name, found[target].name
        # An end whose search ran out of nodes with nothing cut has been read whole: nothing else is connected to it.
        exhausted = any(not s.frontier and not s.cut for s in (ahead, back))
        cut = [names[n] for n, _ in sorted({**back.cut, **ahead.cut}.items(), key=lambda c: -c[1]) if n in names]
        return PathResult(
            source=ends[0], target=ends[1], hops=len(chains[0]) if chains else None, paths=rendered,
            message=None if chains else _no_path(*ends, max_hops, connected=not exhausted, cut=cut),
        )


class _Reach:
    """find_paths' breadth-first search from one end: each node reached, with every relation that reached it at
    its depth (so several equally short paths can be listed), and the nodes whose relations a read cut."""

    def __init__(self, root: int) -> None:
        self.parents: dict[int, list[EdgeRecord]] = {root: []}
        self.depth_of = {root: 0}
        self.frontier = [root]
        self.depth = 0
        self.cut: dict[int, int] = {}  # node -> how many of its relations were read, for those a read cut

    def step(self, store: GraphStore, namespace: str, other: _Reach) -> None:
        """Read the frontier's relations and move it one hop out."""
        limit = PATH_FANOUT * len(self.frontier)
        edges = store.neighbors(self.frontier, namespace, limit=limit)
        here = set(self.frontier)
        if len(edges) >= limit:
            # The read stopped at its limit: the nodes that filled their share of it are those with relations left.
            read: dict[int, int] = {}
            for edge in edges:
                for node in {edge.source_id, edge.target_id} & here:
                    read[node] = read.get(node, 0) + 1
            cut = {n: c for n, c in read.items() if c >= PATH_FANOUT}
            self.cut.update(cut)
            if len(other.frontier) <= PATH_FANOUT:
                # Of what the cut left out, the relations joining a cut node straight to the other end's frontier
                # are where the searches meet: one read of the edges among those few nodes, not the hubs' lists.
                seen, theirs = {e.id for e in edges}, set(other.frontier)
                edges += [e for e in store.edges_among([*cut, *theirs], namespace) if e.id not in seen
                          and ((e.source_id in cut and e.target_id in theirs)
                               or (e.target_id in cut and e.source_id in theirs))]
        reached: dict[int, list[EdgeRecord]] = {}
        for edge in edges:
            for near, far in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
                if near in here and far not in self.parents:
                    reached.setdefault(far, []).append(edge)
        self.depth += 1
        self.parents.update(reached)
        self.depth_of.update(dict.fromkeys(reached, self.depth))
        self.frontier = list(reached)


def _named_start(relation: RelationRef) -> tuple[bool, datetime | None]:
    """Whether a relation to delete names one period by its start, and that start: a `valid_from` given, null
    included (the period with no known start; left out, it names the periods that have not ended)."""
    named = isinstance(relation, RelationToDelete) and "valid_from" in relation.model_fields_set
    return named, relation.valid_from if named else None  # type: ignore[union-attr]


def _sent(moment: datetime | None) -> str:
    """A stored start as valid_from takes it back, exactly (it must equal the stored one): null, a date, or a
    date-time to the microsecond."""
    if moment is None:
        return "null"
    return f'"{short(moment)}"' if moment == datetime(moment.year, moment.month, moment.day) else f'"{iso_utc(moment)}"'


def aliased_elsewhere_note(name: str, record: NodeRecord, others: Sequence[NodeRecord], done: str,
                           then: str = "give its exact name") -> str:
    """What a call by `name` did (`done`, to `record`, the entity it names) where `name` is an alias of `others` too
    (`GraphCuration.aliased_elsewhere`), and what to do (`then`) if one of them was meant: "'Paris' is the name of
    'Paris' (City) and an alias of 'Paris Dubois' (Person): it was deleted ..."."""
    listed = " and ".join(f"{o.name!r} ({o.type})" for o in others)
    which = repr(others[0].name) if len(others) == 1 else "one of them"
    return (f"{name!r} is the name of {record.name!r} ({record.type}) and an alias of {listed}: {done} "
            f"{record.name!r}, the entity it names; if {which} was meant, {then}")


def _refuse_aliases(found: dict[str, NodeRecord], *, memory_tools: bool = False) -> None:
    """Refuse names that matched an entity only by an alias (resolution's rules 2 and 3), unless the call also names
    that entity by its name: "Maya Chenn", merged into "Maya Chen", is her alias, and deleting by it deletes her.
    `memory_tools`: the memory tools cannot edit aliases, so dropping one is not offered."""
    by_name = {r.id for name, r in found.items() if dotless_i_key(entity_key(name)) == dotless_i_key(r.key)}
    aliased = {name: r for name, r in found.items() if r.id not in by_name}
    if not aliased:
        return
    said = []
    for name, record in aliased.items():
        text = (f"{name!r} is an alias of {record.name!r}, not its name: to delete that entity (with its relations) "
                f"give its name, {record.name!r}")
        if not memory_tools:
            left = [a for a in record.aliases if entity_key(a) != entity_key(name)]
            drop = (f"update_entity(name={record.name!r}, aliases={left!r})" if len(left) <= LISTED_IN_HINT
                    else f"update_entity(name={record.name!r}) with its aliases but {name!r}")
            text += f"; to drop the alias use {drop}"
        said.append(text)
    raise InvalidInputError("; ".join(said) + "; nothing was deleted")


def _no_path(source: str, target: str, max_hops: int, *, connected: bool, cut: Sequence[str] = ()) -> str:
    """Why find_paths found nothing: the limit it searched within, whether a larger one could help, and, when a
    hub's relations were too many to read whole, that a path may still exist (a model takes "no path" as a fact)."""
    if not connected:
        return (f"no path between {source} and {target}: no chain of relations that hold now, of any length, "
                "connects them (ended relations are not followed: get_entities lists them with their periods)")
    more = f"; try max_hops up to {MAX_PATH_HOPS}" if max_hops < MAX_PATH_HOPS else ""
    within = f"within {max_hops} hop{'s' if max_hops > 1 else ''}"
    if not cut:
        return f"no path between {source} and {target} {within}{more}"
    named = ", ".join(cut[:LISTED_IN_HINT]) + (f" and {len(cut) - LISTED_IN_HINT} more" if len(cut) > LISTED_IN_HINT
                                                else "")
    return (f"no path found between {source} and {target} {within} among the relations read, but one may exist: "
            f"{named} {'has' if len(cut) == 1 else 'have'} more relations than find_paths follows per entity "
            f"({PATH_FANOUT}, the strongest), and the rest were not read; page them with "
            f"get_entities(names=[{cut[0]!r}], relations_offset=...), or call find_paths from an entity nearer "
            f"either end{more}")


def _unwind(node: int, start: int, parents: dict[int, list[EdgeRecord]], limit: int) -> list[list[EdgeRecord]]:
    if node == start:
        return [[]]
    chains: list[list[EdgeRecord]] = []
    for edge in parents[node]:
        previous = edge.source_id if edge.target_id == node else edge.target_id
        for chain in _unwind(previous, start, parents, limit):
            chains.append([*chain, edge])
            if len(chains) >= limit:
                return chains
    return chains


def _render_chain(chain: list[EdgeRecord], start: int, names: dict[int, str]) -> str:
    text, here = names.get(start, "?"), start
    for edge in chain:
        if edge.source_id == here:
            here = edge.target_id
            text += f" -{edge.type}-> {names.get(here, '?')}"
        else:
            here = edge.source_id
            text += f" <-{edge.type}- {names.get(here, '?')}"
    return text


def _result_edge(edge: EdgeRecord, names: dict[int, str]) -> ResultEdge:
    return ResultEdge(id=edge.id, source=names[edge.source_id], target=names[edge.target_id], type=edge.type,
                      description=edge.description, weight=edge.weight, properties=edge_properties(edge.properties),
                      valid_from=edge.valid_from, valid_until=edge.valid_until)


def _observations_after(
    name: str, current: list[str], add: Sequence[str], remove: Sequence[str]
) -> tuple[list[str], list[str], list[str]]:
    """An entity's observations after removing `remove` and appending the new ones of `add` (both compared as
    `observation_key` does); with what was added and removed. Refuses more than MAX_OBSERVATIONS."""
    removed = named_observations(current, remove)
    doomed = set(removed)
    added = new_observations(current, add)
    final = [t for t in current if t not in doomed] + added
    if len(final) > MAX_OBSERVATIONS:
        raise InvalidInputError(
            f"{name!r} would have {len(final)} observations; the limit is {MAX_OBSERVATIONS}: "
            "remove some or fold older ones into its description with update_entity"
        )
    return final, added, removed


def entity_fingerprint(record: NodeRecord, observations: Sequence[str]) -> str:
    """What an entity holds as one short text (its name, type, description, aliases, properties and observations),
    different once any of them changed: update_entity's `expected_fingerprint`."""
    held = [record.name, record.type, record.description, list(record.aliases), record.properties, list(observations)]
    text = json.dumps(held, sort_keys=True, separators=(",", ":"))  # ASCII: a lone surrogate is written escaped
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:20]


def merged_properties(
    into: NodeRecord, merged_from: Sequence[NodeRecord]
) -> tuple[dict[str, Any], list[tuple[NodeRecord, str, Any]]]:
    """The properties `into` has once `merged_from` are merged into it (its own values win, then the later
    source's), and each source's value it does not keep, as (source, key, value): merge_entities keeps those as
    observations and says so, since a merge must not lose what a duplicate held without a word."""
    properties = {**{k: v for o in merged_from for k, v in o.properties.items()}, **into.properties}
    differing = [(o, k, v) for o in merged_from for k, v in o.properties.items() if not _same_value(v, properties[k])]
    return properties, differing


def _same_value(a: Any, b: Any) -> bool:
    """Whether two property values say the same: equal, or texts equal but for case and surrounding spaces."""
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return a == b


def _value(value: Any) -> str:
    return repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _property_observation(name: str, key: str, value: Any) -> str:
    """How a merged source's property value that the target does not keep is kept: "role: manager (from Maya
    Chenn)"."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{key}: {text} (from {name})"


def _unique(values: Sequence[str], exclude: str | None = None) -> tuple[str, ...]:
    """Values without repeats (by entity key), in order, leaving out `exclude`."""
    seen = {entity_key(exclude)} if exclude else set()
    kept = []
    for value in values:
        if entity_key(value) not in seen:
            seen.add(entity_key(value))
            kept.append(value)
    return tuple(kept)
