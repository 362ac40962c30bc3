"""Who may use the web UI: the rules of `serve --http` (core/mcp/http.py: loopback unless there is a token, the
bearer-token check) for a browser, which sends no Authorization header of its own, and the Host, Origin and framing
checks that keep other web sites out (DNS rebinding, cross-site requests, clickjacking)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import time
from html import escape
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, quote, urlencode

from duckgraph.core.mcp.http import BearerTokenMiddleware, Receive, Scope, Send, is_loopback, with_headers

COOKIE = "duckgraph_ui_token"
#: How long a browser stays logged in: the cookie's Max-Age, and checked by the server too (a copied cookie
#: replayed later is refused).
COOKIE_SECONDS = 12 * 3600
#: Where the "token needed" page's form posts the token: in a body, never in an address (history, logs).
LOGIN_PATH = "/login"
#: The most a login form's body may hold: a token and the view to return to (a search's 2,000 characters,
#: percent-encoded by the page, then by the form, among the longest).
LOGIN_BODY_LIMIT = 64 * 1024
#: The login form's field with the address's fragment (the view asked for: `#/entity?name=...`), which a browser
#: never sends to the server: the token page's script (LOGIN_SCRIPT) copies it there, for the login to return to.
FRAGMENT_FIELD = "fragment"
#: The token page's script: served without the token, which that page asks for (it holds nothing secret).
LOGIN_SCRIPT = "/static/login.js"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: The characters of a path that the address a `?token=` login reloads keeps as they are (RFC 3986's, with
#: letters, digits and "-._~", which `quote` always keeps); every other is percent-encoded.
_PATH_AS_IS = "/:@!$&'()*+,;="
#: The same for a fragment, which may also hold "?", and "%" as it is: the page's own escapes, not to be escaped again.
_FRAGMENT_AS_IS = _PATH_AS_IS + "?%"
#: Sent with every response of the UI. frame-ancestors, and X-Frame-Options for browsers that predate it: no other
#: page may show the UI in a frame, where a decoy gets its buttons clicked (clickjacking). The rest: the page runs
#: only its own scripts and style sheet and talks only to this server, so injected markup could load or send
#: nothing. Style attributes stay allowed: the page colours type badges with them (static/dom.js).
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = ((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()), (b"x-frame-options", b"DENY"))


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
    request made by a page) is not this server itself. Every response it passes on, those included, carries
    PAGE_HEADERS."""

    def __init__(self, app, hosts: set[str] | None) -> None:
        self.app = app
        self.hosts = None if hosts is None else {h.lower() for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            send = with_headers(send, PAGE_HEADERS, replace=True)  # one policy: this one
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
    """The bearer-token check, also satisfied by a login cookie, so that a browser can use the UI. The token logs
    a browser in when posted by the "token needed" page's form (to LOGIN_PATH) or given in the address as
    `?token=...` (what `duckgraph ui` prints); the address is then reloaded without it. Either way the browser
    returns to the view it asked for: the form posts the address's fragment, and a redirect without one keeps the
    fragment the browser had.

    The cookie's value is the expiry time signed with a key made at start, never derived from the token: a cookie
    that leaked (cookies are sent to every port of the host) is worthless after COOKIE_SECONDS or once the UI
    restarts, and restarting logs every browser out."""

    def __init__(self, app, token: str) -> None:
        super().__init__(app, token)
        self._key = secrets.token_bytes(32)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if scope.get("path") == LOGIN_PATH:
                await self._login_form(scope, receive, send)
                return
            given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            if given and scope.get("method") == "GET":
                if hmac.compare_digest(given[0].encode(), self._token):
                    await _redirect(send, _address_without_token(scope), self._new_cookie())
                else:
                    await _token_page(send, "That token is not this server's.")
                return
            if not self._authorized(scope) and scope.get("path") == "/":
                await _token_page(send, "")
                return
            if scope.get("path") == LOGIN_SCRIPT:  # the token page's own script, needed before the login
                await self.app(scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _login_form(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":  # an address typed or reloaded: the page, which asks when it must
            await _redirect(send, "/")
            return
        body = await _body(receive, LOGIN_BODY_LIMIT)
        if body is None:
            await _plain(send, 413, f"a login form's body has at most {LOGIN_BODY_LIMIT} bytes")
            return
        fields = parse_qs(body.decode("utf-8", "replace"))
        fragment = fields.get(FRAGMENT_FIELD, [""])[0]
        if fragment and not fragment.startswith("#"):  # only a fragment of this page, never an address elsewhere
            await _plain(send, 400, f"a login form's {FRAGMENT_FIELD} is empty or starts with '#', not {fragment!r}")
            return
        given = fields.get("token")
        if given and hmac.compare_digest(given[0].encode(), self._token):
            await _redirect(send, "/" + _fragment(fragment), self._new_cookie())
        else:  # the page of /login's answer has no fragment of its own: it keeps the one posted
            await _token_page(send, "That token is not this server's.", fragment)

    def _authorized(self, scope: Scope) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(_headers(scope).get("cookie", ""))
        except Exception:  # a malformed cookie header authorizes nothing
            return super()._authorized(scope)
        morsel = cookie.get(COOKIE)
        if morsel is not None and self._valid_cookie(morsel.value):
            return True
        return super()._authorized(scope)

    def _new_cookie(self) -> str:
        expires = str(int(time.time()) + COOKIE_SECONDS)
        return f"{expires}.{self._signature(expires)}"

    def _valid_cookie(self, value: str) -> bool:
        expires, _, signature = value.partition(".")
        return (hmac.compare_digest(signature.encode(), self._signature(expires).encode())
                and expires.isdigit() and int(expires) > time.time())

    def _signature(self, expires: str) -> str:
        return hmac.new(self._key, expires.encode(), hashlib.sha256).hexdigest()


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", ())}


def _address_without_token(scope: Scope) -> str:
    rest = {k: v for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items() if k != "token"}
    # A path of this server, whatever the address held: one leading slash ("//host" is another site), and every
    # character but those a path keeps as they are percent-encoded, since browsers read "\" as "/" and drop tabs
    # and line breaks ("/\host" and "/<tab>/host" would be "//host" too).
    path = quote(scope.get("path", "/").lstrip("/"), safe=_PATH_AS_IS)
    return "/" + path + (f"?{urlencode(rest, doseq=True)}" if rest else "")


def _fragment(fragment: str) -> str:
    """`fragment` ("#..." or empty) as the end of an address: every character a fragment does not hold as it is
    percent-encoded, so that no line break ends the Location header and the address stays plain ASCII."""
    return "#" + quote(fragment[1:], safe=_FRAGMENT_AS_IS) if fragment else ""


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None when it is over `limit` bytes."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return body


async def _redirect(send: Send, location: str, cookie: str | None = None) -> None:
    """Send the browser on to `location` (303: as a GET), with `cookie` as the login: a cookie only this site's
    pages send (SameSite=Strict), no script reads (HttpOnly) and the browser drops after COOKIE_SECONDS."""
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0"), (b"cache-control", b"no-store")]
    if cookie is not None:
        headers.append((b"set-cookie", f"{COOKIE}={cookie}; Path=/; Max-Age={COOKIE_SECONDS}; HttpOnly; "
                                       "SameSite=Strict".encode()))
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _token_page(send: Send, problem: str, fragment: str = "") -> None:
    """The "token needed" page, its form with the fragment to return to: `fragment`, or the page address's own
    (filled in by LOGIN_SCRIPT; without scripts the login returns to the start page)."""
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><title>duckgraph: token needed</title>"
        "<body style='font-family:sans-serif;max-width:40em;margin:4em auto'><h1>duckgraph</h1>"
        f"<p>{escape(problem)} This UI needs its token: open the address that <code>duckgraph ui</code> printed, "
        "or enter the token (DUCKGRAPH_HTTP_TOKEN) here.</p>"
        f"<form method=post action={LOGIN_PATH}>"
        f"<input type=hidden name={FRAGMENT_FIELD} value=\"{escape(fragment)}\">"
        "<input type=password name=token autofocus aria-label=token> <button>Open</button></form>"
        f"<script src={LOGIN_SCRIPT}></script></body></html>"
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
