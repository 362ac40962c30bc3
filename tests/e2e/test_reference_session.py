"""One recorded memory-tool session, run against the reference MCP memory server (from npm, with npx) and against
`duckgraph serve` with DUCKGRAPH_TOOLS=memory, both as subprocesses through the official `mcp` client; then the
duckgraph file exported with `duckgraph export --format memory-jsonl` and read back by the reference server.

Where the two servers may differ, and how the comparison allows for it (all of it by design, see
core/domain/memory_server.py):
- names are compared ignoring case: the reference keeps "maya chen" beside "Maya Chen" as a second entity,
  duckgraph merges its observations into "Maya Chen"; so an entity's observations are compared with the union of
  those of the reference's variants of its name;
- the reference stores a relation to an entity that does not exist dangling, duckgraph creates that end as an
  entity of type "unknown": duckgraph's entities are the reference's plus such ends, and nothing else.
Everything else must be the same: the relations (ends and type as written), the observations, the types, and every
entity each search_nodes of the reference returns is in duckgraph's answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

pytestmark = pytest.mark.model

REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory@2026.8.31"  # as in test_memory_compat.py
TIMEOUT_SECONDS = 240
DUCKGRAPH = [sys.executable, "-m", "duckgraph.core.cli"]

SESSION: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [
        {"name": "Maya Chen", "entityType": "person",
         "observations": ["Lead engineer of the Tidewater project", "Prefers asynchronous code reviews"]},
        {"name": "Tidewater", "entityType": "project",
         "observations": ["Written in Go", "Ingests sensor data from ocean buoys"]},
        {"name": "Harbor Labs", "entityType": "organization", "observations": ["Marine research lab"]},
        {"name": "Lisbon", "entityType": "city", "observations": ["Capital of Portugal"]},
    ]}),
    # A case variant (the reference: a second entity; duckgraph: merged) and an exact repeat (both: skipped).
    ("create_entities", {"entities": [
        {"name": "maya chen", "entityType": "person", "observations": ["Speaks Portuguese"]},
        {"name": "Harbor Labs", "entityType": "organization", "observations": ["Marine research lab"]},
    ]}),
    # PostGIS and Raj Patel do not exist (the reference: dangling relations; duckgraph: 'unknown' entities).
    ("create_relations", {"relations": [
        {"from": "Maya Chen", "to": "Harbor Labs", "relationType": "works_at"},
        {"from": "Maya Chen", "to": "Tidewater", "relationType": "leads"},
        {"from": "Harbor Labs", "to": "Lisbon", "relationType": "located_in"},
        {"from": "Tidewater", "to": "PostGIS", "relationType": "depends_on"},
        {"from": "Raj Patel", "to": "Tidewater", "relationType": "reviews"},
    ]}),
    ("add_observations", {"observations": [
        {"entityName": "Tidewater", "contents": ["Deployed on three research vessels"]},
        {"entityName": "Maya Chen", "contents": ["Joined Harbor Labs in 2021"]},
    ]}),
    ("create_entities", {"entities": [
        {"name": "Raj Patel", "entityType": "person", "observations": ["Reviews pull requests on Tuesdays"]},
    ]}),
    ("search_nodes", {"query": "Go"}),
    ("search_nodes", {"query": "Kubernetes"}),
    ("search_nodes", {"query": "harbor"}),
    ("open_nodes", {"names": ["Maya Chen", "Lisbon"]}),
    ("delete_observations", {"deletions": [
        {"entityName": "Maya Chen", "observations": ["Prefers asynchronous code reviews"]},
    ]}),
    ("create_relations", {"relations": [{"from": "Raj Patel", "to": "Maya Chen", "relationType": "knows"}]}),
    ("delete_relations", {"relations": [{"from": "Harbor Labs", "to": "Lisbon", "relationType": "located_in"}]}),
    ("delete_entities", {"entityNames": ["Lisbon"]}),
    ("search_nodes", {"query": "buoys"}),
    ("read_graph", {}),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("session")


def reference_params(memory_file: Path) -> StdioServerParameters:
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed, so the reference memory server cannot be run")
    # The user's HOME, so npx uses (and fills) the ordinary npm cache.
    return StdioServerParameters(command="npx", args=["-y", REFERENCE_PACKAGE],
                                 env={**os.environ, "MEMORY_FILE_PATH": str(memory_file)}, cwd=memory_file.parent)


def duckgraph_env(folder: Path) -> dict[str, str]:
    home = folder / "home"
    home.mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "DUCKGRAPH_TOOLS": "memory"}


async def run_calls(params: StdioServerParameters, log: Path, calls: list[tuple[str, dict[str, Any]]],
                    *, skip_when_unavailable: bool = False) -> list[dict[str, Any]]:
    """Each call's structured result (every call must succeed), from one server process."""
    with log.open("w", encoding="utf-8") as errlog, anyio.fail_after(TIMEOUT_SECONDS):
        client = Client(stdio_client(params, errlog=errlog))
        try:
            await client.__aenter__()
        except Exception as exc:
            if skip_when_unavailable:
                pytest.skip(f"npx could not fetch or start {REFERENCE_PACKAGE}: {exc}")
            raise
        try:
            results = []
            for tool, arguments in calls:
                result = await client.call_tool(tool, json.loads(json.dumps(arguments)))
                text = "\n".join(block.text for block in result.content if block.type == "text")
                assert not result.is_error, f"{params.command} failed on {tool}({arguments}): {text}"
                results.append(result.structured_content)
            return results
        finally:
            await client.__aexit__(None, None, None)


@pytest.fixture(scope="module")
def reference_run(folder) -> list[dict[str, Any]]:
    params = reference_params(folder / "reference.jsonl")
    return anyio.run(lambda: run_calls(params, folder / "reference.log", SESSION, skip_when_unavailable=True))


@pytest.fixture(scope="module")
def duckgraph_run(folder) -> list[dict[str, Any]]:
    params = StdioServerParameters(command=DUCKGRAPH[0], args=[*DUCKGRAPH[1:], "serve", "--db",
                                                               str(folder / "kb.duckdb")],
                                   env=duckgraph_env(folder), cwd=folder)
    results = anyio.run(lambda: run_calls(params, folder / "duckgraph.log", SESSION))
    assert "Traceback" not in (folder / "duckgraph.log").read_text(encoding="utf-8")
    return results


def folded(graph: dict[str, Any]) -> tuple[dict[str, set[str]], dict[str, set[str]], set[tuple[str, str, str]]]:
    """Observations and types by case-folded name (variants pooled), and the relations with case-folded ends."""
    observations: dict[str, set[str]] = {}
    types: dict[str, set[str]] = {}
    for entity in graph["entities"]:
        observations.setdefault(entity["name"].casefold(), set()).update(entity["observations"])
        types.setdefault(entity["name"].casefold(), set()).add(entity["entityType"])
    relations = {(r["from"].casefold(), r["to"].casefold(), r["relationType"]) for r in graph["relations"]}
    return observations, types, relations


def test_the_session_keeps_what_the_reference_keeps(reference_run, duckgraph_run):
    ours, theirs = dict(enumerate(duckgraph_run)), dict(enumerate(reference_run))
    # What duckgraph reported where it differs from the reference.
    assert ours[1]["entities"] == [{"name": "maya chen", "entityType": "person", "observations":
                                    ["Speaks Portuguese"], "merged_into": "Maya Chen"}]
    assert [e["name"] for e in theirs[1]["entities"]] == ["maya chen"]
    assert len(ours[2]["relations"]) == len(theirs[2]["relations"]) == 5
    notes = [r.get("note") for r in ours[2]["relations"]]
    assert notes[:3] == [None] * 3 and "'PostGIS' did not exist" in notes[3] and "'Raj Patel'" in notes[4]
    assert ours[4]["entities"] == theirs[4]["entities"]  # Raj Patel: created in both (a placeholder filled here)

    # Every entity the reference's searches find, duckgraph's find too; nothing for what was never stored.
    for step, (tool, arguments) in enumerate(SESSION):
        if tool == "search_nodes":
            mine = [e["name"].casefold() for e in ours[step]["entities"]]
            assert {e["name"].casefold() for e in theirs[step]["entities"]} <= set(mine), arguments
            assert len(mine) == len(set(mine)), arguments
    assert "tidewater" in [e["name"].casefold() for e in ours[5]["entities"]]  # "Written in Go"
    assert ours[6] == theirs[6] == {"entities": [], "relations": []}  # Kubernetes

    # The final graphs: the same relations, observations and types; the ends the reference left dangling are
    # duckgraph's 'unknown' entities, and there is no other difference.
    my_observations, my_types, my_relations = folded(ours[14])
    ref_observations, ref_types, ref_relations = folded(theirs[14])
    assert my_relations == ref_relations and len(my_relations) == 5
    dangling = {end for relation in ref_relations for end in relation[:2]} - ref_observations.keys()
    assert dangling == {"postgis"}
    assert set(my_observations) == set(ref_observations) | dangling
    assert my_types["postgis"] == {"unknown"}
    for name, texts in ref_observations.items():
        assert my_observations[name] == texts, name
        assert my_types[name] <= ref_types[name], name
    assert my_observations["maya chen"] == {"Lead engineer of the Tidewater project", "Speaks Portuguese",
                                            "Joined Harbor Labs in 2021"}


def test_the_export_is_a_file_the_reference_reads_and_writes_alike(folder, duckgraph_run):
    exported = folder / "memory.jsonl"
    done = subprocess.run([*DUCKGRAPH, "export", "--format", "memory-jsonl", "--db", str(folder / "kb.duckdb"),
                           "-o", str(exported)], env=duckgraph_env(folder), capture_output=True, text=True,
                          timeout=TIMEOUT_SECONDS, check=False)
    assert done.returncode == 0, done.stderr
    assert "5 entities and 5 relations" in done.stderr
    written = exported.read_bytes()

    # read_graph of the reference on the file is duckgraph's own read_graph, entity for entity, in order; a
    # deletion of nothing makes the reference save the file again, byte for byte as duckgraph wrote it.
    params = reference_params(exported)
    graph, _, _ = anyio.run(lambda: run_calls(params, folder / "export.log", [
        ("read_graph", {}), ("delete_entities", {"entityNames": []}), ("read_graph", {})],
        skip_when_unavailable=True))
    assert graph == duckgraph_run[-1]
    assert exported.read_bytes() == written
