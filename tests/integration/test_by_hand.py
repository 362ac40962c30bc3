"""What was written by hand stays when the documents it was also extracted from are replaced or deleted; what
only those documents supported goes with them. On real DuckDB files, with the instant hashing embedder."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb

from duckgraph.core.domain import memory_server
from duckgraph.core.domain.documents import delete_documents
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput, ObservationAddition
from duckgraph.core.files.export import export_jsonl
from duckgraph.core.files.import_ import import_lines
from duckgraph.plugins.duckdb import DuckDBStore, schema
from tests.fakes import HashingEmbedder

ZARA = NodeInput(name="Zara Quinn", type="Person")
ZENITH = NodeInput(name="Zenith Labs", type="Organization")
WORKS_AT = EdgeInput(source="Zara Quinn", target="Zenith Labs", type="WORKS_AT")


def open_kb(path: Path) -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), HashingEmbedder()).open()


def sourced(*nodes: NodeInput, edges: tuple[EdgeInput, ...] = ()) -> tuple[list[NodeInput], list[EdgeInput]]:
    """The nodes and edges again, as an extractor writes them: with the document "doc1" as their source."""
    return ([n.model_copy(update={"source_ids": ["doc1"]}) for n in nodes],
            [e.model_copy(update={"source_ids": ["doc1"]}) for e in edges])


def names(kb: KnowledgeBase) -> set[str]:
    return {n.name for n in kb.store.list_nodes("default", limit=100)}


def relations(kb: KnowledgeBase) -> set[str]:
    return {e.type for e in kb.store.list_edges("default", limit=100)}


def replace_doc1(kb: KnowledgeBase) -> tuple[int, int]:
    result = kb.add_documents([DocumentInput(id="doc1", text="Quarterly report: nothing about anyone.")])
    return result.entities_removed, result.relations_removed


def test_a_replaced_document_keeps_what_was_also_written_by_hand(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    kb.add_documents([DocumentInput(id="doc1", text="Zara Quinn works at Zenith Labs. Omar Reed visited.")])
    kb.add_knowledge_graph([ZARA, ZENITH], [WORKS_AT])  # by hand, before the document was read
    memory_server.add_observations(kb, [ObservationAddition(entityName="Zara Quinn", contents=["Prefers tea"])])
    # Then extracted from the document: the same entities and relation, now with provenance, and one more.
    kb.add_knowledge_graph(*sourced(ZARA, ZENITH, NodeInput(name="Omar Reed", type="Person"), edges=(WORKS_AT,)))

    assert replace_doc1(kb) == (1, 0)  # Omar Reed only
    assert names(kb) == {"Zara Quinn", "Zenith Labs"} and relations(kb) == {"WORKS_AT"}
    zara = kb.store.find_nodes("default", ["zara quinn"])[0]
    assert kb.store.get_observations([zara.id])[zara.id] == ["Prefers tea"]
    kb.close()


def test_an_extracted_entity_curated_by_hand_stays_and_one_only_extracted_goes(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    kb.add_documents([DocumentInput(id="doc1", text="Zara Quinn works at Zenith Labs.")])
    kb.add_knowledge_graph(*sourced(ZARA, ZENITH, edges=(WORKS_AT,)))
    kb.curation.add_observations("Zara Quinn", ["Her badge number is 4471."], "default")

    assert replace_doc1(kb) == (1, 1)  # Zenith Labs and the relation: nobody wrote them by hand
    assert names(kb) == {"Zara Quinn"} and relations(kb) == set()
    kb.close()


STUDY = ("## Methods\n\nThe batch delivered in November came from supplier Voltra.\n\n"
         "## Conclusion\n\nCoatings reduce fade.")
AUDITED = ("entity: Voltra [Company] (no passage supports it now; kept for the relation written by hand Dr. Lee "
           "audited Voltra)")


def study_with_a_relation_by_hand(path: Path) -> KnowledgeBase:
    """Voltra read from the study's Methods, and a relation to it written by hand (no source_ids)."""
    kb = open_kb(path)
    kb.add_documents([DocumentInput(id="study.md", text=STUDY)])
    kb.add_knowledge_graph([NodeInput(name="Voltra", type="Company", source_ids=["study.md"]),
                            NodeInput(name="Dr. Lee", type="Person")],
                           [EdgeInput(source="Dr. Lee", target="Voltra", type="AUDITED")])
    return kb


def test_deleting_a_document_keeps_the_end_of_a_relation_written_by_hand_and_says_why(tmp_path):
    kb = study_with_a_relation_by_hand(tmp_path / "kb.duckdb")
    deleted = delete_documents(kb, ["study.md"])
    assert (deleted.entities_removed, deleted.relations_removed, deleted.hints) == (0, 0, [AUDITED])
    assert names(kb) == {"Voltra", "Dr. Lee"} and relations(kb) == {"AUDITED"}
    kb.close()


def test_an_edit_dropping_the_passage_keeps_the_end_of_a_relation_written_by_hand_and_says_why(tmp_path):
    kb = study_with_a_relation_by_hand(tmp_path / "kb.duckdb")
    edited = kb.add_documents([DocumentInput(id="study.md", text="## Conclusion\n\nCoatings reduce fade.")])
    assert (edited.entities_removed, edited.relations_removed, edited.to_review) == (0, 0, [AUDITED])
    assert names(kb) == {"Voltra", "Dr. Lee"} and relations(kb) == {"AUDITED"}
    # A passage that still names it keeps it as any named entity, listed once, as such.
    kb.add_documents([DocumentInput(id="study.md", text=STUDY)])
    kb.add_knowledge_graph([NodeInput(name="Voltra", type="Company", source_ids=["study.md"])], [])
    renamed = kb.add_documents([DocumentInput(id="study.md", text=STUDY.replace("November", "December"))])
    assert renamed.to_review == ["entity: Voltra [Company]"]
    kb.close()


def test_a_merge_keeps_the_mark_of_what_it_folds_in(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    kb.add_documents([DocumentInput(id="doc1", text="Z. Quinn works at Zenith Labs.")])
    kb.add_knowledge_graph([NodeInput(name="Zara", type="Person")], [])  # by hand
    kb.add_knowledge_graph(*sourced(ZARA, ZENITH, edges=(WORKS_AT,)))
    kb.curation.merge_entities(["Zara"], "Zara Quinn", "default")

    replace_doc1(kb)
    assert names(kb) == {"Zara Quinn"}
    kb.close()


def test_an_export_carries_the_marks_into_another_file(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    kb.add_documents([DocumentInput(id="doc1", text="Zara Quinn works at Zenith Labs.")])
    kb.add_knowledge_graph([ZARA], [])
    kb.add_knowledge_graph(*sourced(ZARA, ZENITH, edges=(WORKS_AT,)))
    out = io.StringIO()
    export_jsonl(kb, out)
    kb.close()
    marked = {line.get("name", line.get("type")) for line in map(json.loads, out.getvalue().splitlines())
              if line.get("by_hand")}
    assert marked == {"Zara Quinn"}

    copy = open_kb(tmp_path / "copy.duckdb")
    import_lines(copy, out.getvalue().splitlines(keepends=True))
    assert replace_doc1(copy) == (1, 1)
    assert names(copy) == {"Zara Quinn"}
    copy.close()


def test_a_file_of_schema_4_is_upgraded_without_marks(tmp_path):
    path = tmp_path / "old.duckdb"
    kb = open_kb(path)
    kb.add_documents([DocumentInput(id="doc1", text="Zara Quinn works at Zenith Labs.")])
    kb.add_knowledge_graph(*sourced(ZARA, ZENITH, edges=(WORKS_AT,)))
    kb.close()
    con = duckdb.connect(str(path))  # as version 4 wrote it: no tables of marks
    con.execute("DROP TABLE nodes_by_hand")
    con.execute("DROP TABLE edges_by_hand")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()

    kb = open_kb(path)
    assert kb.store.health()["schema_version"] == schema.SCHEMA_VERSION
    kb.add_knowledge_graph([ZARA], [])  # now written by hand too
    assert replace_doc1(kb) == (1, 1)
    assert names(kb) == {"Zara Quinn"}
    kb.close()
