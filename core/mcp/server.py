"""The MCP server: its lifespan, transports, resources and prompts, and the sharing of one file between servers.
With core/mcp/tools.py (the tools), the only modules that import `mcp`."""

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
from mcp.types import CallToolResult, TextContent, Tool as MCPTool
from pydantic import Field

from duckgraph.core import __version__
from duckgraph.core.bootstrap import Services
from duckgraph.core.mcp.http import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    MCP_PATH,
    BearerTokenMiddleware,
    check_binding,
    is_loopback,
    run_asgi,
)
from duckgraph.core.mcp import tool_listing
from duckgraph.core.sharing import share as sharing
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.sharing.share import FileShare, RunLocally
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
    the database file (see core/sharing/share.py), its tool calls and resource reads run there, through the same
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
    # core/mcp/tool_listing.py). Every use of the tools in the SDK goes through its tool manager, a private attribute,
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

    def remember_listing(self) -> None:
        """Keep the listing of the built tools for later starts when none made ahead of time fits here (see
        core/mcp/tool_listing.py)."""
        if self._tools_built and tool_listing.shipped(self.tool_set) is None:
            tool_listing.remember(self.tool_set, _as_json(anyio.run(super().list_tools)))  # the SDK's own listing

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
                report = progress_reporter(context) if context is not None else None
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
        warm_up = _WarmUp(kb, server)
        if services.settings.warm_up:
            # A client has no use for the model (the owner embeds) until it takes the file over. Registered
            # before the role is read: a takeover in between still starts it (`start` runs once).
            if share is not None:
                share.after_takeover(warm_up.start)
            if share is None or share.is_owner:
                warm_up.start()
        try:
            yield kb
        finally:
            # The warm-up may still open the file: it stops at its next step, or ends the one under way, before
            # the file closes.
            await anyio.to_thread.run_sync(warm_up.stop, WARM_UP_EXIT_WAIT_SECONDS)
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
    return _as_json(await server.list_tools())


def _as_json(tools: list[MCPTool]) -> list[dict[str, Any]]:
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def register_tools(server: MCPServer, tool_set: str) -> None:
    """Add the tools of `tool_set` (graphrag, memory or all) to `server`."""
    # Imported when the tools are built, after the handshake: their pydantic models (~20 ms to define) are not
    # needed to answer tools/list from the shipped listing.
    from duckgraph.core.mcp.tools import register_tools as register

    register(server, tool_set)



class _WarmUp:
    """The background warm-up of a server: its tools, then the knowledge base and the embedder, so that the first
    call waits for none of them. A closing server stops it between steps and waits for the step under way:
    its native work (PyTorch's import, the ONNX export) cut short by the interpreter's exit aborts the process."""

    def __init__(self, kb: KnowledgeBase, server: DuckgraphServer) -> None:
        self._kb, self._server = kb, server
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start it in a thread, unless it has started already or the server is closing."""
        with self._lock:
            if self._thread is None and not self._stopping.is_set():
                self._thread = threading.Thread(target=self._run, name="duckgraph-warm-up", daemon=True)
                self._thread.start()

    def stop(self, timeout: float) -> None:
        """No new step; wait up to `timeout` seconds for the one under way (at worst the model's import, ~10 s)."""
        with self._lock:
            self._stopping.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        if self._stopping.wait(WARM_UP_DELAY_SECONDS):
            return
        self._server.build_tools()
        try:
            # The listing last: a failure to keep it must not keep the file closed or the model cold.
            for step in (self._kb.open, self._kb.embedder.warm_up, self._server.remember_listing):
                if self._stopping.is_set():
                    return
                step()
            log.info("knowledge base open and embedder ready")
        except Exception as exc:  # the first tool call reports the same problem to the model
            log.warning("warm-up failed: %s", exc)


def progress_reporter(ctx: Context) -> Callable[[int, int, str], None]:
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

    try:
        embedder_id = kb.embedder.id
    except Exception:  # only informative here; the first tool call reports a broken embedder
        embedder_id = None
    try:
        share = FileShare(services.settings.db, owner_side, on_takeover=kb.open,
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
        from duckgraph.core.domain.model import GraphStats  # the tools' models are imported when first needed

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
