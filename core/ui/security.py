"""Who may use the web UI: the rules of `serve --http` (core/mcp/http.py: loopback unless there is a token, the
bearer-token check) for a browser, which sends no Authorization header of its own, and the Host and Origin checks
that keep other web sites out (DNS rebinding, cross-site requests)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from html import escape
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode

from duckgraph.core.mcp.http import BearerTokenMiddleware, Receive, Scope, Send, is_loopback

COOKIE = "duckgraph_ui_token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """The Host headers the UI answers, or None (any) when it listens on every address (0.0.0.0, ::), where
    the token guards it. On a loopback address: only loopback names, so a web page whose name was made to
    resolve to 127.0.0.1 (DNS rebinding) is refused."""
    bare = host.strip().strip("[]")
    try:
        if ipaddress.ip_address(bare).is_unspecified:
            return None
    except ValueError:
        pass
    authority = f"[{bare}]" if ":" in bare else bare
    names = {authority, *LOOPBACK_NAMES} if is_loopback(bare) else {authority}
    return {f"{name}:{port}" for name in names} | ({authority} if port == 80 else set())


class HostOriginMiddleware:
    """Answers 421 to a request whose Host is not one of `hosts`, and 403 to one whose Origin (a browser's
    request made by a page) is not this server itself."""

    def __init__(self, app, hosts: set[str] | None) -> None:
        self.app = app
        self.hosts = None if hosts is None else {h.lower() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = _headers(scope)
            host = headers.get("host", "").lower()
            if self.hosts is not None and host not in self.hosts:
                await _plain(send, 421, f"this duckgraph UI does not answer for the host {host!r}")
                return
            origin = headers.get("origin")
            if origin is not None and origin.lower() != f"http://{host}":
                await _plain(send, 403, f"requests from {origin!r} are not allowed")
                return
        await self.app(scope, receive, send)


class BrowserTokenMiddleware(BearerTokenMiddleware):
    """The bearer-token check, also satisfied by the cookie that opening the UI with `?token=...` sets (the
    address `duckgraph ui` prints), so that a browser can use it. Without it, a page asks for the token."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            if given and scope.get("method") == "GET":
                if hmac.compare_digest(given[0].encode(), self._token):
                    await _login(scope, send, self._token)
                else:
                    await _token_page(send, "That token is not this server's.")
                return
            if not self._authorized(scope) and scope.get("path") == "/":
                await _token_page(send, "")
                return
        await super().__call__(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(_headers(scope).get("cookie", ""))
        except Exception:  # a malformed cookie header authorizes nothing
            return super()._authorized(scope)
        morsel = cookie.get(COOKIE)
        if morsel is not None and hmac.compare_digest(morsel.value.encode(), _cookie_value(self._token)):
            return True
        return super()._authorized(scope)


def _cookie_value(token: bytes) -> bytes:
    # Derived from the token rather than the token itself: any token then makes a valid cookie value.
    return hashlib.sha256(b"duckgraph-ui:" + token).hexdigest().encode()


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", ())}


async def _login(scope: Scope, send: Send, token: bytes) -> None:
    """Keep the token in a cookie only this site's pages send (SameSite=Strict) and no script reads (HttpOnly),
    and reload the page without it in the address."""
    rest = {k: v for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items() if k != "token"}
    # One leading slash: "//host" would send the browser to another site.
    location = "/" + scope.get("path", "/").lstrip("/") + (f"?{urlencode(rest, doseq=True)}" if rest else "")
    await send({"type": "http.response.start", "status": 303, "headers": [
        (b"location", location.encode("latin-1")), (b"content-length", b"0"), (b"cache-control", b"no-store"),
        (b"set-cookie", f"{COOKIE}={_cookie_value(token).decode()}; Path=/; HttpOnly; SameSite=Strict".encode()),
    ]})
    await send({"type": "http.response.body", "body": b""})


async def _token_page(send: Send, problem: str) -> None:
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><title>duckgraph: token needed</title>"
        "<body style='font-family:sans-serif;max-width:40em;margin:4em auto'><h1>duckgraph</h1>"
        f"<p>{escape(problem)} This UI needs its token: open the address that <code>duckgraph ui</code> printed, "
        "or enter the token (DUCKGRAPH_HTTP_TOKEN) here.</p><form method=get action=/>"
        "<input type=password name=token autofocus aria-label=token> <button>Open</button></form></body></html>"
    ).encode()
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="duckgraph"'), (b"cache-control", b"no-store"),
    ]})
    await send({"type": "http.response.body", "body": body})


async def _plain(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
    ]})
    await send({"type": "http.response.body", "body": body})
