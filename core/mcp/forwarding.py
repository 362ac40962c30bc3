"""MCP calls between the servers of one database file (core/sharing/): a client server forwards its tool calls
and resource reads to the owner, and the owner runs them through the same tool functions as its own calls."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent

from duckgraph.core.bootstrap import Services
from duckgraph.core.domain.namespaces import check_namespace
from duckgraph.core.mcp import tool_listing
from duckgraph.core.mcp.progress import progress_reporter
from duckgraph.core.sharing import (
    CallCancel,
    CancelSignal,
    FileShare,
    ForeignFileError,
    RequestCancelled,
    RunLocally,
    current_cancel,
    supported,
)
from duckgraph.ports import DuckgraphError, InvalidInputError

log = logging.getLogger(__name__)


# -- the client's side -------------------------------------------------------------------------------------


async def forward_tool(share: FileShare, name: str, arguments: dict[str, Any], *, read_only: bool, namespace: str,
                       context: Context | None) -> CallToolResult | None:
    """The owner's result of a tool call, or None once this process owns the file (then it runs here)."""
    params = {"name": name, "arguments": arguments, "namespace": namespace}
    report = progress_reporter(context) if context is not None else None
    # Writes take turns on the owner (as they do in its knowledge base), so one that was still waiting
    # when the owner died is sent on; an extraction runs long, so it does not hold the others up.
    exclusive = not read_only and not arguments.get("extract")
    cancel = CallCancel()
    try:
        # Reads are sent again if the owner goes away before answering; writes that started never are.
        # Abandoned on cancel, as the calls run here are (core/mcp/tools/common.py): a stopping server waits for no owner.
        result = await anyio.to_thread.run_sync(functools.partial(
            share.call, "tool", params, repeatable=read_only, exclusive=exclusive, progress=report, cancel=cancel),
            abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        # The owner runs the call: tell it, so that it stops it as it stops a cancelled call of its own.
        _log_cancel(cancel.cancel(), share, name, read_only, context)
        raise
    except RunLocally:  # this process has taken the file over meanwhile
        return None
    except DuckgraphError as exc:
        raise ToolError(str(exc)) from exc
    return CallToolResult.model_validate(result)


def _log_cancel(outcome: str, share: FileShare, name: str, read_only: bool, context: Context | None) -> None:
    """Say in this server's log what the cancellation of a forwarded call did (its client gets no answer)."""
    try:
        label = f"call {context.request_id} ({name})" if context is not None else f"a call of {name}"
    except ValueError:
        label = f"a call of {name}"
    owner = f"the server that owns the file (pid {share.owner_pid})"
    if outcome == "unsent":
        log.info("%s was cancelled before it was sent to %s: it did not run", label, owner)
    elif outcome == "told":
        log.log(logging.INFO if read_only else logging.WARNING, "%s was cancelled: %s is told to stop it%s", label,
                owner, "" if read_only else " (none of its commits starts from then on; that server's log says "
                "whether anything was stored)")
    elif outcome == "unsupported" and not read_only:
        log.warning("%s was cancelled, but %s runs an older duckgraph that cannot be told: it runs the call to its "
                    "end, and what it writes is stored", label, owner)


async def forward_resource(share: FileShare, uri: str, namespace: str) -> list[ReadResourceContents] | None:
    """The owner's contents of a resource, or None once this process owns the file (then it reads it here)."""
    params = {"uri": uri, "namespace": namespace}
    try:
        contents = await anyio.to_thread.run_sync(functools.partial(
            share.call, "resource", params, repeatable=True), abandon_on_cancel=True)
    except RunLocally:
        return None
    except DuckgraphError as exc:
        raise ResourceError(str(exc)) from exc
    return [ReadResourceContents(content=c["text"], mime_type=c.get("mime_type")) for c in contents]


# -- the owner's side --------------------------------------------------------------------------------------


class _RelayContext(Context):
    """The context of a call run for a client server: progress goes back over the socket to that server, and a
    call that names no namespace runs in that server's default one (`client_namespace`, see
    DuckgraphServer.default_namespace)."""

    _relay: Any = None
    _client_namespace: str | None = None

    def __init__(self, *, relay: Callable[..., None] | None = None, client_namespace: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._relay = relay
        self._client_namespace = client_namespace

    @property
    def client_namespace(self) -> str | None:
        return self._client_namespace

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        if self._relay is not None:
            self._relay(progress, total, message)


class _OwnerSide:
    """What the owner of the file runs for its client servers (the `sharing.Handler`).

    Tool calls and resource reads go through a server with every tool set registered (a client may expose
    another set than this one) over this process's knowledge base, made by `build_executor` when first needed:
    the same tool functions, validation and error texts as a call made here. Each runs on an event loop of its
    own, in the connection's thread.
    """

    def __init__(self, services: Services, build_executor: Callable[[], MCPServer]) -> None:
        self.services = services
        self.share: FileShare | None = None
        self._build_executor = build_executor
        self._lock = threading.Lock()
        self._server: MCPServer | None = None

    def __call__(self, method: str, params: dict[str, Any], progress: Callable[..., None]) -> Any:
        kb = self.services.knowledge_base
        if method == "tool":
            return anyio.run(self._tool, params, progress, current_cancel())
        if method == "resource":
            return anyio.run(self._resource, params)
        if method == "status":
            return self.share.status() if self.share is not None else {"role": "owner"}
        if method == "health":
            return kb.health()
        if method == "backup":
            return kb.backup(params["path"], force=bool(params.get("force", False)))
        if method == "browse":  # the web UI's reads that no tool answers (core/mcp/direct.py)
            from duckgraph.core.domain import browse

            return browse.run(kb, str(params["view"]), params.get("namespace"), dict(params.get("arguments") or {}))
        raise InvalidInputError(f"unknown request {method!r}")

    def _executor(self) -> MCPServer:
        with self._lock:
            if self._server is None:
                self._server = self._build_executor()
            return self._server

    @staticmethod
    def _client_namespace(params: dict[str, Any]) -> str | None:
        """The namespace the client server's calls default to (None from a server that sends none: the owner's)."""
        namespace = params.get("namespace")
        return None if namespace is None else check_namespace(namespace)

    async def _tool(self, params: dict[str, Any], progress: Callable[..., None],
                    cancel: CancelSignal | None) -> dict[str, Any]:
        name = str(params["name"])
        server = self._executor()
        # The client server's cancel cancels this scope, as the SDK cancels a call of this server's own: the tool
        # (core/mcp/tools/common.py) then refuses the call's commits from then on, and logs what was stored.
        with anyio.CancelScope() as scope:
            if cancel is not None:
                cancel.on_cancel(functools.partial(_cancel_soon, asyncio.get_running_loop(), scope))
            try:
                context = _RelayContext(mcp_server=server, relay=progress,
                                        client_namespace=self._client_namespace(params))
                result = await server.call_tool(name, params.get("arguments") or {}, context)
            except Exception as exc:  # answered as MCPServer answers a failed call of its own
                if isinstance(exc, (ToolError, DuckgraphError)) and not isinstance(exc, UnexpectedToolError):
                    log.info("tool %r (for a client server) failed: %r", name, str(exc))
                else:
                    log.exception("tool %r (for a client server) raised an unexpected exception", name)
                result = CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)
        raise RequestCancelled(f"{name} was cancelled by the client server: none of its commits started after that")

    async def _resource(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        server = self._executor()
        context = _RelayContext(mcp_server=server, client_namespace=self._client_namespace(params))
        contents = await server.read_resource(str(params["uri"]), context)
        return [{"text": c.content if isinstance(c.content, str) else c.content.decode("utf-8", "replace"),
                 "mime_type": c.mime_type} for c in contents]


def _cancel_soon(loop: asyncio.AbstractEventLoop, scope: anyio.CancelScope) -> None:
    """Cancel `scope` from the connection's thread (`anyio.run` runs the owner's side on asyncio), without waiting."""
    try:
        loop.call_soon_threadsafe(scope.cancel)
    except RuntimeError:  # the loop is closed: the call has ended and was answered
        pass


def start_sharing(services: Services, build_executor: Callable[[], MCPServer]) -> FileShare | None:
    """Settle which duckgraph server owns the database file: this one, or another that this one forwards to.

    `build_executor` makes the server (every tool set) that runs the calls of client servers, while this one owns
    the file. Takes no time (a lock attempt and a socket); nothing is opened or loaded. None where the platform
    cannot share (no flock), or the lock file cannot be made: then this server opens the file itself, as before.
    """
    if not supported():
        return None
    kb = services.knowledge_base
    owner_side = _OwnerSide(services, build_executor)

    try:
        embedder_id = kb.embedder.id
    except Exception:  # only informative here; the first tool call reports a broken embedder
        embedder_id = None
    try:
        # "tools": a client forwards only to an owner that serves the same tools (another version is refused).
        share = FileShare(services.settings.db, owner_side, on_takeover=kb.open,
                          info={"namespace": kb.namespace, "embedder": embedder_id, "tools": tool_listing.surface()})
        share.start()
    except ForeignFileError:
        raise  # another user's lock file: serving around it would hide that someone poses as the owner
    except (OSError, DuckgraphError) as exc:
        log.warning("cannot share %s with other duckgraph servers (%s); this server opens it by itself",
                    services.settings.db, exc)
        return None
    owner_side.share = share
    return share
