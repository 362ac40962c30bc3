"""The `tools/list` answer, computed ahead of time and shipped in the package.

Building a tool's argument validator and its input and output JSON schemas (the MCP SDK does it through pydantic)
is most of what duckgraph adds to a server's start-up: ~0.1 s for ten tools, against an SDK that answers
`tools/list` ~0.85 s after spawn. A server answers `tools/list` from this file and builds its tools in the
background after the handshake, or when a call first needs them. The file is used only while it was made from
this very code (the tool-defining modules' hash) with the installed MCP SDK and pydantic; otherwise the server
builds its tools for the first `tools/list`, as any other server does, and `duckgraph doctor` says why. After
changing a tool, write it anew with

    python -m duckgraph.core.tool_listing

(tests/integration/test_tool_listing.py fails while it is stale).
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import pydantic

LISTING_PATH = Path(__file__).with_name("data") / "tool_listing.json"
# The modules whose text decides the tools' names, descriptions and schemas.
_DEFINING_MODULES = ("server.py", "tools.py", "model.py", "memory_compat.py")
TOOL_SETS = ("graphrag", "memory", "all")


def fingerprint() -> dict[str, str]:
    """What the listing was computed from: the tool-defining code and the versions that turn it into schemas."""
    digest = hashlib.sha256()
    for name in _DEFINING_MODULES:
        digest.update(Path(__file__).with_name(name).read_bytes())
    try:
        mcp_version = version("mcp")
    except PackageNotFoundError:  # an SDK that is not an installed distribution: never matches
        mcp_version = "unknown"
    return {"code": digest.hexdigest()[:20], "mcp": mcp_version, "pydantic": pydantic.VERSION}


@functools.cache
def _shipped() -> tuple[dict[str, list[dict[str, Any]]] | None, str]:
    try:
        stored = json.loads(LISTING_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"cannot read {LISTING_PATH.name}: {exc}"
    current = fingerprint()
    if stored.get("fingerprint") != current:
        made_with = stored.get("fingerprint") or {}
        differs = ", ".join(f"{key} {made_with.get(key)} here {value}" for key, value in current.items()
                            if made_with.get(key) != value)
        return None, f"the shipped listing was made from other code or versions ({differs})"
    return stored["tool_sets"], f"made from this code with mcp {current['mcp']} and pydantic {current['pydantic']}"


def shipped(tool_set: str) -> list[dict[str, Any]] | None:
    """The shipped `tools/list` answer for `tool_set` (tools as JSON), or None when it does not fit here."""
    tool_sets, _ = _shipped()
    return None if tool_sets is None else tool_sets.get(tool_set)


def status() -> str:
    """One line for `duckgraph doctor`: whether start-up answers from the shipped listing, and if not why."""
    tool_sets, reason = _shipped()
    if tool_sets is not None:
        return f"answered from the shipped listing ({reason})"
    return (f"tools built at start, ~0.1 s slower: {reason}; `python -m duckgraph.core.tool_listing` writes "
            "one for this installation")


def write(path: Path = LISTING_PATH) -> None:
    """Compute every tool set's listing from the code and store it with its fingerprint."""
    import anyio

    # Imported here: the server imports this module.
    from duckgraph.core.server import built_tool_listing

    listing = {"fingerprint": fingerprint(),
               "tool_sets": {tool_set: anyio.run(built_tool_listing, tool_set) for tool_set in TOOL_SETS}}
    path.write_text(json.dumps(listing, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
    print(f"wrote {LISTING_PATH}")
