"""Agent memories as hosts keep them: does `search` answer what is stored and say so when nothing is?

Each session of the data file (default: data/agent_sessions.json next to this script) goes into a fresh knowledge
base file the way a host would write it: entities with observations and relations through the memory tools'
functions (`create_entities`, `create_relations`), entities and relations with their source documents through
`add_knowledge_graph`, documents through `add_documents` (the default stack, real all-MiniLM-L6-v2). Then each of its
questions is asked with `search`'s defaults, three ways in the same run:

- search: as shipped;
- whole vectors only: `parts_compared=0`, so the floor looks at whole entities and passages only;
- no floor: `relevance_floor=0`, everything comes back (what the floor costs in answers).

For a question that has answers: whether `search` came back with something, and whether its text (the default
token budget) holds every answer string, ignoring case. For a question about something never stored: whether it
came back empty. Usage:

    python contrib/bench/agent_memory.py [--data FILE] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from locomo import share
from musique import latency, make_services, progress  # also keeps the model offline
from scale import timed

from duckgraph.core.domain import memory_server  # noqa: E402
from duckgraph.core.domain.knowledge_base import KnowledgeBase  # noqa: E402
from duckgraph.core.domain.model import (  # noqa: E402
    DocumentInput, EdgeInput, MemoryEntityInput, NodeInput, RelationInput)
from duckgraph.ports import Embedder  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "agent_sessions.json"
#: The ways each question is asked: label -> search options.
WAYS: dict[str, dict[str, Any]] = {"search": {}, "whole vectors only": {"parts_compared": 0},
                                   "no word margin": {"word_margin": 0}, "no floor": {"relevance_floor": 0}}


def load_session(kb: KnowledgeBase, session: dict[str, Any]) -> None:
    """The session's memory, written as a host would: documents first, then the graph that cites them."""
    if session.get("documents"):
        kb.add_documents([DocumentInput(**d) for d in session["documents"]])
    if session.get("nodes") or session.get("edges"):
        kb.add_knowledge_graph([NodeInput(**n) for n in session.get("nodes", [])],
                               [EdgeInput(**e) for e in session.get("edges", [])])
    if session.get("entities"):
        memory_server.create_entities(kb, [MemoryEntityInput(**e) for e in session["entities"]])
    if session.get("relations"):
        memory_server.create_relations(kb, [RelationInput(**r) for r in session["relations"]])


def answered(text: str, answers: Sequence[str]) -> bool:
    return all(answer.lower() in text.lower() for answer in answers)


def evaluate(kb: KnowledgeBase, session: dict[str, Any]) -> dict[str, Any]:
    """Each question asked each way: per way, the rows of the answerable questions and of the never-stored ones."""
    kb.search(session["questions"][0]["question"])  # the first query pays the model's start
    result: dict[str, Any] = {}
    for way, options in WAYS.items():
        seconds: list[float] = []
        search = functools.partial(kb.search, **options)
        rows = [{"question": item["question"],
                 "empty": (found := timed(seconds, search, item["question"])).nothing_relevant,
                 "answered": answered(found.text, item["answers"])} for item in session["questions"]]
        never = [{"question": question, "empty": timed(seconds, search, question).nothing_relevant}
                 for question in session["never_stored"]]
        result[way] = {"answerable": rows, "never_stored": never, "search_seconds": seconds}
    return result


def summarise(rows: Sequence[dict[str, Any]], never: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"answerable": len(rows), "answered %": share([r["answered"] for r in rows]),
            "answerable empty %": share([r["empty"] for r in rows]), "never stored": len(never),
            "never stored empty %": share([r["empty"] for r in never])}


def run(data: Path, folder: Path, embedder: Embedder | None = None) -> dict[str, Any]:
    sessions = json.loads(data.read_text(encoding="utf-8"))["sessions"]
    report: dict[str, Any] = {"sessions": {}, "all": {}}
    for session in sessions:
        progress(f"{session['name']}: loading and asking {len(session['questions'])} + "
                 f"{len(session['never_stored'])} questions")
        services = make_services(folder / f"agent-{session['name']}.duckdb", embedder=embedder)
        embedder = services.knowledge_base.embedder
        with services.knowledge_base as kb:
            load_session(kb, session)
            report["sessions"][session["name"]] = evaluate(kb, session)
    for way in WAYS:
        per = [report["sessions"][name][way] for name in report["sessions"]]
        report["all"][way] = {
            **summarise([r for p in per for r in p["answerable"]], [r for p in per for r in p["never_stored"]]),
            "search latency": latency([s for p in per for s in p["search_seconds"]])}
        for name, result in report["sessions"].items():
            result[way]["summary"] = summarise(result[way]["answerable"], result[way]["never_stored"])
    return report


def print_report(report: dict[str, Any]) -> None:
    columns = ("answered %", "answerable empty %", "never stored empty %")
    print("Agent memories: questions of what is stored (answered: every answer string in search's text) and of "
          "what is not (should come back empty)")
    print(f"{'session':<12}{'way':<22}{'n':>4}" + "".join(f"{c:>22}" for c in columns) + f"{'n never':>9}")
    for name, result in [*report["sessions"].items(), ("all", report["all"])]:
        for way in WAYS:
            values = result[way] if name == "all" else result[way]["summary"]
            print(f"{name:<12}{way:<22}{values['answerable']:>4}"
                  + "".join(f"{'-' if values[c] is None else values[c]:>22}" for c in columns)
                  + f"{values['never stored']:>9}")
    for way in WAYS:
        lat = report["all"][way]["search latency"]
        print(f"search latency in process ({way}): p50 {lat['median_ms']} ms, p95 {lat['p95_ms']} ms, n = {lat['n']}")
    missed = [(name, r["question"]) for name, result in report["sessions"].items()
              for r in result["search"]["answerable"] if not r["answered"]]
    wrong = [(name, r["question"]) for name, result in report["sessions"].items()
             for r in result["search"]["never_stored"] if not r["empty"]]
    for label, items in (("not answered", missed), ("never stored, not empty", wrong)):
        for name, question in items:
            print(f"  {label}: [{name}] {question}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the sessions, as data/agent_sessions.json")
    parser.add_argument("--json-out", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        parser.error(f"{args.data} is not a file")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="duckgraph-agent-memory-"))
    try:
        report = run(args.data, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print_report(report)
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        progress(f"results written to {args.json_out}")
    return report


if __name__ == "__main__":
    sys.exit(main() and 0)
