"""Where the HTTP server may listen, and the bearer-token middleware, driven in-process through httpx."""

from __future__ import annotations

import httpx
import pytest

from duckgraph.core.config import load_settings
from duckgraph.core.mcp.http import BearerTokenMiddleware, check_binding, endpoint_url, is_loopback
from duckgraph.ports import ConfigError


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "::1", "[::1]"])
def test_loopback_addresses(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "example.org", "my-laptop"])
def test_other_addresses_reach_beyond_this_machine(host):
    assert not is_loopback(host)


def test_only_loopback_may_go_without_a_token():
    check_binding("127.0.0.1", None)
    check_binding("0.0.0.0", "a-token")
    with pytest.raises(ConfigError, match="refusing to listen on 0.0.0.0 without a token"):
        check_binding("0.0.0.0", None)
    with pytest.raises(ConfigError, match="empty"):
        check_binding(" ", "a-token")


def test_endpoint_url():
    assert endpoint_url("127.0.0.1", 8765) == "http://127.0.0.1:8765/mcp"
    assert endpoint_url("::1", 9000) == "http://[::1]:9000/mcp"


def test_the_token_comes_from_the_environment_or_the_file_and_is_never_shown(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('http_token = "  from-the-file  "\n')
    assert load_settings(config, env={}).http_token.get_secret_value() == "from-the-file"
    settings = load_settings(config, env={"DUCKGRAPH_HTTP_TOKEN": "from-env"})
    assert settings.http_token.get_secret_value() == "from-env"
    assert "from-env" not in repr(settings) and "from-env" not in settings.model_dump_json()
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert load_settings(empty, env={}).http_token is None
    config.write_text('http_token = "has a space"\n')
    with pytest.raises(ConfigError, match="http_token"):
        load_settings(config, env={})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        message = await receive()
        assert message["type"] == "lifespan.startup"
        await send({"type": "lifespan.startup.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"inside"})


@pytest.mark.anyio
@pytest.mark.parametrize(("headers", "status"), [
    ({}, 401),
    ({"Authorization": "Bearer wrong"}, 401),
    ({"Authorization": "Bearer t0ken-value-but-longer"}, 401),
    ({"Authorization": "Basic t0ken"}, 401),
    ({"Authorization": "t0ken"}, 401),
    ({"Authorization": "Bearer t0ken"}, 200),
    ({"Authorization": "bearer   t0ken "}, 200),
])
async def test_the_middleware_lets_only_the_right_token_in(headers, status):
    transport = httpx.ASGITransport(app=BearerTokenMiddleware(app, "t0ken"))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for method in ("GET", "POST", "DELETE"):
            response = await client.request(method, "/mcp", headers=headers)
            assert response.status_code == status, (method, headers)
            if status == 401:
                assert response.headers["www-authenticate"] == 'Bearer realm="duckgraph"'
                assert response.json()["error"] == "unauthorized"
                assert "t0ken" not in response.text
            else:
                assert response.text == "inside"


@pytest.mark.anyio
async def test_the_middleware_passes_lifespan_events_through():
    sent = []

    async def receive():
        return {"type": "lifespan.startup"}

    async def send(message):
        sent.append(message)

    await BearerTokenMiddleware(app, "t0ken")({"type": "lifespan"}, receive, send)
    assert sent == [{"type": "lifespan.startup.complete"}]


def test_an_empty_token_is_a_programming_error():
    with pytest.raises(ValueError):
        BearerTokenMiddleware(app, "")


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"text":"cut \\ud83d"}', '{"text": "cut \ufffd"}'),  # a lone high surrogate
    (b'{"text":"\\udc00 end"}', '{"text": "\ufffd end"}'),  # a lone low one
    (b'{"\\ud83d":1}', '{"\ufffd": 1}'),  # in a key
    (b'{"text":"bad \xff byte"}', '{"text":"bad \ufffd byte"}'),  # not UTF-8
    (b'{"text":"pair \\ud83d\\ude00"}', None),  # a whole pair: as it is
    (b'{"text":"\\\\ud83d"}', None),  # an escaped backslash, then letters
    (b'{"text":"plain"}', None),
    (b'{"text":"cut \\ud83d",', None),  # no JSON: left for the parser to refuse
])
def test_a_body_is_read_as_the_stdio_transport_reads_a_line(body, expected):
    from duckgraph.core.mcp.json_text import mended_body

    mended = mended_body(body)
    assert (mended.decode("utf-8") if mended is not None else None) == expected
