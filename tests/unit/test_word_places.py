"""`ports.text.word_places`: the words `tokens` reads in a text, each with where it was read in the text as written
(offsets in code points), for placing them in a stored text (the web page's marks, core/ui/marks.py)."""

from __future__ import annotations

import random

import pytest

from duckgraph.ports.text import tokens, word_places


def placed(text: str) -> list[tuple[str, str]]:
    """Each word with the characters of `text` it was read from."""
    return [(word, text[start:end]) for word, start, end in word_places(text)]


@pytest.mark.parametrize(("text", "expected"), [
    # ASCII: lower-cased in place; a joined run's parts, then its whole; stop words left out
    ("INC-142 hit the orders-db", [("inc", "INC"), ("142", "142"), ("inc-142", "INC-142"), ("hit", "hit"),
                                   ("orders", "orders"), ("db", "db"), ("orders-db", "orders-db")]),
    # mixed scripts: folded letters placed on the letters as written, CJK pairs on their two letters
    ("Łukasz met 北京参加 at Straße", [("lukasz", "Łukasz"), ("met", "met"), ("北京", "北京"), ("京参", "京参"),
                                   ("参加", "参加"), ("strasse", "Straße")]),
    # right to left, with a left-to-right run: places in the stored (logical) order; Arabic vowel marks dropped
    # from the word but inside its place
    ("דוד כהן works at Acme; مُحَمَّد", [("דוד", "דוד"), ("כהן", "כהן"), ("works", "works"), ("acme", "Acme"),
                                       ("محمد", "مُحَمَّد")]),
    # zero width non-joiner (Persian) and joiner (a Sinhala conjunct): inside the word, not in it
    ("کتاب\u200cها و \u0d9a\u0dca\u200d\u0dbb", [("کتابها", "کتاب\u200cها"), ("و", "و"),
                                               ("\u0d9a\u0dca\u0dbb", "\u0d9a\u0dca\u200d\u0dbb")]),
    # variation selectors (an ideographic variant, an emoji style) dropped from the word, kept in its place
    ("葛\U000e0100城 a\ufe0fb", [("葛城", "葛\U000e0100城"), ("ab", "a\ufe0fb")]),
    # a direction control is no part of a word: it splits, and no place covers it
    ("abc\u202edef \u200fשלום", [("abc", "abc"), ("def", "def"), ("שלום", "שלום")]),
    # decomposed accents and Hangul jamo (which compose into syllables when folded); letters beyond 16 bits
    ("Zoe\u0308 \u1112\u1161\u11ab\u1100\u1173\u11af x𠀀𠀁", [("zoe", "Zoe\u0308"),
                                                               ("한글", "\u1112\u1161\u11ab\u1100\u1173\u11af"),
                                                               ("x", "x"), ("𠀀𠀁", "𠀀𠀁")]),
])
def test_words_are_placed_on_the_characters_they_were_read_from(text: str, expected: list[tuple[str, str]]) -> None:
    assert placed(text) == expected
    assert [word for word, _ in expected] == tokens(text)


def test_offsets_count_code_points_as_python_indexes_the_text() -> None:
    assert word_places("𠀀𠀁 Zoë") == [("𠀀𠀁", 0, 2), ("zoe", 3, 6)]


def test_the_words_are_those_of_tokens_in_any_text() -> None:
    """Random texts of many scripts, marks, joiners, glyph and direction controls and compatibility letters: the
    words are exactly `tokens(text)`, each place lies in the text, and the characters there give that word."""
    alphabet = [*"abcXYZ019 -._/,;()ŁłøØßẞæœİıÇçéÉ\u0301\u0308\u0345\u200c\u200d\ufe0f\U000e0100\u200e\u200f\u202e",
                *"北京参加タワーパスハ\u3099\u309aー・한글\u1112\u1161\u11ab", *"हिन्दीکتابهاשלוםمُحَمَّد",
                "𠀀", "™", "ﬁ", "①", "½", "¨", "\u00ad", "\u3000", "Ａ", "ｱ", "ﾞ", "\u0dd9\u0dca"]
    chooser = random.Random(11)
    for _ in range(3000):
        text = "".join(chooser.choice(alphabet) for _ in range(chooser.randint(1, 30)))
        found = word_places(text)
        assert [word for word, _, _ in found] == tokens(text), text
        for word, start, end in found:
            assert 0 <= start < end <= len(text), (text, word, start, end)
            assert word in tokens(text[start:end]), (text, word, text[start:end])
