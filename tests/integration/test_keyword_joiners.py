"""The keyword index of a real DuckDB file over Persian passages, whose words hold the zero width non-joiner
(U+200C): a query word is matched whole, not by the fragments on either side of the non-joiner (the verb prefix
"می", the plural suffix "ها" that most passages share), and typed without the non-joiner it finds the same word;
both as written and after the index is built again from the tables at open."""

from __future__ import annotations

from pathlib import Path

from duckgraph.plugins.duckdb import DuckDBStore
from tests.integration.test_keyword_scripts import check_written_and_reopened, found

ZWNJ = "\u200c"
PASSAGES = [
    f"من می{ZWNJ}خواهم به کتابخانه بروم.",  # I want to go to the library
    f"او هر روز به مدرسه می{ZWNJ}رود.",  # he goes to school every day: "می" and "رود" when split
    f"کتاب{ZWNJ}ها روی میز هستند.",  # the books are on the table
    f"این کتاب خوب است و گل{ZWNJ}ها زیبا هستند.",  # this book is good and the flowers are beautiful
]


def _check(store: DuckDBStore) -> None:
    assert found(store, f"می{ZWNJ}خواهم") == [PASSAGES[0]]  # not the passage of "می‌رود"
    assert found(store, "میخواهم") == [PASSAGES[0]]  # typed without the non-joiner
    assert found(store, f"کتاب{ZWNJ}ها") == [PASSAGES[2]]  # not "کتاب" alone, nor the other plural
    assert found(store, "کتاب") == [PASSAGES[3]]  # the singular is a word of its own


def test_persian_words_with_a_non_joiner_are_matched_whole(db_path: Path):
    check_written_and_reopened(db_path, PASSAGES, _check)
