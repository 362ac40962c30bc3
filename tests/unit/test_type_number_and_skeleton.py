"""Entity types are one up to case, spacing and number ("Person", "persons", "people"), and names that look the same
but use letters of other scripts share a skeleton ("Maya Chen" with a Cyrillic a): resolution.py's `type_key`,
`same_type`, `noun_form` and `skeleton`."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.resolution import looks_the_same, noun_form, noun_variants, same_type, skeleton, type_key

CYRILLIC_A = "\u0430"
GREEK_CAPITAL_OMICRON = "\u039f"
GREEK_CAPITAL_IOTA = "\u0399"


@pytest.mark.parametrize("plural, singular", [("people", "person"), ("persons", "person"), ("children", "child"),
                                              ("mice", "mouse"), ("criteria", "criterion"), ("teams", "team"),
                                              ("Incidents", "incident"), ("analyses", "analysis")])
def test_a_plural_noun_has_the_form_of_its_singular(plural: str, singular: str) -> None:
    assert noun_form(plural) == noun_form(singular) == singular


def test_a_word_the_lexicon_does_not_know_is_compared_by_its_stem_not_by_guessed_rules() -> None:
    assert noun_form("microservices") == noun_form("microservice")
    assert noun_form("APIs") == noun_form("API") == "api"  # lemminflect's own rules would make "API" "apus"
    assert noun_form("OS") == "os"


def test_a_noun_comes_with_its_other_number_and_an_unknown_word_alone() -> None:
    assert noun_variants("people") == noun_variants("Person") == {"people", "person", "persons"}
    assert noun_variants("children") == {"child", "children"}
    assert noun_variants("kubernetes") == {"kubernetes"}
    assert noun_variants("inc-142") == {"inc-142"}


@pytest.mark.parametrize("spelling", ["Person", "person", "PERSON", "Persons", "people", "People", " person "])
def test_types_in_another_case_or_number_are_one_type(spelling: str) -> None:
    assert type_key(spelling) == "person"
    assert same_type(spelling, "Person")


def test_the_number_of_a_types_last_word_only_is_left_out() -> None:
    assert same_type("purchase_orders", "Purchase_Order")
    assert same_type("Purchase Orders", "purchase order")
    assert not same_type("Organization", "Organ")  # a stem would join them ("organ")
    assert not same_type("Person", "Team")
    assert not same_type("People Manager", "Person")
    assert type_key("Series 7") == "series 7"


def test_names_written_with_look_alike_letters_of_other_scripts_share_the_skeleton() -> None:
    assert skeleton(f"M{CYRILLIC_A}ya Chen") == skeleton("Maya Chen") == "maya chen"
    assert skeleton(f"{GREEK_CAPITAL_OMICRON}rders") == skeleton("Orders")
    assert skeleton(f"{GREEK_CAPITAL_IOTA}BM") == skeleton("IBM")
    # Accents and punctuation go as in loose keys; other letters stay.
    assert skeleton("Renée-Dubois") == skeleton("Renee Dubois")
    assert skeleton("Сергей") != skeleton("Sergey")
    assert skeleton("東京") == "東京"


def test_the_reason_names_the_letters_that_differ() -> None:
    assert looks_the_same(f"M{CYRILLIC_A}ya Chen", "Maya Chen") == (
        "looks the same as 'Maya Chen' but uses other letters (CYRILLIC SMALL LETTER A for 'a')")
