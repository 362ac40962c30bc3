"""What the server tells the model besides its tools: the instructions, the extract_knowledge and
summarize_communities prompts and the duckgraph://stats and duckgraph://schema resources (and, beside the memory tools,
memory://knowledge-graph)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from mcp.types import Prompt as MCPPrompt
from pydantic import Field

from duckgraph.core.domain.argument_errors import validation_cause
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.ports import DuckgraphError

if TYPE_CHECKING:
    from duckgraph.core.domain.model import ReportsToWrite

T = TypeVar("T")
log = logging.getLogger(__name__)

#: The namespace a resource read is for: its client's default, set by the server before the read (static
#: resources get no request context); unset: the knowledge base's. (summarize_communities reads through a tool
#: call, which finds the client's default itself.)
RESOURCE_NAMESPACE: ContextVar[str | None] = ContextVar("resource_namespace", default=None)

INSTRUCTIONS = """\
duckgraph is a long-term memory organised as a knowledge graph with source passages.
- Store what you learn with add_knowledge_graph: specific entity types (Person, Organization, Drug) and specific
  relation types (FOUNDED, EMPLOYED_BY, TREATS), never a vague RELATED_TO. Reuse the exact names of entities
  that already exist; one name in any case is one entity, so qualify the name of another thing that shares it
  ("Apple (fruit)"). The user is one entity under their name, with aliases such as "me".
- Store source texts with add_documents, then pass their ids as source_ids of the entities and relations
  you extract from them.
- Before answering from memory, call search: it returns the relevant entities, how they connect, and the
  passages that support them.
- When a fact stops holding, end it with end_relations (it stays as history); delete_relations is for mistakes.
- The tools' optional `namespace` picks one of several separate memories (list_namespaces shows them); leave it
  out to use this client's own.
"""

#: With DUCKGRAPH_TOOLS=memory only the reference memory server's tools exist, so only they are named.
MEMORY_INSTRUCTIONS = """\
duckgraph is a long-term memory organised as a knowledge graph of entities, relations and observations.
- Store what you learn with create_entities (specific entity types such as person, organization) and
  create_relations between existing entities (specific relation types in active voice, e.g. works_at); add
  facts about an entity with add_observations. Reuse the exact names of entities that already exist; one name
  in any case is one entity, so qualify the name of another thing that shares it ("Apple (fruit)"). The user
  is one entity under their name, not "me" or "user".
- Before answering from memory, call search_nodes: it searches by meaning and returns the relevant entities
  and the relations among them. open_nodes reads entities by name; read_graph reads the graph page by page.
- The tools' optional `namespace` picks one of several separate memories; leave it out to use this client's own.
"""


def instructions(tool_set: str) -> str:
    """The server's instructions for the given tool set."""
    return MEMORY_INSTRUCTIONS if tool_set == "memory" else INSTRUCTIONS


EXTRACTION_GUIDE = """\
Read the text below and store the knowledge it contains in duckgraph, the long-term memory graph.

1. Keep the source. Call add_documents with the text (give it a title and a short id of its own, such as
   "meeting-2024-06-03": the same id again replaces that document) before anything else, and note the id it
   returns: every entity and relationship you take from this text gets that id in
   its source_ids, so search can later show the passage that backs each fact.
2. Look before you write. Call search with the names the text mentions. When an entity is already stored,
   use its stored name exactly as written there, so the new facts attach to it instead of creating a twin.
   A stored name in any case is that entity: qualify the name of another thing that shares it ("Apple (fruit)").
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
   stored, use its stored name exactly, so the new facts attach to it instead of creating a twin. A stored
   name in any case is that entity: qualify the name of another thing that shares it ("Apple (fruit)").
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


SUMMARY_GUIDE = """\
Write a report for each community of the knowledge graph listed below: a group of entities more connected to
each other than to the rest of the memory. Its report is what global_search returns for questions about the
whole memory, so make it say what the community is about.

For each community:
1. Read its entities, facts and passages. Use nothing else: no general knowledge, no guesses.
2. Write a title that names its theme in a few words (not a list of names), and a summary of 3 to 6
   sentences: what it is about, which entities are central, how they connect, dates where given.
3. Store it with save_community_report(id, title, summary), the id as listed.
Then call communities_to_summarize for the next ones, until none remain.
"""


def summary_prompt(waiting: ReportsToWrite) -> str:
    """The summarize_communities prompt: the guide, and the material of the communities `waiting` lists (the
    communities_to_summarize tool's answer)."""
    if not waiting.communities:
        return ("Every community of this memory has a written, current report (or none is built yet: call "
                "build_communities first). Nothing to summarise.")
    material = "\n\n".join(c.material for c in waiting.communities)
    more = f"\n{waiting.remaining} more communities wait after these." if waiting.remaining else ""
    return f"{SUMMARY_GUIDE}\n<communities>\n{material}\n</communities>{more}\n"


def register_prompts_and_resources(server: MCPServer, kb: KnowledgeBase, tool_set: str) -> None:
    """The extract_knowledge prompt (its text for `tool_set`) and the duckgraph://stats and duckgraph://schema
    resources (every tool set); with the memory tools (`memory`, `all`), memory://knowledge-graph.

    Static resources get no request context, so they read the knowledge base the lifespan also hands out.
    """

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

    if tool_set == "all":  # the tools it walks the host through are listed only there
        _register_summary_prompt(server)

    @server.resource(
        "duckgraph://stats", name="stats", title="Knowledge base statistics", mime_type="application/json",
        description="Counts of entities, relations, documents and passages, and the entity and relation "
                    "types in use (the 50 most common of each).",
    )
    def stats_resource() -> str:
        from duckgraph.core.domain.model import GraphStats  # the tools' models are imported when first needed

        stats = _read_for_resource(kb.stats, RESOURCE_NAMESPACE.get() or kb.namespace)
        return GraphStats(**stats).model_dump_json(indent=2, exclude_none=True)  # a hint only when there is one

    @server.resource(
        "duckgraph://schema", name="schema", title="Types in use", mime_type="application/json",
        description="The entity and relation types in use (at most 50 of each, most common first), each with "
                    "its count and an example, so new knowledge can reuse them.",
    )
    def schema_resource() -> str:
        return json.dumps(_read_for_resource(kb.schema, RESOURCE_NAMESPACE.get() or kb.namespace), indent=2,
                          ensure_ascii=False)

    if tool_set in ("memory", "all"):  # with the reference's tools: the reference server offers it beside them
        _register_graph_resource(server, kb)


def _register_graph_resource(server: MCPServer, kb: KnowledgeBase) -> None:
    """The reference memory server's memory://knowledge-graph: read_graph's answer, as the read_graph tool's text.
    The reference serves the whole graph; this serves read_graph's largest page (memory_server.MAX_PAGE_SIZE
    entities, with `next_offset` when more remain), so a host that attaches it to a conversation gets a bounded
    answer, and the rest is a read_graph call away."""

    @server.resource(
        "memory://knowledge-graph", name="knowledge-graph", title="Knowledge Graph", mime_type="application/json",
        description="The knowledge graph's entities and relations, as read_graph returns them: its largest page, "
                    "with next_offset when more entities remain (read_graph reads on from there).",
    )
    def knowledge_graph_resource() -> str:
        # Imported when first needed, as the tools' code is (a server answers tools/list before it needs them).
        from duckgraph.core.domain.memory_server import MAX_PAGE_SIZE, read_graph
        from duckgraph.core.mcp.tools.common import json_result

        graph = _read_for_resource(functools.partial(read_graph, kb, limit=MAX_PAGE_SIZE,
                                                     namespace=RESOURCE_NAMESPACE.get() or kb.namespace))
        return json_result(graph).content[0].text


def check_prompt_call(listed: Sequence[MCPPrompt], name: str, arguments: dict[str, Any] | None) -> MCPPrompt:
    """The listed prompt `name`, if `arguments` name only its arguments and all it requires; otherwise an
    invalid-params error that says what is wrong and what is allowed. (The SDK answers these with code 0 and no
    reason.)"""
    prompt = next((p for p in listed if p.name == name), None)
    if prompt is None:
        raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; the prompts are: "
                                       f"{', '.join(p.name for p in listed) or 'none'}")
    known = {a.name: a for a in prompt.arguments or []}
    unknown = sorted(set(arguments or {}) - set(known))
    missing = sorted(a.name for a in known.values() if a.required and a.name not in (arguments or {}))
    if unknown or missing:
        problem = (f"has no argument {', '.join(map(repr, unknown))}" if unknown
                   else f"needs the argument {', '.join(map(repr, missing))}")
        raise MCPError(INVALID_PARAMS, f"prompt {name} {problem}; its arguments are: "
                                       f"{', '.join(known) or 'none'}")
    return prompt


def invalid_prompt_argument(prompt: MCPPrompt, exc: BaseException) -> MCPError | None:
    """The invalid-params error for an argument of `prompt` that its validation refused (the SDK wraps that
    ValidationError in ValueErrors), naming the value, why, and what the argument takes; None for other errors."""
    cause = validation_cause(exc)
    described = {a.name: a.description for a in prompt.arguments or []}
    if cause is None or not all(e["loc"] and e["loc"][0] in described for e in cause.errors()):
        return None  # not the arguments': a failure of the prompt itself
    return MCPError(INVALID_PARAMS, f"prompt {prompt.name}: " + " ".join(
        f"{e['loc'][0]}={_short_repr(e['input'])} is refused: {e['msg']}. {e['loc'][0]}: {described[e['loc'][0]]}"
        for e in cause.errors()))


def _short_repr(value: Any, limit: int = 60) -> str:
    shown = repr(value)  # a refused text may be long: the error names its start
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(str(value))} characters)"


def _read_for_resource(function: Callable[..., T], *args: Any) -> T:
    """Call a knowledge-base read for a resource; domain errors become resource errors the client sees."""
    try:
        return function(*args)
    except DuckgraphError as exc:
        raise ResourceError(str(exc)) from exc


def _register_summary_prompt(server: MCPServer) -> None:
    @server.prompt(
        name="summarize_communities",
        title="Write community reports",
        description="Walks you through writing reports for the memory's communities (used by global_search), "
                    "with the material of those still lacking one.",
    )
    async def summarize_communities(
        ctx: Context,
        limit: Annotated[int, Field(description="How many communities to include: a whole number from 1 to 20.",
                                    ge=1, le=20)] = 5,
    ) -> str:
        # Read through the communities_to_summarize tool, not the knowledge base: a server whose file another
        # duckgraph server owns has it closed and forwards its tool calls there (core/mcp/forwarding.py), so the
        # prompt gets the owner's answer, in this client's default namespace, as the tool does.
        from duckgraph.core.domain.model import ReportsToWrite  # the tools' models are imported when first needed

        try:
            result = await server.call_tool("communities_to_summarize", {"limit": limit}, ctx)
        except ToolError as exc:  # raised by a call run here, or when the owner could not be asked
            if isinstance(exc, UnexpectedToolError):
                log.error("prompt summarize_communities: communities_to_summarize crashed", exc_info=exc.__cause__)
            failure = str(exc)
        else:
            if not result.is_error:
                return summary_prompt(ReportsToWrite.model_validate(result.structured_content))
            failure = " ".join(getattr(block, "text", "") for block in result.content)  # the owner's tool error
        log.info("prompt summarize_communities failed: %r", failure)
        # An MCPError reaches the client as it is; anything else would become "Error rendering prompt".
        raise MCPError(INTERNAL_ERROR, f"prompt summarize_communities: {failure}")
