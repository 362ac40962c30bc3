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


def loose_key(name: str) -> str:
    """The key with accents and punctuation dropped: 'Aschenbrödel' ~ 'Aschenbrodel', 'Jean-Luc' ~ 'Jean Luc'.

    Looser than `entity_key`, so it is only used to spot likely duplicates, never to make keys unique.
    """
    if name.isascii():  # no accents to drop, nothing to normalise: the same result without the per-character pass
        return " ".join(_LOOSE_WORD.findall(name.casefold()))
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name))
    bare = "".join(char for char in decomposed if not unicodedata.combining(char)).casefold()
    return " ".join(_LOOSE_WORD.findall(bare))


def relation_type(label: str) -> str:
    """Edge types are UPPER_SNAKE_CASE so 'works at' and 'WORKS_AT' are one type."""
    words = re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", label), re.UNICODE)
    return "_".join(words).upper()


def name_candidates(text: str, max_words: int = 6, *, proper_only: bool = False) -> set[str]:
    """Every run of up to `max_words` consecutive words of `text`, as entity keys.

    Finds entities named verbatim in a query without scanning every name in the graph. With `proper_only`,
    only runs written like a proper name: a word in the run holds a digit or a capital that does not merely
    start the text ("the city where Hank Snow died" gives "hank snow", not "city").
    """
    runs = _word_runs(text, max_words)
    return {key for key, proper in runs.items() if proper} if proper_only else set(runs)


@functools.lru_cache(maxsize=64)  # a search asks for both kinds of the same query's runs
def _word_runs(text: str, max_words: int) -> dict[str, bool]:
    """Each run's key, and whether some run giving that key is written like a proper name."""
    # Each word as written ("Dr.", "U.S.": keys keep periods) and bare ("Louis" in "...St. Louis."), as keys:
    # the text is NFKC-normalised once and words hold no spaces, so a run's key is its words' keys joined by
    # spaces (what entity_key of the run would give, without normalising each run again).
    words: list[tuple[str, str, bool]] = []
    text = unicodedata.normalize("NFKC", INVISIBLE.sub("", text))  # as in entity_key

    for match in _WORD.finditer(text):
        word = _POSSESSIVE.sub("", match.group()).rstrip("'’")
        if bare := word.strip(".'’"):
            marked = word[1:] if match.start() == 0 else word
            proper = any(char.isupper() or char.isdigit() for char in marked)
            words.append((word.casefold(), bare.casefold(), proper))
    found: dict[str, bool] = {}
    for start in range(len(words)):
        for length in range(1, min(max_words, len(words) - start) + 1):
            run = words[start : start + length]
            proper = any(p for _, _, p in run)
            for inner in (" ".join(w for w, _, _ in run[:-1]), " ".join(b for _, b, _ in run[:-1])):
                for last in run[-1][:2]:
                    key = f"{inner} {last}" if inner else last
                    found[key] = found.get(key, False) or proper
    return found
