"""Serving over HTTP: where the server may listen, and the bearer-token check in front of the MCP app.

Kept apart from core/mcp/transports.py (which serves the MCP app over HTTP): nothing here knows about MCP, it
wraps any ASGI application.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote_plus

from duckgraph.core.mcp.json_text import mended_body, refusal, request_id
from duckgraph.ports import ConfigError

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MCP_PATH = "/mcp"
#: Sent with every response `run_asgi` serves, unless the app sets these headers itself (the web UI sends a whole
#: policy): nothing duckgraph serves belongs in another site's frame, where a decoy gets its buttons clicked
#: (clickjacking). X-Frame-Options for browsers that predate frame-ancestors.
FRAME_HEADERS = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"))


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach: 127.0.0.0/8, ::1 and the name localhost."""
    host = host.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # any other name may resolve to an address others can reach
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a token: the knowledge base would be open to the network."""
    if not host.strip():
        raise ConfigError("--host is empty; give an address such as 127.0.0.1")
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to listen on {host} without a token: anyone who can reach this address could read and "
            "change the knowledge base. Set a bearer token (DUCKGRAPH_HTTP_TOKEN or http_token in the config "
            f"file) or listen on 127.0.0.1 only (the default)."
        )


class BearerTokenMiddleware:
    """An ASGI middleware that answers 401 to every HTTP request without `Authorization: Bearer <token>`.

    Lifespan events pass through untouched, so the wrapped app still starts and stops its sessions.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("the token must not be empty")
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self._authorized(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await _unauthorized(send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        values = [value for name, value in scope.get("headers", ()) if name.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, credentials = values[0].strip().partition(b" ")
        # The scheme is case-insensitive (RFC 7235); the token is compared in constant time.
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._token)


async def _unauthorized(send: Send) -> None:
    body = json.dumps({"error": "unauthorized",
                       "error_description": "send the server's token as 'Authorization: Bearer <token>'"}).encode()
    await send({
        "type": "http.response.start",
        "status": 401,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b'Bearer realm="duckgraph"'),
        ],
    })
    await send({"type": "http.response.body", "body": body})


class FrameDenyMiddleware:
    """Adds FRAME_HEADERS to every HTTP response that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        await self.app(scope, receive, with_headers(send, FRAME_HEADERS, replace=False))


def with_headers(send: Send, headers: tuple[tuple[bytes, bytes], ...], *, replace: bool) -> Send:
    """`send`, giving each response `headers` (lower-case names): in place of any of those names the app sent
    (`replace`), or only those it did not send."""
    names = {name for name, _ in headers}

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            sent = list(message.get("headers", ()))
            present = {name.lower() for name, _ in sent}
            kept = [(n, v) for n, v in sent if n.lower() not in names] if replace else sent
            added = list(headers) if replace else [h for h in headers if h[0] not in present]
            message = {**message, "headers": [*kept, *added]}
        await send(message)

    return sending


class TokenlessAccessLog(logging.Filter):
    """Hides the value of a `token` query parameter in uvicorn's access log lines: the web UI's printed address
    (`/?token=...`) logs a browser in, and a log is read by more people, and kept longer, than the token should be.
    The name is compared decoded (`to%6Ben=` is `token=` to the server, too)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_without_token(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def _without_token(text: str) -> str:
    path, mark, query = text.partition("?")
    if not mark:
        return text
    pairs = [pair if unquote_plus(pair.partition("=")[0]) != "token" else f"{pair.partition('=')[0]}=[hidden]"
             for pair in query.split("&")]
    return f"{path}?{'&'.join(pairs)}"


class BodyLimitMiddleware:
    """Gives the 413 that the wrapped app (the MCP SDK's body limit) answers to an oversized request a body that
    says so: a JSON-RPC error naming the limit, which MCP clients show (a bare 413 reads as "Server returned an
    error response")."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False
        body_read = False

        async def receive_noted() -> Message:
            nonlocal body_read
            message = await receive()
            body_read = body_read or message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def send_clear(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                # Read the rest of the body first: a client still sending it reads no answer from a connection
                # closed under it (it reports the reset, not the 413). A body read whole has no rest to wait for.
                if not body_read:
                    await _discard_body(receive, 16 * self.limit)
                await _json_rpc_error(send, 413, -32600, self._too_large(scope))
            elif not replaced:
                await send(message)

        await self.app(scope, receive_noted, send_clear)

    def _too_large(self, scope: Scope) -> str:
        declared = _declared_length(scope)
        size = f"{declared} bytes" if declared is not None else "over the limit"
        return (f"request body too large: {size}; this server accepts at most {self.limit} bytes "
                f"({self.limit / 1e6:g} MB) per HTTP request. Split the call into smaller ones")


class MendingMiddleware:
    """Passes a POST body with a lone UTF-16 surrogate escape or bytes that are not UTF-8 on with U+FFFD in their
    place (`json_text.mended_body`), as the stdio transport reads a line: the SDK would refuse it with a parse
    error, and the same call must not run one way in and fail the other. JSON that is no JSON-RPC 2.0 message gets
    the answer stdio gives (`json_text.refusal`): the SDK answers it with -32602 and its validation dump, and takes
    a request whose id is no string or integer for a notification (202, nothing run). Bodies over `limit` pass
    unread, for the wrapped app to refuse."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _declared_length(scope)
        if (scope["type"] != "http" or scope.get("method") != "POST"
                or (declared is not None and declared > self.limit)):
            await self.app(scope, receive, send)
            return
        read: list[Message] = []
        size, whole = 0, False
        while size <= self.limit:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                whole = True
                break
        if whole:
            body = b"".join(m.get("body", b"") for m in read)
            if (mended := mended_body(body)) is not None:
                body, read = mended, [{"type": "http.request", "body": mended, "more_body": False}]
                scope = {**scope, "headers": [(name, str(len(mended)).encode()) if name.lower() == b"content-length"
                                              else (name, value) for name, value in scope.get("headers", ())]}
            message = _json_or_unreadable(body)
            if message is not _UNREADABLE and (refused := refusal(message)) is not None:
                await _json_rpc_error(send, 400, *refused, request_id=request_id(message))
                return

        async def replay() -> Message:
            return read.pop(0) if read else await receive()

        await self.app(scope, replay, send)


_UNREADABLE = object()


def _json_or_unreadable(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return _UNREADABLE  # the SDK answers it with a parse error


def _declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, when it gives one as a number."""
    sizes = [value for name, value in scope.get("headers", ()) if name.lower() == b"content-length"]
    return int(sizes[0]) if sizes and sizes[0].isdigit() else None


class StopMiddleware:
    """Counts the requests under way, so that a stopping server can let them answer, and refuses new ones with a
    503 once it is stopping (`run_asgi`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stopping = False
        self.under_way = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A GET is the client's stream of server messages, open as long as the session: not a call to wait for.
        if scope["type"] != "http" or scope.get("method") == "GET":
            await self.app(scope, receive, send)
            return
        if self.stopping:
            await _json_rpc_error(send, 503, -32000, "duckgraph is stopping: the request was not run")
            return
        self.under_way += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.under_way -= 1


async def _discard_body(receive: Receive, at_most: int) -> None:
    read = 0
    while read <= at_most:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        read += len(message.get("body", b""))


async def _json_rpc_error(send: Send, status: int, code: int, message: str, *,
                          request_id: str | int | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
    ]})
    await send({"type": "http.response.body", "body": body})


def bound_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for `run_asgi`; the OSError of the bind when it cannot be."""
    bare = host.strip().strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
    try:
        sock.bind((bare, port))
    except OSError:
        sock.close()
        raise
    return sock


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for `run_asgi`, or a ConfigError naming the port and what to do. Bound here,
    before anything else starts, so that "serving MCP at ..." is said only once the port is really ours."""
    try:
        return bound_socket(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"cannot serve MCP on {host} port {port}: the port is in use (another `duckgraph serve "
                              "--http`, or another program). Stop that program, or choose another port with --port")
        raise ConfigError(f"cannot serve MCP on {host} port {port}: {exc.strerror or exc}. Check --host (an address "
                          "of this machine) and --port") from exc


def run_asgi(app: ASGIApp, host: str, port: int, log_level: str, sock: socket.socket | None = None, *,
             stop: StopMiddleware | None = None, grace: float = 5.0) -> None:
    """Serve `app` with uvicorn until interrupted (on `sock` when given, bound by `listening_socket`). Its logs go
    through `logging` (stderr), never stdout.

    SIGINT or SIGTERM stop it gracefully: with `stop` (the StopMiddleware around `app`), new requests get a 503
    and the ones under way up to `grace` seconds to answer (a second Ctrl-C stops waiting); then the streams
    close, and the app's lifespan ends (the database closes).

    Every response carries FRAME_HEADERS (FrameDenyMiddleware). The access log (at DEBUG) never shows a token
    given in the address (TokenlessAccessLog)."""
    import uvicorn  # installed with mcp; imported here so the stdio server never pays for it
    from sse_starlette.sse import AppStatus

    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, TokenlessAccessLog) for f in access.filters):
        access.addFilter(TokenlessAccessLog())
    config = uvicorn.Config(
        FrameDenyMiddleware(app), host=host.strip().strip("[]"), port=port, log_config=None,
        log_level=log_level.lower(), access_log=log_level.upper() == "DEBUG", server_header=False, lifespan="on",
        timeout_graceful_shutdown=grace + 2,  # what still runs then is cancelled: the stop stays bounded
    )
    # sse-starlette (the SDK's SSE responses) ends every stream the moment uvicorn is told to stop, the answers
    # of the calls under way with them; they end here once those calls have answered (see _GracefulServer).
    AppStatus.disable_automatic_graceful_drain()

    class _GracefulServer(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if stop is not None:
                stop.stopping = True
                if stop.under_way:
                    log.info("stopping: finishing %d request(s) under way (at most %g s)", stop.under_way, grace)
                deadline = time.monotonic() + grace
                while stop.under_way and not self.force_exit and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            AppStatus.should_exit = True
            await super().shutdown(sockets)

    # uvicorn shuts down gracefully on SIGTERM or SIGINT (sessions end, the database closes), then re-raises the
    # signal to the handler it found. A service manager's stop is a normal exit: status 0. Ctrl-C is an
    # interruption (status 130, as for any command); left to asyncio's own SIGINT handler, the re-raised signal
    # only cancels the server's task, which has usually finished by then, and the process exited with 0.
    handlers = {signal.SIGTERM: _exit_normally, signal.SIGINT: _interrupted}
    previous = ({sig: signal.getsignal(sig) for sig in handlers}
                if threading.current_thread() is threading.main_thread() else {})
    for sig in previous:
        signal.signal(sig, handlers[sig])
    try:
        _GracefulServer(config).run(sockets=[sock] if sock is not None else None)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_normally(_signal: int, _frame: Any) -> None:
    raise SystemExit(0)


def _interrupted(_signal: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def endpoint_url(host: str, port: int) -> str:
    """The URL clients connect to, e.g. http://127.0.0.1:8765/mcp."""
    bare = host.strip().strip("[]")
    return f"http://{f'[{bare}]' if ':' in bare else bare}:{port}{MCP_PATH}"
