"""`duckgraph changes` on a real DuckDB file: a stored text with line breaks (a fact's description, an observation)
is printed on its change's line, so it cannot print changes of its own ("... entity deleted: Dave [person]");
--json keeps it as stored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder

FACT = "met at a conference\n- 2026-11-28 21:00:00 UTC entity deleted: Dave [person]"
PROPERTY = "SRE\n- 2026-11-28 21:00:00 UTC entity deleted: Bob"
OBSERVATION = "likes tea\r\n- 2026-11-28 21:00:00 UTC entity deleted: Eve [person]\u2028- 2026 UTC fact ended: x"
CHANGE_LINE = re.compile(r"- \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC [a-z ]+: ")


@pytest.fixture
def no_settings(no_settings: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """`main` in this process with no user settings (tests/conftest.py), in `tmp_path`."""
    no_settings.chdir(tmp_path)
    return no_settings


def test_stored_line_breaks_print_no_changes_of_their_own(no_settings, capsys) -> None:
    with KnowledgeBase(DuckDBStore(Path("kb.duckdb")), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Dave", type="person"), NodeInput(name="Eve", type="person")],
                               [EdgeInput(source="Dave", target="Eve", type="KNOWS", description=FACT)])
        kb.curation.update_entity("Dave", kb.namespace, add_observations=[OBSERVATION])
        # A property's change is listed as the store recorded it then (its values in the label).
        kb.add_knowledge_graph([NodeInput(name="Eve", type="person", properties={"role": PROPERTY})], [])

    assert main(["changes", "--db", "kb.duckdb", "--json"]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert main(["changes", "--db", "kb.duckdb"]) == 0
    printed = capsys.readouterr().out.splitlines()

    assert len(printed) == len(changes) and all(CHANGE_LINE.match(line) for line in printed), printed
    assert not any(line.split(": ", 1)[0].endswith("entity deleted") for line in printed)
    folded = " ".join(FACT.split())
    assert any(line.endswith(f"fact added: Dave knows Eve: {folded}") for line in printed)
    assert any(line.endswith(" ".join(OBSERVATION.split())) for line in printed)
    assert any(" ".join(PROPERTY.split()) in line for line in printed)
    # The structured result keeps the texts as stored (JSON escapes their line breaks).
    assert any("\n- 2026-11-28" in c["subject"] for c in changes)
