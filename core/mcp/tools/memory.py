"""The reference memory server's tools, as duckgraph serves them."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from duckgraph.core.domain import memory_server as memory_compat
from duckgraph.core.domain.model import (
    MAX_EDGES_PER_CALL,
    MAX_NODES_PER_CALL,
    AddObservationsResult,
    LookupName,
    MemoryEntities,
    MemoryEntityInput,
    MemoryGraph,
    MemoryRelations,
    ObservationAddition,
    ObservationDeletion,
    ObservationsDeleted,
    RelationInput,
)
from duckgraph.core.mcp.tools.common import (
    ADDITIVE,
    DESTRUCTIVE,
    READ_ONLY,
    NamespaceArg,
    call,
    call_namespace,
    json_result,
    kb_of,
    titled,
    with_text,
)


def register_memory_tools(server: MCPServer) -> None:
    """The reference MCP memory server's tools, same names and shapes (see core/memory_compat notes).

    Their text content is the JSON the reference returns (JSON.stringify(result, null, 2)); their structured
    content has the reference's fields, plus optional ones that are only present when they say something.
    """

    @server.tool(title="Create Entities", annotations=titled(ADDITIVE, "Create Entities"))
    async def create_entities(
        ctx: Context,
        entities: Annotated[list[MemoryEntityInput], Field(max_length=MAX_NODES_PER_CALL)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryEntities]:
        """Create multiple new entities in the knowledge graph. An entity whose exact name exists already is
        skipped (a note says when it came with observations the stored one lacks, or another type, and what to do);
        one whose name differs from a stored one only in case or spacing, or (for one stored entity of
        the same type) only in accents and punctuation, is the same entity here: its observations are added to it,
        and it is returned with merged_into (the stored name); a spelling of the second kind becomes an alias of
        it, and its note says so."""
        created = await call(memory_compat.create_entities, kb_of(ctx), entities,
                              namespace=await call_namespace(ctx, namespace))
        return noted(json_result(created, "entities"), created.note)

    @server.tool(title="Create Relations", annotations=titled(ADDITIVE, "Create Relations"))
    async def create_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(max_length=MAX_EDGES_PER_CALL)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryRelations]:
        """Create multiple new relations between entities in the knowledge graph. Relations should be in active
        voice. An end that does not exist is created with entityType 'unknown' (create_entities with its name
        later gives it a type and observations), and the relation's note says so; an end that differs from one
        stored entity's name only in accents and punctuation is that entity (the spelling becomes its alias, the
        note says so). A relation that exists already
        is skipped; one joining an entity to itself is not stored and has a note."""
        created = await call(memory_compat.create_relations, kb_of(ctx), relations,
                              namespace=await call_namespace(ctx, namespace))
        return json_result(MemoryRelations(relations=created), "relations")

    @server.tool(title="Add Observations", annotations=titled(ADDITIVE, "Add Observations"))
    async def add_observations(
        ctx: Context,
        observations: Annotated[list[ObservationAddition], Field(max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, AddObservationsResult]:
        """Add new observations to existing entities in the knowledge graph. Returns, per entity, the
        observations that were new; an entity that does not exist fails the call and nothing is added."""
        added = await call(memory_compat.add_observations, kb_of(ctx), observations,
                            namespace=await call_namespace(ctx, namespace))
        return noted(json_result(added, "results"), added.note)

    @server.tool(title="Delete Observations", annotations=titled(DESTRUCTIVE, "Delete Observations"))
    async def delete_observations(
        ctx: Context,
        deletions: Annotated[list[ObservationDeletion], Field(max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, ObservationsDeleted]:
        """Delete specific observations from entities in the knowledge graph. Entities that do not exist are
        ignored (and listed in not_found); so are observations an entity does not hold (listed in unmatched, with
        the stored one most like each)."""
        result = await call(memory_compat.delete_observations, kb_of(ctx), deletions,
                             namespace=await call_namespace(ctx, namespace))
        return noted(with_text(result, result.message), "\n".join(result.hints))

    @server.tool(title="Read Graph", annotations=titled(READ_ONLY, "Read Graph"))
    async def read_graph(
        ctx: Context,
        offset: Annotated[int, Field(ge=0, description="Entities to skip (from next_offset).")] = 0,
        limit: Annotated[int, Field(ge=1, le=memory_compat.MAX_PAGE_SIZE,
                                    description="Entities per page.")] = memory_compat.DEFAULT_PAGE_SIZE,
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Read the knowledge graph, a page at a time: entities in creation order with the relations that start
        at them, within 20,000 tokens (fewer entities than limit when they do not fit). When more entities remain,
        the result has next_offset: call again with offset=next_offset."""
        graph = await call(memory_compat.read_graph, kb_of(ctx), offset=offset, limit=limit,
                            namespace=await call_namespace(ctx, namespace))
        return graph_result(graph)

    @server.tool(title="Search Nodes", annotations=titled(READ_ONLY, "Search Nodes"))
    async def search_nodes(
        ctx: Context,
        # No length limit, as in the reference: one longer than any observation may be matches nothing.
        query: Annotated[str, Field(description="The search query to match against entity names, types, and "
                                                "observation content")],
        offset: Annotated[int, Field(ge=0, description="Entities found to skip (from next_offset).")] = 0,
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Search for nodes in the knowledge graph based on a query: every entity whose name, type or an
        observation contains it (ignoring case and accents) first, then the entities it is about by meaning, with the
        relations that touch them. Nothing relevant: an empty result. An answer holds 20,000 tokens at most: when
        more was found, next_offset and a note say how to read on."""
        graph = await call(memory_compat.search_nodes, kb_of(ctx), query, offset=offset,
                            namespace=await call_namespace(ctx, namespace))
        return graph_result(graph)

    @server.tool(title="Open Nodes", annotations=titled(READ_ONLY, "Open Nodes"))
    async def open_nodes(
        ctx: Context,
        names: Annotated[list[LookupName], Field(max_length=1_000, description="An array of entity names to "
                                                                              "retrieve")],
        offset: Annotated[int, Field(ge=0, description="Entities found to skip (from next_offset).")] = 0,
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Open specific nodes in the knowledge graph by their names: the entities found (names that match
        nothing are skipped, a note says what they likely meant) and the relations with at least one end among
        them. An answer holds 20,000 tokens at most: when they do not fit, next_offset and a note say how to read
        on."""
        graph = await call(memory_compat.open_nodes, kb_of(ctx), names, offset=offset,
                            namespace=await call_namespace(ctx, namespace))
        return graph_result(graph)


def graph_result(graph: MemoryGraph) -> CallToolResult:
    """read_graph's, search_nodes' and open_nodes' result: the reference's JSON as the first text block (clients
    parse it), and the note, when something was left out, as a second one, which the model reads."""
    return noted(json_result(graph), graph.note)


def noted(result: CallToolResult, note: str | None) -> CallToolResult:
    """`result` with `note`, when there is one, as a second text block: the first stays the reference's text, which
    clients parse, and the model reads the note."""
    if note:
        result.content.append(TextContent(type="text", text=note))
    return result
