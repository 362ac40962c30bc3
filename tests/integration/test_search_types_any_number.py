"""A question about the entities of a stored type finds them whatever the number it asks in, irregular plurals
included ("people" for Person, "children" for Child, "mice" for Mouse), with the real default model on a real
file: the keyword channel matches stems, and "peopl" is no stem of "person"."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import NodeInput

pytestmark = pytest.mark.model


def anchors(kb: KnowledgeBase, question: str) -> set[str] | None:
    result = kb.search(question)
    return None if result.nothing_relevant else {a.name for a in result.anchors}


def test_irregular_plurals_find_the_entities_of_the_singular_type(real_kb: KnowledgeBase) -> None:
    real_kb.add_knowledge_graph(
        [NodeInput(name="Renée Dubois", type="Person", observations=["leads the platform team"]),
         NodeInput(name="Tom Okafor", type="Person", observations=["support"]),
         NodeInput(name="Lena", type="Child", observations=["starts school in September"]),
         NodeInput(name="Noah", type="Child", observations=["plays the violin"]),
         NodeInput(name="Whiskers", type="Mouse", observations=["lives in cage 4"]),
         NodeInput(name="Payments Team", type="Team")], [])
    for question in ("List all people", "How many people are there?", "list the persons"):
        assert anchors(real_kb, question) == {"Renée Dubois", "Tom Okafor"}, question
    assert anchors(real_kb, "List all children") == {"Lena", "Noah"}
    assert anchors(real_kb, "How many mice do we have?") == {"Whiskers"}
    # A type named with other words is held to the floor, as before.
    assert anchors(real_kb, "Which children broke the coffee machine?") is None
