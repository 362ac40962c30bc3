"""Communities: global search, building them, and the reports the host writes (the `all` set)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from duckgraph.core.domain.model import (
    BuildCommunitiesResult,
    GlobalSearchResult,
    ReportSummary,
    ReportsToWrite,
    ReportsWritten,
    ReportTitle,
)
from duckgraph.core.mcp.progress import progress_reporter
from duckgraph.core.mcp.sampling import write_reports_by_sampling
from duckgraph.core.mcp.tools.common import (
    ADDITIVE,
    READ_ONLY,
    NamespaceArg,
    call,
    call_namespace,
    kb_of,
    titled,
    with_text,
    within,
)


def register_community_tools(server: MCPServer) -> None:
    @server.tool(title="Global search", annotations=titled(READ_ONLY, "Global search"))
    async def global_search(
        ctx: Context, query: Annotated[str, Field(min_length=1, max_length=2_000)],
        level: Annotated[int | None, within("global_search", "level")] = None,
        token_budget: Annotated[int, within("global_search", "token_budget")] = 2_000,
        namespace: NamespaceArg = None,
    ) -> Annotated[CallToolResult, GlobalSearchResult]:
        """For questions about the whole memory (main themes, overviews): the best community reports; level 0 is
        broadest."""
        result = await call(kb_of(ctx).communities.global_search, query, await call_namespace(ctx, namespace),
                             level=level, token_budget=token_budget)
        return with_text(result, result.text)

    @server.tool(title="Build communities", annotations=titled(ADDITIVE, "Build communities"))
    async def build_communities(ctx: Context, namespace: NamespaceArg = None) -> BuildCommunitiesResult:
        """Group entities into communities with reports, for global_search; kept fresh after."""
        namespace = await call_namespace(ctx, namespace)
        built = await call(kb_of(ctx).communities.build, namespace, progress_reporter(ctx))
        if ctx.mcp_server.reports_by_sampling:
            built.sampling = await write_reports_by_sampling(ctx, namespace)
        return built


def register_report_tools(server: MCPServer) -> None:
    """Reports written by the host (the summarize_communities prompt walks it through): in the `all` set only,
    since most hosts never write them and every listed tool costs tokens in every conversation."""

    @server.tool(title="Communities to summarize", annotations=titled(READ_ONLY, "Communities to summarize"))
    async def communities_to_summarize(
        ctx: Context, limit: Annotated[int, within("communities_to_summarize", "limit")] = 5,
        namespace: NamespaceArg = None,
    ) -> ReportsToWrite:
        """Communities lacking a written report, with material; answer with save_community_report."""
        return await call(kb_of(ctx).communities.to_write, await call_namespace(ctx, namespace), limit=limit)

    @server.tool(title="Save community report", annotations=titled(ADDITIVE, "Save community report"))
    async def save_community_report(
        ctx: Context, id: int, title: ReportTitle, summary: ReportSummary, namespace: NamespaceArg = None,
    ) -> ReportsWritten:
        """Store the report you wrote for a community."""
        return await call(kb_of(ctx).communities.save_host_report, await call_namespace(ctx, namespace), id, title,
                          summary)


