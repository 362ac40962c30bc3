"""The web UI's application: the page and its static files, and a small JSON API over the MCP tools (called by
name through core/mcp/direct.py, so the page validates, fails and forwards to the file's owner exactly as a
model's calls do) and the reads of core/domain/browse.py.

    GET  /api/overview?namespace=        counts, types, most connected entities, namespaces, what is available
    GET  /api/search?q=&namespace=       the search tool's result, each passage with the ranges to mark (marks.py)
    GET  /api/entity?name=&namespace=    get_entities, the passages that mention it (with their marks), its
                                         neighbours; 404 with the names it likely meant (did_you_mean)
    GET  /api/passages?name=&offset=     the next passages that mention an entity (10 at a time, with marks)
    GET  /api/communities?level=         the communities of a level with their reports
    GET  /api/community?id=              one community's report and its entities to draw
    GET  /api/document?id=&namespace=    the whole document a passage's document is part of: what deleting it
                                         deletes (a long file's parts, their passages)
    GET  /api/read?id=&chunk_id=&before=&after=&namespace=
                                         read_document: the document's passages in order around one (or from its
                                         start), each with its place and section, and the ids to read back and on
    GET  /api/fields?name=&namespace=    an entity's id and fields as stored now and their fingerprint: what Edit
                                         shows, and sends back with its save (update_entity's expected_fingerprint)
    GET  /api/merge?target=&source=...   what merging the sources into the target adds, and the property values
                                         it keeps: said before the merge is confirmed
    POST /api/tool/{name}                one of TOOLS with {"arguments": {...}, "namespace": ...}

An error is {"error": TEXT, "quoted": [[start, end], ...]}: `quoted`, the ranges of TEXT's quoted values (names, ids,
as the tools quote them), for the page to isolate as it isolates names in its own sentences.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import re
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import anyio.to_thread
import pydantic_core
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from duckgraph.core.domain.argument_errors import readable, validation_cause
from duckgraph.core.mcp.direct import DirectCalls
from duckgraph.core.ui.marks import MarkingError, marks
from duckgraph.ports import DuckgraphError, InvalidInputError, NotFoundError, terms, tokens
from duckgraph.ports.text import stemmed

log = logging.getLogger(__name__)

#: The tools the page may call through /api/tool: curation, and the reads of its optional views and of an
#: entity's relations past the first 50. Those that this version's server lacks are reported as not available
#: (another version may have them).
TOOLS = frozenset({
    "get_entities", "update_entity", "merge_entities", "delete_entities", "delete_relations", "end_relations",
    "find_paths", "recent_changes", "list_namespaces", "global_search", "build_communities", "delete_documents",
})
#: Search limits the page may ask for (the tool's own bounds apply too).
SEARCH_OPTIONS = ("max_nodes", "hops", "k_anchors", "max_passages")
#: The search tool's time arguments, passed on as given (the tool parses and checks the dates).
TIME_OPTIONS = ("as_of", "after", "before")
#: read_document's numbers the page may give: the passage to read around, and how many before and after it.
READ_OPTIONS = ("chunk_id", "before", "after")
STATIC = resources.files("duckgraph.core.ui").joinpath("static")


def build_app(calls: DirectCalls) -> Starlette:
    """The ASGI app over `calls`; its lifespan starts the warm-up and closes the file at the end."""

    @asynccontextmanager
    async def lifespan(_app: Starlette):
        calls.start()
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(calls.close)

    api = _Api(calls)
    routes = [
        Route("/", _page),
        Route("/api/overview", api.overview),
        Route("/api/search", api.search),
        Route("/api/entity", api.entity),
        Route("/api/passages", api.passages),
        Route("/api/communities", api.communities),
        Route("/api/community", api.community),
        Route("/api/document", api.document),
        Route("/api/read", api.read),
        Route("/api/fields", api.fields),
        Route("/api/merge", api.merge),
        Route("/api/tool/{name}", api.tool, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


async def _page(_request: Request) -> Response:
    return FileResponse(str(STATIC.joinpath("index.html")), headers=_NO_CACHE)


_NO_CACHE = {"cache-control": "no-cache"}


class _Api:
    def __init__(self, calls: DirectCalls) -> None:
        self.calls = calls
        self.default_namespace = calls.services.knowledge_base.namespace

    # -- the views -------------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            tools = await self.calls.tools()
            stats, connected, spaces = await asyncio.gather(
                self._tool("graph_stats", {}, namespace),
                self.calls.browse("most_connected", namespace, {"limit": 20}),
                self.calls.browse("namespaces", namespace, {}),
            )
            return {
                "namespace": namespace, "default_namespace": self.default_namespace, "role": self.calls.role,
                "stats": stats, "most_connected": connected["entities"], "namespaces": spaces["namespaces"],
                "tools": sorted(name for name in tools if name in TOOLS),
                "switch_namespaces": "namespace" in tools["search"].get("properties", {}),
            }

        return await self._answer(request, answer)

    async def search(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            given = request.query_params
            query = given.get("q", "")
            options: dict[str, Any] = {key: _whole(request, key) for key in SEARCH_OPTIONS if key in given}
            options.update({key: given[key] for key in TIME_OPTIONS if given.get(key)})
            if given.get("include_history", "false") not in ("true", "false"):
                raise InvalidInputError("include_history must be true or false")
            if given.get("include_history") == "true":
                options["include_history"] = True
            result = await self._tool("search", {"query": query, **options}, namespace)
            result["passages"] = await _marked(result["passages"], set(terms(query)))
            return {**result, "words": sorted(set(tokens(query)))}

        return await self._answer(request, answer)

    async def entity(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            name = request.query_params.get("name", "")
            found = await self._tool("get_entities", {"names": [name]}, namespace)
            if not found["entities"]:
                # What get_entities says to help (the names it likely meant, an empty namespace) goes to the page.
                raise _NotFound(f"no entity named {name!r} in the namespace {namespace!r}",
                                did_you_mean=found.get("did_you_mean", {}).get(name, []), hint=found.get("hint"))
            stored = found["entities"][0]["name"]
            passages, neighbours = await asyncio.gather(
                self._passages(namespace, stored, 0),
                self.calls.browse("neighbourhood", namespace, {"name": stored}),
            )
            return {"entity": found["entities"][0], "passages": passages, "graph": neighbours}

        return await self._answer(request, answer)

    async def passages(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            offset = _whole(request, "offset") if "offset" in request.query_params else 0
            return await self._passages(namespace, request.query_params.get("name", ""), offset)

        return await self._answer(request, answer)

    async def communities(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            level = _whole(request, "level") if "level" in request.query_params else 0
            return await self.calls.browse("communities", namespace, {"level": level})

        return await self._answer(request, answer)

    async def community(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            return await self.calls.browse("community", namespace, {"id": _whole(request, "id")})

        return await self._answer(request, answer)

    async def document(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            return await self.calls.browse("document", namespace, {"id": _document_id(request)})

        return await self._answer(request, answer)

    async def read(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            given = request.query_params
            arguments = {"document_id": _document_id(request),
                         **{key: _whole(request, key) for key in READ_OPTIONS if key in given}}
            result = await self._tool("read_document", arguments, namespace)
            # Its text words how a model reads on (read_document calls); the page reads on by the ids beside it.
            return {key: value for key, value in result.items() if key != "text"}

        return await self._answer(request, answer)

    async def fields(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            return await self.calls.browse("entity_fields", namespace, {"name": request.query_params.get("name", "")})

        return await self._answer(request, answer)

    async def merge(self, request: Request) -> Response:
        async def answer(namespace: str) -> dict[str, Any]:
            given = request.query_params
            return await self.calls.browse("merge_preview", namespace,
                                           {"sources": given.getlist("source"), "target": given.get("target", "")})

        return await self._answer(request, answer)

    async def tool(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            # pydantic's parser, as `serve --http` reads a request (the mcp SDK's streamable HTTP): the same bodies
            # are read, and one nested past its depth limit (about 200) is refused as such, where json.loads would
            # exhaust Python's stack (a RecursionError, a 500) or let through a value too deep to answer with.
            body = pydantic_core.from_json(await request.body())
        except ValueError as exc:
            deep = " (arrays and objects nested too deeply)" if "recursion limit" in str(exc) else ""
            return _error(400, f'the request body must be a JSON object, {{"arguments": {{...}}, "namespace": ...}}: '
                               f"{exc}{deep}; nothing was done")
        if not isinstance(body, dict) or not isinstance(body.get("arguments", {}), dict):
            return _error(400, 'the request body must be {"arguments": {...}, "namespace": ...}')
        if name not in TOOLS or name not in await self.calls.tools():
            return _error(404, f"{name} is not available on this duckgraph server")

        # The MCP tools take `namespace` among their arguments, so a script written for them sends it there: it
        # names the namespace as the body's key does, never overwritten by the page's default.
        arguments = dict(body.get("arguments", {}))
        inner, outer = arguments.pop("namespace", None), body.get("namespace") or request.query_params.get("namespace")
        if inner is not None and outer is not None and inner != outer:
            return _error(400, f"the namespace is given twice, {outer!r} and {inner!r} in the arguments: give it "
                               "once; nothing was done")

        async def answer(namespace: str) -> dict[str, Any]:
            return await self._tool(name, arguments, namespace)

        return await self._answer(request, answer, inner if inner is not None else outer)

    # -- helpers ---------------------------------------------------------------------------------------

    async def _answer(self, request: Request, view, namespace: Any = None) -> Response:
        namespace = namespace or request.query_params.get("namespace") or self.default_namespace
        try:
            if not isinstance(namespace, str):
                raise InvalidInputError("namespace must be a string")
            return JSONResponse(await view(namespace), headers=_NO_CACHE)
        except NotFoundError as exc:
            return _error(404, str(exc), **getattr(exc, "details", {}))
        except DuckgraphError as exc:
            return _error(400, _refusal(exc))

    async def _passages(self, namespace: str, name: str, offset: int) -> dict[str, Any]:
        """A page of the passages that mention the entity, each with the ranges of its name's words to mark."""
        passages = await self.calls.browse("entity_passages", namespace, {"name": name, "offset": offset})
        passages["passages"] = await _marked(passages["passages"], set(stemmed(passages["words"])))
        return passages

    async def _tool(self, name: str, arguments: dict[str, Any], namespace: str) -> dict[str, Any]:
        """Call a tool in `namespace`: as its argument where the tool takes one, else only the default one."""
        if "namespace" in (await self.calls.tools())[name].get("properties", {}):
            arguments = {**arguments, "namespace": namespace}
        elif namespace != self.default_namespace:
            raise InvalidInputError(f"this duckgraph's {name} tool cannot use another namespace than "
                                    f"{self.default_namespace!r}")
        return await self.calls.call(name, arguments)


class _NotFound(NotFoundError):
    """A NotFoundError with more to say to the page, as fields of the error's JSON."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = details


def _marks_of(text: str, wanted: set[str]) -> list[list[int]]:
    """`marks`, or none when they cannot be placed (a bug of marks.py): the passage is still shown, and the log
    says so, rather than the whole page failing for its highlighting."""
    try:
        return marks(text, wanted)
    except MarkingError as exc:
        log.warning("%s: the passage is shown without marks", exc)
        return []


async def _marked(passages: list[dict[str, Any]], wanted: set[str]) -> list[dict[str, Any]]:
    """The passages, each with `marks`: the [start, end) ranges (in code points) of its text's words that keyword
    search matches to `wanted` (terms), computed off the event loop (long texts take milliseconds)."""
    def mark() -> list[dict[str, Any]]:
        return [{**p, "marks": _marks_of(p["text"], wanted)} for p in passages]

    return await anyio.to_thread.run_sync(mark)


def _document_id(request: Request) -> str:
    if not (id := request.query_params.get("id", "")):
        raise InvalidInputError("give the document's id: id=, a passage's document_id")
    return id


def _whole(request: Request, key: str) -> int:
    try:
        return int(request.query_params.get(key, ""))
    except ValueError:
        raise InvalidInputError(f"{key} must be a whole number") from None


#: What the MCP SDK puts before a tool's error text ("Error executing tool update_entity: ..."): said to a person,
#: only the tool's own words follow.
_TOOL_ERROR_PREFIX = re.compile(r"^Error executing tool [\w.-]+: ")


def _refusal(exc: DuckgraphError) -> str:
    """The error's text, without the SDK's prefix; a tool's arguments refused by their validation in short lines
    (`readable`)."""
    cause = validation_cause(exc)
    return _TOOL_ERROR_PREFIX.sub("", str(exc)) if cause is None else readable(cause)


def _error(status: int, message: str, **details: Any) -> Response:
    return JSONResponse({"error": message, "quoted": quoted(message), **details}, status_code=status,
                        headers=_NO_CACHE)


#: What may stand just before a quoted value in an error: "named 'X'", "sources=['X', 'Y']", "('X')". Not a
#: letter, so an apostrophe ("the file's", "'X''s type") never opens one.
_BEFORE_QUOTE = frozenset(" \t\n([{=,:")
_REPR_ESCAPES = re.compile(r"(?:[^\\]|\\[\\'nrt]|\\x[0-9a-f]{2}|\\u[0-9a-f]{4}|\\U[0-9a-f]{8})*", re.DOTALL)


def quoted(message: str) -> list[list[int]]:
    """The [start, end) ranges, in code points, of the values `message` quotes as Python writes a string (`repr`:
    'Alice', "O'Brien", 'a\\'b"c'), inside their quotes. The tools' errors name entities, ids and namespaces so
    (core/domain/curation.py, documents.py): the page isolates each, so a right-to-left name keeps its place
    in the sentence. A span counts only when it reads back to a string whose repr it is, so an apostrophe or a
    stray quote is never taken for one."""
    found: list[list[int]] = []
    at = 0
    while at < len(message):
        if message[at] in "'\"" and (at == 0 or message[at - 1] in _BEFORE_QUOTE):
            end = _literal_end(message, at)
            if end is not None:
                found.append([at + 1, end])
                at = end + 1
                continue
        at += 1
    return found


def _literal_end(text: str, start: int) -> int | None:
    """Where the string literal opened at `start` closes, if it is the repr of a string; else None."""
    quote, at = text[start], start + 1
    while at < len(text) and text[at] != quote:
        at += 2 if text[at] == "\\" else 1
    if at >= len(text) or text[at + 1: at + 2].isalnum():
        return None
    literal = text[start: at + 1]
    # Only the escapes repr writes: literal_eval would warn of others ("\\d"), and they are no repr anyway.
    if not _REPR_ESCAPES.fullmatch(literal[1:-1]):
        return None
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
    return at if isinstance(value, str) and repr(value) == literal else None
