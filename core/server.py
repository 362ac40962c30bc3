"""The MCP server. The only module that imports `mcp`. Tools are thin: they validate, call the knowledge base
on a worker thread, and turn domain errors into tool errors the model can act on."""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import ToolManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import CallToolResult, TextContent, Tool as MCPTool, ToolAnnotations
from pydantic import BaseModel, Field

from duckgraph.core import __version__
from duckgraph.core.bootstrap import Services
from duckgraph.core import memory_compat
from duckgraph.core.model import (
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
from duckgraph.core.http import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MCP_PATH,
    BearerTokenMiddleware,
    check_binding,
    is_loopback,
    run_asgi,
)
from duckgraph.core import sharing, tool_listing
from duckgraph.core.service import KnowledgeBase
from duckgraph.core.sharing import FileShare, RunLocally
from duckgraph.ports import DuckgraphError, InvalidInputError

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

#: With DUCKGRAPH_TOOLS=memory only the reference memory server's tools exist, so only they are named.
MEMORY_INSTRUCTIONS = """\
duckgraph is a long-term memory organised as a knowledge graph of entities, relations and observations.
- Store what you learn with create_entities (specific entity types such as person, organization) and
  create_relations between existing entities (specific relation types in active voice, e.g. works_at); add
  facts about an entity with add_observations. Reuse the exact names of entities that already exist.
- Before answering from memory, call search_nodes: it searches by meaning and returns the relevant entities
  and the relations among them. open_nodes reads entities by name; read_graph reads the graph page by page.
"""


# The warm-up imports torch (seconds of GIL-heavy work); waiting a moment lets the handshake finish first.
WARM_UP_DELAY_SECONDS = 0.5
#: How long a server that is shutting down waits for its warm-up to finish.
WARM_UP_EXIT_WAIT_SECONDS = 60


class DuckgraphServer(MCPServer):
    """The MCP server over one knowledge base. While this process is a client of the duckgraph server that owns
    the database file (see core/sharing.py), its tool calls and resource reads run there, through the same
    functions, and come back as the owner's result; otherwise they run here."""

    def __init__(self, *args: Any, knowledge_base: KnowledgeBase, tool_set: str, share: FileShare | None = None,
                 **kwargs: Any) -> None:
        # Set before the SDK's __init__, which stores its tool manager through the property below.
        self.tool_set = tool_set
        self._tools_built = False
        self._building_thread: int | None = None
        self._build_lock = threading.Lock()
        super().__init__(*args, **kwargs)
        self.knowledge_base = knowledge_base
        self.share = share
        self._read_only: dict[str, bool] | None = None

    # The tools are built when something first needs them (the warm-up thread, a call, or a listing that the
    # shipped one cannot answer): building them is most of what duckgraph adds to start-up (see
    # core/tool_listing.py). Every use of the tools in the SDK goes through its tool manager, a private attribute,
    # so that is where they are built (tests/integration/test_tool_listing.py fails if the SDK renames it).
    @property
    def _tool_manager(self) -> ToolManager:
        if not self._tools_built and self._building_thread != threading.get_ident():
            with self._build_lock:
                if not self._tools_built:
                    self._building_thread = threading.get_ident()  # registering comes back through here
                    try:
                        register_tools(self, self.tool_set)
                    finally:
                        self._building_thread = None
                    self._tools_built = True
        return self._tools

    @_tool_manager.setter
    def _tool_manager(self, manager: ToolManager) -> None:
        self._tools = manager

    @property
    def tools_built(self) -> bool:
        return self._tools_built

    def build_tools(self) -> None:
        """Build the tools now, if nothing has needed them yet."""
        self._tool_manager  # noqa: B018 (the property builds them)

    async def list_tools(self) -> list[MCPTool]:
        if not self._tools_built:
            listing = tool_listing.shipped(self.tool_set)
            if listing is not None:
                return [MCPTool.model_validate(tool) for tool in listing]
        return await super().list_tools()

    def _forwarding(self) -> FileShare | None:
        share = self.share
        return share if share is not None and not share.is_owner else None

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        share = self._forwarding()
        if share is not None:
            if self._read_only is None:
                self._read_only = {t.name: bool(t.annotations and t.annotations.read_only_hint)
                                   for t in await self.list_tools()}
            if name in self._read_only:  # an unknown name fails here, as it would on a server of its own
                params = {"name": name, "arguments": arguments, "namespace": self.knowledge_base.namespace}
                report = _progress_reporter(context) if context is not None else None
                read_only = self._read_only[name]
                # Writes take turns on the owner (as they do in its knowledge base), so one that was still waiting
                # when the owner died is sent on; an extraction runs long, so it does not hold the others up.
                exclusive = not read_only and not arguments.get("extract")
                try:
                    # Reads are sent again if the owner goes away before answering; writes that started never are.
                    result = await anyio.to_thread.run_sync(functools.partial(
                        share.call, "tool", params, repeatable=read_only, exclusive=exclusive, progress=report))
                except RunLocally:  # this process has taken the file over meanwhile
                    pass
                except DuckgraphError as exc:
                    raise ToolError(str(exc)) from exc
                else:
                    return CallToolResult.model_validate(result)
        return await super().call_tool(name, arguments, context)

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        share = self._forwarding()
        if share is not None and str(uri) in {str(r.uri) for r in await self.list_resources()}:
            params = {"uri": str(uri), "namespace": self.knowledge_base.namespace}
            try:
                contents = await anyio.to_thread.run_sync(functools.partial(
                    share.call, "resource", params, repeatable=True))
            except RunLocally:
                pass
            except DuckgraphError as exc:
                raise ResourceError(str(exc)) from exc
            else:
                return [ReadResourceContents(content=c["text"], mime_type=c.get("mime_type")) for c in contents]
        return await super().read_resource(uri, context)


def build_server(services: Services, share: FileShare | None = None, *, tool_set: str | None = None) -> MCPServer:
    """An MCP server over the given services, exposing the tool set named by `settings.tools` (or `tool_set`).

    With `share` (from `start_sharing`), the server forwards its calls while another process owns the file.
    """

    @asynccontextmanager
    async def lifespan(server: DuckgraphServer) -> AsyncIterator[KnowledgeBase]:
        kb = services.knowledge_base
        warming, stopping = None, threading.Event()
        # A client has no use for the model (the owner embeds) until it takes the file over.
        if services.settings.warm_up and (share is None or share.is_owner):
            warming = threading.Thread(target=_warm_up, args=(kb, server, stopping), name="duckgraph-warm-up",
                                       daemon=True)
            warming.start()
        try:
            yield kb
        finally:
            if warming is not None:
                # Its native work (PyTorch's import, the ONNX export) cut short by the interpreter's exit aborts the
                # process, and it may still open the file: it stops at its next step or ends (at worst the
                # model's import, ~10 s) before the file closes.
                stopping.set()
                await anyio.to_thread.run_sync(warming.join, WARM_UP_EXIT_WAIT_SECONDS)
            if share is not None:  # an owner answers the calls it is running before it lets the file go
                await anyio.to_thread.run_sync(functools.partial(share.close, finalize=kb.close))
            else:
                await anyio.to_thread.run_sync(kb.close)

    tool_set = tool_set or services.settings.tools
    server = DuckgraphServer(
        "duckgraph", version=__version__, lifespan=lifespan,
        instructions=MEMORY_INSTRUCTIONS if tool_set == "memory" else INSTRUCTIONS,
        warn_on_duplicate_tools=False, knowledge_base=services.knowledge_base, share=share, tool_set=tool_set,
    )
    _register_prompts_and_resources(server, services)
    return server


async def built_tool_listing(tool_set: str) -> list[dict[str, Any]]:
    """The `tools/list` answer for `tool_set` as the SDK computes it from the tool functions, as JSON."""
    server = MCPServer("tool-listing")
    register_tools(server, tool_set)
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in await server.list_tools()]


def register_tools(server: MCPServer, tool_set: str) -> None:
    """Add the tools of `tool_set` (graphrag, memory or all) to `server`."""
    if tool_set in ("graphrag", "all"):
        _register_graphrag_tools(server)
    if tool_set in ("memory", "all"):
        _register_memory_tools(server)
    _register_shared_tools(server)


def _warm_up(kb: KnowledgeBase, server: DuckgraphServer, stopping: threading.Event) -> None:
    if stopping.wait(WARM_UP_DELAY_SECONDS):
        return
    server.build_tools()  # so that the first call does not wait for it
    try:
        for step in (kb.open, kb.embedder.warm_up):
            if stopping.is_set():  # the server is closing: no new step
                return
            step()
        log.info("knowledge base open and embedder ready")
    except Exception as exc:  # the first tool call reports the same problem to the model
        log.warning("warm-up failed: %s", exc)


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
        relations in either direction), e.g. 'Marie Curie -WON-> Nobel Prize <-WON- Pierre Curie'."""
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


def _progress_reporter(ctx: Context) -> Callable[[int, int, str], None]:
    """A callback for worker threads that forwards progress to the client as MCP progress notifications."""

    def report(done: int, total: int, message: str) -> None:
        try:
            anyio.from_thread.run(functools.partial(ctx.report_progress, done, total, message))
        except Exception as exc:  # progress is best effort; the work goes on
            log.debug("progress notification failed: %s", exc)

    return report


class _RelayContext(Context):
    """The context of a call run for a client server: progress goes back over the socket to that server."""

    _relay: Any = None

    def __init__(self, *, relay: Callable[..., None] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._relay = relay

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._relay is not None:
            self._relay(progress, total, message)


class _OwnerSide:
    """What the owner of the file runs for its client servers (the `sharing.Handler`).

    Tool calls and resource reads go through a server with every tool set registered (a client may expose
    another set than this one) over this process's knowledge base: the same tool functions, validation and
    error texts as a call made here. Each runs on an event loop of its own, in the connection's thread.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self.share: FileShare | None = None
        self._lock = threading.Lock()
        self._server: MCPServer | None = None

    def __call__(self, method: str, params: dict[str, Any], progress: Callable[..., None]) -> Any:
        kb = self.services.knowledge_base
        if method == "tool":
            return anyio.run(self._tool, params, progress)
        if method == "resource":
            return anyio.run(self._resource, params)
        if method == "status":
            return self.share.status() if self.share is not None else {"role": "owner"}
        if method == "health":
            return kb.health()
        if method == "backup":
            return kb.backup(params["path"], force=bool(params.get("force", False)))
        raise InvalidInputError(f"unknown request {method!r}")

    def _executor(self) -> MCPServer:
        with self._lock:
            if self._server is None:
                self._server = build_server(self.services, tool_set="all")
            return self._server

    def _namespace_problem(self, params: dict[str, Any]) -> str | None:
        ours, theirs = self.services.knowledge_base.namespace, params.get("namespace")
        if theirs is None or theirs == ours:
            return None
        return (f"{self.services.settings.db} is served by duckgraph pid {os.getpid()}, which uses the namespace "
                f"{ours!r}, but this server is configured with {theirs!r}. Servers that share a file must use the "
                "same namespace (DUCKGRAPH_NAMESPACE): change it, or use another file.")

    async def _tool(self, params: dict[str, Any], progress: Callable[..., None]) -> dict[str, Any]:
        name = str(params["name"])
        problem = self._namespace_problem(params)
        if problem is not None:
            result = CallToolResult(content=[TextContent(type="text", text=problem)], is_error=True)
        else:
            server = self._executor()
            try:
                result = await server.call_tool(name, params.get("arguments") or {},
                                                _RelayContext(mcp_server=server, relay=progress))
            except Exception as exc:  # answered as MCPServer answers a failed call of its own
                if isinstance(exc, ToolError) and not isinstance(exc, UnexpectedToolError):
                    log.info("tool %r (for a client server) failed: %r", name, str(exc))
                else:
                    log.exception("tool %r (for a client server) raised an unexpected exception", name)
                result = CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def _resource(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        problem = self._namespace_problem(params)
        if problem is not None:
            raise ResourceError(problem)
        contents = await self._executor().read_resource(str(params["uri"]))
        return [{"text": c.content if isinstance(c.content, str) else c.content.decode("utf-8", "replace"),
                 "mime_type": c.mime_type} for c in contents]


def start_sharing(services: Services) -> FileShare | None:
    """Settle which duckgraph server owns the database file: this one, or another that this one forwards to.

    Takes no time (a lock attempt and a socket); nothing is opened or loaded. None where the platform cannot
    share (no flock), or the lock file cannot be made: then this server opens the file itself, as before.
    """
    if not sharing.supported():
        return None
    kb = services.knowledge_base
    owner_side = _OwnerSide(services)

    def take_over() -> None:
        kb.open()
        if services.settings.warm_up:
            threading.Thread(target=_warm_up, args=(kb,), name="duckgraph-warm-up", daemon=True).start()

    try:
        embedder_id = kb.embedder.id
    except Exception:  # only informative here; the first tool call reports a broken embedder
        embedder_id = None
    try:
        share = FileShare(services.settings.db, owner_side, on_takeover=take_over,
                          info={"namespace": kb.namespace, "embedder": embedder_id})
        share.start()
    except (OSError, DuckgraphError) as exc:
        log.warning("cannot share %s with other duckgraph servers (%s); this server opens it by itself",
                    services.settings.db, exc)
        return None
    owner_side.share = share
    return share


def serve(services: Services, transport: str = "stdio") -> None:
    build_server(services, start_sharing(services)).run(transport)  # type: ignore[arg-type]


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
    app: Any = build_server(services, start_sharing(services)).streamable_http_app(
        streamable_http_path=MCP_PATH, host=bare, transport_security=security
    )
    if token is not None:
        app = BearerTokenMiddleware(app, token)
    run_asgi(app, bare, port, services.settings.log_level)


EXTRACTION_GUIDE = """\
Read the text below and store the knowledge it contains in duckgraph, the long-term memory graph.

1. Keep the source. Call add_documents with the text (give it a short, stable id and a title) before anything
   else, and note the id it returns: every entity and relationship you take from this text gets that id in
   its source_ids, so search can later show the passage that backs each fact.
2. Look before you write. Call search with the names the text mentions. When an entity is already stored,
   use its stored name exactly as written there, so the new facts attach to it instead of creating a twin.
3. Pick out the entities: the people, organizations, places, products, works, events and ideas the text is
   about. Give each a precise type such as Person, Organization, City, Drug, Paper or Award (not Thing or
   Entity) and a one-sentence description drawn from the text. List other names the text uses for the same
   thing as aliases.
4. Pick out the relationships the text states between them, each as a source entity, a target entity and
   a type in UPPER_SNAKE_CASE that says exactly what the link is: FOUNDED, EMPLOYED_BY, BORN_IN, AUTHORED,
   ACQUIRED, TREATS. A vague label such as RELATED_TO or ASSOCIATED_WITH tells a later reader nothing, so
   never use one. Point each relationship the way it reads ("Ada Lovelace -WORKED_WITH-> Charles Babbage") and
   add a description with the fact as the text puts it, dates included.
5. Store them with one add_knowledge_graph call: nodes (name, type, description, aliases, source_ids) and
   edges (source, target, type, description, source_ids). Only state what the text supports; leave out
   guesses and general knowledge.
"""

MEMORY_EXTRACTION_GUIDE = """\
Read the text below and store the knowledge it contains in the memory graph.

1. Look before you write. Call search_nodes with the names the text mentions. When an entity is already
   stored, use its stored name exactly, so the new facts attach to it instead of creating a twin.
2. Pick out the entities: the people, organizations, places, products, works, events and ideas the text is
   about. Give each a precise entityType such as Person, Organization, City, Drug, Paper or Award (not Thing
   or Entity), and put what the text says about it into observations, one short fact per observation.
   Create new ones with create_entities; add facts about stored ones with add_observations.
3. Pick out the relationships the text states between them and store them with create_relations, each
   with from, to and a relationType in UPPER_SNAKE_CASE that says exactly what the link is: FOUNDED,
   EMPLOYED_BY, BORN_IN, AUTHORED, ACQUIRED, TREATS. A vague label such as RELATED_TO or ASSOCIATED_WITH tells
   a later reader nothing, so never use one. Point each relationship the way it reads.
4. Only state what the text supports; leave out guesses and general knowledge.
"""


def extraction_prompt(tool_set: str, text: str | None = None) -> str:
    """The extract_knowledge prompt for the given tool set, with the text appended when given."""
    guide = MEMORY_EXTRACTION_GUIDE if tool_set == "memory" else EXTRACTION_GUIDE
    if text and text.strip():
        return f"{guide}\nThe text:\n<text>\n{text.strip()}\n</text>\n"
    return f"{guide}\nThe text is the one the user gives you next (or has just given you).\n"


def _register_prompts_and_resources(server: MCPServer, services: Services) -> None:
    """The extract_knowledge prompt and the duckgraph://stats and duckgraph://schema resources (every tool set).

    Static resources get no request context, so they read the knowledge base the lifespan also hands out.
    """
    kb = services.knowledge_base
    tool_set = services.settings.tools

    @server.prompt(
        name="extract_knowledge",
        title="Extract knowledge into the graph",
        description="Step-by-step instructions for turning a text into entities and specific relationships "
                    "stored in the memory, with the text kept as their source.",
    )
    def extract_knowledge(
        text: Annotated[str | None, Field(description="The text to extract from (optional: otherwise the "
                                                      "next message).", max_length=200_000)] = None,
    ) -> str:
        return extraction_prompt(tool_set, text)

    @server.resource(
        "duckgraph://stats", name="stats", title="Knowledge base statistics", mime_type="application/json",
        description="Counts of entities, relations, documents and passages, and the entity and relation "
                    "types in use (the 50 most common of each).",
    )
    def stats_resource() -> str:
        stats = _read_for_resource(kb.stats, kb.namespace)
        return GraphStats(**stats).model_dump_json(indent=2)

    @server.resource(
        "duckgraph://schema", name="schema", title="Types in use", mime_type="application/json",
        description="The entity and relation types in use (at most 50 of each, most common first), each with "
                    "its count and an example, so new knowledge can reuse them.",
    )
    def schema_resource() -> str:
        return json.dumps(_read_for_resource(kb.schema, kb.namespace), indent=2, ensure_ascii=False)


def _read_for_resource(function: Callable[..., T], *args: Any) -> T:
    """Call a knowledge-base read for a resource; domain errors become resource errors the client sees."""
    try:
        return function(*args)
    except DuckgraphError as exc:
        raise ResourceError(str(exc)) from exc
