"""The extractor port: turns raw text into entities and relationships. ChatExtractor does what every extractor
over a chat model shares (instructions, reply formats, validation, retries); its plugin only talks to the server."""

from __future__ import annotations

import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError
from pydantic import ValidationInfo

from duckgraph.ports.errors import ExtractionError
from duckgraph.ports.names import clean_name, entity_key, no_control_characters, relation_type
from duckgraph.ports.records import GraphFragment
from duckgraph.ports.text import shortened

Model = TypeVar("Model", bound=BaseModel)


class Extractor(ABC):
    """Extracts a graph from text. Constructing one must be cheap; connect on first use."""

    @property
    @abstractmethod
    def id(self) -> str:
        """Identity of the extractor and its model, e.g. ``ollama:qwen3:8b``."""

    @abstractmethod
    def extract(self, text: str, *, known_entities: Sequence[str] = ()) -> GraphFragment:
        """Entities and relationships found in `text`, in the `add_knowledge_graph` input shape.

        `known_entities` are names already in the graph that the text mentions; reuse them verbatim.
        Raises ExtractionError when no valid graph can be produced.
        """

    def check(self) -> str | None:
        """Reach the model without a full extraction (for `duckgraph doctor`); raise ExtractionError saying what
        to fix, or return a warning when it works but may not as configured (doctor lists it, exit status 0). By
        default there is nothing to reach."""
        return None

    def write_report(self, material: str) -> dict[str, str]:
        """A community report, {"title", "summary"}, written from `material` (its entities, facts and passages).
        Raises ExtractionError when no valid report can be produced; by default this extractor cannot write one."""
        raise ExtractionError(f"the extractor {self.id} cannot write community reports")


# -- extraction and reports by a chat model ------------------------------------------------------------------

log = logging.getLogger(__name__)


# The graph's own rules (core/domain/model.py, add_knowledge_graph), checked here too: a reply that breaks them is
# retried with the rule told to the model, rather than refused by the knowledge base after the model is done.
def _visible(value: str) -> str:
    if not clean_name(value):
        raise ValueError("must contain visible characters, not only spaces")
    return value


def _relation(value: str) -> str:
    if not relation_type(value):
        raise ValueError("must contain letters or digits, e.g. FOUNDED")
    return value


DESCRIPTION_LIMIT = 1_000


# Repairs of slips not worth another attempt (null for an optional field, a description too long: cut, and
# reported): done before validation, so the JSON schema sent to the model still states the rule.
def _null_as_empty_text(value: Any) -> Any:
    return "" if value is None else value


def _null_as_empty_list(value: Any) -> Any:
    return [] if value is None else value


def _fitted_description(value: Any, info: ValidationInfo) -> Any:
    """A description over the limit, cut at a word boundary with "…" (a whole description is a sentence or two:
    what fits still says it); counted in the validation context's "shortened", to be reported."""
    if not isinstance(value, str) or len(value) <= DESCRIPTION_LIMIT:
        return value
    if isinstance(info.context, dict) and "shortened" in info.context:
        info.context["shortened"].append(len(value))
    return shortened(value, DESCRIPTION_LIMIT)


NameText = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_visible)]
DescriptionText = Annotated[str, Field(max_length=DESCRIPTION_LIMIT), AfterValidator(no_control_characters),
                            BeforeValidator(_fitted_description), BeforeValidator(_null_as_empty_text)]


# What a chat model must answer. Built on first use (defer_build): a server that never extracts does not pay.
class ExtractedNode(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    name: NameText
    type: Annotated[str, Field(min_length=1, max_length=80), AfterValidator(_visible)]
    description: DescriptionText = ""
    aliases: Annotated[list[NameText], BeforeValidator(_null_as_empty_list)] = Field(default_factory=list,
                                                                                     max_length=20)


class ExtractedEdge(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    source: NameText
    target: NameText
    type: Annotated[str, Field(min_length=1, max_length=80), AfterValidator(_relation)]
    description: DescriptionText = ""


class ExtractedGraph(BaseModel):
    model_config = ConfigDict(defer_build=True)
    nodes: list[ExtractedNode]
    edges: list[ExtractedEdge]
    # What was left out of the reply to keep the rest (reported by `ChatExtractor.extract`, never silently): the
    # lengths of descriptions shortened, the edges dropped because they name no node.
    _shortened: list[int] = PrivateAttr(default_factory=list)
    _dropped_edges: list[ExtractedEdge] = PrivateAttr(default_factory=list)


class CommunityReport(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    title: str = Field(min_length=3, max_length=200)
    summary: str = Field(min_length=20, max_length=4_000)


@dataclass(frozen=True)
class ReplyFormat:
    """One kind of JSON answer asked of a chat model: `name` (for servers that want one), `what` (for messages)
    and the pydantic `model` that validates it."""

    name: str
    what: str
    model: type[BaseModel]

    def json_schema(self) -> dict[str, Any]:
        """The model's JSON schema, its length limits included (e.g. Ollama's `format`)."""
        return self.model.model_json_schema()

    def strict_schema(self) -> dict[str, Any]:
        """The schema as strict structured output takes it (OpenAI's `response_format`): references inlined, every
        property required and no other allowed, only `type`, `properties` and `items` (the limits are checked here)."""
        schema = self.json_schema()
        definitions = schema.get("$defs", {})

        def strict(node: dict[str, Any]) -> dict[str, Any]:
            if "$ref" in node:
                node = definitions[node["$ref"].rsplit("/", 1)[-1]]
            out: dict[str, Any] = {"type": node["type"]}
            if "properties" in node:
                properties = {name: strict(value) for name, value in node["properties"].items()}
                out |= {"properties": properties, "required": list(properties), "additionalProperties": False}
            if "items" in node:
                out["items"] = strict(node["items"])
            return out

        return strict(schema)


GRAPH_REPLY = ReplyFormat("knowledge_graph", "extraction", ExtractedGraph)
REPORT_REPLY = ReplyFormat("community_report", "report", CommunityReport)

EXTRACTION_INSTRUCTIONS = """\
You extract a knowledge graph from a text. Answer with JSON only: {"nodes": [...], "edges": [...]}.
Nodes are the named things the text is about: people, organisations, places, works, products, concepts,
events. Each node: name (as written in the text, full form), type (a specific class such as Person,
Organization, City, Drug, Paper), description (one short sentence from the text), aliases (other names used).
Edges are facts stated in the text between two nodes: source and target are node names exactly as in "nodes",
type is a specific relation in UPPER_SNAKE_CASE such as FOUNDED, EMPLOYED_BY, BORN_IN, LOCATED_IN, AUTHORED,
TREATS. Never use vague types such as RELATED_TO or ASSOCIATED_WITH. description is the fact as one sentence.
Extract only what the text states. When a known entity is mentioned, use its name exactly as given.
"""

REPORT_INSTRUCTIONS = """\
You write a report on one community of a knowledge graph: a group of entities more connected to each other than
to the rest. Answer with JSON only: {"title": ..., "summary": ...}. The title names the community's theme in a
few words (not a list of names). The summary says in 3 to 6 sentences what the community is about, who or what
is central and how they connect, using only the entities, facts and passages given.
"""

_THINK_START = re.compile(r"\s*<think>", re.IGNORECASE)
_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)

Message = dict[str, str]


class PartlyValid(ValueError):
    """A reply rejected for parts that can be left out: the model is asked to fix it like any other, and once its
    attempts are used up `rest` (the valid part, which says what it lacks) is taken rather than nothing."""

    def __init__(self, problem: str, rest: Any) -> None:
        super().__init__(problem)
        self.rest = rest


def reply_json(reply: str) -> str:
    """The JSON of a chat model's reply, without what models put around it (servers that ignore the requested
    format let them): the reasoning is left out, everything up to the last </think> (a server may have opened
    <think> in the prompt's template, so the reply holds only its end); a reply that does not begin with "{" is
    read inside its first code fence when it has one; the JSON is the value that starts at the first "{", and
    anything after its end (a closing remark) is ignored. With no complete value there, the text from that "{"
    (else all of it) is returned, so that its JSON error is the one reported. ValueError for a reply that opens
    <think> and never closes it: it was cut off before its answer, and a JSON value in the reasoning (the schema
    quoted, a draft) is no answer."""
    text = _THINK_END.split(reply)[-1]
    if _THINK_START.match(text):
        raise ValueError("the reply ended inside its <think> reasoning, with no answer after it (was it cut off?)")
    text = text.strip()
    if not text.startswith("{") and (fenced := _FENCED.search(text)):
        text = fenced.group(1).strip()
    start = text.find("{")
    if start < 0:
        return text
    try:
        _, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):  # RecursionError: nested too deep for Python's parser, not pydantic's
        return text[start:]
    return text[start:end]


def parse_reply(reply: str, model: type[Model], shortened: list[int] | None = None) -> Model:
    """The reply's JSON (see `reply_json`) as `model`, with null for an optional text or list read as empty and a
    description over the limit shortened (its length added to `shortened`); ValueError saying what does not
    match (or that the reply holds no answer)."""
    noted = [] if shortened is None else shortened
    try:
        return model.model_validate_json(reply_json(reply), context={"shortened": noted})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors()[:5])
        raise ValueError(f"the reply does not match the schema ({problems})") from exc


def parse_graph(reply: str, known_entities: Sequence[str] = ()) -> ExtractedGraph:
    """An extraction reply, checked also for edges whose ends are neither nodes (or aliases) nor known entities:
    such a reply is PartlyValid, its rest the graph without those edges (unless that leaves nothing)."""
    shortened: list[int] = []
    graph = parse_reply(reply, ExtractedGraph, shortened)
    graph._shortened = shortened
    names = {entity_key(n.name) for n in graph.nodes} | {entity_key(a) for n in graph.nodes for a in n.aliases}
    names |= {entity_key(k) for k in known_entities}
    unknown = sorted({end for e in graph.edges for end in (e.source, e.target) if entity_key(end) not in names})
    if not unknown:
        return graph
    problem = (f"edges name entities missing from nodes: {', '.join(unknown[:5])} (add them to the nodes, or leave "
               "out those edges)")
    kept, dropped = [], []
    for edge in graph.edges:
        (kept if entity_key(edge.source) in names and entity_key(edge.target) in names else dropped).append(edge)
    if not graph.nodes and not kept:
        raise ValueError(problem)
    rest = ExtractedGraph.model_construct(nodes=graph.nodes, edges=kept)
    rest._shortened, rest._dropped_edges = shortened, dropped
    raise PartlyValid(problem, rest)


def _dropped_from(graph: ExtractedGraph, attempts: int) -> str:
    """What was left out of the reply `graph` was read from, in words ("" when nothing was)."""
    said = []
    if edges := graph._dropped_edges:
        listed = "; ".join(f"{e.source} {e.type} {e.target}" for e in edges[:5]) + ("; ..." if len(edges) > 5 else "")
        said.append(f"dropped {len(edges)} edge{'s' if len(edges) > 1 else ''} naming entities missing from nodes, "
                    f"not fixed in {attempts} attempt{'s' if attempts > 1 else ''} ({listed})")
    if lengths := graph._shortened:
        said.append(f"shortened {len(lengths)} description{'s' if len(lengths) > 1 else ''} of "
                    f"{', '.join(map(str, lengths[:5]))} characters to the limit of {DESCRIPTION_LIMIT}")
    return "; ".join(said)


def extraction_messages(text: str, known_entities: Sequence[str] = ()) -> list[Message]:
    known = ""
    if known_entities:
        known = "Known entities mentioned in the text (reuse these names exactly):\n" + "\n".join(
            f"- {name}" for name in known_entities[:100]) + "\n\n"
    return [{"role": "system", "content": EXTRACTION_INSTRUCTIONS},
            {"role": "user", "content": f"{known}Text:\n{text}"}]


def retry_messages(messages: list[Message], reply: str, problem: str) -> list[Message]:
    """The conversation with the rejected reply and what is wrong with it, for the model's next attempt."""
    return [*messages, {"role": "assistant", "content": reply[:4_000]},
            {"role": "user", "content": f"That answer was invalid: {problem}. Answer again with JSON that follows "
             "the schema, and only that."}]


class ChatExtractor(Extractor):
    """An extractor over a chat model. A plugin implements `id` and `complete` (one request: the messages and the
    format to answer in, the reply's text back), optionally `check`; the instructions, validation and retries
    with the problem shown to the model live here, for `extract` and `write_report` alike."""

    def __init__(self, model: str, *, max_attempts: int = 3) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.model = model
        self.max_attempts = max_attempts

    @abstractmethod
    def complete(self, messages: list[Message], reply: ReplyFormat) -> str:
        """The model's answer to `messages`, asked in `reply`'s JSON schema (raise ExtractionError on failure)."""

    def extract(self, text: str, *, known_entities: Sequence[str] = ()) -> GraphFragment:
        graph = self.ask(extraction_messages(text, known_entities), GRAPH_REPLY,
                         lambda reply: parse_graph(reply, known_entities))
        if dropped := _dropped_from(graph, self.max_attempts):
            # The passage's result counts what was stored; what was left out of it is said here.
            log.warning("%s kept the valid part of its reply for the passage %r: %s", self.id,
                        " ".join(text.split())[:80], dropped)
        return {"nodes": [n.model_dump() for n in graph.nodes], "edges": [e.model_dump() for e in graph.edges]}

    def write_report(self, material: str) -> dict[str, str]:
        messages = [{"role": "system", "content": REPORT_INSTRUCTIONS}, {"role": "user", "content": material}]
        report = self.ask(messages, REPORT_REPLY)
        return {"title": report.title, "summary": report.summary}

    def ask(self, messages: list[Message], reply: ReplyFormat, parse: Callable[[str], Any] | None = None) -> Any:
        """The answer as `parse` (default: validated as `reply.model`) returns it; a rejected answer is shown to
        the model with the problem, up to `max_attempts` times; then the valid part of the last answer that had
        one (PartlyValid), else ExtractionError."""
        parse = parse or (lambda text: parse_reply(text, reply.model))
        problem = ""
        rest = None
        for attempt in range(1, self.max_attempts + 1):
            answer = self.complete(messages, reply)
            try:
                return parse(answer)
            except ValueError as exc:
                problem = str(exc)
                if isinstance(exc, PartlyValid):
                    rest = exc.rest
                log.info("%s attempt %d/%d rejected: %s", reply.what, attempt, self.max_attempts, problem)
                messages = retry_messages(messages, answer, problem)
        if rest is not None:
            return rest
        raise ExtractionError(f"{self.model} gave no valid {reply.what} in {self.max_attempts} attempts: {problem}")
