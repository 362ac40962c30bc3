"""Extraction of a graph from raw text with the Ollama extractor, over real HTTP against FakeOllama
(tests/ollama_server.py): the /api/chat request, parsing and bounded retries, `add_documents(extract=True)` with
per-passage provenance and errors, known entities, the refusal without an extractor, and `duckgraph ingest`.

The "chat model" is a small deterministic script: it reads the passage sent in the user message and answers with
the facts of `FACTS` whose two entities the passage names. Nothing inside the plugins is mocked.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from mcp import Client

from duckgraph.core.bootstrap import bootstrap
from duckgraph.core.domain.chunking import chunk_text
from duckgraph.core.cli import main
from duckgraph.core.config import load_settings
from duckgraph.core.domain.model import DocumentInput
from duckgraph.core.plugin_manager import create
from duckgraph.core.mcp.server import build_server
from duckgraph.core.domain.ingest import NO_EXTRACTOR
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaEmbedder, OllamaExtractor
from duckgraph.ports import ExtractionError, Extractor, InvalidInputError, entity_key
from tests.fakes import HashingEmbedder
from tests.ollama_server import FakeOllama

MODEL = "qwen3:8b"

#: (source, source type, relation, target, target type): what the scripted model "knows how to read".
FACTS = [
    ("Ada Lovelace", "Person", "WROTE_PROGRAM_FOR", "Analytical Engine", "Machine"),
    ("Charles Babbage", "Person", "DESIGNED", "Analytical Engine", "Machine"),
    ("Ada Lovelace", "Person", "TRANSLATED_PAPER_OF", "Luigi Menabrea", "Person"),
    ("Alan Turing", "Person", "WORKED_AT", "Bletchley Park", "Place"),
    ("Grace Hopper", "Person", "WORKED_AT", "Harvard University", "University"),
]
#: A passage containing this word makes the scripted model answer garbage, every time.
GARBLE = "GARBLED"


def passage_of(body: dict[str, Any]) -> str:
    """The passage of a chat request: the text after "Text:" in the first user message."""
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return first_user.split("Text:\n", 1)[1]


def graph_for(text: str) -> dict[str, Any]:
    nodes: dict[str, dict[str, Any]] = {}
    edges = []
    for source, source_type, relation, target, target_type in FACTS:
        if source in text and target in text:
            nodes.setdefault(source, {"name": source, "type": source_type, "description": f"{source}."})
            nodes.setdefault(target, {"name": target, "type": target_type, "description": f"{target}."})
            edges.append({"source": source, "target": target, "type": relation,
                          "description": f"{source} {relation.lower().replace('_', ' ')} {target}."})
    return {"nodes": list(nodes.values()), "edges": edges}


def scripted_model(body: dict[str, Any]) -> str:
    text = passage_of(body)
    if GARBLE in text:
        return "Sorry, I can't produce JSON for that."
    return json.dumps(graph_for(text))


def chats(server: FakeOllama) -> list[dict[str, Any]]:
    return [r["body"] for r in server.requests_to("/api/chat")]


@pytest.fixture
def ollama():
    """FakeOllama: hashing vectors for /api/embed, the scripted model for /api/chat."""
    with FakeOllama(default_chat_reply=scripted_model) as server:
        yield server


def extractor_for(server: FakeOllama, **options: Any) -> OllamaExtractor:
    return OllamaExtractor(MODEL, base_url=server.base_url, **options)


def knowledge_base(path: Path, extractor: OllamaExtractor | None, **options: Any) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder(), extractor=extractor, **options)


def node_named(kb: KnowledgeBase, name: str):
    found = [n for n in kb.store.find_nodes(kb.namespace, [entity_key(name)]) if n.key == entity_key(name)]
    return found[0] if found else None


def counts(kb: KnowledgeBase) -> dict[str, int]:
    stats = kb.stats()
    return {key: stats[key] for key in ("nodes", "edges", "documents", "chunks")}


GOOD = json.dumps({
    "nodes": [{"name": "Ada Lovelace", "type": "Person", "description": "Mathematician.", "aliases": ["Ada"]},
              {"name": "Analytical Engine", "type": "Machine"}],
    "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "WROTE_PROGRAM_FOR",
               "description": "She wrote a program for it."}],
})
ADA_TEXT = "Ada Lovelace wrote the first program for the Analytical Engine."


# -- 4. the extractor over /api/chat -------------------------------------------------------------------------


def test_the_chat_request(ollama):
    extractor = extractor_for(ollama, keep_alive="10m", num_ctx=8192)
    assert extractor.id == "ollama:qwen3:8b"
    assert ollama.requests == []  # constructing it sends nothing
    ollama.add_chat_replies(GOOD)

    fragment = extractor.extract(ADA_TEXT, known_entities=["Charles Babbage", "Luigi Menabrea"])

    assert fragment == {
        "nodes": [{"name": "Ada Lovelace", "type": "Person", "description": "Mathematician.", "aliases": ["Ada"]},
                  {"name": "Analytical Engine", "type": "Machine", "description": "", "aliases": []}],
        "edges": [{"source": "Ada Lovelace", "target": "Analytical Engine", "type": "WROTE_PROGRAM_FOR",
                   "description": "She wrote a program for it."}],
    }
    [body] = chats(ollama)
    assert len(ollama.requests) == 1
    assert body["model"] == MODEL and body["stream"] is False and body["keep_alive"] == "10m"
    assert body["options"] == {"temperature": 0.0, "num_ctx": 8192}

    schema = body["format"]
    assert isinstance(schema, dict) and schema["type"] == "object"
    assert set(schema["properties"]) == {"nodes", "edges"} and set(schema["required"]) == {"nodes", "edges"}
    assert schema["properties"]["nodes"]["type"] == schema["properties"]["edges"]["type"] == "array"
    node_schema = json.dumps(schema)
    assert all(field in node_schema for field in ('"name"', '"type"', '"source"', '"target"'))

    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert "UPPER_SNAKE_CASE" in system["content"] and "FOUNDED" in system["content"]
    assert re.search(r"Never use vague types such as RELATED_TO", system["content"])
    assert user["content"].endswith(f"Text:\n{ADA_TEXT}")
    assert "- Charles Babbage\n- Luigi Menabrea" in user["content"]


def test_no_known_entities_means_no_known_section(ollama):
    ollama.add_chat_replies(GOOD)
    extractor_for(ollama).extract(ADA_TEXT)
    assert chats(ollama)[0]["messages"][1]["content"] == f"Text:\n{ADA_TEXT}"


def test_think_blocks_and_code_fences_are_stripped(ollama):
    ollama.add_chat_replies(
        "<think>\nThe user wants nodes. Maybe {\"nodes\": ... no, first the people.\n</think>\n\n"
        f"```json\n{GOOD}\n```\n"
    )
    fragment = extractor_for(ollama).extract(ADA_TEXT)
    assert [n["name"] for n in fragment["nodes"]] == ["Ada Lovelace", "Analytical Engine"]
    assert len(chats(ollama)) == 1  # parsed at the first attempt


BAD_REPLIES = {
    "not-json": ("Sure! The text is about Ada Lovelace and the Analytical Engine.", "does not match the schema"),
    "schema": (json.dumps({"nodes": [{"name": "Ada Lovelace"}], "edges": []}), "nodes.0.type"),
    "dangling-edge": (
        json.dumps({"nodes": [{"name": "Ada Lovelace", "type": "Person"}],
                    "edges": [{"source": "Ada Lovelace", "target": "Charles Babbage", "type": "CORRESPONDED_WITH"}]}),
        "edges name entities missing from nodes: Charles Babbage",
    ),
}


@pytest.mark.parametrize("kind", list(BAD_REPLIES))
def test_a_malformed_reply_is_retried_with_the_problem(ollama, kind):
    bad, problem = BAD_REPLIES[kind]
    ollama.add_chat_replies(bad, GOOD)

    fragment = extractor_for(ollama).extract(ADA_TEXT)

    assert [e["type"] for e in fragment["edges"]] == ["WROTE_PROGRAM_FOR"]
    first, retry = chats(ollama)
    assert retry["messages"][:2] == first["messages"]
    assert retry["messages"][2] == {"role": "assistant", "content": bad}
    feedback = retry["messages"][3]
    assert feedback["role"] == "user" and "That answer was invalid" in feedback["content"]
    assert problem in feedback["content"]
    assert retry["format"] == first["format"] and retry["stream"] is False


def test_a_known_entity_may_be_named_by_an_edge_without_being_a_node(ollama):
    ollama.add_chat_replies(BAD_REPLIES["dangling-edge"][0])
    fragment = extractor_for(ollama).extract("Ada Lovelace wrote to Charles Babbage.",
                                             known_entities=["Charles Babbage"])
    assert fragment["edges"][0]["target"] == "Charles Babbage"
    assert len(chats(ollama)) == 1


@pytest.mark.parametrize("attempts", [1, 3])
def test_it_gives_up_after_max_attempts(ollama, attempts):
    ollama.default_chat_reply = "still not JSON"
    with pytest.raises(ExtractionError) as err:
        extractor_for(ollama, max_attempts=attempts).extract(ADA_TEXT)
    message = str(err.value)
    assert MODEL in message and f"{attempts} attempts" in message and "does not match the schema" in message
    assert len(chats(ollama)) == attempts
    assert [len(b["messages"]) for b in chats(ollama)] == [2 + 2 * i for i in range(attempts)]


def test_ollama_errors_are_extraction_errors_and_not_retried():
    with FakeOllama(models=["all-minilm"]) as server:
        with pytest.raises(ExtractionError, match=re.escape(f"`ollama pull {MODEL}`")):
            extractor_for(server).extract(ADA_TEXT)
        assert len(chats(server)) == 1
    with FakeOllama() as server:
        server.fail_next(500, "boom", path="/api/chat")
        with pytest.raises(ExtractionError, match="HTTP 500: boom"):
            extractor_for(server).extract(ADA_TEXT)
        assert len(chats(server)) == 1
        url = server.base_url
    with pytest.raises(ExtractionError, match=re.escape(url) + ".*`ollama serve`"):
        OllamaExtractor(MODEL, base_url=url).extract(ADA_TEXT)


BROKEN_CHAT_REPLIES = {  # what a proxy or a broken server may answer: (status, body, what the error says)
    "500-json-string": (500, "upstream error", 'answered /api/chat with HTTP 500: "upstream error"'),
    "200-list": (200, [{"message": {"content": GOOD}}], "JSON but not an object (a list)"),
    "null-message": (200, {"model": MODEL, "message": None}, "without a message's text (message: null"),
    "string-message": (200, {"model": MODEL, "message": GOOD}, "without a message's text (message: a string"),
    "null-content": (200, {"message": {"role": "assistant", "content": None}}, "(message: an object, content: null)"),
}


@pytest.mark.parametrize("kind", list(BROKEN_CHAT_REPLIES))
def test_a_chat_reply_without_a_message_is_an_extraction_error_not_retried(ollama, kind):
    status, body, said = BROKEN_CHAT_REPLIES[kind]
    ollama.answer_next(status, body, path="/api/chat")
    with pytest.raises(ExtractionError) as err:
        extractor_for(ollama, max_attempts=3).extract(ADA_TEXT)
    assert f"Ollama at {ollama.base_url}" in str(err.value) and said in str(err.value)
    assert len(chats(ollama)) == 1  # the server is broken, not the model's answer


def test_a_broken_chat_reply_fails_its_passage_and_the_others_are_extracted(ollama, db_path):
    ollama.answer_next(200, {"message": None}, path="/api/chat")
    docs = [DocumentInput(id="doc-ada", text=ADA_TEXT), DocumentInput(id="doc-turing", text="Alan Turing worked at "
                                                                      "Bletchley Park.")]
    with knowledge_base(db_path, extractor_for(ollama)) as kb:
        result = kb.add_documents(docs, extract=True)
        first, second = result.extractions
        assert result.extraction_errors == 1 and "answered /api/chat without a message's text" in first.error
        assert (second.error, second.nodes, second.edges) == (None, 2, 1)
        assert counts(kb) == {"nodes": 2, "edges": 1, "documents": 2, "chunks": 2}


class OtherPlugin(Extractor):
    """An extractor plugin that is no chat model: it reads passages about Turing as the scripted model does, and
    answers any other passage with `answer` (raised, if an exception)."""

    id = "someones:plugin"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def extract(self, text: str, *, known_entities=()) -> Any:
        if "Turing" in text:
            return graph_for(text)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer, said", [
    (AttributeError("'NoneType' object has no attribute 'get'"),
     "the extractor someones:plugin failed: AttributeError: 'NoneType' object has no attribute 'get'"),
    # A fragment of the wrong shape is refused in words, not by the AttributeError or TypeError it would cause.
    (["not", "a", "graph"], "the extractor someones:plugin returned a list; it must return a GraphFragment"),
    ({"nodes": ["Ada Lovelace"]}, "the extractor someones:plugin returned a mapping with the keys 'nodes'; it must"),
    ({"nodes": ["Ada Lovelace"], "edges": []},
     "the extractor's graph was refused: nodes[0] is a str, not an object with a name and a type"),
])
def test_an_extractor_plugins_bug_fails_its_passage_not_the_ingest(db_path, answer, said):
    docs = [DocumentInput(id="doc-ada", text=ADA_TEXT),
            DocumentInput(id="doc-turing", text="Alan Turing worked at Bletchley Park.")]
    with knowledge_base(db_path, OtherPlugin(answer)) as kb:
        result = kb.add_documents(docs, extract=True)
        first, second = result.extractions
        assert result.extraction_errors == 1 and first.error.startswith(said)
        assert (second.error, second.nodes, second.edges) == (None, 2, 1)


def test_the_timeout_is_a_deadline_for_each_attempt_and_a_late_one_writes_nothing(ollama, db_path):
    # A byte every 0.4 s never lets a per-read timeout expire: only a deadline for the whole request ends it.
    ollama.drip_seconds = 0.4
    started = time.monotonic()
    with pytest.raises(ExtractionError) as err:
        extractor_for(ollama, timeout=1.5, max_attempts=3).extract(ADA_TEXT)
    assert time.monotonic() - started < 1.5 + 1.0
    assert "1.5 s deadline" in str(err.value) and f"{ollama.base_url}/api/chat" in str(err.value)
    assert len(chats(ollama)) == 1  # an Ollama error is not retried

    with knowledge_base(db_path, extractor_for(ollama, timeout=1.5)) as kb:
        started = time.monotonic()
        result = kb.add_documents([DocumentInput(id="ada", text=ADA_TEXT)], extract=True)
        assert time.monotonic() - started < 1.5 + 2.0
        assert result.extraction_errors == 1 and "deadline" in result.extractions[0].error
        assert counts(kb) == {"nodes": 0, "edges": 0, "documents": 1, "chunks": 1}


def test_the_plugin_is_registered_as_ollama(plugin_manager):
    extractor = create(plugin_manager, "extractor", "ollama", model="llama3.1", max_attempts=2)
    assert isinstance(extractor, OllamaExtractor) and extractor.id == "ollama:llama3.1:latest"
    with pytest.raises(ValueError, match="max_attempts"):
        OllamaExtractor(max_attempts=0)


# -- 5. add_documents(extract=True) through the knowledge base -------------------------------------------------

THREE_PARAGRAPHS = "\n\n".join([
    "Ada Lovelace wrote the first program for the Analytical Engine. She published it as notes to a paper in 1843.",
    f"{GARBLE}: Grace Hopper worked at Harvard University on the Mark I computer during the Second World War.",
    "Alan Turing worked at Bletchley Park during the war, where he designed the bombe to break Enigma messages.",
])
SMALL_CHUNKS = {"chunk_chars": 200, "chunk_overlap": 0}


def edge_evidence(path: Path) -> set[tuple[str, str, str, int]]:
    """(source, type, target, chunk id) for every edge with a recorded source passage, read from the closed file."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute(
            "SELECT s.name, e.type, t.name, ev.chunk_id FROM edge_evidence ev JOIN edges e ON e.id = ev.edge_id "
            "JOIN nodes s ON s.id = e.source_id JOIN nodes t ON t.id = e.target_id"
        ).fetchall()
    finally:
        con.close()
    return {tuple(r) for r in rows}


def test_every_extracted_node_and_edge_is_linked_to_its_passage(ollama, db_path):
    docs = [DocumentInput(id="doc-ada", title="Ada", text=ADA_TEXT),
            DocumentInput(id="doc-turing", text="Alan Turing worked at Bletchley Park.")]
    with knowledge_base(db_path, extractor_for(ollama)) as kb:
        result = kb.add_documents(docs, extract=True)

        assert result.extraction_errors == 0
        by_doc = {d.id: d.chunk_ids for d in result.documents}
        assert [(e.document_id, [e.chunk_id], e.nodes, e.edges, e.error) for e in result.extractions] == [
            ("doc-ada", by_doc["doc-ada"], 2, 1, None), ("doc-turing", by_doc["doc-turing"], 2, 1, None)]
        for entry, names in zip(result.extractions, [("Ada Lovelace", "Analytical Engine"),
                                                     ("Alan Turing", "Bletchley Park")]):
            ids = [node_named(kb, name).id for name in names]
            assert {chunk for chunk, _ in kb.store.chunks_mentioning(ids)} == {entry.chunk_id}
        assert kb.stats()["edge_types"] == {"WROTE_PROGRAM_FOR": 1, "WORKED_AT": 1}
        assert node_named(kb, "Analytical Engine").type == "Machine"
        ada_chunk, turing_chunk = (e.chunk_id for e in result.extractions)
        assert len(chats(ollama)) == 2

        found = kb.search("Alan Turing")
        assert "Alan Turing" in [a.name for a in found.anchors]
        assert found.passages[0].document_id == "doc-turing"

    assert edge_evidence(db_path) == {("Ada Lovelace", "WROTE_PROGRAM_FOR", "Analytical Engine", ada_chunk),
                                      ("Alan Turing", "WORKED_AT", "Bletchley Park", turing_chunk)}


def test_a_failed_passage_is_stored_and_reported_and_the_others_keep_their_graph(ollama, db_path):
    assert len(chunk_text(THREE_PARAGRAPHS, **{"max_chars": 200, "overlap": 0})) == 3
    progress: list[tuple[int, int, str]] = []
    with knowledge_base(db_path, extractor_for(ollama, max_attempts=2), **SMALL_CHUNKS) as kb:
        result = kb.add_documents([DocumentInput(id="history", text=THREE_PARAGRAPHS)], extract=True,
                                  progress=lambda *p: progress.append(p))

        [stored] = result.documents
        assert len(stored.chunk_ids) == 3 and result.chunks_written == 3
        assert [e.chunk_id for e in result.extractions] == stored.chunk_ids
        assert result.extraction_errors == 1
        first, second, third = result.extractions
        assert first.error is None and third.error is None
        assert (first.nodes, first.edges, third.nodes, third.edges) == (2, 1, 2, 1)
        assert (second.nodes, second.edges) == (0, 0)
        assert MODEL in second.error and "2 attempts" in second.error
        assert "\n" not in second.error

        chunks = kb.store.document_chunks("default", ["history"])
        assert [c.id for c in chunks] == stored.chunk_ids and GARBLE in chunks[1].text
        assert node_named(kb, "Grace Hopper") is None and node_named(kb, "Harvard University") is None
        for name, chunk_id in (("Ada Lovelace", first.chunk_id), ("Alan Turing", third.chunk_id)):
            assert {c for c, _ in kb.store.chunks_mentioning([node_named(kb, name).id])} == {chunk_id}
        assert counts(kb) == {"nodes": 4, "edges": 2, "documents": 1, "chunks": 3}
        assert len(chats(ollama)) == 1 + 2 + 1  # the bad passage was asked max_attempts times, the others once

    extracting = [p for p in progress if p[2] == "extracting entities and relationships"]
    assert [p[:2] for p in extracting] == [(1, 3), (2, 3), (3, 3)]
    assert [p[:2] for p in progress if p[2] == "embedding passages"][-1] == (3, 3)


def rule_breaking(kind: str) -> str:
    """GOOD with one thing that matches the schema sent as `format` but breaks the graph's rules."""
    graph = json.loads(GOOD)
    if kind == "relation-type":
        graph["edges"][0]["type"] = "->"
    elif kind == "blank-name":
        graph["nodes"].append({"name": "   ", "type": "Thing"})
    elif kind == "invisible-alias":
        graph["nodes"][0]["aliases"] = ["\u200b"]
    elif kind == "control-characters":
        graph["nodes"][1]["description"] = "\x1b[31mA machine.\x1b[0m"
    return json.dumps(graph)


RULES = {
    "relation-type": "edges.0.type: must contain letters or digits, e.g. FOUNDED",
    "blank-name": "nodes.2.name: must contain visible characters, not only spaces",
    "invisible-alias": "nodes.0.aliases.0: must contain visible characters",
    "control-characters": "nodes.1.description: must not contain control characters",
}


@pytest.mark.parametrize("kind", list(RULES))
def test_a_reply_breaking_the_graphs_rules_is_retried_with_the_rule(ollama, db_path, kind):
    ollama.add_chat_replies(rule_breaking(kind), GOOD)
    with knowledge_base(db_path, extractor_for(ollama, max_attempts=3)) as kb:
        result = kb.add_documents([DocumentInput(id="doc-ada", text=ADA_TEXT)], extract=True)
        [entry] = result.extractions
        assert (entry.error, entry.nodes, entry.edges) == (None, 2, 1)
        assert counts(kb) == {"nodes": 2, "edges": 1, "documents": 1, "chunks": 1}
    _, retry = chats(ollama)
    assert retry["messages"][2] == {"role": "assistant", "content": rule_breaking(kind)}
    assert RULES[kind] in retry["messages"][3]["content"]


def test_a_reply_that_keeps_breaking_them_fails_its_passage_in_plain_words(ollama, db_path):
    ollama.default_chat_reply = rule_breaking("relation-type")
    with knowledge_base(db_path, extractor_for(ollama, max_attempts=3)) as kb:
        result = kb.add_documents([DocumentInput(id="doc-ada", text=ADA_TEXT)], extract=True)
        [entry] = result.extractions
        assert result.extraction_errors == 1 and len(chats(ollama)) == 3
        assert entry.error == (f"{MODEL} gave no valid extraction in 3 attempts: the reply does not match the schema "
                               f"({RULES['relation-type']})")
        # A passage's graph is written whole or not at all: its valid nodes are not kept without their edge.
        assert counts(kb) == {"nodes": 0, "edges": 0, "documents": 1, "chunks": 1}


def test_a_graph_the_knowledge_base_refuses_is_that_passages_error_in_plain_words(db_path):
    # An extractor that is no chat model (no retries) may still hand over what the knowledge base refuses.
    plugin = OtherPlugin({"nodes": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "   ", "type": "Thing"}],
                      "edges": []})
    with knowledge_base(db_path, plugin) as kb:
        result = kb.add_documents([DocumentInput(id="doc-ada", text=ADA_TEXT)], extract=True)
        [entry] = result.extractions
        assert entry.error == ("the extractor's graph was refused: nodes[1].name: String should have at least 1 "
                               "character")
        assert counts(kb) == {"nodes": 0, "edges": 0, "documents": 1, "chunks": 1}  # the graph call was atomic


def test_an_edge_may_name_an_alias_given_in_the_same_reply(ollama, db_path):
    """The extractor accepts an edge end that is an alias of one of the reply's nodes; so must the store."""
    ollama.add_chat_replies(json.dumps({
        "nodes": [{"name": "Ada Lovelace", "type": "Person", "aliases": ["Countess of Lovelace"]},
                  {"name": "Analytical Engine", "type": "Machine"}],
        "edges": [{"source": "Countess of Lovelace", "target": "Analytical Engine", "type": "WROTE_PROGRAM_FOR"}],
    }))
    with knowledge_base(db_path, extractor_for(ollama)) as kb:
        result = kb.add_documents([DocumentInput(id="doc-ada", text=ADA_TEXT)], extract=True)
        assert result.extraction_errors == 0, result.extractions
        [edge] = kb.store.neighbors([node_named(kb, "Ada Lovelace").id], "default")
        assert edge.type == "WROTE_PROGRAM_FOR"
        assert counts(kb)["nodes"] == 2


def test_known_entities_are_sent_to_the_model(ollama, db_path):
    with knowledge_base(db_path, extractor_for(ollama)) as kb:
        first = kb.add_documents([DocumentInput(id="doc-1", text=ADA_TEXT)], extract=True)
        assert node_named(kb, "Ada Lovelace") is not None
        second = "Ada Lovelace translated a paper by Luigi Menabrea about the engine."
        result = kb.add_documents([DocumentInput(id="doc-2", text=second)], extract=True)
        assert result.extraction_errors == 0

        first_prompt, second_prompt = (b["messages"][1]["content"] for b in chats(ollama))
        assert "Known entities" not in first_prompt
        known = second_prompt.split("Text:\n")[0]
        assert "Known entities mentioned in the text" in known and "- Ada Lovelace\n" in known
        assert "Analytical Engine" not in known  # stored, but not mentioned in this passage
        ada = node_named(kb, "Ada Lovelace")
        assert {c for c, _ in kb.store.chunks_mentioning([ada.id])} == {
            first.extractions[0].chunk_id, result.extractions[0].chunk_id}
        assert counts(kb)["nodes"] == 3  # Ada was merged, not duplicated


def test_extract_without_an_extractor_explains_what_the_host_can_do(db_path):
    with knowledge_base(db_path, None) as kb:
        with pytest.raises(InvalidInputError) as err:
            kb.add_documents([DocumentInput(id="doc-ada", text=ADA_TEXT)], extract=True)
        message = str(err.value)
        assert message == NO_EXTRACTOR
        assert "add_knowledge_graph" in message and "source_ids" in message and "DUCKGRAPH_EXTRACTOR" in message
        assert counts(kb) == {"nodes": 0, "edges": 0, "documents": 0, "chunks": 0}
        assert kb.store.embedder_info() is None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_extract_without_an_extractor_is_a_tool_error_over_mcp(tmp_path, db_path, plugin_manager):
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(config, env={}, db=str(db_path), warm_up=False)
    services = bootstrap(settings, plugin_manager=plugin_manager, embedder=HashingEmbedder())
    assert services.knowledge_base.extractor is None
    async with Client(build_server(services)) as client:
        result = await client.call_tool("add_documents", {"documents": [{"id": "d", "text": ADA_TEXT}],
                                                          "extract": True})
        assert result.is_error
        text = result.content[0].text
        assert "no extractor is configured" in text and "add_knowledge_graph" in text
        stored = await client.call_tool("add_documents", {"documents": [{"id": "d", "text": ADA_TEXT}]})
        assert not stored.is_error and stored.structured_content["extractions"] == []


# -- 6. duckgraph ingest -----------------------------------------------------------------------------------------


@pytest.fixture
def notes(tmp_path: Path, monkeypatch) -> Path:
    """A folder of notes, with the working directory set so paths are given relative ("notes")."""
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "ada.md").write_text(f"# Ada\n\n{ADA_TEXT}\n", encoding="utf-8")
    (folder / "babbage.txt").write_text("Charles Babbage designed the Analytical Engine.\n", encoding="utf-8")
    (folder / "sub" / "turing.md").write_text("Alan Turing worked at Bletchley Park.\n", encoding="utf-8")
    (folder / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))  # skipped: no converter reads it
    monkeypatch.chdir(tmp_path)
    return folder


@pytest.fixture
def ingest_env(tmp_path: Path, monkeypatch, ollama) -> Path:
    """DUCKGRAPH_* variables for Ollama embeddings and extraction; returns the database path."""
    config = tmp_path / "config.toml"
    config.write_text("", encoding="utf-8")
    for name in ("DUCKGRAPH_DB", "DUCKGRAPH_NAMESPACE", "DUCKGRAPH_STORE", "DUCKGRAPH_STORE_OPTIONS", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER", "ollama")
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER_OPTIONS", json.dumps({"base_url": ollama.base_url}))
    monkeypatch.setenv("DUCKGRAPH_EXTRACTOR", "ollama")
    monkeypatch.setenv("DUCKGRAPH_EXTRACTOR_OPTIONS", json.dumps({"base_url": ollama.base_url, "model": MODEL,
                                                                  "max_attempts": 2}))
    return tmp_path / "ingested.duckdb"


NOTES = ["ada.md", "babbage.txt", "sub/turing.md"]


def note_id(notes: Path, name: str) -> str:
    """A file's document id: its canonical absolute path (core/files/folder.py)."""
    return (notes.resolve() / name).as_posix()


def open_file(path: Path) -> KnowledgeBase:
    """The ingested file, read with the embedder it was built with (nothing is embedded by these reads)."""
    return KnowledgeBase(DuckDBStore(path), OllamaEmbedder(dimensions=384)).open()


def test_ingest_a_folder_with_extraction(notes, ingest_env, ollama, capsys):
    code = main(["ingest", "notes", "--db", str(ingest_env)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == "3 documents stored, 0 unchanged, 1 skipped, 3 passages, 3 passages extracted, 0 failed"
    assert "\r" not in err  # stderr is not a terminal: plain lines
    progress = err.splitlines()
    # The batch counts the folder's four files, diagram.png (skipped, listed) among them.
    assert "files 1-4 of 4: embedding passages [" + "#" * 30 + "] 3/3" in progress
    assert "files 1-4 of 4: extracting entities and relationships [" + "#" * 30 + "] 3/3" in progress
    assert any(line.endswith("1/3") and "extracting" in line for line in progress)
    assert all("png" not in str(r["body"]) for r in ollama.requests)
    assert [passage_of(b).strip() for b in chats(ollama)] == [
        f"Ada\n{ADA_TEXT}", "Charles Babbage designed the Analytical Engine.", "Alan Turing worked at Bletchley Park."]

    kb = open_file(ingest_env)
    try:
        ids = [note_id(notes, name) for name in NOTES]
        docs = kb.store.get_documents(ids, "default")
        assert sorted(d.id for d in docs) == ids
        assert {d.id: d.title for d in docs} == dict(zip(ids, ["ada", "babbage", "turing"]))
        stats = kb.stats()
        assert (stats["documents"], stats["chunks"], stats["nodes"], stats["edges"]) == (3, 3, 5, 3)
        assert stats["edge_types"] == {"WROTE_PROGRAM_FOR": 1, "DESIGNED": 1, "WORKED_AT": 1}
        engine = node_named(kb, "Analytical Engine")
        chunks = {c.id: c.document_id for c in kb.store.document_chunks("default", ids)}
        assert {chunks[c] for c, _ in kb.store.chunks_mentioning([engine.id])} == set(ids[:2])
        assert kb.store.embedder_info() == ("ollama:all-minilm:latest", 384)
    finally:
        kb.close()

    # Again: every file is unchanged, no passage is sent to the chat model again, nothing in the file changes.
    chats_before = len(chats(ollama))
    code = main(["ingest", "notes", "--db", str(ingest_env)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == (
        "0 documents stored, 3 unchanged, 1 skipped, 0 passages, 0 passages extracted (3 had been already), 0 failed"
    )
    assert len(chats(ollama)) == chats_before
    kb = open_file(ingest_env)
    try:
        assert kb.stats() == stats
    finally:
        kb.close()


def test_ingest_without_extraction_sends_no_chat(notes, ingest_env, ollama, capsys):
    code = main(["ingest", "notes", "--no-extract", "--db", str(ingest_env)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.strip() == "3 documents stored, 0 unchanged, 1 skipped, 3 passages"
    assert "extracting" not in err and "embedding passages" in err
    assert chats(ollama) == []
    kb = open_file(ingest_env)
    try:
        assert counts(kb) == {"nodes": 0, "edges": 0, "documents": 3, "chunks": 3}
    finally:
        kb.close()


def test_ingest_exits_1_when_an_extraction_failed(notes, ingest_env, ollama, capsys):
    (notes / "broken.txt").write_text(f"{GARBLE} notes about Grace Hopper at Harvard University.\n", encoding="utf-8")
    code = main(["ingest", "notes", "--db", str(ingest_env)])
    out, err = capsys.readouterr()
    assert code == 1
    summary = "4 documents stored, 0 unchanged, 1 skipped, 4 passages, 3 passages extracted, 1 failed"
    assert out.strip() == summary
    [failure] = [line for line in err.splitlines() if "extraction failed" in line]
    assert re.fullmatch(rf"duckgraph: extraction failed for {re.escape(note_id(notes, 'broken.txt'))}#\d+: {MODEL} gave no valid "
                        r"extraction in 2 attempts: .*", failure)
    assert len(chats(ollama)) == 3 + 2
    kb = open_file(ingest_env)
    try:
        assert kb.store.get_documents([note_id(notes, "broken.txt")], "default")  # stored anyway
        assert node_named(kb, "Grace Hopper") is None
        assert counts(kb) == {"nodes": 5, "edges": 3, "documents": 4, "chunks": 4}
    finally:
        kb.close()


def test_ingest_names_a_missing_path_and_an_empty_folder(tmp_path, ingest_env, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "picture.png").write_bytes(b"\x89PNG")
    assert main(["ingest", "empty", "--db", str(ingest_env)]) == 1
    assert "no documents found in empty" in capsys.readouterr().err
    assert main(["ingest", "missing", "--db", str(ingest_env)]) == 1
    assert "missing does not exist" in capsys.readouterr().err
    assert not ingest_env.exists()


def test_ingest_reports_a_broken_ollama_reply_and_goes_on(notes, ingest_env, ollama, capsys):
    ollama.answer_next(200, {"message": None}, path="/api/chat")  # the first passage's only attempt
    code = main(["ingest", "notes", "--db", str(ingest_env)])
    out, err = capsys.readouterr()
    assert code == 1 and "Traceback" not in err
    assert out.strip() == "3 documents stored, 0 unchanged, 1 skipped, 3 passages, 2 passages extracted, 1 failed"
    [failure] = [line for line in err.splitlines() if "extraction failed" in line]
    assert failure.endswith(f"Ollama at {ollama.base_url} answered /api/chat without a message's text "
                            "(message: null, content: null)")

    (notes / "new.txt").write_text("Grace Hopper worked at Harvard University.\n", encoding="utf-8")
    ollama.answer_next(200, [[0.1] * 384], path="/api/embed")
    assert main(["ingest", "notes", "--db", str(ingest_env)]) == 1
    out, err = capsys.readouterr()
    assert err.strip().splitlines()[-1] == (f"duckgraph: Ollama at {ollama.base_url} sent a reply to /api/embed "
                                            "that is JSON but not an object (a list)")
