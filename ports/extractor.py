"""The extractor port: turns raw text into entities and relationships. ChatExtractor does what every extractor
over a chat model shares (instructions, reply formats, validation, retries); its plugin only talks to the server."""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from duckgraph.ports.errors import ExtractionError
from duckgraph.ports.names import clean_name, entity_key, no_control_characters, relation_type
from duckgraph.ports.records import GraphFragment

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

    def check(self) -> None:
        """Reach the model without a full extraction (for `duckgraph doctor`); raise ExtractionError saying what
        to fix. By default there is nothing to reach."""

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


NameText = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_visible)]
DescriptionText = Annotated[str, Field(max_length=1_000), AfterValidator(no_control_characters)]


# What a chat model must answer. Built on first use (defer_build): a server that never extracts does not pay.
class ExtractedNode(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    name: NameText
    type: Annotated[str, Field(min_length=1, max_length=80), AfterValidator(_visible)]
    description: DescriptionText = ""
    aliases: list[NameText] = Field(default_factory=list, max_length=20)


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

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)

Message = dict[str, str]


def parse_reply(reply: str, model: type[Model]) -> Model:
    """The reply as `model`, <think> blocks and code fences removed; ValueError saying what does not match."""
    text = _FENCE.sub("", _THINK.sub("", reply).strip()).strip()
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg'].removeprefix('Value error, ')}"
                             for e in exc.errors()[:5])
        raise ValueError(f"the reply does not match the schema ({problems})") from exc


def parse_graph(reply: str, known_entities: Sequence[str] = ()) -> ExtractedGraph:
    """An extraction reply, checked also for edges whose ends are neither nodes (or aliases) nor known entities."""
    graph = parse_reply(reply, ExtractedGraph)
    names = {entity_key(n.name) for n in graph.nodes} | {entity_key(a) for n in graph.nodes for a in n.aliases}
    names |= {entity_key(k) for k in known_entities}
    unknown = sorted({end for e in graph.edges for end in (e.source, e.target) if entity_key(end) not in names})
    if unknown:
        raise ValueError(f"edges name entities missing from nodes: {', '.join(unknown[:5])}")
    return graph


def extraction_messages(text: str, known_entities: Sequence[str] = ()) -> list[Message]:
    known = ""
    if known_entities:
        known = "Known entities mentioned in the text (reuse these names exactly):\n" + "\n".join(
            f"- {name}" for name in known_entities[:100]) + "\n\n"
    return [{"role": "system", "content": EXTRACTION_INSTRUCTIONS}, {"role": "user", "content": f"{known}Text:\n{text}"}]


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
        return {"nodes": [n.model_dump() for n in graph.nodes], "edges": [e.model_dump() for e in graph.edges]}

    def write_report(self, material: str) -> dict[str, str]:
        messages = [{"role": "system", "content": REPORT_INSTRUCTIONS}, {"role": "user", "content": material}]
        report = self.ask(messages, REPORT_REPLY)
        return {"title": report.title, "summary": report.summary}

    def ask(self, messages: list[Message], reply: ReplyFormat, parse: Callable[[str], Any] | None = None) -> Any:
        """The answer as `parse` (default: validated as `reply.model`) returns it; a rejected answer is shown to
        the model with the problem, up to `max_attempts` times, then ExtractionError."""
        parse = parse or (lambda text: parse_reply(text, reply.model))
        problem = ""
        for attempt in range(1, self.max_attempts + 1):
            answer = self.complete(messages, reply)
            try:
                return parse(answer)
            except ValueError as exc:
                problem = str(exc)
                log.info("%s attempt %d/%d rejected: %s", reply.what, attempt, self.max_attempts, problem)
                messages = retry_messages(messages, answer, problem)
        raise ExtractionError(f"{self.model} gave no valid {reply.what} in {self.max_attempts} attempts: {problem}")
