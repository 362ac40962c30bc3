"""The fake Ollama server itself, checked over real HTTP with httpx: the tests of the Ollama plugins rely on it."""

from __future__ import annotations

import json
import math
import threading

import httpx
import pytest

from tests.ollama_server import FakeOllama, canonical_model_name, minilm_embed_fn

NOT_FOUND = 'model "{}" not found, try pulling it first'


@pytest.fixture(scope="module")
def minilm_fn():
    """The real all-MiniLM-L6-v2 behind /api/embed, loaded once for this module (~10 s)."""
    return minilm_embed_fn()


@pytest.fixture
def ollama():
    with FakeOllama() as server:
        yield server


@pytest.fixture
def client(ollama):
    with httpx.Client(base_url=ollama.base_url, timeout=10) as http:
        yield http


def chat(model: str = "qwen3:8b", content: str = "hello", **extra) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": content}], **extra}


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- life cycle -------------------------------------------------------------------------------------------------


def test_it_listens_on_an_ephemeral_localhost_port_and_stops_on_exit():
    with FakeOllama() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.port > 0
        with httpx.Client(base_url=server.base_url) as http:
            assert http.get("/").text == "Ollama is running"
            with FakeOllama() as other:
                assert other.port != server.port
            server.stop()
            # the kept-alive connection is dropped too: a stopped Ollama answers nothing
            with pytest.raises(httpx.TransportError):
                http.get("/api/version")
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url


def test_nothing_is_printed(capfd):
    with FakeOllama() as server, httpx.Client(base_url=server.base_url, timeout=0.2) as http:
        http.get("/api/version")
        http.post("/api/chat", content=b"{not json")
        http.get("/no/such/path")
        server.delay_seconds = 1
        with pytest.raises(httpx.ReadTimeout):
            http.get("/api/tags")  # the server then writes to a closed connection
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# -- version, tags, show -----------------------------------------------------------------------------------------


def test_version(client):
    response = client.get("/api/version")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.json() == {"version": "0.12.0"}


def test_tags_list_the_pulled_models():
    with FakeOllama(models=["all-minilm", "qwen3:8b", "library/llama3.2:3b"]) as server:
        models = httpx.get(f"{server.base_url}/api/tags").json()["models"]
    assert [m["name"] for m in models] == ["all-minilm:latest", "qwen3:8b", "llama3.2:3b"]
    minilm = models[0]
    assert minilm["model"] == minilm["name"]
    assert isinstance(minilm["size"], int) and len(minilm["digest"]) == 64
    assert minilm["modified_at"].endswith("Z")
    assert minilm["details"]["format"] == "gguf"
    assert minilm["details"]["family"] == "bert"
    assert {"parameter_size", "quantization_level"} <= minilm["details"].keys()


def test_show_reports_capabilities_and_the_embedding_length(client):
    minilm = client.post("/api/show", json={"model": "all-minilm"}).json()
    assert minilm["capabilities"] == ["embedding"]
    assert minilm["model_info"]["bert.embedding_length"] == 384
    assert "completion" in client.post("/api/show", json={"model": "qwen3:8b"}).json()["capabilities"]
    missing = client.post("/api/show", json={"model": "nope"})
    assert missing.status_code == 404 and missing.json() == {"error": "model 'nope' not found"}


def test_model_names_default_to_the_latest_tag():
    assert canonical_model_name("all-minilm") == "all-minilm:latest"
    assert canonical_model_name("All-MiniLM:Latest") == "all-minilm:latest"
    assert canonical_model_name("registry.ollama.ai/library/qwen3:8b") == "qwen3:8b"
    assert canonical_model_name("me/model") == "me/model:latest"


# -- embed -------------------------------------------------------------------------------------------------------


@pytest.mark.model
def test_embed_a_single_string_with_the_real_minilm(minilm_fn):
    with FakeOllama(embed_fn=minilm_fn) as server:
        response = httpx.post(f"{server.base_url}/api/embed",
                              json={"model": "all-minilm", "input": "Why is the sky blue?"}, timeout=30)
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "all-minilm"  # echoed as sent
    assert set(body) == {"model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"}
    assert all(isinstance(body[k], int) and body[k] > 0 for k in ("total_duration", "load_duration",
                                                                   "prompt_eval_count"))
    [vector] = body["embeddings"]
    assert len(vector) == 384
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, abs_tol=1e-5)
    assert vector == pytest.approx(minilm_fn(["Why is the sky blue?"])[0], abs=1e-6)


@pytest.mark.model
def test_embed_a_list_with_the_real_minilm_similar_texts_are_closer(minilm_fn):
    texts = ["Marie Curie discovered radium.", "Radium was discovered by Marie Curie.",
             "The stock market fell sharply on Tuesday."]
    with FakeOllama(embed_fn=minilm_fn) as server:
        body = httpx.post(f"{server.base_url}/api/embed",
                          json={"model": "all-minilm:latest", "input": texts, "truncate": True, "keep_alive": "5m",
                                "options": {"num_ctx": 512}}, timeout=30).json()
    curie, curie_again, stocks = body["embeddings"]
    assert body["model"] == "all-minilm:latest"
    assert all(len(v) == 384 for v in body["embeddings"])
    assert all(math.isclose(cosine(v, v), 1.0, abs_tol=1e-5) for v in body["embeddings"])
    assert cosine(curie, curie_again) > 0.8
    assert cosine(curie, curie_again) > cosine(curie, stocks) + 0.5


def test_embed_empty_input_gives_no_vectors(client):
    for empty in ("", [], None):
        response = client.post("/api/embed", json={"model": "all-minilm", "input": empty})
        assert response.status_code == 200
        assert response.json() == {"model": "all-minilm", "embeddings": []}


def test_embed_rejects_inputs_that_are_not_text(client):
    for bad in (42, ["ok", 3], {"text": "x"}):
        response = client.post("/api/embed", json={"model": "all-minilm", "input": bad})
        assert response.status_code == 400
        assert response.json() == {"error": "invalid input type"}


def test_embed_dimensions_truncates_and_renormalises(client):
    [vector] = client.post("/api/embed", json={"model": "all-minilm", "input": "hi", "dimensions": 64}).json()[
        "embeddings"]
    assert len(vector) == 64
    assert math.isclose(cosine(vector, vector), 1.0, abs_tol=1e-6)


def test_wrong_dimensions_changes_the_vector_length(ollama, client):
    ollama.wrong_dimensions = 10
    body = client.post("/api/embed", json={"model": "all-minilm", "input": ["one", "two"]}).json()
    assert [len(v) for v in body["embeddings"]] == [10, 10]
    ollama.wrong_dimensions = None
    body = client.post("/api/embed", json={"model": "all-minilm", "input": "one"}).json()
    assert len(body["embeddings"][0]) == 384


def test_a_failing_embed_fn_is_a_500_with_its_message():
    def broken(texts):
        raise RuntimeError("GPU on fire")

    with FakeOllama(embed_fn=broken) as server:
        response = httpx.post(f"{server.base_url}/api/embed", json={"model": "all-minilm", "input": "x"})
    assert response.status_code == 500
    assert "GPU on fire" in response.json()["error"]


# -- chat --------------------------------------------------------------------------------------------------------


def test_chat_replies_come_from_the_script_in_order_then_the_default():
    def echo(body):
        return "you said: " + body["messages"][-1]["content"]

    with FakeOllama(chat_replies=['{"entities": []}', echo], default_chat_reply="fallback") as server:
        with httpx.Client(base_url=server.base_url) as http:
            replies = [http.post("/api/chat", json=chat(content=f"m{i}", stream=False, format="json",
                                                        options={"temperature": 0}, keep_alive="5m", think=False))
                       for i in range(4)]
        assert server.pending_chat_replies == 0
        server.add_chat_replies("late")
        with httpx.Client(base_url=server.base_url) as http:
            late = http.post("/api/chat", json=chat(stream=False)).json()["message"]["content"]
    assert all(r.status_code == 200 for r in replies)
    assert all(r.headers["content-type"] == "application/json; charset=utf-8" for r in replies)
    assert [r.json()["message"]["content"] for r in replies] == ['{"entities": []}', "you said: m1", "fallback",
                                                                 "fallback"]
    assert late == "late"
    body = replies[0].json()
    assert body["model"] == "qwen3:8b"
    assert body["message"] == {"role": "assistant", "content": '{"entities": []}'}
    assert body["done"] is True and body["done_reason"] == "stop"
    assert body["created_at"].endswith("Z")
    for key in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
                "eval_duration"):
        assert isinstance(body[key], int) and body[key] > 0, key


def test_a_callable_default_reply_sees_the_request():
    with FakeOllama(default_chat_reply=lambda body: body["model"].upper()) as server:
        body = httpx.post(f"{server.base_url}/api/chat", json=chat(stream=False)).json()
    assert body["message"]["content"] == "QWEN3:8B"


def test_chat_streams_ndjson_when_stream_is_true_or_absent():
    reply = "Radium was discovered by  Marie Curie.\n"
    with FakeOllama(chat_replies=[reply, reply]) as server, httpx.Client(base_url=server.base_url) as http:
        for request in (chat(), chat(stream=True)):
            with http.stream("POST", "/api/chat", json=request) as response:
                assert response.status_code == 200
                assert response.headers["content-type"] == "application/x-ndjson"
                lines = [json.loads(line) for line in response.iter_lines() if line]
            *pieces, last = lines
            assert len(pieces) > 1
            assert all(p["done"] is False and p["message"]["role"] == "assistant" for p in pieces)
            assert all(set(p) == {"model", "created_at", "message", "done"} for p in pieces)
            assert "".join(p["message"]["content"] for p in pieces) == reply
            assert last["done"] is True and last["done_reason"] == "stop"
            assert last["message"] == {"role": "assistant", "content": ""}
            assert last["eval_count"] > 0


def test_chat_without_messages_only_loads_the_model(client, ollama):
    body = client.post("/api/chat", json={"model": "qwen3:8b", "messages": []}).json()
    assert body["done"] is True and body["done_reason"] == "load"
    assert body["message"] == {"role": "assistant", "content": ""}
    assert client.post("/api/chat", json={"model": "qwen3:8b", "keep_alive": 0}).json()["done_reason"] == "unload"


def test_an_embedding_model_cannot_chat(client):
    response = client.post("/api/chat", json=chat(model="all-minilm", stream=False))
    assert response.status_code == 400
    assert response.json() == {"error": '"all-minilm" does not support chat'}


def test_generate_uses_the_same_script():
    with FakeOllama(chat_replies=["blue", "because of Rayleigh scattering"]) as server:
        with httpx.Client(base_url=server.base_url) as http:
            single = http.post("/api/generate", json={"model": "qwen3:8b", "prompt": "sky?", "stream": False}).json()
            lines = [json.loads(x) for x in http.post("/api/generate",
                                                      json={"model": "qwen3:8b", "prompt": "why?"}).text.splitlines()]
    assert single["response"] == "blue" and single["done"] is True and single["context"]
    assert "".join(x["response"] for x in lines) == "because of Rayleigh scattering"
    assert lines[-1]["done"] is True and lines[-1]["response"] == ""


def test_a_failing_reply_callable_is_a_500():
    def broken(body):
        raise ValueError("script error")

    with FakeOllama(chat_replies=[broken]) as server:
        response = httpx.post(f"{server.base_url}/api/chat", json=chat(stream=False))
    assert response.status_code == 500 and "script error" in response.json()["error"]


# -- errors like Ollama's ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path, request_body", [
    ("/api/embed", {"model": "nomic-embed-text", "input": "x"}),
    ("/api/chat", chat(model="llama3.1:70b", stream=False)),
    ("/api/chat", chat(model="qwen3", stream=False)),  # means qwen3:latest; only qwen3:8b is pulled
])
def test_an_unknown_model_is_a_404_with_ollamas_message(client, path, request_body):
    response = client.post(path, json=request_body)
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.json() == {"error": NOT_FOUND.format(request_body["model"])}


def test_a_model_name_is_accepted_with_or_without_latest(client):
    for name in ("all-minilm", "all-minilm:latest", "ALL-MINILM"):
        assert client.post("/api/embed", json={"model": name, "input": "x"}).status_code == 200


@pytest.mark.parametrize("path", ["/api/embed", "/api/chat"])
def test_malformed_json_is_a_400(client, path):
    for raw, message in ((b"{not json", "invalid character 'n' looking for beginning of object key string"),
                         (b'{"model": "all-minilm", ', "unexpected EOF"),
                         (b"nonsense", None)):
        response = client.post(path, content=raw, headers={"Content-Type": "application/json"})
        assert response.status_code == 400
        error = response.json()["error"]
        assert isinstance(error, str) and error and (message is None or error == message)
    empty = client.post(path, content=b"")
    assert empty.status_code == 400 and empty.json() == {"error": "missing request body"}
    array = client.post(path, json=[1, 2])
    assert array.status_code == 400 and "cannot unmarshal array" in array.json()["error"]


@pytest.mark.parametrize("path, request_body", [
    ("/api/embed", {"input": "x"}),
    ("/api/embed", {"model": "", "input": "x"}),
    ("/api/chat", {"messages": [{"role": "user", "content": "hi"}], "stream": False}),
    ("/api/chat", {"model": "not a name!", "messages": []}),
])
def test_a_missing_model_is_a_400(client, path, request_body):
    response = client.post(path, json=request_body)
    assert response.status_code == 400
    assert response.json() == {"error": "model is required"}


def test_unknown_paths_are_404_page_not_found(client):
    for method, path in (("GET", "/api/nothing"), ("GET", "/api/embed"), ("POST", "/api/version")):
        response = client.request(method, path)
        assert response.status_code == 404 and response.text == "404 page not found"


# -- fault injection ---------------------------------------------------------------------------------------------


def test_fail_next_answers_the_next_requests_with_the_error(ollama, client):
    ollama.fail_next(500, "llama runner process has terminated", count=2)
    first = client.post("/api/embed", json={"model": "all-minilm", "input": "x"})
    second = client.get("/api/version")
    third = client.post("/api/embed", json={"model": "all-minilm", "input": "x"})
    assert (first.status_code, second.status_code, third.status_code) == (500, 500, 200)
    assert first.json() == second.json() == {"error": "llama runner process has terminated"}


def test_fail_next_can_target_one_path(ollama, client):
    ollama.fail_next(503, "server busy, please try again.  maximum pending requests exceeded", path="/api/chat")
    assert client.get("/api/version").status_code == 200
    assert client.post("/api/chat", json=chat(stream=False)).status_code == 503
    assert client.post("/api/chat", json=chat(stream=False)).status_code == 200


def test_answer_next_sends_any_json_or_text_as_the_whole_answer(ollama, client):
    ollama.answer_next(500, "upstream error", path="/api/embed")
    ollama.answer_next(200, None, path="/api/embed")
    ollama.answer_next(404, b"404 page not found", path="/api/embed")
    assert client.get("/api/version").json() == {"version": "0.12.0"}
    first, second, third, fourth = (client.post("/api/embed", json={"model": "all-minilm", "input": "x"})
                                    for _ in range(4))
    assert (first.status_code, first.json()) == (500, "upstream error")
    assert (second.status_code, second.text) == (200, "null")
    assert (third.status_code, third.text, third.headers["content-type"]) == (
        404, "404 page not found", "text/plain; charset=utf-8")
    assert fourth.status_code == 200 and len(fourth.json()["embeddings"]) == 1
    with pytest.raises(ValueError, match="count"):
        ollama.answer_next(200, {}, count=0)


def test_fail_next_is_thread_safe(ollama):
    ollama.fail_next(500, "boom", count=7)
    statuses: list[int] = []
    lock = threading.Lock()

    def hit():
        with httpx.Client(base_url=ollama.base_url, timeout=10) as http:
            for _ in range(5):
                status = http.post("/api/embed", json={"model": "all-minilm", "input": "x"}).status_code
                with lock:
                    statuses.append(status)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(statuses) == 40 and statuses.count(500) == 7 and statuses.count(200) == 33
    assert len(ollama.requests) == 40


def test_a_delay_makes_a_client_time_out_and_the_server_recovers(ollama):
    ollama.delay_seconds = 2.0
    with httpx.Client(base_url=ollama.base_url, timeout=0.3) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/api/embed", json={"model": "all-minilm", "input": "x"})
        ollama.delay_seconds = 0
        assert http.post("/api/embed", json={"model": "all-minilm", "input": "x"}).status_code == 200


def test_a_short_delay_is_only_slow(ollama, client):
    import time

    ollama.delay_seconds = 0.3
    started = time.perf_counter()
    assert client.get("/api/version").status_code == 200
    assert time.perf_counter() - started >= 0.3


def test_stopping_ends_a_pending_delay_at_once():
    import time

    server = FakeOllama().start()
    server.delay_seconds = 30
    worker = threading.Thread(target=lambda: httpx.get(f"{server.base_url}/api/version", timeout=60), daemon=True)
    worker.start()
    time.sleep(0.2)
    started = time.perf_counter()
    server.stop()
    worker.join(timeout=5)
    assert time.perf_counter() - started < 5 and not worker.is_alive()


# -- the record of requests --------------------------------------------------------------------------------------


def test_every_request_is_recorded_with_its_json_body(ollama, client):
    client.get("/api/version")
    client.post("/api/embed", json={"model": "all-minilm", "input": ["a", "b"]})
    client.post("/api/chat", content=b"{broken")
    assert [(r["method"], r["path"]) for r in ollama.requests] == [
        ("GET", "/api/version"), ("POST", "/api/embed"), ("POST", "/api/chat")]
    assert ollama.requests[0]["body"] is None
    assert ollama.requests[1]["body"] == {"model": "all-minilm", "input": ["a", "b"]}
    assert ollama.requests[2]["body"] is None  # unparseable
    assert ollama.requests_to("/api/embed") == [ollama.requests[1]]
