"""Whether a passage names an entity (plugins/duckdb/name_matching.py `holds_name`): as a whole word, bounded by
the text's ends or by characters that cannot continue a word; texts and names as `entity_key` makes them (it was a substring
test: "ed" was named by "edited", "ai" by "said"). And (`naming_loosely`, what a replaced document's new
passage keeps) a name written with other accents or punctuation, unless that looser form is another word."""

from __future__ import annotations

import pytest

from duckgraph.plugins.duckdb.name_matching import holds_name, loose_text, naming_loosely
from duckgraph.ports import entity_key


@pytest.mark.parametrize(("text", "name", "named"), [
    ("Acme edited the plan", "Ed", False),
    ("the CEO said so", "AI", False),
    ("Ed edited it", "Ed", True),  # the first one is a word; the second is not
    ("edited by Ed.", "Ed", True),
    ("Ed", "Ed", True),
    ("Ed_2 did it", "Ed", False),  # "_" continues a word
    ("Ed2 did it", "Ed", False),
    ("Ed's plan", "Ed", True),
    ("written in C++, mostly", "C++", True),
    ("written in C++11", "C++", False),
    ("the orders-db service", "orders-db", True),
    ("the orders-dbx service", "orders-db", False),
    ("moved to .NET today", ".NET", True),
    ("Zoëlla came", "Zoë", False),
    ("Zoë came", "Zoe\u0308", True),  # another Unicode form of the same name
    ("रामा आया", "राम", False),  # a Devanagari vowel sign continues the word (\w has no marks)
    ("राम आया", "राम", True),
    ("我在北京工作", "北京", True),  # written without spaces: found beside other letters
    ("我用Python写代码", "Python", True),
    ("서울에서 만나요", "서울", True),  # Hangul: the particle is written onto the noun
    ("Bob\nJones joined", "Bob Jones", True),  # a line break between the words is a space
])
def test_a_name_is_found_as_a_whole_word(text, name, named):
    assert holds_name(entity_key(text), entity_key(name)) is named


def named_loosely(text: str, name: str) -> bool:
    """Whether `_keep_named` finds `name` in `text` (its key as written, or its loose form in the text's)."""
    return naming_loosely([(1, entity_key(text), loose_text(text))], [entity_key(name)]) == [1]


@pytest.mark.parametrize(("text", "name", "named"), [
    ("Sean O\u2019Brien called", "Sean O'Brien", True),  # a typographic apostrophe
    ("Sean O'Brien called", "Sean O\u2019Brien", True),
    ("Zoë Müller called", "Zoe Muller", True),
    ("Zoe Muller called", "Zoë Müller", True),
    ("Jean Luc called", "Jean-Luc", True),
    ("Jean\u2013Luc called", "Jean Luc", True),  # an en dash
    ("St John\u2019s Wood", "St. John's Wood", True),
    ("Straße 5", "Strasse", True),
    ("Acme edited the plan", "Ed", False),  # still whole words
    ("Ëd edited it", "Ed", True),
    ("Acme, Inc, and others", "Acme Inc.", False),  # a comma is not written within a name
    ("We flew to Paris, Hilton rooms were full", "Paris Hilton", False),
    ("(Maya) Chen spoke", "Maya Chen", False),
    # A loose form that is another word, or a lone letter, would be found everywhere: the key as written only.
    ("rewritten in C, mostly", "C++", False),
    ("written in C++, mostly", "C++", True),
    ("a net gain", ".NET", False),
    ("AT T and others", "AT&T", False),
    ("a I o", "A.I.", False),
    ("plan x, not y", "X.", False),
    ("plan e", "É", False),
    ("the orders db", "orders_db", False),
    ("wow", "!!!", False),
    ("रामा आया", "राम", False),  # a Devanagari vowel sign continues the word, also loosely
])
def test_a_name_is_found_in_other_accents_and_punctuation_as_whole_words(text, name, named):
    assert named_loosely(text, name) is named
