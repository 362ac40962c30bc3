"""What a write read from passages (extraction: `source_ids` or `source_chunk_ids`) does to an entity already
stored: a description full to its limit stays as it is and the rest of the passage's graph is written; a type or
a property value a user gave by hand stays. Over real HTTP against FakeOllama (tests/ollama_server.py) and a real
DuckDB file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.limits import MAX_DESCRIPTION_CHARS, MAX_OBSERVATIONS
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaExtractor
from duckgraph.ports import InvalidInputError
from tests.fakes import HashingEmbedder
from tests.integration.test_ollama_extraction import MODEL, passage_of
from tests.ollama_server import FakeOllama

NS = "default"


def day_note(day: int) -> str:
    return f"Team {day} met today. Acme Corp asked on day {day} for a revised quote."


def meeting_model(body: dict[str, Any]) -> str:
    """Every note names Acme Corp, with a long sentence of its own about it (extracted descriptions are at most
    1,000 characters), and the team that met, which works for it."""
    text = passage_of(body)
    if "Mercury" in text:
        return json.dumps({"nodes": [{"name": "Mercury", "type": "Planet", "description": "Named in a note."},
                                     {"name": "Queen", "type": "Band"}],
                           "edges": [{"source": "Mercury", "target": "Queen", "type": "SANG_IN"}]})
    day = int(re.search(r"day (\d+)", text).group(1))
    acme = f"Acme Corp asked on day {day} for a revised quote. " + "It wants the enterprise tier. " * 30
    return json.dumps({"nodes": [{"name": "Acme Corp", "type": "Company", "description": acme.strip()},
                                 {"name": f"Team {day}", "type": "Team"}],
                       "edges": [{"source": f"Team {day}", "target": "Acme Corp", "type": "WORKS_FOR"}]})


@pytest.fixture
def kb(db_path: Path):
    with FakeOllama(default_chat_reply=meeting_model) as server:
        kb = KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(),
                           extractor=OllamaExtractor(MODEL, base_url=server.base_url))
        with kb:
            yield kb


def entity(kb: KnowledgeBase, name: str):
    found, missing = kb.curation.get_entities([name], NS)
    assert not missing, f"{name} is not stored"
    return found[0]


def test_a_passage_naming_an_entity_whose_description_is_full_keeps_its_graph_and_the_description_stays(kb):
    # The first four notes fill Acme Corp's description to just under the limit; each note after it used to fail
    # whole ("'Acme Corp' would have a description of ... characters"): its team and relation were lost.
    result = kb.add_documents([DocumentInput(id=f"log-{day}.md", text=day_note(day)) for day in range(1, 8)],
                              extract=True)

    assert [e.error for e in result.extractions] == [None] * 7
    acme = entity(kb, "Acme Corp")
    assert len(acme.description) <= MAX_DESCRIPTION_CHARS
    assert "day 4 " in acme.description and "day 5 " not in acme.description  # what was stored stays
    for day in range(1, 8):
        team = entity(kb, f"Team {day}")
        assert [(r.source, r.type, r.target) for r in team.relations] == [(f"Team {day}", "WORKS_FOR", "Acme Corp")]


def test_a_call_by_hand_whose_description_no_longer_fits_is_written_with_a_hint(kb):
    kb.add_knowledge_graph([NodeInput(name="Zed", type="Person", description="z" * 3_000)], [])
    added = kb.add_knowledge_graph([NodeInput(name="Zed", type="Person", description="y" * 1_500),
                                    NodeInput(name="Oslo", type="City")],
                                   [EdgeInput(source="Zed", target="Oslo", type="LIVES_IN")])

    assert added.edges_created == 1
    assert added.hints == [("The description of 'Zed' is full: with the new text it would pass 4,000 characters, "
                            "so that was not appended. Rewrite it shorter with update_entity(description=...), or "
                            "store the fact as an observation.")]
    assert entity(kb, "Zed").description == "z" * 3_000
    # One description over the limit in one go is bad input, refused as before.
    with pytest.raises(ValidationError, match="at most 4000 characters"):
        NodeInput(name="Zed", type="Person", description="x" * (MAX_DESCRIPTION_CHARS + 1))


def test_extraction_keeps_the_type_and_the_property_values_a_user_gave_by_hand(kb):
    kb.add_documents([DocumentInput(id="a.md", text="Mercury sang in Queen.")], extract=True)
    assert entity(kb, "Mercury").type == "Planet"
    kb.curation.update_entity("Mercury", NS, type="Person", description="Lead singer of Queen.",
                              properties={"born": 1946})

    result = kb.add_documents([DocumentInput(id="b.md", text="Mercury wrote a song for Queen.")], extract=True)
    assert result.extractions[0].error is None
    mercury = entity(kb, "Mercury")
    assert (mercury.type, mercury.description) == ("Person", "Lead singer of Queen. Named in a note.")

    # Provenance as source_ids: the same. New properties are added, the stored values stay.
    kb.add_knowledge_graph([NodeInput(name="Mercury", type="Planet", properties={"born": 1, "band": "Queen"},
                                      source_ids=["b.md"])], [])
    mercury = entity(kb, "Mercury")
    assert (mercury.type, mercury.properties) == ("Person", {"born": 1946, "band": "Queen"})

    # A write by hand still changes them.
    kb.add_knowledge_graph([NodeInput(name="Mercury", type="Musician", properties={"born": 1947})], [])
    mercury = entity(kb, "Mercury")
    assert (mercury.type, mercury.properties) == ("Musician", {"born": 1947, "band": "Queen"})


def test_an_entity_only_ever_extracted_takes_the_newest_type(kb):
    kb.add_documents([DocumentInput(id="a.md", text="Mercury sang in Queen.")], extract=True)
    kb.add_knowledge_graph([NodeInput(name="Mercury", type="Person", source_ids=["a.md"])], [])

    assert entity(kb, "Mercury").type == "Person"


def test_extracted_observations_past_the_limit_are_left_out_and_the_rest_of_the_graph_is_written(kb):
    kb.add_documents([DocumentInput(id="a.md", text="Ada Lovelace met Charles Babbage.")])
    kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person",
                                      observations=[f"fact {i}" for i in range(MAX_OBSERVATIONS - 1)])], [])

    added = kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person", observations=["new 1", "new 2", "new 3"], source_ids=["a.md"]),
         NodeInput(name="Charles Babbage", type="Person", source_ids=["a.md"])],
        [EdgeInput(source="Ada Lovelace", target="Charles Babbage", type="MET", source_ids=["a.md"])])

    assert (added.observations_added, added.edges_created) == (1, 1)
    assert entity(kb, "Ada Lovelace").observations[-1] == "new 1"
    # By hand, the caller can fold some in: refused as before.
    with pytest.raises(InvalidInputError, match=f"would have {MAX_OBSERVATIONS + 1} observations"):
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person", observations=["by hand"])], [])
