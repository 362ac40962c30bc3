"""Serving a knowledge base over MCP: stdio, or streamable HTTP. Either way the server first settles which process
owns the database file (core/mcp/forwarding.py)."""

from __future__ import annotations

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
    _shared_server(services).run(transport)  # type: ignore[arg-type]


def serve_http(services: Services, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
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
    run_asgi(app, bare, port, services.settings.log_level)
