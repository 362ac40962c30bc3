"""Whether a passage's text names an entity: as a whole word, by its key or, guarded, by its loose form. What links
a host's entities to the passages of the documents they cite (`source_ids`), or where none names them the passages
nearest to them (`nearest`), and keeps them on a replaced document's passages that still name them
(`WriteBatch.keep_named`)."""

from __future__ import annotations

import re
import unicodedata

from collections.abc import Sequence
from typing import Any

from duckgraph.plugins.duckdb.lazy_numpy import NumpyOnFirstUse
from duckgraph.ports import loose_key
from duckgraph.ports.names import INVISIBLE, unaccented

np: Any = NumpyOnFirstUse(globals())

#: How much less similar to a fact than the nearest passage another passage may be and still be linked to it
#: (`nearest`): a fact stated across two passages gets both, not the rest of its document.
NEAREST_MARGIN = 0.05


def nearest(chunk_ids: Sequence[int], vectors: dict[int, Any], vector: Any) -> list[int]:
    """Of `chunk_ids`, those whose vector (`vectors`: chunk id -> vector) is nearest to `vector`, a fact's that
    none of them names ("November batch" of a text that writes "the batch delivered in November"): the most
    similar (cosine) and those within `NEAREST_MARGIN` of it, so that the fact goes with the passage it was read
    from. All of them where there is nothing to compare: a store written without an embedder holds no vectors."""
    held = [chunk_id for chunk_id in chunk_ids if chunk_id in vectors]
    if vector is None or not held:
        return list(chunk_ids)
    matrix = np.stack([np.asarray(vectors[chunk_id], dtype=np.float32) for chunk_id in held])
    fact = np.asarray(vector, dtype=np.float32)
    lengths = np.linalg.norm(matrix, axis=1) * np.linalg.norm(fact)
    similarity = matrix @ fact / np.where(lengths > 0, lengths, 1.0)
    best = float(similarity.max())
    return [chunk_id for chunk_id, score in zip(held, similarity.tolist()) if score >= best - NEAREST_MARGIN]


def naming(chunks: list[tuple[int, str]], names: list[str]) -> list[int]:
    """Chunks whose text (as `entity_key` makes it: NFKC, case folded, spaces collapsed, as the names' keys are)
    names one of `names` (name keys: `name_keys`) as a whole word: `holds_name`."""
    return [chunk_id for chunk_id, text in chunks if any(holds_name(text, name) for name in names)]


def naming_loosely(chunks: list[tuple[int, str, str]], names: list[str]) -> list[int]:
    """`naming` of chunks given as (id, text as `entity_key` makes it, text as `loose_text` makes it), where a
    name's loose form (`_loose_name`) found as a whole word in the loose text names it too: an edited text may
    write "Sean O’Brien" for "Sean O'Brien", "Zoe Muller" for "Zoë Müller", "Jean Luc" for "Jean-Luc"."""
    loose = [form for form in map(_loose_name, names) if form]
    return [chunk_id for chunk_id, text, bare in chunks
            if any(holds_name(text, name) for name in names) or any(holds_name(bare, form) for form in loose)]


#: What a name may lose in its loose form and still be found by it: besides accents, the punctuation written in
#: more than one way within a name (apostrophes, hyphens and dashes, periods).
_SEPARATOR_MARKS = "'`\u2018\u2019.-\u2010\u2011\u2012\u2013\u2014\u2015"
_LOOSE_SEPARATORS = re.compile(f"[\\s{re.escape(_SEPARATOR_MARKS)}]+")


def _loose_name(key: str) -> str | None:
    """The loose form (`loose_key`) of the name key `key` to find it by in a text's `loose_text`, or None where
    that form would find other words: where it drops more than accents and `_SEPARATOR_MARKS` between words (the
    underscore of "orders_db", the leading period of ".NET": "net" is another word), or holds no word of two
    characters (a lone letter, or "a i" of "A.I.", is found everywhere). A name with a symbol ("C++", "AT&T") is
    found as written: its loose form keeps the symbol, at which `loose_text` cuts."""
    loose = loose_key(key)
    words = loose.split()
    if not any(len(word) > 1 for word in words):
        return None
    spaced = _LOOSE_SEPARATORS.sub(" ", unaccented(key))
    return loose if not spaced.startswith(" ") and spaced.split() == words else None


def loose_text(text: str) -> str:
    """`loose_key` of `text`, its parts kept apart (by line breaks) where other punctuation or a symbol stands
    between them: `loose_key` drops punctuation, and "Paris, Hilton" or "(Maya) Chen" does not name "Paris Hilton"
    or "Maya Chen"."""
    text = unicodedata.normalize("NFKC", INVISIBLE.sub("", text))  # as `entity_key` reads it
    cut = "".join("\0" if unicodedata.category(c)[0] in "PS" and c not in _SEPARATOR_MARKS else c for c in text)
    return "\n".join(loose_key(part) for part in cut.split("\0"))


#: Letters of the scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, kana, Han) and of
#: Hangul, whose particles are written onto the noun before them ("서울에서": in Seoul): there a name is found
#: inside a run of letters, as no word boundary can be seen.
_UNSPACED = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3040-\u30ff\u3130-\u318f"
                       "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
                       "\U00020000-\U0003134f]")


def holds_name(text: str, name: str) -> bool:
    """Whether `text` holds `name` bounded by the text's ends or by characters that cannot continue a word:
    "ed" is not in "acme edited the plan", nor "ai" in "the ceo said". Only the characters around it are
    tested, not the name's own first and last (as `\\b` would), so "c++", "orders-db" and ".net" are found as
    written; a word's characters are letters, digits, "_" and combining marks (a Devanagari vowel sign continues
    its word; Python's `\\w` has no marks)."""
    start = text.find(name)
    while start >= 0:
        end = start + len(name)
        if not (start and _in_word(text[start - 1])) and not (end < len(text) and _in_word(text[end])):
            return True
        start = text.find(name, start + 1)
    return False


def _in_word(char: str) -> bool:
    """Whether `char` beside a name makes it part of a longer word (`holds_name`)."""
    return ((char.isalnum() or char == "_" or unicodedata.category(char).startswith("M"))
            and not _UNSPACED.match(char))
