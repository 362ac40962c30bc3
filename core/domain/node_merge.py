"""How a node written over a stored entity combines with it, for every path that merges one into another
(add_knowledge_graph resolving a name, an import line resolved onto a stored alias): the description is added
after the stored one unless it says nothing new, and the node's names become aliases; a node of another type than
the entity's is said (`other_type_hints`), with what the write added to it.

Descriptions are joined as `merge_entities` joins them (`joined_sentences`): two texts, not one phrase run
together."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from duckgraph.core.domain.limits import MAX_DESCRIPTION_CHARS
from duckgraph.core.domain.resolution import qualified
from duckgraph.ports import NodeRecord
from duckgraph.ports.text import shortened

#: `other_type_hints` of one call at most, the rest counted.
OTHER_TYPES_LISTED = 10
#: Characters of one text (a description, an observation, a value) an other-type hint quotes, at most, and of its
#: whole list of what the write added: a hint stays short whatever the write held.
ADDED_TEXT_CHARS = 80
ADDED_CHARS = 400


@dataclass(frozen=True)
class OtherType:
    """A node merged into an entity of another known type (resolution.py, rule 1)."""

    name: str  # the node's, as written
    type: str  # the node's, as written
    into: str  # the entity's name
    was: str  # the entity's type before
    kept: bool  # whether the entity kept it (an extracted write over a type set by hand)
    key: str  # the entity's key
    before: NodeRecord | None  # the entity as stored before the call; None when the call created it


def joined_sentences(first: str, second: str) -> str:
    """Two descriptions as one text that still reads as two statements ("Engineering lead; Payments engineer"),
    not as one phrase run together."""
    first, second = first.strip(), second.strip()
    if not first or not second:
        return first or second
    return f"{first} {second}" if first.endswith((".", "!", "?", ";")) else f"{first}; {second}"


def combined(stored: str, new: str) -> str:
    """`stored` with `new` after it (`joined_sentences`), or as it is when it says `new` already (whatever the
    length)."""
    new = new.strip()
    if not new or new.casefold() in stored.casefold():
        return stored
    return joined_sentences(stored, new)


def appended(stored: str, new: str) -> str | None:
    """`combined`, or None when it would pass the description's limit."""
    description = combined(stored, new)
    return description if len(description) <= MAX_DESCRIPTION_CHARS else None


def with_aliases(name: str, aliases: Sequence[str], names: Iterable[str], key_of: Callable[[str], str]) -> list[str]:
    """The aliases of the entity `name`, with each of `names` that is neither its name nor an alias yet added."""
    taken = {key_of(name), *(key_of(a) for a in aliases)}
    kept = list(aliases)
    for alias in names:
        if (key := key_of(alias)) not in taken:
            kept.append(alias)
            taken.add(key)
    return kept


def added_to(before: NodeRecord | None, after: NodeRecord, observations: Sequence[str]) -> str:
    """What a write added to an entity, within `ADDED_CHARS`: the description text appended, the observations
    (`observations`: those it added), aliases and property values that `after` holds and `before` (the entity as
    stored before it; None: the write created it) did not; "" when none."""
    held = before.description if before is not None else ""
    text = after.description if after.description != held else ""
    if held and text.startswith(held):
        # `combined` put " " or "; " between the two (`joined_sentences`)
        text = text[len(held):].removeprefix(";").removeprefix(" ")
    old_aliases = set(before.aliases) if before is not None else set()
    old_properties = before.properties if before is not None else {}
    missing = object()
    parts = [
        *([f"the description text {_quoted(text)}"] if text else []),
        *_listed("the observation", "the observations", map(_quoted, observations)),
        *_listed("the alias", "the aliases", (_quoted(a) for a in after.aliases if a not in old_aliases)),
        *_listed("the property", "the properties", (f"{k}: {_quoted(v)}" for k, v in after.properties.items()
                                                     if old_properties.get(k, missing) != v)),
    ]
    return shortened("; ".join(parts), ADDED_CHARS)


def _listed(one: str, several: str, items: Iterable[str]) -> list[str]:
    items = list(items)
    return [f"{one if len(items) == 1 else several} {', '.join(items)}"] if items else []


def _quoted(value: Any) -> str:
    """A text or a property value as a hint quotes it: a text shortened, then quoted; another value as written."""
    if isinstance(value, str):
        return repr(shortened(value, ADDED_TEXT_CHARS))
    return shortened(repr(value), ADDED_TEXT_CHARS)


def other_type_hints(
    found: Sequence[OtherType], records: Mapping[str, NodeRecord], observations: Mapping[str, Sequence[str]]
) -> list[str]:
    """A hint per node merged into an entity of another type: both types, and how to keep the two apart if they
    are two things (a changed type may as well be a correction, which needs nothing), with what the call added to
    the entity (`added_to`; `records`: the entities as the call writes them, by key; `observations`: those it
    added, by key)."""
    hints = []
    for it in found[:OTHER_TYPES_LISTED]:
        merged = (f"{it.name!r} ({it.type}) was merged into the entity {it.into!r} ({it.was}): one name up to case "
                  "and spacing is one entity")
        added = added_to(it.before, records[it.key], observations.get(it.key, ()))
        listed = f"{added}; and its relations" if added else "its relations"
        apart = (f"take out what this call added to {it.into!r} ({listed}: update_entity, delete_relations) and "
                 f"write it again under a qualified name, such as {qualified(it.name, it.type)!r}")
        if it.kept:
            hints.append(f"{merged}, which keeps its type {it.was} (set by hand). If {it.name!r} is another thing, "
                         f"{apart}.")
        else:
            hints.append(f"{merged}, now of type {it.type}. If that corrects its type, nothing to do; if "
                         f"{it.name!r} is another thing, give {it.into!r} its type back (update_entity with type "
                         f"{it.was!r}), {apart}.")
    if len(found) > OTHER_TYPES_LISTED:
        hints.append(f"... and {len(found) - OTHER_TYPES_LISTED} more nodes merged into an entity of another type "
                     "(see resolved)")
    return hints
