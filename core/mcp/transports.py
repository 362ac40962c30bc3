"""Serving a knowledge base over MCP: stdio, or streamable HTTP. Either way the server first settles which process
owns the database file (core/mcp/forwarding.py)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ErrorData
from pydantic import ValidationError

from duckgraph.core.bootstrap import Services
from duckgraph.core.domain.argument_errors import readable
from duckgraph.core.domain.ingest import MAX_TOTAL_DOCUMENT_CHARS
from duckgraph.core.mcp.forwarding import start_sharing
from duckgraph.core.mcp.http import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MCP_PATH,
    BearerTokenMiddleware,
    BodyLimitMiddleware,
    MendingMiddleware,
    StopMiddleware,
    check_binding,
    is_loopback,
    run_asgi,
)
from duckgraph.core.mcp.server import STOP_GRACE_SECONDS, build_server
from duckgraph.core.mcp.stdio import StdioTransport

#: The largest HTTP request body: what the biggest call the tools accept takes (add_documents' characters, at up
#: to 4 bytes each in UTF-8), and a megabyte for the rest of the request. The SDK's default, 4 MiB, refused calls
#: the tools take. A client that escapes non-ASCII characters (\uXXXX, 6 bytes) reaches it with fewer.
HTTP_MAX_BODY_BYTES = 4 * MAX_TOTAL_DOCUMENT_CHARS + 1_000_000


def _shared_server(services: Services) -> MCPServer:
    """The server, forwarding to the owner of the file while another process owns it; while this one does, it
    runs the calls of the others with every tool set."""
    share = start_sharing(services, lambda: build_server(services, tool_set="all"))
    server = build_server(services, share)
    server.middleware.append(_said_invalid_params)
    return server


_NOT_INITIALIZED = ErrorData(code=INVALID_PARAMS, message="Invalid request parameters", data="")


async def _said_invalid_params(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Says what is wrong where the SDK answers "Invalid request parameters" with empty data (the same on both
    transports): which field of the params it refused (a `name` that is no string, `arguments` that are no
    object, a fractional progress token), or that the session was not initialized yet."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:  # the SDK's check of the params of a request it knows
        raise MCPError(INVALID_PARAMS, f"Invalid params for {ctx.method}: {readable(exc)}") from exc
    except MCPError as exc:
        # The SDK's gate before the handshake raises this bare error (a refused param is a ValidationError).
        if exc.error == _NOT_INITIALIZED and ctx.session.client_params is None:
            raise MCPError(INVALID_PARAMS, f"Invalid request: {ctx.method} came before the session was initialized; "
                                           "send initialize first, then notifications/initialized") from exc
        raise


def serve(services: Services) -> None:
    """Serve over stdio until the client closes stdin, or SIGINT or SIGTERM stops the server once the calls under
    way have answered (core/mcp/stdio.py), then end the process (this is `duckgraph serve`'s whole life).

    By the time `run` returns, the server's lifespan has closed the database file (checkpointed: the `.duckdb`
    alone holds every write), removed its socket and released its lock. What normal interpreter exit would add
    is its teardown: seconds with PyTorch loaded, more than the ~2 s an MCP client waits before killing the
    server, and an abort when a warm-up thread is still inside PyTorch's import or the ONNX export (threads in
    native code cannot be interrupted; see core/mcp/warmup.py). So the process ends here, at once, once what it
    wrote is flushed.
    """
    server = _shared_server(services)
    stdio = StdioTransport(STOP_GRACE_SECONDS)
    anyio.run(server.run_stdio_async, stdio)  # type: ignore[call-arg]
    _exit_now(130 if stdio.stopped_by == signal.SIGINT else 0)  # Ctrl-C: an interruption, as for any command


def _exit_now(status: int) -> None:
    logging.shutdown()  # flushes the log handlers (stderr, or a log file)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed by the client: nothing left to say
            pass
    os._exit(status)


def serve_http(services: Services, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
               sock: socket.socket | None = None) -> None:
    """Serve MCP over streamable HTTP at http://host:port/mcp until SIGINT or SIGTERM, which stop it once the
    calls under way have answered (at most STOP_GRACE_SECONDS). Bodies over HTTP_MAX_BODY_BYTES get a 413.

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
    app: Any = BodyLimitMiddleware(MendingMiddleware(_shared_server(services).streamable_http_app(
        streamable_http_path=MCP_PATH, host=bare, transport_security=security,
        max_request_body_size=HTTP_MAX_BODY_BYTES,
    ), HTTP_MAX_BODY_BYTES), HTTP_MAX_BODY_BYTES)
    if token is not None:
        app = BearerTokenMiddleware(app, token)
    stop = StopMiddleware(app)
    run_asgi(stop, bare, port, services.settings.log_level, sock, stop=stop, grace=STOP_GRACE_SECONDS)
