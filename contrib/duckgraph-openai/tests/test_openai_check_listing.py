"""`duckgraph doctor`'s check of the OpenAI-compatible extractor when /v1/models does not list the configured name:
llama-server lists the .gguf path it loaded and answers any model name, so that is a warning (doctor exits 0),
while a server that answers the chat call with "no such model" is still a failure. Real HTTP on 127.0.0.1
(openai_fake.py), doctor through the command line in this process."""

from __future__ import annotations

import json
import os

import pytest
from openai_fake import FakeOpenAI

from duckgraph.core.cli import main
from duckgraph.ports import ExtractionError
from duckgraph_openai import OpenAIExtractor

GGUF = "/home/me/models/Qwen3-8B-Q4_K_M.gguf"
GRAPH = '{"nodes": [{"name": "Ada Lovelace", "type": "Person"}], "edges": []}'


@pytest.fixture
def llama_server():
    with FakeOpenAI(chat_reply=lambda body: GRAPH) as fake:
        fake.lists_only = [GGUF]
        yield fake


@pytest.fixture
def env(monkeypatch, tmp_path):
    config = tmp_path / "empty-config.toml"
    config.write_text("", encoding="utf-8")
    for name in [n for n in os.environ if n.startswith("DUCKGRAPH_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return monkeypatch


def warning_for(url: str) -> str:
    return (f"{url}/models lists {GGUF}, not 'qwen3-8b', though a chat call with 'qwen3-8b' was answered: the "
            "server may answer another name (llama-server does); if extraction fails, set the model option to one "
            "of those it lists")


def test_a_name_the_server_does_not_list_but_answers_is_a_warning(llama_server):
    extractor = OpenAIExtractor("qwen3-8b", base_url=llama_server.base_url)
    assert extractor.check() == warning_for(llama_server.base_url)
    [call] = llama_server.requests_to("/v1/chat/completions")
    assert call["body"]["model"] == "qwen3-8b" and call["body"]["max_tokens"] == 1  # one token, not an extraction
    assert [node["name"] for node in extractor.extract("Ada Lovelace wrote a program.")["nodes"]] == ["Ada Lovelace"]


def test_a_listed_name_makes_no_chat_call(llama_server):
    assert OpenAIExtractor(GGUF, base_url=llama_server.base_url).check() is None
    assert llama_server.requests_to("/v1/chat/completions") == []


def test_a_model_the_server_refuses_is_still_a_failure():
    with FakeOpenAI() as server:  # lists and answers only its models: a chat call with another is HTTP 404
        with pytest.raises(ExtractionError) as err:
            OpenAIExtractor("gpt-5", base_url=server.base_url).check()
    message = str(err.value)
    assert message.startswith(f"{server.base_url} does not serve the model 'gpt-5': set the model option to one it "
                              "serves (it lists gpt-4o-mini, text-embedding-3-small).")
    assert "has no model 'gpt-5' (HTTP 404)" in message


def test_a_chat_call_that_fails_otherwise_is_a_failure_saying_so(llama_server):
    def broken(body):
        raise RuntimeError("the server drops the connection")

    llama_server.chat_reply = broken
    with pytest.raises(ExtractionError) as err:
        OpenAIExtractor("qwen3-8b", base_url=llama_server.base_url, max_retries=0).check()
    assert str(err.value).startswith(f"{llama_server.base_url}/models does not list the model 'qwen3-8b' (it lists "
                                     f"{GGUF}), and a chat call with it failed: ")


def test_doctor_lists_the_warning_and_exits_0(llama_server, env, tmp_path, capsys):
    env.setenv("DUCKGRAPH_EMBEDDER", "openai")
    env.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps({"model": "emb", "base_url": llama_server.base_url}))
    env.setenv("DUCKGRAPH_EXTRACTOR", "openai")
    env.setenv("DUCKGRAPH_EXTRACTOR_OPTIONS", json.dumps({"model": "qwen3-8b", "base_url": llama_server.base_url}))
    env.setenv("DUCKGRAPH_RELEVANCE_FLOOR", "0.2")
    code = main(["doctor", "--db", str(tmp_path / "kb.duckdb"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["problems"] == []
    assert f"the extractor openai:qwen3-8b: {warning_for(llama_server.base_url)}" in report["warnings"]
    [check] = [c for c in report["checks"] if c["check"] == "extractor"]
    assert check == {"check": "extractor", "ok": True,
                     "detail": "openai:qwen3-8b is reachable; see the warning below"}
