"""The MCP Inspector's CLI (npm) as a second, independent client: a TypeScript SDK client, which checks every
structured result against the tool's output schema, date-time formats included, as hosts built on that SDK do.
One seeded file; each call starts `duckgraph serve` through the Inspector."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from tests.e2e.test_mcp_inmemory import make_services

pytestmark = pytest.mark.model

#: Pinned so the check is reproducible; it runs on the node of CI's Debian (20).
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
TIMEOUT_SECONDS = 240


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm) -> Path:
    """A file holding a dated document and a fact with a start, written in process with the real model."""
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed, so the MCP Inspector cannot be run")
    folder = tmp_path_factory.mktemp("inspector")
    with make_services(folder, folder / "kb.duckdb", minilm).knowledge_base as kb:  # writes folder/config.toml
        kb.add_documents([DocumentInput(id="backups", title="Home lab", time="2026-03-04",
                                        text="Backups of nas-01 run nightly at 02:00 to the Synology.")])
        kb.add_knowledge_graph([NodeInput(name="nas-01", type="Server"), NodeInput(name="Synology", type="Device")],
                               [EdgeInput(source="nas-01", type="BACKS_UP_TO", target="Synology",
                                          valid_from="2025-06-01", source_ids=["backups"])])
    return folder


def inspector(folder: Path, *arguments: str) -> dict:
    """One `tools/call` through the Inspector's CLI; its JSON answer."""
    # The server's settings go as environment (the Inspector reads --config itself).
    server_env = {"HF_HUB_OFFLINE": "1", "DUCKGRAPH_DB": str(folder / "kb.duckdb"),
                  "DUCKGRAPH_CONFIG": str(folder / "config.toml")}
    command = ["npx", "-y", INSPECTOR, "--cli", *(f"-e{key}={value}" for key, value in server_env.items()),
               sys.executable, "-m", "duckgraph.core.cli", "serve", "--method", "tools/call", *arguments]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, cwd=folder,
                          env={**os.environ, **server_env})
    if done.returncode and any(code in done.stderr for code in ("ENOTFOUND", "ETIMEDOUT", "EAI_AGAIN")):
        pytest.skip(f"npx could not fetch {INSPECTOR}:\n{done.stderr[-2000:]}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout)


def test_search_answers_a_strict_client_with_its_times_in_rfc_3339(served):
    found = inspector(served, "--tool-name", "search", "--tool-arg", "query=When do the backups run?")
    result = found["structuredContent"]
    assert result["passages"][0]["time"] == "2026-03-04T00:00:00Z"
    assert [e["valid_from"] for e in result["edges"]] == ["2025-06-01T00:00:00Z"]
    assert "nightly at 02:00" in found["content"][0]["text"]


def test_recent_changes_answers_a_strict_client(served):
    changes = inspector(served, "--tool-name", "recent_changes")["structuredContent"]["changes"]
    assert changes and all(change["at"].endswith("Z") for change in changes)
