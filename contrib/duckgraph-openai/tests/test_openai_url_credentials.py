"""A base_url with a user and password (or a token in its query): sent to the server, never shown in an error,
a log line or what doctor reads (describe)."""

from __future__ import annotations

import logging
import socket

import pytest
from openai_fake import FakeOpenAI

from duckgraph.ports import EmbedderError, ExtractionError
from duckgraph_openai import OpenAIEmbedder, OpenAIExtractor


def with_credentials(url: str) -> str:
    return url.replace("http://", "http://me:p4ssw0rd@")


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_errors_and_describe_hide_the_password(caplog):
    with FakeOpenAI() as server:
        shown = server.base_url.replace("http://", "http://***@")
        embedder = OpenAIEmbedder(base_url=with_credentials(server.base_url), backoff=0.01, max_retries=1)
        assert embedder.describe()["endpoint"] == f"{shown}/embeddings"
        assert embedder.embed_query("reaches the server with its password in the URL").shape == (64,)
        server.fail_next(503, count=2)
        with caplog.at_level(logging.INFO), pytest.raises(EmbedderError) as info:
            embedder.embed_documents(["a"])
        extractor = OpenAIExtractor(base_url=with_credentials(server.base_url), model="no-such-model")
        with pytest.raises(ExtractionError) as missing:
            extractor.check()
    assert str(info.value).startswith(f"{shown} failed with HTTP 503 on /embeddings, 2 times")
    # Both the plugin's line and httpx's own ("HTTP Request: POST http://...") hide it.
    assert any(m.startswith(f"{shown}/embeddings answered HTTP 503; retry 1/1") for m in caplog.messages)
    assert any(m.startswith(f"HTTP Request: POST {shown}/embeddings") for m in caplog.messages)
    assert str(missing.value).startswith(f"{shown} does not serve the model 'no-such-model'")
    assert not any("p4ssw0rd" in text for text in [str(info.value), str(missing.value), *caplog.messages])


def test_an_unreachable_server_and_a_query_token_are_hidden_too():
    port = closed_port()
    with pytest.raises(EmbedderError) as info:
        OpenAIEmbedder(base_url=with_credentials(f"http://127.0.0.1:{port}/v1?api_key=s3cr3t"), max_retries=0,
                       dimensions=8).embed_query("x")
    assert str(info.value).startswith(f"cannot reach http://***@127.0.0.1:{port}/v1?api_key=***: is the server ")
    assert "p4ssw0rd" not in str(info.value) and "s3cr3t" not in str(info.value)
