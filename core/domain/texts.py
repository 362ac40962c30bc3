"""The texts that vectors are computed from: an entity, a relationship's fact, a passage.

Everything that embeds (adding, curating, importing) and everything that decides whether a vector is still
current (an import comparing old and new) must build the very same text, so it is built only here.
"""

from __future__ import annotations

from collections.abc import Sequence

from duckgraph.ports import EdgeWrite, NodeRecord

#: Observations that go into a node's vector; the rest are found by keywords and compared one by one near the
#: relevance floor (see relevance._parts_near).
OBSERVATIONS_IN_VECTOR = 10


def node_text(node: NodeRecord, observations: Sequence[str] = ()) -> str:
    """The text a node's vector is computed from: name, type, aliases, description, properties, first observations."""
    text = f"{node.name} ({node.type})"
    if node.aliases:
        text += f", also known as {', '.join(node.aliases)}"
    if node.description:
        text += f": {node.description}"
    if node.properties:
        text += ". " + "; ".join(f"{key.replace('_', ' ')}: {value}" for key, value in node.properties.items())
    if observations:
        text += ". " + " ".join(observations[:OBSERVATIONS_IN_VECTOR])
    return text


def edge_text(edge: EdgeWrite, names: dict[str, str]) -> str:
    """The fact an edge states, as a sentence for its vector: "Marie Curie won Nobel Prize: in 1903"."""
    return fact_sentence(names[edge.source_key], edge.type, names[edge.target_key], edge.description)


def fact_sentence(source: str, relation: str, target: str, description: str = "") -> str:
    """A relation as a short sentence (what its vector is computed from, and what search shows)."""
    text = f"{source} {relation.replace('_', ' ').lower()} {target}"
    return f"{text}: {description}" if description else text


def passage_text(title: str, text: str, section: str = "") -> str:
    """A passage with its document's title (unless it starts with it already) and its section in front."""
    text = f"{section}\n{text}" if section else text
    return text if not title or text.startswith(title) else f"{title}\n{text}"
