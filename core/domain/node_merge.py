"""How a node written over a stored entity combines with it, for every path that merges one into another
(add_knowledge_graph resolving a name, an import line resolved onto a stored alias): the description is added
after the stored one unless it says nothing new, and the node's names become aliases; a node of another type than
the entity's is said (`other_type_hints`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from duckgraph.core.domain.limits import MAX_DESCRIPTION_CHARS
from duckgraph.core.domain.resolution import qualified

#: `other_type_hints` of one call at most, the rest counted.
OTHER_TYPES_LISTED = 10


@dataclass(frozen=True)
class OtherType:
    """A node merged into an entity of another known type (resolution.py, rule 1)."""

    name: str  # the node's, as written
    type: str  # the node's, as written
    into: str  # the entity's name
    was: str  # the entity's type before
    kept: bool  # whether the entity kept it (an extracted write over a type set by hand)


def combined(stored: str, new: str) -> str:
    """`stored` with `new` after it, or as it is when it says `new` already (whatever the length)."""
    new = new.strip()
    if not new or new.casefold() in stored.casefold():
        return stored
    return f"{stored} {new}" if stored else new


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


def other_type_hints(found: Sequence[OtherType]) -> list[str]:
    """A hint per node merged into an entity of another type: both types, and how to keep the two apart if they
    are two things (a changed type may as well be a correction, which needs nothing)."""
    hints = []
    for it in found[:OTHER_TYPES_LISTED]:
        merged = (f"{it.name!r} ({it.type}) was merged into the entity {it.into!r} ({it.was}): one name up to case "
                  "and spacing is one entity")
        apart = (f"take out what this call added to {it.into!r} (update_entity, delete_relations) and write it "
                 f"again under a qualified name, such as {qualified(it.name, it.type)!r}")
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
