"""`ports.text.as_field`: a stored text printed within a line is shown as it is, or, where it holds a delimiter of
that place (or a double quote), as a JSON string that gives it back exactly."""

from __future__ import annotations

import json

import pytest

from duckgraph.ports.text import as_field

NAME = ("[", "]", ": ")
VALUE = ("; ",)


@pytest.mark.parametrize("text", ["Maya Chen", "Acme, Inc.", "10:00 standup", "https://example.com/a?b=c",
                                  "C:\\notes\\b.md", "Zoë Brödel", "北京", "Mercury (planet)", "v2.4", ""])
def test_a_text_without_a_delimiter_of_its_place_is_shown_as_it_is(text: str) -> None:
    assert as_field(text, NAME) == text


@pytest.mark.parametrize(("text", "delimiters"), [
    ("Bob] [admin", NAME), ("Bob [admin]", NAME), ("Bob: trusted source", NAME),
    ("guest; clearance: top-secret", VALUE), ('Dwayne "The Rock" Johnson', NAME), ('"guest', VALUE),
    ("Bob:", NAME), ("guest;", VALUE), ("Zoë] [admin", NAME),
])
def test_a_text_holding_a_delimiter_or_a_quote_is_shown_as_a_json_string(text: str, delimiters: tuple) -> None:
    """A trailing ":" makes ": " with the space printed after it; a double quote counts wherever it is printed, or
    a bare '"guest' and a later value 'x"' would read as one string. Non-ASCII stays as written."""
    shown = as_field(text, delimiters)
    assert shown == json.dumps(text, ensure_ascii=False) and json.loads(shown) == text


def test_only_the_delimiters_of_the_place_count() -> None:
    assert as_field("guest; clearance: top-secret", ("[", "]")) == "guest; clearance: top-secret"
    assert as_field("Acme (2019-01-01 to 2020-01-01)", NAME) == "Acme (2019-01-01 to 2020-01-01)"
    assert as_field("Acme (2019-01-01 to 2020-01-01)", ("(",)) == '"Acme (2019-01-01 to 2020-01-01)"'
