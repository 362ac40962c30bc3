"""Names in other scripts and languages (ports/names.py, ports/text.py): which marks the loose form and the keyword
words drop (accents of Latin, Greek and Cyrillic letters, the optional vowel points of Hebrew and Arabic) and which
they keep (the kana voicing marks, which make other names); the Latin letters NFKD leaves whole (ł, ø, æ...);
the i's of Turkish in lookups ignoring case; and runs of a script without case as proper names of a query."""

from __future__ import annotations

import pytest

from duckgraph.ports import entity_key, loose_key, name_candidates, tokens
from duckgraph.ports.names import dotless_i_key


@pytest.mark.parametrize(("a", "b"), [
    ("バス", "パス"),  # bus, pass: the handakuten makes another sound
    ("ゴトウ", "コトウ"),  # Gotō, Kotō: two family names (dakuten)
    ("ガス", "カス"),
    ("ばか", "はか"),  # hiragana too
    ("バス", "ハス"),
])
def test_the_kana_voicing_marks_keep_names_apart(a: str, b: str) -> None:
    assert loose_key(a) != loose_key(b)
    assert tokens(a) != tokens(b)


def test_a_voiced_kana_typed_decomposed_is_the_same_name() -> None:
    # "パ" as "ハ" followed by the combining handakuten (U+309A), as some keyboards and file systems write it.
    assert loose_key("\u30cf\u309a\u30b9") == loose_key("パス") == "パス"
    assert tokens("\u30cf\u309a\u30b9") == tokens("パス") == ["パス"]


@pytest.mark.parametrize(("written", "typed"), [
    ("Łukasz Nowak", "Lukasz Nowak"), ("ŁUKASZ", "lukasz"), ("Søren Kierkegaard", "Soren Kierkegaard"),
    ("Đorđe Balašević", "Djordje Balasevic".replace("Dj", "D").replace("dj", "d")),
    ("Ħamrun", "Hamrun"), ("Æsir", "Aesir"), ("Œuvre", "Oeuvre"), ("Þórr", "Thorr"), ("Guðrún", "Gudrun"),
    ("Diyarbakır", "Diyarbakir"), ("Ŧ", "t"), ("Straße", "Strasse"), ("Zoë Müller", "Zoe Muller"),
    ("İstanbul", "Istanbul"), ("Ελληνικά", "ελληνικα"), ("Ёлка", "Елка"),
    ("مُحَمَّد", "محمد"),  # Arabic vowel points: most texts leave them out
    ("שָׁלוֹם", "שלום"),  # Hebrew points
])
def test_accents_and_the_letters_nfkd_leaves_whole_fold(written: str, typed: str) -> None:
    assert loose_key(written) == loose_key(typed)
    assert tokens(written) == tokens(typed)


def test_folded_letters_are_found_as_keyword_words() -> None:
    assert tokens("Łukasz Nowak, Søren and Ærø") == ["lukasz", "nowak", "soren", "aero"]


def test_the_marks_of_other_scripts_are_not_dropped_as_accents() -> None:
    # The Devanagari virama joins two consonants: dropping it spelt "kasha" for "ksha".
    assert loose_key("क्ष") != loose_key("कष")
    assert tokens("क्ष") != tokens("कष")


def test_hangul_stays_in_syllables() -> None:
    # pairs of syllables, as any CJK run (ports/text.py `_cjk_terms`): "서울" is found in "서울에서"
    assert tokens("김민준은 서울에서") == ["김민", "민준", "준은", "서울", "울에", "에서"]
    assert loose_key("김민준") == "김민준"


@pytest.mark.parametrize("other", ["istanbul", "Istanbul", "ISTANBUL", "İSTANBUL", "i\u0307stanbul"])
def test_the_turkish_i_is_one_letter_when_case_is_ignored(other: str) -> None:
    assert dotless_i_key(entity_key(other)) == dotless_i_key(entity_key("İstanbul")) == "istanbul"
    assert dotless_i_key(entity_key("ıslak")) == dotless_i_key(entity_key("ISLAK"))


def test_dotless_i_key_changes_nothing_else() -> None:
    assert dotless_i_key(entity_key("Zoë Müller")) == entity_key("Zoë Müller")
    assert dotless_i_key(entity_key("バス")) == "バス"


@pytest.mark.parametrize(("query", "name"), [
    ("王小明", "王小明"), ("김민준", "김민준"), ("محمد علي", "محمد علي"), ("Tell me about 田中", "田中"),
    ("שלום כהן", "שלום כהן"), ("สมชาย", "สมชาย"),
])
def test_a_run_of_a_script_without_case_can_be_a_proper_name(query: str, name: str) -> None:
    assert entity_key(name) in name_candidates(query, proper_only=True)
    # Unless the caller matches no stored names: nothing in the writing says it is one.
    assert entity_key(name) not in name_candidates(query, proper_only=True, caseless=False)


def test_lower_case_words_of_cased_scripts_are_still_no_proper_names() -> None:
    found = name_candidates("where did the city of Дмитрий Иванов грow", proper_only=True)
    assert "дмитрий иванов" in found and not {"city", "where", "the city"} & found
    assert name_candidates("il était une fois à paris", proper_only=True) == set()
    assert name_candidates("жил-был кот", proper_only=True) == set()
