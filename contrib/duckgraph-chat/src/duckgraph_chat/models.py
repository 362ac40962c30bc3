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
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                async with client.stream("POST", url, json=body, headers=self._headers()) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise ModelError(self._explain(response.status_code, _said(response)))
                    async for line in response.aiter_lines():
                        if line.strip():
                            yield line
        except httpx.ConnectError:
            raise ModelError(f"cannot reach the model server at {self.base_url}: {self._start_hint()}") from None
        except httpx.TimeoutException:
            raise ModelError(f"{url} sent nothing for {self.timeout:g} s: the model may still be loading; raise "
                             "--timeout or try again") from None
        except httpx.HTTPError as exc:
            raise ModelError(f"request to {url} failed: {exc}") from None

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


class OllamaChat(ChatModel):
    async def complete(self, messages, tools, on_text):
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
        if tools:
            body["tools"] = tools
        reply = Reply()
        async for line in self._lines("/api/chat", body):
            chunk = _json_line(line)
            if chunk.get("error"):
                raise ModelError(f"Ollama stopped: {chunk['error']}")
            message = chunk.get("message") or {}
            if text := message.get("content"):
                reply.content += text
                on_text(text)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                reply.tool_calls.append(ToolCall(str(function.get("name", "")), function.get("arguments")))
        return reply

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
        reply, pieces = Reply(), {}
        async for line in self._lines("/chat/completions", body):
            if not line.startswith("data:"):
                continue  # SSE comments and event names
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = _json_line(data)
            if chunk.get("error"):
                raise ModelError(f"the model server stopped: {_message(chunk['error'])}")
            delta = ((chunk.get("choices") or [{}])[0]).get("delta") or {}
            if text := delta.get("content"):
                reply.content += text
                on_text(text)
            for part in delta.get("tool_calls") or []:  # pieces of each call, keyed by its index
                call = pieces.setdefault(part.get("index", 0), {"id": "", "name": "", "arguments": ""})
                function = part.get("function") or {}
                call["id"] = part.get("id") or call["id"]
                call["name"] += function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
        reply.tool_calls = [ToolCall(c["name"], c["arguments"], c["id"] or f"call_{i}")
                            for i, c in sorted(pieces.items())]
        return reply

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


def _json_line(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        raise ModelError(f"the model server sent something that is not JSON: {text[:200]!r}") from None
    return value if isinstance(value, dict) else {}


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
