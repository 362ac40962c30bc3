"""The MCP server. The only module that imports `mcp`. Tools are thin: they validate, call the knowledge base
on a worker thread, and turn domain errors into tool errors the model can act on."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from duckgraph.core import __version__
from duckgraph.core.bootstrap import Services
from duckgraph.core.model import (
    DeletedSummary,
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
from duckgraph.core.service import KnowledgeBase
from duckgraph.ports import DuckgraphError

log = logging.getLogger(__name__)
T = TypeVar("T")

INSTRUCTIONS = """\
duckgraph is a long-term memory organised as a knowledge graph with source passages.
- Store what you learn with add_knowledge_graph: specific entity types (Person, Organization, Drug) and specific
  relation types (FOUNDED, EMPLOYED_BY, TREATS), never a vague RELATED_TO. Reuse the exact names of entities
  that already exist.
- Store source texts with add_documents, then pass their ids as source_ids of the entities and relations
  you extract from them.
- Before answering from memory, call search: it returns the relevant entities, how they connect, and the
  passages that support them.
"""


# The warm-up imports torch (seconds of GIL-heavy work); waiting a moment lets the handshake finish first.
WARM_UP_DELAY_SECONDS = 0.5


def build_server(services: Services) -> MCPServer:
    """An MCP server over the given services, exposing the tool set named by `settings.tools`."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[KnowledgeBase]:
        kb = services.knowledge_base
        if services.settings.warm_up:
            threading.Thread(target=_warm_up, args=(kb,), name="duckgraph-warm-up", daemon=True).start()
        try:
            yield kb
        finally:
            await anyio.to_thread.run_sync(kb.close)

    server = MCPServer(
        "duckgraph", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan,
        warn_on_duplicate_tools=False,
    )
    tool_set = services.settings.tools
    if tool_set in ("graphrag", "all"):
        _register_graphrag_tools(server)
    if tool_set in ("memory", "all"):
        _register_memory_tools(server)
    _register_shared_tools(server)
    return server


def _warm_up(kb: KnowledgeBase) -> None:
    time.sleep(WARM_UP_DELAY_SECONDS)
    try:
        kb.open()
        kb.embedder.warm_up()
        log.info("knowledge base open and embedder ready")
    except Exception as exc:  # the first tool call reports the same problem to the model
        log.warning("warm-up failed: %s", exc)


def _kb(ctx: Context) -> KnowledgeBase:
    return ctx.request_context.lifespan_context


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
EDITING = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
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
        return await _call(_kb(ctx).add_documents, documents, extract=extract, progress=_progress_reporter(ctx))

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
        steps, drops what is off topic, and returns the connected entities, relations and the source passages
        that support them (each passage with document_id, chunk_id, text and score). Use it before answering
        from memory, and for multi-step questions ("where was the founder of X born?")."""
        result = await _call(
            _kb(ctx).search, query, k_anchors=k_anchors, hops=hops, max_nodes=max_nodes, max_passages=max_passages,
            token_budget=token_budget,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=result.text)],
            structured_content=result.model_dump(mode="json"),
        )


    @server.tool(annotations=READ_ONLY)
    async def get_entities(
        ctx: Context, names: Annotated[list[EntityName], Field(min_length=1, max_length=100)]
    ) -> EntitiesResult:
        """Look up entities by exact name (or a unique alias): type, description, aliases, properties,
        observations and up to 50 of their relations each. Names not found are listed in not_found."""
        kb = _kb(ctx)
        entities, missing = await _call(kb.curation.get_entities, names, kb.namespace)
        return EntitiesResult(entities=entities, not_found=missing)

    @server.tool(annotations=EDITING)
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

    @server.tool(annotations=EDITING)
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

    @server.tool(annotations=READ_ONLY)
    async def find_paths(
        ctx: Context,
        source: EntityName,
        target: EntityName,
        max_hops: Annotated[int, Field(ge=1, le=4)] = 3,
        max_paths: Annotated[int, Field(ge=1, le=20)] = 5,
    ) -> PathResult:
        """How are two entities connected? Returns the shortest chains of relations between them (following
        relations in either direction), e.g. 'Marie Curie -WON-> Nobel Prize <-WON- Pierre Curie'."""
        kb = _kb(ctx)
        return await _call(kb.curation.find_paths, source, target, kb.namespace, max_hops=max_hops,
                           max_paths=max_paths)

    @server.tool(annotations=READ_ONLY)
    async def graph_stats(ctx: Context) -> GraphStats:
        """Size of the memory and the entity and relation types in use (the 50 most common of each)."""
        kb = _kb(ctx)
        return GraphStats(**await _call(kb.stats, kb.namespace))


def _register_shared_tools(server: MCPServer) -> None:
    """Tools both sets share, with the reference memory server's argument and result shapes."""

    @server.tool(annotations=DESTRUCTIVE)
    async def delete_entities(
        ctx: Context,
        entityNames: Annotated[list[EntityName], Field(min_length=1, max_length=1_000,  # noqa: N803
                                                       description="Exact names of the entities to delete.")],
    ) -> Annotated[CallToolResult, DeletedSummary]:
        """Delete the named entities and every relation that touches them. Only exactly named entities (or a
        unique alias) are deleted; names that match nothing are reported in not_found."""
        kb = _kb(ctx)
        summary = await _call(kb.curation.delete_entities, entityNames, kb.namespace)
        return _with_text(summary, "Entities deleted successfully")

    @server.tool(annotations=DESTRUCTIVE)
    async def delete_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(min_length=1, max_length=1_000)],
    ) -> Annotated[CallToolResult, DeletedSummary]:
        """Delete the given relations ({from, to, relationType}); relations that do not exist are reported in
        not_found. The entities stay."""
        kb = _kb(ctx)
        refs = [RelationRef(source=r.from_, target=r.to, type=r.relationType) for r in relations]
        summary = await _call(kb.curation.delete_relations, refs, kb.namespace)
        return _with_text(summary, "Relations deleted successfully")


def _register_memory_tools(server: MCPServer) -> None:
    """The reference MCP memory server's tools, same names and shapes (see core/memory_compat notes)."""


def _with_text(result: Any, text: str) -> CallToolResult:
    """A result whose text is the reference server's message and whose structured content is `result`."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=result.model_dump(mode="json"))


def _progress_reporter(ctx: Context) -> Callable[[int, int, str], None]:
    """A callback for worker threads that forwards progress to the client as MCP progress notifications."""

    def report(done: int, total: int, message: str) -> None:
        try:
            anyio.from_thread.run(functools.partial(ctx.report_progress, done, total, message))
        except Exception as exc:  # progress is best effort; the work goes on
            log.debug("progress notification failed: %s", exc)

    return report


def serve(services: Services, transport: str = "stdio") -> None:
    build_server(services).run(transport)  # type: ignore[arg-type]
