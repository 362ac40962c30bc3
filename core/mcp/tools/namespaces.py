"""Listing and deleting the namespaces of the file."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from pydantic import AfterValidator, Field

from duckgraph.core.domain import namespaces
from duckgraph.core.domain.model import (
    NamespaceDeleted,
    NamespacesResult,
)
from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.core.mcp.tools.common import (
    DESTRUCTIVE,
    READ_ONLY,
    call,
    call_namespace,
    kb_of,
    titled,
)


def register_namespace_tools(server: MCPServer) -> None:
    @server.tool(title="List namespaces", annotations=titled(READ_ONLY, "List namespaces"))
    async def list_namespaces(ctx: Context) -> NamespacesResult:
        """The separate memories (namespaces) in this file, with their sizes."""
        return await call(namespaces.list_namespaces, kb_of(ctx), await call_namespace(ctx, None))

    @server.tool(title="Delete namespace", annotations=titled(DESTRUCTIVE, "Delete namespace"))
    async def delete_namespace(
        ctx: Context, namespace: Annotated[str, AfterValidator(check_namespace)],
        confirm: Annotated[str, Field(description="The name again.")],
    ) -> NamespaceDeleted:
        """Delete a whole memory (namespace) for good; only when the user asks."""
        return await call(namespaces.delete_namespace, kb_of(ctx), namespace, confirm,
                           await call_namespace(ctx, None))


