"""The MCP tools. Thin: they validate, call the knowledge base on a worker thread, and turn domain errors into
tool errors the model can act on. The server imports this module when it builds its tools (after the handshake,
see core/mcp/tool_listing.py), so the pydantic models the tools name stay off the start-up path."""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AfterValidator, BaseModel, Field

from duckgraph.core.domain import memory_server as memory_compat
from duckgraph.core.domain.model import (
    BuildCommunitiesResult,
    GlobalSearchResult,
    ReportsToWrite,
    ReportsWritten,
    ChangesResult,
    EndRelationInput,
    Moment,
    RelationsEnded,
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
    NamespaceDeleted,
    NamespacesResult,
    PathResult,
    RelationInput,
    RelationRef,
    RelationsDeleted,
    MAX_OBSERVATIONS,
    MAX_DOCUMENTS_PER_CALL,
    MAX_EDGES_PER_CALL,
    MAX_NODES_PER_CALL,
    AddDocumentsResult,
    AddGraphResult,
    AddUrlsResult,
    DocumentInput,
    EdgeInput,
    Description,
    Name,
    NodeInput,
    Observation,
    Properties,
    SearchResult,
    TypeLabel,
)
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain import namespaces
from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.core.mcp.progress import progress_reporter
from duckgraph.core.web.add_urls import UrlFetching
from duckgraph.ports import DuckgraphError

log = logging.getLogger(__name__)
T = TypeVar("T")


def register_tools(server: MCPServer, tool_set: str) -> None:
    """Add the tools of `tool_set` (graphrag, memory or all) to `server`.

    Both sets have delete_entities and delete_relations, each in its own vocabulary (graphrag: names and
    {source, target, type}; memory: the reference's entityNames and {from, to, relationType}). A server lists a
    name once, so with `all` (also what the owner of a shared file runs its clients' calls with) one tool of each
    name takes either vocabulary and answers in the one it was called with."""
    if tool_set in ("graphrag", "all"):
        _register_graphrag_tools(server)
        _register_namespace_tools(server)
        _register_community_tools(server)
    if tool_set in ("memory", "all"):
        _register_memory_tools(server)
    if tool_set == "all":
        _register_report_tools(server)
    {"graphrag": _register_graphrag_deletes, "memory": _register_memory_deletes,
     "all": _register_either_deletes}[tool_set](server)
    for tool in server._tool_manager.list_tools():  # noqa: SLF001 (see core/mcp/server.py)
        tool.description = " ".join(inspect.cleandoc(tool.description).splitlines())  # a docstring's line breaks
        if tool.name in GRAPHRAG_TOOLS:
            tool.parameters = _lean_schema(tool.parameters)


#: The default set, whose whole listing a model pays for in every conversation (tests/integration/test_tool_cost.py).
GRAPHRAG_TOOLS = frozenset({
    "add_knowledge_graph", "add_documents", "search", "get_entities", "update_entity", "merge_entities",
    "find_paths", "graph_stats", "delete_entities", "delete_relations", "list_namespaces", "delete_namespace",
    "end_relations", "recent_changes",
    "global_search", "build_communities", "add_urls",
})


def _lean_schema(schema: Any) -> Any:
    """`schema` without what a model does not need to call the tool: pydantic's titles (the property names
    again), `additionalProperties: true` (the default) and the null alternative of optional arguments (leaving
    them out is how a model says null). Validation still uses the tool's own models."""
    if isinstance(schema, list):
        return [_lean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lean: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            lean[key] = {name: _lean_schema(item) for name, item in value.items()}
        elif not (key == "title" and isinstance(value, str)) and not (key == "additionalProperties" and value is True):
            lean[key] = _lean_schema(value)
    options = lean.get("anyOf")
    if "default" in lean and lean["default"] is None and options and len(options) == 2 and {"type": "null"} in options:
        kept = next(option for option in options if option != {"type": "null"})
        del lean["anyOf"], lean["default"]
        lean = {**kept, **lean}
    return lean


def _kb(ctx: Context) -> KnowledgeBase:
    # The server's own knowledge base (also the lifespan's): set on the calls the owner runs for its clients too.
    return ctx.mcp_server.knowledge_base


def _fetching(ctx: Context) -> UrlFetching:
    # The server's, from the composition root (core/bootstrap.py): add_urls refuses unless its settings allow it.
    return ctx.mcp_server.url_fetching


async def _call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a knowledge-base call on a worker thread; domain errors become tool errors."""
    try:
        # abandon_on_cancel: a client that goes away cancels its calls, and the server must not wait for one
        # (it may be loading the model) before it closes the file (core/mcp/server.py's lifespan).
        return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs), abandon_on_cancel=True)
    except DuckgraphError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("unexpected failure in %s", getattr(function, "__name__", function))
        raise ToolError(f"internal error ({type(exc).__name__}): {exc}. The server log has the details.") from exc


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
ADDITIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
FETCHING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
EntityName = Annotated[str, Field(min_length=1, max_length=300)]


def _valid_namespace(name: str | None) -> str | None:
    return None if name is None else check_namespace(name)


#: The optional `namespace` argument of every tool that reads or writes; resolve it with `call_namespace`. Checked
#: by a validator rather than a schema pattern, and explained once in the server's instructions
#: (core/mcp/prompts.py), not in every tool: each word here would be paid for in ~20 tools of every listing.
NamespaceArg = Annotated[str | None, AfterValidator(_valid_namespace)]


async def call_namespace(ctx: Context, namespace: str | None) -> str:
    """The namespace a call works in: its `namespace` argument, else its client's default (the server's setting,
    its MCP roots, or, for a call run for another server of the file, that server's; see core/mcp/server.py)."""
    if namespace is not None:
        try:
            return check_namespace(namespace)
        except DuckgraphError as exc:
            raise ToolError(str(exc)) from exc
    default = getattr(ctx.mcp_server, "default_namespace", None)
    return await default(ctx) if default is not None else _kb(ctx).namespace


def _register_graphrag_tools(server: MCPServer) -> None:
    # Every word here is paid for in every conversation: the descriptions say when to use a tool and what is not
    # obvious from its schema, no more (tests/integration/test_tool_cost.py holds the whole listing to 2,000 tokens).
    @server.tool(title="Add knowledge graph", annotations=_titled(ADDITIVE, "Add knowledge graph"))
    async def add_knowledge_graph(
        ctx: Context,
        nodes: Annotated[list[NodeInput], Field(max_length=MAX_NODES_PER_CALL)] = [],  # noqa: B006
        edges: Annotated[list[EdgeInput], Field(max_length=MAX_EDGES_PER_CALL)] = [],  # noqa: B006
        namespace: NamespaceArg = None,
    ) -> AddGraphResult:
        """Remember facts: store entities (nodes) and relations (edges) in long-term memory. A node named like a
        stored entity (any case) is merged into it and its observations are added. source_ids: ids from
        add_documents. All or nothing: an invalid item fails the call and nothing is written."""
        return await _call(_kb(ctx).add_knowledge_graph, nodes, edges, namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Add documents", annotations=_titled(ADDITIVE, "Add documents"))
    async def add_documents(
        ctx: Context,
        documents: Annotated[list[DocumentInput], Field(min_length=1, max_length=MAX_DOCUMENTS_PER_CALL)],
        extract: bool = False,
        namespace: NamespaceArg = None,
    ) -> AddDocumentsResult:
        """Store source texts (notes, pages, transcripts) for search to cite as passages. The same id with new
        text replaces it. extract: the server's extractor, if configured, also stores their entities and
        relations; otherwise extract them yourself and call add_knowledge_graph."""
        return await _call(_kb(ctx).add_documents, documents, extract=extract, progress=progress_reporter(ctx),
                           namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Add URLs", annotations=_titled(FETCHING, "Add URLs"))
    async def add_urls(
        ctx: Context,
        urls: Annotated[list[str], Field(min_length=1)],
        crawl_depth: Annotated[int, Field(ge=0, le=3)] = 0,
        namespace: NamespaceArg = None,
    ) -> AddUrlsResult:
        """Fetch web pages as documents (id: the URL). crawl_depth: follow same-site links. Needs fetch_urls
        on."""
        return await _call(_fetching(ctx).add_urls, _kb(ctx), urls, depth=crawl_depth,
                           progress=progress_reporter(ctx), namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Search memory", annotations=_titled(READ_ONLY, "Search memory"))
    async def search(
        ctx: Context,
        query: Annotated[str, Field(min_length=1, max_length=2_000)],
        k_anchors: Annotated[int, Field(ge=1, le=50)] = 5,
        hops: Annotated[int, Field(ge=0, le=3)] = 2,
        max_nodes: Annotated[int, Field(ge=1, le=200)] = 30,
        max_passages: Annotated[int, Field(ge=0, le=50)] = 5,
        token_budget: Annotated[int, Field(ge=100, le=50_000)] = 2_000,
        namespace: NamespaceArg = None,
        as_of: Annotated[Moment | None, Field(description="Facts valid then, no later passages (default now).")] = None,
        include_history: Annotated[bool, Field(description="Add ended facts.")] = False,
        after: Annotated[Moment | None, Field(description="Window start: facts, passages by document time.")] = None,
        before: Moment | None = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search memory before answering from it, also for multi-step questions: finds the entities (anchors)
        the query is about, follows relations `hops` steps, and returns the facts, entities and source passages
        that best answer it, with scores comparable across queries."""
        result = await _call(
            _kb(ctx).search, query, k_anchors=k_anchors, hops=hops, max_nodes=max_nodes, max_passages=max_passages,
            token_budget=token_budget, namespace=await call_namespace(ctx, namespace), as_of=as_of,
            include_history=include_history, after=after, before=before,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=result.text)],
            structured_content=result.model_dump(mode="json"),
        )

    @server.tool(title="Get entities", annotations=_titled(READ_ONLY, "Get entities"))
    async def get_entities(
        ctx: Context, names: Annotated[list[EntityName], Field(min_length=1, max_length=100)],
        namespace: NamespaceArg = None,
    ) -> EntitiesResult:
        """Read all that is stored about entities named exactly (or by alias): description, aliases, properties,
        observations, relations."""
        kb = _kb(ctx)
        entities, missing = await _call(kb.curation.get_entities, names, await call_namespace(ctx, namespace))
        return EntitiesResult(entities=entities, not_found=missing)

    @server.tool(title="Update entity", annotations=_titled(DESTRUCTIVE, "Update entity"))
    async def update_entity(
        ctx: Context,
        name: EntityName,
        new_name: Annotated[Name | None, Field(description="The old name stays an alias.")] = None,
        type: TypeLabel | None = None,
        description: Description | None = None,
        aliases: Annotated[list[Name] | None, Field(max_length=50)] = None,
        properties: Properties | None = None,
        add_observations: Annotated[list[Observation], Field(max_length=MAX_OBSERVATIONS)] = [],  # noqa: B006
        remove_observations: Annotated[list[str], Field(max_length=MAX_OBSERVATIONS)] = [],  # noqa: B006
        namespace: NamespaceArg = None,
    ) -> EntityDetail:
        """Change one entity: rename it, replace its type, description, aliases or properties, add observations
        or remove them (exact text). For duplicates use merge_entities."""
        kb = _kb(ctx)
        return await _call(kb.curation.update_entity, name, await call_namespace(ctx, namespace), new_name=new_name,
                           type=type,
                           description=description, aliases=aliases, properties=properties,
                           add_observations=add_observations, remove_observations=remove_observations)

    @server.tool(title="Merge entities", annotations=_titled(DESTRUCTIVE, "Merge entities"))
    async def merge_entities(
        ctx: Context,
        sources: Annotated[list[EntityName], Field(min_length=1, max_length=50)],
        target: EntityName,
        namespace: NamespaceArg = None,
    ) -> MergeResult:
        """Merge duplicates (sources) into target: their relations, observations and properties move to it and
        their names become its aliases."""
        kb = _kb(ctx)
        return await _call(kb.curation.merge_entities, sources, target, await call_namespace(ctx, namespace))

    @server.tool(title="Find paths", annotations=_titled(READ_ONLY, "Find paths"))
    async def find_paths(
        ctx: Context,
        source: EntityName,
        target: EntityName,
        max_hops: Annotated[int, Field(ge=1, le=4)] = 3,
        max_paths: Annotated[int, Field(ge=1, le=20)] = 5,
        namespace: NamespaceArg = None,
    ) -> PathResult:
        """How are two entities connected? The shortest chains of relations between them, e.g.
        'A -FOUNDED-> B <-WORKS_AT- C'."""
        kb = _kb(ctx)
        return await _call(kb.curation.find_paths, source, target, await call_namespace(ctx, namespace),
                           max_hops=max_hops,
                           max_paths=max_paths)

    @server.tool(title="Graph stats", annotations=_titled(READ_ONLY, "Graph stats"))
    async def graph_stats(ctx: Context, namespace: NamespaceArg = None) -> GraphStats:
        """Size of the memory and its most common entity and relation types."""
        return GraphStats(**await _call(_kb(ctx).stats, await call_namespace(ctx, namespace)))

    @server.tool(title="End relations", annotations=_titled(DESTRUCTIVE, "End relations"))
    async def end_relations(
        ctx: Context, relations: Annotated[list[EndRelationInput], Field(min_length=1, max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> RelationsEnded:
        """A fact stopped being true: close the current relations, kept as history. delete_relations is for
        mistakes."""
        return await _call(_kb(ctx).end_relations, relations, namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Recent changes", annotations=_titled(READ_ONLY, "Recent changes"))
    async def recent_changes(
        ctx: Context, since: Moment | None = None, until: Moment | None = None,
        limit: Annotated[int, Field(ge=1, le=1_000)] = 50, namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, ChangesResult]:
        """What was written, newest first: entities, facts added or ended, documents."""
        result = await _call(_kb(ctx).recent_changes, since=since, until=until, limit=limit,
                             namespace=await call_namespace(ctx, namespace))
        return CallToolResult(content=[TextContent(type="text", text=result.text)],
                              structured_content=result.model_dump(mode="json"))


def _register_namespace_tools(server: MCPServer) -> None:
    @server.tool(title="List namespaces", annotations=_titled(READ_ONLY, "List namespaces"))
    async def list_namespaces(ctx: Context) -> NamespacesResult:
        """The separate memories (namespaces) in this file, with their sizes."""
        return await _call(namespaces.list_namespaces, _kb(ctx), await call_namespace(ctx, None))

    @server.tool(title="Delete namespace", annotations=_titled(DESTRUCTIVE, "Delete namespace"))
    async def delete_namespace(
        ctx: Context, namespace: Annotated[str, AfterValidator(check_namespace)],
        confirm: Annotated[str, Field(description="The name again.")],
    ) -> NamespaceDeleted:
        """Delete a whole memory (namespace) for good; only when the user asks."""
        return await _call(namespaces.delete_namespace, _kb(ctx), namespace, confirm,
                           await call_namespace(ctx, None))


def _register_community_tools(server: MCPServer) -> None:
    @server.tool(title="Global search", annotations=_titled(READ_ONLY, "Global search"))
    async def global_search(
        ctx: Context, query: Annotated[str, Field(min_length=1, max_length=2_000)],
        level: Annotated[int | None, Field(ge=0, le=20)] = None,
        token_budget: Annotated[int, Field(ge=100, le=50_000)] = 2_000, namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, GlobalSearchResult]:
        """For questions about the whole memory (main themes, overviews): the best community reports; level 0 is
        broadest."""
        result = await _call(_kb(ctx).communities.global_search, query, await call_namespace(ctx, namespace),
                             level=level, token_budget=token_budget)
        return CallToolResult(content=[TextContent(type="text", text=result.text)],
                              structured_content=result.model_dump(mode="json"))

    @server.tool(title="Build communities", annotations=_titled(ADDITIVE, "Build communities"))
    async def build_communities(ctx: Context, namespace: NamespaceArg = None) -> BuildCommunitiesResult:
        """Group entities into communities with reports, for global_search; kept fresh after."""
        namespace = await call_namespace(ctx, namespace)
        return await _call(_kb(ctx).communities.build, namespace, progress_reporter(ctx))


def _register_report_tools(server: MCPServer) -> None:
    """Reports written by the host (the summarize_communities prompt walks it through): in the `all` set only,
    since most hosts never write them and every listed tool costs tokens in every conversation."""

    @server.tool(title="Communities to summarize", annotations=_titled(READ_ONLY, "Communities to summarize"))
    async def communities_to_summarize(
        ctx: Context, limit: Annotated[int, Field(ge=1, le=50)] = 5, namespace: NamespaceArg = None,
    ) -> ReportsToWrite:
        """Communities lacking a written report, with material; answer with save_community_report."""
        return await _call(_kb(ctx).communities.to_write, await call_namespace(ctx, namespace), limit=limit)

    @server.tool(title="Save community report", annotations=_titled(ADDITIVE, "Save community report"))
    async def save_community_report(
        ctx: Context, id: int, title: Annotated[str, Field(min_length=1, max_length=200)],
        summary: Annotated[str, Field(min_length=1, max_length=4_000)], namespace: NamespaceArg = None,
    ) -> ReportsWritten:
        """Store the report you wrote for a community."""
        namespace = await call_namespace(ctx, namespace)

        def save() -> ReportsWritten:
            service = _kb(ctx).communities
            service.save_written(namespace, id, title, summary)
            return ReportsWritten(namespace=namespace, written=1,
                                  remaining=len(service.to_write(namespace, limit=1).communities))

        return await _call(save)


# -- delete_entities and delete_relations, in each set's vocabulary (see register_tools) --------------------


_DELETE_ENTITIES = "Delete entities (named exactly or by alias) and their relations."
_DELETE_RELATIONS = "Delete wrong or outdated relations; the entities stay."


def _register_graphrag_deletes(server: MCPServer) -> None:
    @server.tool(title="Delete entities", description=_DELETE_ENTITIES,
                 annotations=_titled(DESTRUCTIVE, "Delete entities"))
    async def delete_entities(
        ctx: Context, names: Annotated[list[EntityName], Field(min_length=1, max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> DeletedSummary:
        return await _delete_entities(ctx, names, namespace)

    @server.tool(title="Delete relations", description=_DELETE_RELATIONS,
                 annotations=_titled(DESTRUCTIVE, "Delete relations"))
    async def delete_relations(
        ctx: Context, relations: Annotated[list[RelationRef], Field(min_length=1, max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> RelationsDeleted:
        return await _delete_relations(ctx, relations, namespace)


def _register_memory_deletes(server: MCPServer) -> None:
    """The reference memory server's shapes, and its texts."""

    # The reference accepts empty lists here (and succeeds doing nothing), so these do too.
    @server.tool(title="Delete Entities", annotations=_titled(DESTRUCTIVE, "Delete Entities"))
    async def delete_entities(
        ctx: Context,
        entityNames: Annotated[list[EntityName], Field(max_length=1_000,  # noqa: N803
                                                       description="An array of entity names to delete")],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryDeleteResult]:
        """Delete multiple entities and their associated relations from the knowledge graph. Only exactly named
        entities (or a unique alias) are deleted; names that match nothing are reported in not_found."""
        return await _delete_entities_memory(ctx, entityNames, namespace)

    @server.tool(title="Delete Relations", annotations=_titled(DESTRUCTIVE, "Delete Relations"))
    async def delete_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(max_length=1_000,
                                                        description="An array of relations to delete")],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryDeleteResult]:
        """Delete multiple relations ({from, to, relationType}) from the knowledge graph; relations that do not
        exist are reported in not_found. The entities stay."""
        return await _delete_relations_memory(ctx, relations, namespace)


def _register_either_deletes(server: MCPServer) -> None:
    """For `all`: one tool per name, taking either set's vocabulary (see register_tools). Their results differ
    in shape with the vocabulary, so they declare no output schema."""

    @server.tool(title="Delete entities", annotations=_titled(DESTRUCTIVE, "Delete entities"))
    async def delete_entities(
        ctx: Context,
        names: Annotated[list[EntityName] | None, Field(max_length=1_000)] = None,
        entityNames: Annotated[list[EntityName] | None, Field(max_length=1_000)] = None,  # noqa: N803
        namespace: NamespaceArg = None,
    ) -> CallToolResult:
        """Delete entities named exactly (or by alias) with their relations: names (or entityNames, the memory
        tools' spelling)."""
        if (names is None) == (entityNames is None):
            raise ToolError("give the entities to delete as names (or as entityNames), once")
        if names is not None:
            return _model_result(await _delete_entities(ctx, names, namespace))
        return await _delete_entities_memory(ctx, entityNames or [], namespace)

    @server.tool(title="Delete relations", annotations=_titled(DESTRUCTIVE, "Delete relations"))
    async def delete_relations(
        ctx: Context, relations: Annotated[list[RelationRef | RelationInput], Field(max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> CallToolResult:
        """Delete relations, all {source, target, type} or all {from, to, relationType}; the entities stay."""
        kinds = {type(r) for r in relations}
        if len(kinds) > 1:
            raise ToolError("give every relation as {source, target, type}, or every one as {from, to, relationType}")
        if kinds == {RelationRef}:
            return _model_result(await _delete_relations(ctx, relations, namespace))
        return await _delete_relations_memory(ctx, relations, namespace)


async def _delete_entities(ctx: Context, names: list[str], namespace: str | None) -> DeletedSummary:
    return await _call(_kb(ctx).curation.delete_entities, names, await call_namespace(ctx, namespace))


async def _delete_relations(ctx: Context, relations: list[RelationRef], namespace: str | None) -> RelationsDeleted:
    return await _call(_kb(ctx).curation.delete_relations, relations, await call_namespace(ctx, namespace))


async def _delete_entities_memory(ctx: Context, names: list[str], namespace: str | None) -> CallToolResult:
    summary = await _delete_entities(ctx, names, namespace)
    message = "Entities deleted successfully"
    return _with_text(MemoryDeleteResult(**summary.model_dump(), success=True, message=message), message)


async def _delete_relations_memory(
    ctx: Context, relations: list[RelationInput], namespace: str | None
) -> CallToolResult:
    refs = [RelationRef(source=r.from_, target=r.to, type=r.relationType) for r in relations]
    result = await _delete_relations(ctx, refs, namespace)
    message = "Relations deleted successfully"
    return _with_text(MemoryDeleteResult(
        deleted=[r.label() for r in result.deleted], not_found=[r.label() for r in result.not_found],
        edges_deleted=len(result.deleted), success=True, message=message), message)


def _register_memory_tools(server: MCPServer) -> None:
    """The reference MCP memory server's tools, same names and shapes (see core/memory_compat notes).

    Their text content is the JSON the reference returns (JSON.stringify(result, null, 2)); their structured
    content has the reference's fields, plus optional ones that are only present when they say something.
    """

    @server.tool(title="Create Entities", annotations=_titled(ADDITIVE, "Create Entities"))
    async def create_entities(
        ctx: Context,
        entities: Annotated[list[MemoryEntityInput], Field(max_length=MAX_NODES_PER_CALL)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryEntities]:
        """Create multiple new entities in the knowledge graph. An entity whose exact name exists already is
        skipped; one whose name differs from a stored one only in case or spacing is the same entity here: its
        observations are added to it, and it is returned with merged_into (the stored name)."""
        created = await _call(memory_compat.create_entities, _kb(ctx), entities,
                              namespace=await call_namespace(ctx, namespace))
        return _json_result(MemoryEntities(entities=created), "entities")

    @server.tool(title="Create Relations", annotations=_titled(ADDITIVE, "Create Relations"))
    async def create_relations(
        ctx: Context,
        relations: Annotated[list[RelationInput], Field(max_length=MAX_EDGES_PER_CALL)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryRelations]:
        """Create multiple new relations between entities in the knowledge graph. Relations should be in active
        voice. An end that does not exist is created with entityType 'unknown' (create_entities with its name
        later gives it a type and observations), and the relation's note says so. A relation that exists already
        is skipped; one joining an entity to itself is not stored and has a note."""
        created = await _call(memory_compat.create_relations, _kb(ctx), relations,
                              namespace=await call_namespace(ctx, namespace))
        return _json_result(MemoryRelations(relations=created), "relations")

    @server.tool(title="Add Observations", annotations=_titled(ADDITIVE, "Add Observations"))
    async def add_observations(
        ctx: Context,
        observations: Annotated[list[ObservationAddition], Field(max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, AddObservationsResult]:
        """Add new observations to existing entities in the knowledge graph. Returns, per entity, the
        observations that were new; an entity that does not exist fails the call and nothing is added."""
        results = await _call(memory_compat.add_observations, _kb(ctx), observations,
                              namespace=await call_namespace(ctx, namespace))
        return _json_result(AddObservationsResult(results=results), "results")

    @server.tool(title="Delete Observations", annotations=_titled(DESTRUCTIVE, "Delete Observations"))
    async def delete_observations(
        ctx: Context,
        deletions: Annotated[list[ObservationDeletion], Field(max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, ObservationsDeleted]:
        """Delete specific observations from entities in the knowledge graph. Entities that do not exist are
        ignored (and listed in not_found)."""
        result = await _call(memory_compat.delete_observations, _kb(ctx), deletions,
                             namespace=await call_namespace(ctx, namespace))
        return _with_text(result, result.message)

    @server.tool(title="Read Graph", annotations=_titled(READ_ONLY, "Read Graph"))
    async def read_graph(
        ctx: Context,
        offset: Annotated[int, Field(ge=0, description="Entities to skip (from next_offset).")] = 0,
        limit: Annotated[int, Field(ge=1, le=memory_compat.MAX_PAGE_SIZE,
                                    description="Entities per page.")] = memory_compat.DEFAULT_PAGE_SIZE,
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Read the knowledge graph, a page at a time: entities in creation order with the relations that start
        at them. When more entities remain, the result has next_offset: call again with offset=next_offset."""
        graph = await _call(memory_compat.read_graph, _kb(ctx), offset=offset, limit=limit,
                            namespace=await call_namespace(ctx, namespace))
        return _json_result(graph)

    @server.tool(title="Search Nodes", annotations=_titled(READ_ONLY, "Search Nodes"))
    async def search_nodes(
        ctx: Context,
        query: Annotated[str, Field(max_length=2_000, description="The search query to match against entity "
                                                                  "names, types, and observation content")],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Search for nodes in the knowledge graph based on a query: every entity whose name, type or an
        observation contains it (ignoring case), and the entities it is about by meaning, most relevant first,
        with the relations that touch them. Nothing relevant: an empty result."""
        graph = await _call(memory_compat.search_nodes, _kb(ctx), query, namespace=await call_namespace(ctx, namespace))
        return _json_result(graph)

    @server.tool(title="Open Nodes", annotations=_titled(READ_ONLY, "Open Nodes"))
    async def open_nodes(
        ctx: Context,
        names: Annotated[list[EntityName], Field(max_length=1_000, description="An array of entity names to "
                                                                              "retrieve")],
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, MemoryGraph]:
        """Open specific nodes in the knowledge graph by their names: the entities found (names that match
        nothing are skipped) and every relation with at least one end among them."""
        graph = await _call(memory_compat.open_nodes, _kb(ctx), names, namespace=await call_namespace(ctx, namespace))
        return _json_result(graph)


def _titled(annotations: ToolAnnotations, title: str) -> ToolAnnotations:
    return annotations.model_copy(update={"title": title})


def _json_result(result: BaseModel, key: str | None = None) -> CallToolResult:
    """The reference server's result: text content is its JSON (of `result[key]` when given, as the reference
    prints bare lists) with two-space indents, structured content is `result` without empty optional fields."""
    structured = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = json.dumps(structured[key] if key else structured, indent=2, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _model_result(result: BaseModel) -> CallToolResult:
    """A result as the SDK makes one from a returned model: its JSON as text and as structured content."""
    structured = result.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(structured, indent=2))],
                          structured_content=structured)


def _with_text(result: Any, text: str) -> CallToolResult:
    """A result whose text is the reference server's message and whose structured content is `result`."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=result.model_dump(mode="json"))
