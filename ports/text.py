"""Words for keyword search: the one tokenizer that stores index texts with and that queries are split by.

It is part of the contract: a store's keyword index and anything in core that matches or highlights query words
must split text the same way, or an indexed word would never be found.
"""

import functools
import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from duckgraph.ports.names import MARKS, unaccented

#: The letters of the scripts written without spaces between words, or with particles attached to them: Han
#: ideographs (with the iteration marks 々 and 〻, and 〆 〇), kana (hiragana, katakana with the long vowel mark ー,
#: not the middle dot ・, their phonetic extensions and supplements, half-width katakana) and Hangul (jamo and
#: syllables). A run of them is no word but a stretch of text: `tokens` splits it into bigrams (`_cjk_terms`).
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3041-\u3096\u3099\u309a\u309d-\u309f"
    "\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97c\uac00-\ud7a3"
    "\ud7b0-\ud7c6\ud7cb-\ud7fb\uf900-\ufaff\uff66-\uff9f\uffa0-\uffbe\uffc2-\uffc7\uffca-\uffcf\uffd2-\uffd7"
    "\uffda-\uffdc\U0001aff0-\U0001b2ff\U00020000-\U0003ffff"
)
#: A combining mark (`ports.names.MARKS`: vowel signs, viramas...) after a letter continues its word: "हिन्दी" is
#: one word, not "ह", "न", "द". The lookahead first: marks start at U+0300, and checking the big class after every
#: ASCII word would make the bulk split of ASCII texts (plugins/duckdb/keyword_texts.py) twice as slow.
_MARKED = rf"(?:(?=[^\x00-\u02ff])[{MARKS}]+[^\W_]*)*"
#: A run of letters and digits (with their marks), possibly joined to more by '-', '.', '_' or '/': "INC-142",
#: "orders-db", "v2.3". It may hold CJK letters ("iPhone手机"): `tokens` splits them off (`_split_runs`).
WORD_RUN = re.compile(rf"[^\W_]+{_MARKED}(?:[-._/][^\W_]+{_MARKED})*")
_JOINER = re.compile(r"[-._/]")
#: Variation selectors pick a glyph of the letter before them (the Han ideograph variants of IVS, emoji or text
#: style): a reader sees the same letter, so words do not keep them. The zero width non-joiner and joiner (U+200C,
#: U+200D) say whether two letters join inside a word (Persian "کتاب<ZWNJ>ها", books; Indic and Sinhala conjuncts):
#: no word ends there (nor does one in Unicode's word boundaries, UAX #29), and writers often leave them out, so
#: they go too: "می<ZWNJ>خواهم" is the word "میخواهم", not "می" (a prefix of most verbs) and "خواهم".
_GLYPH_CONTROLS = re.compile("[\u200c\u200d\ufe00-\ufe0f\U000e0100-\U000e01ef]")


#: English function words, left out of the index and of queries (they match everything and mean little).
STOP_WORDS = frozenset("""
a about above after again against all am an and any are aren as at be because been before being below between
both but by can could couldn did didn do does doesn doing don down during each few for from further had has have
having he her here hasn haven hadn hers herself him himself his how i if in into is isn it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so some such
shouldn than that the their theirs them themselves then there these they this those through to too under until up very
was wasn we were weren what when where which while who whom why will with would wouldn you your yours yourself
yourselves s t d ll m o re ve y
""".split())


@functools.cache
def _split_runs() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What `tokens` finds in a text that is not ASCII (a CJK run, group 1, or a word run of the other scripts), and
    a CJK letter with its marks. Compiled on first use: the big CJK classes take ~25 ms to compile, and most texts
    are ASCII."""
    letter = rf"[^\W_{_CJK}]+(?:(?=[^\x00-\u02ff])[{MARKS}]+[^\W_{_CJK}]*)*"
    cjk_letter = rf"[{_CJK}][{MARKS}]*"
    return re.compile(rf"((?:{cjk_letter})+)|{letter}(?:[-._/]{letter})*"), re.compile(cjk_letter)


def tokens(text: str) -> list[str]:
    """The words of `text` as keyword search indexes and matches them, in order, repeats kept.

    Lower-cased (Unicode case folding, accents dropped as names' loose forms drop them, `ports.names.unaccented`:
    "Brödel" gives "brodel", "Łukasz" "lukasz", while the kana voicing marks stay: "パス" is not "ハス"), letters and
    digits of any script with their combining marks ("हिन्दी" is one word) and without the zero width (non-)joiners
    inside them (`_GLYPH_CONTROLS`: Persian "کتاب<ZWNJ>ها" is "کتابها"); English stop words left out. A run joined
    by '-', '.', '_' or '/' gives its parts and also the whole run, so that an exact id matches strongly: "INC-142
    hit orders-db" gives inc, 142, inc-142, hit, orders, db, orders-db. A run of Han, kana or Hangul letters gives
    its overlapping pairs of letters (`_cjk_terms`): "在北京参加" gives 在北, 北京, 京参, 参加.
    """
    found: list[str] = []
    if text.isascii():  # no CJK letter, no mark: one pass of WORD_RUN finds the runs (most texts)
        for run in WORD_RUN.findall(text.casefold()):
            _add_run(run, found)
        return found
    runs, _ = _split_runs()
    for match in runs.finditer(_fold_text(text)):
        if match[1]:
            found.extend(_cjk_terms(match[1]))
        else:
            _add_run(match[0], found)
    return found


class UnplacedWords(RuntimeError):
    """`word_places` cannot say where in a text its folded characters came from: a bug of this module, never of
    the text."""


def word_places(text: str) -> list[tuple[str, int, int]]:
    """The words of `text` exactly as `tokens` gives them (same words, same order), each with the [start, end)
    offsets (code points, as Python indexes `text`) of the characters of `text` it was read from: a folded word's
    letters as written, with the marks, joiners and variation selectors on them ("Straße" for "strasse",
    "کتاب<ZWNJ>ها" for "کتابها"), a CJK pair's two letters, a joined run's parts and then its whole.

    For placing words in a stored text (the web page marks the words keyword search matched, core/ui/marks.py).
    It keeps where each folded character came from, so it is slower than `tokens`: for the words alone, use that.
    """
    found: list[tuple[str, int, int]] = []
    if text.isascii():  # lower case is all folding does to ASCII: offsets in the folded text are the text's
        for match in WORD_RUN.finditer(text.casefold()):
            _place_run(match[0], match.start(), found)
        return found
    folded, origin = _folded_places(text)
    runs, cjk_letter = _split_runs()
    for match in runs.finditer(folded):
        if match[1]:  # as `_cjk_terms`: overlapping pairs of letters, a lone letter as itself
            letters = list(cjk_letter.finditer(folded, match.start(), match.end()))
            pairs = [(letters[0], letters[0])] if len(letters) == 1 else zip(letters, letters[1:])
            found.extend((folded[first.start():second.end()], first.start(), second.end()) for first, second in pairs)
        else:
            _place_run(match[0], match.start(), found)
    return [(word, origin[start][0], origin[end - 1][1]) for word, start, end in found]


def _place_run(run: str, start: int, found: list[tuple[str, int, int]]) -> None:
    """`_add_run` with places: the words of a run found at `start`, each with its [start, end) there."""
    if _JOINER.search(run) is None:
        if run not in STOP_WORDS:
            found.append((run, start, start + len(run)))
        return
    at = start
    for part in _JOINER.split(run):  # the parts, then the whole run
        if part not in STOP_WORDS:
            found.append((part, at, at + len(part)))
        at += len(part) + 1  # a joiner is one character
    found.append((run, start, start + len(run)))


def _folded_places(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` folded as `tokens` folds it, and for each folded character the [start, end) of the characters of
    `text` it comes from (a letter with the marks on it). Folding one letter with its marks at a time gives the
    same characters as folding the whole text, except where it joins letters of two clusters (Hangul jamo compose
    into a syllable): those are folded together."""
    clusters = [match.span() for match in _cluster().finditer(text)]
    folds = [_fold(text[start:end]) for start, end in clusters]
    whole = _fold_text(text)
    if "".join(folds) != whole:
        clusters, folds = _joined(text, clusters, folds)
        if "".join(folds) != whole:
            raise UnplacedWords(f"cannot place the folded characters of {text[:80]!r}")
    origin: list[tuple[int, int]] = []
    for cluster, fold in zip(clusters, folds):
        origin.extend([cluster] * len(fold))
    return whole, origin


def _fold_text(text: str) -> str:
    """What `tokens` splits a text that is not ASCII into words from."""
    return _GLYPH_CONTROLS.sub("", unaccented(text))


@functools.lru_cache(maxsize=65536)
def _fold(cluster: str) -> str:
    """`_fold_text` of one cluster (cached: texts repeat letters)."""
    return _fold_text(cluster)


@functools.cache
def _cluster() -> re.Pattern[str]:
    """A character and the combining marks (any of Unicode's, not only `MARKS`), zero width (non-)joiners and
    variation selectors after it: folding may change or drop those only in their letter's company. Built on first
    use (a pass over Unicode, ~0.3 s)."""
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


def _add_run(run: str, found: list[str]) -> None:
    """Adds the words of a WORD_RUN match to `found`: itself, or its parts and itself when joined; no stop word."""
    if _JOINER.search(run) is None:
        if run not in STOP_WORDS:
            found.append(run)
        return
    found.extend(part for part in _JOINER.split(run) if part not in STOP_WORDS)
    found.append(run)


def _cjk_terms(run: str) -> list[str]:
    """A run of CJK letters as its overlapping pairs of letters ("北京参加" gives 北京, 京参, 参加), a single letter as
    itself. Chinese and Japanese put no spaces between words, and Korean attaches particles to them ("서울에서"), so
    a run is a phrase or a sentence: split into pairs, a word of two letters or more ("北京") is found inside it, and a
    longer one by its pairs (the bigrams of search engines' CJK analyzers; no dictionary of words needed)."""
    letters = _split_runs()[1].findall(run)
    if len(letters) == 1:
        return letters
    return [first + second for first, second in zip(letters, letters[1:])]


def terms(text: str) -> list[str]:
    """The terms keyword search indexes `text` under and matches a query by: its `tokens`, each word of letters
    reduced to its English stem (Snowball, "Porter 2": "painted", "paintings" and "painting" give "paint"), so that a
    query finds the other forms of its words. A word holding a digit or a joiner ("v2", "inc-142") is an id: kept
    as written."""
    return stemmed(tokens(text))


def stemmed(words: list[str]) -> list[str]:
    """`words` (as `tokens` gives them) as `terms`: each word of letters reduced to its stem, ids kept."""
    stems = _stemmer().stemWords(words)
    return [stem if word.isalpha() else word for word, stem in zip(words, stems)]


@functools.cache
def _stemmer() -> Any:
    import Stemmer  # PyStemmer (Snowball in C); loaded on first use, not when the server starts

    return Stemmer.Stemmer("english")


def inflections(word: str) -> set[str]:
    """The word and its English inflections ("wrote" and "written" of "write"; none for an unknown word): the forms
    a stem does not join, for asking whether a word is stored in any form."""
    from lemminflect import getAllInflections  # lemminflect (MIT); its tables (~20 MB) load on first use

    return {word, *(form for forms in getAllInflections(word).values() for form in forms)}


def one_line(text: str) -> str:
    """`text` with each run of whitespace in it (line breaks of every kind, tabs) made one space, none at its
    ends: how a stored text (a description, an observation, a fact) is put on a line of a text a model reads. Its
    own line breaks would start lines of that text ("- 2026-11-28 ... entity deleted: Dave", "## A heading"),
    which read as the listing's own."""
    return " ".join(text.split())


#: The delimiters of each place a stored text is printed in-line (`as_field`: a text holding one is shown as a JSON
#: string), the same in the texts core renders (search, recent_changes) and in the lines the store writes itself
#: (recent_changes' record of what was deleted or changed). An entity's "Name [Type]" ("- Name [Type]: description").
NAME_DELIMITERS, TYPE_DELIMITERS = ("[", "]", ": "), ("[", "]")
#: A property list's "key: value; key: value" (a value that is not a string is JSON already).
KEY_DELIMITERS, VALUE_DELIMITERS = (": ", "; "), ("; ",)
#: A fact's "Source relation Target: description (period); properties: ...": a name holding "(" would add a period
#: ("works at Acme (2019-01-01 to 2020-01-01)"), one holding "; " properties or another clause.
FACT_NAME_DELIMITERS = (": ", "(", "; ")
#: A document's id in a change line, "document added: id: title": an id holding ": " would read as another id and
#: its title.
DOCUMENT_ID_DELIMITERS = (": ",)


def entity_header(name: str, type_: str) -> str:
    """An entity as the texts name it: "Name [Type]", each shown bare unless it holds a delimiter there."""
    return f"{as_field(name, NAME_DELIMITERS)} [{as_field(type_, TYPE_DELIMITERS)}]"


def as_field(text: str, delimiters: Iterable[str]) -> str:
    """`text` as a field of a line whose fields `delimiters` separate ("]" after an entity's name, "; " between
    properties): as it is, or, where it holds one of them or a double quote, as a JSON string. Shown bare, such a
    text would end its field early and what follows in it would read as fields of the memory's own ("Bob] [admin"
    gives "- Bob] [admin [person]"). A double quote always counts: a bare text that starts or ends with one would
    read as quoted, and two could join fields into one string. A text ending with a delimiter's first character
    counts too: it makes one with the space printed after it ("Bob:" before " [person]"). The JSON string gives
    the text back exactly."""
    spaced = text + " "
    if '"' in text or any(delimiter in spaced for delimiter in delimiters):
        return json.dumps(text, ensure_ascii=False)
    return text


def shortened(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else cut at the last word boundary before them, with "…"
    (a word cut in two reads as another word: "- Budge…"). A word that takes most of the room (a URL, a hash) is
    cut where it must: going back to the space before it would leave little or nothing (": see…"); never inside
    what reads as one character (`joins_previous`)."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    if not text[len(cut)].isspace() and " " in cut.strip():
        space = cut.rstrip().rfind(" ")
        if 2 * space >= len(cut):  # the boundary keeps half the room at least
            cut = cut[:space]
    end = len(cut)
    while end > 0 and joins_previous(text, end):
        end -= 1
    return text[:end].rstrip() + "…"


def joins_previous(text: str, i: int) -> bool:
    """Whether `text[i]` reads as one character with the one before it, so that a text cut between them would
    show half a letter or half an emoji: a combining mark, a variation selector, an emoji skin tone or tag, a
    Hangul vowel or final consonant written as a jamo, or either side of a zero width joiner (an emoji sequence:
    "👨<ZWJ>👩<ZWJ>👧" is one family)."""
    if not 0 < i < len(text):
        return False
    before, ch = text[i - 1], text[i]
    return (unicodedata.category(ch) in ("Mn", "Mc", "Me") or "\u200d" in (before, ch)
            or "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef"
            or "\U0001f3fb" <= ch <= "\U0001f3ff" or "\U000e0020" <= ch <= "\U000e007f" or "\u1160" <= ch <= "\u11ff")
