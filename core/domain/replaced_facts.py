"""A relation written beside the one relation of its type its source held: maybe a new fact replacing the old one
("Alice LIVES_IN Paris" written while "Alice LIVES_IN Berlin" holds), which nothing in the write tells apart from a
second end of a type that has many (WORKS_ON, HAS_CHILD). Both are kept, and the write's answer says the source now
has two, as a question of fact: the caller ends one if it no longer holds (`rivals`, `two_current`). A type some
entity of the namespace already holds to several ends has many by nature: not said."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from duckgraph.core.domain.moments import now
from duckgraph.ports import EdgeRecord, EdgeWrite, GraphStore

#: Relations of the sources of a call read at most (those past it go unchecked: a hub's relations are many).
RELATIONS_READ = 100_000
#: Hints add_knowledge_graph gives at most, the rest counted.
LISTED = 10


@dataclass(frozen=True)
class Rival:
    """The relation `held` (to the entity named `held_target`) that holds beside the call's `writes[index]`."""

    index: int
    held: EdgeRecord
    held_target: str


def rivals(store: GraphStore, writes: Sequence[EdgeWrite], ids: dict[str, int], namespace: str) -> list[Rival]:
    """Of a call's `writes`, before it commits (`ids`: the stored id of each entity key they name; a new entity has
    none), each that gives its source a second relation of its type holding now: the source held exactly one of that
    type, to another end and with no end planned, and the call gives it exactly one new end of that type. A type the
    source, or any entity of the namespace, holds to several ends already, or that the call gives several new ends,
    has many by nature: not said. A write that does not hold now (ended, or planned) replaces nothing."""
    moment = now()
    current = [(i, w) for i, w in enumerate(writes) if w.source_key in ids
               and (w.valid_from is None or w.valid_from <= moment)
               and (w.valid_until is None or w.valid_until > moment)]
    if not current:
        return []
    sources = sorted({ids[w.source_key] for _, w in current})
    edges = store.edges_from(sources, namespace, limit=RELATIONS_READ + 1)
    # By source id: a source at or past the first relation not read may not have been read whole.
    cut = edges[RELATIONS_READ].source_id if len(edges) > RELATIONS_READ else None
    held: dict[tuple[int, str], list[EdgeRecord]] = {}
    for edge in edges[:RELATIONS_READ]:
        held.setdefault((edge.source_id, edge.type), []).append(edge)
    new: dict[tuple[int, str], dict[str, int]] = {}  # (source, type) -> each new end's key, with its first write
    for i, write in current:
        source = ids[write.source_key]
        ends = {e.target_id for e in held.get((source, write.type), ())}
        if (cut is None or source < cut) and ids.get(write.target_key) not in ends:
            new.setdefault((source, write.type), {}).setdefault(write.target_key, i)
    found = [(index, before[0]) for pair, targets in new.items() if len(targets) == 1
             and len(before := held.get(pair, ())) == 1 and before[0].valid_until is None
             for index in targets.values()]
    many = store.types_held_many(namespace, {edge.type for _, edge in found}) if found else set()
    found = [(index, edge) for index, edge in found if edge.type not in many]
    names = {n.id: n.name for n in store.get_nodes({edge.target_id for _, edge in found})}
    return [Rival(index=index, held=edge, held_target=names[edge.target_id]) for index, edge in sorted(found)
            if edge.target_id in names]


def two_current(source: str, kind: str, held_target: str, new_target: str) -> str:
    """The start of a rival's line, the remedy (which the tool set says) after it: "'Alice' now has two current
    LIVES_IN relations (to 'Berlin' and 'Paris'); if one no longer holds, "."""
    return (f"{source!r} now has two current {kind} relations (to {held_target!r} and {new_target!r}); if one no "
            "longer holds, ")


def replaced_hints(store: GraphStore, edges: Any, records: Sequence[Any], namespace: str) -> list[str]:
    """add_knowledge_graph's hints for its edges (`edges`: its resolved edges, with their writes and the names of
    their ends; `records`: the nodes it writes) that hold beside the one relation of their type their source held
    (`rivals`), before the call commits."""
    ids = {n.key: n.id for n in records if n.id is not None}
    others = {k for w in edges.writes for k in (w.source_key, w.target_key)} - {n.key for n in records}
    ids.update({n.key: n.id for n in store.find_nodes(namespace, others) if n.key in others})
    hints = []
    for rival in rivals(store, edges.writes, ids, namespace):
        write = edges.writes[rival.index]
        source = edges.names.get(write.source_key, write.source_key)
        target = edges.names.get(write.target_key, write.target_key)
        hints.append(two_current(source, write.type, rival.held_target, target) + "end it with end_relations")
    return hints[:LISTED] + ([f"... and {len(hints) - LISTED} more entities now have two current relations of a "
                              "type they held once"] if len(hints) > LISTED else [])
