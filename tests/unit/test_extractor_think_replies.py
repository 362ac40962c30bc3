"""A chat model's reasoning before its answer (ports/extractor.py `reply_json`): everything up to the last </think>
is left out, also when the server opened <think> in its template so that the reply holds only the closing tag; a
reply cut off inside <think> holds no answer and is asked again, never read as an empty graph from a JSON value
quoted in the reasoning (which marked the passage read, so it was never extracted again)."""

from __future__ import annotations

import json

import pytest

from duckgraph.ports import ExtractionError
from duckgraph.ports.extractor import parse_graph, reply_json
from tests.unit.test_extractor_replies import Scripted

ANSWER = json.dumps({"nodes": [{"name": "Acme Corp", "type": "Company"}, {"name": "Berlin", "type": "City"}],
                     "edges": [{"source": "Acme Corp", "target": "Berlin", "type": "HEADQUARTERED_IN"}]})
SCHEMA_QUOTED = 'The user wants {"nodes": [], "edges": []} filled in. Acme Corp is in Berlin.'


@pytest.mark.parametrize("reply", [
    f"{SCHEMA_QUOTED}\n</think>\n\n{ANSWER}",  # no opening tag: the template opened it
    f"<think>{SCHEMA_QUOTED}</think>\n{ANSWER}",
    f"<THINK>{SCHEMA_QUOTED}</Think>{ANSWER}",
    f"<think>First {{\"nodes\": []}}</think>\n<think>Then {SCHEMA_QUOTED}</think>\n```json\n{ANSWER}\n```",
    f"<think>Quoting the tag </think> in my reasoning... {SCHEMA_QUOTED}</think>\n{ANSWER}",
], ids=["closing tag only", "one block", "any case", "two blocks, fenced answer", "tag quoted in the reasoning"])
def test_the_answer_is_what_follows_the_last_closing_think_tag(reply):
    assert reply_json(reply) == ANSWER
    graph = parse_graph(reply)
    assert [n.name for n in graph.nodes] == ["Acme Corp", "Berlin"] and len(graph.edges) == 1


@pytest.mark.parametrize("reply", [
    f"<think>{SCHEMA_QUOTED} So the answer is",  # cut off while reasoning
    f"\n  <think>\n{SCHEMA_QUOTED}",
    f"<think>Draft.</think>\n<think>{SCHEMA_QUOTED}",  # cut off in a second block
], ids=["cut", "cut, blank before", "cut in a second block"])
def test_a_reply_cut_off_inside_its_reasoning_is_no_answer(reply):
    with pytest.raises(ValueError, match="ended inside its <think> reasoning"):
        parse_graph(reply)


def test_a_think_tag_inside_the_answer_s_text_is_text():
    answer = json.dumps({"nodes": [{"name": "DeepSeek-R1", "type": "Model",
                                    "description": "Writes its reasoning after a <think> tag."}], "edges": []})
    assert reply_json(answer) == answer
    assert reply_json(f"Sure: {answer}") == answer




def test_a_cut_off_reply_is_asked_again_and_the_next_answer_kept():
    extractor = Scripted(f"<think>{SCHEMA_QUOTED}", f"<think>Once more.</think>{ANSWER}")
    graph = extractor.extract("Acme Corp is headquartered in Berlin.")
    assert [n["name"] for n in graph["nodes"]] == ["Acme Corp", "Berlin"] and len(graph["edges"]) == 1
    assert len(extractor.asked) == 2
    assert "ended inside its <think> reasoning" in extractor.asked[1][-1]["content"]


def test_replies_all_cut_off_are_an_extraction_error_not_an_empty_graph():
    extractor = Scripted(*[f"<think>{SCHEMA_QUOTED}"] * 2, max_attempts=2)
    with pytest.raises(ExtractionError, match="no valid extraction in 2 attempts: the reply ended inside its <think>"):
        extractor.extract("Acme Corp is headquartered in Berlin.")
