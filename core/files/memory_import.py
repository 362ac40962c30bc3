"""Import the reference MCP memory server's memory.jsonl (@modelcontextprotocol/server-memory) into a knowledge
base: entities become nodes with their observations, relations edges, matched and resolved as the memory tools
match and resolve them. The export to that format is core/files/memory_jsonl.py; `import_lines`
(core/files/import_.py) picks this import for a file of such lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from pydantic import TypeAdapter, ValidationError

from duckgraph.core.domain.argument_errors import readable
from duckgraph.core.domain.limits import MAX_OBSERVATIONS
from duckgraph.core.domain.memory_server import ORIGINAL_TYPE, PLACEHOLDER_TYPE, placeholders
from duckgraph.core.domain.model import MemoryEntityInput, RelationInput, StoredObservation
from duckgraph.core.domain.resolution import NameKeys, NameResolver, lookup_keys, qualified, types_agree
from duckgraph.core.domain.texts import edge_text, node_text
from duckgraph.core.files.import_base import Import, Plan, ambiguous, ambiguous_message
from duckgraph.core.files.import_summary import ImportSummary, note_resolved
from duckgraph.ports import EdgeWrite, NodeRecord, entity_key, relation_type


#: One observation, checked as the memory tools check each one of an entity.
_OBSERVATION: TypeAdapter[str] = TypeAdapter(StoredObservation)


@dataclass
class _FileEntity:
    """An entity of a memory server file, as its first line (`number`) names and types it, with the observations of
    all its lines in file order, each with where it is: (line number, position in that line's list, from 1)."""

    name: str
    type: str
    number: int
    observations: dict[str, tuple[int, int]] = field(default_factory=dict)


def _observations(positions: list[int]) -> str:
    """Positions in a line's list of observations, in words: "observation 2", "observations 3, 7 and 201 to 230"."""
    runs: list[list[int]] = []
    for position in sorted(positions):
        if runs and position == runs[-1][1] + 1:
            runs[-1][1] = position
        else:
            runs.append([position, position])
    parts = [str(a) if a == b else f"{a} to {b}" for a, b in runs]
    listed = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"observation{'s' if len(positions) > 1 else ''} {listed}"


def _note_homonym(summary: ImportSummary, number: int, name: str, type_: str, into: str) -> None:
    """Say that the entity line `number` went, by its name up to case and spacing, to an entity of another type
    (`into`, in words): the reference server keeps such names apart, so they may well be two things."""
    summary.homonyms_merged.append(
        f"line {number}: {name!r} ({type_}) was merged into {into}: names that differ only in case or spacing are "
        "one entity in duckgraph, while the reference server kept them apart; to keep them apart, rename it in the "
        f"file before importing it (such as {qualified(name, type_)!r})")


def _by_line(reasons: list[str]) -> None:
    """Sort reasons ("line 12: ...") by their line number."""
    reasons.sort(key=lambda reason: int(reason.split(":")[0].removeprefix("line ")))


class MemoryImport(Import):
    """The reference memory server's file: entities become nodes with their observations, relations edges.

    As in the reference, lines of another type are skipped, and so are relations of an entity with itself, each
    reported in `skipped`. The end of a relation that is no entity (in the file or stored) is created as an
    entity of type 'unknown', as create_relations does, and listed in `placeholders`.

    The reference has no limits, so a long-lived file may break one of the tools' (an entity with more observations
    than an entity holds, one observation too long). Such an entity is kept, never dropped for it: it gets every
    observation that fits, and what is left out is listed, by line and position, in `partly_imported`.
    """

    def _entity(self, number: int, obj: dict[str, Any], summary: ImportSummary
                ) -> tuple[str, str, list[tuple[str, int]]] | None:
        """The line's name, type and (observation, position) pairs, checked as create_entities checks them; None
        for a line without a valid name (a relation naming it is refused by the same check)."""
        try:
            entity = MemoryEntityInput.model_validate(obj)
            return entity.name, entity.entityType, [(text, i) for i, text in enumerate(entity.observations, 1)]
        except ValidationError:
            pass  # keep what the tools would take, and say what is left out
        notes: list[str] = []
        try:
            head = MemoryEntityInput.model_validate({**obj, "observations": []})
        except ValidationError as exc:
            if any(error["loc"][:1] == ("name",) for error in exc.errors()):
                summary.skipped.append(f"line {number}: invalid entity: {readable(exc)}")
                return None
            # No type the tools take (blank, too long): 'unknown', the type of an entity created without one,
            # which create_entities later fills in.
            notes.append(f"{readable(exc)}; imported with entityType {PLACEHOLDER_TYPE!r}")
            head = MemoryEntityInput.model_validate({**obj, "entityType": PLACEHOLDER_TYPE, "observations": []})
        given = obj.get("observations")
        kept: list[tuple[str, int]] = []
        if isinstance(given, list):
            refused: dict[str, list[int]] = {}
            for position, text in enumerate(given, 1):
                try:
                    kept.append((_OBSERVATION.validate_python(text), position))
                except ValidationError as exc:
                    refused.setdefault(readable(exc), []).append(position)
            notes += [f"{_observations(positions)} left out: {reason}" for reason, positions in refused.items()]
        else:
            try:
                MemoryEntityInput.model_validate({**obj, "entityType": head.entityType})
            except ValidationError as exc:
                notes.append(f"{readable(exc)}; imported without observations")
        summary.partly_imported += [f"line {number}: entity {head.name!r}: {note}" for note in notes]
        return head.name, head.entityType, kept

    def run(self, objects: Iterable[tuple[int, dict[str, Any]]]) -> ImportSummary:
        summary = ImportSummary(format="memory")
        entities: dict[str, _FileEntity] = {}  # by key
        relations: list[tuple[int, str, str, str]] = []
        for number, obj in objects:
            kind = obj.get("type")
            if kind == "entity":
                read = self._entity(number, obj, summary)
                if read is None:
                    continue
                name, entity_type, texts = read
                # "Alice" and "alice" are one entity in duckgraph: the first line's name and type are kept, as
                # create_entities keeps them, and the observations of both gathered.
                entity = entities.setdefault(entity_key(name), _FileEntity(name, entity_type, number))
                if name != entity.name and not types_agree(entity.type, entity_type):
                    _note_homonym(summary, number, name, entity_type, f"{entity.name!r} ({entity.type}, line "
                                  f"{entity.number})")
                for text, position in texts:
                    entity.observations.setdefault(text, (number, position))
            elif kind == "relation":
                try:
                    relation = RelationInput.model_validate(obj)
                except ValidationError as exc:
                    summary.skipped.append(f"line {number}: invalid relation: {readable(exc)}")
                    continue
                relations.append((number, relation.from_, relation.to, relation.relationType))
            else:
                summary.skipped.append(f"line {number}: unknown type {kind!r}")

        namespace = self.into or self.kb.namespace
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        # The restore stream first, as for a duckgraph export: a read-only file is refused before the embedding.
        with self.kb.writing() as writer, writer.restoring() as restore:
            plan = Plan()
            existing = self._existing_nodes({namespace: set(entities)})
            stored = {key: node for (_, key), node in existing.items()}  # by the file's key: its own or resolved
            self._resolve_entities(entities, stored, namespace, summary)
            observations = self.store.get_observations([n.id for n in stored.values()])
            for key, entity in entities.items():
                old = stored.get(key)
                before = observations.get(old.id, []) if old else []
                known = set(before)
                new = [text for text in entity.observations if text not in known]
                room = max(0, MAX_OBSERVATIONS - len(before))
                self._left_out(entity, new[room:], len(before), room, summary)
                merged = [*before, *new[:room]]
                if old is None:
                    record = NodeRecord(namespace=namespace, key=key, name=entity.name, type=entity.type,
                                        observations=tuple(merged), created_at=now, updated_at=now)
                    plan.to_embed.append((record, node_text(record, merged)))
                    plan.snapshot.nodes.append(record)
                    continue
                if old.key == key and old.name != entity.name and not types_agree(old.type, entity.type):
                    _note_homonym(summary, entity.number, entity.name, entity.type,
                                  f"the stored {old.name!r} ({old.type})")
                # A stored entity keeps its fields and gains the file's observations; a placeholder (made for the
                # end of a relation) takes the file's type, as create_entities fills one in.
                kind = entity.type if old.type == PLACEHOLDER_TYPE else old.type
                if merged == before and kind == old.type:
                    summary.nodes_unchanged += 1
                    continue
                record = replace(old, type=kind, observations=tuple(merged), updated_at=now, embedding=None)
                if node_text(record, merged) != node_text(old, before):
                    plan.to_embed.append((record, node_text(record, merged)))
                plan.snapshot.nodes.append(record)

            # A relation names an entity of the file by the file's name for it, which may be a stored entity's
            # alias (`target_of`).
            target_of = {key: node.key for key, node in stored.items()}
            names = {key: entity.name for key, entity in entities.items() if key not in stored}
            names.update({node.key: node.name for node in stored.values()})
            unresolved = {n for _, source, target, _ in relations for n in (source, target)
                          if entity_key(n) not in target_of and entity_key(n) not in names}
            found, missing = self.kb.curation.resolve(sorted(unresolved), namespace) if unresolved else ({}, [])
            others = {name: node for name, node in found.items()}
            said = {entity_key(e.name) for e in entities.values()}
            for name, node in others.items():  # a stored alias (or another case of an i), said once per name
                if node.key != entity_key(name) and entity_key(name) not in said:
                    said.add(entity_key(name))
                    note_resolved(summary, name, node.name)
            names.update({node.key: node.name for node in others.values()})
            new_ends = placeholders(self.kb, missing, namespace)
            names.update({key: node.name for key, node in new_ends.items()})

            def key_of(name: str) -> str | None:
                if entity_key(name) in target_of:
                    return target_of[entity_key(name)]
                if entity_key(name) in names:
                    return entity_key(name)
                return others[name].key if name in others else None

            ends = {key_of(n) for _, s, t, _ in relations for n in (s, t)} - {None}
            id_of = {node.key: node.id for node in stored.values()}
            id_of.update({node.key: node.id for node in others.values()})
            held = {(e.source_id, e.target_id, e.type)
                    for e in self.store.edges_among(sorted(id_of[k] for k in ends if k in id_of), namespace)}
            seen: set[tuple[str, str, str]] = set()
            for number, source, target, label in relations:
                source_key, target_key, kind = key_of(source), key_of(target), relation_type(label)
                assert source_key is not None and target_key is not None  # every end is an entity or a placeholder
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
                                  properties={ORIGINAL_TYPE: label}, created_at=now, updated_at=now)
                plan.to_embed.append((write, edge_text(write, names)))
                plan.snapshot.edges.append(write)
            used = {key for write in plan.snapshot.edges for key in (write.source_key, write.target_key)}
            for key, record in new_ends.items():
                if key in used:
                    record.created_at = record.updated_at = now
                    plan.to_embed.append((record, node_text(record, [])))
                    plan.snapshot.nodes.append(record)
                    summary.placeholders.append(record.name)
            _by_line(summary.skipped)
            _by_line(summary.partly_imported)
            _by_line(summary.homonyms_merged)
            return self._embed_and_restore(restore, plan, summary)

    def _resolve_entities(self, entities: dict[str, _FileEntity], stored: dict[str, NodeRecord], namespace: str,
                          summary: ImportSummary) -> None:
        """Add to `stored` (by the file's key) the stored entity each entity of the file that no stored entity is
        named as goes to, as create_entities resolves it: one whose alias the name is (or its name or an alias
        up to accents and punctuation), of the same type; never one the file names itself or another of its
        entities went to. A name that is an alias of several such entities refuses the import."""
        new = {key: entity for key, entity in entities.items() if key not in stored}
        if not new:
            return
        keys = NameKeys()
        resolver = NameResolver(keys=keys)
        resolver.add(self.store.find_nodes(namespace, lookup_keys([e.name for e in new.values()], keys)))
        claimed = set(entities)
        for key, entity in new.items():
            match = resolver.match(entity.name, entity.type)
            if match is None:
                if owners := ambiguous(resolver, entity.name, entity.type):
                    raise self._fail(entity.number, ambiguous_message(entity.name, owners))
                continue
            if match.key in claimed:
                continue
            claimed.add(match.key)
            stored[key] = match
            note_resolved(summary, entity.name, match.name)

    @staticmethod
    def _left_out(entity: _FileEntity, texts: list[str], stored: int, room: int, summary: ImportSummary) -> None:
        """Report the file's observations of `entity` over the count limit (`texts`), line by line."""
        lines: dict[int, list[int]] = {}
        for text in texts:
            number, position = entity.observations[text]
            lines.setdefault(number, []).append(position)
        held = f"{stored:,} are stored, {room:,} of the file's new ones imported" if stored \
            else f"the file's first {room:,} imported"
        for number, positions in lines.items():
            summary.partly_imported.append(
                f"line {number}: entity {entity.name!r}: {_observations(positions)} left out: an entity may have at "
                f"most {MAX_OBSERVATIONS:,} observations ({held})")
