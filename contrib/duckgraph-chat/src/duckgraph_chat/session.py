"""One conversation: the model's turns, its tool calls run one at a time on the MCP server, a bound on rounds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio

from duckgraph_chat.models import ChatModel, Reply
from duckgraph_chat.tools import ToolBox, ToolCall, ToolCallError, result_text

LIMIT_NOTE = ("You have used the tool calls allowed for this answer. Answer now from what the tools returned, "
              "without calling more.")


def server_gone(exc: BaseException) -> bool:
    """Whether `exc` says the MCP server's connection is closed: the SDK raises MCPError(CONNECTION_CLOSED) for a
    request that was waiting, or sent, when the server exited; the anyio errors come from the stream beneath."""
    from mcp import MCPError  # imported here, as in cli.py: `--help` should not wait for the SDK
    from mcp.types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError))


class ChatSession:
    """Keeps the messages; `turn` answers one user message, streaming the text to `write`, tool traces to `trace`."""

    def __init__(self, client: Any, model: ChatModel, toolbox: ToolBox, system: str, *, max_tool_rounds: int,
                 write: Callable[[str], None], trace: Callable[[str], None]) -> None:
        self.client, self.model, self.toolbox = client, model, toolbox
        self.max_tool_rounds = max_tool_rounds
        self.write, self.trace = write, trace
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}]

    async def turn(self, text: str) -> str:
        """The answer to `text`. On a ModelError the conversation is left as it was before the turn."""
        before = len(self.messages)
        self.messages.append({"role": "user", "content": text})
        try:
            return await self._answer()
        except BaseException:
            del self.messages[before:]
            raise

    async def _answer(self) -> str:
        tools = self.toolbox.for_model()
        for _ in range(self.max_tool_rounds):
            reply = await self._ask(tools)
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:  # one at a time: each may depend on what the one before wrote
                self.messages.append(self.model.tool_message(call, await self._run(call)))
        # Out of rounds: one last answer without tools, so a model that keeps calling cannot loop.
        self.messages.append({"role": "system", "content": LIMIT_NOTE})
        reply = await self._ask(None)
        if reply.tool_calls:
            self.trace(f"[stopped: the model still asked for tools after {self.max_tool_rounds} rounds]")
        return reply.content

    async def _ask(self, tools: list[dict[str, Any]] | None) -> Reply:
        wrote = False

        def write(text: str) -> None:
            nonlocal wrote
            wrote = True
            self.write(text)

        try:
            reply = await self.model.complete(self.messages, tools, write)
        except BaseException:
            if wrote:  # text of a reply that failed midway: its line is ended, so the next answer has its own
                self.write("\n")
            raise
        if reply.content:
            self.write("\n")
        if not reply.tool_calls or tools is not None:
            self.messages.append(self.model.assistant_message(reply))
        else:  # calls that will not run are not kept: the next request must not name calls without results
            self.messages.append(self.model.assistant_message(Reply(reply.content)))
        return reply

    async def _run(self, call: ToolCall) -> str:
        shown = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
        self.trace(f"[tool {call.name} {shown[:200]}]")
        try:
            arguments = self.toolbox.checked_arguments(call)
        except ToolCallError as exc:
            self.trace(f"[refused: {exc}]")
            return f"Error: {exc}"
        try:
            result = await self.client.call_tool(call.name, arguments)
        except Exception as exc:  # a protocol error (invalid params, a crashed call) is the model's to handle too
            if server_gone(exc):
                raise  # but no later call can succeed: the chat ends (cli.py says so)
            self.trace(f"[failed: {exc}]")
            return f"Error: the tool call failed: {exc}"
        if result.is_error:
            self.trace("[the tool answered with an error]")
        return result_text(result)
