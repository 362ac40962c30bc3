"""The default set's tools over the knowledge: add, search, read, change, end and list what changed."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from duckgraph.core.domain.document_reading import AFTER, BEFORE
from duckgraph.core.domain.document_reading import read_document as _read_document
from duckgraph.core.domain.history import MAX_CHANGES_OFFSET
from duckgraph.core.domain.model import (
    MAX_DOCUMENTS_PER_CALL,
    MAX_EDGES_PER_CALL,
    MAX_NODES_PER_CALL,
    MAX_OBSERVATIONS,
    AddDocumentsResult,
    AddGraphResult,
    AddUrlsResult,
    ChangesResult,
    Description,
    DocumentInput,
    DocumentRead,
    EdgeInput,
    EndRelationInput,
    EntitiesResult,
    GraphStats,
    MergeResult,
    Moment,
    Name,
    NodeInput,
    Observation,
    PathResult,
    Properties,
    RelationsEnded,
    SearchResult,
    SourceId,
    TypeLabel,
    UpdatedEntity,
)
from duckgraph.core.domain.limits import MAX_RELATIONS_OFFSET
from duckgraph.core.mcp.progress import progress_reporter
from duckgraph.core.mcp.tools.common import (
    ADDITIVE,
    DESTRUCTIVE,
    FETCHING,
    READ_ONLY,
    EntityName,
    NamespaceArg,
    call,
    call_namespace,
    fetcher_of,
    kb_of,
    titled,
    with_text,
    within,
)


def register_graphrag_tools(server: MCPServer) -> None:
    # Every word here is paid for in every conversation: the descriptions say when to use a tool and what is not
    # obvious from its schema, no more (tests/integration/test_tool_cost.py holds the whole listing to a token budget).
    @server.tool(title="Add knowledge graph", annotations=titled(ADDITIVE, "Add knowledge graph"))
    async def add_knowledge_graph(
        ctx: Context,
        nodes: Annotated[list[NodeInput], Field(max_length=MAX_NODES_PER_CALL)] = [],  # noqa: B006
        edges: Annotated[list[EdgeInput], Field(max_length=MAX_EDGES_PER_CALL)] = [],  # noqa: B006
        namespace: NamespaceArg = None,
    ) -> AddGraphResult:
        """Remember facts: store entities (nodes) and relations (edges) in long-term memory. A node named like a
        stored entity (any case) is merged into it and its observations are added. source_ids: ids from
        add_documents. All or nothing: an invalid item fails the call and nothing is written."""
        return await call(kb_of(ctx).add_knowledge_graph, nodes, edges, namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Add documents", annotations=titled(ADDITIVE, "Add documents"))
    async def add_documents(
        ctx: Context,
        documents: Annotated[list[DocumentInput], Field(min_length=1, max_length=MAX_DOCUMENTS_PER_CALL)],
        extract: bool = False,
        namespace: NamespaceArg = None,
    ) -> AddDocumentsResult:
        """Store source texts (notes, pages, transcripts) for search to cite as passages. extract: the server's
        extractor, if configured, also stores their entities and relations; otherwise extract them yourself and
        call add_knowledge_graph."""
        return await call(kb_of(ctx).add_documents, documents, extract=extract, progress=progress_reporter(ctx),
                           namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Add URLs", annotations=titled(FETCHING, "Add URLs"))
    async def add_urls(
        ctx: Context,
        urls: Annotated[list[str], Field(min_length=1)],
        crawl_depth: Annotated[int, Field(ge=0, le=3)] = 0,
        namespace: NamespaceArg = None,
    ) -> AddUrlsResult:
        """Fetch web pages as documents (id: the URL). crawl_depth: follow same-site links. Needs fetch_urls
        on."""
        return await call(fetcher_of(ctx).add_urls, kb_of(ctx), urls, depth=crawl_depth,
                           progress=progress_reporter(ctx), namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Search memory", annotations=titled(READ_ONLY, "Search memory"))
    async def search(
        ctx: Context,
        query: Annotated[str, Field(min_length=1, max_length=2_000)],
        k_anchors: Annotated[int, within("search", "k_anchors")] = 5,
        hops: Annotated[int, within("search", "hops")] = 2,
        max_nodes: Annotated[int, within("search", "max_nodes")] = 30,
        max_passages: Annotated[int, within("search", "max_passages")] = 5,
        token_budget: Annotated[int, within("search", "token_budget")] = 2_000,
        namespace: NamespaceArg = None,
        as_of: Annotated[Moment | None, Field(description="Facts valid then; if set, also no later passages.")] = None,
        include_history: Annotated[bool, Field(description="Add ended and planned facts.")] = False,
        after: Annotated[Moment | None, Field(description="Window start: facts, passages by document time.")] = None,
        before: Moment | None = None,
    ) -> Annotated[CallToolResult, SearchResult]:
        """Search memory before answering from it, also for multi-step questions: finds the entities (anchors)
        the query is about, follows relations `hops` steps, and returns the facts, entities and source passages
        that best answer it, with scores comparable across queries."""
        result = await call(
            kb_of(ctx).search, query, k_anchors=k_anchors, hops=hops, max_nodes=max_nodes, max_passages=max_passages,
            token_budget=token_budget, namespace=await call_namespace(ctx, namespace), as_of=as_of,
            include_history=include_history, after=after, before=before,
        )
        return with_text(result, result.text)

    @server.tool(title="Read document", annotations=titled(READ_ONLY, "Read document"))
    async def read_document(
        ctx: Context,
        document_id: SourceId,
        chunk_id: int | None = None,
        before: Annotated[int, within("read_document", "before")] = BEFORE,
        after: Annotated[int, within("read_document", "after")] = AFTER,
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, DocumentRead]:
        """Read a document's passages in order: before and after a search passage [document_id#chunk_id], or from
        the start."""
        result = await call(_read_document, kb_of(ctx), document_id, await call_namespace(ctx, namespace),
                            chunk_id=chunk_id, before=before, after=after)
        return with_text(result, result.text)

    @server.tool(title="Get entities", annotations=titled(READ_ONLY, "Get entities"))
    async def get_entities(
        ctx: Context, names: Annotated[list[EntityName], Field(min_length=1, max_length=100)],
        namespace: NamespaceArg = None,
        relations_offset: Annotated[int, Field(ge=0, le=MAX_RELATIONS_OFFSET, description=(
            "Skip this many of each entity's relations (strongest first): next_relations_offset of a truncated "
            "answer."))] = 0,
    ) -> EntitiesResult:
        """Read all that is stored about entities named exactly (or by alias): description, aliases, properties,
        observations, relations (50 at a time)."""
        kb = kb_of(ctx)
        namespace = await call_namespace(ctx, namespace)
        return await call(kb.curation.read_entities, names, namespace, relations_offset=relations_offset)

    @server.tool(title="Update entity", annotations=titled(DESTRUCTIVE, "Update entity"))
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
        # Listed in the `all` set only (ALL_SET_ARGUMENTS): the web page's Edit sends what it read.
        expected_fingerprint: Annotated[str | None, Field(max_length=64, description=(
            "The entity's fingerprint when it was read (the web UI's); refused, nothing changed, if it changed "
            "since."))] = None,
    ) -> UpdatedEntity:
        """Change one entity: rename it, replace its type, description, aliases or properties, add observations
        or remove them (exact text). For duplicates use merge_entities."""
        kb = kb_of(ctx)
        return await call(kb.curation.update_entity, name, await call_namespace(ctx, namespace), new_name=new_name,
                           type=type,
                           description=description, aliases=aliases, properties=properties,
                           add_observations=add_observations, remove_observations=remove_observations,
                           expected_fingerprint=expected_fingerprint)

    @server.tool(title="Merge entities", annotations=titled(DESTRUCTIVE, "Merge entities"))
    async def merge_entities(
        ctx: Context,
        sources: Annotated[list[EntityName], Field(min_length=1, max_length=50)],
        target: EntityName,
        namespace: NamespaceArg = None,
    ) -> MergeResult:
        """Merge duplicates (sources) into target: their relations, observations and properties move to it and
        their names become its aliases."""
        kb = kb_of(ctx)
        # Progress while the moved relations' vectors are computed again: minutes for a hub's thousands.
        return await call(kb.curation.merge_entities, sources, target, await call_namespace(ctx, namespace),
                          progress=progress_reporter(ctx))

    @server.tool(title="Find paths", annotations=titled(READ_ONLY, "Find paths"))
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
        kb = kb_of(ctx)
        return await call(kb.curation.find_paths, source, target, await call_namespace(ctx, namespace),
                           max_hops=max_hops,
                           max_paths=max_paths)

    @server.tool(title="Graph stats", annotations=titled(READ_ONLY, "Graph stats"))
    async def graph_stats(ctx: Context, namespace: NamespaceArg = None) -> GraphStats:
        """Size of the memory and its most common entity and relation types."""
        return GraphStats(**await call(kb_of(ctx).stats, await call_namespace(ctx, namespace)))

    @server.tool(title="End relations", annotations=titled(DESTRUCTIVE, "End relations"))
    async def end_relations(
        ctx: Context, relations: Annotated[list[EndRelationInput], Field(min_length=1, max_length=1_000)],
        namespace: NamespaceArg = None,
    ) -> RelationsEnded:
        """A fact stopped being true: close the current relations, kept as history. delete_relations is for
        mistakes."""
        return await call(kb_of(ctx).end_relations, relations, namespace=await call_namespace(ctx, namespace))

    @server.tool(title="Recent changes", annotations=titled(READ_ONLY, "Recent changes"))
    async def recent_changes(
        ctx: Context, since: Moment | None = None, until: Moment | None = None,
        limit: Annotated[int, within("recent_changes", "limit")] = 50, namespace: NamespaceArg = None,
        offset: Annotated[int, Field(ge=0, le=MAX_CHANGES_OFFSET, description=(
            "Skip this many changes (newest first): next_offset of a truncated answer."))] = 0,
    ) -> Annotated[CallToolResult, ChangesResult]:
        """Changes, newest first: entities, facts, documents added, updated, ended, replaced or deleted."""
        result = await call(kb_of(ctx).recent_changes, namespace=await call_namespace(ctx, namespace), since=since,
                            until=until, limit=limit, offset=offset)
        return with_text(result, result.text)
