"""The round limit (--max-tool-rounds) and the conversation it leaves: the chat program end to end with the
scripted model on 127.0.0.1 (both APIs) and the small MCP server, checking every request the model received
against what strict servers and chat templates refuse."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scripted_model import ScriptedModel, Turn

from duckgraph_chat.session import LIMIT_NOTE

TINY_SERVER = [sys.executable, str(Path(__file__).with_name("tiny_server.py"))]
MODEL = "qwen3:8b"  # the one the scripted model serves
TURN_NOTE = ("[the turn failed after 2 tool calls had run on the MCP server: echo (2 times); what they did stays, and "
             "the conversation keeps them, so the model knows]")


def refused_by_strict_servers(messages: list[dict[str, Any]]) -> list[str]:
    """What strict servers refuse in a request's messages: a system message after the first (the chat templates of
    many local models take one only at the start), an assistant message with neither text nor tool calls (OpenAI's
    API refuses it on the request that sends it)."""
    problems = []
    for i, m in enumerate(messages):
        if m["role"] == "system" and i > 0:
            problems.append(f"message {i}: a system message after the first: {m['content']!r}")
        if m["role"] == "assistant" and not (m.get("content") or "").strip() and not m.get("tool_calls"):
            problems.append(f"message {i}: an assistant message with neither text nor tool calls: {m!r}")
    return problems


def last_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results of the turn the last user message began."""
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [m["content"] for m in messages[start:] if m["role"] == "tool"]


def run_chat(api: str, final: Turn) -> tuple[subprocess.CompletedProcess, ScriptedModel]:
    """`save it` with --max-tool-rounds 2: one echo call a round while tools are offered, then `final` when the bridge
    asks without tools; then `next`, answered with the tool results the model still sees."""
    def script(messages, tools) -> Turn:
        asked = last_user(messages)
        if asked != "save it":
            earlier = [m["content"] for m in messages if m["role"] == "tool"]
            return Turn(f"You said: {asked}; the tools said: {' | '.join(earlier) or 'nothing'}")
        if tools is not None:
            return Turn("", [("echo", {"text": ["one", "two"][len(tool_results(messages))]})])
        return final

    with ScriptedModel(script) as model:
        base_url = model.url if api == "ollama" else f"{model.url}/v1"
        done = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url,
                               "--max-tool-rounds", "2", "--", *TINY_SERVER], input=b"save it\nnext\n",
                              capture_output=True, timeout=60)
    return done, model


def assert_limit_request(model: ScriptedModel) -> None:
    """The request after the two rounds: no tools, and the note at the end of the last tool result, for it only."""
    bodies = [r["body"] for r in model.requests]
    assert ["tools" in b for b in bodies[:3]] == [True, True, False]
    limit = bodies[2]["messages"]
    assert [m["role"] for m in limit] == ["system", "user", "assistant", "tool", "assistant", "tool"], limit
    assert limit[-1]["content"] == f"echo: two\n\n{LIMIT_NOTE}"
    for body in bodies:
        assert refused_by_strict_servers(body["messages"]) == []


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_an_answer_at_the_round_limit_leaves_no_note_in_the_conversation(api):
    # The answer asked for without tools has text and one more call: the text is the answer, the call is not run.
    done, model = run_chat(api, Turn("Saved both.", [("echo", {"text": "three"})]))
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    assert done.stdout.decode().splitlines() == ["Saved both.", "You said: next; the tools said: echo: one | echo: two"]
    # The next turn's request: the rounds with their results as the server gave them, the answer, the question.
    kept = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                         "user"], kept
    assert [m["content"] for m in kept if m["role"] == "tool"] == ["echo: one", "echo: two"]
    assert kept[6] == {"role": "assistant", "content": "Saved both."}
    assert not any(LIMIT_NOTE in (m.get("content") or "") for m in kept)  # the note was for that request only
    assert_limit_request(model)
    assert "[tool echo {\"text\": \"three\"}]" not in stderr  # the call was not run, and the terminal says so
    assert "[stopped: asked to answer without tools after 2 rounds, the model called echo again (not run)]" in stderr


@pytest.mark.parametrize("api", ["ollama", "openai"])
def test_a_model_that_calls_tools_again_at_the_round_limit_gave_no_answer(api):
    # Asked to answer without tools, the model asks for a tool again and says nothing: the turn has no answer.
    done, model = run_chat(api, Turn("", [("echo", {"text": "three"})]))
    stderr = done.stderr.decode()
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    assert done.stdout.decode().splitlines() == ["You said: next; the tools said: echo: one | echo: two"]
    # The next request (OpenAI refuses an assistant message with neither text nor tool calls): the rounds, closed
    # by an assistant text saying no answer was given, then the question.
    kept = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in kept] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                         "user"], kept
    assert [m["content"] for m in kept if m["role"] == "tool"] == ["echo: one", "echo: two"]
    closing = kept[6]
    assert set(closing) == {"role", "content"} and "gave no answer" in closing["content"]
    assert not any(LIMIT_NOTE in (m.get("content") or "") for m in kept)  # the note was for that request only
    assert_limit_request(model)
    # The terminal says the turn has no answer, and that the calls of its two rounds ran (the memory may have
    # changed); the call asked for at the limit was not run.
    assert "[tool echo {\"text\": \"three\"}]" not in stderr
    lines = stderr.splitlines()
    error = next((i for i, line in enumerate(lines) if line.startswith("error: ")), None)
    assert error is not None, stderr
    assert lines[error] == (f"error: {MODEL} gave no answer within the 2 rounds of tool calls allowed "
                            "(--max-tool-rounds): asked to answer without tools, it called echo again (not run); "
                            "ask again, or raise --max-tool-rounds"), stderr
    assert lines[error + 1] == TURN_NOTE
