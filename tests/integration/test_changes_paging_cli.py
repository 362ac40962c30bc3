"""`duckgraph changes` on a real DuckDB file: changes that share one moment (one write) are paged by position, and
what the command prints says which offset lists the next ones instead of advising to narrow since/until (which
cannot split one moment)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore

from tests.fakes import HashingEmbedder


@pytest.fixture
def no_settings(no_settings: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """`main` in this process with no user settings (tests/conftest.py), in `tmp_path`."""
    no_settings.chdir(tmp_path)
    return no_settings


def test_changes_of_one_write_say_the_offset_of_the_next_ones(no_settings, capsys) -> None:
    with KnowledgeBase(DuckDBStore(Path("kb.duckdb")), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name=f"Server {i:03d}", type="Host") for i in range(150)], [])

    assert main(["changes", "--db", "kb.duckdb", "--limit", "100", "--json"]) == 0
    page = json.loads(capsys.readouterr().out)
    assert len({c["at"] for c in page["changes"]}) == 1  # one write, one moment: no since/until splits it
    assert len(page["changes"]) == 100
    assert (page["truncated"], page["next_offset"]) == (True, 100)
    assert page["text"].splitlines()[-1] == (
        "(more changes: offset=100 lists the next ones, with the same since and until)")

    # --offset lists the rest, each change once.
    assert main(["changes", "--db", "kb.duckdb", "--limit", "100", "--offset", "100", "--json"]) == 0
    rest = json.loads(capsys.readouterr().out)
    assert (len(rest["changes"]), rest["truncated"]) == (50, False)
    assert {c["subject"] for c in page["changes"] + rest["changes"]} == {f"Server {i:03d} [Host]" for i in range(150)}

    # The command's text is never cut to a budget: every change of the span is printed.
    assert main(["changes", "--db", "kb.duckdb", "--limit", "1000"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 150 and all(line.startswith("- ") for line in printed)
    assert {line.split(": ", 1)[1] for line in printed} == {f"Server {i:03d} [Host]" for i in range(150)}
