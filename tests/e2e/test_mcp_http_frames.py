"""`duckgraph serve --http` forbids framing on every response (X-Frame-Options and CSP frame-ancestors): nothing it
serves belongs in another site's page. The real server process on a real port, as tests/e2e/test_mcp_http.py starts
it; no call here loads the model."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_mcp_http import INITIALIZE, MCP_HEADERS, TOKEN, Served, child_env, start  # noqa: F401 (fixture)


@pytest.fixture
def token_server(tmp_path, child_env) -> Iterator[Served]:  # noqa: F811
    yield from start(tmp_path, {**child_env, "DUCKGRAPH_HTTP_TOKEN": TOKEN})


def test_every_response_forbids_framing(token_server: Served) -> None:
    bearer = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(timeout=30) as http:
        answers = {
            "refused without the token": http.post(token_server.url, json=INITIALIZE, headers=MCP_HEADERS),
            "an unknown path": http.get(token_server.url.replace("/mcp", "/other"), headers=bearer),
            "a session started": http.post(token_server.url, json=INITIALIZE, headers={**MCP_HEADERS, **bearer}),
        }
    assert [answer.status_code for answer in answers.values()] == [401, 404, 200]
    for what, answer in answers.items():
        assert answer.headers.get_list("x-frame-options") == ["DENY"], what
        assert answer.headers.get_list("content-security-policy") == ["frame-ancestors 'none'"], what
