"""Requests to `duckgraph ui` crafted to break it: a JSON body nested past what a parser should follow (json.loads
exhausted Python's stack: a bare 500 and a traceback in the log), `?token=` login links whose path would make
the reload after the login leave for another site (an open redirect: browsers read "\\" as "/" and drop tabs), and
token forms whose fragment to return to is an address elsewhere, or would break the Location header.

Real parts: the UI as a child process on 127.0.0.1 over a real DuckDB file, raw HTTP requests (the paths exactly as
written). tests/e2e/test_ui_login_redirect_browser.py follows such a link in Chromium. The embedder is the hashing
fake of tests/fakes.py (nothing here depends on it).
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.test_ui_security import request
from tests.e2e.ui_server import child_env, running_ui
from tests.fakes import HashingEmbedder

TOKEN = "hostile-requests-token"


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "small.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0")


@pytest.fixture
def ui(small_db: Path, tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    with running_ui(small_db, tmp_path / "ui.log", {**env, "DUCKGRAPH_HTTP_TOKEN": TOKEN}) as url:
        yield url


def raw_post(url: str, path: str, body: bytes) -> tuple[int, Any]:
    """POST `body` as it is (not JSON made by the test), with the token; the status and the answer (its JSON when
    it is JSON)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                       "Content-Type": "application/json"})
        response = conn.getresponse()
        answer = response.read()
        try:
            return response.status, json.loads(answer)
        except ValueError:
            return response.status, answer
    finally:
        conn.close()


def nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


def test_a_body_nested_too_deeply_is_refused_as_such_and_changes_nothing(ui: str, tmp_path: Path) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, answer = raw_post(ui, "/api/tool/get_entities", b"[" * 100_000 + b"]" * 100_000)
    assert status == 400, answer
    assert set(answer) == {"error", "quoted"} and answer["quoted"] == []  # the API's error, as docs/ui.md gives it
    assert re.fullmatch(r'the request body must be a JSON object, \{"arguments": \{\.\.\.}, "namespace": \.\.\.}: '
                        r"recursion limit exceeded at line 1 column \d+ \(arrays and objects nested too deeply\); "
                        r"nothing was done", answer["error"]), answer
    # Deep enough to be read by json.loads, too deep for an answer: the tool ran (the entity changed) and then its
    # result could not be written, a 400 that hid a write. Refused before the tool now, as `serve --http` does.
    body = f'{{"arguments": {{"name": "Ada Lovelace", "properties": {nested(300)}}}}}'.encode()
    status, answer = raw_post(ui, "/api/tool/update_entity", body)
    assert status == 400 and "(arrays and objects nested too deeply); nothing was done" in answer["error"]
    status, _, entity = request(ui, "/api/entity?name=Ada%20Lovelace", headers=bearer)
    assert status == 200 and json.loads(entity)["entity"]["properties"] == {}
    # What MCP reads, the page's API reads.
    body = f'{{"arguments": {{"name": "Ada Lovelace", "properties": {nested(150)}}}}}'.encode()
    status, answer = raw_post(ui, "/api/tool/update_entity", body)
    assert status == 200 and answer["properties"] == json.loads(nested(150))
    for body, said in ((b"", "EOF while parsing a value"), (b'{"arguments": {}', "EOF while parsing an object"),
                       (b'"\xff"', "invalid unicode code point")):
        status, answer = raw_post(ui, "/api/tool/get_entities", body)
        assert status == 400 and said in answer["error"] and answer["quoted"] == [], body
    written = (tmp_path / "ui.log").read_text(encoding="utf-8")
    assert "Traceback" not in written and "RecursionError" not in written


#: Paths of `?token=` links, and the path the login reloads: always one of this server.
LINKS = (
    ("/%5Cattacker.example/landed", "/%5Cattacker.example/landed"),  # "/\attacker...": a browser's "//attacker..."
    ("/%5C%5Cattacker.example/", "/%5C%5Cattacker.example/"),
    ("/%09/attacker.example/", "/%09/attacker.example/"),  # a tab, which a browser drops: "//attacker..."
    ("/%0A/attacker.example/", "/%0A/attacker.example/"),
    ("/%0D%0A/attacker.example/", "/%0D%0A/attacker.example/"),
    ("/%20/attacker.example/", "/%20/attacker.example/"),
    ("//attacker.example/", "/attacker.example/"),
    ("/%2F%2Fattacker.example/", "/attacker.example/"),
    ("/%2F%5Cattacker.example/", "/%5Cattacker.example/"),
    ("/caf%C3%A9", "/caf%C3%A9"),  # not Latin-1: the header could not be written (a 500)
    ("/static/ui.css", "/static/ui.css"),
    ("/", "/"),
)


def test_the_token_link_reloads_a_path_of_this_server(ui: str) -> None:
    for path, reloaded in LINKS:
        status, headers, _ = request(ui, f"{path}?token={TOKEN}&ns=work")
        assert (status, headers.get("location")) == (303, f"{reloaded}?ns=work"), path
        assert "set-cookie" in headers, path


#: The fragments a token form may post, and the address its login returns to: "/" and that fragment, escaped.
FRAGMENTS = (
    ("#/entity?name=Ada+Lovelace", "/#/entity?name=Ada+Lovelace"),
    ("#/entity?name=Zo%C3%AB&ns=work", "/#/entity?name=Zo%C3%AB&ns=work"),  # the page's escapes, not escaped again
    ("#/entity?name=Zoë", "/#/entity?name=Zo%C3%AB"),  # not Latin-1: the header could not be written (a 500)
    ("#\\attacker.example/", "/#%5Cattacker.example/"),
    ("#\r\nSet-Cookie: forged=1", "/#%0D%0ASet-Cookie:%20forged=1"),  # no header of its own
    ("#", "/#"),
    ("", "/"),
)
#: What is no fragment: refused, nobody logged in.
NOT_FRAGMENTS = ("//attacker.example/", "/\\attacker.example", "http://attacker.example/", "javascript:alert(1)",
                 "/#/entity", " #/entity")


def test_the_token_form_returns_to_a_fragment_of_this_page(ui: str) -> None:
    for fragment, returned in FRAGMENTS:
        status, headers, _ = request(ui, "/login", method="POST", form={"token": TOKEN, "fragment": fragment})
        assert (status, headers.get("location")) == (303, returned), fragment
        assert "set-cookie" in headers and "forged" not in headers["set-cookie"], fragment
    for fragment in NOT_FRAGMENTS:
        status, headers, body = request(ui, "/login", method="POST", form={"token": TOKEN, "fragment": fragment})
        assert status == 400 and b"fragment is empty or starts with '#'" in body, fragment
        assert "location" not in headers and "set-cookie" not in headers, fragment
    # A wrong token: the page asks again, its form keeping the fragment posted (escaped as HTML).
    status, _, body = request(ui, "/login", method="POST", form={"token": "wrong", "fragment": '#/"><b>x'})
    assert status == 401 and b'name=fragment value="#/&quot;&gt;&lt;b&gt;x"' in body
