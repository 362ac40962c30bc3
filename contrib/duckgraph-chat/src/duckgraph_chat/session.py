"""One conversation: the model's turns, its tool calls run one at a time on the MCP server, a bound on rounds."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio

from duckgraph_chat.models import ChatModel, ModelError, Reply
from duckgraph_chat.tools import ToolBox, ToolCall, ToolCallError, result_text

#: told the model once its rounds are spent, at the end of the last tool result of the one request that offers no
#: tools, and never stored (see ChatSession._answer)
LIMIT_NOTE = ("[Note from the chat, not from the tool: you have used the tool calls allowed for this answer. Answer "
              "now from what the tools returned, without calling more.]")

#: the assistant message that closes the kept rounds of a turn whose answer failed (see ChatSession.turn)
LOST_ANSWER = ("[My answer to this was lost: the reply after the tool calls above failed, so the user saw none. "
               "Those tool calls did run, with the results above.]")

#: the same, for a turn whose model, asked to answer without tools, called tools again and said nothing
NO_ANSWER = ("[I gave no answer to this: asked to answer from the tool calls above without calling more, I called "
             "tools again, so the user saw none. Those tool calls did run, with the results above.]")


class NoAnswer(ModelError):
    """The model, asked to answer without tools after its last round, asked for tools again and gave no text."""


class TurnFailed(ModelError):
    """A model error after some of the turn's tool calls had reached the MCP server: the error's text, and `ran`,
    those calls, in order (what they wrote is in memory, and the conversation keeps them)."""

    def __init__(self, error: ModelError, ran: list[ToolCall]) -> None:
        super().__init__(str(error))
        self.ran = ran

    @property
    def note(self) -> str:
        """The line that tells the user the memory may have changed, naming the calls briefly."""
        counts: dict[str, int] = {}
        for call in self.ran:
            counts[call.name] = counts.get(call.name, 0) + 1
        names = ", ".join(name + (f" ({n} times)" if n > 1 else "") for name, n in counts.items())
        n = len(self.ran)
        return (f"[the turn failed after {n} tool call{'s' if n != 1 else ''} had run on the MCP server: {names}; "
                f"what {'they' if n != 1 else 'it'} did stays, and the conversation keeps "
                f"{'them' if n != 1 else 'it'}, so the model knows]")


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
        self._rounds_end = 0  # the turn's: where its completed rounds of tool calls end in `messages`
        self._ran: list[ToolCall] = []  # the turn's: the calls that reached the MCP server

    async def turn(self, text: str) -> str:
        """The answer to `text`. On a ModelError before any round of tool calls completed, the conversation is left
        as it was before the turn; after one, it keeps the user's message and the completed rounds (TurnFailed when
        a call of theirs reached the MCP server). On any other error the turn is dropped (the chat ends on those)."""
        before = len(self.messages)
        self.messages.append({"role": "user", "content": text})
        self._rounds_end = before  # where the completed rounds end; `before`: none completed
        self._ran = []
        try:
            return await self._answer()
        except ModelError as exc:
            if self._rounds_end == before:
                del self.messages[before:]
                raise
            # The calls ran: forgetting them would leave the memory holding writes the model does not know of (it
            # may write them again). The failed reply itself goes (the round limit's note was never stored).
            del self.messages[self._rounds_end:]
            # The rounds end with tool results; an assistant message closes them, as a completed turn does: strict
            # servers refuse a user message right after tool results (Mistral's validator: "Unexpected role 'user'
            # after role 'tool'"), while an assistant text there is valid for OpenAI-compatible servers and Ollama.
            closing = NO_ANSWER if isinstance(exc, NoAnswer) else LOST_ANSWER
            self.messages.append(self.model.assistant_message(Reply(closing)))
            if self._ran:
                raise TurnFailed(exc, list(self._ran)) from exc
            raise  # only refused calls: nothing reached the server, the memory is as it was
        except BaseException:
            del self.messages[before:]
            raise

    async def _answer(self) -> str:
        tools = self.toolbox.for_model()
        for _ in range(self.max_tool_rounds):
            reply = await self._ask(self.messages, tools)
            self.messages.append(self.model.assistant_message(reply))
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:  # one at a time: each may depend on what the one before wrote
                self.messages.append(self.model.tool_message(call, await self._run(call)))
            self._rounds_end = len(self.messages)  # every call of the round has its result: a valid conversation
        # Out of rounds: one last answer without tools, so a model that keeps calling cannot loop. The note saying so
        # goes at the end of the last tool result, in this request only: the chat templates of many local models take
        # a system message only first, and strict servers refuse a user message right after tool results.
        last = self.messages[-1]
        reply = await self._ask([*self.messages[:-1], {**last, "content": f"{last['content']}\n\n{LIMIT_NOTE}"}],
                                None)
        if reply.tool_calls:
            names = ", ".join(dict.fromkeys(call.name for call in reply.tool_calls))
            n = self.max_tool_rounds
            rounds = f"{n} round{'s' if n != 1 else ''}"
            if not reply.content.strip():
                # Nothing to show nor to keep: an assistant message with neither text nor calls is refused by
                # OpenAI's API on the next request; turn() closes the rounds with NO_ANSWER instead.
                raise NoAnswer(f"{self.model.model} gave no answer within the {rounds} of tool calls allowed "
                               f"(--max-tool-rounds): asked to answer without tools, it called {names} again (not "
                               "run); ask again, or raise --max-tool-rounds")
            self.trace(f"[stopped: asked to answer without tools after {rounds}, the model called {names} again "
                       "(not run)]")
        # Only the text is kept: the next request must not name calls without results.
        self.messages.append(self.model.assistant_message(Reply(reply.content)))
        return reply.content

    async def _ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        wrote = False
        held = ""  # leading whitespace, shown only once text follows it

        def write(text: str) -> None:
            # A reply of whitespace alone (" \n") is no answer (the model raises ModelError, or NoAnswer follows):
            # shown as it came, it printed a blank line where the answer should be, before the error said none came.
            nonlocal wrote, held
            if not wrote and not text.strip():
                held += text
                return
            wrote = True
            self.write(held + text)
            held = ""

        try:
            reply = await self.model.complete(messages, tools, write)
        except BaseException:
            if wrote:  # text of a reply that failed midway: its line is ended, so the next answer has its own
                self.write("\n")
            raise
        if wrote:  # not for whitespace alone, which was never shown
            self.write("\n")
        return reply

    async def _run(self, call: ToolCall) -> str:
        shown = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments, ensure_ascii=False)
        self.trace(f"[tool {call.name} {shown[:200]}]")
        try:
            arguments = self.toolbox.checked_arguments(call)
        except ToolCallError as exc:
            self.trace(f"[refused: {exc}]")
            return f"Error: {exc}"
        self._ran.append(call)  # from here the server may act on it, whatever comes back
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
