"""duckgraph's MCP tools called by name outside an MCP session (the web UI, core/ui/): the same tool functions,
validation and error texts as a call from a model, run on this process's knowledge base while it owns the file,
else forwarded to the duckgraph server that owns it (core/sharing/), as a second `duckgraph serve` would.

Also the reads of core/domain/browse.py that no tool answers, run here or on the owner the same way."""

from __future__ import annotations

import functools
import logging
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

from duckgraph.core.bootstrap import Services
from duckgraph.core.domain import browse
from duckgraph.core.mcp.forwarding import start_sharing
from duckgraph.core.mcp.server import STOP_DRAIN_SECONDS, build_server
from duckgraph.core.mcp.warmup import WarmUp
from duckgraph.core.sharing import RunLocally
from duckgraph.ports import DuckgraphError

log = logging.getLogger(__name__)


class CallFailed(DuckgraphError):
    """A tool refused or failed the call; the message is the tool's error text."""


class DirectCalls:
    """The tools of every set, callable by name; `start` settles who owns the file, `close` lets it go."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.share = start_sharing(services, lambda: build_server(services, tool_set="all"))
        self.server = build_server(services, self.share, tool_set="all")
        self._warm_up = WarmUp(services.knowledge_base, self.server.build_tools, self.server.remember_listing)
        self._schemas: dict[str, dict[str, Any]] | None = None

    @property
    def role(self) -> str:
        """owner (this process opened the file) or client (another duckgraph process holds it)."""
        return "owner" if self.share is None or self.share.is_owner else "client"

    def start(self) -> None:
        """Open the file and load the model in the background while this process owns the file (or once it
        takes it over), so that the first search waits for neither."""
        if self.share is not None:
            self.share.after_takeover(self._warm_up.start)
        if self.role == "owner":
            self._warm_up.start()

    async def tools(self) -> dict[str, dict[str, Any]]:
        """Every tool's input schema, by name."""
        if self._schemas is None:
            self._schemas = {tool.name: tool.input_schema for tool in await self.server.list_tools()}
        return self._schemas

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured result (or {"text": ...} for a tool without one); CallFailed with its error."""
        try:
            result = await self.server.call_tool(name, arguments)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                log.exception("tool %r raised an unexpected exception", name)
            raise CallFailed(str(exc)) from exc
        text = "\n".join(block.text for block in result.content if getattr(block, "type", None) == "text")
        if result.is_error:
            raise CallFailed(text or f"{name} failed")
        return result.structured_content if result.structured_content is not None else {"text": text}

    async def browse(self, view: str, namespace: str | None, arguments: dict[str, Any]) -> dict[str, Any]:
        """A read of core/domain/browse.py, on the owner of the file while another process holds it."""
        if self.share is not None and not self.share.is_owner:
            params = {"view": view, "namespace": namespace, "arguments": arguments}
            try:
                return await anyio.to_thread.run_sync(functools.partial(
                    self.share.call, "browse", params, repeatable=True), abandon_on_cancel=True)
            except RunLocally:  # this process has taken the file over meanwhile
                pass
        return await anyio.to_thread.run_sync(functools.partial(
            browse.run, self.services.knowledge_base, view, namespace, arguments), abandon_on_cancel=True)

    def close(self) -> None:
        """Stop the warm-up and close the file, or hand it to the next server that wants it."""
        self._warm_up.stop()
        close = functools.partial(self.services.knowledge_base.close, final=True)
        if self.share is not None:
            self.share.close(finalize=close, drain_seconds=STOP_DRAIN_SECONDS)
        else:
            close()
