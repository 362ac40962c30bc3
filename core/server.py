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


def build_server(services: Services | Callable[[], Services]) -> MCPServer:
    """An MCP server over the given services (or a factory called when the server starts)."""

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[KnowledgeBase]:
        resolved = services() if callable(services) else services
        kb = resolved.knowledge_base
        if resolved.settings.warm_up:
            threading.Thread(target=_warm_up, args=(kb,), name="duckgraph-warm-up", daemon=True).start()
        try:
            yield kb
        finally:
            await anyio.to_thread.run_sync(kb.close)

    server = MCPServer(
        "duckgraph", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan,
        warn_on_duplicate_tools=False,
    )
    _register_tools(server)
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


def _register_tools(server: MCPServer) -> None:
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


def _progress_reporter(ctx: Context) -> Callable[[int, int, str], None]:
    """A callback for worker threads that forwards progress to the client as MCP progress notifications."""

    def report(done: int, total: int, message: str) -> None:
        try:
            anyio.from_thread.run(functools.partial(ctx.report_progress, done, total, message))
        except Exception as exc:  # progress is best effort; the work goes on
            log.debug("progress notification failed: %s", exc)

    return report


def serve(services: Services | Callable[[], Services], transport: str = "stdio") -> None:
    build_server(services).run(transport)  # type: ignore[arg-type]
