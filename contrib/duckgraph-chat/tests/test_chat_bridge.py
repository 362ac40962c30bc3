"""duckgraph-chat end to end: the console program as a subprocess, a real `duckgraph serve` on a real DuckDB file
(the real default model), and a scripted model on 127.0.0.1 speaking Ollama's or OpenAI's API (each test runs
with both)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from scripted_model import ScriptedModel, Turn

from duckgraph_chat.session import LIMIT_NOTE

pytestmark = pytest.mark.model  # the servers embed with the real default model

SERVE = [sys.executable, "-m", "duckgraph.core.cli", "serve"]
TIMEOUT_SECONDS = 180
FACT = {"nodes": [{"name": "Maya Chen", "type": "Person", "description": "The user's sister"},
                  {"name": "Lisbon", "type": "City", "description": "Capital of Portugal"}],
        "edges": [{"source": "Maya Chen", "target": "Lisbon", "type": "LIVES_IN",
                   "description": "Maya Chen lives in Lisbon."}]}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    # One model cache for the module: the first server exports the model, the others load the export.
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(params=["ollama", "openai"])
def api(request) -> str:
    return request.param


def chat(api: str, model: ScriptedModel, db: Path, cache: Path, lines: list[str], *options: str,
         server: list[str] | None = None) -> subprocess.CompletedProcess:
    home = db.parent / "home"
    home.mkdir(exist_ok=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "XDG_CACHE_HOME": str(cache), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "DUCKGRAPH_WARM_UP": "0"}
    base_url = model.url if api == "ollama" else f"{model.url}/v1"
    command = [sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", base_url, *options,
               "--", *(server or [*SERVE, "--db", str(db)])]
    return subprocess.run(command, input="\n".join(lines) + "\n", env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_SECONDS)


def last_user(messages: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in reversed(messages) if m["role"] == "user")


def wrote_the_fact(result: str) -> bool:
    """Whether add_knowledge_graph's answer reports FACT written: its two entities and its relation."""
    try:
        summary = json.loads(result)
    except ValueError:  # an error text
        return False
    return summary.get("nodes_created") == 2 and summary.get("edges_created") == 1


def memory_brain(messages, tools) -> Turn:
    """Stores what it is told; answers questions from what search returned, and only from that."""
    asked, last = last_user(messages), messages[-1]
    if last["role"] == "tool":
        if asked.startswith("Remember"):  # "Noted." only when the server reports the write (the test checks it)
            return Turn("Noted." if wrote_the_fact(last["content"]) else f"Not stored: {last['content'][:500]}")
        return Turn("From memory: Lisbon." if "Lisbon" in last["content"] else "Memory holds nothing on that.")
    if asked.startswith("Remember"):
        return Turn("", [("add_knowledge_graph", FACT)])
    return Turn("Let me look.", [("search", {"query": asked})])


def test_a_fact_stored_in_one_session_is_recalled_in_the_next(api, tmp_path, cache_dir):
    db = tmp_path / "memory.duckdb"
    with ScriptedModel(memory_brain) as model:
        first = chat(api, model, db, cache_dir, ["Remember: my sister Maya Chen lives in Lisbon."])
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == "Noted.", first.stdout  # else the write failed, and says why
        assert "[tool add_knowledge_graph" in first.stderr and "[the tool answered with an error]" not in first.stderr

        second = chat(api, model, db, cache_dir, ["Where does Maya Chen live?"])
        assert second.returncode == 0, second.stderr
        assert second.stdout.splitlines() == ["Let me look.", "From memory: Lisbon."]
        assert "Traceback" not in first.stderr + second.stderr

    opening = model.requests[0]["body"]
    system = opening["messages"][0]
    assert system["role"] == "system" and "search your memory" in system["content"]
    assert "Keep the source" in system["content"]  # seeded from the server's extract_knowledge prompt
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in opening["tools"]}
    assert {"search", "add_knowledge_graph"} <= set(offered)
    assert offered["search"]["required"] == ["query"]
    # The second session started afresh: the fact came back from the file, through search.
    recalled = model.requests[-1]["body"]["messages"]
    assert [m["role"] for m in recalled] == ["system", "user", "assistant", "tool"]
    assert "Lisbon" in recalled[-1]["content"] and "Lisbon" not in recalled[1]["content"]
    if api == "openai":
        assert recalled[2]["tool_calls"][0]["id"] == recalled[3]["tool_call_id"] == "call_0_x"
    else:
        assert recalled[3]["tool_name"] == "search"


FAULTS = {
    "bad json": [("search", '{"query": "Lisbon"')],
    "unknown tool": [("remember_everything", {"fact": "x"})],
    "bad schema": [("search", {"query": 5, "hops": 9})],
    "not an object": [("search", "[1, 2]")],
    "server error": [("merge_entities", {"sources": ["Nobody"], "target": "Nothing"})],
}


def faulty_brain(messages, tools) -> Turn:
    asked, last = last_user(messages), messages[-1]
    if tools is None:
        return Turn("I stop here.")
    if asked == "loop":
        return Turn("", [("graph_stats", {})])
    if last["role"] == "tool":
        return Turn("Tool said: " + last["content"][:300].replace("\n", " "))
    return Turn("", FAULTS[asked])


def test_every_bad_call_is_answered_to_the_model_and_the_chat_goes_on(api, tmp_path, cache_dir):
    with ScriptedModel(faulty_brain) as model:
        done = chat(api, model, tmp_path / "kb.duckdb", cache_dir, [*FAULTS, "loop"], "--max-tool-rounds", "2")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = done.stdout.splitlines()
    assert said[0].startswith("Tool said: Error: the arguments of search are not valid JSON (Expecting")
    assert said[1].startswith("Tool said: Error: unknown tool 'remember_everything': the tools are add_documents,")
    assert said[2] == ("Tool said: Error: invalid arguments for search: hops: 9 is greater than the maximum of 3; "
                       "query: 5 is not of type 'string'. Fix them and call again")
    assert said[3] == "Tool said: Error: the arguments of search must be a JSON object, not list"
    assert said[4].startswith("Tool said: Error: ") and "Nobody" in said[4]  # the server's own error
    assert said[5:] == ["I stop here."]
    loop = [r["body"] for r in model.requests if last_user(r["body"]["messages"]) == "loop"]
    assert ["tools" in body for body in loop] == [True, True, False]  # two rounds, then an answer without tools
    # The note saying so ends the last tool result of that request: no system message after the first.
    assert loop[-1]["messages"][-1]["role"] == "tool" and loop[-1]["messages"][-1]["content"].endswith(LIMIT_NOTE)
    assert all(m["role"] != "system" for m in loop[-1]["messages"][1:])
    # Nothing bad reached the server: only the valid calls wrote or read.
    assert done.stderr.count("[refused: ") == 4


def test_model_errors_are_reported_and_the_chat_goes_on(api, tmp_path, cache_dir):
    with ScriptedModel(lambda messages, tools: Turn("Hello.")) as model:
        model.fail_next(500)
        recovered = chat(api, model, tmp_path / "kb.duckdb", cache_dir, ["hi", "hi again"])
        unknown = chat(api, model, tmp_path / "kb.duckdb", cache_dir, ["hi"], "--model", "missing:1b")
    assert recovered.returncode == 0 and recovered.stdout == "Hello.\n"
    assert "error: the model server at" in recovered.stderr and "HTTP 500: injected failure" in recovered.stderr
    # The failed turn left nothing behind: the second request holds the system prompt and the new message only.
    assert [m["role"] for m in model.requests[1]["body"]["messages"]] == ["system", "user"]
    hint = "run `ollama pull missing:1b`" if api == "ollama" else "choose one it serves with --model"
    assert unknown.returncode == 0 and hint in unknown.stderr and "no model 'missing:1b'" in unknown.stderr

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    env_free = subprocess.run([sys.executable, "-m", "duckgraph_chat", "--api", api, "--base-url", closed, "--",
                               *SERVE, "--db", str(tmp_path / "kb.duckdb")], input="hi\n", capture_output=True,
                              text=True, timeout=TIMEOUT_SECONDS, env={**os.environ, "DUCKGRAPH_WARM_UP": "0"})
    assert env_free.returncode == 0, env_free.stderr
    assert f"cannot reach the model server at {closed}" in env_free.stderr


def test_a_server_that_cannot_start_is_said_plainly(tmp_path, cache_dir):
    with ScriptedModel(lambda messages, tools: Turn("unused")) as model:
        missing = chat("ollama", model, tmp_path / "kb.duckdb", cache_dir, ["hi"],
                       server=[str(tmp_path / "no-such-server")])
        dying = chat("ollama", model, tmp_path / "kb.duckdb", cache_dir, ["hi"],
                     server=[sys.executable, "-c", "import sys; sys.exit('no config')"])
    assert missing.returncode == 2 and "cannot start the MCP server" in missing.stderr
    assert dying.returncode == 2 and "no config" in dying.stderr and "stopped" in dying.stderr
    assert model.requests == []


def test_the_console_script_is_installed():
    script = shutil.which("duckgraph-chat", path=str(Path(sys.executable).parent))
    assert script, "duckgraph-chat is not installed next to this Python: pip install contrib/duckgraph-chat"
    shown = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0 and "--max-tool-rounds" in shown.stdout and "duckgraph serve" in shown.stdout
