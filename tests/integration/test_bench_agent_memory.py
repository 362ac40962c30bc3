"""The agent-memory runner (contrib/bench/agent_memory.py) end to end on a small session written here, with the
real model; and the shipped sessions' file is one it can load."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "contrib" / "bench"
sys.path.insert(0, str(BENCH))

import agent_memory  # noqa: E402

from duckgraph.core.domain.model import (  # noqa: E402
    DocumentInput, EdgeInput, MemoryEntityInput, NodeInput, RelationInput)

pytestmark = pytest.mark.model

SESSION = {
    "name": "tiny",
    "documents": [{"id": "ci", "title": "CI notes", "text": (
        "Run the tests with `make test`; the suite needs a database first. Deploys are frozen on Fridays.")}],
    "nodes": [{"name": "Mira", "type": "Person", "description": "Backend engineer"},
              {"name": "CI notes page", "type": "Page"}],
    "edges": [{"source": "Mira", "type": "WROTE", "target": "CI notes page", "source_ids": ["ci"]}],
    "entities": [{"name": "Tomas", "entityType": "person", "observations": [
        "Sam's brother", "Lives in Utrecht", "Has two kids", *(f"Visited {city} in 2019" for city in (
            "Porto", "Ghent", "Bern", "Graz", "Lyon", "Turin", "Basel", "Linz")), "Borrowed Sam's drill in October"]}],
    "relations": [{"from": "Tomas", "to": "Mira", "relationType": "knows"}],
    "questions": [{"question": "Who has my drill?", "answers": ["Tomas", "drill"]},
                  {"question": "How do I run the tests?", "answers": ["make test"]},
                  {"question": "What does Mira do?", "answers": ["Backend engineer"]}],
    "never_stored": ["What car do we drive?", "Who is our plumber?"],
}


def test_the_runner_asks_each_question_each_way(tmp_path):
    data = tmp_path / "sessions.json"
    data.write_text(json.dumps({"sessions": [SESSION]}))
    out = tmp_path / "report.json"
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        report = agent_memory.main(["--data", str(data), "--json-out", str(out)])
    assert json.loads(out.read_text()) == report
    search, whole, _, open_ = (report["all"][way] for way in agent_memory.WAYS)
    # Everything stored is answered; the drill and the tests only because their part reached the floor.
    assert (search["answerable"], search["answered %"], search["never stored empty %"]) == (3, 100.0, 100.0)
    rows = {r["question"]: r for r in report["sessions"]["tiny"]["whole vectors only"]["answerable"]}
    assert rows["Who has my drill?"]["empty"] and rows["How do I run the tests?"]["empty"]
    assert whole["answered %"] == round(100 / 3, 1)
    # Without a floor everything comes back, the never stored too.
    assert open_["answered %"] == 100.0 and open_["never stored empty %"] == 0.0
    assert "all         search" in table.getvalue() and "not answered" not in table.getvalue()


def test_a_missed_answer_is_listed(tmp_path, monkeypatch):
    data = tmp_path / "sessions.json"
    session = {**SESSION, "questions": [{"question": "Who has my drill?", "answers": ["a hammer"]}]}
    data.write_text(json.dumps({"sessions": [session]}))
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        report = agent_memory.main(["--data", str(data)])
    assert report["all"]["search"]["answered %"] == 0.0
    assert "not answered: [tiny] Who has my drill?" in table.getvalue()


def test_the_shipped_sessions_are_valid_writes():
    sessions = json.loads(agent_memory.DEFAULT_DATA.read_text())["sessions"]
    assert len(sessions) >= 4
    for session in sessions:
        assert session["questions"] and session["never_stored"]
        assert all(item["answers"] for item in session["questions"])
        # Every write is what the tools accept (the runner writes them through the same models).
        [DocumentInput(**d) for d in session.get("documents", [])]
        [NodeInput(**n) for n in session.get("nodes", [])]
        [EdgeInput(**e) for e in session.get("edges", [])]
        [MemoryEntityInput(**e) for e in session.get("entities", [])]
        [RelationInput(**r) for r in session.get("relations", [])]


def test_a_missing_data_file_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        agent_memory.main(["--data", str(tmp_path / "missing.json")])
