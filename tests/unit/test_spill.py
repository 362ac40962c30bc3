"""The on-disk map an import keeps its file's ids and keys in: it behaves as a dict (and, with `add`, a set)."""

from datetime import datetime

import pytest

from duckgraph.core.files.spill import SpilledMap


def test_a_spilled_map_behaves_as_a_dict_and_a_set():
    spilled = SpilledMap()
    try:
        when = datetime(2026, 11, 27, 5, 30)
        spilled[7] = ("default", "ada lovelace")
        spilled[("default", "ada lovelace")] = "Ada Lovelace"
        spilled[("default", "a", "b", "KNOWS", when, None)] = None
        spilled.add(("default", "doc-1"))
        spilled[7] = ("default", "ada")  # replaced
        assert spilled[7] == ("default", "ada") and spilled.get(8) is None
        assert ("default", "ada lovelace") in spilled and ("default", "a", "b", "KNOWS", when, None) in spilled
        assert ("default", "a", "b", "KNOWS", datetime(2026, 11, 27), None) not in spilled
        assert ("default", "doc-1") in spilled and len(spilled) == 4
        assert set(spilled) == {7, ("default", "ada lovelace"), ("default", "a", "b", "KNOWS", when, None),
                                ("default", "doc-1")}
        del spilled[7]
        with pytest.raises(KeyError):
            spilled[7]
        with pytest.raises(KeyError):
            del spilled[7]
    finally:
        spilled.close()
