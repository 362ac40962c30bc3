"""Words for keyword search: the one tokenizer that stores index texts with and that queries are split by.

It is part of the contract: a store's keyword index and anything in core that matches or highlights query words
must split text the same way, or an indexed word would never be found.
"""

import functools
import re
from typing import Any

from duckgraph.ports.names import unaccented

#: A run of letters and digits, possibly joined to more by '-', '.', '_' or '/': "INC-142", "orders-db", "v2.3".
WORD_RUN = re.compile(r"[^\W_]+(?:[-._/][^\W_]+)*")
_JOINER = re.compile(r"[-._/]")

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


def tokens(text: str) -> list[str]:
    """The words of `text` as keyword search indexes and matches them, in order, repeats kept.

    Lower-cased (Unicode case folding, accents dropped as names' loose forms drop them, `ports.names.unaccented`:
    "Brödel" gives "brodel", "Łukasz" "lukasz", while the kana voicing marks stay: "パス" is not "ハス"), letters and
    digits of any script; English stop words left out. A run joined by '-', '.', '_' or '/' gives its parts and also
    the whole run, so that an exact id matches strongly: "INC-142 hit orders-db" gives inc, 142, inc-142, hit,
    orders, db, orders-db.
    """
    text = text.casefold() if text.isascii() else unaccented(text)
    found: list[str] = []
    for run in WORD_RUN.findall(text):
        if _JOINER.search(run) is None:
            if run not in STOP_WORDS:
                found.append(run)
            continue
        found.extend(part for part in _JOINER.split(run) if part not in STOP_WORDS)
        found.append(run)
    return found


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


def shortened(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else cut at the last word boundary before them, with "…"
    (a word cut in two reads as another word: "- Budge…"); a single word longer than that is cut where it must."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 0)]
    if not text[len(cut)].isspace() and " " in cut.strip():
        cut = cut[: cut.rstrip().rfind(" ")]
    return cut.rstrip() + "…"
