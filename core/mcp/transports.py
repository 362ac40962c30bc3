"""Serving a knowledge base over MCP: stdio, or streamable HTTP. Either way the server first settles which process
owns the database file (core/mcp/forwarding.py)."""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from duckgraph.core.bootstrap import Services
from duckgraph.core.mcp.forwarding import start_sharing
from duckgraph.core.mcp.http import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MCP_PATH,
    BearerTokenMiddleware,
    check_binding,
    is_loopback,
    run_asgi,
)
from duckgraph.core.mcp.server import build_server


def _shared_server(services: Services) -> MCPServer:
    """The server, forwarding to the owner of the file while another process owns it; while this one does, it
    runs the calls of the others with every tool set."""
    share = start_sharing(services, lambda: build_server(services, tool_set="all"))
    return build_server(services, share)


def serve(services: Services, transport: str = "stdio") -> None:
    """Serve until the client closes stdin, then end the process (this is `duckgraph serve`'s whole life).

    By the time `run` returns, the server's lifespan has closed the database file (checkpointed: the `.duckdb`
    alone holds every write), removed its socket and released its lock. What normal interpreter exit would add
    is its teardown: seconds with PyTorch loaded, more than the ~2 s an MCP client waits before killing the
    server, and an abort when a warm-up thread is still inside PyTorch's import or the ONNX export (threads in
    native code cannot be interrupted; see core/mcp/warmup.py). So the process ends here, at once, once what it
    wrote is flushed.
    """
    _shared_server(services).run(transport)  # type: ignore[arg-type]
    _exit_now()


def _exit_now() -> None:
    logging.shutdown()  # flushes the log handlers (stderr, or a log file)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the client: nothing left to say
            pass
    os._exit(0)


def serve_http(services: Services, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
               sock: socket.socket | None = None) -> None:
    """Serve MCP over streamable HTTP at http://host:port/mcp until interrupted.

    With `settings.http_token` every request needs `Authorization: Bearer <token>`; without one the server
    only listens on a loopback address (a ConfigError otherwise, raised before anything starts).
    """
    token = services.settings.http_token.get_secret_value() if services.settings.http_token else None
    check_binding(host, token)
    bare = host.strip().strip("[]")
    security = None  # the SDK protects 127.0.0.1, localhost and ::1 against DNS rebinding by itself
    if is_loopback(bare) and bare not in ("127.0.0.1", "localhost", "::1"):
        authority = f"[{bare}]" if ":" in bare else bare
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{authority}:*", "127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=[f"http://{authority}:*", "http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    app: Any = _shared_server(services).streamable_http_app(
        streamable_http_path=MCP_PATH, host=bare, transport_security=security
    )
    if token is not None:
        app = BearerTokenMiddleware(app, token)
    run_asgi(app, bare, port, services.settings.log_level, sock)
