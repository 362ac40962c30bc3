"""What the default tool set costs a model: its whole `tools/list` (names, descriptions, input schemas; output
schemas are not sent to the model by hosts that follow the spec's advice) is in every conversation's context."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from duckgraph.core.mcp import tool_listing
from duckgraph.core.mcp.tool_listing import built_tool_listing
from duckgraph.core.mcp.tools import GRAPHRAG_TOOLS

#: In tokens of about four characters: issue 28 set 2,000 for ten tools; time, namespaces and global search
#: (issues 30-32) add tools and a namespace argument to each, to 3,000; read_document (reading a document around a
#: search's passage) adds its own cost, 131, as the others' descriptions had nothing left to give up.
MAX_TOKENS = 3_131


def tokens(tools: list[dict[str, Any]]) -> float:
    # json.dumps with its default separators: the spaces a host may keep count too.
    sent = [{"name": t["name"], "description": t["description"], "inputSchema": t["inputSchema"]} for t in tools]
    return len(json.dumps(sent, ensure_ascii=False)) / 4


def check(tools: list[dict[str, Any]]) -> None:
    assert {tool["name"] for tool in tools} == GRAPHRAG_TOOLS
    cost = tokens(tools)
    assert cost <= MAX_TOKENS, f"the default tools/list costs {cost:.0f} tokens; the budget is {MAX_TOKENS}"
    for tool in tools:
        description = tool["description"]
        assert description.strip() == description and "\n" not in description and "  " not in description, (
            f"{tool['name']}: a description with docstring indentation or line breaks: {description!r}")
        assert len(description) >= 30, f"{tool['name']}: say when to use it"


def test_the_shipped_default_listing_fits_the_budget() -> None:
    stored = json.loads(tool_listing.LISTING_PATH.read_text(encoding="utf-8"))
    check(stored["tool_sets"]["graphrag"])


def test_a_freshly_built_default_listing_fits_the_budget() -> None:
    check(anyio.run(built_tool_listing, "graphrag"))


@pytest.mark.parametrize("tool_set", ["memory", "all"])
def test_every_set_has_descriptions_without_indentation(tool_set: str) -> None:
    for tool in anyio.run(built_tool_listing, tool_set):
        assert "\n " not in tool["description"], tool["name"]
