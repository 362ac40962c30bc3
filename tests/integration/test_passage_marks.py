"""Who read a passage for its graph (`chunks.extracted_by`), and which passages still name an entity; real DuckDB
files, FakeOllama as the extractor (tests/ollama_server.py):

- a passage counts as read only by its mark: an extractor's id, "host" (a write with `source_ids` linked the
  host LLM's facts to it), "before-marks" (it had entities linked when its file was upgraded to schema 6, or came
  from an export of before). A replaced document's new passage that got the old passage's facts because its text
  still names them (`keep_named`) was read by nobody: an extracting re-run reads it (it skipped it, so an edited
  paragraph was never read and its new facts never found);
- an export carries the marks and an import puts them back (an extracting re-run after export -> import sent the
  passages that had found nothing to the model again);
- "still names" and `source_ids` linking match whole words ("Ed" was found in "edited", the alias "AI" in "said").
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.ollama import OllamaExtractor
from tests.fakes import HashingEmbedder
from tests.integration.test_extraction_marks import as_schema_5
from tests.ollama_server import FakeOllama

MODEL = "qwen3:8b"
EXTRACTOR = f"ollama:{MODEL}"
V1 = "## Team\nBob Jones works at Initech in Porto.\n\n## Other\nThe office has a cat.\n"
V2 = "## Team\nBob Jones left Initech in Porto; he now works at Globex in Madrid.\n\n## Other\nThe office has a cat.\n"


def passage_of(body: dict[str, Any]) -> str:
    first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return first_user.split("Text:\n", 1)[1]


def scripted_model(body: dict[str, Any]) -> str:
    """Globex in a passage: Bob Jones works there; anything else: nothing."""
    if "Globex" in passage_of(body):
        return json.dumps({"nodes": [{"name": "Bob Jones", "type": "Person"}, {"name": "Globex", "type": "Company"}],
                           "edges": [{"source": "Bob Jones", "target": "Globex", "type": "WORKS_AT"}]})
    return json.dumps({"nodes": [], "edges": []})


@pytest.fixture
def ollama():
    with FakeOllama(default_chat_reply=scripted_model) as server:
        yield server


def read_by_model(server: FakeOllama) -> list[str]:
    """The passages the model was asked to read, in order."""
    return [passage_of(r["body"]) for r in server.requests_to("/api/chat")]


def knowledge_base(path: Path, server: FakeOllama) -> KnowledgeBase:
    extractor = OllamaExtractor(MODEL, base_url=server.base_url, max_attempts=1)
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder(), extractor=extractor)


def marks(path: Path) -> dict[str, str | None]:
    """Passage text -> its mark, read from the closed file."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        return dict(con.execute("SELECT text, extracted_by FROM chunks ORDER BY id").fetchall())
    finally:
        con.close()


def host_graph(kb: KnowledgeBase, source: str) -> None:
    """What the host LLM extracted from the note V1, cited to it."""
    kb.add_knowledge_graph(
        [NodeInput(name="Bob Jones", type="Person", source_ids=[source]),
         NodeInput(name="Initech", type="Company", source_ids=[source])],
        [EdgeInput(source="Bob Jones", target="Initech", type="WORKS_AT", source_ids=[source])])


# -- a passage counts as read by its mark only ------------------------------------------------------------------


def test_a_paragraph_edited_without_extraction_is_read_by_the_next_extracting_run(ollama, db_path):
    with knowledge_base(db_path, ollama) as kb:
        kb.add_documents([DocumentInput(id="team.md", text=V1)])
        host_graph(kb, "team.md")
        edited = kb.add_documents([DocumentInput(id="team.md", text=V2)])
        assert (edited.chunks_written, edited.chunks_kept, edited.entities_kept, edited.relations_kept) == (1, 1, 2, 1)

        run = kb.add_documents([DocumentInput(id="team.md", text=V2)], extract=True)
        # The edited passage holds the host's facts its text still names, but nobody read it: the model does now.
        assert [(e.skipped, e.nodes, e.edges, e.error) for e in run.extractions] == [
            (False, 2, 1, None), (False, 0, 0, None)]
        assert [p.split("\n")[0] for p in read_by_model(ollama)] == ["Team", "Other"]
        assert "Globex" in {n.name for n in kb.store.list_nodes("default")}

        # Both read now: a re-run sends the model nothing.
        again = kb.add_documents([DocumentInput(id="team.md", text=V2)], extract=True)
        assert [e.skipped for e in again.extractions] == [True, True] and len(read_by_model(ollama)) == 2
    assert set(marks(db_path).values()) == {EXTRACTOR}


def test_a_host_write_with_source_ids_marks_the_passages_it_links_as_read_by_the_host(ollama, db_path):
    with knowledge_base(db_path, ollama) as kb:
        kb.add_documents([DocumentInput(id="team.md", text=V1)])
        host_graph(kb, "team.md")
    # Only the passage the facts were linked to (it names them); the other one nobody read yet.
    assert marks(db_path) == {"Bob Jones works at Initech in Porto.": "host", "The office has a cat.": None}

    with knowledge_base(db_path, ollama) as kb:
        run = kb.add_documents([DocumentInput(id="team.md", text=V1)], extract=True)
        assert [e.skipped for e in run.extractions] == [True, False]
        assert [p.split("\n")[0] for p in read_by_model(ollama)] == ["Other"]
        # A host write over passages an extractor read keeps the extractor's mark; an extraction write (its
        # provenance names the passage: source_chunk_ids) marks with the extractor's id, never "host".
        host_graph(kb, "team.md")
        kb.add_knowledge_graph([NodeInput(name="Office cat", type="Animal", source_ids=["team.md"])], [])
    assert marks(db_path) == {"Bob Jones works at Initech in Porto.": "host", "The office has a cat.": EXTRACTOR}


def test_a_file_of_schema_5_keeps_its_passages_with_entities_skipped_by_a_mark(ollama, db_path):
    with knowledge_base(db_path, ollama) as kb:
        kb.add_documents([DocumentInput(id="team.md", text=V1)])
        host_graph(kb, "team.md")
    as_schema_5(db_path)

    with knowledge_base(db_path, ollama) as kb:
        kb.open()
    assert marks(db_path) == {"Bob Jones works at Initech in Porto.": "before-marks", "The office has a cat.": None}
    with knowledge_base(db_path, ollama) as kb:
        assert [e.skipped for e in kb.add_documents([DocumentInput(id="team.md", text=V1)],
                                                    extract=True).extractions] == [True, False]


# -- export and import carry the marks ---------------------------------------------------------------------------


def exported(kb: KnowledgeBase) -> list[str]:
    out = io.StringIO()
    export_jsonl(kb, out)
    return out.getvalue().splitlines()


def test_an_export_carries_the_marks_and_an_import_puts_them_back(ollama, tmp_path):
    docs = [DocumentInput(id=f"d{i}.md", text=f"## S\nNothing to extract here, paragraph {i}.") for i in range(3)]
    docs.append(DocumentInput(id="team.md", text=V1))
    first, second = tmp_path / "first.duckdb", tmp_path / "second.duckdb"
    with knowledge_base(first, ollama) as kb:
        kb.add_documents(docs[:3], extract=True)
        kb.add_documents(docs[3:])
        host_graph(kb, "team.md")
        lines = exported(kb)
    chunks = [json.loads(line) for line in lines if '"kind":"chunk"' in line]
    assert [c.get("extracted_by") for c in chunks] == [EXTRACTOR] * 3 + ["host", None]
    asked = len(read_by_model(ollama))

    with knowledge_base(second, ollama) as kb:
        import_lines(kb, lines)
        assert exported(kb) == lines
    assert marks(second) == marks(first)
    with knowledge_base(second, ollama) as kb:
        run = kb.add_documents(docs, extract=True)
        # Only the passage nobody read goes to the model.
        assert [e.skipped for e in run.extractions] == [True, True, True, True, False]
        assert len(read_by_model(ollama)) == asked + 1


def test_an_export_from_before_marks_imports_its_passages_with_entities_as_read(ollama, tmp_path):
    first, second = tmp_path / "first.duckdb", tmp_path / "second.duckdb"
    with knowledge_base(first, ollama) as kb:
        kb.add_documents([DocumentInput(id="team.md", text=V1)])
        host_graph(kb, "team.md")
        lines = exported(kb)
    # As schema 5 exported it: no marks.
    old = [json.dumps({**json.loads(line), "schema_version": 5}) if '"kind":"meta"' in line else line
           for line in lines]
    old = [line.replace(',"extracted_by":"host"', "") for line in old]
    assert "extracted_by" not in "".join(old)

    with knowledge_base(second, ollama) as kb:
        import_lines(kb, old)
    assert marks(second) == {"Bob Jones works at Initech in Porto.": "before-marks", "The office has a cat.": None}


# -- a name is found as a whole word -------------------------------------------------------------------------------


def names_and_relations(kb: KnowledgeBase) -> tuple[set[str], set[tuple[str, str, str]]]:
    nodes = {n.id: n.name for n in kb.store.list_nodes("default", limit=100)}
    return set(nodes.values()), {(nodes[e.source_id], e.type, nodes[e.target_id])
                                 for e in kb.store.list_edges("default", limit=100)}


def test_a_new_passage_keeps_only_what_it_names_as_a_whole_word(ollama, db_path):
    before = ("## Team\nEd works at Acme on the OpenAI integration. The orders-db service is written in C++ by "
              "Zoë; Chloé works on it too.\n")
    after = ("## Team\nAcme edited the plan; the CEO said the integration is cancelled. The orders-db service, "
             "rewritten in C++, is in review by Zoëlla and Chloe\u0301.\n")  # decomposed: the name is not
    with knowledge_base(db_path, ollama) as kb:
        kb.add_documents([DocumentInput(id="t.md", text=before)])
        kb.add_knowledge_graph(
            [NodeInput(name=name, type=kind, aliases=aliases, source_ids=["t.md"]) for name, kind, aliases in (
                ("Ed", "Person", []), ("Acme", "Company", []), ("OpenAI integration", "Project", ["AI"]),
                ("orders-db", "Service", []), ("C++", "Language", []), ("Zoë", "Person", []),
                ("Chloé", "Person", []))],
            [EdgeInput(source="Ed", target="Acme", type="WORKS_AT", source_ids=["t.md"]),
             EdgeInput(source="Ed", target="OpenAI integration", type="WORKS_ON", source_ids=["t.md"]),
             EdgeInput(source="orders-db", target="C++", type="WRITTEN_IN", source_ids=["t.md"])])

        edited = kb.add_documents([DocumentInput(id="t.md", text=after)])

        # "Ed" is not in "edited", the alias "AI" not in "said", "Zoë" not in "Zoëlla"; names with punctuation
        # are found as written, and a name in another Unicode form than the text's too.
        assert names_and_relations(kb) == ({"Acme", "orders-db", "C++", "Chloé"},
                                           {("orders-db", "WRITTEN_IN", "C++")})
        assert (edited.entities_kept, edited.relations_kept, edited.entities_removed, edited.relations_removed) == (
            4, 1, 3, 2)


def test_source_ids_link_a_fact_to_the_passages_that_name_it_as_a_whole_word(ollama, db_path):
    text = "## Plan\nAcme edited the plan.\n\n## People\nEd joined Acme in May.\n\n## 中文\nEd在北京工作。\n"
    with knowledge_base(db_path, ollama) as kb:
        [doc] = kb.add_documents([DocumentInput(id="p.md", text=text)]).documents
        kb.add_knowledge_graph([NodeInput(name="Ed", type="Person", source_ids=["p.md"]),
                                NodeInput(name="北京", type="City", source_ids=["p.md"])], [])
        passages = {c.id: c.text for c in kb.store.get_chunks(doc.chunk_ids)}
        linked = {name: {passages[c] for c, _ in kb.store.chunks_mentioning([node.id])}
                  for name in ("Ed", "北京") for node in kb.store.find_nodes("default", [name.casefold()])}
    # Not the passage where "ed" is only inside "edited"; in Chinese, written without spaces, a name is found
    # beside other letters.
    assert linked == {"Ed": {"Ed joined Acme in May.", "Ed在北京工作。"}, "北京": {"Ed在北京工作。"}}
    assert marks(db_path) == {"Acme edited the plan.": None, "Ed joined Acme in May.": "host",
                              "Ed在北京工作。": "host"}
