"""Name normalisation: the rule that decides when two names denote the same entity.

It is part of the contract: the core builds keys with it and stores keep keys unique per namespace.
"""

import functools
import re
import unicodedata

_SPACE = re.compile(r"\s+")
#: The combining marks (Unicode categories Mn and Mc), as ranges for a character class. They are part of the word
#: they sit in, but `re`'s \w (letters and digits) does not count them, so without them "हिन्दी" (Hindi) would be
#: the words "ह", "न", "द": the vowel signs and viramas of Indic scripts, Thai and Tamil vowels, kana voicing marks.
#: Written out rather than computed from `unicodedata` at import (a pass over the code points costs ~25 ms at every
#: start); tests/unit/test_tokens_scripts.py checks it is exactly the marks of the running Python's Unicode version
#: (this one is Unicode 14.0, Python 3.11) and prints the class to paste when it is not.
MARKS = (
    "\u0300-\u036f\u0483-\u0487\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06dc\u06df-\u06e4\u06e7\u06e8\u06ea-\u06ed\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3\u07fd"
    "\u0816-\u0819\u081b-\u0823\u0825-\u0827\u0829-\u082d\u0859-\u085b\u0898-\u089f\u08ca-\u08e1\u08e3-\u0903"
    "\u093a-\u093c\u093e-\u094f\u0951-\u0957\u0962\u0963\u0981-\u0983\u09bc\u09be-\u09c4\u09c7\u09c8\u09cb-\u09cd"
    "\u09d7\u09e2\u09e3\u09fe\u0a01-\u0a03\u0a3c\u0a3e-\u0a42\u0a47\u0a48\u0a4b-\u0a4d\u0a51\u0a70\u0a71\u0a75"
    "\u0a81-\u0a83\u0abc\u0abe-\u0ac5\u0ac7-\u0ac9\u0acb-\u0acd\u0ae2\u0ae3\u0afa-\u0aff\u0b01-\u0b03\u0b3c"
    "\u0b3e-\u0b44\u0b47\u0b48\u0b4b-\u0b4d\u0b55-\u0b57\u0b62\u0b63\u0b82\u0bbe-\u0bc2\u0bc6-\u0bc8\u0bca-\u0bcd"
    "\u0bd7\u0c00-\u0c04\u0c3c\u0c3e-\u0c44\u0c46-\u0c48\u0c4a-\u0c4d\u0c55\u0c56\u0c62\u0c63\u0c81-\u0c83\u0cbc"
    "\u0cbe-\u0cc4\u0cc6-\u0cc8\u0cca-\u0ccd\u0cd5\u0cd6\u0ce2\u0ce3\u0d00-\u0d03\u0d3b\u0d3c\u0d3e-\u0d44"
    "\u0d46-\u0d48\u0d4a-\u0d4d\u0d57\u0d62\u0d63\u0d81-\u0d83\u0dca\u0dcf-\u0dd4\u0dd6\u0dd8-\u0ddf\u0df2\u0df3"
    "\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ecd\u0f18\u0f19\u0f35\u0f37\u0f39\u0f3e\u0f3f"
    "\u0f71-\u0f84\u0f86\u0f87\u0f8d-\u0f97\u0f99-\u0fbc\u0fc6\u102b-\u103e\u1056-\u1059\u105e-\u1060"
    "\u1062-\u1064\u1067-\u106d\u1071-\u1074\u1082-\u108d\u108f\u109a-\u109d\u135d-\u135f\u1712-\u1715"
    "\u1732-\u1734\u1752\u1753\u1772\u1773\u17b4-\u17d3\u17dd\u180b-\u180d\u180f\u1885\u1886\u18a9\u1920-\u192b"
    "\u1930-\u193b\u1a17-\u1a1b\u1a55-\u1a5e\u1a60-\u1a7c\u1a7f\u1ab0-\u1abd\u1abf-\u1ace\u1b00-\u1b04"
    "\u1b34-\u1b44\u1b6b-\u1b73\u1b80-\u1b82\u1ba1-\u1bad\u1be6-\u1bf3\u1c24-\u1c37\u1cd0-\u1cd2\u1cd4-\u1ce8"
    "\u1ced\u1cf4\u1cf7-\u1cf9\u1dc0-\u1dff\u20d0-\u20dc\u20e1\u20e5-\u20f0\u2cef-\u2cf1\u2d7f\u2de0-\u2dff"
    "\u302a-\u302f\u3099\u309a\ua66f\ua674-\ua67d\ua69e\ua69f\ua6f0\ua6f1\ua802\ua806\ua80b\ua823-\ua827\ua82c"
    "\ua880\ua881\ua8b4-\ua8c5\ua8e0-\ua8f1\ua8ff\ua926-\ua92d\ua947-\ua953\ua980-\ua983\ua9b3-\ua9c0\ua9e5"
    "\uaa29-\uaa36\uaa43\uaa4c\uaa4d\uaa7b-\uaa7d\uaab0\uaab2-\uaab4\uaab7\uaab8\uaabe\uaabf\uaac1\uaaeb-\uaaef"
    "\uaaf5\uaaf6\uabe3-\uabea\uabec\uabed\ufb1e\ufe00-\ufe0f\ufe20-\ufe2f\U000101fd\U000102e0"
    "\U00010376-\U0001037a\U00010a01-\U00010a03\U00010a05\U00010a06\U00010a0c-\U00010a0f\U00010a38-\U00010a3a"
    "\U00010a3f\U00010ae5\U00010ae6\U00010d24-\U00010d27\U00010eab\U00010eac\U00010f46-\U00010f50"
    "\U00010f82-\U00010f85\U00011000-\U00011002\U00011038-\U00011046\U00011070\U00011073\U00011074"
    "\U0001107f-\U00011082\U000110b0-\U000110ba\U000110c2\U00011100-\U00011102\U00011127-\U00011134"
    "\U00011145\U00011146\U00011173\U00011180-\U00011182\U000111b3-\U000111c0\U000111c9-\U000111cc"
    "\U000111ce\U000111cf\U0001122c-\U00011237\U0001123e\U000112df-\U000112ea\U00011300-\U00011303"
    "\U0001133b\U0001133c\U0001133e-\U00011344\U00011347\U00011348\U0001134b-\U0001134d\U00011357"
    "\U00011362\U00011363\U00011366-\U0001136c\U00011370-\U00011374\U00011435-\U00011446\U0001145e"
    "\U000114b0-\U000114c3\U000115af-\U000115b5\U000115b8-\U000115c0\U000115dc\U000115dd\U00011630-\U00011640"
    "\U000116ab-\U000116b7\U0001171d-\U0001172b\U0001182c-\U0001183a\U00011930-\U00011935\U00011937\U00011938"
    "\U0001193b-\U0001193e\U00011940\U00011942\U00011943\U000119d1-\U000119d7\U000119da-\U000119e0\U000119e4"
    "\U00011a01-\U00011a0a\U00011a33-\U00011a39\U00011a3b-\U00011a3e\U00011a47\U00011a51-\U00011a5b"
    "\U00011a8a-\U00011a99\U00011c2f-\U00011c36\U00011c38-\U00011c3f\U00011c92-\U00011ca7\U00011ca9-\U00011cb6"
    "\U00011d31-\U00011d36\U00011d3a\U00011d3c\U00011d3d\U00011d3f-\U00011d45\U00011d47\U00011d8a-\U00011d8e"
    "\U00011d90\U00011d91\U00011d93-\U00011d97\U00011ef3-\U00011ef6\U00016af0-\U00016af4\U00016b30-\U00016b36"
    "\U00016f4f\U00016f51-\U00016f87\U00016f8f-\U00016f92\U00016fe4\U00016ff0\U00016ff1\U0001bc9d\U0001bc9e"
    "\U0001cf00-\U0001cf2d\U0001cf30-\U0001cf46\U0001d165-\U0001d169\U0001d16d-\U0001d172\U0001d17b-\U0001d182"
    "\U0001d185-\U0001d18b\U0001d1aa-\U0001d1ad\U0001d242-\U0001d244\U0001da00-\U0001da36\U0001da3b-\U0001da6c"
    "\U0001da75\U0001da84\U0001da9b-\U0001da9f\U0001daa1-\U0001daaf\U0001e000-\U0001e006\U0001e008-\U0001e018"
    "\U0001e01b-\U0001e021\U0001e023\U0001e024\U0001e026-\U0001e02a\U0001e130-\U0001e136\U0001e2ae"
    "\U0001e2ec-\U0001e2ef\U0001e8d0-\U0001e8d6\U0001e944-\U0001e94a\U000e0100-\U000e01ef"
)
#: A word of names: a letter or digit (or '_'), then letters, digits, marks and the punctuation names hold ("#" of
#: "C#" too, so that a text naming C# gives the key "c#", not "c").
_WORD = re.compile(rf"\w[\w'’.&+#\-{MARKS}]*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
#: A word of a relation type: letters and digits, and the marks after them (a mark continues its letter's word). The
#: lookahead spares ASCII the check of the big class (marks start at U+0300), as `ports.text.WORD_RUN` does.
_LOOSE_WORD = re.compile(rf"[^\W_]+(?:(?=[^\x00-\u02ff])[{MARKS}]+[^\W_]*)*", re.UNICODE)
#: The ASCII punctuation (Unicode category P) written as symbols, which loose forms keep (`loose_key`).
NAME_SYMBOLS = "#%&*@"
#: What a word of a loose form may not follow to start with a period (".NET", ".env"): a letter, digit or mark, "_",
#: a period or a kept symbol. Written as what it may follow: nothing, a space, a control character, or the ASCII
#: punctuation loose forms drop (beyond ASCII, `_loose_symbol` has made such characters spaces).
_NO_WORD_BEFORE = r"(?<![^\s\x00-\x1f\x7f!\"'(),\-/:;?\[\\\]^`{}])"
#: A loose form's word (`loose_key`): a period that starts it before a letter or digit (`_NO_WORD_BEFORE`), then
#: letters, digits and kept symbols (`NAME_SYMBOLS`, the ASCII symbols but the modifiers "^" and "`", and beyond
#: ASCII every character left by `_loose_symbol` that is no letter, digit, space or mark), with the marks after
#: them. The lookaheads spare ASCII the check of the big classes, as in `_LOOSE_WORD`.
_KEPT = rf"[^\W_]|[{re.escape(NAME_SYMBOLS)}$+<=>|~]|(?=[^\x00-\x7f])[^\w\s{MARKS}]"
_LOOSE_NAME_WORD = re.compile(
    rf"(?:{_NO_WORD_BEFORE}\.(?=[^\W_]))?(?:{_KEPT})+(?:(?=[^\x00-\u02ff])[{MARKS}]+(?:{_KEPT})*)*"
)
#: `_LOOSE_NAME_WORD` for a case-folded ASCII name: the same words, with smaller classes.
_LOOSE_ASCII_WORD = re.compile(rf"(?:{_NO_WORD_BEFORE}\.(?=[a-z0-9]))?[a-z0-9{re.escape(NAME_SYMBOLS)}$+<=>|~]+")
#: A character beyond ASCII that is no letter, digit, space or mark: punctuation, a symbol, a format character.
_LOOSE_OTHER = re.compile(rf"(?=[^\x00-\x7f])[^\w\s{MARKS}]")
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


def clean_name(name: str) -> str:
    """`name` as stored: invisible characters (`INVISIBLE`) removed, each run of whitespace (line breaks and tabs
    included: a name is one line) made one space, trimmed.

    Every way in (the tools, import, ingest) stores names through this, so 'Al<ZERO WIDTH SPACE>ice' is stored as
    'Alice' and '  Maya  Chen ' as 'Maya Chen': the key ignores spacing already, so a name stored with a double space
    would show in every result of a later write spelt with one (`merged_into`). Names stored before keep theirs.
    """
    return _SPACE.sub(" ", INVISIBLE.sub("", name)).strip()


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
    'orders_db' ~ 'orders-db', 'Acme Inc.' ~ 'Acme Inc', 'Łukasz' ~ 'Lukasz' (`unaccented`).

    Punctuation separates words, and one name is written with it in several ways, so it is dropped (hyphens,
    underscores, apostrophes, brackets, slashes, periods between words or at the end). A symbol is part of the name:
    'C', 'C++' and 'C#' are three languages, 'A*' is not 'A', nor '@alice' 'alice', '$HOME' 'HOME', 'AT&T' 'AT T'. So
    the symbols are kept: Unicode's symbols ('+', '$', '€', '°', '©'; categories Sm, Sc and So, not the modifier
    symbols Sk such as '^' and '`', accents written alone) and the ASCII punctuation written as symbols
    (`NAME_SYMBOLS`: '#', '%', '&', '*', '@'), as is a period that starts a word ('.NET', '.env').

    Looser than `entity_key`, so it is only used to spot likely duplicates, never to make keys unique. Stores keep
    it for each name (plugins/duckdb/schema.py `NAME_KEYS_VERSION`: a change here must rebuild them).
    """
    if name.isascii():  # no accents to drop, nothing to normalise: the same result without the per-character pass
        return " ".join(_LOOSE_ASCII_WORD.findall(name.casefold()))
    return " ".join(_LOOSE_NAME_WORD.findall(_LOOSE_OTHER.sub(_loose_symbol, unaccented(name))))


def _loose_symbol(found: re.Match[str]) -> str:
    """A character beyond ASCII that is no letter, digit or mark, as a loose form has it: a symbol is kept (not a
    modifier symbol, Sk: an accent written alone); punctuation and format characters separate words."""
    category = unicodedata.category(found[0])
    return found[0] if category[0] == "S" and category != "Sk" else " "


def dotless_i_key(key: str) -> str:
    """An `entity_key` with the i's of Turkish and Azerbaijani made one letter: their capital "İ" case-folds to "i"
    and a combining dot, and their "ı" upper-cases to "I", so a name and the same name in other case
    ("İstanbul", "Istanbul", "ISTANBUL") have different keys. For looking names up ignoring case; never a key that
    must be unique (it would make "ıslak" and "islak", other words in Turkish, one)."""
    return key.replace("i\u0307", "i").replace("ı", "i")


def relation_type(label: str) -> str:
    """Edge types are UPPER_SNAKE_CASE so 'works at' and 'WORKS_AT' are one type (a word keeps its combining
    marks: "काम करता है" is काम_करता_है)."""
    return "_".join(_LOOSE_WORD.findall(unicodedata.normalize("NFKC", label))).upper()


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
