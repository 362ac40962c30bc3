"""The chat model, over Ollama's /api/chat or an OpenAI-compatible /v1/chat/completions, with tools, streamed.

Both speak the same conversation (system, user, assistant with tool calls, tool results); they differ in the
wire format: Ollama streams JSON lines and sends tool arguments as objects, OpenAI streams server-sent events and
sends arguments as a JSON text in pieces, with an id each tool result must name.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from duckgraph_chat.tools import ToolCall

OLLAMA_URL = "http://127.0.0.1:11434"
OPENAI_URL = "http://127.0.0.1:1234/v1"

#: what a reply cut short means to the user: it is dropped whole, so a half-written answer or a tool call with
#: truncated arguments never reaches the conversation or the MCP server
CUT_SHORT = "the reply was cut short, and none of it was kept (any text shown is incomplete; no tool call was run)"


class ModelError(Exception):
    """The model could not be reached or refused the request; the text says what to do."""


@dataclass
class Reply:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


class ChatModel:
    """What the session needs of a model API."""

    def __init__(self, model: str, base_url: str, timeout: float) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       on_text: Callable[[str], None]) -> Reply:
        """Stream one answer, handing each piece of text to `on_text`; the tool calls come with the reply."""
        raise NotImplementedError

    def assistant_message(self, reply: Reply) -> dict[str, Any]:
        raise NotImplementedError

    def tool_message(self, call: ToolCall, text: str) -> dict[str, Any]:
        raise NotImplementedError

    def _headers(self) -> dict[str, str]:
        return {}

    async def _lines(self, path: str, body: dict[str, Any]) -> AsyncIterator[str]:
        url = f"{self.base_url}{path}"
        received = False  # once the reply has begun, a broken connection or a stall cuts it short
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                async with client.stream("POST", url, json=body, headers=self._headers()) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise ModelError(self._explain(response.status_code, _said(response)))
                    async for line in response.aiter_lines():
                        if line.strip():
                            received = True
                            yield line
        except httpx.ConnectError:
            raise ModelError(f"cannot reach the model server at {self.base_url}: {self._start_hint()}") from None
        except httpx.TimeoutException:
            if received:
                raise ModelError(f"{url} stopped sending for {self.timeout:g} s in the middle of the reply: "
                                 f"{CUT_SHORT}; ask again, or raise --timeout if the model is that slow") from None
            raise ModelError(f"{url} sent nothing for {self.timeout:g} s: the model may still be loading; raise "
                             "--timeout or try again") from None
        except httpx.HTTPError as exc:
            if received:
                raise ModelError(f"the connection to {url} broke in the middle of the reply ({exc}): {CUT_SHORT}; "
                                 "ask again") from None
            raise ModelError(f"request to {url} failed: {exc}") from None

    def _cut_short(self, reply: Reply, calls: list[ToolCall], missing: str) -> ModelError:
        """The error for a stream that ended cleanly at the HTTP level but without the API's end mark (a proxy or
        a server that closed the connection mid-reply): its text may stop mid-sentence, a tool call's arguments
        mid-JSON, so none of it is used."""
        got = [f"{len(reply.content)} characters of text"] if reply.content else []
        if calls:
            got.append(("a call to " if len(calls) == 1 else "calls to ") + ", ".join(repr(c.name) for c in calls))
        received = " and ".join(got) or "nothing"
        return ModelError(f"the reply from {self.base_url} ended without {missing} (it had sent {received}): the "
                          f"connection was closed or the server stopped mid-reply; {CUT_SHORT}; ask again")

    def _start_hint(self) -> str:
        raise NotImplementedError

    def _explain(self, status: int, said: str) -> str:
        if status == 404 and "model" in said.lower():
            return f"the server at {self.base_url} has no model {self.model!r} ({said}): {self._model_hint()}"
        if status == 404:
            return f"{self.base_url} has no chat endpoint (HTTP 404): check --base-url and --api"
        if status == 400 and "tool" in said.lower():
            return f"{self.model} cannot use tools ({said}): choose a model that supports tool calling"
        return f"the model server at {self.base_url} answered HTTP {status}: {said}"

    def _model_hint(self) -> str:
        raise NotImplementedError

    #: how the hint on a reply of the wrong shape names the server and the --api that expects it
    server_kind = ""

    def _object(self, text: str) -> dict[str, Any]:
        """One streamed line (or event) as the JSON object it must be."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ModelError(f"the model server sent something that is not JSON: {_shown(text)}") from None
        return self._checked(value, dict, "a line", text)

    def _field(self, container: dict[str, Any], key: str, kind: type, sent: str) -> Any:
        """`container[key]`, None when it is missing or null; ModelError when it is not a `kind`."""
        return self._checked(container.get(key), kind, f'"{key}"', sent)

    def _checked(self, value: Any, kind: type, what: str, sent: str) -> Any:
        # A reply of another shape is the server's (or a wrong --api): said with what came, never half-read.
        if value is None or (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
            return value
        raise ModelError(f"{self.base_url} sent {what} as {_kind(value)} where {_KINDS[kind]} was expected, in "
                         f"{_shown(sent)}: is it {self.server_kind}?")

    def _answered(self, reply: Reply, reason: Any) -> Reply:
        """The reply, unless it holds nothing: an empty assistant turn would only confuse the next request."""
        if reply.content.strip() or reply.tool_calls:
            return reply
        if reason == "length":
            hint = "it reached its context or output limit: raise the limit on the server, or ask something shorter"
        else:
            # "stop" is the usual end and says nothing; another reason (a content filter) may say why
            hint = "ask again, or try another model" + (f" (the server's reason: {reason})"
                                                          if reason and reason != "stop" else "")
        raise ModelError(f"{self.model} answered nothing (no text, no tool call): {hint}")


class OllamaChat(ChatModel):
    server_kind = "an Ollama server (--api ollama)"

    async def complete(self, messages, tools, on_text):
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        if tools:
            body["tools"] = tools
        reply, reason, done = Reply(), None, False
        async for line in self._lines("/api/chat", body):
            chunk = self._object(line)
            if chunk.get("error"):
                raise ModelError(f"Ollama stopped: {chunk['error']}")
            message = self._field(chunk, "message", dict, line) or {}
            if text := self._field(message, "content", str, line):
                reply.content += text
                on_text(text)
            for call in self._field(message, "tool_calls", list, line) or []:
                call = self._checked(call, dict, "an entry of message.tool_calls", line)
                function = self._field(call, "function", dict, line) or {}
                name = self._field(function, "name", str, line) or ""
                # the arguments are the model's, of any shape: the toolbox answers it when they are not an object
                reply.tool_calls.append(ToolCall(name, function.get("arguments")))
            if chunk.get("done"):
                done, reason = True, chunk.get("done_reason")
        if not done:  # Ollama always ends with a `"done": true` line: without it the reply was cut short
            raise self._cut_short(reply, reply.tool_calls, 'the last line ("done": true)')
        return self._answered(reply, reason)

    def assistant_message(self, reply):
        # Ollama takes arguments only as an object: a text it could not have produced is sent back as {}.
        calls = [{"function": {"name": c.name, "arguments": c.arguments if isinstance(c.arguments, dict) else {}}}
                 for c in reply.tool_calls]
        return {"role": "assistant", "content": reply.content, **({"tool_calls": calls} if calls else {})}

    def tool_message(self, call, text):
        return {"role": "tool", "tool_name": call.name, "content": text}

    def _start_hint(self):
        return "is Ollama running? Start it with `ollama serve`, or give its address with --base-url"

    def _model_hint(self):
        return f"run `ollama pull {self.model}`, or choose another with --model"


class OpenAIChat(ChatModel):
    server_kind = "an OpenAI-compatible server (--api openai)"

    def __init__(self, model: str, base_url: str, timeout: float, api_key_env: str) -> None:
        super().__init__(model, base_url, timeout)
        self.api_key_env = api_key_env

    def _headers(self):
        key = os.environ.get(self.api_key_env, "").strip()
        return {"Authorization": f"Bearer {key}"} if key else {}

    async def complete(self, messages, tools, on_text):
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        if tools:
            body["tools"] = tools
        reply, calls, reason = Reply(), _StreamedCalls(self), None
        events, other, finished = 0, [], False
        async for line in self._lines("/chat/completions", body):
            if not line.startswith("data:"):
                if not line.startswith((":", "event:", "id:", "retry:")):  # SSE comments and fields are skipped
                    other.append(line)  # not SSE: kept to tell (or read) what the server sent instead
                continue
            events += 1
            data = line[5:].strip()
            if data == "[DONE]":
                finished = True
                break
            chunk = self._object(data)
            if chunk.get("error"):
                raise ModelError(f"the model server stopped: {_message(chunk['error'])}")
            choices = self._field(chunk, "choices", list, data)
            if not choices:
                continue  # a chunk with no choice (the usage one at the end)
            choice = self._checked(choices[0], dict, "choices[0]", data)
            reason = choice.get("finish_reason") or reason
            delta = self._field(choice, "delta", dict, data) or {}
            if text := self._field(delta, "content", str, data):
                reply.content += text
                on_text(text)
            for part in self._field(delta, "tool_calls", list, data) or []:
                calls.add(part, data)
        if not events and other:
            return self._unstreamed("\n".join(other), on_text)
        if not finished and reason is None:
            # A finish_reason alone is a complete reply (some servers send no [DONE]); neither means it was cut.
            raise self._cut_short(reply, calls.tool_calls(), "a finish_reason or `data: [DONE]`")
        reply.tool_calls = calls.tool_calls()
        return self._answered(reply, reason)

    def _unstreamed(self, text: str, on_text: Callable[[str], None]) -> Reply:
        """A server that ignores `stream: true` answers one chat completion: it is a whole answer, so it is used
        (there is no option to stop asking for a stream); anything else is said, with what the server sent."""
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict) and value.get("error"):
            raise ModelError(f"the model server stopped: {_message(value['error'])}")
        choices = value.get("choices") if isinstance(value, dict) else None
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict)
                and isinstance(choices[0].get("message"), dict)):
            raise ModelError(f"{self.base_url} answered a streamed request with neither server-sent events "
                             f"(`data: {{...}}` lines) nor a chat completion; it sent {_shown(text)}: is it an "
                             "OpenAI-compatible server (--api openai)?")
        message = choices[0]["message"]
        reply = Reply(self._field(message, "content", str, text) or "")
        if reply.content:
            on_text(reply.content)
        calls = _StreamedCalls(self)
        for part in self._field(message, "tool_calls", list, text) or []:
            calls.add(part, text, whole=True)
        reply.tool_calls = calls.tool_calls()
        return self._answered(reply, choices[0].get("finish_reason"))

    def assistant_message(self, reply):
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
        if reply.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function", "function": {
                "name": c.name, "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)}}
                for c in reply.tool_calls]
        return message

    def tool_message(self, call, text):
        return {"role": "tool", "tool_call_id": call.id, "content": text}

    def _explain(self, status, said):
        if status in (401, 403):
            return (f"{self.base_url} refused the request (HTTP {status}): set the API key in ${self.api_key_env} "
                    "(or name another variable with --api-key-env)")
        return super()._explain(status, said)

    def _start_hint(self):
        return "is the server running? Give its OpenAI-compatible address (ending in /v1) with --base-url"

    def _model_hint(self):
        return f"choose one it serves with --model ({self.base_url}/models lists them)"


class _StreamedCalls:
    """The tool calls of an OpenAI answer, from their pieces. A piece names its call by `index`, but Ollama's /v1
    gives every call index 0 (ollama/ollama#15457) and some servers send no index: so a piece with an id other than
    its call's starts a new call, and a piece without an id continues the call before it at that index. Some
    servers (llama.cpp builds, proxies) send neither index nor id: there a piece that names a function starts a new
    call once the call before it has its name, as a function's name comes whole, in its call's first piece."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self._calls: list[dict[str, Any]] = []
        self._current: dict[int | None, dict[str, Any]] = {}  # index (None: not sent) -> the call pieces continue

    def add(self, part: Any, sent: str, whole: bool = False) -> None:
        """One piece (`whole`: one complete call, from an answer that was not streamed)."""
        model = self._model
        part = model._checked(part, dict, "an entry of tool_calls", sent)
        index = model._field(part, "index", int, sent)
        call_id = model._field(part, "id", str, sent) or ""
        function = model._field(part, "function", dict, sent) or {}
        name = model._field(function, "name", str, sent) or ""
        call = None if whole else self._current.get(index)
        # Only a piece with neither index nor id is told apart by its name: pieces that carry one keep their rule.
        anonymous_next = index is None and not call_id and bool(name) and call is not None and bool(call["name"])
        if call is None or (call_id and call["id"] and call_id != call["id"]) or anonymous_next:
            call = {"id": "", "name": "", "arguments": None}
            self._calls.append(call)
            self._current[index] = call
        call["id"] = call["id"] or call_id
        call["name"] += name
        arguments = function.get("arguments")
        if arguments is None or arguments == "":
            return
        so_far = call["arguments"]
        if so_far is None or so_far == "":
            # A text, or the arguments as a JSON object, as some servers send them (and Ollama's own API does):
            # then they are the call's whole arguments, and the toolbox checks them as it checks a parsed text.
            call["arguments"] = arguments
        elif isinstance(so_far, str) and isinstance(arguments, str):
            call["arguments"] = so_far + arguments
        else:
            raise ModelError(f"{model.base_url} sent the arguments of the tool call {call['name'] or call_id!r} in "
                             f"pieces that are not all texts ({_kind(so_far)}, then {_kind(arguments)}), in "
                             f"{_shown(sent)}")

    def tool_calls(self) -> list[ToolCall]:
        return [ToolCall(c["name"], "" if c["arguments"] is None else c["arguments"], c["id"] or f"call_{i}")
                for i, c in enumerate(self._calls)]


_KINDS = {dict: "an object", list: "an array", str: "a string", int: "an integer"}


def _kind(value: Any) -> str:
    """The JSON kind of a parsed value, as a message names it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return next((name for kind, name in _KINDS.items() if isinstance(value, kind)), "null")


def _shown(text: str) -> str:
    return repr(text[:200]) + (f" (and {len(text) - 200} more characters)" if len(text) > 200 else "")


def _message(error: Any) -> str:
    return str(error.get("message", error)) if isinstance(error, dict) else str(error)


def _said(response: httpx.Response) -> str:
    try:
        return _message(response.json().get("error", response.text))[:300]
    except (ValueError, AttributeError):
        return response.text.strip()[:300] or "(no message)"


def make_model(api: str, model: str, base_url: str | None, timeout: float, api_key_env: str) -> ChatModel:
    if api == "ollama":
        return OllamaChat(model, base_url or OLLAMA_URL, timeout)
    return OpenAIChat(model, base_url or OPENAI_URL, timeout, api_key_env)
