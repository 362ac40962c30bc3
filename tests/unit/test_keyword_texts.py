"""The keyword index's bulk split gives each text exactly the terms `ports.terms` gives it."""

from collections import Counter

import numpy as np

from duckgraph.plugins.duckdb.keyword_texts import Codes, Rows, gather, tokenize
from duckgraph.ports import inflections, terms

TEXTS = [
    "INC-142 hit orders-db in v2.3 of the API",
    "",
    "the and of",  # stop words only
    "Brödel & Søn GmbH — Zürich",  # not ASCII: split one by one
    "line one\nline two\ttab",
    "a_b/c.d-e __init__ x--y ..dots.. 3.14",
    "İstanbul ǰ ﬃ straße ΣΊΣΥΦΟΣ",
    "ORDERS-DB orders-db Orders-Db",
    "\uffff separator-like \uffff",
]


def test_bulk_split_equals_tokens_text_by_text():
    words = Codes()
    owners, codes = tokenize(TEXTS, words)
    listed = words.listed()
    for i, text in enumerate(TEXTS):
        got = Counter(listed[c] for c in codes[owners == i].tolist())
        assert got == Counter(terms(text)), text


def test_terms_are_stems_of_words_and_ids_as_written():
    assert terms("Painted paintings; painting") == ["paint"] * 3
    assert terms("Running INC-142 on orders-db v2.3") == ["run", "inc", "142", "inc-142", "order", "db", "orders-db",
                                                         "v2", "3", "v2.3"]
    assert terms("the and of") == []


def test_inflections_give_the_forms_a_stem_does_not_join():
    assert {"wrote", "written"} <= inflections("write") and "chose" in inflections("choose")
    assert {terms(form)[0] for form in inflections("write")} > {terms("write")[0]}  # the stems differ
    assert inflections("xyzzy") == {"xyzzy"}  # an unknown word is only itself


def test_rows_of_lists_keep_each_rows_words():
    rows = Rows.of_lists([7, 3, 9], ["a", "a", "b"], [["x", "y", "x"], [], ["y"]])
    assert rows.lengths().tolist() == [3, 0, 1]
    assert [sorted(r) for r in rows.by_row()] == [["x", "x", "y"], [], ["y"]]


def test_gather_concatenates_the_picked_rows():
    ptr, data = np.array([0, 2, 2, 5]), np.array([10, 11, 20, 21, 22])
    owners, values = gather(ptr, data, np.array([2, 0, 1, 2]))
    assert owners.tolist() == [0, 0, 0, 1, 1, 3, 3, 3]
    assert values.tolist() == [20, 21, 22, 10, 11, 20, 21, 22]
