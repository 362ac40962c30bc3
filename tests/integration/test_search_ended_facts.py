"""A search of what holds now says when facts of its entities ended (real model, real file): a question about
then ("Who was on call in March?") reads what holds now, and must learn that more is stored."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.knowledge_base import ENDED_NOT_SHOWN
from duckgraph.core.domain.model import EdgeInput, EndRelationInput, NodeInput

pytestmark = pytest.mark.model


def test_a_search_of_now_counts_the_ended_facts_it_leaves_out(real_kb) -> None:
    real_kb.add_knowledge_graph(
        [NodeInput(name="Payments Team", type="Team"), NodeInput(name="Marcus Lee", type="Person"),
         NodeInput(name="Tom Okafor", type="Person")],
        [EdgeInput(source="Marcus Lee", target="Payments Team", type="ON_CALL_FOR", valid_from="2026-03-01"),
         EdgeInput(source="Tom Okafor", target="Payments Team", type="ON_CALL_FOR", valid_from="2026-11-01")])
    question = "Who is on call for the Payments Team?"
    assert real_kb.search(question).ended_not_shown == 0  # nothing ended yet: no line
    assert "ended fact" not in real_kb.search(question).text
    real_kb.end_relations([EndRelationInput(source="Marcus Lee", target="Payments Team", type="ON_CALL_FOR",
                                            ended_at="2026-04-01")])
    now = real_kb.search(question)
    assert now.ended_not_shown == 1
    assert now.text.splitlines()[-1] == ENDED_NOT_SHOWN.format(count=1)
    assert "Marcus Lee" not in "\n".join(now.text.splitlines()[:-1]).split("Relations:")[-1].split("Entities:")[0]
    # Asked with time, the search shows them itself: no line.
    for options in ({"include_history": True}, {"as_of": "2026-03-15"}):
        found = real_kb.search(question, **options)
        assert found.ended_not_shown == 0 and "ended fact" not in found.text, options
    small = real_kb.search(question, token_budget=120)  # its room is kept within the budget
    assert small.text.splitlines()[-1] == ENDED_NOT_SHOWN.format(count=1)
