"""The order a search shows an entity's observations in, and so which of them it shows when it shows some: those
that share the query's rarer words first, then the rest newest first, each observation with the later one that
names what it names just before it ("switched to Redis, replacing Memcached" before "chose Memcached as the
caching layer"), so that a token budget, which cuts from the end, never shows the old one alone."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from duckgraph.core.domain.query_words import common_word
from duckgraph.ports.text import stemmed, terms, tokens

#: A name (`_with_successors`) at most this many of an entity's observations write is one thing said of it:
#: chosen, changed, replaced. One that more write (the friend a person's notes keep naming) is a topic of the
#: entity: linking by it would reorder most of its observations (docs/search.md, LoCoMo).
NAMES_FOLLOWED = 3


def by_relevance(query: str, observations: dict[int, list[str]],
                 names: dict[int, Sequence[str]]) -> dict[int, list[str]]:
    """Each node's observations (in stored order, the order they were written in), those that share the query's
    rarer words first (in stored order on a tie), then those that share none, the newest first: a later one
    corrects an earlier one ("Moved to Seattle" after "Lives in Portland"), so a small budget must not cut it and
    leave the old one to read as current. (Newest first among matched ones too cost the public LoCoMo
    observations mode 3.7 points of R@5: there the matched words, not recency, pick the evidence.) Words are the
    keyword index's terms (stemmed: "play" matches "Plays cello"), as the keyword channel matches them. Then each
    observation comes with its successor just before it (`_with_successors`); `names` holds each node's name and
    aliases, which its observations write ("Ana adopted a greyhound") and which link none of them.

    A word weighs log(1 + n / m) when m of the n observations at hand hold it: a word only one observation holds
    tells it apart, one most hold ("team" in a team's notes) barely does. Observations carry no vector of their
    own, and embedding them per search would cost more than the whole search; their words cost microseconds.
    """
    wanted = set(terms(query))
    written = {node_id: [tokens(text) for text in texts] for node_id, texts in observations.items()}
    words = {node_id: [wanted.intersection(stemmed(found)) for found in written[node_id]] for node_id in observations}
    held = Counter(word for found in words.values() for shared in found for word in shared)
    total = sum(len(texts) for texts in observations.values())
    weight = {word: math.log(1 + total / count) for word, count in held.items()}
    ranked: dict[int, list[str]] = {}
    for node_id, texts in observations.items():
        score = [sum(weight[word] for word in shared) for shared in words[node_id]]
        order = sorted(range(len(texts)), key=lambda i: (-score[i], i if score[i] else -i))
        own = {word for name in names.get(node_id, ()) for word in tokens(name)}
        ranked[node_id] = [texts[i] for i in _with_successors(written[node_id], order, own)]
    return ranked


def _with_successors(written: Sequence[list[str]], order: list[int], own: set[str]) -> list[int]:
    """`order` (indices of an entity's observations, whose words `written` holds as `tokens` gives them) with each
    observation's successor moved just before it, where `order` has it later: the latest observation written after
    it that writes one of its names, a word holding a letter that is no common English word (`common_word`:
    "Memcached", "Portland", "INC-142"; not "caching", "chose" or a date) nor one of the entity's own name or
    aliases (`own`), and that at most `NAMES_FOLLOWED` of them write. Such a later one often replaces it ("switched
    to Redis, replacing Memcached" after "chose Memcached as the caching layer") while sharing none of the query's
    words ("What do we use for caching now?"): without it the old one reads as current, and ranked apart from it, a
    budget could cut it."""
    words = [{word for word in found if any(char.isalpha() for char in word)} - own for found in written]
    count = Counter(word for held in words for word in held)
    # The lexicon is asked only of the words two to NAMES_FOLLOWED observations write: what could link them.
    linking = {word for word, n in count.items() if 1 < n <= NAMES_FOLLOWED and not common_word(word)}
    if not linking:
        return order
    writers: dict[str, list[int]] = {}
    for i, held in enumerate(words):
        for name in held & linking:
            writers.setdefault(name, []).append(i)
    placed: dict[int, None] = {}
    for i in order:
        if i in placed:
            continue
        later = [j for name in words[i] & linking for j in writers[name] if j > i and j not in placed]
        if later:
            placed[max(later)] = None
        placed[i] = None
    return list(placed)

