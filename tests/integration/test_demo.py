"""`duckgraph demo` on the real model: the Apple disambiguation and the multi-hop question."""

import json
import socket
import tempfile
from importlib import resources

import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput

FRUIT_SIDE = {"apple", "Malus domestica", "Malus sieversii", "Central Asia", "apple pie", "cider", "orchard"}


@pytest.fixture
def demo_kb(real_kb):
    data = json.loads(resources.files("duckgraph.core").joinpath("data/demo.json").read_text())
    real_kb.add_documents([DocumentInput(**d) for d in data["documents"]])
    real_kb.add_knowledge_graph([NodeInput(**n) for n in data["nodes"]], [EdgeInput(**e) for e in data["edges"]])
    return real_kb


def test_apple_question_keeps_the_company_and_drops_the_fruit(demo_kb):
    result = demo_kb.search("Who runs Apple and which products does the company design?")
    names = {n.name for n in result.nodes}
    assert {"Apple Inc.", "Tim Cook", "iPhone", "Mac"} <= names
    assert not names & FRUIT_SIDE, f"fruit nodes leaked into a question about the company: {names & FRUIT_SIDE}"
    assert result.passages[0].document_id == "apple-inc"


def test_multi_hop_question_reaches_the_answer_through_the_fact(demo_kb):
    result = demo_kb.search("Which university did the founder of Microsoft drop out of?")
    names = {n.name for n in result.nodes}
    assert {"Bill Gates", "Microsoft", "Harvard University"} <= names
    assert any(e.type == "DROPPED_OUT_OF" and e.target == "Harvard University" for e in result.edges)
    assert "bill-gates" in [p.document_id for p in result.passages[:2]]
    # The kept subgraph is connected: every node is joined to an anchor through the returned edges.
    adjacency: dict[str, set[str]] = {}
    for edge in result.edges:
        adjacency.setdefault(edge.source, set()).add(edge.target)
        adjacency.setdefault(edge.target, set()).add(edge.source)
    seen = {a.name for a in result.anchors}
    frontier = list(seen)
    while frontier:
        for neighbour in adjacency.get(frontier.pop(), ()):
            if neighbour not in seen:
                seen.add(neighbour)
                frontier.append(neighbour)
    assert names <= seen


def test_demo_command_prints_both_searches(tmp_path, capsys, minilm, monkeypatch):
    monkeypatch.setenv("DUCKGRAPH_CONFIG", "")
    path = tmp_path / "demo.duckdb"
    assert main(["demo", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    apple_part, microsoft_part = out.split("== search: ")[1:]
    # The fruit is no answer: not among the ranked results (in a memory of 7 documents, the room the budget leaves
    # shows the next passages too, under their own heading).
    ranked = apple_part.partition("More passages, ranked lower:")[0]
    assert "Tim Cook" in ranked and "apple pie" not in ranked
    assert "Harvard University" in microsoft_part
    assert main(["demo", "--db", str(path)]) == 1  # refuses to overwrite an existing file


def test_demo_without_db_removes_its_temporary_folder(tmp_path, capsys, minilm, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setenv("DUCKGRAPH_CONFIG", "")
    assert main(["demo"]) == 0
    captured = capsys.readouterr()
    assert "== search: " in captured.out
    assert f"into a temporary file, {temporary}" in captured.err and "(removed at the end" in captured.err
    assert list(temporary.iterdir()) == []


def test_a_failing_demo_removes_its_temporary_folder_too(tmp_path, capsys, monkeypatch):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    monkeypatch.setenv("DUCKGRAPH_CONFIG", "")
    with socket.socket() as sock:  # Ollama is down: the first embedding fails
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER", "ollama")
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps({"base_url": url}))
    assert main(["demo"]) == 1
    assert f"cannot reach Ollama at {url}" in capsys.readouterr().err
    assert list(temporary.iterdir()) == []
