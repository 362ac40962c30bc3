"""The `tools/list` answer, computed ahead of time and shipped in the package.

Building a tool's argument validator and its input and output JSON schemas (the MCP SDK does it through pydantic)
is most of what duckgraph adds to a server's start-up: ~0.1 s for ten tools, against an SDK that answers
`tools/list` ~0.85 s after spawn. A server answers `tools/list` from this file and builds its tools in the
background after the handshake, or when a call first needs them. The file is used only while it was made from
this very code (the tool-defining modules' hash) with the installed MCP SDK and pydantic; otherwise the server
builds its tools for the first `tools/list`, as any other server does, and `duckgraph doctor` says why. Then
(a pydantic or MCP SDK release newer than the shipped listing, say) the server's warm-up keeps the listing of
the tools it built in the user cache, with the same fingerprint, and later starts answer from there. After
changing a tool, write the shipped one anew with

    python -m duckgraph.core.mcp.tool_listing

(tests/integration/test_tool_listing.py fails while it is stale).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio
import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.types import Tool as MCPTool

log = logging.getLogger(__name__)

_CORE = Path(__file__).resolve().parents[1]
LISTING_PATH = _CORE / "data" / "tool_listing.json"
#: Where a server keeps the listing of the tools it built when the shipped one does not fit (None: the user cache).
CACHE_PATH: Path | None = None
# The modules whose text decides the tools' names, descriptions and schemas.
_DEFINING_MODULES = (*sorted(f"mcp/tools/{path.name}" for path in (_CORE / "mcp" / "tools").glob("*.py")),
                     "domain/model.py", "domain/memory_server.py")
TOOL_SETS = ("graphrag", "memory", "all")


def fingerprint() -> dict[str, str]:
    """What the listing was computed from: the tool-defining code and the versions that turn it into schemas."""
    digest = hashlib.sha256()
    for name in _DEFINING_MODULES:
        digest.update((_CORE / name).read_bytes())
    try:
        mcp_version = version("mcp")
    except PackageNotFoundError:  # an SDK that is not an installed distribution: never matches
        mcp_version = "unknown"
    return {"code": digest.hexdigest()[:20], "mcp": mcp_version, "pydantic": pydantic.VERSION}


@functools.cache
def surface() -> str:
    """Which tools this code serves, as a short hash: the servers of one file forward calls to each other only when
    theirs is the same (core/sharing/), since a call is answered by the owner's tools but checked against the
    listing of the server it was made to. Hashed from every set's listing (names, descriptions, schemas) in the
    shipped file while it was made from this code, so that versions whose tools are the same share a file; else
    (a listing not written anew after a change) from the tool-defining code itself."""
    code = fingerprint()["code"]
    try:
        stored = json.loads(LISTING_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = {}
    if isinstance(stored, dict) and (stored.get("fingerprint") or {}).get("code") == code:
        made_from = json.dumps(stored.get("tool_sets"), sort_keys=True, ensure_ascii=False)
    else:
        made_from = f"code {code}"
    return hashlib.sha256(made_from.encode("utf-8")).hexdigest()[:16]


@functools.cache
def _shipped() -> tuple[dict[str, list[dict[str, Any]]] | None, str]:
    current = fingerprint()
    try:
        stored = json.loads(LISTING_PATH.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = f"cannot read {LISTING_PATH.name}: {exc}"
    else:
        if stored.get("fingerprint") == current:
            return stored["tool_sets"], (f"made from this code with mcp {current['mcp']} and pydantic "
                                         f"{current['pydantic']}")
        made_with = stored.get("fingerprint") or {}
        differs = ", ".join(f"{key} {made_with.get(key)} here {value}" for key, value in current.items()
                            if made_with.get(key) != value)
        why = f"the shipped listing was made from other code or versions ({differs})"
    cached = _read_cache()
    if cached.get("fingerprint") == current:
        kept = f"the listing of the tools an earlier start built is read from {_cache_path()}"
        return cached["tool_sets"], f"{why}; {kept}"
    return None, why


def _cache_path() -> Path:
    if CACHE_PATH is not None:
        return CACHE_PATH
    import platformdirs  # small; only when the shipped listing does not fit

    return Path(platformdirs.user_cache_dir("duckgraph")) / "tool-listing.json"


def _read_cache() -> dict[str, Any]:
    try:
        return json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def shipped(tool_set: str) -> list[dict[str, Any]] | None:
    """The `tools/list` answer for `tool_set` (tools as JSON) made ahead of time: the shipped one, or the one an
    earlier start of this installation kept; None when neither fits here."""
    tool_sets, _ = _shipped()
    return None if tool_sets is None else tool_sets.get(tool_set)


def remember(tool_set: str, tools: list[dict[str, Any]]) -> None:
    """Keep `tools`, the listing of the tools a server built for `tool_set`, for later starts (see the module's
    text); a cache that cannot be written only costs them the build."""
    path = _cache_path()
    current = fingerprint()
    cached = _read_cache()
    tool_sets = cached.get("tool_sets", {}) if cached.get("fingerprint") == current else {}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_text(json.dumps({"fingerprint": current, "tool_sets": {**tool_sets, tool_set: tools}},
                                      ensure_ascii=False), encoding="utf-8")
        os.replace(partial, path)  # whole or not at all: another server may read it at the same moment
    except OSError as exc:
        log.warning("could not keep the tool listing in %s (later starts build the tools again): %s", path, exc)
    else:
        _shipped.cache_clear()


def status() -> str:
    """One line for `duckgraph doctor`: whether start-up answers from a listing made ahead of time, and if not
    why."""
    tool_sets, reason = _shipped()
    if tool_sets is not None:
        return f"answered from the listing made ahead of time ({reason})"
    return (f"tools built at start, ~0.1 s slower: {reason}; a server's warm-up keeps their listing for the next "
            "start (or `python -m duckgraph.core.mcp.tool_listing` writes the shipped one)")


def as_json(tools: list[MCPTool]) -> list[dict[str, Any]]:
    """Tools as a `tools/list` answer holds them, in JSON."""
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


async def built_tool_listing(tool_set: str) -> list[dict[str, Any]]:
    """The `tools/list` answer for `tool_set` as the SDK computes it from the tool functions, as JSON."""
    # Imported only here and when a server builds its tools: a server that answers from the listing made ahead
    # of time never needs the tools' pydantic models.
    from duckgraph.core.mcp.tools import register_tools

    server = MCPServer("tool-listing")
    register_tools(server, tool_set)
    return as_json(await server.list_tools())


def write(path: Path = LISTING_PATH) -> None:
    """Compute every tool set's listing from the code and store it with its fingerprint."""
    listing = {"fingerprint": fingerprint(),
               "tool_sets": {tool_set: anyio.run(built_tool_listing, tool_set) for tool_set in TOOL_SETS}}
    path.write_text(json.dumps(listing, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
    print(f"wrote {LISTING_PATH}")
