"""Reading a chat model's extraction reply (ports/extractor.py): the JSON pulled out of prose and code fences, slips
repaired without another attempt (null for optional fields, a description over the limit), and an edge naming no
node: retried first, then dropped, with the rest kept and the drop reported. A scripted ChatExtractor stands in for
the chat server (the HTTP side is tests/integration/test_ollama_replies_kept.py)."""

from __future__ import annotations

import json
import logging

import pytest

from duckgraph.ports import ChatExtractor, ExtractionError, ReplyFormat
from duckgraph.ports.extractor import (DESCRIPTION_LIMIT, ExtractedGraph, PartlyValid, parse_graph, parse_reply,
                                      reply_json)

GRAPH = {"nodes": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "Analytical Engine", "type": "Machine"}],
         "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "PROGRAMMED"}]}
TEXT = json.dumps(GRAPH)


# -- the JSON of a reply -------------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    TEXT,
    f"  {TEXT}\n",
    f"```json\n{TEXT}\n```",
    f"Here is the knowledge graph:\n```json\n{TEXT}\n```\nLet me know if you need more.",
    f"Here it is, as the schema {{nodes, edges}} asks:\n```\n{TEXT}\n```",  # a brace in the prose: the fence wins
    f"{TEXT}\n\nNote: I only extracted stated facts.",
    f"{TEXT}\n```",
    f"Sure! {TEXT} Hope this helps {{:}}",
    f"<think>\nMaybe {{\"nodes\": ... no.\n</think>\nThe graph:\n```json\n{TEXT}\n```",
])
def test_the_json_object_is_taken_out_of_what_surrounds_it(reply):
    assert reply_json(reply) == TEXT
    assert parse_reply(reply, ExtractedGraph).model_dump() == ExtractedGraph.model_validate(GRAPH).model_dump()


def test_a_reply_beginning_with_its_object_is_read_whole_even_with_a_fence_inside():
    text = json.dumps({"nodes": [{"name": "Fences", "type": "Concept", "description": "Written ```json\n{}```."}],
                       "edges": []})
    assert reply_json(f"{text}\n```json\n{{}}\n```") == text


@pytest.mark.parametrize("reply, said", [
    ("Sure! The text is about Ada Lovelace.", "reply: Invalid JSON: expected value at line 1 column 1"),
    (TEXT[:60], "Invalid JSON: EOF while parsing"),  # cut off: nothing usable, refused as before
    ("The graph: {nodes: [], edges: []}", "Invalid JSON: key must be a string"),
    (json.dumps({"entities": GRAPH["nodes"], "relationships": GRAPH["edges"]}), "nodes: Field required"),
    ("{" * 100_000, "Invalid JSON"),
])
def test_a_reply_with_no_usable_object_is_still_refused_with_its_json_error(reply, said):
    with pytest.raises(ValueError, match="the reply does not match the schema") as err:
        parse_reply(reply, ExtractedGraph)
    assert said in str(err.value)


# -- repaired without another attempt --------------------------------------------------------------------------


def test_null_for_an_optional_text_or_list_is_read_as_empty():
    reply = json.dumps({"nodes": [{"name": "Rust", "type": "Language", "description": None, "aliases": None},
                                  {"name": "Mozilla", "type": "Organization"}],
                        "edges": [{"source": "Mozilla", "target": "Rust", "type": "SPONSORED", "description": None}]})
    graph = parse_graph(reply)
    assert graph.nodes[0].description == "" and graph.nodes[0].aliases == []
    assert graph.edges[0].description == ""


def test_null_for_a_required_field_is_still_refused():
    with pytest.raises(ValueError, match="nodes.0.type"):
        parse_graph(json.dumps({"nodes": [{"name": "Rust", "type": None}], "edges": []}))


def test_a_description_over_the_limit_is_cut_at_a_word_boundary_and_counted():
    long = " ".join(["word"] * 300)  # 1,499 characters
    reply = json.dumps({"nodes": [{"name": "Python", "type": "Language", "description": long},
                                  {"name": "Guido van Rossum", "type": "Person", "description": "x" * 1_200}],
                        "edges": [{"source": "Guido van Rossum", "target": "Python", "type": "CREATED",
                                   "description": "He created it."}]})
    graph = parse_graph(reply)
    words, one_word = graph.nodes[0].description, graph.nodes[1].description
    assert len(words) <= DESCRIPTION_LIMIT and words.endswith("word…") and long.startswith(words[:-1])
    assert len(one_word) == DESCRIPTION_LIMIT and one_word == "x" * (DESCRIPTION_LIMIT - 1) + "…"
    assert graph.edges[0].description == "He created it."
    assert graph._shortened == [1_499, 1_200]  # reported by the extractor (below)


def test_the_schema_sent_to_the_model_still_states_the_limits():
    schema = json.dumps(ReplyFormat("g", "extraction", ExtractedGraph).json_schema())
    assert '"maxLength": 1000' in schema and "null" not in schema


# -- an edge naming no node --------------------------------------------------------------------------------------

DANGLING = json.dumps({
    "nodes": [{"name": "Grace Hopper", "type": "Person"}, {"name": "COBOL", "type": "Language"},
              {"name": "Harvard", "type": "University"}, {"name": "Navy", "type": "Organization"}],
    "edges": [{"source": "Grace Hopper", "target": "COBOL", "type": "INFLUENCED"},
              {"source": "Grace Hopper", "target": "Harvard", "type": "WORKED_AT"},
              {"source": "Grace Hopper", "target": "Mark I", "type": "PROGRAMMED"},
              {"source": "Grace Hopper", "target": "Navy", "type": "SERVED_IN"}],
})


def test_an_edge_naming_no_node_makes_the_reply_partly_valid():
    with pytest.raises(PartlyValid, match="edges name entities missing from nodes: Mark I") as err:
        parse_graph(DANGLING)
    rest = err.value.rest
    assert [n.name for n in rest.nodes] == ["Grace Hopper", "COBOL", "Harvard", "Navy"]
    assert [e.type for e in rest.edges] == ["INFLUENCED", "WORKED_AT", "SERVED_IN"]
    assert [(e.target, e.type) for e in rest._dropped_edges] == [("Mark I", "PROGRAMMED")]
    # Named by a known entity it is no problem (as before).
    assert len(parse_graph(DANGLING, known_entities=["Mark I"]).edges) == 4


def test_a_reply_of_only_edges_naming_no_node_has_nothing_to_keep():
    reply = json.dumps({"nodes": [], "edges": [{"source": "A", "target": "B", "type": "KNOWS"}]})
    with pytest.raises(ValueError, match="missing from nodes: A, B") as err:
        parse_graph(reply)
    assert not isinstance(err.value, PartlyValid)


class Scripted(ChatExtractor):
    """A chat model that answers with `replies`, one per request, and records the conversations."""

    def __init__(self, *replies: str, max_attempts: int = 3) -> None:
        super().__init__("scripted", max_attempts=max_attempts)
        self.replies = list(replies)
        self.asked: list[list[dict[str, str]]] = []

    @property
    def id(self) -> str:
        return "scripted:model"

    def complete(self, messages, reply):
        self.asked.append(messages)
        return self.replies.pop(0)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_model_gets_its_attempts_to_fix_a_dangling_edge_first(caplog):
    fixed = json.loads(DANGLING)
    fixed["nodes"].append({"name": "Mark I", "type": "Computer"})
    extractor = Scripted(DANGLING, json.dumps(fixed))

    fragment = extractor.extract("Grace Hopper programmed the Mark I.")

    assert len(fragment["edges"]) == 4 and len(extractor.asked) == 2
    assert "edges name entities missing from nodes: Mark I" in extractor.asked[1][-1]["content"]
    assert "leave out those edges" in extractor.asked[1][-1]["content"]
    assert warnings_of(caplog) == []  # nothing was dropped


@pytest.mark.parametrize("attempts", [1, 3])
def test_after_the_attempts_the_valid_rest_is_kept_and_the_drop_reported(caplog, attempts):
    extractor = Scripted(*[DANGLING] * attempts, max_attempts=attempts)
    with caplog.at_level(logging.WARNING, logger="duckgraph.ports.extractor"):
        fragment = extractor.extract("Grace Hopper worked at Harvard, on the Mark I, and served in the Navy.")

    assert len(extractor.asked) == attempts
    assert [e["type"] for e in fragment["edges"]] == ["INFLUENCED", "WORKED_AT", "SERVED_IN"]
    assert len(fragment["nodes"]) == 4
    [warning] = warnings_of(caplog)
    assert warning.startswith("scripted:model kept the valid part of its reply for the passage 'Grace Hopper worked")
    assert (f"dropped 1 edge naming entities missing from nodes, not fixed in {attempts} "
            f"attempt{'s' if attempts > 1 else ''} (Grace Hopper PROGRAMMED Mark I)") in warning


def test_the_last_partly_valid_reply_is_kept_when_a_later_one_is_broken(caplog):
    extractor = Scripted(DANGLING, "Sorry, I cannot.", max_attempts=2)
    fragment = extractor.extract("Grace Hopper.")
    assert len(fragment["edges"]) == 3 and "dropped 1 edge" in warnings_of(caplog)[0]


def test_replies_with_nothing_usable_are_still_refused_after_the_attempts():
    extractor = Scripted("no JSON here", "nor here", max_attempts=2)
    with pytest.raises(ExtractionError, match="gave no valid extraction in 2 attempts"):
        extractor.extract("Grace Hopper.")


def test_a_shortened_description_is_reported(caplog):
    reply = json.dumps({"nodes": [{"name": "Python", "type": "Language", "description": "y " * 700}], "edges": []})
    fragment = Scripted(reply).extract("Python.")
    assert len(fragment["nodes"][0]["description"]) <= DESCRIPTION_LIMIT
    [warning] = warnings_of(caplog)
    assert "shortened 1 description of 1400 characters to the limit of 1000" in warning
