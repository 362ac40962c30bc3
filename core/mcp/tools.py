"""The MCP tools. Thin: they validate, call the knowledge base on a worker thread, and turn domain errors into
tool errors the model can act on. The server imports this module when it builds its tools (after the handshake,
see core/mcp/tool_listing.py), so the pydantic models the tools name stay off the start-up path."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from duckgraph.core.domain import memory_server as memory_compat
from duckgraph.core.domain.model import (
    AddObservationsResult,
    DeletedSummary,
    MemoryDeleteResult,
    MemoryEntities,
    MemoryEntityInput,
    MemoryGraph,
    MemoryRelations,
    ObservationAddition,
    ObservationDeletion,
    ObservationsDeleted,
    EntitiesResult,
    EntityDetail,
    GraphStats,
    MergeResult,
    PathResult,
    RelationInput,
    RelationRef,
    MAX_DOCUMENTS_PER_CALL,
    MAX_EDGES_PER_CALL,
    MAX_NODES_PER_CALL,
    AddDocumentsResult,
    AddGraphResult,
    DocumentInput,
    EdgeInput,
    NodeInput,
    SearchResult,
)
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.mcp.progress import progress_reporter
from duckgraph.ports import DuckgraphError

log = logging.getLogger(__name__)
T = TypeVar("T")


def register_tools(server: MCPServer, tool_set: str) -> None:
    """Add the tools of `tool_set` (graphrag, memory or all) to `server`."""
    if tool_set in ("graphrag", "all"):
        _register_graphrag_tools(server)
    if tool_set in ("memory", "all"):
        _register_memory_tools(server)
    _register_shared_tools(server)


def _kb(ctx: Context) -> KnowledgeBase:
    # The server's own knowledge base (also the lifespan's): set on the calls the owner runs for its clients too.
    return ctx.mcp_server.knowledge_base


async def _call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a knowledge-base call on a worker thread; domain errors become tool errors."""
    try:
        return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))
    except DuckgraphError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("unexpected failure in %s", getattr(function, "__name__", function))
        raise ToolError(f"internal error ({type(exc).__name__}): {exc}. The server log has the details.") from exc


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
ADDITIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
EntityName = Annotated[str, Field(min_length=1, max_length=300)]


def _register_graphrag_tools(server: MCPServer) -> None:
    @server.tool(
        annotations=ToolAnnotations(title="Add knowledge graph", readOnlyHint=False, destructiveHint=False,
                                    idempotentHint=True, openWorldHint=False),
    )
    async def add_knowledge_graph(
        ctx: Context,
        nodes: Annotated[list[NodeInput], Field(max_length=MAX_NODES_PER_CALL)] = [],  # noqa: B006
        edges: Annotated[list[EdgeInput], Field(max_length=MAX_EDGES_PER_CALL)] = [],  # noqa: B006
    ) -> AddGraphResult:
        """Store entities and the relationships between them in the long-term memory graph.

        nodes: entities, each {name, type, description?, aliases?, properties?, source_ids?}. An entity with the
        same name as a stored one (ignoring case and spacing) is merged into it, not duplicated.
        edges: relationships {source, target, type, description?, weight?, properties?, source_ids?}; source and
        target are entity names from this call or already stored. Use specific UPPER_SNAKE_CASE types such as
        FOUNDED, EMPLOYED_BY, LOCATED_IN, not RELATED_TO. source_ids are ids of documents added with
        add_documents that state the fact. The whole call is stored or, on any error, nothing is.
        """
        return await _call(_kb(ctx).add_knowledge_graph, nodes, edges)

    @server.tool(
        annotations=ToolAnnotations(title="Add documents", readOnlyHint=False, destructiveHint=False,
                                    idempotentHint=True, openWorldHint=False),
    )
    async def add_documents(
        ctx: Context,
        documents: Annotated[list[DocumentInput], Field(min_length=1, max_length=MAX_DOCUMENTS_PER_CALL)],
        extract: Annotated[bool, Field(description="Also extract entities and relationships with the "
                                                   "server's extractor, if one is configured.")] = False,
    ) -> AddDocumentsResult:
        """Store source texts (notes, pages, transcripts) so search can return them as supporting passages.

        documents: each {id?, title?, text, metadata?}. Long texts are split into passages and embedded. Give
        your own id to refer to the document later (e.g. in source_ids of add_knowledge_graph); adding the same
        id again with new text replaces it. Returns the stored ids and their passage (chunk) ids.
        extract: when the server has an extractor (a local Ollama model), it also turns every passage into
        entities and relationships; a passage whose extraction fails is still stored and listed with its error.
        Without an extractor, extract the graph yourself and call add_knowledge_graph.
        """
        return await _call(_kb(ctx).add_documents, documents, extract=extract, progress=progress_reporter(ctx))

    @server.tool(
        annotations=ToolAnnotations(title="Search memory", readOnlyHint=True, destructiveHint=False,
                                    idempotentHint=True, openWorldHint=False),
    )
    async def search(
        ctx: Context,
        query: Annotated[str, Field(min_length=1, max_length=2_000, description="A question or topic.")],
        k_anchors: Annotated[int, Field(ge=1, le=50, description="Entities to start from.")] = 5,
        hops: Annotated[int, Field(ge=0, le=3, description="How far to walk the graph from them.")] = 2,
        max_nodes: Annotated[int, Field(ge=1, le=200)] = 30,
        max_passages: Annotated[int, Field(ge=0, le=50)] = 5,
        token_budget: Annotated[int, Field(ge=100, le=50_000, description="Size of the text answer.")] = 2_000,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search the memory: finds the entities the query is about, follows their relationships up to `hops`
        steps, drops what is off topic, and returns the relations that best answer the query first, the
        connected entities (with their properties and most relevant observations) and the source passages that
        support them (each passage with document_id, chunk_id, title, text and score). Scores are similarities
        to the query, comparable across queries. Use it before answering from memory, and for multi-step
        questions ("where was the founder of X born?")."""
        result = await _call(
            _kb(ctx).search, query, k_anchors=k_anchors, hops=hops, max_nodes=max_nodes, max_passages=max_passages,
            token_budget=token_budget,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=result.text)],
            structured_content=result.model_dump(mode="json"),
        )


    @server.tool(title="Get entities", annotations=_titled(READ_ONLY, "Get entities"))
    async def get_entities(
        ctx: Context, names: Annotated[list[EntityName], Field(min_length=1, max_length=100)]
    ) -> EntitiesResult:
        """Look up entities by exact name (or a unique alias): type, description, aliases, properties,
        observations and up to 50 of their relations each. Names not found are listed in not_found."""
        kb = _kb(ctx)
        entities, missing = await _call(kb.curation.get_entities, names, kb.namespace)
        return EntitiesResult(entities=entities, not_found=missing)

    @server.tool(title="Update entity", annotations=_titled(DESTRUCTIVE, "Update entity"))
    async def update_entity(
        ctx: Context,
        name: Annotated[EntityName, Field(description="The entity to change.")],
        new_name: Annotated[EntityName | None, Field(description="Rename; the old name stays as an alias.")] = None,
        type: Annotated[str | None, Field(min_length=1, max_length=80)] = None,
        description: Annotated[str | None, Field(max_length=4_000, description="Replaces the description.")] = None,
        aliases: Annotated[list[EntityName] | None, Field(max_length=50, description="Replaces the aliases.")] = None,
        properties: Annotated[dict[str, Any] | None, Field(description="Replaces the properties.")] = None,
    ) -> EntityDetail:
        """Change one entity in place: rename it (all its relations stay), or replace its type, description,
        aliases or properties. To combine two entities that are the same thing, use merge_entities."""
        kb = _kb(ctx)
        return await _call(kb.curation.update_entity, name, kb.namespace, new_name=new_name, type=type,
                           description=description, aliases=aliases, properties=properties)

    @server.tool(title="Merge entities", annotations=_titled(DESTRUCTIVE, "Merge entities"))
    async def merge_entities(
        ctx: Context,
        sources: Annotated[list[EntityName], Field(min_length=1, max_length=50, description="Duplicates to fold in.")],
        target: Annotated[EntityName, Field(description="The entity that remains.")],
    ) -> MergeResult:
        """Merge duplicate entities into one: the sources' relations, provenance, observations and properties
        move to the target, their names become its aliases, and the sources are removed. Relations that become
        duplicates or self-loops collapse."""
        kb = _kb(ctx)
        return await _call(kb.curation.merge_entities, sources, target, kb.namespace)

    @server.tool(title="Find paths", annotations=_titled(READ_ONLY, "Find paths"))
    async def find_paths(
        ctx: Context,
        source: EntityName,
        target: EntityName,
        max_hops: Annotated[int, Field(ge=1, le=4)] = 3,
        max_paths: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> PathResult:
        """How are two entities connected? Returns the shortest chains of relations between them (following
        relations in either direction), e.g. 'Marie Curie -WON-> Nobel Prize <-WON- Pierre Curie'. When there is
        none, message says so and names the hop limit searched within."""
        kb = _kb(ctx)
        return await _call(kb.curation.find_paths, source, target, kb.namespace, max_hops=max_hops,
                           max_paths=max_paths)

    @server.tool(title="Graph stats", annotations=_titled(READ_ONLY, "Graph stats"))
    async def graph_stats(ctx: Context) -> GraphStats:
        """Size of the memory and the entity and relation types in use (the 50 most common of each)."""
        kb = _kb(ctx)
        return GraphStats(**await _call(kb.stats, kb.namespace))


def _register_shared_tools(server: MCPServer) -> None:
    """Tools both sets share, with the reference memory server's argument and result shapes."""

    # The reference accepts empty lists here (and succeeds doing nothing), so these do too.
    @server.tool(title="Delete Entities", annotations=_titled(DESTRUCTIVE, "Delete Entities"))
    async def delete_entities(
        ctx: Context,
        entityNames: Annotated[list[EntityName], Field(max_length=1_000,  # noqa: N803
                                                       description="An array of entity names to delete")],
    ) -> Annotated[CallToolResult, MemoryDeleteResult]:
        """Delete multiple entities and their associated relations from the knowledge graph. Only exactly named
        entities (or a unique alias) are deleted; names that match nothing are reported in not_found."""
        kb = _kb(ctx)
        summary = await _call(kb.curation.delete_entities, entityNames, kb.namespace)
        return _deleted(summary, "Entities deleted successfully")

    @server.tool(title="Delete Relations", annotations=_titled(DESTRUCTIVE, "Delete Relations"))
    async def delete_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(max_length=1_000,
                                                        description="An array of relations to delete")],
    ) -> Annotated[CallToolResult, MemoryDeleteResult]:
        """Delete multiple relations ({from, to, relationType}) from the knowledge graph; relations that do not
        exist are reported in not_found. The entities stay."""
        kb = _kb(ctx)
        refs = [RelationRef(source=r.from_, target=r.to, type=r.relationType) for r in relations]
        summary = await _call(kb.curation.delete_relations, refs, kb.namespace)
        return _deleted(summary, "Relations deleted successfully")


def _register_memory_tools(server: MCPServer) -> None:
    """The reference MCP memory server's tools, same names and shapes (see core/memory_compat notes).

    Their text content is the JSON the reference returns (JSON.stringify(result, null, 2)); their structured
    content has the reference's fields, plus optional ones that are only present when they say something.
    """

    @server.tool(title="Create Entities", annotations=_titled(ADDITIVE, "Create Entities"))
    async def create_entities(
        ctx: Context,
        entities: Annotated[list[MemoryEntityInput], Field(max_length=MAX_NODES_PER_CALL)],
    ) -> Annotated[CallToolResult, MemoryEntities]:
        """Create multiple new entities in the knowledge graph. An entity whose name exists already (ignoring
        case and spacing) is skipped: only the entities created are returned."""
        created = await _call(memory_compat.create_entities, _kb(ctx), entities)
        return _json_result(MemoryEntities(entities=created), "entities")

    @server.tool(title="Create Relations", annotations=_titled(ADDITIVE, "Create Relations"))
    async def create_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(max_length=MAX_EDGES_PER_CALL)],
    ) -> Annotated[CallToolResult, MemoryRelations]:
        """Create multiple new relations between entities in the knowledge graph. Relations should be in active
        voice. Both entities must exist (create them with create_entities first). A relation that exists
        already is skipped: only the relations created are returned."""
        created = await _call(memory_compat.create_relations, _kb(ctx), relations)
        return _json_result(MemoryRelations(relations=created), "relations")

    @server.tool(title="Add Observations", annotations=_titled(ADDITIVE, "Add Observations"))
    async def add_observations(
        ctx: Context,
        observations: Annotated[list[ObservationAddition], Field(max_length=1_000)],
    ) -> Annotated[CallToolResult, AddObservationsResult]:
        """Add new observations to existing entities in the knowledge graph. Returns, per entity, the
        observations that were new; an entity that does not exist fails the call and nothing is added."""
        results = await _call(memory_compat.add_observations, _kb(ctx), observations)
        return _json_result(AddObservationsResult(results=results), "results")

    @server.tool(title="Delete Observations", annotations=_titled(DESTRUCTIVE, "Delete Observations"))
    async def delete_observations(
        ctx: Context,
        deletions: Annotated[list[ObservationDeletion], Field(max_length=1_000)],
    ) -> Annotated[CallToolResult, ObservationsDeleted]:
        """Delete specific observations from entities in the knowledge graph. Entities that do not exist are
        ignored (and listed in not_found)."""
        result = await _call(memory_compat.delete_observations, _kb(ctx), deletions)
        return _with_text(result, result.message)

    @server.tool(title="Read Graph", annotations=_titled(READ_ONLY, "Read Graph"))
    async def read_graph(
        ctx: Context,
        offset: Annotated[int, Field(ge=0, description="Entities to skip (from next_offset).")] = 0,
        limit: Annotated[int, Field(ge=1, le=memory_compat.MAX_PAGE_SIZE,
                                    description="Entities per page.")] = memory_compat.DEFAULT_PAGE_SIZE,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Read the knowledge graph, a page at a time: entities in creation order with the relations that start
        at them. When more entities remain, the result has next_offset: call again with offset=next_offset."""
        graph = await _call(memory_compat.read_graph, _kb(ctx), offset=offset, limit=limit)
        return _json_result(graph)

    @server.tool(title="Search Nodes", annotations=_titled(READ_ONLY, "Search Nodes"))
    async def search_nodes(
        ctx: Context,
        query: Annotated[str, Field(max_length=2_000, description="The search query to match against entity "
                                                                  "names, types, and observation content")],
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Search for nodes in the knowledge graph based on a query. The search is by meaning, not by substring:
        it finds the entities the query is about and the on-topic entities around them, best first, with the
        relations among them."""
        graph = await _call(memory_compat.search_nodes, _kb(ctx), query)
        return _json_result(graph)

    @server.tool(title="Open Nodes", annotations=_titled(READ_ONLY, "Open Nodes"))
    async def open_nodes(
        ctx: Context,
        names: Annotated[list[EntityName], Field(max_length=1_000, description="An array of entity names to "
                                                                              "retrieve")],
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Open specific nodes in the knowledge graph by their names: the entities found (names that match
        nothing are skipped) and every relation with at least one end among them."""
        graph = await _call(memory_compat.open_nodes, _kb(ctx), names)
        return _json_result(graph)


def _titled(annotations: ToolAnnotations, title: str) -> ToolAnnotations:
    return annotations.model_copy(update={"title": title})


def _json_result(result: BaseModel, key: str | None = None) -> CallToolResult:
    """The reference server's result: text content is its JSON (of `result[key]` when given, as the reference
    prints bare lists) with two-space indents, structured content is `result` without empty optional fields."""
    structured = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = json.dumps(structured[key] if key else structured, indent=2, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _deleted(summary: DeletedSummary, message: str) -> CallToolResult:
    return _with_text(MemoryDeleteResult(**summary.model_dump(), success=True, message=message), message)


def _with_text(result: Any, text: str) -> CallToolResult:
    """A result whose text is the reference server's message and whose structured content is `result`."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=result.model_dump(mode="json"))
