"""Which nodes hold a text in their name, type or an observation, ignoring case and accents: the match of the
memory tools' `search_nodes` (`GraphStore.nodes_containing`), answered from memory.

Both sides are folded with the rule the rest of duckgraph folds names and keyword words with
(`ports.names.unaccented`), so "Lukasz" finds "Łukasz Nowak" and "José" finds "Jose". The texts are folded once,
not at every query (folding in SQL at query time made the match 2-4 times slower): each node's folded texts,
each followed by `SEPARATOR`, are joined per namespace into blocks of `BLOCK` consecutive ids, so that a query is
one `str.find` per block. Built for a namespace by its first query; nodes written since are folded again by the
next query (`changed`), a block of ids at a time.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence

from duckgraph.ports.names import unaccented

#: Ends each folded text in a block: a query without it cannot match across two texts (or two nodes).
SEPARATOR = "\x00"
#: Ids per block: a write folds again only the changed nodes, and joins again only their blocks.
BLOCK = 1024


def folded(text: str) -> str:
    """`unaccented(text)`: for ASCII (most texts), whose only change there is the case, `str.lower` directly,
    ~20 times faster (tests/unit/test_substring_index.py checks both give the same for every ASCII character)."""
    return text.lower() if text.isascii() else unaccented(text)


class _Block:
    """The folded texts of some nodes of one namespace whose ids share `id // BLOCK`, in id order."""

    __slots__ = ("ids", "starts", "text")

    def __init__(self, parts: dict[int, str]) -> None:
        self.ids = sorted(parts)
        self.starts: list[int] = []  # where each node's part starts in `text`, then len(text)
        offset = 0
        for node_id in self.ids:
            self.starts.append(offset)
            offset += len(parts[node_id])
        self.starts.append(offset)
        self.text = "".join(parts[node_id] for node_id in self.ids)

    def parts(self) -> dict[int, str]:
        starts, text = self.starts, self.text
        return {node_id: text[starts[k]:starts[k + 1]] for k, node_id in enumerate(self.ids)}


class SubstringIndex:
    """The folded texts of the nodes of the namespaces queried so far (see the module).

    `texts(ids)` gives (node id, namespace code, name, type, observations or None) for each stored one of `ids`;
    `members(code)` the ids of the nodes of a namespace. Not locked by itself: the mirror's owner locks it.
    """

    def __init__(self, texts: Callable[[Iterable[int]], Iterable[tuple[int, int, str, str, Sequence[str] | None]]],
                 members: Callable[[int], Iterable[int]]) -> None:
        self._texts = texts
        self._members = members
        self._namespaces: dict[int, dict[int, _Block]] = {}  # namespace code -> id // BLOCK -> block
        self._size = 0  # nodes held, all namespaces
        #: nodes written (or deleted) since their namespace's blocks were built: folded again by the next query
        self._stale: set[int] = set()

    def changed(self, node_ids: Iterable[int]) -> None:
        """Nodes whose name, type, observations or namespace changed, or that were deleted."""
        if not self._namespaces:  # nothing built yet: the first query reads them as they are then
            return
        self._stale.update(node_ids)
        if len(self._stale) > max(10_000, self._size // 2):  # building again is cheaper, and the set stays small
            self.clear()

    def clear(self) -> None:
        self._namespaces.clear()
        self._stale.clear()
        self._size = 0

    def search(self, code: int, text: str, limit: int) -> list[int]:
        """Ids, in id order, of the first `limit` nodes of namespace `code` whose name, type or an observation
        holds `text` once both are folded."""
        if limit <= 0:
            return []
        self._refresh()
        blocks = self._namespaces.get(code)
        if blocks is None:
            blocks = self._namespaces[code] = self._build(code)
        needle = folded(text)
        if SEPARATOR in needle:  # it could match across two texts of a block: each text is looked at alone
            return self._search_each(blocks, needle, limit)
        found: list[int] = []
        for number in sorted(blocks):
            block = blocks[number]
            haystack, starts, ids = block.text, block.starts, block.ids
            end = len(haystack)
            at = haystack.find(needle)
            while 0 <= at < end:  # an empty needle is found at the end too, inside no node
                k = bisect_right(starts, at) - 1
                found.append(ids[k])
                if len(found) >= limit:
                    return found
                at = haystack.find(needle, starts[k + 1])  # once per node: on from the next one
        return found

    def _search_each(self, blocks: dict[int, _Block], needle: str, limit: int) -> list[int]:
        found: list[int] = []
        for number in sorted(blocks):
            for node_id, _, name, type_, observations in self._texts(blocks[number].ids):
                if any(needle in folded(part) for part in (name, type_, *(observations or ()))):
                    found.append(node_id)
                    if len(found) >= limit:
                        return found
        return found

    def _build(self, code: int) -> dict[int, _Block]:
        grouped: dict[int, dict[int, str]] = {}
        for node_id, _, name, type_, observations in self._texts(self._members(code)):
            grouped.setdefault(node_id // BLOCK, {})[node_id] = _part(name, type_, observations)
        self._size += sum(len(parts) for parts in grouped.values())
        return {number: _Block(parts) for number, parts in grouped.items()}

    def _refresh(self) -> None:
        """Fold again the nodes written since, and join again the blocks that held or now hold them."""
        if not self._stale:
            return
        stale, self._stale = sorted(self._stale), set()
        now = {node_id: (code, _part(name, type_, observations))  # a deleted node is absent
               for node_id, code, name, type_, observations in self._texts(stale)}
        numbers: dict[int, list[int]] = {}
        for node_id in stale:
            numbers.setdefault(node_id // BLOCK, []).append(node_id)
        for code, blocks in self._namespaces.items():
            for number, ids in numbers.items():
                block = blocks.get(number)
                held = [] if block is None else [node_id for node_id in ids if _holds(block.ids, node_id)]
                wanted = {node_id: now[node_id][1] for node_id in ids if now.get(node_id, (-1,))[0] == code}
                if not held and not wanted:
                    continue
                parts = block.parts() if block is not None else {}
                before = len(parts)
                for node_id in held:  # out of the block, and back in with its new texts if still of this namespace
                    del parts[node_id]
                parts.update(wanted)
                self._size += len(parts) - before
                if parts:
                    blocks[number] = _Block(parts)
                else:
                    del blocks[number]


def _holds(ids: list[int], node_id: int) -> bool:
    at = bisect_right(ids, node_id) - 1
    return at >= 0 and ids[at] == node_id


def _part(name: str, type_: str, observations: Sequence[str] | None) -> str:
    """A node's texts folded, each followed by SEPARATOR (so a part is never empty)."""
    texts = (name, type_, *observations) if observations else (name, type_)
    joined = SEPARATOR.join(texts) + SEPARATOR
    # All ASCII (most nodes): folded at once, as `folded` would each text (SEPARATOR is ASCII, and stays).
    return joined.lower() if joined.isascii() else "".join(folded(text) + SEPARATOR for text in texts)
