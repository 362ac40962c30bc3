"""The model replies as servers really send them, not only as the scripted model does: tool calls that share an
index or have none (Ollama's /v1), or have neither index nor id, arguments sent as an object, a stream answered with
one JSON body, replies of the wrong shape, empty answers, replies cut short, and a turn whose reply fails after its
tool calls ran (they stay in the conversation). The scripted model on 127.0.0.1 sends these byte for byte (`Raw`);
the parsers are driven directly, and the chat program end to end with the small MCP server (no embedding model)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from scripted_model import ScriptedModel, Turn, _Handler

from duckgraph_chat.models import ModelError, OllamaChat, OpenAIChat, Reply
from duckgraph_chat.session import LIMIT_NOTE
from duckgraph_chat.tools import ToolCall

TINY_SERVER = [sys.executable, str(Path(__file__).with_name("tiny_server.py"))]
MODEL = "qwen3:8b"  # the one the scripted model serves


STALL_SECONDS = 5  # how long a stalled answer stays silent: longer than the client's timeout in those tests


@dataclass
class Raw(Turn):
    """An answer sent as these bytes, whatever the API."""

    body: bytes = b""
    #: how the HTTP response ends: "length" (a Content-Length), "close" (no length: the body ends when the server
    #: closes the connection, a clean end over HTTP, as a proxy may send a stream cut upstream), "abort" (chunked,
    #: dropped before the last chunk), "stall" (chunked, then silence with the connection open)
    end: str = "length"


class _RawHandler(_Handler):
    raw: Raw | None = None

    def _ollama(self, model: str, turn: Turn) -> bytes:
        if isinstance(turn, Raw):
            self.raw = turn
            return turn.body
        return super()._ollama(model, turn)

    def _openai(self, model: str, turn: Turn) -> bytes:
        if isinstance(turn, Raw):
            self.raw = turn
            return turn.body
        return super()._openai(model, turn)

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        end = self.raw.end if self.raw else "length"
        if end == "length":
            return super()._send(status, data, content_type)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        if end != "close":
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(data if end == "close" else b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()
        if end == "stall":
            time.sleep(STALL_SECONDS)
        self.close_connection = True  # the socket closes: with "abort", before the chunked body's last chunk


def scripted(script) -> ScriptedModel:
    model = ScriptedModel(script)
    model._server.RequestHandlerClass = _RawHandler  # the same server, able to send a Raw answer as it is
    return model


def sse(*deltas: dict[str, Any]) -> bytes:
    events = [{"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]}
              for d in deltas]
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def ask(api: str, answer: Turn, timeout: float = 10) -> tuple[Reply, list[str]]:
    """One `complete` against the scripted model answering `answer`; the reply and the text pieces streamed."""
    with scripted(lambda messages, tools: answer) as server:
        model = (OllamaChat(MODEL, server.url, timeout) if api == "ollama" else
                 OpenAIChat(MODEL, f"{server.url}/v1", timeout, "DUCKGRAPH_CHAT_TEST_NO_KEY"))
        streamed: list[str] = []
        reply = anyio.run(model.complete, [{"role": "user", "content": "hi"}], None, streamed.append)
    return reply, streamed


def refused(api: str, answer: Turn, timeout: float = 10) -> str:
    with pytest.raises(ModelError) as caught:
        ask(api, answer, timeout)
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


def test_openai_calls_without_index_or_id_start_where_a_piece_names_a_function():
    # As llama.cpp builds and some proxies send them: the name only in each call's first piece, then arguments.
    reply, _ = ask("openai", Raw(body=sse(
        {"tool_calls": [{"function": {"name": "echo", "arguments": ONE[:5]}}]},
        {"tool_calls": [{"function": {"arguments": ONE[5:]}}]},
        {"tool_calls": [{"type": "function", "function": {"name": "echo", "arguments": ""}}]},
        {"tool_calls": [{"function": {"arguments": TWO[:5]}}]},
        {"tool_calls": [{"function": {"arguments": TWO[5:]}}]})))
    assert reply.tool_calls == [ToolCall("echo", ONE, "call_0"), ToolCall("echo", TWO, "call_1")]


def test_openai_a_call_without_arguments_then_another_without_index_or_id_stay_apart():
    reply, _ = ask("openai", Raw(body=sse(
        {"tool_calls": [{"function": {"name": "crash", "arguments": ""}}]},
        {"tool_calls": [{"function": {"name": "echo", "arguments": ONE}}]})))
    assert reply.tool_calls == [ToolCall("crash", "", "call_0"), ToolCall("echo", ONE, "call_1")]


def sse_ending(*deltas: dict[str, Any], finish: str | None = None, done: bool = False,
               usage: bool = False) -> bytes:
    """Chunks of `deltas`, the last with `finish` as its finish_reason; then a usage chunk, then [DONE], if asked."""
    events = [{"id": "chatcmpl-1", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events[-1]["choices"][0]["finish_reason"] = finish
    if usage:
        events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [],
                       "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}})
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + (b"data: [DONE]\n\n" if done else b"")


CUT_SHORT = ("the connection was closed or the server stopped mid-reply; the reply was cut short, and none of it "
             "was kept (any text shown is incomplete; no tool call was run); ask again")


@pytest.mark.parametrize("end", ["length", "close"])
def test_openai_stream_cut_short_is_an_error(end):
    # Neither [DONE] nor a finish_reason: the text stops mid-sentence, the call's arguments mid-JSON.
    said = refused("openai", Raw(end=end, body=sse_ending(
        {"role": "assistant", "content": "Let me check"},
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "echo", "arguments": ONE[:5]}}]})))
    assert said.endswith("/v1 ended without a finish_reason or `data: [DONE]` (it had sent 12 characters of "
                         f"text and a call to 'echo'): {CUT_SHORT}")
    text_only = refused("openai", Raw(end=end, body=sse_ending({"content": "The answer is"})))
    assert "(it had sent 13 characters of text)" in text_only and text_only.endswith(CUT_SHORT)
    nothing = refused("openai", Raw(end=end, body=b": keep-alive\n\n"))
    assert "(it had sent nothing)" in nothing


@pytest.mark.parametrize("usage", [False, True])
def test_openai_stream_ending_with_a_finish_reason_but_no_done_is_complete(usage):
    # Some servers end there; a usage chunk (no choices) may follow the finish_reason.
    reply, streamed = ask("openai", Raw(end="close", body=sse_ending(
        {"content": "Storing it."},
        {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "echo", "arguments": ONE}}]},
        {}, finish="tool_calls", usage=usage)))
    assert reply == Reply("Storing it.", [ToolCall("echo", ONE, "a")]) and streamed == ["Storing it."]


def test_ollama_stream_cut_short_is_an_error():
    lines = [{"model": MODEL, "message": {"role": "assistant", "content": "Half an"}, "done": False},
             {"model": MODEL, "message": {"role": "assistant", "content": "", "tool_calls": [
                 {"function": {"name": "echo", "arguments": {"text": "one"}}}]}, "done": False}]
    said = refused("ollama", Raw(end="close", body=b"".join(json.dumps(line).encode() + b"\n" for line in lines)))
    assert said.endswith('ended without the last line ("done": true) (it had sent 7 characters of text and a call '
                         f"to 'echo'): {CUT_SHORT}")


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_a_connection_dropped_or_stalled_mid_reply_is_said_to_cut_it_short(api):
    body = (b'{"message": {"role": "assistant", "content": "Half"}, "done": false}\n' if api == "ollama" else
            sse_ending({"content": "Half"}))
    dropped = refused(api, Raw(end="abort", body=body))
    assert "broke in the middle of the reply (peer closed connection" in dropped
    assert dropped.endswith("the reply was cut short, and none of it was kept (any text shown is incomplete; no "
                            "tool call was run); ask again")
    started = time.monotonic()
    stalled = refused(api, Raw(end="stall", body=body), timeout=1)
    assert time.monotonic() - started < STALL_SECONDS  # the client's timeout ended it, not the server
    assert "stopped sending for 1 s in the middle of the reply: the reply was cut short" in stalled
    assert stalled.endswith("ask again, or raise --timeout if the model is that slow")


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


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_an_answer_of_whitespace_alone_prints_no_blank_line_and_is_said_as_none(api):
    # " \n" streamed in two pieces: it printed a blank line as the answer, then the error that none came.
    def script(messages, tools) -> Turn:
        if messages[-1]["role"] == "tool":
            return Turn("Tool said: " + messages[-1]["content"])
        asked = last_user(messages)
        if asked == "blank":
            return Turn(" \n")
        if asked == "blank then call":
            return Turn(" \n", [("echo", {"text": "one"})])
        return Turn(f"You said: {asked}")

    with scripted(script) as model:
        base_url = model.url if api == "ollama" else f"{model.url}/v1"
        done = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url, "--",
                               *TINY_SERVER], input=b"blank\nblank then call\nafter\n", capture_output=True,
                              timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    # Only the real answers reach the terminal: no blank line for the answer that was whitespace alone, nor before
    # the tool call that came with whitespace.
    assert done.stdout.decode() == "Tool said: echo: one\nYou said: after\n"
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: {MODEL} answered nothing (no text, no tool call): ask again, or try another model"]
    # The blank turn left nothing in the conversation: no blank assistant turn, no unanswered question.
    kept = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert [m["content"] for m in kept if m["role"] == "user"] == ["blank then call", "after"]
    assert [m["content"] for m in kept if m["role"] == "assistant"][-1] == "Tool said: echo: one"


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_a_reply_cut_short_is_reported_runs_no_tool_and_the_chat_goes_on(api):
    def script(messages, tools) -> Turn:
        if messages[-1]["role"] == "tool":
            return Turn("Tool said: " + messages[-1]["content"])
        if last_user(messages) != "cut":
            return Turn(f"You said: {last_user(messages)}")
        # The text, then a call whose arguments stop mid-JSON (Ollama sends a call whole), and no end mark.
        if api == "ollama":
            return Raw(end="close", body=json.dumps({"message": {"content": "Let me check"}, "done": False}).encode()
                       + b"\n" + json.dumps({"message": {"content": "", "tool_calls": [
                           {"function": {"name": "echo", "arguments": {"text": "one"}}}]}, "done": False}).encode())
        return Raw(end="close", body=sse_ending(
            {"content": "Let me check"},
            {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "echo", "arguments": ONE[:5]}}]}))

    with scripted(script) as model:
        base_url = model.url if api == "ollama" else f"{model.url}/v1"
        done = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url, "--",
                               *TINY_SERVER], input=b"cut\nafter\n", capture_output=True, timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr and "[tool " not in stderr  # the call was never run
    # The partial text's line is ended, so the next answer starts on its own.
    assert done.stdout.decode().splitlines() == ["Let me check", "You said: after"]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].endswith(CUT_SHORT), stderr
    assert "(it had sent 12 characters of text and a call to 'echo')" in errors[0]
    # Only the two questions reached the model, and the cut turn left nothing in the conversation.
    assert len(model.requests) == 2
    assert [m["role"] for m in model.requests[-1]["body"]["messages"]] == ["system", "user"]


def tool_results(messages) -> list[str]:
    """The tool results of the turn the last user message began."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [m["content"] for m in messages[start:] if m["role"] == "tool"]


@pytest.mark.parametrize("api", ["ollama", "openai"])
@pytest.mark.parametrize(("failure", "options"), [
    ("HTTP 500", []), ("cut short", []), ("stalled", ["--timeout", "1"]),
    ("HTTP 500", ["--max-tool-rounds", "2"]),  # the answer asked for without tools, after the last round, fails
])
def test_a_turn_that_fails_after_its_tool_calls_ran_keeps_them_in_the_conversation(api, failure, options):
    # Two rounds of calls run on the MCP server, then the turn's third reply fails: the calls ran, so the next
    # request must show them, or the model, asked "did you save that?", cannot know it did (and may write again).
    def script(messages, tools) -> Turn:
        asked, results = last_user(messages), tool_results(messages)
        if asked != "save it":
            earlier = [m["content"] for m in messages if m["role"] == "tool"]
            return Turn(f"You said: {asked}; the tools said: {' | '.join(earlier) or 'nothing'}")
        if len(results) < 2:
            if len(results) == 1 and failure == "HTTP 500":
                model.fail_next(500)  # for the request after this one: a fault is taken before the script runs
            return Turn("", [("echo", {"text": ["one", "two"][len(results)]})])
        body = (json.dumps({"message": {"content": "Half"}, "done": False}).encode() + b"\n" if api == "ollama"
                else sse_ending({"content": "Half"}))
        return Raw(end="close" if failure == "cut short" else "stall", body=body)

    with scripted(script) as model:
        base_url = model.url if api == "ollama" else f"{model.url}/v1"
        done = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url,
                               *options, "--", *TINY_SERVER], input=b"save it\ndid you save that?\n",
                              capture_output=True, timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    # The next turn's request: the question of the failed turn, its two completed rounds with their results, a
    # closing assistant message saying the answer was lost (so no user message follows tool results), the question.
    kept = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                         "user"], kept
    assert kept[1]["content"] == "save it" and kept[-1]["content"] == "did you save that?"
    assert [m["content"] for m in kept if m["role"] == "tool"] == ["echo: one", "echo: two"]
    calls = [m["tool_calls"] for m in kept if m.get("tool_calls")]
    assert [[c["function"]["name"] for c in cs] for cs in calls] == [["echo"], ["echo"]]
    if api == "openai":  # each result names its call
        assert [cs[0]["id"] for cs in calls] == [m["tool_call_id"] for m in kept if m["role"] == "tool"]
    else:
        assert calls[0][0]["function"]["arguments"] == {"text": "one"}
    lost = kept[6]
    assert "tool_calls" not in lost and "lost" in lost["content"] and "Half" not in json.dumps(kept)
    # No request had a system message after the first: the round limit's note, in the failed ask of
    # --max-tool-rounds 2, went at the end of the last tool result, and went with that ask.
    assert all(m["role"] != "system" for r in model.requests for m in r["body"]["messages"][1:])
    assert not any(LIMIT_NOTE in m["content"] for m in kept if m["role"] == "tool")
    # The terminal: the error, then what had run (the memory changed), and the next answer saw the calls.
    lines = stderr.splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("error: "))
    assert lines[error + 1] == ("[the turn failed after 2 tool calls had run on the MCP server: echo (2 times); what "
                                "they did stays, and the conversation keeps them, so the model knows]"), stderr
    answer = done.stdout.decode().splitlines()[-1]
    assert answer == "You said: did you save that?; the tools said: echo: one | echo: two"


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_a_turn_that_fails_after_refused_calls_only_keeps_them_and_says_no_more(api):
    # A round whose call the bridge refused (an invented tool) completed, but nothing reached the MCP server: the
    # round stays for the model to see, and the terminal has only the error (the memory did not change).
    def script(messages, tools) -> Turn:
        if last_user(messages) != "save it":
            return Turn(f"You said: {last_user(messages)}")
        if not tool_results(messages):
            model.fail_next(500)  # for the next request, the turn's second reply
            return Turn("", [("remember", {"text": "one"})])
        return Turn("unused")

    with scripted(script) as model:
        base_url = model.url if api == "ollama" else f"{model.url}/v1"
        done = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url, "--",
                               *TINY_SERVER], input=b"save it\nnext\n", capture_output=True, timeout=60)
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    kept = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool", "assistant", "user"], kept
    assert kept[3]["content"].startswith("Error: unknown tool 'remember'")
    assert "[refused: unknown tool 'remember'" in stderr and "HTTP 500: injected failure" in stderr
    assert "[the turn failed after" not in stderr
    assert done.stdout.decode().splitlines() == ["You said: next"]
