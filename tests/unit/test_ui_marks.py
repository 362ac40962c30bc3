"""The ranges the web page marks in a passage (core/ui/marks.py): exactly the words keyword search matches, placed
in the text as stored (its letters, accents, marks and joiners), with the server's own tokenizer."""

from __future__ import annotations

import random

import pytest

from duckgraph.core.ui.marks import marks
from duckgraph.ports import terms, tokens


def marked(text: str, query: str) -> list[str]:
    return ["".join(list(text)[start:end]) for start, end in marks(text, set(terms(query)))]


@pytest.mark.parametrize(("text", "query", "expected"), [
    # letters that fold to others (a stroke, a ligature, a letter of its own), in any case
    ("Łukasz Żółkiewski met Søren at the Straße", "lukasz zolkiewski soren strasse",
     ["Łukasz", "Żółkiewski", "Søren", "Straße"]),
    ("ŁUKASZ and łukasz", "Łukasz", ["ŁUKASZ", "łukasz"]),
    # Chinese and Japanese: the two-letter pieces the index holds, not the whole run
    ("我们在北京参加会议", "北京", ["北京"]),
    ("東京タワーに行った", "タワー", ["タワー"]),
    ("パスとハス", "パス", ["パス"]),  # the voicing mark stays: ハス is another word
    # vowel signs and viramas inside a word; the zero width non-joiner inside a Persian word
    ("मैं हिन्दी बोलता हूँ", "हिन्दी", ["हिन्दी"]),
    ("کتاب\u200cها را خواندم", "کتابها", ["کتاب\u200cها"]),
    # the forms a stem joins, as keyword search matches them
    ("She painted two paintings", "painting", ["painted", "paintings"]),
    # an id joined by '-': its part, or the whole
    ("INC-142 hit orders-db, v2.3", "142", ["142"]),
    ("INC-142 hit orders-db, v2.3", "orders-db", ["orders-db"]),
    # letters beyond the 16-bit range count as one character each
    ("x𠀀𠀁y 𠀀𠀁", "𠀀𠀁", ["𠀀𠀁", "𠀀𠀁"]),
    # stop words are not indexed, so not marked
    ("the cat and the hat", "the cat", ["cat"]),
])
def test_the_words_keyword_search_matches_are_marked(text: str, query: str, expected: list[str]) -> None:
    assert marked(text, query) == expected


def test_decomposed_hangul_and_accents_are_placed_on_the_characters_stored() -> None:
    text = "\u1112\u1161\u11ab\u1100\u1173\u11af and Zoe\u0308"  # 한글 as jamo, Zoë with a combining diaeresis
    assert marked(text, "한글 zoe") == ["\u1112\u1161\u11ab\u1100\u1173\u11af", "Zoe\u0308"]


def test_every_word_the_index_reads_is_placed_in_any_text() -> None:
    """Random texts of many scripts, marks, joiners and compatibility letters: marking never fails (it checks the
    words it placed against `tokens` on every text, so none is left out or made up), and what it marks are words."""
    alphabet = [*"abcXYZ019 -._/,;()ŁłøØßẞæœİıÇçéÉ\u0301\u0308\u0345\u200c\u200d\ufe0f\u200e\u202e",
                *"北京参加タワーパスハ\u3099\u309aー・한글\u1112\u1161\u11ab", *"हिन्दीकتابهاשלום",
                "𠀀", "™", "ﬁ", "①", "½", "¨", "\u00ad", "\u3000", "Ａ", "ｱ", "ﾞ", "\u0dd9\u0dca"]
    chooser = random.Random(7)
    for _ in range(3000):
        text = "".join(chooser.choice(alphabet) for _ in range(chooser.randint(1, 30)))
        ranges = marks(text, set(terms(text)))
        assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:])), (text, ranges)
        assert bool(ranges) == bool(tokens(text)), (text, ranges)
        assert all(tokens("".join(list(text)[start:end])) for start, end in ranges), (text, ranges)
