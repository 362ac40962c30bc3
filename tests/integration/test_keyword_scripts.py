"""The keyword index of a real DuckDB file over Chinese and Hindi passages: a Chinese word is found inside a
sentence written without spaces, a Hindi word is matched whole (not by the letters it shares with other words),
both as written and after the index is built again from the tables at open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import ChunkRecord, DocumentRecord, WriteBatch

PASSAGES = [
    "王小明昨天在北京参加了会议。",
    "上海的天气很好。",
    "हिन्दी भारत की एक भाषा है।",
    "दिन में नदी के किनारे हम बैठे।",  # holds ह, न, द, which "हिन्दी" was split into
]


def found(store: DuckDBStore, query: str) -> list[str]:
    """The passages the keyword index finds for `query`, best first."""
    hits = store.keyword_search("chunk", query, 5, "default")
    texts = {c.id: c.text for c in store.get_chunks([i for i, _ in hits])} if hits else {}
    return [texts[i] for i, _ in hits]


def _check(store: DuckDBStore) -> None:
    assert found(store, "北京") == [PASSAGES[0]]
    assert found(store, "他在北京吗？") == [PASSAGES[0]]  # a question's pairs of letters find the sentence
    assert found(store, "广州") == []
    assert found(store, "हिन्दी") == [PASSAGES[2]]
    assert found(store, "हिंदू") == []  # another word: no passage holds it whole


def test_chinese_and_hindi_words_are_found_in_passages(db_path: Path):
    check_written_and_reopened(db_path, PASSAGES, _check)


def check_written_and_reopened(db_path: Path, passages: list[str], check: Callable[[DuckDBStore], None]) -> None:
    """`check` the keyword index of a file holding `passages`, as written and as built again at open."""
    store = DuckDBStore(db_path)
    store.open()
    try:
        store.write(WriteBatch(
            documents=[DocumentRecord(id="notes", namespace="default", text="...", title="")],
            chunks=[ChunkRecord("notes", i, text) for i, text in enumerate(passages)]))
        check(store)
    finally:
        store.close()
    store = DuckDBStore(db_path)  # the index built at open from the tables splits the same way
    store.open()
    try:
        check(store)
    finally:
        store.close()
