"""The zero width non-joiner and joiner (U+200C, U+200D) inside a word of the keyword index (`ports.text.tokens`):
they say how its letters join (Persian writes them inside words), so the word goes on past them and keeps none of
them; while ASCII text is split exactly as it was before they were looked at."""

from __future__ import annotations

import re
from pathlib import Path

from duckgraph.ports.text import STOP_WORDS, terms, tokens

ZWNJ, ZWJ = "\u200c", "\u200d"
ROOT = Path(__file__).resolve().parents[2]


def test_a_persian_word_holding_a_non_joiner_is_one_word_without_it():
    assert tokens(f"من می{ZWNJ}خواهم کتاب{ZWNJ}ها را بخوانم") == ["من", "میخواهم", "کتابها", "را", "بخوانم"]
    # typed without the non-joiner (as many do), the word is the same one
    assert tokens(f"می{ZWNJ}خواهم") == tokens("میخواهم") == ["میخواهم"]
    assert terms(f"کتاب{ZWNJ}ها") == ["کتابها"]  # not "کتاب" and the plural suffix "ها"
    assert tokens(f"کتاب{ZWNJ} ها") == ["کتاب", "ها"]  # a space still ends the word


def test_a_joiner_inside_a_word_continues_it():
    # Sinhala "ශ්‍රී" (Sri): the joiner after the virama asks for the conjunct; the letters are one word
    assert tokens(f"ශ්{ZWJ}රී ලංකා") == ["ශ්රී", "ලංකා"]
    assert tokens(f"क्{ZWJ}ष") == tokens("क्ष") == ["क्ष"]  # Hindi, a half form asked for


def _old_ascii_tokens(text: str) -> list[str]:
    """The ASCII rule as it was written before the joiners were looked at: a run of letters and digits, joined by
    '-', '.', '_' or '/', gives its parts and itself; stop words left out."""
    found: list[str] = []
    for run in re.findall(r"[^\W_]+(?:[-._/][^\W_]+)*", text.casefold()):
        if re.search(r"[-._/]", run) is None:
            if run not in STOP_WORDS:
                found.append(run)
        else:
            found.extend(part for part in re.split(r"[-._/]", run) if part not in STOP_WORDS)
            found.append(run)
    return found


def _ascii_sample() -> list[str]:
    written = [
        "The INC-142 outage hit orders-db v2.3 at 14:05; Omar's team_lead re-ran the paintings' job.",
        "__init__ e-mail a.b.c/d 3.14 --- ... x_y_z U.S.A. don't won't it's O'Brien's",
        "https://example.com/a/b?c=d&e=f#g user@example.org C++ C# .NET node.js 1,000,000 -5 +7",
        "\tTabs\nand lines\r\nand   spaces; (brackets) [more] {braces} <angles> \"quotes\" `ticks`",
    ]
    # and the documentation's ASCII lines: prose, ids, commands, tables
    lines = [line for page in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
             for line in page.read_text(encoding="utf-8").splitlines() if line.isascii() and line.strip()]
    assert len(lines) > 500
    return written + lines


def test_ascii_text_is_split_as_before():
    for sentence in _ascii_sample():
        assert tokens(sentence) == _old_ascii_tokens(sentence), sentence
        # also where the text is not ASCII (the path that looks for joiners and marks): its ASCII words as before
        assert tokens(f"{sentence} {ZWNJ}{ZWJ}") == _old_ascii_tokens(sentence), sentence
        assert tokens(f"{sentence}{ZWNJ}") == _old_ascii_tokens(sentence), sentence
