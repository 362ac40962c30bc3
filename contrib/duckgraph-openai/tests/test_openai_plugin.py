"""The plugin against an OpenAI-compatible server on 127.0.0.1 (openai_fake.py): embeddings, extraction,
retries, deadlines, and errors that say what to do without ever showing the API key."""

from __future__ import annotations

import json
import logging
import socket
import time
from importlib.metadata import entry_points

import numpy as np
import pytest
from openai_fake import FakeOpenAI, hashed_vector

import duckgraph_openai
from duckgraph.ports import ConfigError, EmbedderError, ExtractionError
from duckgraph_openai import OpenAIEmbedder, OpenAIExtractor

KEY = "sk-test-0123456789abcdef-secret"
WRONG_KEY = "sk-wrong-9876543210fedcba-secret"


@pytest.fixture
def server():
    with FakeOpenAI(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


def embedder(server: FakeOpenAI, **options) -> OpenAIEmbedder:
    return OpenAIEmbedder(base_url=server.base_url, **{"backoff": 0.01, **options})


def test_the_entry_point_names_the_package():
    [point] = [p for p in entry_points(group="duckgraph") if p.name == "openai"]
    assert point.load() is duckgraph_openai
    registered = {}
    duckgraph_openai.register_embedders(lambda id, factory: registered.setdefault(("embedder", id), factory))
    duckgraph_openai.register_extractors(lambda id, factory: registered.setdefault(("extractor", id), factory))
    assert registered == {("embedder", "openai"): OpenAIEmbedder, ("extractor", "openai"): OpenAIExtractor}


def test_embeds_in_batches_with_the_key_in_the_header(server, api_key):
    texts = [f"text number {i}" for i in range(5)]
    vectors = embedder(server, batch_size=2).embed_documents(texts)
    expected = np.array([hashed_vector(t, 64) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)  # back in order although the server reversed them
    calls = server.requests_to("/v1/embeddings")
    assert [len(c["body"]["input"]) for c in calls] == [2, 2, 1]
    assert all(c["headers"]["Authorization"] == f"Bearer {KEY}" for c in calls)
    assert all(c["body"]["model"] == "text-embedding-3-small" and "dimensions" not in c["body"] for c in calls)


def test_the_width_is_probed_once_or_asked_for(server, api_key):
    probed = embedder(server)
    assert (probed.id, probed.dimensions, probed.dimensions) == ("openai:text-embedding-3-small", 64, 64)
    assert len(server.requests_to("/v1/embeddings")) == 1
    shortened = embedder(server, dimensions=16)
    assert shortened.id == "openai:text-embedding-3-small@16"  # another vector space than the full width
    assert shortened.embed_query("hello world").shape == (16,)
    assert server.requests_to("/v1/embeddings")[-1]["body"]["dimensions"] == 16


def test_a_server_ignoring_dimensions_is_caught(server, api_key):
    server.models.add("fixed-width")
    wrong = embedder(server, model="fixed-width", dimensions=128)  # the server has only 64
    with pytest.raises(EmbedderError, match="64-dimensional vectors, expected 128"):
        wrong.embed_query("hello")


def test_rate_limits_and_server_errors_are_retried_with_backoff(server, api_key):
    server.fail_next(429, retry_after=0.2)
    server.fail_next(503)
    started = time.perf_counter()
    assert embedder(server, backoff=0.05).embed_query("hello").shape == (64,)
    assert time.perf_counter() - started >= 0.2 + 0.1  # Retry-After, then 0.05 doubled
    assert len(server.requests_to("/v1/embeddings")) == 3


def test_rate_limiting_that_persists_says_what_to_do(server, api_key):
    server.fail_next(429, count=3)
    with pytest.raises(EmbedderError, match=r"rate limiting \(HTTP 429\), still after 2 retries: wait and try "
                                            r"again, lower batch_size, or raise max_retries or backoff\."):
        embedder(server, max_retries=2).embed_query("hello")
    assert len(server.requests_to("/v1/embeddings")) == 3
    server.fail_next(500, count=2)
    with pytest.raises(EmbedderError, match="HTTP 500 on /embeddings, 2 times"):
        embedder(server, max_retries=1).embed_query("hello")


def test_retry_counts_of_one_read_right(server, api_key):
    server.fail_next(429, count=2)
    with pytest.raises(EmbedderError, match=r"\(HTTP 429\), still after 1 retry: "):
        embedder(server, max_retries=1).embed_query("hello")
    server.fail_next(429)
    with pytest.raises(EmbedderError, match=r"\(HTTP 429\), not retried with max_retries 0: "):
        embedder(server, max_retries=0).embed_query("hello")
    server.fail_next(503)
    with pytest.raises(EmbedderError, match="HTTP 503 on /embeddings, once: try again later"):
        embedder(server, max_retries=0).embed_query("hello")


def test_client_errors_are_not_retried(server, api_key):
    server.fail_next(400)
    with pytest.raises(EmbedderError, match="HTTP 400: injected 400"):
        embedder(server).embed_query("hello")
    assert len(server.requests_to("/v1/embeddings")) == 1


def test_a_wrong_key_is_named_by_its_variable_never_shown(server, monkeypatch, caplog):
    monkeypatch.setenv("MY_KEY", WRONG_KEY)
    caplog.set_level(logging.DEBUG)
    wrong = embedder(server, api_key_env="MY_KEY")
    with pytest.raises(EmbedderError) as raised:
        wrong.embed_query("hello")
    message = str(raised.value)
    assert "refused the API key in $MY_KEY (HTTP 401)" in message
    assert WRONG_KEY not in message and "[redacted]" in message  # the server echoed it; it is removed
    assert WRONG_KEY not in caplog.text and WRONG_KEY not in repr(wrong.describe())
    assert wrong.describe() == {"endpoint": f"{server.base_url}/embeddings", "api key": "$MY_KEY (set)"}
    assert "sk-" not in repr(raised.value.__cause__) and raised.value.__cause__ is None


def test_a_missing_key_says_which_variable_to_set(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EmbedderError, match=r"needs an API key \(HTTP 401\) and \$OPENAI_API_KEY is not set"):
        embedder(server).embed_query("hello")


def test_an_unknown_model_and_a_wrong_url_say_what_to_check(server, api_key):
    with pytest.raises(EmbedderError, match=r"has no model 'no-such-model' \(HTTP 404\): check the model option"):
        embedder(server, model="no-such-model").embed_query("hello")
    without_v1 = server.base_url.removesuffix("/v1")
    with pytest.raises(EmbedderError, match=r"/embeddings does not exist \(HTTP 404\): check the base_url option"):
        OpenAIEmbedder(base_url=without_v1).embed_query("hello")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(EmbedderError, match=rf"cannot reach http://127.0.0.1:{port}/v1: is the server running"):
        OpenAIEmbedder(base_url=f"http://127.0.0.1:{port}/v1").embed_query("hello")


def test_the_deadline_covers_a_slow_server(server, api_key):
    server.delay_seconds = 3
    started = time.perf_counter()
    with pytest.raises(EmbedderError, match="did not answer within the 0.5 s deadline"):
        embedder(server, timeout=0.5).embed_query("hello")
    assert time.perf_counter() - started < 2.5


@pytest.mark.parametrize(("options", "error"), [
    ({"dimensions": 0}, "dimensions must be a whole number, at least 1 (or left out), not 0"),
    ({"batch_size": 0}, "batch_size must be a whole number, at least 1, not 0"),
    ({"batch_size": 2.5}, "batch_size must be a whole number, at least 1, not 2.5"),
    ({"timeout": -1}, "timeout must be a number of seconds above 0, not -1"),
    ({"timeout": "30"}, "timeout must be a number of seconds above 0, not '30'"),
    ({"max_retries": -1}, "max_retries must be a whole number, at least 0, not -1"),
    ({"backoff": True}, "backoff must be a number of seconds, at least 0, not True"),
    ({"base_url": "127.0.0.1:1234/v1"}, "base_url must be an http:// or https:// address, not '127.0.0.1:1234/v1'"),
    ({"model": ""}, "model must be a model name, not ''"),
])
def test_bad_option_values_are_config_errors_naming_the_option(options, error):
    with pytest.raises(ConfigError) as raised:
        OpenAIEmbedder(**options)
    assert str(raised.value) == f"bad options for embedder 'openai': {error}"


@pytest.mark.parametrize(("options", "error"), [
    ({"max_attempts": 0}, "max_attempts must be a whole number, at least 1, not 0"),
    ({"temperature": -0.5}, "temperature must be a number, at least 0, not -0.5"),
    ({"timeout": None}, "timeout must be a number of seconds above 0, not None"),
    ({"api_key_env": " "}, "api_key_env must be the name of an environment variable, not ' '"),
])
def test_bad_extractor_option_values_are_config_errors(options, error):
    with pytest.raises(ConfigError) as raised:
        OpenAIExtractor(**options)
    assert str(raised.value) == f"bad options for extractor 'openai': {error}"


EMBEDDER = "embedder 'openai:text-embedding-3-small'"
NOT_NUMBERS = "{who} returned a vector that is not a list of numbers"


@pytest.mark.parametrize(("edit", "said"), [  # the vectors are the port's to check (Embedder.vectors_from_json)
    (lambda vectors: [vectors[0], vectors[1][:-3], *vectors[2:]],
     "{who} returned vectors of different widths (61, 64)"),
    (lambda vectors: [["n/a", *v[1:]] for v in vectors], NOT_NUMBERS + ' (row 0, item 0 is "n/a")'),
    (lambda vectors: [[None, *v[1:]] for v in vectors], NOT_NUMBERS + " (row 0, item 0 is null)"),
    (lambda vectors: [[[0.5], *v[1:]] for v in vectors], NOT_NUMBERS + " (row 0, item 0 is [0.5])"),
    (lambda vectors: [*vectors[:2], [*vectors[2][:-1], False]], NOT_NUMBERS + " (row 2, item 63 is false)"),
    (lambda vectors: ["AAAAAAA=" for _ in vectors], NOT_NUMBERS + " (row 0 is a string)"),  # base64 despite "float"
    (lambda vectors: [[] for _ in vectors], f"{EMBEDDER} gives 0-dimensional (empty) vectors"),  # as the probe says
])
def test_malformed_vectors_are_embedder_errors(server, api_key, edit, said):
    server.edit_vectors = edit
    with pytest.raises(EmbedderError) as raised:
        embedder(server).embed_documents(["one text", "another text", "a third"])
    assert said.format(who=f"{EMBEDDER} ({server.base_url}/embeddings)") in str(raised.value)


# -- extraction -------------------------------------------------------------------------------------------------

GRAPH = {"nodes": [{"name": "Ada Lovelace", "type": "Person", "description": "A mathematician.", "aliases": []},
                   {"name": "Analytical Engine", "type": "Machine", "description": "", "aliases": []}],
         "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "WROTE_PROGRAM_FOR",
                    "description": "Ada Lovelace wrote a program for the Analytical Engine."}]}


def extractor(server: FakeOpenAI, **options) -> OpenAIExtractor:
    return OpenAIExtractor(base_url=server.base_url, **{"backoff": 0.01, **options})


def test_extraction_asks_for_strict_json_schema_output(server, api_key):
    server.chat_reply = lambda body: json.dumps(GRAPH)
    fragment = extractor(server).extract("Ada Lovelace wrote a program for the Analytical Engine.",
                                         known_entities=["Charles Babbage"])
    assert fragment == GRAPH
    [call] = server.requests_to("/v1/chat/completions")
    body = call["body"]
    assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0.0
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    assert schema["schema"]["required"] == ["nodes", "edges"]
    assert schema["schema"]["properties"]["edges"]["items"]["additionalProperties"] is False
    assert "- Charles Babbage" in body["messages"][1]["content"]


def test_an_invalid_answer_is_sent_back_and_retried(server, api_key):
    bad_edge = {"nodes": GRAPH["nodes"], "edges": [{**GRAPH["edges"][0], "target": "Difference Engine"}]}
    replies = iter(["not json at all", json.dumps(bad_edge), "<think>ok</think>```json\n" + json.dumps(GRAPH) + "```"])
    server.chat_reply = lambda body: next(replies)
    assert extractor(server).extract("Ada Lovelace and the Analytical Engine.") == GRAPH
    calls = [c["body"]["messages"] for c in server.requests_to("/v1/chat/completions")]
    assert [len(m) for m in calls] == [2, 4, 6]
    assert "does not match the schema" in calls[1][3]["content"]
    assert "edges name entities missing from nodes: Difference Engine" in calls[2][5]["content"]


def test_no_valid_answer_in_max_attempts_is_an_extraction_error(server, api_key):
    server.chat_reply = lambda body: '{"nodes": [{"name": ""}], "edges": []}'
    with pytest.raises(ExtractionError, match="gave no valid extraction in 2 attempts: .*nodes.0.name"):
        extractor(server, max_attempts=2).extract("text")


def test_check_finds_an_unserved_model(server, api_key):
    extractor(server).check()
    with pytest.raises(ExtractionError, match=r"does not serve the model 'gpt-5'.*gpt-4o-mini, text-embedding"):
        extractor(server, model="gpt-5").check()


def test_check_takes_a_bare_name_for_its_latest_tag_as_ollama_does(server, api_key):
    server.models = {"qwen3:latest", "llama3.2:3b"}  # as Ollama's /v1/models lists them
    extractor(server, model="qwen3").check()
    extractor(server, model="qwen3:latest").check()
    for other in ("llama3.2", "qwen3:8b", "qwen"):  # only the latest tag stands for a bare name
        with pytest.raises(ExtractionError, match=f"does not serve the model '{other}'"):
            extractor(server, model=other).check()


def test_extractor_rate_limit_advice_names_only_its_own_options(server, api_key):
    server.fail_next(429, count=2)
    with pytest.raises(ExtractionError) as raised:
        extractor(server, max_retries=1).extract("Ada Lovelace wrote a program.")
    message = str(raised.value)
    assert "still after 1 retry: wait and try again, or raise max_retries or backoff." in message
    assert "batch_size" not in message


def test_community_reports_are_asked_for_in_their_own_strict_schema(server, api_key):
    report = {"title": "Victorian computing", "summary": "Ada Lovelace wrote a program for Babbage's engine."}
    replies = iter(['{"title": "x"}', json.dumps(report)])
    server.chat_reply = lambda body: next(replies)
    assert extractor(server).write_report("Entities: Ada Lovelace, Analytical Engine.") == report
    first, retry = [c["body"] for c in server.requests_to("/v1/chat/completions")]
    schema = first["response_format"]["json_schema"]
    assert schema["name"] == "community_report" and schema["schema"]["required"] == ["title", "summary"]
    assert "Ada Lovelace" in first["messages"][1]["content"]
    assert "That answer was invalid" in retry["messages"][3]["content"]
