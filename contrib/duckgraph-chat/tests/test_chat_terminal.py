"""duckgraph-chat as a terminal program, against a small MCP server (tiny_server.py, no embedding model) and the
scripted model: the server dying mid-chat, Ctrl-C at the prompt, input that is not UTF-8, and a server whose
extract_knowledge prompt needs arguments."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scripted_model import ScriptedModel, Turn

TINY_SERVER = [sys.executable, str(Path(__file__).with_name("tiny_server.py"))]
TIMEOUT_SECONDS = 60


def command(model: ScriptedModel, api: str, *server_args: str) -> list[str]:
    base_url = model.url if api == "ollama" else f"{model.url}/v1"
    return [sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url, "--",
            *TINY_SERVER, *server_args]


def chat(model: ScriptedModel, api: str, text: bytes, *server_args: str) -> subprocess.CompletedProcess:
    return subprocess.run(command(model, api, *server_args), input=text, capture_output=True,
                          timeout=TIMEOUT_SECONDS)


def last_user(messages) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def echo_brain(messages, tools) -> Turn:
    """Calls the tool a line names (`crash`, or `echo <text>`), says what it answered, else repeats the line."""
    asked, last = last_user(messages), messages[-1]
    if last["role"] == "tool":
        return Turn(f"Tool said: {last['content']}")
    if asked == "crash":
        return Turn("", [("crash", {})])
    if asked.startswith("echo "):
        return Turn("", [("echo", {"text": asked[5:]})])
    return Turn(f"You said: {asked}")


@pytest.fixture(params=["ollama", "openai"])
def api(request) -> str:
    return request.param


def test_a_server_that_stops_mid_chat_ends_the_chat(api):
    with ScriptedModel(echo_brain) as model:
        done = chat(model, api, b"echo one\ncrash\necho two\nnever asked\n")
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 2, stderr
    assert stdout.splitlines() == ["Tool said: echo: one"]
    assert "stopped or failed (Connection closed)" in stderr and "Traceback" not in stderr
    assert "the tool call failed" not in stderr
    # Nothing after the crash reached the model: the chat ended instead of answering it with tool errors.
    assert [last_user(r["body"]["messages"]) for r in model.requests] == ["echo one", "echo one", "crash"]


def test_a_line_that_is_not_utf8_is_read_with_replacement_characters(api):
    with ScriptedModel(echo_brain) as model:
        done = chat(model, api, "first\n".encode() + b"caf\xe9 au lait\n" + "third, caf\u00e9\n".encode())
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines() == ["You said: first", "You said: caf\ufffd au lait",
                                                 "You said: third, caf\u00e9"]
    assert "Traceback" not in done.stderr.decode()


def test_a_seed_prompt_that_needs_arguments_is_left_out(api):
    with ScriptedModel(echo_brain) as model:
        done = chat(model, api, b"echo hello\n", "--seed-needs-text")
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert done.stdout.decode() == "Tool said: echo: hello\n"
    assert "[not using the server's extract_knowledge prompt: it needs arguments (text)]" in stderr
    system = model.requests[0]["body"]["messages"][0]["content"]
    assert "A tiny server for tests." in system and "Store this" not in system


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a pseudo-terminal")
def test_ctrl_c_at_the_prompt_ends_the_chat_at_once():
    import pty

    with ScriptedModel(echo_brain) as model:
        cmd = command(model, "ollama")
        pid, fd = pty.fork()
        if pid == 0:  # the child: the chat on the terminal
            os.execv(cmd[0], cmd)
        seen, status = b"", None

        def read_until(text: bytes, seconds: float, count: int = 1) -> None:
            nonlocal seen
            deadline = time.monotonic() + seconds
            while seen.count(text) < count and time.monotonic() < deadline:
                if select.select([fd], [], [], 0.1)[0]:
                    try:
                        seen += os.read(fd, 65536)
                    except OSError:  # the terminal closed
                        return

        try:
            read_until(b"you> ", TIMEOUT_SECONDS)
            os.write(fd, b"hello\r")
            read_until(b"you> ", 10, count=2)  # answered, and waiting at the prompt again
            assert b"You said: hello" in seen and seen.count(b"you> ") == 2, seen
            os.write(fd, b"\x03")  # Ctrl-C, and no Enter after it
            deadline = time.monotonic() + 5
            while status is None and time.monotonic() < deadline:
                read_until(b"\0", 0.2)
                ended, code = os.waitpid(pid, os.WNOHANG)
                status = os.waitstatus_to_exitcode(code) if ended else None
        finally:
            if status is None:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            os.close(fd)
    assert status == 130, seen.decode(errors="replace")
    assert b"Traceback" not in seen and b"Exception ignored" not in seen
