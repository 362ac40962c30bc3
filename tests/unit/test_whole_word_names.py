"""Whether a passage names an entity (plugins/duckdb/writes.py `_names`): as a whole word, bounded by the text's
ends or by characters that cannot continue a word; texts and names as `entity_key` makes them (it was a substring
test: "ed" was named by "edited", "ai" by "said")."""

from __future__ import annotations

import pytest

from duckgraph.plugins.duckdb.writes import _names
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
    assert _names(entity_key(text), entity_key(name)) is named
