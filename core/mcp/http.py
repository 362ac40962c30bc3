"""Serving over HTTP: where the server may listen, and the bearer-token check in front of the MCP app.

Kept apart from core/mcp/transports.py (which serves the MCP app over HTTP): nothing here knows about MCP, it
wraps any ASGI application.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import json
import logging
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

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


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for `run_asgi`, or a ConfigError naming the port and what to do. Bound here,
    before anything else starts, so that "serving MCP at ..." is said only once the port is really ours."""
    bare = host.strip().strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in bare else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart need not wait
    try:
        sock.bind((bare, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"cannot serve MCP on {host} port {port}: the port is in use (another `duckgraph serve "
                              "--http`, or another program). Stop that program, or choose another port with --port")
        raise ConfigError(f"cannot serve MCP on {host} port {port}: {exc.strerror or exc}. Check --host (an address "
                          "of this machine) and --port") from exc
    return sock


def run_asgi(app: ASGIApp, host: str, port: int, log_level: str, sock: socket.socket | None = None) -> None:
    """Serve `app` with uvicorn until interrupted (on `sock` when given, bound by `listening_socket`). Its logs go
    through `logging` (stderr), never stdout."""
    import uvicorn  # installed with mcp; imported here so the stdio server never pays for it

    config = uvicorn.Config(
        app, host=host.strip().strip("[]"), port=port, log_config=None, log_level=log_level.lower(),
        access_log=log_level.upper() == "DEBUG", server_header=False, lifespan="on",
    )
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
        uvicorn.Server(config).run(sockets=[sock] if sock is not None else None)
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
