"""A replaced document keeps the passages whose text did not change (their ids, vectors, entities and extraction
marks): only the changed ones are dropped, written and embedded. Stored without extraction, what only its changed
passages supported stays while a new passage still names it (the host model extracted it, and nobody reads the
new text); with extraction, it goes with them and the extractor reads the new passages. A fact its document names
only in other words was linked to the passage nearest to it, and goes with that one. Real DuckDB files, the real
default model (and FakeOllama as the extractor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaExtractor
from duckgraph.ports import ChunkRecord, DocumentRecord, InvalidInputError, WriteBatch

from tests.ollama_server import FakeOllama

NOTE = "Maya Chen leads Project Orion at Acme. Orion ships in Mayy; Raj Patel owns the launch checklist."
SOURCE = ["standup-2026-03-02"]


def open_kb(path: Path, embedder: Any, **kwargs: Any) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), embedder, **kwargs).open()


def graph(kb: KnowledgeBase) -> tuple[set[str], set[str]]:
    return ({n.name for n in kb.store.list_nodes("default", limit=100)},
            {e.type for e in kb.store.list_edges("default", limit=100)})


def counting(monkeypatch: pytest.MonkeyPatch, embedder: Any) -> list[str]:
    """The texts the embedder is asked to embed from now on."""
    asked: list[str] = []
    real = type(embedder).embed_documents

    def embed_documents(texts):
        asked.extend(texts)
        return real(embedder, texts)

    monkeypatch.setattr(embedder, "embed_documents", embed_documents)
    return asked


def mentioning(kb: KnowledgeBase, name: str) -> set[int]:
    node = kb.store.find_nodes("default", [name.casefold()])[0]
    return {chunk for chunk, _ in kb.store.chunks_mentioning([node.id])}


def test_a_fixed_typo_keeps_the_graph_the_host_extracted_from_the_note(db_path, minilm):
    kb = open_kb(db_path, minilm)
    [old] = kb.add_documents([DocumentInput(id=SOURCE[0], text=NOTE)]).documents
    kb.add_knowledge_graph(  # as extract_knowledge asks the host model to: with the note as the source
        [NodeInput(name="Maya Chen", type="Person", observations=["Leads Project Orion"], source_ids=SOURCE),
         NodeInput(name="Project Orion", type="Project", description="ships in May", source_ids=SOURCE),
         NodeInput(name="Raj Patel", type="Person", source_ids=SOURCE)],
        [EdgeInput(source="Maya Chen", target="Project Orion", type="LEADS", source_ids=SOURCE),
         EdgeInput(source="Raj Patel", target="Project Orion", type="OWNS_LAUNCH_CHECKLIST_OF", source_ids=SOURCE)])

    fixed = kb.add_documents([DocumentInput(id=SOURCE[0], text=NOTE.replace("Mayy", "May"))])
    assert (fixed.entities_removed, fixed.relations_removed) == (0, 0)
    assert (fixed.entities_kept, fixed.relations_kept) == (3, 2)
    # Named again does not mean still true ("not Kafka" names Kafka): the host is told what to check.
    assert sorted(fixed.to_review) == ["entity: Maya Chen [Person]", "entity: Project Orion [Project]",
                                       "entity: Raj Patel [Person]", "relation: Maya Chen leads Project Orion",
                                       "relation: Raj Patel owns launch checklist of Project Orion"]
    assert (fixed.chunks_written, fixed.chunks_kept) == (1, 0)
    assert graph(kb) == ({"Maya Chen", "Project Orion", "Raj Patel"}, {"LEADS", "OWNS_LAUNCH_CHECKLIST_OF"})
    [new_chunk] = fixed.documents[0].chunk_ids
    assert new_chunk != old.chunk_ids[0] and mentioning(kb, "Maya Chen") == {new_chunk}
    maya = kb.store.find_nodes("default", ["maya chen"])[0]
    assert kb.store.get_observations([maya.id])[maya.id] == ["Leads Project Orion"]
    result = kb.search("Who leads Project Orion?")
    assert "Maya Chen leads Project Orion" in result.text

    # A new text that no longer names Raj Patel: he and his relation go, as before; the rest stays.
    dropped = kb.add_documents([DocumentInput(id=SOURCE[0], text="Maya Chen leads Project Orion at Acme.")])
    assert (dropped.entities_removed, dropped.relations_removed) == (1, 1)
    assert (dropped.entities_kept, dropped.relations_kept) == (2, 1)
    assert graph(kb) == ({"Maya Chen", "Project Orion"}, {"LEADS"})
    kb.close()
    con = duckdb.connect(str(db_path), read_only=True)
    try:  # no provenance left pointing at a passage that is gone
        assert con.execute("SELECT count(*) FROM mentions WHERE chunk_id NOT IN (SELECT id FROM chunks)"
                           ).fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM edge_evidence WHERE chunk_id NOT IN (SELECT id FROM chunks)"
                           ).fetchone()[0] == 0
    finally:
        con.close()


def test_names_written_with_other_accents_or_punctuation_keep_their_provenance(db_path):
    """The edited note writes the names with a typographic apostrophe, accents and a space for the hyphen: they
    are still named (their loose forms, `loose_key`, are). A loose form that is another word is not: "C++" is not
    named by the "C" that replaced it, nor "Paris Hilton" by "Paris, Hilton", nor "Ed" by "edited". Name matching
    only: the instant hashing embedder stands in for the model."""
    from tests.fakes import HashingEmbedder

    kb = open_kb(db_path, HashingEmbedder())
    text = ("Sean O'Brien met Zoe Muller and Jean-Luc in Lyon. Ed took the notes. The tool is written in C++. "
            "Paris Hilton sent flowers.")
    kb.add_documents([DocumentInput(id=SOURCE[0], text=text)])
    kb.add_knowledge_graph(
        [NodeInput(name=name, type=kind, source_ids=SOURCE) for name, kind in [
            ("Sean O'Brien", "Person"), ("Zoe Muller", "Person"), ("Jean-Luc", "Person"), ("Ed", "Person"),
            ("C++", "Language"), ("Paris Hilton", "Person")]],
        [EdgeInput(source="Sean O'Brien", target="Zoe Muller", type="MET", source_ids=SOURCE)])

    edited = kb.add_documents([DocumentInput(id=SOURCE[0], text=(
        "Sean O\u2019Brien met Zo\u00eb M\u00fcller and Jean Luc in Lyon. Someone edited the notes. The tool is "
        "rewritten in C. We flew to Paris, Hilton rooms were full."))])
    assert (edited.entities_kept, edited.relations_kept) == (3, 1)
    assert sorted(edited.to_review) == ["entity: Jean-Luc [Person]", "entity: Sean O'Brien [Person]",
                                        "entity: Zoe Muller [Person]", "relation: Sean O'Brien met Zoe Muller"]
    assert (edited.entities_removed, edited.relations_removed) == (3, 0)
    assert graph(kb) == ({"Sean O'Brien", "Zoe Muller", "Jean-Luc"}, {"MET"})
    [new_chunk] = edited.documents[0].chunk_ids
    assert all(mentioning(kb, name) == {new_chunk} for name in ("Sean O'Brien", "Zoe Muller", "Jean-Luc"))
    kb.close()
    con = duckdb.connect(str(db_path), read_only=True)
    try:  # the relation's evidence moved to the new passage too
        assert con.execute("SELECT chunk_id FROM edge_evidence").fetchall() == [(new_chunk,)]
    finally:
        con.close()


def sections(*bodies: str) -> str:
    """A Markdown text of one section per body, headed by its first word: each body is a passage."""
    return "\n\n".join(f"## {body.split()[0]}\n\n{body}" for body in bodies)


BODIES = [f"{word.title()} review: the team found nothing unusual in week {i}."
          for i, word in enumerate(["budget", "deploy", "server", "incident", "design", "roadmap"], start=1)]


def test_unchanged_passages_keep_their_rows_vectors_entities_and_marks(db_path, minilm, monkeypatch):
    kb = open_kb(db_path, minilm)
    [first] = kb.add_documents([DocumentInput(id="journal.md", text=sections(*BODIES))]).documents
    assert len(first.chunk_ids) == 6
    # An entity the host linked to the third passage alone, and the fifth passage marked as read by an extractor.
    kb.add_knowledge_graph([NodeInput(name="Server Review", type="Event")], [], source_chunk_ids=[first.chunk_ids[2]])
    kb.store.mark_extracted([first.chunk_ids[4]], "ollama:qwen3:8b")
    asked = counting(monkeypatch, minilm)

    # A paragraph inserted at the top (every ordinal shifts by one) and the last one edited.
    edited = ["Opening paragraph about the customer invoice.", *BODIES[:5], BODIES[5] + " Edited."]
    replaced = kb.add_documents([DocumentInput(id="journal.md", text=sections(*edited))])
    assert (replaced.chunks_written, replaced.chunks_kept) == (2, 5)
    assert len(asked) == 2  # only the new passages were embedded
    chunks = kb.store.document_chunks("default", ["journal.md"])
    assert [c.ordinal for c in chunks] == list(range(7))
    assert [c.id for c in chunks] == replaced.documents[0].chunk_ids
    # The first five are the same rows, now one further down; the sixth changed (a new row); the opening is new.
    assert [c.id for c in chunks][1:6] == first.chunk_ids[:5]
    assert not {chunks[0].id, chunks[6].id} & set(first.chunk_ids)
    assert [c.section for c in chunks] == [body.split()[0] for body in edited]
    assert mentioning(kb, "Server Review") == {first.chunk_ids[2]}
    assert kb.store.extracted_chunks([c.id for c in chunks]) == {first.chunk_ids[4]}

    def neighbours(store) -> dict[int, tuple[int | None, int | None]]:
        return store.adjacent_chunks([c.id for c in chunks], "default")

    # Reading order follows the ordinals, across kept and new passages (whose ids are not in that order).
    ids = [c.id for c in chunks]
    expected = {i: (ids[n - 1] if n else None, ids[n + 1] if n + 1 < len(ids) else None) for n, i in enumerate(ids)}
    assert neighbours(kb.store) == expected
    # The vector index holds the kept passages' vectors and the new ones', and nothing of the dropped one.
    def nearest(query: str) -> list[int]:
        return [i for i, _ in kb.store.vector_search("chunk", minilm.embed_query(query), 10, "default")]

    assert sorted(nearest("review")) == sorted(ids)
    assert nearest("Opening paragraph about the customer invoice")[0] == chunks[0].id
    assert nearest("Deploy review: the team found nothing unusual in week 2.")[0] == first.chunk_ids[1]
    kb.close()

    kb = open_kb(db_path, minilm)  # the mirror loaded from the file knows the same order
    assert neighbours(kb.store) == expected
    kb.close()
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == 7
        assert con.execute("SELECT count(*) FROM chunks").fetchone()[0] == 7
    finally:
        con.close()


def test_a_new_title_embeds_the_kept_passages_again(db_path, minilm, monkeypatch):
    kb = open_kb(db_path, minilm)
    [first] = kb.add_documents([DocumentInput(id="journal.md", text=sections(*BODIES[:3]), title="Journal")]
                               ).documents
    query = minilm.embed_query("Quarterly zeppelin log")
    before = kb.store.similarities("chunk", first.chunk_ids, query)
    asked = counting(monkeypatch, minilm)
    retitled = kb.add_documents([DocumentInput(id="journal.md", text=sections(*BODIES[:3]),
                                               title="Quarterly zeppelin log")])
    # The rows stay, but a passage's vector (and its words) hold its document's title: all three are embedded again.
    assert (retitled.chunks_written, retitled.chunks_kept) == (0, 3) and len(asked) == 3
    assert retitled.documents[0].chunk_ids == first.chunk_ids
    assert {i for i, _ in kb.store.keyword_search("chunk", "zeppelin", 10, "default")} == set(first.chunk_ids)
    after = kb.store.similarities("chunk", first.chunk_ids, query)
    assert all(after[i] > before[i] + 0.1 for i in first.chunk_ids), (before, after)
    kb.close()


def test_a_kept_chunk_id_must_be_a_stored_passage_of_its_document(db_path, minilm):
    kb = open_kb(db_path, minilm)
    [a] = kb.add_documents([DocumentInput(id="a.md", text="Alpha text.")]).documents
    [b] = kb.add_documents([DocumentInput(id="b.md", text="Beta text.")]).documents
    for chunk in (ChunkRecord(document_id="a.md", ordinal=0, text="Alpha text.", id=b.chunk_ids[0]),  # b's
                  ChunkRecord(document_id="a.md", ordinal=0, text="Other text.", id=a.chunk_ids[0])):  # not its text
        batch = WriteBatch(documents=[DocumentRecord(id="a.md", namespace="default", text="Alpha text.")],
                           chunks=[chunk])
        with pytest.raises(InvalidInputError, match=r"not a stored passage of document 'a.md'.*nothing was written"):
            kb.store.write(batch)
        assert [c.id for c in kb.store.document_chunks("default", ["a.md", "b.md"])] == [*a.chunk_ids, *b.chunk_ids]
    kb.close()


# -- with extraction: the extractor reads the new passages, so the old rule holds ------------------------------------


def located(body: dict[str, Any]) -> str:
    """A scripted model: Acme Corp is headquartered in the city a passage names."""
    text = next(m["content"] for m in body["messages"] if m["role"] == "user").split("Text:\n", 1)[1]
    for city in ("Berlin", "Munich"):
        if city in text:
            return json.dumps({"nodes": [{"name": "Acme Corp", "type": "Company"}, {"name": city, "type": "City"}],
                               "edges": [{"source": "Acme Corp", "target": city, "type": "HEADQUARTERED_IN"}]})
    return json.dumps({"nodes": [], "edges": []})


def test_with_extraction_what_only_the_changed_passages_supported_goes_and_kept_ones_are_not_read_again(
        db_path, minilm):
    with FakeOllama(default_chat_reply=located) as server:
        extractor = OllamaExtractor("qwen3:8b", base_url=server.base_url, max_attempts=1)
        kb = open_kb(db_path, minilm, extractor=extractor)
        text = sections("Acme Corp is headquartered in Berlin.", "The canteen serves soup on Fridays.")
        kb.add_documents([DocumentInput(id="hq.md", text=text)], extract=True)
        chats = len(server.requests_to("/api/chat"))
        moved = kb.add_documents([DocumentInput(id="hq.md", text=text.replace("Berlin", "Munich"))], extract=True)
        # Acme Corp is named by the new passage, yet goes with the old one: the extractor reads the new text
        # and finds it again (with the new city), and the unchanged canteen passage is not sent again.
        assert (moved.entities_removed, moved.relations_removed) == (2, 1)
        assert (moved.entities_kept, moved.relations_kept) == (0, 0)
        assert (moved.chunks_written, moved.chunks_kept) == (1, 1)
        assert len(server.requests_to("/api/chat")) == chats + 1
        assert [e.skipped for e in moved.extractions] == [False, True]
        assert graph(kb) == ({"Acme Corp", "Munich"}, {"HEADQUARTERED_IN"})
        kb.close()


# -- the file does not grow with each replacement -------------------------------------------------------------------


def test_a_long_note_replaced_daily_does_not_grow_the_file(db_path):
    """A stored document is updated in place: DuckDB never reused the space of a row deleted and inserted again
    under the same key, so a 200 kB note replaced daily grew the file by about 0.5 MB a day. Storage only: the
    instant hashing embedder stands in for the model."""
    from tests.fakes import HashingEmbedder

    paragraphs = [f"Paragraph {i}: " + " ".join(["meeting budget deploy server incident review"] * 8)
                  for i in range(400)]
    sizes = []
    for day in range(12):
        paragraphs[(day * 37) % len(paragraphs)] = f"Edited on day {day}."
        kb = open_kb(db_path, HashingEmbedder())
        kb.add_documents([DocumentInput(id="journal.md", text="\n\n".join(paragraphs))])
        kb.close()
        sizes.append(db_path.stat().st_size)
    assert max(sizes[3:]) <= max(sizes[:3]) + 600_000, sizes


def test_a_name_s_loose_form_that_is_another_word_does_not_link_a_passage(db_path):
    """An entity cited by `source_ids` is linked to the passages of the document that name it: "C++" to the one
    saying "uses C++", not to the one saying "written in C" ("c", its loose form, is another word)."""
    from tests.fakes import HashingEmbedder

    kb = open_kb(db_path, HashingEmbedder())
    [stored] = kb.add_documents([DocumentInput(id=SOURCE[0], text=sections(
        "The first tool is written in C, for the old boards.", "The second tool uses C++ for its speed."))]).documents
    assert len(stored.chunk_ids) == 2
    kb.add_knowledge_graph([NodeInput(name="C++", type="Language", source_ids=SOURCE)], [])
    assert mentioning(kb, "C++") == {stored.chunk_ids[1]}
    kb.close()


PAPER = {"Methods": "Coin cells were assembled in an argon glovebox and cycled at 0.2 C between 3.0 and 4.3 V.",
         "Results": "LLZO-Ta reached 0.82 mS/cm and lasted 412 cycles to 80% capacity.",
         "Discussion": "The batch delivered in November had been sintered at 1,150 °C instead of the specified "
                       "1,230 °C, which explains the hairline crack in the separator.",
         "Conclusion": "Tantalum doping is the most promising route for garnet electrolytes."}


def paper(*left_out: str) -> str:
    return "\n\n".join(f"## {heading}\n\n{body}" for heading, body in PAPER.items() if heading not in left_out)


def test_a_fact_its_document_names_in_other_words_goes_with_the_passage_nearest_to_it(db_path, minilm):
    """Neither "November batch" nor "Separator crack" is written word for word: they and their relation are linked
    to the passage nearest to them (by their vectors), and only it counts as read by the host; not to every passage,
    which left them in memory, cited by Methods and Results, once their paragraph was deleted."""
    kb = open_kb(db_path, minilm)
    [doc] = kb.add_documents([DocumentInput(id="paper", title="Garnet electrolytes", text=paper())]).documents
    section_of = {c.id: c.section for c in kb.store.get_chunks(doc.chunk_ids)}
    assert sorted(section_of.values()) == sorted(PAPER)
    kb.add_knowledge_graph(
        [NodeInput(name="November batch", type="Batch", observations=["Sintered at 1,150 °C instead of 1,230 °C"],
                   source_ids=["paper"]),
         NodeInput(name="Separator crack", type="Defect", source_ids=["paper"])],
        [EdgeInput(source="November batch", target="Separator crack", type="CAUSED", source_ids=["paper"])])
    assert {section_of[c] for c in mentioning(kb, "November batch")} == {"Discussion"}
    assert {section_of[c] for c in mentioning(kb, "Separator crack")} == {"Discussion"}
    kb.close()
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        assert [section_of[c] for (c,) in con.execute("SELECT chunk_id FROM edge_evidence").fetchall()] == [
            "Discussion"]
        assert dict(con.execute("SELECT section, extracted_by FROM chunks").fetchall()) == {
            "Methods": None, "Results": None, "Discussion": "host", "Conclusion": None}
    finally:
        con.close()

    kb = open_kb(db_path, minilm)
    gone = kb.add_documents([DocumentInput(id="paper", title="Garnet electrolytes", text=paper("Discussion"))])
    assert (gone.entities_removed, gone.relations_removed, gone.to_review) == (2, 1, [])
    assert graph(kb) == (set(), set())
    kb.close()


def test_an_entity_written_again_unchanged_is_linked_by_its_stored_vector(db_path, minilm):
    """Written again as stored (no new vector computed), citing another document that does not name it: linked to
    that document's passage nearest to it, by the vector stored for it."""
    kb = open_kb(db_path, minilm)
    kb.add_documents([DocumentInput(id="paper", title="Garnet electrolytes", text=paper())])
    batch = NodeInput(name="November batch", type="Batch", observations=["Sintered at 1,150 °C instead of 1,230 °C"],
                      source_ids=["paper"])
    kb.add_knowledge_graph([batch], [])
    [log] = kb.add_documents([DocumentInput(id="furnace-log", title="Furnace log", text=sections(
        "Calibration of the thermocouples was checked on Monday.",
        "Sintering ran at 1,150 °C for the lot shipped in November, below the 1,230 °C specified.",
        "Cleaning of the kiln shelves is due next week."))]).documents
    written = kb.add_knowledge_graph([batch.model_copy(update={"source_ids": ["furnace-log"]})], [])
    assert written.nodes_unchanged == 1
    assert mentioning(kb, "November batch") & set(log.chunk_ids) == {log.chunk_ids[1]}
    kb.close()
