"""Graph extraction over an OpenAI-compatible /v1/chat/completions with JSON-schema structured output."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from duckgraph.ports import ExtractionError, Extractor, GraphFragment, entity_key

from duckgraph_openai.client import DEFAULT_API_KEY_ENV, DEFAULT_BASE_URL, OpenAIClient

log = logging.getLogger(__name__)

DEFAULT_CHAT_MODEL = "gpt-4o-mini"


def _strict_object(properties: dict[str, Any]) -> dict[str, Any]:
    # Strict structured output wants every property required and no others.
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_TEXT = {"type": "string"}
#: Sent as response_format; the server's decoder then keeps the model to this shape.
GRAPH_SCHEMA = _strict_object({
    "nodes": {"type": "array", "items": _strict_object(
        {"name": _TEXT, "type": _TEXT, "description": _TEXT, "aliases": {"type": "array", "items": _TEXT}})},
    "edges": {"type": "array", "items": _strict_object(
        {"source": _TEXT, "target": _TEXT, "type": _TEXT, "description": _TEXT})},
})


# The reply is checked again here, leniently (a server may ignore response_format), with the limits of the core.
class _Node(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    name: str = Field(min_length=1, max_length=300)
    type: str = Field(min_length=1, max_length=80)
    description: str = Field("", max_length=1_000)
    aliases: list[str] = Field(default_factory=list, max_length=20)


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)
    source: str = Field(min_length=1, max_length=300)
    target: str = Field(min_length=1, max_length=300)
    type: str = Field(min_length=1, max_length=80)
    description: str = Field("", max_length=1_000)


class _Graph(BaseModel):
    model_config = ConfigDict(defer_build=True)
    nodes: list[_Node]
    edges: list[_Edge]


INSTRUCTIONS = """\
You extract a knowledge graph from a text, as JSON {"nodes": [...], "edges": [...]}.
Nodes are the named things the text is about (people, organisations, places, works, products, concepts,
events): name as written in full, a specific type (Person, Organization, City, Drug, Paper), a one-sentence
description from the text, and the other names used for it as aliases.
Edges are facts the text states between two nodes: source and target exactly as node names, a specific type in
UPPER_SNAKE_CASE (FOUNDED, EMPLOYED_BY, BORN_IN, AUTHORED; never RELATED_TO or ASSOCIATED_WITH), and the fact as
one sentence. Extract only what the text states. Reuse the names of known entities exactly.
"""

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def parse_graph(reply: str, known_entities: Sequence[str] = ()) -> _Graph:
    """The reply as a graph; ValueError saying what is wrong (for the model's next attempt)."""
    text = _FENCE.sub("", _THINK.sub("", reply).strip()).strip()
    try:
        graph = _Graph.model_validate_json(text)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors()[:5])
        raise ValueError(f"the reply does not match the schema ({problems})") from None
    names = {entity_key(n.name) for n in graph.nodes} | {entity_key(a) for n in graph.nodes for a in n.aliases}
    names |= {entity_key(k) for k in known_entities}
    unknown = sorted({end for e in graph.edges for end in (e.source, e.target) if entity_key(end) not in names})
    if unknown:
        raise ValueError(f"edges name entities missing from nodes: {', '.join(unknown[:5])}")
    return graph


class OpenAIExtractor(Extractor):
    """Asks a chat model for the graph of a text; an invalid answer is sent back with what is wrong, up to
    `max_attempts` times."""

    def __init__(
        self,
        model: str = DEFAULT_CHAT_MODEL,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 300.0,
        max_attempts: int = 3,
        temperature: float = 0.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        api_key_env: str = DEFAULT_API_KEY_ENV,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.model = model
        self.max_attempts = max_attempts
        self.temperature = temperature
        self._client = OpenAIClient(base_url, timeout=timeout, max_retries=max_retries, backoff=backoff,
                                    api_key_env=api_key_env, error=ExtractionError)

    @property
    def id(self) -> str:
        return f"openai:{self.model}"

    def check(self) -> None:
        listed = self._client.get("/models").get("data")
        served = [str(m.get("id")) for m in listed if isinstance(m, dict)] if isinstance(listed, list) else []
        if self.model not in served:
            raise ExtractionError(f"{self._client.base_url} does not serve the model {self.model!r}: set the model "
                                  f"option to one it serves ({', '.join(served[:10]) or 'it lists none'})")

    def extract(self, text: str, *, known_entities: Sequence[str] = ()) -> GraphFragment:
        messages = [{"role": "system", "content": INSTRUCTIONS},
                    {"role": "user", "content": _user_prompt(text, known_entities)}]
        problem = ""
        for attempt in range(1, self.max_attempts + 1):
            reply = self._complete(messages)
            try:
                graph = parse_graph(reply, known_entities)
            except ValueError as exc:
                problem = str(exc)
                log.info("extraction attempt %d/%d rejected: %s", attempt, self.max_attempts, problem)
                messages = [*messages, {"role": "assistant", "content": reply[:4_000]},
                            {"role": "user", "content": f"That answer was invalid: {problem}. Answer again with "
                             "JSON that follows the schema, and only that."}]
                continue
            return {"nodes": [n.model_dump() for n in graph.nodes], "edges": [e.model_dump() for e in graph.edges]}
        raise ExtractionError(f"{self.model} gave no valid extraction in {self.max_attempts} attempts: {problem}")

    def _complete(self, messages: list[dict[str, str]]) -> str:
        reply = self._client.post("/chat/completions", {
            "model": self.model, "messages": messages, "temperature": self.temperature, "stream": False,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "knowledge_graph", "strict": True, "schema": GRAPH_SCHEMA}},
        })
        try:
            message = reply["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ExtractionError(f"{self._client.base_url}/chat/completions sent no choices[0].message: is it an "
                                  "OpenAI-compatible API?") from None
        if message.get("refusal"):
            raise ExtractionError(f"{self.model} refused to extract: {str(message['refusal'])[:300]}")
        return str(message.get("content") or "")


def _user_prompt(text: str, known_entities: Sequence[str]) -> str:
    known = ""
    if known_entities:
        known = "Known entities mentioned in the text (reuse these names exactly):\n" + "\n".join(
            f"- {name}" for name in known_entities[:100]) + "\n\n"
    return f"{known}Text:\n{text}"
