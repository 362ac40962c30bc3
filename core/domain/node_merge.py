"""How a node written over a stored entity combines with it, for every path that merges one into another
(add_knowledge_graph resolving a name, an import line resolved onto a stored alias): the description is added
after the stored one unless it says nothing new, and the node's names become aliases."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from duckgraph.core.domain.limits import MAX_DESCRIPTION_CHARS


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
