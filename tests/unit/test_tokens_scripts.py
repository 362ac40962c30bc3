"""Keyword words (`ports.text.tokens`) and loose name forms (`ports.names.loose_key`) of scripts beyond Latin: a
combining mark (vowel sign, virama) continues its word, and a run of Han, kana or Hangul letters is indexed and
matched as overlapping pairs of letters, while Latin words stay exactly as they were."""

from __future__ import annotations

import re
import unicodedata

from duckgraph.ports import names, text
from duckgraph.ports.names import MARKS, loose_key, name_candidates
from duckgraph.ports.text import WORD_RUN, terms, tokens


def _ranges(code_points: list[int]) -> str:
    """`code_points` (sorted) as the ranges of a character class, escaped as `MARKS` is written."""
    def escaped(c: int) -> str:
        return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"
    out, start = [], None
    for i, c in enumerate(code_points):
        start = c if start is None else start
        if i + 1 == len(code_points) or code_points[i + 1] != c + 1:
            out.append(escaped(start) if start == c else escaped(start) + ("-" if c > start + 1 else "") + escaped(c))
            start = None
    return "".join(out)


def test_marks_are_every_combining_mark_of_this_pythons_unicode():
    marks = [c for c in range(0x110000) if unicodedata.category(chr(c)) in ("Mn", "Mc")]
    in_class = re.compile(f"[{MARKS}]")
    held = [c for c in range(0x110000) if in_class.match(chr(c))]
    assert held == marks, (
        f"ports/names.py MARKS is not Unicode {unicodedata.unidata_version}'s Mn and Mc: paste\n{_ranges(marks)}")


def test_cjk_letters_are_word_characters_and_cover_han_kana_and_hangul():
    cjk = re.compile(f"[{text._CJK}]")
    for c in range(0x110000):
        char = chr(c)
        if cjk.match(char):  # nothing a text uses between words (punctuation, spaces, symbols) is in it
            assert char.isalnum() or unicodedata.category(char) in ("Mn", "Mc", "Cn"), hex(c)
        elif unicodedata.name(char, "").startswith(("CJK UNIFIED IDEOGRAPH", "HIRAGANA LETTER", "KATAKANA LETTER",
                                                     "HANGUL SYLLABLE")):
            raise AssertionError(f"{hex(c)} {unicodedata.name(char)} is not in ports/text.py _CJK")


def test_indic_thai_and_tamil_words_are_whole():
    assert tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]  # not ह, न, द, भ, ष
    assert tokens("বাংলা ভাষা") == ["বাংলা", "ভাষা"]
    assert tokens("தமிழ் நாடு") == ["தமிழ்", "நாடு"]
    assert tokens("ภาษาไทย") == ["ภาษาไทย"]
    assert tokens("हिन्दी-भाषा") == ["हिन्दी", "भाषा", "हिन्दी-भाषा"]  # joined runs as for Latin words
    assert terms("हिन्दी") == ["हिन्दी"]


def test_a_cjk_run_is_its_overlapping_letter_pairs():
    assert tokens("王小明昨天在北京参加了会议。") == [
        "王小", "小明", "明昨", "昨天", "天在", "在北", "北京", "京参", "参加", "加了", "了会", "会议"]
    assert "北京" in terms("北京")  # a query gives the same pairs, so a word inside a run is found
    assert tokens("京") == ["京"]  # a single letter alone
    assert tokens("東京タワーに行った") == ["東京", "京タ", "タワ", "ワー", "ーに", "に行", "行っ", "った"]
    assert tokens("서울에서 만났다") == ["서울", "울에", "에서", "만났", "났다"]  # the particle 에서 attached
    assert tokens("ﾊﾟｽ パス バス") == ["パス", "パス", "バス"]  # half-width kana as kana; voicing marks kept
    # Latin letters and digits next to CJK ones are words of their own, as they would be with spaces
    assert tokens("iPhone手机 COVID-19疫情 2024年") == [
        "iphone", "手机", "covid", "19", "covid-19", "疫情", "2024", "年"]
    assert tokens("葛\U000E0100城") == ["葛城"]  # an ideograph variation selector picks a glyph, not a letter


def test_latin_and_cyrillic_words_are_as_before():
    old = re.compile(r"[^\W_]+(?:[-._/][^\W_]+)*")
    sample = ("The INC-142 outage hit orders-db v2.3 at 14:05; Omar's team_lead re-ran the paintings' "
              "job__x _y_ a.b.c/d 3.14 e-mail --- ... __init__ ")
    assert WORD_RUN.findall(sample.casefold()) == old.findall(sample.casefold())
    assert tokens(sample) == [
        "inc", "142", "inc-142", "outage", "hit", "orders", "db", "orders-db", "v2", "3", "v2.3", "14", "05", "omar",
        "team", "lead", "team_lead", "ran", "re-ran", "paintings", "job", "x", "b", "c", "a.b.c/d", "3", "14",
        "3.14", "e", "mail", "e-mail", "init"]
    assert terms("Zoë Müller paintings Москва Łukasz") == ["zoe", "muller", "paint", "москва", "lukasz"]


def test_loose_forms_and_name_runs_keep_marks_in_their_word():
    assert loose_key("हिन्दी भाषा") == "हिन्दी भाषा"
    assert loose_key("ভাষা_বাংলা") == "ভাষা বাংলা"
    assert loose_key("Jean-Luc Zoë") == "jean luc zoe"
    assert names._LOOSE_WORD.findall("jean luc") == ["jean", "luc"]
    assert "मोहनदास करमचंद गांधी" in name_candidates("मोहनदास करमचंद गांधी का जन्म", 3)
    assert "ह" not in name_candidates("हिन्दी", 1)
