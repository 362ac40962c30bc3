"""Where the page marks a query's words in a text: the character ranges of the words keyword search matches.

The server says what to mark, and the page only wraps the ranges it is given in <mark>: a second copy of the
tokenizer's folding in JavaScript (Ł as l, ß as ss, two-letter pieces of Chinese, marks and joiners kept inside a
word ...) would drift from it. The words and their places come from the tokenizer itself (`ports.text.word_places`),
and a word is marked when its term (`stemmed`, as the keyword index stores it) is one of the query's terms. That
the words placed are exactly `tokens(text)` is checked on every text: a change of one that the other does not
follow fails loudly instead of marking other words.
"""

from __future__ import annotations

from duckgraph.ports.text import UnplacedWords, stemmed, tokens, word_places


class MarkingError(RuntimeError):
    """The words found with their places differ from `tokens(text)`: a bug of the tokenizer, never of the text."""


def marks(text: str, wanted: set[str]) -> list[list[int]]:
    """The [start, end) ranges (in characters, i.e. code points, of `text`) of the words of `text` whose term is in
    `wanted` (terms as `ports.terms` gives them), in order; touching ranges joined."""
    if not wanted or not text:
        return []
    try:
        found = word_places(text)
    except UnplacedWords as exc:
        raise MarkingError(str(exc)) from exc
    words = [word for word, _, _ in found]
    if words != tokens(text):
        raise MarkingError(f"the marked words of {text[:80]!r} are not those the keyword index reads in it")
    hits = sorted((start, end) for (_, start, end), term in zip(found, stemmed(words)) if term in wanted)
    ranges: list[list[int]] = []
    for first, last in hits:  # a joined run's whole comes after its parts: sorted, then overlaps joined
        if ranges and first <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    return ranges
