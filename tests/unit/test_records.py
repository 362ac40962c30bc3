"""Array helpers the store and the retrieval share (ports/records.py)."""

from __future__ import annotations

import numpy as np
import pytest

from duckgraph.ports import isin_ids, link_counts
from duckgraph.ports import records


@pytest.mark.parametrize("span", [50, 5_000_000], ids=["table", "sorted"])
def test_isin_ids_answers_as_numpy_isin_on_either_path(span: int, monkeypatch):
    rng = np.random.default_rng(span)
    values = rng.integers(-3, span, 3_000)
    ids = np.concatenate([rng.choice(values, 40), rng.integers(-3, span, 40)])
    chosen = []
    real_isin = np.isin
    monkeypatch.setattr(np, "isin", lambda *a, **k: chosen.append(k.get("kind")) or real_isin(*a, **k))
    assert np.array_equal(isin_ids(values, ids), real_isin(values, ids))
    assert chosen == (["table"] if span <= records.TABLE_SPAN else [None])
    assert isin_ids(values, ids[:0]).shape == (3_000,) and not isin_ids(values, ids[:0]).any()
    assert isin_ids(values[:0], ids).shape == (0,)


def test_link_counts_counts_each_ids_links_in_the_order_of_the_ids():
    assert link_counts([7, 3, 9], [3, 7, 3], [9, 3]).tolist() == [1, 3, 1]
    assert link_counts([4, 2]).tolist() == [0, 0]
