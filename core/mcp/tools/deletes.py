"""delete_entities and delete_relations, in the vocabulary of each tool set (see register_tools)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult
from pydantic import Field

from duckgraph.core.domain.documents import delete_documents as _delete_documents_by_id
from duckgraph.core.domain.model import (
    MAX_DOCUMENTS_PER_CALL,
    DeletedSummary,
    DocumentsDeleted,
    LookupName,
    MemoryDeleteResult,
    RelationInput,
    RelationsDeleted,
    RelationToDelete,
    SourceId,
)
from duckgraph.core.mcp.tools.common import (
    DESTRUCTIVE,
    EntityName,
    NamespaceArg,
    call,
    call_namespace,
    kb_of,
    model_result,
    titled,
    with_text,
)

_DELETE_ENTITIES = "Delete entities (by name, any case or spacing) and their relations."
_DELETE_RELATIONS = "Delete wrong or outdated relations; the entities stay."


def register_graphrag_deletes(server: MCPServer) -> None:
    @server.tool(title="Delete entities", description=_DELETE_ENTITIES,
                 annotations=titled(DESTRUCTIVE, "Delete entities"))
    async def delete_entities(
        ctx: Context, names: Annotated[list[EntityName], Field(min_length=1, max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> DeletedSummary:
        return await _delete_entities(ctx, names, namespace)

    @server.tool(title="Delete relations", description=_DELETE_RELATIONS,
                 annotations=titled(DESTRUCTIVE, "Delete relations"))
    async def delete_relations(
        ctx: Context, relations: Annotated[list[RelationToDelete], Field(min_length=1, max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> RelationsDeleted:
        return await _delete_relations(ctx, relations, namespace)


def register_memory_deletes(server: MCPServer) -> None:
    """The reference memory server's shapes, and its texts."""

    # The reference accepts empty lists here (and succeeds doing nothing), so these do too.
    @server.tool(title="Delete Entities", annotations=titled(DESTRUCTIVE, "Delete Entities"))
    async def delete_entities(
        ctx: Context,
        entityNames: Annotated[list[LookupName], Field(max_length=1_000,  # noqa: N803
                                                       description="An array of entity names to delete")],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryDeleteResult]:
        """Delete multiple entities and their associated relations from the knowledge graph. A name matches the
        entity of that name ignoring case and spacing ("alice smith" deletes "Alice Smith"); names that match
        nothing are reported in not_found, and a name that is only an alias fails the call."""
        return await _delete_entities_memory(ctx, entityNames, namespace)

    @server.tool(title="Delete Relations", annotations=titled(DESTRUCTIVE, "Delete Relations"))
    async def delete_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(max_length=1_000,
                                                        description="An array of relations to delete")],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryDeleteResult]:
        """Delete multiple relations ({from, to, relationType}) from the knowledge graph; relations that do not
        exist are reported in not_found. The entities stay."""
        return await _delete_relations_memory(ctx, relations, namespace)


def register_either_deletes(server: MCPServer) -> None:
    """For `all`: one tool per name, taking either set's vocabulary (see register_tools). Their results differ
    in shape with the vocabulary, so they declare no output schema."""

    @server.tool(title="Delete entities", annotations=titled(DESTRUCTIVE, "Delete entities"))
    async def delete_entities(
        ctx: Context,
        names: Annotated[list[EntityName] | None, Field(max_length=1_000)] = None,
        entityNames: Annotated[list[LookupName] | None, Field(max_length=1_000)] = None,  # noqa: N803
        namespace: NamespaceArg = None,
    ) -> CallToolResult:
        """Delete entities with their relations: names (or entityNames, the memory tools' spelling), each matching
        the entity of that name ignoring case and spacing (not an alias)."""
        if (names is None) == (entityNames is None):
            raise ToolError("give the entities to delete as names (or as entityNames), once")
        if names is not None:
            return model_result(await _delete_entities(ctx, names, namespace))
        return await _delete_entities_memory(ctx, entityNames or [], namespace)

    @server.tool(title="Delete relations", annotations=titled(DESTRUCTIVE, "Delete relations"))
    async def delete_relations(
        ctx: Context, relations: Annotated[list[RelationToDelete | RelationInput], Field(max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> CallToolResult:
        """Delete relations, all {source, target, type} or all {from, to, relationType}; the entities stay."""
        kinds = {type(r) for r in relations}
        if len(kinds) > 1:
            raise ToolError("give every relation as {source, target, type}, or every one as {from, to, relationType}")
        if kinds == {RelationToDelete}:
            return model_result(await _delete_relations(ctx, relations, namespace))
        return await _delete_relations_memory(ctx, relations, namespace)


def register_document_deletes(server: MCPServer) -> None:
    """delete_documents: in the `all` set (so also on the web page, which serves it), not the default one, whose
    listing is at its token budget (tests/integration/test_tool_cost.py)."""

    @server.tool(title="Delete documents", annotations=titled(DESTRUCTIVE, "Delete documents"))
    async def delete_documents(
        ctx: Context,
        ids: Annotated[list[SourceId], Field(min_length=1, max_length=MAX_DOCUMENTS_PER_CALL)],
        namespace: NamespaceArg = None,
    ) -> DocumentsDeleted:
        """Delete documents stored by mistake, by id (a passage's document_id in search), with their passages and
        the entities and relations only they supported. Ids that name no document are listed in not_found."""
        return await call(_delete_documents_by_id, kb_of(ctx), ids, await call_namespace(ctx, namespace))


async def _delete_entities(ctx: Context, names: list[str], namespace: str | None) -> DeletedSummary:
    return await call(kb_of(ctx).curation.delete_entities, names, await call_namespace(ctx, namespace))


async def _delete_relations(
    ctx: Context, relations: list[RelationToDelete], namespace: str | None
) -> RelationsDeleted:
    return await call(kb_of(ctx).curation.delete_relations, relations, await call_namespace(ctx, namespace))


async def _delete_entities_memory(ctx: Context, names: list[str], namespace: str | None) -> CallToolResult:
    summary = await call(kb_of(ctx).curation.delete_entities, names, await call_namespace(ctx, namespace),
                         memory_tools=True)
    message = "Entities deleted successfully"
    return with_text(MemoryDeleteResult(**summary.model_dump(), success=True, message=message), message)


async def _delete_relations_memory(
    ctx: Context, relations: list[RelationInput], namespace: str | None
) -> CallToolResult:
    refs = [RelationToDelete(source=r.from_, target=r.to, type=r.relationType) for r in relations]
    result = await _delete_relations(ctx, refs, namespace)
    message = "Relations deleted successfully"
    # As the caller wrote them (a type "knows", not the stored KNOWS), as create_relations answers.
    missing = [r.label() for r in result.not_found]
    deleted = [label for label in dict.fromkeys(r.label() for r in refs) if label not in missing]
    return with_text(MemoryDeleteResult(deleted=deleted, not_found=missing, edges_deleted=len(result.deleted),
                                        success=True, message=message), message)


