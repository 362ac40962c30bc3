"""Serving the web UI: where it listens and who may use it (core/ui/security.py), then uvicorn until stopped."""

from __future__ import annotations

import errno
import secrets
import socket
import threading
import webbrowser

from duckgraph.core.bootstrap import Services
from duckgraph.core.mcp.direct import DirectCalls
from duckgraph.core.mcp.http import StopMiddleware, bound_socket, check_binding, run_asgi
from duckgraph.core.mcp.server import STOP_GRACE_SECONDS
from duckgraph.core.ui.app import build_app
from duckgraph.core.ui.security import BrowserTokenMiddleware, HostOriginMiddleware, allowed_hosts
from duckgraph.ports import ConfigError

DEFAULT_PORT = 8766


def new_token() -> str:
    return secrets.token_urlsafe(24)


def page_url(host: str, port: int, token: str | None = None) -> str:
    bare = host.strip().strip("[]")
    return f"http://{f'[{bare}]' if ':' in bare else bare}:{port}/" + (f"?token={token}" if token else "")


def ui_socket(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for `serve_ui`, or a ConfigError that says what to do, in the UI's words."""
    try:
        return bound_socket(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} is in use (another `duckgraph ui` or another program): choose another "
                              "with --port") from None
        raise ConfigError(f"cannot serve the web UI on {host} port {port}: {exc.strerror or exc}. Check --host (an "
                          "address of this machine) and --port") from exc


def serve_ui(services: Services, host: str, sock: socket.socket, token: str | None, *,
             open_url: str | None = None) -> None:
    """Serve the UI on `sock` (bound to `host` by `ui_socket`) until SIGINT or SIGTERM. Without a token
    it only listens on a loopback address (a ConfigError otherwise). With `open_url`, open it in a browser."""
    check_binding(host, token)
    port = sock.getsockname()[1]
    app = build_app(DirectCalls(services))
    if token is not None:
        app = BrowserTokenMiddleware(app, token)
    stop = StopMiddleware(HostOriginMiddleware(app, allowed_hosts(host, port)))
    if open_url is not None:
        sock.listen(128)  # a browser that asks before uvicorn serves waits in the backlog instead of failing
        threading.Thread(target=webbrowser.open, args=(open_url,), daemon=True).start()
    run_asgi(stop, host, port, services.settings.log_level, sock, stop=stop, grace=STOP_GRACE_SECONDS)
