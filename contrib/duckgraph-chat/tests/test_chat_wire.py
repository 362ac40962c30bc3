"""The model replies as servers really send them, not only as the scripted model does: tool calls that share an
index or have none (Ollama's /v1), arguments sent as an object, a stream answered with one JSON body, replies of
the wrong shape and empty answers. The scripted model on 127.0.0.1 sends these byte for byte (`Raw`); the parsers
are driven directly, and the chat program end to end with the small MCP server (no embedding model)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from scripted_model import ScriptedModel, Turn, _Handler

from duckgraph_chat.models import ModelError, OllamaChat, OpenAIChat, Reply
from duckgraph_chat.tools import ToolCall

TINY_SERVER = [sys.executable, str(Path(__file__).with_name("tiny_server.py"))]
MODEL = "qwen3:8b"  # the one the scripted model serves


@dataclass
class Raw(Turn):
    """An answer sent as these bytes, whatever the API."""

    body: bytes = b""


class _RawHandler(_Handler):
    def _ollama(self, model: str, turn: Turn) -> bytes:
        return turn.body if isinstance(turn, Raw) else super()._ollama(model, turn)

    def _openai(self, model: str, turn: Turn) -> bytes:
        return turn.body if isinstance(turn, Raw) else super()._openai(model, turn)


def scripted(script) -> ScriptedModel:
    model = ScriptedModel(script)
    model._server.RequestHandlerClass = _RawHandler  # the same server, able to send a Raw answer as it is
    return model


def sse(*deltas: dict[str, Any]) -> bytes:
    events = [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]}
              for d in deltas]
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def ask(api: str, answer: Turn) -> tuple[Reply, list[str]]:
    """One `complete` against the scripted model answering `answer`; the reply and the text pieces streamed."""
    with scripted(lambda messages, tools: answer) as server:
        model = (OllamaChat(MODEL, server.url, 10) if api == "ollama" else
                 OpenAIChat(MODEL, f"{server.url}/v1", 10, "DUCKGRAPH_CHAT_TEST_NO_KEY"))
        streamed: list[str] = []
        reply = anyio.run(model.complete, [{"role": "user", "content": "hi"}], None, streamed.append)
    return reply, streamed


def refused(api: str, answer: Turn) -> str:
    with pytest.raises(ModelError) as caught:
        ask(api, answer)
    return str(caught.value)


ONE, TWO = json.dumps({"text": "one"}), json.dumps({"text": "two"})


def test_openai_calls_sharing_index_0_with_their_own_ids_stay_apart():
    # As Ollama's /v1 sends them (ollama/ollama#15457); each call's arguments in two pieces, the second without id.
    reply, _ = ask("openai", Raw(body=sse(
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "echo", "arguments": ONE[:5]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": ONE[5:]}}]},
        {"tool_calls": [{"index": 0, "id": "b", "function": {"name": "echo", "arguments": TWO[:5]}}]},
        {"tool_calls": [{"index": 0, "id": "b", "function": {"arguments": TWO[5:]}}]})))  # the same id: continues
    assert reply.tool_calls == [ToolCall("echo", ONE, "a"), ToolCall("echo", TWO, "b")]


def test_openai_calls_without_index_are_told_apart_by_their_ids():
    reply, _ = ask("openai", Raw(body=sse(
        {"tool_calls": [{"id": "a", "function": {"name": "echo", "arguments": ONE[:5]}}]},
        {"tool_calls": [{"function": {"arguments": ONE[5:]}}]},
        {"tool_calls": [{"id": "b", "function": {"name": "crash", "arguments": ""}}]})))
    assert reply.tool_calls == [ToolCall("echo", ONE, "a"), ToolCall("crash", "", "b")]


def test_openai_calls_with_their_own_index_and_the_id_on_the_first_piece_only():
    # The scripted model's own stream: index on each piece, id on the first.
    reply, streamed = ask("openai", Turn("Looking.", [("echo", {"text": "one"}), ("echo", {"text": "two"})]))
    assert reply.tool_calls == [ToolCall("echo", ONE, "call_0_x"), ToolCall("echo", TWO, "call_1_x")]
    assert "".join(streamed) == reply.content == "Looking."


def test_openai_arguments_sent_as_an_object_are_the_calls_arguments():
    reply, _ = ask("openai", Raw(body=sse(
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "search", "arguments": {"query": "Maya"}}}]})))
    assert reply.tool_calls == [ToolCall("search", {"query": "Maya"}, "c1")]
    # sent back to the server as the text the API expects
    sent = OpenAIChat(MODEL, "http://127.0.0.1:9/v1", 1, "X").assistant_message(reply)
    assert sent["tool_calls"][0]["function"]["arguments"] == '{"query": "Maya"}'


def test_openai_arguments_partly_text_partly_object_are_refused():
    said = refused("openai", Raw(body=sse(
        {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "search", "arguments": '{"query": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": {"query": "Maya"}}}]})))
    assert "the arguments of the tool call 'search' in pieces that are not all texts (a string, then an object)" \
        in said


def test_openai_body_not_streamed_is_used_as_the_answer():
    completion = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
                  "message": {"role": "assistant", "content": "Hello from a non-streaming server",
                              "tool_calls": [{"id": "k", "type": "function",
                                              "function": {"name": "echo", "arguments": ONE}},
                                             {"type": "function", "function": {"name": "echo", "arguments": TWO}}]}}]}
    reply, streamed = ask("openai", Raw(body=json.dumps(completion, indent=2).encode()))  # over several lines
    assert streamed == ["Hello from a non-streaming server"] and reply.content == streamed[0]
    # each entry is a whole call, even without id or index
    assert reply.tool_calls == [ToolCall("echo", ONE, "k"), ToolCall("echo", TWO, "call_1")]


def test_openai_body_neither_events_nor_a_completion_is_said():
    said = refused("openai", Raw(body=b"<html><body>502 Bad Gateway</body></html>\n"))
    assert "answered a streamed request with neither server-sent events" in said
    assert "'<html><body>502 Bad Gateway</body></html>'" in said
    error = refused("openai", Raw(body=b'{"error": {"message": "out of memory"}}'))
    assert error == "the model server stopped: out of memory"


@pytest.mark.parametrize(("body", "what"), [
    (b'data: {"choices": [{"index": 0, "delta": "hello"}]}\n\n', '"delta" as a string where an object'),
    (b'data: {"choices": {"index": 0}}\n\n', '"choices" as an object where an array'),
    (b'data: [1, 2]\n\n', "a line as an array where an object"),
    (b'data: {"choices": [{"delta": {"content": 5}}]}\n\n', '"content" as a number where a string'),
    (b'data: {"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]}\n\n', '"index" as a string where an integer'),
    (b'data: {"choices": [{"delta": {"tool_calls": [{"function": {"name": ["x"]}}]}}]}\n\n',
     '"name" as an array where a string'),
])
def test_openai_chunks_of_the_wrong_shape_are_said(body, what):
    said = refused("openai", Raw(body=body))
    assert f"sent {what} was expected, in " in said
    assert said.endswith("is it an OpenAI-compatible server (--api openai)?")


@pytest.mark.parametrize(("body", "what"), [
    (b'{"message": "hello", "done": true}\n', '"message" as a string where an object'),
    (b'[{"message": {}}]\n', "a line as an array where an object"),
    (b'{"message": {"content": ["a"]}}\n', '"content" as an array where a string'),
    (b'{"message": {"tool_calls": {"function": {}}}}\n', '"tool_calls" as an object where an array'),
    (b'{"message": {"tool_calls": ["echo"]}}\n', "an entry of message.tool_calls as a string where an object"),
    (b'{"message": {"tool_calls": [{"function": "echo"}]}}\n', '"function" as a string where an object'),
])
def test_ollama_lines_of_the_wrong_shape_are_said(body, what):
    said = refused("ollama", Raw(body=body))
    assert f"sent {what} was expected, in " in said and said.endswith("is it an Ollama server (--api ollama)?")


def test_ollama_arguments_of_any_shape_go_to_the_toolbox():
    # The arguments are the model's: the toolbox answers the model about them (test_chat_bridge), not an error here.
    reply, _ = ask("ollama", Turn("", [("echo", "not json"), ("echo", {"text": "one"})]))
    assert reply.tool_calls == [ToolCall("echo", "not json"), ToolCall("echo", {"text": "one"})]


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_an_empty_answer_is_said(api):
    said = refused(api, Turn(""))
    assert said == f"{MODEL} answered nothing (no text, no tool call): ask again, or try another model"
    cut = (b'{"message": {"content": ""}, "done": true, "done_reason": "length"}\n' if api == "ollama" else
           b'data: {"choices": [{"delta": {"content": ""}, "finish_reason": "length"}]}\n\ndata: [DONE]\n\n')
    assert "it reached its context or output limit" in refused(api, Raw(body=cut))


def last_user(messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def wire_brain(api: str):
    def script(messages, tools) -> Turn:
        asked, last = last_user(messages), messages[-1]
        if last["role"] == "tool":
            results = [m["content"] for m in messages[messages.index(next(
                m for m in reversed(messages) if m["role"] == "user")):] if m["role"] == "tool"]
            return Turn("Tool said: " + " | ".join(results))
        if asked == "malformed":
            return Raw(body=b'{"message": "hello", "done": true}\n' if api == "ollama" else
                       b'data: {"choices": [{"index": 0, "delta": "hello"}]}\n\ndata: [DONE]\n\n')
        if asked == "empty":
            return Turn("")
        if asked == "two calls" and api == "openai":  # as Ollama's /v1 sends them: both at index 0
            return Raw(body=sse(
                {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "echo", "arguments": ONE}}]},
                {"tool_calls": [{"index": 0, "id": "b", "function": {"name": "echo", "arguments": TWO}}]}))
        if asked == "two calls":
            return Turn("", [("echo", {"text": "one"}), ("echo", {"text": "two"})])
        return Turn(f"You said: {asked}")
    return script


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_malformed_and_empty_answers_are_reported_and_the_chat_goes_on(api):
    with scripted(wire_brain(api)) as model:
        base_url = model.url if api == "ollama" else f"{model.url}/v1"
        done = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url, "--",
                               *TINY_SERVER], input=b"malformed\nempty\ntwo calls\nafter\n", capture_output=True,
                              timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert done.stdout.decode().splitlines() == ["Tool said: echo: one | echo: two", "You said: after"]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2, stderr
    assert '"message" as a string' in errors[0] or '"delta" as a string' in errors[0]
    assert errors[1] == f"error: {MODEL} answered nothing (no text, no tool call): ask again, or try another model"
    # Neither failed turn left anything behind: no empty assistant turn, no unanswered question.
    kept = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert [m["content"] for m in kept if m["role"] == "user"] == ["two calls", "after"]
