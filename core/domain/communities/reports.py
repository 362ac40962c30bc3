"""Extractive community reports, written without any model: the most central entities and their types, the facts
that tie them together, and the passages that mention most of them. Also the material a model or the host
summarises, and the text a report is embedded and searched by."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from duckgraph.core.domain.communities.terms import distinctive_terms
from duckgraph.core.domain.texts import fact_sentence
from duckgraph.ports import tokens
from duckgraph.ports.communities import CommunityRecord
from duckgraph.ports.text import one_line, shortened

if TYPE_CHECKING:
    from datetime import datetime

    from duckgraph.ports import EdgeRecord, GraphStore, NodeRecord

#: What an extractive report names at most.
KEY_ENTITIES = 8
KEY_FACTS = 6
KEY_PASSAGES = 2
PASSAGE_CHARS = 300
DESCRIPTION_CHARS = 120
#: What an extractive report's vector is computed from: its central entities' names and commonest types.
EMBEDDED_NAMES = 5
EMBEDDED_TYPES = 3
#: Keys of a report's details: the ids of its facts and of its passages (in the order of "facts" and "passages";
#: none in builds before they were kept), and, set only as it is read, how many of those it cited were deleted since
#: (see freshness.drop_deleted; a passage goes with its document).
FACT_IDS = "fact_ids"
PASSAGE_IDS = "passage_ids"
FACTS_DELETED = "facts_deleted"
PASSAGES_DELETED = "passages_deleted"
#: Key of a written report's details: digests of the observations its named entities had when it was written
#: (entity id -> digests; `observed`), and, set only as it is read, how many of those were deleted since.
OBSERVED = "observed"
OBSERVATIONS_DELETED = "observations_deleted"
#: The counts of what a report was written from and was deleted since: set only as it is read, never stored.
DELETED_COUNTS = (FACTS_DELETED, PASSAGES_DELETED, OBSERVATIONS_DELETED)
#: Key of a written report's details: when it was written (ISO, naive UTC). Its named entities changed only if they
#: changed after that (freshness.touches); a build's details drop it (the report is then as of the build).
WRITTEN_AT = "written_at"


class EdgeTable:
    """The namespace's edges valid now, as arrays (from `GraphStore.edge_arrays`): what a report's central
    entities and key facts are found in, one level at a time, without a query."""

    def __init__(self, arrays: tuple[Any, Any, Any, Any]) -> None:
        import numpy as np  # loaded by then (the detector's input); not at import, to keep start-up light

        self.ids, self.sources, self.targets, self.weights = arrays
        self._np = np
        self._top = int(max(self.sources.max(initial=0), self.targets.max(initial=0))) + 1

    def weighted_degree(self) -> Any:
        """Each node's summed edge weight (an array indexed by node id; 0 for a node without edges)."""
        np = self._np
        return (np.bincount(self.sources, self.weights, minlength=self._top)
                + np.bincount(self.targets, self.weights, minlength=self._top))

    def key_parts(self, communities: Sequence[CommunityRecord], entities: int, facts: int
                  ) -> dict[int, tuple[list[int], list[int]]]:
        """Community ref -> (its `entities` members of largest weighted degree inside it, then lowest id; the ids of
        its `facts` strongest internal edges, those between two of its central members first, then the newest
        (highest id): in a log of decisions the older of two equal facts is the one a later one superseded)."""
        found: dict[int, tuple[list[int], list[int]]] = {c.ref: ([], []) for c in communities}
        for level in sorted({c.level for c in communities}):
            self._level_parts([c for c in communities if c.level == level], entities, facts, found)
        return found

    def _level_parts(self, at_level: Sequence[CommunityRecord], entities: int, facts: int,
                     found: dict[int, tuple[list[int], list[int]]]) -> None:
        np = self._np
        refs = np.asarray([c.ref for c in at_level], dtype=np.int64)
        nodes = np.concatenate([np.asarray(c.members, dtype=np.int64) for c in at_level])
        owner = np.repeat(np.arange(len(at_level)), [len(c.members) for c in at_level])
        nodes, owner = nodes[nodes < self._top], owner[nodes < self._top]  # a member without edges: none here
        label = np.full(self._top, -1, dtype=np.int64)
        label[nodes] = owner
        source_label, target_label = label[self.sources], label[self.targets]
        inside = np.flatnonzero((source_label == target_label) & (source_label >= 0))
        degree = (np.bincount(self.sources[inside], self.weights[inside], minlength=self._top)
                  + np.bincount(self.targets[inside], self.weights[inside], minlength=self._top))
        order = np.lexsort((nodes, -degree[nodes], owner))
        nodes, owner = nodes[order], owner[order]
        chosen = _first_of_each(np, owner, entities)
        central = np.zeros(self._top, dtype=bool)
        central[nodes[chosen]] = True
        for position, node in zip(owner[chosen].tolist(), nodes[chosen].tolist()):
            found[int(refs[position])][0].append(node)
        edge_owner = source_label[inside]
        between = central[self.sources[inside]] & central[self.targets[inside]]
        order = np.lexsort((-self.ids[inside], -self.weights[inside], ~between, edge_owner))
        inside, edge_owner = inside[order], edge_owner[order]
        chosen = _first_of_each(np, edge_owner, facts)
        for position, edge in zip(edge_owner[chosen].tolist(), self.ids[inside[chosen]].tolist()):
            found[int(refs[position])][1].append(edge)


def _first_of_each(np: Any, groups: Any, k: int) -> Any:
    """Mask of the first `k` rows of each run of equal values in the sorted `groups`."""
    return np.arange(len(groups)) - np.searchsorted(groups, groups) < k


def write_extractive(store: GraphStore, communities: Sequence[CommunityRecord], table: EdgeTable,
                     level_mates: Sequence[CommunityRecord] = ()) -> dict[int, list[int]]:
    """Give each of `communities` this build's details (entities, types, terms, facts, passages), and those whose
    report is extractive its title and summary.
    `level_mates`: all communities of the build, against which a community's distinctive terms are weighed.
    Returns each community's (ref's) central members, most central first: those its report names."""
    everyone = list(level_mates) or list(communities)
    parts = table.key_parts(communities, KEY_ENTITIES, KEY_FACTS)
    nodes = {n.id: n for n in store.get_nodes({node for c in everyone for node in c.members})}
    names = {node: record.name for node, record in nodes.items()}
    terms = distinctive_terms(everyone, names)
    facts = _facts(store, parts, names)
    passages = _passages(store, {ref: central for ref, (central, _) in parts.items()})
    for community in communities:
        top = [nodes[n] for n in parts[community.ref][0] if n in nodes]
        types = Counter(nodes[n].type for n in community.members if n in nodes)
        community.details = {
            # The id tells which entities a report names when one of them changes later (freshness.touches).
            "entities": [{"name": n.name, "type": n.type, "description": n.description[:DESCRIPTION_CHARS],
                          "id": n.id} for n in top],
            "types": [{"type": t, "count": count} for t, count in types.most_common(5)],
            "terms": terms.get(community.ref, []),
            "facts": [sentence for _, sentence in facts.get(community.ref, [])],
            # Which facts and passages: one deleted later must leave the report (see freshness.drop_deleted).
            FACT_IDS: [edge for edge, _ in facts.get(community.ref, [])],
            "passages": [text for _, text in passages.get(community.ref, [])],
            PASSAGE_IDS: [chunk for chunk, _ in passages.get(community.ref, [])],
        }
        if community.author == "extractive":  # a written report keeps its text (see `build`)
            community.title = title_of([n.name for n in top])
            community.summary = _summary(len(community.members), types, community.details)
            community.stale = False
        else:  # carried stale: as of this build, its named entities' observations now
            community.details[OBSERVED] = observed(store, community.details)
    return {ref: [n for n in central if n in nodes] for ref, (central, _) in parts.items()}


def as_now(store: GraphStore, community: CommunityRecord, moment: datetime) -> CommunityRecord:
    """A copy of the extractive `community` with its report written again from the graph as it is at `moment`
    (naive UTC): the central entities and key facts its build chose (by id) with their names, types and
    descriptions now, and only the facts that still hold, as they read now. So between builds an extractive
    report never says what its members no longer say (a description changed, a fact ended or deleted). Reads the
    store's graph in memory: those entities and facts only (a few dozen ids), and every member only when some
    left (deleted or merged away) or a central one was renamed, to count its types and recurring words again;
    else those stay the build's, as do which entities are central and which facts key (the next build's to
    choose). The copy is written for the members its community has now: not stale, nor withheld (it names
    nothing deleted)."""
    import dataclasses

    details = without_deleted_counts(community.details)
    named = details.get("entities", [])
    cited = details.get(FACT_IDS, [])
    edges = [e for e in store.get_edges(cited) if _holds(e, moment)] if cited else []
    order = {edge: position for position, edge in enumerate(cited)}
    edges.sort(key=lambda e: order[e.id])
    wanted = {e["id"] for e in named if "id" in e} | {end for e in edges for end in (e.source_id, e.target_id)}
    nodes = {n.id: n for n in store.get_nodes(wanted)} if wanted else {}
    members = set(community.members)
    top = [nodes[e["id"]] for e in named if e.get("id") in nodes and e["id"] in members]
    left = len(community.members) < community.written_for
    renamed = any(nodes[e["id"]].name != e["name"] for e in named if e.get("id") in nodes)
    if left or renamed or len(top) < sum("id" in e for e in named) or any("id" not in e for e in named):
        everyone = store.get_nodes(community.members)
        by_name = {n.name: n for n in everyone}  # a report built before ids were kept names its entities by name
        top = [node for e in named if (node := nodes.get(e["id"]) if "id" in e else by_name.get(e["name"]))
               is not None and node.id in members] or _most_linked(store, community.namespace, everyone)
        types = Counter(n.type for n in everyone)
        details["types"] = [{"type": t, "count": count} for t, count in types.most_common(5)]
        details["terms"] = _still_recurring(details.get("terms", []), everyone)
    else:
        types = Counter({t["type"]: t["count"] for t in details.get("types", [])})
    details["entities"] = [{"name": n.name, "type": n.type, "description": n.description[:DESCRIPTION_CHARS],
                            "id": n.id} for n in top]
    # A build before fact ids were kept: which of its facts still hold cannot be told, so none is shown.
    details["facts"] = [fact_sentence(_name(nodes, e.source_id), e.type, _name(nodes, e.target_id), e.description)
                        for e in edges]
    details[FACT_IDS] = [e.id for e in edges]
    return dataclasses.replace(
        community, title=title_of([n.name for n in top]), summary=_summary(len(community.members), types, details),
        details=details, stale=False, written_for=len(community.members))


def _most_linked(store: GraphStore, namespace: str, members: Sequence[NodeRecord]) -> list[NodeRecord]:
    """The `KEY_ENTITIES` members of largest weighted degree among them now, then lowest id, as a build chooses
    them: for a report none of whose central entities is left (deleted or merged away), rather than none."""
    degree: Counter[int] = Counter()
    for edge in store.edges_among([n.id for n in members], namespace):
        degree[edge.source_id] += edge.weight
        degree[edge.target_id] += edge.weight
    return sorted(members, key=lambda n: (-degree[n.id], n.id))[:KEY_ENTITIES]


def _still_recurring(terms: Sequence[str], members: Sequence[NodeRecord]) -> list[str]:
    """Those of `terms` still in the names of two members at least, as `distinctive_terms` chose them: a word of a
    name deleted or changed since goes (weighing them again would need every community of the level)."""
    counts: Counter[str] = Counter()
    wanted = set(terms)
    for node in members:
        if all(counts[term] >= 2 for term in wanted):
            break  # each recurs already: the other names cannot take that back
        counts.update(wanted.intersection(tokens(node.name)))
    return [term for term in terms if counts[term] >= 2]


def _holds(edge: EdgeRecord, moment: datetime) -> bool:
    """Whether the edge holds at `moment`, by the rule a build reads the relations with (sql.holds_at)."""
    return ((edge.valid_from is None or edge.valid_from <= moment)
            and (edge.valid_until is None or edge.valid_until > moment))


def _name(nodes: dict[int, NodeRecord], node: int) -> str:
    return nodes[node].name if node in nodes else "?"


def _facts(store: GraphStore, parts: dict[int, tuple[list[int], list[int]]], names: dict[int, str]
           ) -> dict[int, list[tuple[int, str]]]:
    """Each community's key edges as (id, sentence) (their ends are members: `names` holds them)."""
    records = {e.id: e for e in store.get_edges({i for _, ids in parts.values() for i in ids})}
    return {ref: [(i, fact_sentence(names.get(records[i].source_id, "?"), records[i].type,
                                    names.get(records[i].target_id, "?"), records[i].description))
                  for i in ids if i in records] for ref, (_, ids) in parts.items()}


def _passages(store: GraphStore, central: dict[int, list[int]]) -> dict[int, list[tuple[int, str]]]:
    """Community ref -> the passages that mention the most of its central entities (at least two, when it has two),
    as (chunk id, text), from one read of all their mentions."""
    chunks_of: dict[int, list[int]] = {}
    for chunk, node in store.chunks_mentioning(sorted({n for nodes in central.values() for n in nodes}),
                                               limit=2**62):
        chunks_of.setdefault(node, []).append(chunk)
    best: dict[int, list[int]] = {}
    for ref, nodes in central.items():
        counts = Counter(chunk for node in nodes for chunk in chunks_of.get(node, ()))
        need = min(2, len(nodes))
        ranked = sorted((chunk for chunk, n in counts.items() if n >= need), key=lambda c: (-counts[c], c))
        best[ref] = ranked[:KEY_PASSAGES]
    texts = {c.id: c.text for c in store.get_chunks({chunk for chunks in best.values() for chunk in chunks})}
    return {ref: [(chunk, shortened(one_line(texts[chunk]), PASSAGE_CHARS)) for chunk in chunks if chunk in texts]
            for ref, chunks in best.items()}


def without_deleted_counts(details: dict[str, Any]) -> dict[str, Any]:
    """A report's details without the counts of what was deleted since (`DELETED_COUNTS`): set only as it is read."""
    return {key: value for key, value in details.items() if key not in DELETED_COUNTS}


def observed(store: GraphStore, details: dict[str, Any]) -> dict[str, list[str]]:
    """Entity id (a JSON key) -> digests of the observations each entity `details` names has now: what a written
    report was written knowing, so that one deleted later withholds it (freshness.drop_deleted), while the report
    keeps no copy of their texts."""
    ids = [e["id"] for e in details.get("entities", []) if "id" in e]
    found = store.get_observations(ids) if ids else {}
    return {str(node): [observation_digest(text) for text in texts] for node, texts in found.items()}


def observation_digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def title_of(names: list[str]) -> str:
    shown = names[:3]
    if not shown:
        return "Unnamed community"
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def _summary(size: int, types: Counter[str], details: dict[str, Any]) -> str:
    kinds = ", ".join(f"{t} ({n})" for t, n in types.most_common(3))
    central = "; ".join(f"{e['name']} ({e['type']})" + (f": {e['description']}" if e["description"] else "")
                        for e in details["entities"][:5])
    text = f"{size} entities, mostly {kinds}."
    if details["terms"]:
        text += " Recurring words: " + ", ".join(details["terms"]) + "."
    # The descriptions and facts on one line: their line breaks would start lines of global_search's text ("## ...",
    # a report of their own).
    text += " " + _ended(one_line(f"Central: {central}"))
    if details["facts"]:
        text += " " + _ended(one_line("Facts: " + "; ".join(details["facts"][:3])))
    return text


def _ended(sentence: str) -> str:
    """`sentence` with a full stop, unless its last description or fact brought one ("...experiments..")."""
    return sentence if sentence.endswith((".", "!", "?", "…")) else sentence + "."


def report_text(community: CommunityRecord) -> str:
    """What a report's vector is computed from. A written report: its title, summary and recurring words (which a
    written summary may leave out). An extractive one: its recurring words and central entities' names and types
    only. Its summary repeats those names with sizes, facts and descriptions, several times the tokens (the model's
    cost grows with them, and past 256 it truncates), for little the names and words do not already say; the
    keyword channel still indexes the whole report."""
    details = community.details
    terms = ", ".join(details.get("terms", []))
    if community.author != "extractive":
        return f"{community.title}. {community.summary} Recurring words: {terms}"
    names = ", ".join(e["name"] for e in details.get("entities", [])[:EMBEDDED_NAMES])
    kinds = ", ".join(t["type"] for t in details.get("types", [])[:EMBEDDED_TYPES])
    return f"{names}. Recurring words: {terms}. Mostly {kinds}"


def material(community: CommunityRecord) -> str:
    """What a model or the host reads to write a report: the extractive report's entities, facts, passages. Each
    stored text on its line (`one_line`): its line breaks would start lines the reader takes for the material's
    own ("Entities:", "- Mallory [admin]", another community)."""
    details = community.details
    lines = [f"Community {community.id} (level {community.level}, {len(community.members)} entities)."]
    lines += ["Entities:"] + [one_line(f"- {e['name']} ({e['type']})"
                                       + (f": {e['description']}" if e.get("description") else ""))
                              for e in details.get("entities", [])]
    if details.get("types"):
        lines.append(one_line("Types: " + ", ".join(f"{t['type']} ({t['count']})" for t in details["types"])))
    if details.get("terms"):
        lines.append(one_line("Recurring words: " + ", ".join(details["terms"])))
    if details.get("facts"):
        lines += ["Facts:"] + [one_line(f"- {fact}") for fact in details["facts"]]
    if details.get("passages"):
        lines += ["Passages:"] + [one_line(f"- {passage}") for passage in details["passages"]]
    return "\n".join(lines)
