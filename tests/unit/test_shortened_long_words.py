"""`ports.text.shortened` and `one_line`: a text cut short keeps what it can of a word that takes most of the room
(a URL, a hash), rather than going back to the space before it and showing nothing (": …"); stored text put on a
line of a listing stays on that line."""

from __future__ import annotations

from duckgraph.ports.text import one_line, shortened

URL = "https://docs.example.com/runbooks/" + "payments-service-incident-response-" * 9 + "final.html"


def test_a_word_longer_than_the_room_after_a_prefix_is_cut_inside():
    for text in (f": {URL}", f": see {URL}", f"A documented at B: {URL}"):
        cut = shortened(text, 120)
        assert len(cut) == 120 and cut.endswith("…")
        assert cut[:-1] == text[:119]  # as much of the URL as fits, not ": …" or ": see…"


def test_a_long_word_alone_is_cut_where_it_must():
    assert shortened("x" * 50 + "A" * 3000, 10) == "x" * 9 + "…"


def test_words_are_still_cut_between_words():
    # The last space keeps half the room or more: cut there, as before (a word cut in two reads as another word).
    assert shortened("Maya Chen signed the contract with Northwind in March", 40) == (
        "Maya Chen signed the contract with…")
    assert shortened("Budget planning", 10) == "Budget…"
    assert shortened("short enough", 12) == "short enough"


def test_the_half_of_the_room_decides():
    text = "abcd " + "y" * 20  # the space after 4 characters of 9 allowed: cutting there would drop most of them
    assert shortened(text, 10) == "abcd yyyy…"
    assert shortened("abcde " + "y" * 20, 10) == "abcde…"  # 5 of 9 kept at the space: enough


def test_one_line_folds_every_line_break_and_run_of_spaces():
    text = " a\nb\r\nc\u2028d\u2029e\x85f\x0bg\x0ch\x1ci\tj  k "
    assert one_line(text) == "a b c d e f g h i j k"
    assert one_line(text).splitlines() == [one_line(text)]
    assert one_line("") == ""


def test_a_word_is_never_cut_inside_what_reads_as_one_character():
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
    line = ": " + "王小明的家人" + family * 30
    for limit in range(9, 60):
        cut = shortened(line, limit)[:-1]
        assert len(cut) < limit and line.startswith(cut) and len(cut) > limit // 2
        assert not cut.endswith(("\u200d", "\U0001F468", "\U0001F469")) or cut.endswith(family)
    assert shortened("e\u0301" * 10, 6) == "e\u0301" * 2 + "…"  # not "é" and an "e" without its accent
    assert shortened("x" + "\u1100\u1161\u11a8" * 10, 7) == "x" + "\u1100\u1161\u11a8" * 1 + "…"  # Hangul jamo
