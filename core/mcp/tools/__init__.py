"""The MCP tools. Thin: they validate, call the knowledge base on a worker thread, and turn domain errors into
tool errors the model can act on. The server imports this module when it builds its tools (after the handshake,
see core/mcp/tool_listing.py), so the pydantic models the tools name stay off the start-up path."""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server.mcpserver import MCPServer

from duckgraph.core.mcp.tools.communities import register_community_tools, register_report_tools
from duckgraph.core.mcp.tools.deletes import (
    register_document_deletes, register_either_deletes, register_graphrag_deletes, register_memory_deletes)
from duckgraph.core.mcp.tools.knowledge import register_graphrag_tools
from duckgraph.core.mcp.tools.memory import register_memory_tools
from duckgraph.core.mcp.tools.namespaces import register_namespace_tools


def register_tools(server: MCPServer, tool_set: str) -> None:
    """Add the tools of `tool_set` (graphrag, memory or all) to `server`.

    Both sets have delete_entities and delete_relations, each in its own vocabulary (graphrag: names and
    {source, target, type}; memory: the reference's entityNames and {from, to, relationType}). A server lists a
    name once, so with `all` (also what the owner of a shared file runs its clients' calls with) one tool of each
    name takes either vocabulary and answers in the one it was called with."""
    if tool_set in ("graphrag", "all"):
        register_graphrag_tools(server)
        register_namespace_tools(server)
        register_community_tools(server)
    if tool_set in ("memory", "all"):
        register_memory_tools(server)
    if tool_set == "all":
        register_report_tools(server)
        register_document_deletes(server)
    {"graphrag": register_graphrag_deletes, "memory": register_memory_deletes,
     "all": register_either_deletes}[tool_set](server)
    for tool in server._tool_manager.list_tools():  # noqa: SLF001 (see core/mcp/server.py)
        tool.description = " ".join(inspect.cleandoc(tool.description).splitlines())  # a docstring's line breaks
        if tool.name in GRAPHRAG_TOOLS and tool_set != "memory":  # memory's delete_* share their names only
            tool.parameters = _lean_schema(tool.parameters)
        if tool_set != "all":
            for argument in ALL_SET_ARGUMENTS.get(tool.name, ()):
                del tool.parameters["properties"][argument]


#: The default set, whose whole listing a model pays for in every conversation (tests/integration/test_tool_cost.py).
GRAPHRAG_TOOLS = frozenset({
    "add_knowledge_graph", "add_documents", "search", "get_entities", "update_entity", "merge_entities",
    "find_paths", "graph_stats", "delete_entities", "delete_relations", "list_namespaces", "delete_namespace",
    "end_relations", "recent_changes",
    "global_search", "build_communities", "add_urls", "read_document",
})


#: Arguments that only the `all` set lists (the set of the web page, core/ui/, and of a file's owner running another
#: server's calls): the default set's listing is at its token budget. A server of another set refuses them, as any
#: argument its listing lacks (core/mcp/server.py).
ALL_SET_ARGUMENTS = {"update_entity": ("expected_fingerprint",)}


def _lean_schema(schema: Any) -> Any:
    """`schema` without what a model does not need to call the tool: pydantic's titles (the property names
    again), `additionalProperties: true` (the default) and the null alternative of optional arguments (leaving
    them out is how a model says null). Validation still uses the tool's own models."""
    if isinstance(schema, list):
        return [_lean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lean: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            lean[key] = {name: _lean_schema(item) for name, item in value.items()}
        elif not (key == "title" and isinstance(value, str)) and not (key == "additionalProperties" and value is True):
            lean[key] = _lean_schema(value)
    options = lean.get("anyOf")
    if "default" in lean and lean["default"] is None and options and len(options) == 2 and {"type": "null"} in options:
        kept = next(option for option in options if option != {"type": "null"})
        del lean["anyOf"], lean["default"]
        lean = {**kept, **lean}
    return lean


