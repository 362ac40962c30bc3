"""What the tools share: the knowledge base of the call, running domain code on a worker thread, the
namespace argument, annotations and result helpers."""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AfterValidator, BaseModel, Field

from duckgraph.core.domain.cancellation import Cancellation
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.core.domain.search_options import TOOL_LIMITS
from duckgraph.core.web.add_urls import UrlFetching
from duckgraph.ports import DuckgraphError
from duckgraph.ports.errors import CallCancelled

log = logging.getLogger(__name__)
T = TypeVar("T")


def kb_of(ctx: Context) -> KnowledgeBase:
    # The server's own knowledge base (also the lifespan's): set on the calls the owner runs for its clients too.
    return ctx.mcp_server.knowledge_base


def fetcher_of(ctx: Context) -> UrlFetching:
    # The server's, from the composition root (core/bootstrap.py): add_urls refuses unless its settings allow it.
    return ctx.mcp_server.url_fetching


#: The client's call that the tool runs for, as the log names it ("call 7 (add_documents)"), and whether its tool
#: only reads: set for each tool call by the server (core/mcp/server.py, `naming_call`).
_CALL: ContextVar[tuple[str, bool] | None] = ContextVar("duckgraph_mcp_call", default=None)


@contextmanager
def naming_call(label: str, read_only: bool) -> Iterator[None]:
    """Name the tool call that runs in the block, for what the log says of it once cancelled."""
    token = _CALL.set((label, read_only))
    try:
        yield
    finally:
        _CALL.reset(token)


async def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a knowledge-base call on a worker thread; domain errors become tool errors. Cancelled (the client's
    notifications/cancelled, or the client gone), it gets no answer, and none of its commits starts from then on."""
    name = getattr(function, "__name__", str(function))
    label, read_only = _CALL.get() or (name, False)
    run = _Run(label, read_only, functools.partial(function, *args, **kwargs))
    try:
        # abandon_on_cancel: a client that goes away cancels its calls, and the server must not wait for one
        # (it may be loading the model) before it closes the file (core/mcp/server.py's lifespan).
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        run.abandon()
        raise
    except DuckgraphError as exc:
        raise ToolError(str(exc)) from exc
    except Exception as exc:
        log.exception("unexpected failure in %s", name)
        raise ToolError(f"internal error ({type(exc).__name__}): {exc}. The server log has the details.") from exc


class _Run:
    """A call on a worker thread, and what its cancellation did, which the client (who gets no answer) would
    otherwise never learn (docs/clients.md). A thread cannot be stopped midway: the call runs on, under a
    `Cancellation` that refuses its commits once it is cancelled, so a write cancelled before it committed stores
    nothing, and one that had committed stays stored. The log says which it was."""

    def __init__(self, label: str, read_only: bool, work: Callable[[], T]) -> None:
        self.label, self.read_only, self._work = label, read_only, work
        self.cancellation = Cancellation()
        self._lock = threading.Lock()
        self._abandoned = False
        self._ended = False

    def __call__(self) -> Any:
        try:
            with self.cancellation.applied():
                result = self._work()
        except CallCancelled:
            self._end(logging.INFO, "stopped before its next commit: nothing more was stored"
                      if self.cancellation.committed else "stopped before it committed: nothing was stored")
            raise
        except BaseException as exc:
            self._end(logging.WARNING, f"failed after its cancellation ({type(exc).__name__}: {exc})")
            raise
        self._end(logging.INFO, "finished after its cancellation: " + (
            "what it committed is stored" if self.cancellation.committed else "it stored nothing"))
        return result

    def abandon(self) -> None:
        committed, committing = self.cancellation.cancel()
        with self._lock:
            self._abandoned, ended = True, self._ended
        if self.read_only:
            log.info("%s was cancelled: it only reads, and changes nothing", self.label)
        elif committing:  # only its end tells whether that commit is stored
            log.warning("%s was cancelled while it commits: what it commits is stored, unless it fails (the log "
                        "says so); it commits nothing after that", self.label)
        elif committed:
            log.warning("%s was cancelled after it committed: it is stored%s", self.label,
                        "" if ended else "; it commits nothing more")
        else:
            log.warning("%s was cancelled before it committed: nothing was stored", self.label)

    def _end(self, level: int, how: str) -> None:
        with self._lock:
            self._ended, abandoned = True, self._abandoned
        if abandoned and not self.read_only:
            log.log(level, "the cancelled %s %s", self.label, how)


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
ADDITIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
FETCHING = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=True)
EntityName = Annotated[str, Field(min_length=1, max_length=300)]


def within(tool: str, name: str) -> Any:
    """The schema bounds of a tool's number argument, from the one table the command line checks too."""
    low, high = TOOL_LIMITS[tool][name]
    return Field(ge=low, le=high)


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
    return await default(ctx) if default is not None else kb_of(ctx).namespace


def titled(annotations: ToolAnnotations, title: str) -> ToolAnnotations:
    return annotations.model_copy(update={"title": title})


def json_result(result: BaseModel, key: str | None = None) -> CallToolResult:
    """The reference server's result: text content is its JSON (of `result[key]` when given, as the reference
    prints bare lists) with two-space indents, structured content is `result` without empty optional fields."""
    structured = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    text = json.dumps(structured[key] if key else structured, indent=2, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def model_result(result: BaseModel) -> CallToolResult:
    """A result as the SDK makes one from a returned model: its JSON as text and as structured content."""
    structured = result.model_dump(mode="json")
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(structured, indent=2))],
                          structured_content=structured)


def with_text(result: Any, text: str) -> CallToolResult:
    """A result whose text is the reference server's message and whose structured content is `result`."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=result.model_dump(mode="json"))
