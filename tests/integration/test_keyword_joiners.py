"""The keyword index of a real DuckDB file over Persian passages, whose words hold the zero width non-joiner
(U+200C): a query word is matched whole, not by the fragments on either side of the non-joiner (the verb prefix
"می", the plural suffix "ها" that most passages share), and typed without the non-joiner it finds the same word;
both as written and after the index is built again from the tables at open."""

from __future__ import annotations

from pathlib import Path

from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import ChunkRecord, DocumentRecord, WriteBatch

ZWNJ = "\u200c"
PASSAGES = [
    f"من می{ZWNJ}خواهم به کتابخانه بروم.",  # I want to go to the library
    f"او هر روز به مدرسه می{ZWNJ}رود.",  # he goes to school every day: "می" and "رود" when split
    f"کتاب{ZWNJ}ها روی میز هستند.",  # the books are on the table
    f"این کتاب خوب است و گل{ZWNJ}ها زیبا هستند.",  # this book is good and the flowers are beautiful
]


def _found(store: DuckDBStore, query: str) -> list[str]:
    hits = store.keyword_search("chunk", query, 5, "default")
    texts = {c.id: c.text for c in store.get_chunks([i for i, _ in hits])} if hits else {}
    return [texts[i] for i, _ in hits]


def _check(store: DuckDBStore) -> None:
    assert _found(store, f"می{ZWNJ}خواهم") == [PASSAGES[0]]  # not the passage of "می‌رود"
    assert _found(store, "میخواهم") == [PASSAGES[0]]  # typed without the non-joiner
    assert _found(store, f"کتاب{ZWNJ}ها") == [PASSAGES[2]]  # not "کتاب" alone, nor the other plural
    assert _found(store, "کتاب") == [PASSAGES[3]]  # the singular is a word of its own


def test_persian_words_with_a_non_joiner_are_matched_whole(db_path: Path):
    store = DuckDBStore(db_path)
    store.open()
    try:
        store.write(WriteBatch(
            documents=[DocumentRecord(id="notes", namespace="default", text="...", title="")],
            chunks=[ChunkRecord("notes", i, text) for i, text in enumerate(PASSAGES)]))
        _check(store)
    finally:
        store.close()
    store = DuckDBStore(db_path)  # the index built at open from the tables splits the same way
    store.open()
    try:
        _check(store)
    finally:
        store.close()
