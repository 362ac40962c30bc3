"""Who may use `duckgraph ui`, and how its API answers mistakes: the same rules as `serve --http` (loopback
unless there is a token; the token as a bearer header, or as the cookie that logging in sets: by the printed
address or the "token needed" form), Host and Origin checks against DNS rebinding and cross-site requests, headers
that forbid framing (clickjacking), a token never in the log, and clear errors that change nothing.

Real parts: the UI as a child process on 127.0.0.1 over a real DuckDB file, plain HTTP requests with the headers
a hostile page or a rebinding DNS name would send. The embedder is the hashing fake of tests/fakes.py (what is
checked here does not depend on it).
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import EdgeInput, NodeInput
from duckgraph.core.ui.security import CONTENT_SECURITY_POLICY, COOKIE_SECONDS, LOGIN_BODY_LIMIT, allowed_hosts
from duckgraph.plugins.duckdb import DuckDBStore
from tests.e2e.ui_server import UI, child_env, running_ui
from tests.fakes import HashingEmbedder


@pytest.fixture
def small_db(tmp_path: Path) -> Path:
    path = tmp_path / "small.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person"),
                                NodeInput(name="Analytical Engine", type="Machine")],
                               [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="WROTE_ABOUT")])
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home", fake_embedder=True, DUCKGRAPH_WARM_UP="0")


def request(url: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
            body: Any = None, form: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request with exactly these headers (Host included when given), answered as (status, headers, body).
    `body` is sent as JSON, `form` as a browser's form sends it."""
    status, headers_, answer = request_all(url, path, method=method, headers=headers, body=body, form=form)
    return status, {name: values[-1] for name, values in headers_.items()}, answer


def request_all(url: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None,
                body: Any = None, form: dict[str, str] | None = None) -> tuple[int, dict[str, list[str]], bytes]:
    """`request`, with every value of each header (a header sent twice shows)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        data, sent = None, {}
        if body is not None:
            data, sent = json.dumps(body).encode(), {"content-type": "application/json"}
        elif form is not None:
            data, sent = urllib.parse.urlencode(form).encode(), {"content-type": "application/x-www-form-urlencoded"}
        conn.request(method, path, body=data, headers={**sent, **(headers or {})})
        response = conn.getresponse()
        every: dict[str, list[str]] = {}
        for name, value in response.getheaders():
            every.setdefault(name.lower(), []).append(value)
        return response.status, every, response.read()
    finally:
        conn.close()


@pytest.fixture
def ui(small_db: Path, tmp_path: Path, env: dict[str, str]) -> Iterator[str]:
    with running_ui(small_db, tmp_path / "ui.log", env) as url:
        yield url


def test_listening_beyond_loopback_needs_a_token(small_db: Path, env: dict[str, str]) -> None:
    done = subprocess.run([*UI, "--db", str(small_db), "--host", "0.0.0.0", "--port", "0"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "refusing to listen on 0.0.0.0 without a token" in done.stderr


def test_a_port_in_use_is_named_with_what_to_do(small_db: Path, env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([*UI, "--db", str(small_db), "--port", str(port)], env=env, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 1
    assert f"port {port} is in use" in done.stderr and "choose another with --port" in done.stderr
    assert "MCP" not in done.stderr  # the web UI's words, not those of `serve --http`


def test_foreign_hosts_and_origins_are_refused(ui: str) -> None:
    port = urllib.parse.urlsplit(ui).port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        assert request(ui, "/", headers={"Host": host})[0] == 200
    # A page of another site whose name was made to resolve to 127.0.0.1 sends its own name as Host.
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1:{port + 1}"):
        status, _, body = request(ui, "/api/overview", headers={"Host": host})
        assert status == 421 and b"does not answer for the host" in body
    # Another site's script may send requests to 127.0.0.1; its Origin gives it away, and nothing is run.
    status, _, body = request(ui, "/api/tool/delete_entities", method="POST",
                              headers={"Origin": "http://attacker.example"},
                              body={"arguments": {"names": ["Ada Lovelace"]}})
    assert status == 403 and b"not allowed" in body
    status, _, body = request(ui, "/api/entity?name=Ada%20Lovelace", headers={"Origin": f"http://127.0.0.1:{port}"})
    assert status == 200 and json.loads(body)["entity"]["name"] == "Ada Lovelace"


def test_a_token_guards_every_request(small_db: Path, tmp_path: Path, env: dict[str, str]) -> None:
    with running_ui(small_db, tmp_path / "ui.log", env, "--token", "s3cret-token") as url:
        assert url.endswith("/?token=s3cret-token")  # given on the command line: printed to open the page
        status, headers, body = request(url, "/api/overview")
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        status, _, body = request(url, "/")  # a person is asked for it, in a form that posts it (not in the address)
        assert status == 401 and b'name=token' in body and b"<form method=post action=/login>" in body
        assert request(url, "/?token=wrong")[0] == 401
        assert request(url, "/api/overview", headers={"Authorization": "Bearer wrong"})[0] == 401
        assert request(url, "/api/overview", headers={"Authorization": "Bearer s3cret-token"})[0] == 200
        # The printed address: kept in a cookie no script reads, and the address reloaded without it.
        status, headers, _ = request(url, "/?token=s3cret-token")
        assert status == 303 and headers["location"] == "/"
        cookie = headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "s3cret-token" not in cookie
        assert request(url, "/api/overview", headers={"Cookie": cookie.split(";")[0]})[0] == 200
        assert request(url, "/api/overview", headers={"Cookie": "duckgraph_ui_token=forged"})[0] == 401
        # Other parameters of the address are kept; the token is not.
        status, headers, _ = request(url, "/?token=s3cret-token&ns=work")
        assert status == 303 and headers["location"] == "/?ns=work"

        # The form's login: the token in the body, the same cookie, the page without the token in its address.
        status, headers, _ = request(url, "/login", method="POST", form={"token": "s3cret-token"})
        assert status == 303 and headers["location"] == "/" and "s3cret-token" not in headers["set-cookie"]
        assert request(url, "/api/overview", headers={"Cookie": headers["set-cookie"].split(";")[0]})[0] == 200
        status, headers, body = request(url, "/login", method="POST", form={"token": "wrong"})
        assert status == 401 and "set-cookie" not in headers and b"That token is not this server" in body
        status, headers, body = request(url, "/login", method="POST", form={"token": "x" * (LOGIN_BODY_LIMIT + 1)})
        assert status == 413 and f"at most {LOGIN_BODY_LIMIT} bytes".encode() in body and "set-cookie" not in headers
        # The token page's script is all that it serves without the token; the page's own files need it.
        assert request(url, "/static/login.js")[0] == 200 and request(url, "/static/main.js")[0] == 401
        # Another site's page cannot post it (nor log a browser in to its own choice of server).
        port = urllib.parse.urlsplit(url).port
        status, headers, _ = request(url, "/login", method="POST", form={"token": "s3cret-token"},
                                     headers={"Origin": "http://attacker.example"})
        assert status == 403 and "set-cookie" not in headers
        status, headers, _ = request(url, "/login", method="POST", form={"token": "s3cret-token"},
                                     headers={"Origin": f"http://127.0.0.1:{port}"})
        assert status == 303 and "set-cookie" in headers
        status, headers, _ = request(url, "/login")  # the form's address, reloaded: the page
        assert status == 303 and headers["location"] == "/" and "set-cookie" not in headers


def login_cookie(url: str, token: str) -> tuple[str, str]:
    """The Set-Cookie header that logging in with `token` answers, and the `name=value` a browser sends back."""
    status, headers, _ = request(url, "/login", method="POST", form={"token": token})
    assert status == 303, status
    return headers["set-cookie"], headers["set-cookie"].split(";")[0]


def test_a_login_cookie_is_worth_nothing_to_another_run_and_expires(small_db: Path, tmp_path: Path,
                                                                    env: dict[str, str]) -> None:
    """Cookies are sent to every port of a host: a cookie that another service on it received must not be a lasting
    credential. Its value is no function of the token (each run makes its own), and it expires."""
    token_env = {**env, "DUCKGRAPH_HTTP_TOKEN": "same-token-both-runs"}
    with running_ui(small_db, tmp_path / "first.log", token_env) as url:
        first_header, first = login_cookie(url, "same-token-both-runs")
        assert request(url, "/api/overview", headers={"Cookie": first})[0] == 200
    with running_ui(small_db, tmp_path / "second.log", token_env) as url:
        second_header, second = login_cookie(url, "same-token-both-runs")
        assert first != second  # not derived from the token alone
        assert request(url, "/api/overview", headers={"Cookie": first})[0] == 401  # the last run's: refused
        assert request(url, "/api/tool/delete_entities", method="POST", headers={"Cookie": first},
                       body={"arguments": {"names": ["Ada Lovelace"]}})[0] == 401
        assert request(url, "/api/overview", headers={"Cookie": second})[0] == 200
        attributes = [part.strip() for part in second_header.split(";")[1:]]
        assert f"Max-Age={COOKIE_SECONDS}" in attributes and COOKIE_SECONDS == 12 * 3600
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= set(attributes)
        # A cookie whose expiry was moved on keeps no valid signature.
        name, _, value = second.partition("=")
        expires, _, signature = value.partition(".")
        moved = f"{name}={int(expires) + 3600}.{signature}"
        assert request(url, "/api/overview", headers={"Cookie": moved})[0] == 401


def test_the_log_never_shows_the_token(small_db: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """At DEBUG uvicorn logs every request with its address: a login by the printed address must not put the token
    there (a token from the environment is never printed, so any trace of it in the output is a leak)."""
    token = "token-that-must-stay-out-of-logs"
    log = tmp_path / "ui.log"
    with running_ui(small_db, log, {**env, "DUCKGRAPH_HTTP_TOKEN": token}, "--log-level", "DEBUG") as url:
        assert request(url, f"/?token={token}")[0] == 303
        assert request(url, f"/?ns=work&to%6Ben={token}")[0] == 303  # the name encoded: still the token
        assert request(url, f"/?token={token}-wrong")[0] == 401
        assert request(url, "/login", method="POST", form={"token": token})[0] == 303
    written = log.read_text(encoding="utf-8")
    assert '"GET /?token=[hidden] HTTP/1.1" 303' in written  # the access log is on, the value hidden
    assert '"GET /?ns=work&to%6Ben=[hidden] HTTP/1.1" 303' in written
    assert '"POST /login HTTP/1.1" 303' in written
    assert token not in written


def assert_unframeable(headers: dict[str, list[str]], what: str) -> None:
    assert headers.get("x-frame-options") == ["DENY"], (what, headers)
    assert len(headers.get("content-security-policy", [])) == 1, (what, headers)
    assert "frame-ancestors 'none'" in headers["content-security-policy"][0], (what, headers)


def test_no_response_may_be_framed_by_another_page(small_db: Path, tmp_path: Path, env: dict[str, str]) -> None:
    """Clickjacking: another site's page shows the UI in a frame (transparent, over a decoy) and the user's clicks
    on it curate the memory. Every response forbids it, the page's, its files', the API's and each refusal's."""
    with running_ui(small_db, tmp_path / "ui.log", {**env, "DUCKGRAPH_HTTP_TOKEN": "frame-token"}) as url:
        port = urllib.parse.urlsplit(url).port
        bearer = {"Authorization": "Bearer frame-token"}
        for what, path, method, headers, form, expected in (
                ("the page", "/", "GET", bearer, None, 200),
                ("a static file", "/static/main.js", "GET", bearer, None, 200),
                ("a missing static file", "/static/nothing.js", "GET", bearer, None, 404),
                ("an API answer", "/api/overview", "GET", bearer, None, 200),
                ("an API error", "/api/entity?name=Nobody", "GET", bearer, None, 404),
                ("an unknown address", "/nowhere", "GET", bearer, None, 404),
                ("the token page", "/", "GET", {}, None, 401),
                ("the token page's script", "/static/login.js", "GET", {}, None, 200),
                ("a refused API call", "/api/overview", "GET", {}, None, 401),
                ("the login", "/login", "POST", {}, {"token": "frame-token"}, 303),
                ("a refused login", "/login", "POST", {}, {"token": "wrong"}, 401),
                ("a foreign host", "/", "GET", {"Host": f"attacker.example:{port}"}, None, 421),
                ("a foreign origin", "/api/overview", "GET", {**bearer, "Origin": "http://attacker.example"}, None,
                 403)):
            status, answer, _ = request_all(url, path, method=method, headers=headers, form=form)
            assert status == expected, (what, status)
            assert_unframeable(answer, what)
        # The page's own policy: only its own scripts, styles and server.
        _, answer, _ = request_all(url, "/", headers=bearer)
        assert answer["content-security-policy"] == [CONTENT_SECURITY_POLICY]
        assert "default-src 'self'" in CONTENT_SECURITY_POLICY and "script-src 'self';" in CONTENT_SECURITY_POLICY


def test_a_configured_token_is_required_and_not_printed(small_db: Path, tmp_path: Path, env: dict[str, str]) -> None:
    with running_ui(small_db, tmp_path / "ui.log", {**env, "DUCKGRAPH_HTTP_TOKEN": "from-the-env"}) as url:
        assert "token" not in url
        assert request(url, "/api/overview")[0] == 401
        assert request(url, "/api/overview", headers={"Authorization": "Bearer from-the-env"})[0] == 200


def test_the_api_answers_mistakes_clearly_and_changes_nothing(ui: str) -> None:
    status, _, body = request(ui, "/api/entity?name=Nobody")
    assert status == 404 and "no entity named 'Nobody'" in json.loads(body)["error"]
    status, _, body = request(ui, "/api/tool/add_documents", method="POST", body={"arguments": {}})
    assert status == 404 and "not available" in json.loads(body)["error"]
    status, _, body = request(ui, "/api/tool/update_entity", method="POST", body=["not", "an", "object"])
    assert status == 400
    status, _, body = request(ui, "/api/tool/merge_entities", method="POST",
                              body={"arguments": {"sources": ["Nobody"], "target": "Ada Lovelace"}})
    assert status == 400 and "no entity named 'Nobody'" in json.loads(body)["error"]  # the tool's own error
    status, _, body = request(ui, "/api/tool/update_entity", method="POST",
                              body={"arguments": {"name": "Ada Lovelace", "new_name": ""}})
    assert status == 400 and json.loads(body)["error"] == "new_name: must not be empty"
    # Refused arguments are said per field in a few words, not as pydantic's dump (types, echoed input, links).
    for name, arguments, said in (
            ("update_entity", {"name": "Ada Lovelace", "type": "", "properties": [1, 2]},
             "type: must not be empty; properties: must be a JSON object"),
            ("update_entity", {"name": "Ada Lovelace", "add_observations": ["x" * 4001]},
             "add_observations[0]: may have at most 4,000 characters (this one has 4,001)"),
            ("end_relations", {"relations": [{"source": "Ada Lovelace", "target": "Analytical Engine",
                                              "type": "WROTE_ABOUT", "ended_at": "yesterday"}]},
             "relations[0].ended_at: 'yesterday' is not an ISO 8601 date")):
        status, _, body = request(ui, f"/api/tool/{name}", method="POST", body={"arguments": arguments})
        assert status == 400 and json.loads(body)["error"].startswith(said)
    for query, said in (("q=", "query: must not be empty"), ("q=engine&hops=9", "hops: must be at most 3"),
                        ("q=engine&max_nodes=0", "max_nodes: must be at least 1")):
        status, _, body = request(ui, f"/api/search?{query}")
        assert status == 400 and json.loads(body)["error"] == said
    status, _, body = request(ui, "/api/search?q=engine&max_nodes=many")
    assert status == 400 and "max_nodes must be a whole number" in json.loads(body)["error"]
    status, _, body = request(ui, "/api/search?q=engine&include_history=yes")
    assert status == 400 and "include_history must be true or false" in json.loads(body)["error"]
    status, _, body = request(ui, "/api/search?q=engine&as_of=yesterday")
    assert status == 400 and json.loads(body)["error"].startswith("as_of: 'yesterday' is not an ISO 8601")
    status, _, body = request(ui, "/api/community?id=12345")
    assert status == 404 and "no community 12345" in json.loads(body)["error"]
    status, _, body = request(ui, "/api/communities?level=first")
    assert status == 400 and "level must be a whole number" in json.loads(body)["error"]
    assert json.loads(request(ui, "/api/communities")[2])["communities"] == []  # none built
    entity = json.loads(request(ui, "/api/entity?name=Ada%20Lovelace")[2])["entity"]
    assert entity["name"] == "Ada Lovelace" and len(entity["relations"]) == 1


def test_a_command_refused_the_file_the_ui_holds_names_the_ui(ui: str, small_db: Path, env: dict[str, str]) -> None:
    """Not "another program" (the lock error's view), nor "a duckgraph server (an MCP client's)": the web UI."""
    assert request(ui, "/api/overview")[0] == 200  # the UI opens the file on first use
    owner = json.loads(small_db.with_name(small_db.name + ".lock").read_text())["pid"]
    stats = subprocess.run([*UI[:-1], "stats", "--db", str(small_db)], env=env, capture_output=True, text=True,
                           timeout=120)
    assert stats.returncode == 1
    assert stats.stderr == (f"duckgraph: {small_db} is in use by the duckgraph web UI (`duckgraph ui`, pid {owner}): "
                            "use the memory in that page, or stop it. `duckgraph doctor` and `duckgraph backup` work "
                            "while it runs.\n")


def test_allowed_hosts() -> None:
    assert allowed_hosts("127.0.0.1", 8766) == {"127.0.0.1:8766", "localhost:8766", "[::1]:8766"}
    assert allowed_hosts("::1", 8766) == {"[::1]:8766", "127.0.0.1:8766", "localhost:8766"}
    assert allowed_hosts("192.168.1.5", 8766) == {"192.168.1.5:8766"}
    assert allowed_hosts("0.0.0.0", 8766) is None  # every address: the token guards it
