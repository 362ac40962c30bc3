"""The MCP server's tools as the model sees them, and the checks a tool call passes before it reaches the server.

Local models invent tool names, send arguments that are not JSON or that miss the schema; each of these is
answered to the model as a tool error it can correct, never raised to the user.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import SchemaError
from jsonschema.validators import validator_for

#: A tool result longer than this is cut (saying so): a small model's context cannot take a whole graph.
MAX_RESULT_CHARS = 12_000


class ToolCallError(Exception):
    """A call the bridge refuses; its text goes back to the model."""


@dataclass
class ToolCall:
    """One call the model asked for; `arguments` as the model sent them (a JSON text or an object)."""

    name: str
    arguments: Any
    id: str = ""


class ToolBox:
    """The tools of one MCP server (`tools/list`), converted and checked."""

    def __init__(self, tools: list[Any]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._validators = {}
        for tool in tools:
            schema = tool.input_schema or {"type": "object"}
            cls = validator_for(schema)
            try:
                cls.check_schema(schema)
            except SchemaError as exc:  # the server's bug: said at start, not at the first call
                raise ValueError(f"the MCP tool {tool.name} has an invalid input schema: {exc.message}") from None
            self._validators[tool.name] = cls(schema)

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def for_model(self) -> list[dict[str, Any]]:
        """The function-tool list both Ollama's /api/chat and OpenAI's /v1/chat/completions take."""
        return [{"type": "function", "function": {
            "name": tool.name, "description": tool.description or "",
            "parameters": tool.input_schema or {"type": "object", "properties": {}}}} for tool in self._tools.values()]

    def checked_arguments(self, call: ToolCall) -> dict[str, Any]:
        """The call's arguments as an object valid for its tool's schema, or ToolCallError saying what to fix."""
        if call.name not in self._tools:
            raise ToolCallError(f"unknown tool {call.name!r}: the tools are {', '.join(self.names)}")
        arguments = call.arguments
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise ToolCallError(f"the arguments of {call.name} are not valid JSON ({exc.msg} at character "
                                    f"{exc.pos}): send one JSON object matching its parameters") from None
        if not isinstance(arguments, dict):
            raise ToolCallError(f"the arguments of {call.name} must be a JSON object, not {type(arguments).__name__}")
        errors = sorted(self._validators[call.name].iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            problems = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(arguments)'}: {e.message}"
                                 for e in errors[:5])
            raise ToolCallError(f"invalid arguments for {call.name}: {problems}. Fix them and call again")
        return arguments


def result_text(result: Any) -> str:
    """A CallToolResult as the text the model reads (its text parts, else its structured content)."""
    parts = [getattr(block, "text", None) for block in result.content]
    text = "\n".join(p for p in parts if p) or json.dumps(result.structured_content or {}, ensure_ascii=False)
    if len(text) > MAX_RESULT_CHARS:
        text = f"{text[:MAX_RESULT_CHARS]}\n[... {len(text) - MAX_RESULT_CHARS} more characters cut]"
    return f"Error: {text}" if result.is_error else text
