"""Name normalisation: the rule that decides when two names denote the same entity.

It is part of the contract: the core builds keys with it and stores keep keys unique per namespace.
"""

import functools
import re
import unicodedata

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[\w][\w'’.&+-]*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
_LOOSE_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: Characters a reader cannot see: Unicode's format characters (category Cf: zero-width space, joiners and
#: non-joiner, BOM, soft hyphen, the bidirectional controls such as RLO, LRO and PDF, the tag characters) and the
#: control characters (Cc) that are not whitespace (C0 such as NUL and ESC, DEL, C1). They make two names that
#: look the same different, or a name look like another, so names drop them. Written out rather than computed from
#: `unicodedata` at import (a pass over 1.1M code points); tests/unit/test_names.py checks the class still covers
#: every such character of the running Python's Unicode version (this one covers Unicode 15.1).
INVISIBLE = re.compile(
    "[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
#: Whitespace that breaks a line or is a control character: a name is one line, so these become spaces.
_LINE_SPACE = re.compile("[\t\n\x0b\x0c\r\x1c-\x1f\x85\u2028\u2029]")


def clean_name(name: str) -> str:
    """`name` as stored: invisible characters (`INVISIBLE`) removed, line breaks and tabs made spaces, trimmed.

    Every way in (the tools, import, ingest) stores names through this, so 'Al<ZERO WIDTH SPACE>ice' is stored as
    'Alice'.
    """
    return _LINE_SPACE.sub(" ", INVISIBLE.sub("", name)).strip()


def no_control_characters(value: str) -> str:
    """`value`, or a ValueError when it holds control characters other than tabs and line breaks (NUL, ESC and its
    terminal sequences, DEL, C1): they have no place in a fact and would reach terminals and prompts as they are."""
    if any((ord(ch) < 32 and ch not in "\t\n\r") or 0x7F <= ord(ch) <= 0x9F for ch in value):
        raise ValueError("must not contain control characters")
    return value


def entity_key(name: str) -> str:
    """Case-, width- and whitespace-insensitive key: 'Journal of  Math ' and 'journal of math' are one.

    Invisible characters are ignored too, so a name looked up with a zero-width space still finds its entity."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", INVISIBLE.sub("", name))).strip().casefold()


#: The marks `unaccented` drops: accents, those a writer may leave out and still spell the same word. The
#: Combining Diacritical Marks blocks (and the Cyrillic block's own marks), which Latin, Greek and Cyrillic letters
#: decompose into ("é" is "e" and U+0301), and the optional vowel points of Hebrew and Arabic (texts leave them out;
#: NFKD also splits the hamza and madda off alef there). Every other combining mark is kept: in kana, Indic, Thai
#: and most other scripts a mark makes another letter or sound (the voicing marks of kana: バス "bus", パス "pass",
#: ゴトウ and コトウ are other names), so dropping them would make different names one.
_ACCENTS = re.compile(
    "[\u0300-\u036f\u0483-\u0487\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"  # diacritical blocks
    "\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7"  # Hebrew points and cantillation (not maqaf, paseq)
    "\u064b-\u065f\u0670]"  # Arabic harakat, tanwin, shadda, sukun, hamza and madda marks, superscript alef
)
#: Latin letters that carry their "accent" inside (a stroke, a ligature, a letter of their own) and so have no
#: decomposition: read as the letters a writer without them types ("Łukasz" as "Lukasz", "Søren" as "Soren",
#: "Æsir" as "Aesir"). Lower case: applied after case folding (which already gives "ss" for "ß"; "ŀ" is "l·" after
#: NFKC). Written out rather than taken from a transliteration library, which would also turn other scripts into
#: Latin letters (and the best known, Unidecode, is GPL-licensed).
_LETTER_FOLDS = str.maketrans({
    "ł": "l", "ø": "o", "đ": "d", "ħ": "h", "æ": "ae", "œ": "oe", "þ": "th", "ð": "d", "ı": "i", "ŧ": "t",
})


def unaccented(text: str) -> str:
    """`text` case-folded, without its accents (`_ACCENTS`) and with `_LETTER_FOLDS` applied: 'Zoë Müller' gives
    'zoe muller', 'Łukasz' 'lukasz', 'İstanbul' 'istanbul', while 'パス' stays 'パス'. The form `loose_key` and the
    keyword words (`ports.text.tokens`) are made of. Recomposed (NFC) at the end, so that a kept mark stays on its
    letter (NFKD splits 'パ' into 'ハ' and a mark that is no word character) and Hangul stays in syllables."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text))
    # Marks are dropped before case folding: folding turns the Greek iota subscript (U+0345, an accent) into a letter.
    bare = _ACCENTS.sub("", decomposed).casefold().translate(_LETTER_FOLDS)
    return unicodedata.normalize("NFC", bare)


def loose_key(name: str) -> str:
    """The key with accents and punctuation dropped: 'Aschenbrödel' ~ 'Aschenbrodel', 'Jean-Luc' ~ 'Jean Luc',
    'Łukasz' ~ 'Lukasz' (`unaccented`).

    Looser than `entity_key`, so it is only used to spot likely duplicates, never to make keys unique. Stores keep
    it for each name (plugins/duckdb/schema.py `NAME_KEYS_VERSION`: a change here must rebuild them).
    """
    if name.isascii():  # no accents to drop, nothing to normalise: the same result without the per-character pass
        return " ".join(_LOOSE_WORD.findall(name.casefold()))
    return " ".join(_LOOSE_WORD.findall(unaccented(name)))


def dotless_i_key(key: str) -> str:
    """An `entity_key` with the i's of Turkish and Azerbaijani made one letter: their capital "İ" case-folds to "i"
    and a combining dot, and their "ı" upper-cases to "I", so a name and the same name in other case
    ("İstanbul", "Istanbul", "ISTANBUL") have different keys. For looking names up ignoring case; never a key that
    must be unique (it would make "ıslak" and "islak", other words in Turkish, one)."""
    return key.replace("i\u0307", "i").replace("ı", "i")


def relation_type(label: str) -> str:
    """Edge types are UPPER_SNAKE_CASE so 'works at' and 'WORKS_AT' are one type."""
    words = re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", label), re.UNICODE)
    return "_".join(words).upper()


def name_candidates(
    text: str, max_words: int = 6, *, proper_only: bool = False, caseless: bool = True
) -> set[str]:
    """Every run of up to `max_words` consecutive words of `text`, as entity keys.

    Finds entities named verbatim in a query without scanning every name in the graph. With `proper_only`,
    only runs written like a proper name: a word in the run holds a digit or a capital that does not merely
    start the text ("the city where Hank Snow died" gives "hank snow", not "city"), or, with `caseless`, a letter
    of a script without case (Chinese, Japanese, Korean, Arabic, Hebrew, Thai...: "王小明", "김민준", "محمد علي"),
    where nothing in the writing tells a name from other words. Such a run is a name only if it names a stored
    entity: pass `caseless=False` where the runs are not matched against stored names.
    """
    runs = _word_runs(text, max_words)
    if not proper_only:
        return set(runs)
    wanted = _CASED | (_CASELESS if caseless else 0)
    return {key for key, marks in runs.items() if marks & wanted}


#: What `_word_runs` notes of a run: a word written like a proper name (a capital past the text's first letter, a
#: digit), a word holding a letter of a script without case (Unicode category Lo, "other letter").
_CASED, _CASELESS = 1, 2


@functools.lru_cache(maxsize=64)  # a search asks for both kinds of the same query's runs
def _word_runs(text: str, max_words: int) -> dict[str, int]:
    """Each run's key, and what some run giving that key is written like (`_CASED`, `_CASELESS`)."""
    # Each word as written ("Dr.", "U.S.": keys keep periods) and bare ("Louis" in "...St. Louis."), as keys:
    # the text is NFKC-normalised once and words hold no spaces, so a run's key is its words' keys joined by
    # spaces (what entity_key of the run would give, without normalising each run again).
    words: list[tuple[str, str, int]] = []
    text = unicodedata.normalize("NFKC", INVISIBLE.sub("", text))  # as in entity_key

    for match in _WORD.finditer(text):
        word = _POSSESSIVE.sub("", match.group()).rstrip("'’")
        if bare := word.strip(".'’"):
            marked = word[1:] if match.start() == 0 else word
            marks = _CASED if any(char.isupper() or char.isdigit() for char in marked) else 0
            if not word.isascii() and any(unicodedata.category(char) == "Lo" for char in word):
                marks |= _CASELESS
            words.append((word.casefold(), bare.casefold(), marks))
    found: dict[str, int] = {}
    for start in range(len(words)):
        for length in range(1, min(max_words, len(words) - start) + 1):
            run = words[start : start + length]
            marks = 0
            for _, _, mark in run:
                marks |= mark
            for inner in (" ".join(w for w, _, _ in run[:-1]), " ".join(b for _, b, _ in run[:-1])):
                for last in run[-1][:2]:
                    key = f"{inner} {last}" if inner else last
                    found[key] = found.get(key, 0) | marks
    return found
