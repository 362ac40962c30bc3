"""Name normalisation: the rule that decides when two names denote the same entity.

It is part of the contract: the core builds keys with it and stores keep keys unique per namespace.
"""

import re
import unicodedata

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[\w][\w'’.&+-]*", re.UNICODE)
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def entity_key(name: str) -> str:
    """Case-, width- and whitespace-insensitive key: 'Journal of  Math ' and 'journal of math' are one."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", name)).strip().casefold()


def relation_type(label: str) -> str:
    """Edge types are UPPER_SNAKE_CASE so 'works at' and 'WORKS_AT' are one type."""
    words = re.findall(r"[^\W_]+", unicodedata.normalize("NFKC", label), re.UNICODE)
    return "_".join(words).upper()


def name_candidates(text: str, max_words: int = 6) -> set[str]:
    """Every run of up to `max_words` consecutive words of `text`, as entity keys.

    Finds entities named verbatim in a query without scanning every name in the graph.
    """
    # Each word as written ("Dr.", "U.S.": keys keep periods) and bare ("Louis" in "...St. Louis.").
    words: list[tuple[str, str]] = []
    for word in _WORD.findall(unicodedata.normalize("NFKC", text)):
        word = _POSSESSIVE.sub("", word).rstrip("'’")
        if bare := word.strip(".'’"):
            words.append((word, bare))
    found: set[str] = set()
    for start in range(len(words)):
        for length in range(1, min(max_words, len(words) - start) + 1):
            run = words[start : start + length]
            for inner in ([w for w, _ in run[:-1]], [b for _, b in run[:-1]]):
                for last in run[-1]:
                    found.add(entity_key(" ".join([*inner, last])))
    return found
