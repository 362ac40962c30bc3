"""Where the page marks a query's words in a text: the character ranges of the words keyword search matches.

The server says what to mark, and the page only wraps the ranges it is given in <mark>: a second copy of the
tokenizer's folding in JavaScript (Ł as l, ß as ss, two-letter pieces of Chinese, marks and joiners kept inside a
word ...) would drift from it. The ranges come from the tokenizer itself (ports/text.py): the text is folded as
`tokens` folds it, keeping where each folded character came from, split into the same runs, and each run gives
the words `tokens` gives it; a word is marked when its term (`stemmed`, as the keyword index stores it) is one of
the query's terms. That the words found this way are exactly `tokens(text)` is checked on every text: a change of
the tokenizer that this module does not follow fails loudly instead of marking other words.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from duckgraph.ports.names import unaccented
from duckgraph.ports.text import _GLYPH_CONTROLS, _JOINER, STOP_WORDS, _split_runs, stemmed, tokens


class MarkingError(RuntimeError):
    """The words found with their places differ from `tokens(text)`: a bug of this module, never of the text."""


def marks(text: str, wanted: set[str]) -> list[list[int]]:
    """The [start, end) ranges (in characters, i.e. code points, of `text`) of the words of `text` whose term is in
    `wanted` (terms as `ports.terms` gives them), in order; touching ranges joined."""
    if not wanted or not text:
        return []
    folded, origin = _folded(text)
    found = list(_words(folded))
    if [word for word, _, _ in found] != tokens(text):
        raise MarkingError(f"the marked words of {text[:80]!r} are not those the keyword index reads in it")
    hits = sorted((origin[start][0], origin[end - 1][1])
                  for (_, start, end), term in zip(found, stemmed([word for word, _, _ in found])) if term in wanted)
    ranges: list[list[int]] = []
    for first, last in hits:  # a joined run's whole comes after its parts: sorted, then overlaps joined
        if ranges and first <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    return ranges


def _words(folded: str):
    """The words `tokens` reads in an already folded text, each with its [start, end) in it."""
    runs, cjk_letter = _split_runs()
    for match in runs.finditer(folded):
        if match[1]:  # Han, kana or Hangul: overlapping pairs of letters (a lone letter as itself)
            letters = list(cjk_letter.finditer(folded, match.start(), match.end()))
            pairs = [(letters[0], letters[0])] if len(letters) == 1 else zip(letters, letters[1:])
            for first, second in pairs:
                yield folded[first.start():second.end()], first.start(), second.end()
            continue
        run, start = match[0], match.start()
        if _JOINER.search(run) is None:
            if run not in STOP_WORDS:
                yield run, start, match.end()
            continue
        at = start
        for part in _JOINER.split(run):  # the parts, then the whole run
            if part not in STOP_WORDS:
                yield part, at, at + len(part)
            at += len(part) + 1
        yield run, start, match.end()


def _folded(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` folded as `tokens` folds it, and for each folded character the [start, end) of the characters of
    `text` it comes from (a letter with the marks on it)."""
    if text.isascii():  # lower case is all folding does to ASCII
        return text.casefold(), [(i, i + 1) for i in range(len(text))]
    clusters = _clusters(text)
    folds = [_fold(text[start:end]) for start, end in clusters]
    whole = _GLYPH_CONTROLS.sub("", unaccented(text))
    if "".join(folds) != whole:
        # Folding joined letters of two clusters (Hangul jamo compose into a syllable): fold those together.
        clusters, folds = _joined(text, clusters, folds)
        if "".join(folds) != whole:
            raise MarkingError(f"cannot place the folded characters of {text[:80]!r}")
    origin: list[tuple[int, int]] = []
    for cluster, fold in zip(clusters, folds):
        origin.extend([cluster] * len(fold))
    return whole, origin


def _clusters(text: str) -> list[tuple[int, int]]:
    """`text` as letters, each with the marks, joiners and variation selectors after it: folding may change or drop
    those only in their letter's company."""
    return [match.span() for match in _cluster().finditer(text)]


@functools.cache
def _cluster() -> re.Pattern[str]:
    """A character and the combining marks (any of Unicode's, not only the tokenizer's `MARKS`), zero width
    (non-)joiners and variation selectors after it. Built on first use (a pass over Unicode, ~0.3 s)."""
    ranges: list[list[int]] = []
    for code in range(0x300, 0x110000):
        if unicodedata.category(chr(code)) in ("Mn", "Mc", "Me"):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    marks = "".join(f"{re.escape(chr(first))}-{re.escape(chr(last))}" for first, last in ranges)
    return re.compile(f"(?s).[{marks}{_GLYPH_CONTROLS.pattern[1:-1]}]*")


def _joined(text: str, clusters: list[tuple[int, int]],
            folds: list[str]) -> tuple[list[tuple[int, int]], list[str]]:
    """The clusters with each one whose folding depends on the one before merged into it."""
    merged, merged_folds = [clusters[0]], [folds[0]]
    for cluster, fold in zip(clusters[1:], folds[1:]):
        together = _fold(text[merged[-1][0]:cluster[1]])
        if together != merged_folds[-1] + fold:
            merged[-1], merged_folds[-1] = (merged[-1][0], cluster[1]), together
        else:
            merged.append(cluster)
            merged_folds.append(fold)
    return merged, merged_folds


@functools.lru_cache(maxsize=65536)
def _fold(text: str) -> str:
    """A cluster as `tokens` folds a text that is not ASCII before splitting it (cached: texts repeat letters)."""
    return _GLYPH_CONTROLS.sub("", unaccented(text))

