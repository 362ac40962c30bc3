"""`duckgraph changes` and `duckgraph communities` hold their number flags to the ranges the MCP tools take for the
same arguments (one table, core/domain/search_options.py's TOOL_LIMITS), as `duckgraph search` does: a value out
of range is a usage error (exit 2) before the file is opened."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.domain.search_options import TOOL_LIMITS
from duckgraph.core.mcp.tool_listing import built_tool_listing
from duckgraph.plugins.duckdb import DuckDBStore
from tests.fakes import HashingEmbedder


@pytest.fixture
def no_settings(no_settings: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """`main` in this process with no user settings (tests/conftest.py), in `tmp_path`."""
    no_settings.chdir(tmp_path)
    return no_settings


@pytest.mark.parametrize("argv, flag, value, allowed", [
    (["changes"], "--limit", "0", "from 1 to 1000"),
    (["changes"], "--limit", "-3", "from 1 to 1000"),
    (["changes"], "--limit", "1001", "from 1 to 1000"),
    (["communities", "search", "themes"], "--level", "-1", "from 0 to 20"),
    (["communities", "search", "themes"], "--level", "21", "from 0 to 20"),
    (["communities", "search", "themes"], "--token-budget", "99", "from 100 to 50000"),
    (["communities", "search", "themes"], "--token-budget", "10000000", "from 100 to 50000"),
    (["communities", "write"], "--limit", "0", "from 1 to 50"),
    (["communities", "write"], "--limit", "51", "from 1 to 50"),
    (["communities", "build"], "--level", "99", "from 0 to 20"),  # refused whatever the action
    (["documents", "show", "notes.md"], "--before", "101", "from 0 to 100"),
    (["documents", "show", "notes.md"], "--after", "-1", "from 0 to 100"),
])
def test_a_number_beyond_the_tools_limits_is_a_usage_error_and_nothing_is_done(
        no_settings, capsys, argv: list[str], flag: str, value: str, allowed: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--db", "kb.duckdb", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    command = f"duckgraph {argv[0]}"
    assert err.startswith(f"usage: {command}")
    assert err.endswith(f"{command}: error: {flag} must be {allowed}, not {value}\n")
    assert not Path("kb.duckdb").exists()  # refused before the file is opened (or created)


def test_numbers_at_the_limits_are_taken(no_settings, capsys) -> None:
    with KnowledgeBase(DuckDBStore(Path("kb.duckdb")), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ravi", type="Person"), NodeInput(name="Acme", type="Company")],
                               [EdgeInput(source="Ravi", target="Acme", type="WORKS_AT")])
    assert main(["changes", "--db", "kb.duckdb", "--limit", "1", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert len(listed["changes"]) == 1 and listed["truncated"] is True
    assert main(["changes", "--db", "kb.duckdb", "--limit", "1000", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["changes"]) == 3  # two entities and a fact

    with KnowledgeBase(DuckDBStore(Path("fresh.duckdb")), HashingEmbedder()):
        pass  # an empty memory: communities refuses a file that is not there
    # Each option with the action it belongs to (another action refuses it: test_cli_ignored_options.py).
    assert main(["communities", "build", "--db", "fresh.duckdb"]) == 1  # nothing to build from: said, not "0"
    assert "holds nothing to build communities from" in capsys.readouterr().err
    assert main(["communities", "search", "themes", "--db", "fresh.duckdb", "--level", "20", "--token-budget",
                 "50000"]) == 0
    capsys.readouterr()
    # Taken, then refused for what it needs: write has no extractor model here.
    assert main(["communities", "write", "--db", "fresh.duckdb", "--limit", "50"]) == 1
    assert "no extractor model is configured" in capsys.readouterr().err


def _bounds(schema: dict[str, Any]) -> tuple[int, int]:
    """The minimum and maximum of a number's schema (an optional one's sits in anyOf beside null)."""
    for option in [schema, *schema.get("anyOf", [])]:
        if "minimum" in option:
            return option["minimum"], option["maximum"]
    raise AssertionError(f"no bounds in {schema}")


def test_the_tools_schemas_take_their_bounds_from_the_same_table() -> None:
    tools = {tool["name"]: tool for tool in anyio.run(built_tool_listing, "all")}
    for tool, limits in TOOL_LIMITS.items():
        properties = tools[tool]["inputSchema"]["properties"]
        assert {name: _bounds(properties[name]) for name in limits} == limits, tool
