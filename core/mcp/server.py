"""The MCP server over one knowledge base: its tools built when first needed (the shipped listing answers before
that), its calls forwarded while another process owns the file, and its lifespan (the warm-up, then closing or
handing over the file). Transports: core/mcp/transports.py; tools: core/mcp/tools/."""

from __future__ import annotations

import difflib
import functools
import logging
import threading
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import ToolManager
from mcp.shared.exceptions import NoBackChannelError
from mcp.types import ClientCapabilities, NotificationParams, RootsCapability
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from duckgraph.core import __version__
from duckgraph.core.bootstrap import Services
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.namespaces import namespace_from_folder
from duckgraph.core.mcp import tool_listing
from duckgraph.core.domain.argument_errors import readable
from duckgraph.core.mcp.forwarding import forward_resource, forward_tool
from duckgraph.core.mcp.prompts import (
    RESOURCE_NAMESPACE, check_prompt_call, instructions, invalid_prompt_argument, register_prompts_and_resources)
from duckgraph.core.mcp.stdio import StdioTransport
from duckgraph.core.mcp.warmup import WarmUp
from duckgraph.core.sharing import FileShare
from duckgraph.core.web.add_urls import UrlFetching

#: How long a stopping owner lets the calls other servers forwarded to it finish before it closes the file: an
#: MCP client kills the server ~2 s after closing its stdin, and the checkpoint and the close need the rest. A
#: call cut short fails on its server as when an owner dies (core/sharing/handover.py): nothing is half-stored.
STOP_DRAIN_SECONDS = 1.0
#: How long a server stopped by SIGINT or SIGTERM lets the calls under way answer before the session ends and
#: the file closes (core/mcp/stdio.py, core/mcp/http.py): a service manager waits 10 s or more before it kills.
STOP_GRACE_SECONDS = 5.0

log = logging.getLogger(__name__)


class DuckgraphServer(MCPServer):
    """The MCP server over one knowledge base. While this process is a client of the duckgraph server that owns
    the database file (see core/sharing/), its tool calls and resource reads run there, through the same
    functions, and come back as the owner's result (core/mcp/forwarding.py); otherwise they run here."""

    def __init__(self, *args: Any, knowledge_base: KnowledgeBase, url_fetching: UrlFetching, tool_set: str,
                 share: FileShare | None = None, namespace_from_roots: bool = False, reports_by_sampling: bool = False,
                 **kwargs: Any) -> None:
        # Set before the SDK's __init__, which stores its tool manager through the property below.
        self.tool_set = tool_set
        self._tools_built = False
        self._building_thread: int | None = None
        self._build_lock = threading.Lock()
        super().__init__(*args, **kwargs)
        self.knowledge_base = knowledge_base
        self.url_fetching = url_fetching  # add_urls refuses unless the settings enable it
        self.reports_by_sampling = reports_by_sampling  # build_communities then asks the host's model for reports
        self.share = share
        self._read_only: dict[str, bool] | None = None
        self._argument_names: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None
        #: Run once after the first call that runs here (set by the lifespan when the warm-up is off).
        self.after_first_call: Callable[[], None] | None = None
        self.namespace_from_roots = namespace_from_roots
        if namespace_from_roots:
            # A client whose roots changed says so: its next call reads them again (`default_namespace`).
            self._lowlevel_server.add_notification_handler(
                "notifications/roots/list_changed", NotificationParams, self._roots_changed)
        #: Why calls got the fallback namespace, each logged once: on the newest protocol every call comes on a
        #: session of its own, so once per session would be at every call.
        self._fallback_reasons: set[str] = set()

    # -- the namespace of a call that names none ---------------------------------------------------------------

    async def default_namespace(self, context: Context | None) -> str:
        """The namespace of the client's calls that name none: for a call the owner runs for another server of
        the file, that server's (core/mcp/forwarding.py); with namespace = "@roots", the client's first root
        folder's name, asked once per client connection (again after the client says its roots changed); otherwise
        the knowledge base's (the setting, or its fallback)."""
        client = getattr(context, "client_namespace", None)
        if client is not None:
            return client
        fallback = self.knowledge_base.namespace
        if not self.namespace_from_roots or context is None:
            return fallback
        try:
            session = context.session
        except ValueError:  # no request under way: nothing to ask
            return fallback
        state = _connection_state(session)
        namespace = state.get(_ROOTS_NAMESPACE)
        if namespace is None:
            namespace, why = await _namespace_from_roots(session)
            if namespace is None:
                namespace = fallback
                if why not in self._fallback_reasons:
                    self._fallback_reasons.add(why)
                    log.warning("namespace %r (the fallback, DUCKGRAPH_NAMESPACE_FALLBACK): namespace is '@roots' "
                                "but %s", fallback, why)
            state[_ROOTS_NAMESPACE] = namespace
        return namespace

    async def _roots_changed(self, context: Any, params: Any) -> None:
        """notifications/roots/list_changed: the connection's next call that names no namespace asks for the roots
        again (a client switched to another project folder gets its namespace, not the old folder's)."""
        _connection_state(context.session).pop(_ROOTS_NAMESPACE, None)

    # The tools are built when something first needs them (the warm-up thread, a call, or a listing that the
    # shipped one cannot answer): building them is most of what duckgraph adds to start-up (see
    # core/mcp/tool_listing.py). Every use of the tools in the SDK goes through its tool manager, a private
    # attribute, so that is where they are built (tests/integration/test_tool_listing.py fails if the SDK renames
    # it).
    @property
    def _tool_manager(self) -> ToolManager:
        if not self._tools_built and self._building_thread != threading.get_ident():
            with self._build_lock:
                if not self._tools_built:
                    self._building_thread = threading.get_ident()  # registering comes back through here
                    try:
                        # Imported only now, after the handshake: the pydantic models the tools name (~20 ms to
                        # define) are not needed to answer tools/list from the shipped listing.
                        from duckgraph.core.mcp.tools import register_tools

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
            tool_listing.remember(self.tool_set, tool_listing.as_json(anyio.run(super().list_tools)))  # the SDK's

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
        # Before forwarding too: a client server checks against its own tool set, not the owner's `all`.
        await self._refuse_unknown_arguments(name, arguments)
        share = self._forwarding()
        if share is not None:
            if self._read_only is None:
                self._read_only = {t.name: bool(t.annotations and t.annotations.read_only_hint)
                                   for t in await self.list_tools()}
            if name in self._read_only:  # an unknown name fails here, as it would on a server of its own
                result = await forward_tool(share, name, arguments, read_only=self._read_only[name],
                                            namespace=await self.default_namespace(context), context=context)
                if result is not None:
                    return result
        # Imported here, as the tools are built (see `_tool_manager`): importing them is off the start-up path.
        from duckgraph.core.mcp.tools.common import naming_call

        try:
            with naming_call(self._call_label(name, context), self._reads_only(name)):
                return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            # The model reads this to correct its call: the fields and their rules, not pydantic's dump.
            raise ToolError(f"{name} refused its arguments: {readable(exc.__cause__)}") from exc.__cause__
        finally:
            if self.after_first_call is not None and self._forwarding() is None:  # a client never opens the file
                first, self.after_first_call = self.after_first_call, None
                first()  # starts a thread: the answer waits for nothing

    async def _refuse_unknown_arguments(self, name: str, arguments: dict[str, Any]) -> None:
        """A ToolError naming each top-level argument `name` does not take. The SDK's argument models ignore
        unknown keys, so a misspelt `namespace` would run the call in the default namespace: a delete or a write
        in the wrong place. Checked against the advertised schemas' properties (the shipped listing answers
        without building the tools), which keep `additionalProperties: false` out of every listing's tokens. A
        tool of another set is refused saying which sets have it (`other_set_error`)."""
        if self._argument_names is None:
            self._argument_names = {
                tool.name: (tuple((tool.input_schema or {}).get("properties", {})),
                            tuple((tool.input_schema or {}).get("required", ())))
                for tool in await self.list_tools()}
        if name not in self._argument_names:  # a tool of no set: the SDK's own error says so
            other_sets = await _sets_listing(name)
            if other_sets:
                raise ToolError(other_set_error(name, self.tool_set, other_sets))
            return
        accepted, required = self._argument_names[name]
        unknown = [key for key in arguments or {} if key not in accepted]
        if unknown:
            missing = [key for key in required if key not in (arguments or {})]
            raise ToolError(unknown_arguments_error(name, unknown, accepted, missing))

    @staticmethod
    def _call_label(name: str, context: Context | None) -> str:
        """The call as the log names it: by the client's request id, as the client knows it."""
        try:
            return f"call {context.request_id} ({name})" if context is not None else f"call ({name})"
        except ValueError:  # no request: a call run for another server of the file (core/mcp/forwarding.py)
            return f"call ({name}) for another server"

    def _reads_only(self, name: str) -> bool:
        tool = self._tool_manager.get_tool(name)
        return bool(tool is not None and tool.annotations is not None and tool.annotations.read_only_hint)

    async def run_stdio_async(self, transport: StdioTransport | None = None) -> None:
        """The SDK's, over duckgraph's stdio transport: every message answered, a signal stops it gracefully."""
        transport = transport or StdioTransport(STOP_GRACE_SECONDS)
        async with transport.streams() as (read_stream, write_stream):
            lowlevel = self._lowlevel_server  # as the SDK's own run_stdio_async reaches it
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        namespace = await self.default_namespace(context)
        share = self._forwarding()
        if share is not None and str(uri) in {str(r.uri) for r in await self.list_resources()}:
            contents = await forward_resource(share, str(uri), namespace)
            if contents is not None:
                return contents
        token = RESOURCE_NAMESPACE.set(namespace)
        try:
            return await super().read_resource(uri, context)
        finally:
            RESOURCE_NAMESPACE.reset(token)

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Context | None = None) -> Any:
        prompt = check_prompt_call(await self.list_prompts(), name, arguments)
        try:
            return await super().get_prompt(name, arguments, context)
        except ValueError as exc:
            error = invalid_prompt_argument(prompt, exc)
            if error is None:
                raise
            raise error from None  # the caller's mistake: an answer, not a traceback in the log


def unknown_arguments_error(tool: str, unknown: list[str], accepted: tuple[str, ...],
                            missing: list[str] | None = None) -> str:
    """The refusal of arguments `tool` does not take, in the form of the other refused arguments (`readable`):
    each key with the accepted one it most likely meant, the required ones missing (a misspelt required argument
    is both), then what the tool takes, so the model can fix the call at once."""
    lines = []
    for key in unknown:
        closest = _closest_argument(key, accepted)
        lines.append(f"{_shown(key)}: is not an argument of {tool}"
                     + (f" (did you mean '{closest}'?)" if closest else ""))
    lines += [f"{key}: is required" for key in missing or ()]
    takes = f"it takes {', '.join(accepted)}" if accepted else "it takes no arguments"
    return f"{tool} refused its arguments: {'; '.join(lines)}; {takes}. Nothing was done."


def other_set_error(tool: str, tool_set: str, other_sets: list[str]) -> str:
    """The refusal of a call to `tool`, a tool of `other_sets` and not of this server's `tool_set`: which sets have
    it and the setting that picks one (docs/configuration.md), where the SDK says only "Unknown tool"."""
    choices = " or ".join(f"DUCKGRAPH_TOOLS={s}" for s in sorted(other_sets, key=lambda s: s != "all"))
    return (f"Unknown tool: {tool} is a tool of the {' and '.join(other_sets)} tool set"
            f"{'s' if len(other_sets) > 1 else ''}, not of this server's {tool_set} set. To call it, restart the "
            f"server with {choices} in its environment (or tools = \"all\" in its config file): all has the tools "
            "of both sets. Nothing was done.")


async def _sets_listing(tool: str) -> list[str]:
    """The tool sets that list a tool named `tool`: from the listing made ahead of time, else built (as
    `list_tools` answers)."""
    found = []
    for tool_set in tool_listing.TOOL_SETS:
        listing = tool_listing.shipped(tool_set) or await tool_listing.built_tool_listing(tool_set)
        if any(entry["name"] == tool for entry in listing):
            found.append(tool_set)
    return found


def _closest_argument(key: str, accepted: tuple[str, ...]) -> str | None:
    """The accepted argument `key` most likely misspells: the same but for case and separators ("Namespace",
    "entity_names"), else the nearest spelling ("namespaces")."""
    folded = {_folded(name): name for name in accepted}
    if _folded(key) in folded:
        return folded[_folded(key)]
    near = difflib.get_close_matches(_folded(key), list(folded), n=1, cutoff=0.75)
    return folded[near[0]] if near else None


def _folded(name: str) -> str:
    return "".join(c for c in name.casefold() if c not in "_- ")


def _shown(key: str) -> str:
    """A key as the error quotes it: the caller's text, so nothing unprintable, and not all of a long one."""
    printable = "".join(c if c.isprintable() else "?" for c in key)
    return repr(printable if len(printable) <= 60 else printable[:60] + "…")


#: Key of the namespace taken from the client's roots in the SDK's per-connection state.
_ROOTS_NAMESPACE = "duckgraph.roots_namespace"


def _connection_state(session: Any) -> dict[str, Any]:
    """The SDK's per-connection scratch state (`mcp.server.connection.Connection.state`: it lasts as long as the
    client's connection). The SDK builds a new session object for every request, so state kept by session would
    last one call; a session reaches its connection only through a private attribute in mcp 2.x
    (tests/e2e/test_roots_namespace.py fails if the SDK renames it)."""
    return session._connection.state


async def _namespace_from_roots(session: Any) -> tuple[str | None, str]:
    """The name of the client's first root folder, made a valid namespace; None and why when it gives none."""
    roots, why = await _client_roots(session)
    if roots:
        path = unquote(urlparse(str(roots[0].uri)).path).rstrip("/")
        namespace = namespace_from_folder(path.rsplit("/", 1)[-1]) if path else None
        if namespace is not None:
            log.info("namespace %r: the name of the client's first root folder (%s)", namespace, roots[0].uri)
            return namespace, ""
        why = f"the client's first root ({roots[0].uri}) has no usable folder name"
    return None, why


async def _client_roots(session: Any) -> tuple[list[Any], str]:
    """The client's roots, and why there are none when there are none."""
    if not session.check_client_capability(ClientCapabilities(roots=RootsCapability())):
        return [], "the client does not offer MCP roots"
    try:
        with warnings.catch_warnings():  # roots are deprecated in the newest protocol, and what hosts send today
            warnings.simplefilter("ignore")
            roots = (await session.list_roots()).roots
    except NoBackChannelError:
        return [], (f"the client's protocol ({getattr(session, 'protocol_version', '?')}) lets a server ask nothing "
                    "during a call")
    except Exception as exc:  # a client that offers roots but fails to list them: the fallback still serves
        return [], f"listing the client's roots failed ({exc})"
    return list(roots), "the client lists no roots"


def build_server(services: Services, share: FileShare | None = None, *, tool_set: str | None = None) -> MCPServer:
    """An MCP server over the given services, exposing the tool set named by `settings.tools` (or `tool_set`).

    With `share` (from `forwarding.start_sharing`), the server forwards its calls while another process owns the
    file.
    """

    @asynccontextmanager
    async def lifespan(server: DuckgraphServer) -> AsyncIterator[KnowledgeBase]:
        kb = services.knowledge_base
        settings = services.settings
        log.info("default namespace: %s", f"each client's first MCP root folder's name, else {kb.namespace!r}"
                 if settings.from_roots else f"{kb.namespace!r} (the namespace setting)")
        warm_up = WarmUp(kb, server.build_tools, server.remember_listing)
        if services.settings.warm_up:
            # A client has no use for the model (the owner embeds) until it takes the file over. Registered
            # before the role is read: a takeover in between still starts it (`start` runs once).
            if share is not None:
                share.after_takeover(warm_up.start)
            if share is None or share.is_owner:
                warm_up.start()
        else:
            # Still the communities' keeper looks once at start (the file may have changed while no server ran),
            # but only after the first call here: that is when warm-up off opens the file (a forwarded call runs
            # on the owner, so this waits for a takeover).
            server.after_first_call = warm_up.start_after_first_call
        try:
            yield kb
        finally:
            # The client is gone: the warm-up starts no new step, and the file closes without waiting for the
            # step under way (it may be importing PyTorch: see WarmUp). Closed for good, so that neither that
            # step nor a call the client left running opens it again. Shielded: the close must end.
            warm_up.stop()
            close = functools.partial(kb.close, final=True)
            with anyio.CancelScope(shield=True):
                if share is not None:  # an owner answers the calls it is running before it lets the file go
                    await anyio.to_thread.run_sync(functools.partial(share.close, finalize=close,
                                                                     drain_seconds=STOP_DRAIN_SECONDS))
                else:
                    await anyio.to_thread.run_sync(close)

    tool_set = tool_set or services.settings.tools
    server = DuckgraphServer(
        "duckgraph", version=__version__, lifespan=lifespan, instructions=instructions(tool_set),
        warn_on_duplicate_tools=False, knowledge_base=services.knowledge_base, share=share, tool_set=tool_set,
        namespace_from_roots=services.settings.from_roots, url_fetching=services.url_fetching,
        reports_by_sampling=services.settings.community_reports_by_sampling,
    )
    register_prompts_and_resources(server, services.knowledge_base, tool_set)
    return server
