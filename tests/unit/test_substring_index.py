"""The shortcut the substring index folds ASCII texts with gives what `ports.names.unaccented` gives."""

from duckgraph.plugins.duckdb.mirror.substrings import SEPARATOR, _part, folded
from duckgraph.ports.names import unaccented


def test_folding_ascii_with_lower_is_the_names_rule():
    every = "".join(map(chr, range(128)))
    assert all(folded(ch) == unaccented(ch) for ch in every)
    assert folded(every) == unaccented(every)
    assert folded("Łukasz Nowak") == unaccented("Łukasz Nowak") == "lukasz nowak"


def test_a_node_s_texts_are_folded_each_on_its_own_and_ended_by_the_separator():
    assert _part("Ada LOVELACE", "Person", ("Wrote Notes", "x")) == "ada lovelace\0person\0wrote notes\0x\0"
    assert _part("Zoë", "Chat", None) == f"zoe{SEPARATOR}chat{SEPARATOR}"
    texts = ("José", "person", "café")
    assert _part(*texts[:2], texts[2:]) == "".join(unaccented(t) + SEPARATOR for t in texts)
