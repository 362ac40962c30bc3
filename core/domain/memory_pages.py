"""The memory tools' read answers (read_graph, search_nodes, open_nodes) within a token bound.

The reference's answers have no bound: a common word given to search_nodes, or a type, matches most entities, and
a hub has thousands of relations. Hosts cut or refuse a long tool result (Claude Code takes at most 25,000 tokens
of one by default), so such an answer would be lost. Here an answer's text takes at most TEXT_TOKENS
(`render.estimate_tokens`): its first block, the reference's JSON as `core/mcp/tools/common.json_result` writes
it, and the note, a second block. An answer is a page of whole entities, each with its relations, in the answer's
order, and ends before the first entity that does not fit with them; `next_offset` is where the next page
starts. Only an entity that alone does not fit is cut: it comes alone, with the observations that fit (stored
order) and then the relations that fit (creation order); the rest of it is on no page, and the note says so.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field

from duckgraph.core.domain.model import GraphEntity, GraphRelation, MemoryGraph
from duckgraph.core.domain.render import estimate_tokens
from duckgraph.ports.text import shortened

#: The most an answer's text takes, its note included: under the 25,000 tokens Claude Code accepts of a tool result
#: by default, with room for tokenizers that count more than `estimate_tokens`.
TEXT_TOKENS = 20_000
#: Kept for the note, and for the JSON around the entities and relations (its keys, brackets and optional fields).
NOTE_TOKENS = 300
ENVELOPE_TOKENS = 60
#: The longest a name is shown in the note (a name may be 300 characters, of a script that costs more a character).
NAME_CHARS = 60
#: An entity or relation's place in the answer's JSON: inside {"entities": [...]}, two levels of two spaces.
_ITEM_INDENT = " " * 4
_OBSERVATION_INDENT = " " * 8


@dataclass
class Entry:
    """An entity of an answer, with the relations that come with it (edge id, relation), in creation order.
    `more_relations`: it has more than were read, so it comes alone on a page, cut."""

    entity: GraphEntity
    relations: list[tuple[int, GraphRelation]]
    more_relations: bool = False


@dataclass
class Cut:
    """What the one entity of a page that did not fit kept, of how many (`relations_read`: at least that many,
    when `more_relations`)."""

    name: str
    observations: int
    observations_held: int
    relations: int
    relations_read: int
    more_relations: bool

    @property
    def observations_left(self) -> bool:
        return self.observations < self.observations_held

    @property
    def relations_left(self) -> bool:
        return self.more_relations or self.relations < self.relations_read


@dataclass
class Page:
    """The entries a page takes (`taken`, the cut one included), as entities and relations; `bounded`: it ended
    before an entry because of the bound (or cut one), not because the entries ended."""

    entities: list[GraphEntity] = field(default_factory=list)
    relations: list[tuple[int, GraphRelation]] = field(default_factory=list)
    taken: int = 0
    bounded: bool = False
    cut: Cut | None = None

    def graph(self) -> MemoryGraph:
        cut = self.cut
        return MemoryGraph(
            entities=self.entities, relations=[r for _, r in sorted(self.relations, key=lambda pair: pair[0])],
            relations_truncated=True if cut and cut.relations_left else None,
            observations_truncated=True if cut and cut.observations_left else None,
        )


def fill(entries: Iterable[Entry], room: int = TEXT_TOKENS - NOTE_TOKENS) -> Page:
    """The page of `entries` (read lazily: none past the first that does not fit) within `room` tokens."""
    page = Page()
    used = ENVELOPE_TOKENS
    for entry in entries:
        cost = _cost(entry.entity) + sum(_cost(r) for _, r in entry.relations)
        if not entry.more_relations and used + cost <= room:
            page.entities.append(entry.entity)
            page.relations += entry.relations
            page.taken += 1
            used += cost
            continue
        if page.taken:  # it starts the next page
            page.bounded = not entry.more_relations
            return page
        page.entities, page.relations, page.cut = _cut(entry, room - used)
        page.taken, page.bounded = 1, True
        return page
    return page


def _cut(entry: Entry, room: int) -> tuple[list[GraphEntity], list[tuple[int, GraphRelation]], Cut]:
    """An entry that alone does not fit in `room`: the observations that fit, then the relations."""
    entity = entry.entity
    used = _cost(entity.model_copy(update={"observations": []})) + 3  # "[]" opened on lines of its own
    observations: list[str] = []
    for text in entity.observations:
        cost = estimate_tokens(f"{_OBSERVATION_INDENT}{json.dumps(text, ensure_ascii=False)},\n")
        if used + cost > room:
            break
        observations.append(text)
        used += cost
    relations: list[tuple[int, GraphRelation]] = []
    if len(observations) == len(entity.observations):
        for pair in entry.relations:
            if used + (cost := _cost(pair[1])) > room:
                break
            relations.append(pair)
            used += cost
    cut = Cut(name=entity.name, observations=len(observations), observations_held=len(entity.observations),
              relations=len(relations), relations_read=len(entry.relations), more_relations=entry.more_relations)
    return [entity.model_copy(update={"observations": observations})], relations, cut


def _cost(item: GraphEntity | GraphRelation) -> int:
    """The tokens `item` takes in the answer's JSON, on its lines and with the comma after it."""
    text = json.dumps(item.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2, ensure_ascii=False)
    return estimate_tokens(textwrap.indent(text, _ITEM_INDENT) + ",\n")


def note(page: Page, *, first: int, found: int | None, next_offset: int | None, again: str) -> str | None:
    """What `page` left out and how to read on, or None when it holds all it was asked for. `first`: the offset
    it starts at; `found`: how many entities the call found (None: read_graph, which pages through the graph);
    `again`: how to call for the next page ("call search_nodes with the same query and offset={next}")."""
    said = []
    more = next_offset is not None and (found is not None or page.bounded)
    if more and found is not None:
        if page.cut is not None:
            said.append(f"This answer holds entity {first + 1:,} of the {found:,} found.")
        else:
            said.append(f"This answer holds entities {first + 1:,} to {first + page.taken:,} of the {found:,} found, "
                        f"with their relations: an answer takes at most {TEXT_TOKENS:,} tokens.")
    elif more and page.cut is None:
        said.append(f"This page holds {page.taken:,} entities, fewer than asked for: an answer takes at most "
                    f"{TEXT_TOKENS:,} tokens.")
    cut = page.cut
    if cut is not None and (cut.observations_left or cut.relations_left):
        kept = [f"{cut.observations:,} of its {cut.observations_held:,} observations (the first)"
                if cut.observations_left else "all its observations"]
        if cut.relations_read:
            read = f"more than {cut.relations_read:,}" if cut.more_relations else f"{cut.relations_read:,}"
            order = "" if cut.more_relations else " (the first created)"  # else the first of those read
            kept.append(f"{cut.relations:,} of its {read} relations{order}")
        said.append(f"{shortened(cut.name, NAME_CHARS)!r} takes more than an answer holds ({TEXT_TOKENS:,} tokens), so it is shown with "
                    f"{' and '.join(kept)}; the rest of it is on no page.")
        if cut.relations_left:
            said.append("open_nodes of the entities at the other ends of its relations shows the relations with "
                        "them.")
    if more:
        said.append(f"To read on, {again.format(next=next_offset)}.")
    return " ".join(said) or None
