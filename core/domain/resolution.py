"""Entity resolution at ingest: does a new name denote an entity that is already stored?

The policy is conservative, because a wrong merge mixes two entities' facts and is hard to see, while a missed
one costs a duplicate that `merge_entities` folds in one call:

1. The same key (case, width and spacing ignored: "Journal of Mathematical Physics" and "journal of  mathematical
   physics") is the same entity, always.
2. A name that, for exactly one stored entity of the same type, equals one of its aliases or equals its name or an
   alias up to accents and punctuation ("Aschenbrodel" / "Aschenbrödel", "Jean Luc Picard" / "Jean-Luc Picard")
   is merged into that entity; the new spelling becomes an alias. With two such entities nothing is merged.
3. A new entity whose vector is at least `NEAR_DUPLICATE_SIMILARITY` close to a stored entity of the same type is
   stored as given and reported as a possible duplicate: names like "World War I" and "World War II" sit that
   close, so similarity alone never merges.

Rule 2 looks at stored entities only, and never resolves a name onto an entity that another node of the same call
names (or that another name of the call was resolved to): nodes a caller gives as distinct stay distinct, however
alike their names ("Cherry Creek, Colorado" and "Cherry Creek (Colorado)"). A relation whose ends resolution
still makes one entity is skipped and reported by `KnowledgeBase.add_knowledge_graph`, never an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from duckgraph.ports import GraphStore, NodeRecord, entity_key, loose_key

#: Cosine similarity of node vectors above which a new entity is reported as a possible duplicate.
NEAR_DUPLICATE_SIMILARITY = 0.92
#: Calls creating more entities than this skip the similarity check (bulk loads; one vector search per entity).
NEAR_DUPLICATE_CHECK_LIMIT = 200


def same_type(a: str, b: str) -> bool:
    return entity_key(a) == entity_key(b)


class NameKeys:
    """`entity_key` and `loose_key` of names, each computed once: a call names the same entities many times (a
    bulk load's edges name each of its nodes about ten times, and each key costs microseconds of Unicode work)."""

    __slots__ = ("_keys", "_loose")

    def __init__(self) -> None:
        self._keys: dict[str, str] = {}
        self._loose: dict[str, str] = {}

    def key(self, name: str) -> str:
        found = self._keys.get(name)
        if found is None:
            found = self._keys[name] = entity_key(name)
        return found

    def loose(self, name: str) -> str:
        found = self._loose.get(name)
        if found is None:
            found = self._loose[name] = loose_key(name)
        return found


@dataclass
class NameResolver:
    """Finds the stored entity a new name denotes under rule 2."""

    by_alias: dict[str, list[NodeRecord]] = field(default_factory=dict)
    by_loose: dict[str, list[NodeRecord]] = field(default_factory=dict)
    keys: NameKeys = field(default_factory=NameKeys)

    def add(self, records: Iterable[NodeRecord]) -> None:
        keys = self.keys
        for record in records:
            for alias in record.aliases:
                self._index(self.by_alias, keys.key(alias), record)
            for name in (record.name, *record.aliases):
                if loose := keys.loose(name):
                    self._index(self.by_loose, loose, record)

    @staticmethod
    def _index(table: dict[str, list[NodeRecord]], key: str, record: NodeRecord) -> None:
        owners = table.setdefault(key, [])
        if all(owner.key != record.key for owner in owners):
            owners.append(record)

    def match(self, name: str, type_: str) -> NodeRecord | None:
        keys = self.keys
        for table, key in ((self.by_alias, keys.key(name)), (self.by_loose, keys.loose(name))):
            found = table.get(key)
            if not found:
                continue
            wanted = keys.key(type_)  # same_type, with the keys computed once
            owners = [r for r in found if keys.key(r.type) == wanted]
            if len(owners) == 1:
                return owners[0]
            if owners:
                return None  # ambiguous: leave it to the caller
        return None

    def candidates(self, name: str) -> list[NodeRecord]:
        """Every stored entity, of any type, that `name` could denote under rule 2: an alias of it, or its name or an
        alias up to accents and punctuation (for reads and suggestions, where no type is given)."""
        keys = self.keys
        found = [r for table, key in ((self.by_alias, keys.key(name)), (self.by_loose, keys.loose(name)))
                 for r in table.get(key, ())]
        return list({r.key: r for r in found}.values())


def lookup_keys(names: Sequence[str], keys: NameKeys) -> set[str]:
    """The keys `GraphStore.find_nodes` needs to see every stored entity rule 1 or 2 could match."""
    return {keys.key(n) for n in names} | {k for n in names if (k := keys.loose(n))}


def possible_duplicates(store: GraphStore, namespace: str, created: Sequence[NodeRecord]) -> list[dict]:
    """New entities close to a stored one of the same type (rule 3), for the caller to merge if they agree."""
    if not created or len(created) > NEAR_DUPLICATE_CHECK_LIMIT:
        return []
    import numpy as np  # loaded by then (the records carry vectors); not at import, to keep start-up light

    embedded = [record for record in created if record.embedding is not None]
    if not embedded:
        return []
    nearest = store.vector_search_batch("node", np.stack([r.embedding for r in embedded]), 1, namespace)
    hits: dict[int, tuple[NodeRecord, int, float]] = {}
    for record, found in zip(embedded, nearest):
        for node_id, similarity in found:
            if similarity >= NEAR_DUPLICATE_SIMILARITY:
                hits[id(record)] = (record, node_id, similarity)
    if not hits:
        return []
    stored = {n.id: n for n in store.get_nodes(node_id for _, node_id, _ in hits.values())}
    found = []
    for record, node_id, similarity in hits.values():
        other = stored.get(node_id)
        if other is not None and same_type(other.type, record.type):
            found.append({"name": record.name, "similar_to": other.name, "type": record.type,
                          "similarity": round(similarity, 3)})
    return found
