"""Export and import on real DuckDB files, with the instant hashing embedder: the round trip (with and
without vectors), the reference memory server's memory.jsonl, re-running and interrupted imports, and the CLI.
"""

from __future__ import annotations

import io
import json
import os
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core import bootstrap as bootstrap_module
from duckgraph.core.domain import memory_server as memory_compat
from duckgraph.core.cli import main
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.plugin_manager import build_plugin_manager
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.core.domain.texts import edge_text
from duckgraph.core.files.export import export_jsonl
from duckgraph.plugins.duckdb.schema import SCHEMA_VERSION
from duckgraph.core.files import import_ as import_module
from duckgraph.core.files.import_ import import_file, import_lines
import duckgraph.plugins.duckdb.restore as snapshot_restore
from duckgraph.plugins.duckdb.mirror.matrix import to_bfloat16
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import EdgeWrite, EmbedderMismatchError, InvalidInputError, NodeRecord, Snapshot
from tests.e2e.scenario import DOCUMENTS, EDGES, NODES
from tests.fakes import FakeEmbedderPlugin, HashingEmbedder

MEMORY_LINES = [
    {"type": "entity", "name": "John_Smith", "entityType": "person",
     "observations": ["Speaks fluent Spanish", "Graduated in 2019"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": ["Makes Claude"]},
    {"type": "entity", "name": "Jane Doe", "entityType": "person", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "relation", "from": "Jane Doe", "to": "John_Smith", "relationType": "mentors"},
    {"type": "relation", "from": "Jane Doe", "to": "Anthropic", "relationType": "works_at"},
]


def open_kb(path: Path, embedder=None, namespace: str = "default") -> KnowledgeBase:
    return KnowledgeBase(DuckDBStore(path), embedder or HashingEmbedder(), namespace=namespace).open()


def export(kb: KnowledgeBase, embeddings: bool = False) -> str:
    out = io.StringIO()
    export_jsonl(kb, out, embeddings=embeddings)
    return out.getvalue()


def write_lines(path: Path, objects: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


@pytest.fixture
def source(tmp_path: Path) -> KnowledgeBase:
    """A knowledge base with documents, a graph with provenance, observations, aliases, properties, a relation
    that no longer holds, and a second namespace."""
    kb = open_kb(tmp_path / "source.duckdb")
    kb.add_documents([DocumentInput(**d) for d in DOCUMENTS])
    # The collaboration that holds starts when the earlier one below ends: one relation's periods never overlap,
    # and an import refuses a file whose periods do.
    kb.add_knowledge_graph([NodeInput(**n) for n in NODES],
                           [EdgeInput(**e, **({"valid_from": datetime(1965, 6, 30)}
                                              if e["type"] == "COLLABORATED_WITH" else {})) for e in EDGES])
    kb.curation.add_observations("Vera Rubin", ["Born in 1928.", "Died in 2016."], "default")
    kb.curation.update_entity("Kent Ford", "default", properties={"born": 1944, "field": ["optics", "astronomy"]})
    kb.add_documents([DocumentInput(id="note", title="Note", text="Ada Lovelace worked with Charles Babbage.")],
                     namespace="work")
    kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person", source_ids=["note"]),
         NodeInput(name="Charles Babbage", type="Person", source_ids=["note"])],
        [EdgeInput(source="Ada Lovelace", target="Charles Babbage", type="WORKED_WITH", weight=2.5,
                   source_ids=["note"])],
        namespace="work",
    )
    # An edge that no longer holds, next to the one that does (the store's restore writes validity as given).
    expired = EdgeWrite(namespace="default", source_key="vera rubin", target_key="kent ford",
                        type="COLLABORATED_WITH", description="An earlier collaboration.",
                        valid_from=datetime(1960, 1, 1), valid_until=datetime(1965, 6, 30),
                        created_at=datetime(2020, 1, 1), updated_at=datetime(2020, 1, 2))
    expired.embedding = kb.embedder.embed_query(edge_text(expired, {"vera rubin": "Vera Rubin",
                                                                    "kent ford": "Kent Ford"}))
    kb.store.restore(Snapshot(edges=[expired]))
    yield kb
    kb.close()


def answer(result) -> tuple:
    """A search result without database ids (they differ between files)."""
    return (
        [(a.name, a.score) for a in result.anchors],
        sorted((n.name, n.score, n.hop) for n in result.nodes),
        sorted((e.source, e.type, e.target, e.weight) for e in result.edges),
        sorted((p.document_id, p.text, p.score) for p in result.passages),
        result.text.count("\n"),
    )


def kinds(text: str) -> list[str]:
    return [json.loads(line)["kind"] for line in text.splitlines()]


# -- the format ------------------------------------------------------------------------------------------


def test_the_export_holds_every_kind_in_a_fixed_order(source):
    text = export(source)
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0] == {"kind": "meta", "format": "duckgraph", "version": 2, "schema_version": SCHEMA_VERSION,
                        "embedder": {"id": "test:fake-hashing", "dimensions": 64}, "embeddings": False}
    order = ["meta", "document", "chunk", "node", "edge", "mention", "edge_evidence", "end"]
    seen = [k for k in dict.fromkeys(kinds(text))]
    assert seen == ["meta", "document", "chunk", "node", "edge", "mention", "edge_evidence", "end"]
    # The last line counts the lines of each kind: a file without it, or with fewer lines, was cut short.
    assert lines[-1] == {"kind": "end", "lines": {kind: kinds(text).count(kind) for kind in (
        "document", "chunk", "node", "edge", "mention", "edge_evidence", "community_report")}}
    assert kinds(text) == sorted(kinds(text), key=lambda k: order.index(k) if k not in ("document", "chunk") else 1)
    assert not any("embedding" in line for line in lines)

    documents = [line for line in lines if line["kind"] == "document"]
    def stored_order(document: dict) -> tuple:  # namespaces by name, then the order the documents were stored in
        chunks = source.store.document_chunks(document["namespace"], [document["id"]])
        return document["namespace"], min(c.id for c in chunks)

    assert [(d["namespace"], d["id"]) for d in documents] == [
        (d["namespace"], d["id"]) for d in sorted(documents, key=stored_order)]
    assert [d["id"] for d in documents] != sorted(d["id"] for d in documents)  # not the ids' order
    assert {d["id"] for d in documents} == {"doc-rubin", "doc-payne", "doc-bell", "note"}
    assert next(d for d in documents if d["id"] == "doc-rubin")["metadata"] == {"topic": "astronomy"}

    nodes = {n["name"]: n for n in lines if n["kind"] == "node"}
    assert len(nodes) == len(NODES) + 2
    assert nodes["Vera Rubin"]["observations"] == ["Born in 1928.", "Died in 2016."]
    assert nodes["Carnegie Institution for Science"]["aliases"] == ["Carnegie Institution"]
    assert nodes["Kent Ford"]["properties"] == {"born": 1944, "field": ["optics", "astronomy"]}
    assert nodes["Ada Lovelace"]["namespace"] == "work"
    assert [n["id"] for n in lines if n["kind"] == "node"] == list(range(1, len(nodes) + 1))

    edges = [e for e in lines if e["kind"] == "edge"]
    node_names = {n["id"]: n["name"] for n in nodes.values()}
    for edge in edges:
        assert node_names[edge["source_id"]] == edge["source"] and node_names[edge["target_id"]] == edge["target"]
        assert edge["created_at"] is not None and "valid_from" in edge  # null: no start was given
    worked = [e for e in edges if e["source"] == "Vera Rubin" and e["type"] == "COLLABORATED_WITH"]
    assert len(worked) == 2
    assert {e["valid_until"] for e in worked} == {None, "1965-06-30T00:00:00.000000Z"}  # UTC, said so
    assert next(e for e in edges if e["namespace"] == "work")["weight"] == 2.5

    chunk_ids = {c["id"] for c in lines if c["kind"] == "chunk"}
    edge_ids = {e["id"] for e in edges}
    mentions = [(m["node_id"], m["chunk_id"]) for m in lines if m["kind"] == "mention"]
    evidence = [(m["edge_id"], m["chunk_id"]) for m in lines if m["kind"] == "edge_evidence"]
    assert mentions and evidence
    assert mentions == sorted(mentions) and evidence == sorted(evidence)
    assert all(n in node_names and c in chunk_ids for n, c in mentions)
    assert all(e in edge_ids and c in chunk_ids for e, c in evidence)

    assert export(source) == text  # the same knowledge base, the same lines


def test_embeddings_only_on_request(source):
    lines = [json.loads(line) for line in export(source, embeddings=True).splitlines()]
    assert lines[0]["embeddings"] is True
    for line in lines:
        if line["kind"] in ("chunk", "node", "edge"):
            assert len(line["embedding"]) == 64, line
        else:
            assert "embedding" not in line


# -- round trips -----------------------------------------------------------------------------------------


def test_round_trip_without_embeddings_re_embeds(source, tmp_path):
    text = export(source)
    embedder = HashingEmbedder()
    target = open_kb(tmp_path / "copy.duckdb", embedder)
    summary = import_lines(target, text.splitlines(keepends=True))
    assert summary.format == "duckgraph"
    assert summary.documents_written == 4 and summary.nodes_created == len(NODES) + 2
    assert summary.edges_created == len(EDGES) + 2
    assert summary.texts_embedded > 0 and embedder.calls

    assert export(target) == text
    # The vectors were computed again with the same embedder: the copy searches like the original.
    assert export(target, embeddings=True) == export(source, embeddings=True)
    question = "Where did Vera Rubin work?"
    assert answer(target.search(question)) == answer(source.search(question))
    assert target.stats() == source.stats()
    target.close()


def test_a_round_trip_keeps_a_conversations_turns_in_reading_order(tmp_path):
    """Turns kept one document each under one title read on from one to the next (a search lifts the reply to a
    matching turn); the export lists them in the order they were stored, not by id ("turn-10" < "turn-9"), so the
    copy reads them in the same order."""
    ids = [f"turn-{i}" for i in (8, 9, 10, 11)]

    def reading_order(kb: KnowledgeBase) -> dict[str, str | None]:
        document_of = {c.id: c.document_id for c in kb.store.document_chunks("default", ids)}
        return {document_of[chunk_id]: document_of.get(after)
                for chunk_id, (_, after) in kb.store.adjacent_chunks(list(document_of), "default").items()}

    source = open_kb(tmp_path / "turns.duckdb")
    source.add_documents([DocumentInput(id=i, title="Chat, 1 May", text=f"Turn {i}.") for i in ids])
    expected = {"turn-8": "turn-9", "turn-9": "turn-10", "turn-10": "turn-11", "turn-11": None}
    assert reading_order(source) == expected
    target = open_kb(tmp_path / "copy.duckdb")
    import_lines(target, export(source).splitlines(keepends=True))
    assert reading_order(target) == expected
    source.close()
    target.close()


def test_round_trip_with_embeddings_embeds_nothing(source, tmp_path):
    text = export(source, embeddings=True)
    embedder = HashingEmbedder()
    target = open_kb(tmp_path / "copy.duckdb", embedder)
    summary = import_lines(target, text.splitlines(keepends=True))
    assert summary.texts_embedded == 0 and embedder.calls == []
    assert export(target, embeddings=True) == text
    assert export(target) == export(source)
    target.close()

    # And after closing and opening again (the vectors come back from the file).
    reopened = open_kb(tmp_path / "copy.duckdb")
    assert export(reopened, embeddings=True) == text
    assert reopened.search("Vera Rubin").anchors[0].name == "Vera Rubin"
    reopened.close()


def test_an_older_file_s_float32_relation_vectors_go_into_a_new_file_as_bfloat16(tmp_path):
    """What doctor advises for a file written before the relations' vectors were stored in bfloat16."""
    older = DuckDBStore(tmp_path / "older.duckdb")
    older.open()
    older._con.execute("CREATE TABLE edge_vectors (edge_id BIGINT NOT NULL, embedding FLOAT[64] NOT NULL)")
    older.close()
    kb = open_kb(tmp_path / "older.duckdb")
    kb.add_documents([DocumentInput(**d) for d in DOCUMENTS])
    kb.add_knowledge_graph([NodeInput(**n) for n in NODES], [EdgeInput(**e) for e in EDGES])
    assert "edge float32; written before" in kb.store.health()["vectors_in_file"]
    text = export(kb, embeddings=True)
    kb.close()
    exported = [np.asarray(json.loads(line)["embedding"], dtype=np.float32) for line in text.splitlines()
                if json.loads(line)["kind"] == "edge"]
    assert exported and not all(np.array_equal(v, widened(to_bfloat16(v))) for v in exported)  # the file's floats

    target = open_kb(tmp_path / "new.duckdb")
    import_lines(target, text.splitlines(keepends=True))
    assert target.store.health()["vectors_in_file"] == "node float32, chunk float32, edge bfloat16"
    imported = [np.asarray(json.loads(line)["embedding"], dtype=np.float32)
                for line in export(target, embeddings=True).splitlines() if json.loads(line)["kind"] == "edge"]
    target.close()
    assert len(imported) == len(exported)
    assert all(np.array_equal(new, widened(to_bfloat16(old))) for new, old in zip(imported, exported))


def widened(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_embeddings_from_another_embedder_are_refused(source, tmp_path):
    text = export(source, embeddings=True).splitlines(keepends=True)
    for embedder in (HashingEmbedder(name="other"), HashingEmbedder(dimensions=32)):
        target = open_kb(tmp_path / f"{embedder.id}-{embedder.dimensions}.duckdb", embedder)
        with pytest.raises(EmbedderMismatchError, match="test:fake-hashing"):
            import_lines(target, text)
        assert target.stats()["nodes"] == 0
        # --re-embed: the file's vectors are dropped and computed with the configured embedder.
        summary = import_lines(target, text, reembed=True)
        assert summary.nodes_created == len(NODES) + 2 and summary.texts_embedded > 0
        assert export(target) == export(source).replace(
            '"embedder":{"id":"test:fake-hashing","dimensions":64}',
            f'"embedder":{{"id":"{embedder.id}","dimensions":{embedder.dimensions}}}',
        )
        target.close()


def test_a_target_file_built_with_another_embedder_is_refused(source, tmp_path):
    path = tmp_path / "other.duckdb"
    other = open_kb(path, HashingEmbedder(name="other"))
    other.add_knowledge_graph([NodeInput(name="Someone", type="Person")], [])
    other.close()
    for embeddings in (True, False):
        target = open_kb(path)  # configured: test:fake-hashing, the file: test:other
        with pytest.raises(EmbedderMismatchError, match="test:other"):
            import_lines(target, export(source, embeddings=embeddings).splitlines(keepends=True))
        target.close()
    assert DuckDBStore(path).path.exists()


# -- re-running, interruptions, existing files ------------------------------------------------------------


def test_importing_twice_changes_nothing(source, tmp_path):
    text = export(source, embeddings=True).splitlines(keepends=True)
    target = open_kb(tmp_path / "copy.duckdb")
    import_lines(target, text)
    before = export(target, embeddings=True)
    again = import_lines(target, text)
    assert (again.documents_written, again.chunks_written, again.nodes_created, again.nodes_updated,
            again.edges_created, again.edges_updated, again.mentions_added, again.evidence_added) == (0,) * 8
    assert again.documents_unchanged == 4
    assert again.nodes_unchanged == len(NODES) + 2 and again.edges_unchanged == len(EDGES) + 2
    assert export(target, embeddings=True) == before
    target.close()


def test_importing_a_file_into_its_own_source_changes_nothing(source):
    text = export(source, embeddings=True)
    summary = import_lines(source, text.splitlines(keepends=True))
    assert summary.nodes_created == summary.nodes_updated == summary.edges_created == summary.edges_updated == 0
    assert export(source, embeddings=True) == text


def test_an_interrupted_import_leaves_nothing_and_can_be_run_again(source, tmp_path, monkeypatch):
    text = export(source).splitlines(keepends=True)
    target = open_kb(tmp_path / "copy.duckdb")
    calls = {"n": 0}
    original = snapshot_restore._restore_provenance

    def crash(con, snapshot):
        calls["n"] += 1
        raise RuntimeError("power cut")

    monkeypatch.setattr(snapshot_restore, "_restore_provenance", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        import_lines(target, text)
    assert calls["n"] == 1
    stats = target.stats()
    assert (stats["nodes"], stats["edges"], stats["documents"], stats["chunks"]) == (0, 0, 0, 0)

    monkeypatch.setattr(snapshot_restore, "_restore_provenance", original)
    import_lines(target, text)
    assert export(target) == export(source)
    target.close()


@pytest.mark.parametrize("embeddings", [True, False])
def test_an_import_in_many_batches_is_the_same_import(source, tmp_path, monkeypatch, embeddings):
    monkeypatch.setattr(import_module, "BATCH_LINES", 3)  # later batches name the nodes and chunks of earlier ones
    text = export(source, embeddings=embeddings).splitlines(keepends=True)
    target = open_kb(tmp_path / "copy.duckdb")
    calls = {"n": 0}
    original = snapshot_restore.restore_snapshot

    def counted(*args):
        calls["n"] += 1
        return original(*args)

    monkeypatch.setattr(snapshot_restore, "restore_snapshot", counted)
    monkeypatch.setattr("duckgraph.plugins.duckdb.store.restore_snapshot", counted)
    summary = import_lines(target, text)
    assert calls["n"] >= len(text) // 3 - 1
    assert export(target, embeddings=embeddings) == export(source, embeddings=embeddings)
    assert summary.nodes_created == len(NODES) + 2 and summary.edges_created == len(EDGES) + 2
    again = import_lines(target, text)
    assert (again.nodes_created, again.nodes_updated, again.edges_created, again.edges_updated) == (0, 0, 0, 0)
    target.close()


def test_an_import_that_fails_in_a_later_batch_leaves_nothing(source, tmp_path, monkeypatch):
    monkeypatch.setattr(import_module, "BATCH_LINES", 3)
    lines = export(source).splitlines(keepends=True)
    target = open_kb(tmp_path / "copy.duckdb")
    with pytest.raises(InvalidInputError, match=f"{len(lines) + 1}: unknown kind 'planet'"):
        import_lines(target, [*lines, json.dumps({"kind": "planet"}) + "\n"])
    stats = target.stats()
    assert (stats["nodes"], stats["edges"], stats["documents"], stats["chunks"]) == (0, 0, 0, 0)
    assert target.search("Vera Rubin").anchors == []  # the mirror holds nothing either
    target.close()


def test_a_line_may_name_only_lines_before_it(tmp_path):
    path = write_lines(tmp_path / "late.jsonl", [
        {"kind": "edge", "source_id": 1, "target_id": 2, "type": "KNOWS"},
        {"kind": "node", "id": 1, "name": "A", "type": "T"}, {"kind": "node", "id": 2, "name": "B", "type": "T"}])
    target = open_kb(tmp_path / "kb.duckdb")
    with pytest.raises(InvalidInputError, match="1: source_id 1 is not the id of a node line before it"):
        import_file(target, path)
    target.close()


def test_importing_into_a_file_with_other_knowledge_merges_by_name(source, tmp_path):
    target = open_kb(tmp_path / "target.duckdb")
    target.add_knowledge_graph(
        [NodeInput(name="vera rubin", type="Scientist", description="Studied galaxies."),
         NodeInput(name="Georgetown University", type="University")],
        [EdgeInput(source="vera rubin", target="Georgetown University", type="STUDIED_AT")],
    )
    target.curation.add_observations("vera rubin", ["Known for dark matter."], "default")
    summary = import_lines(target, export(source).splitlines(keepends=True))
    assert summary.nodes_updated == 1 and summary.nodes_created == len(NODES) + 1
    [rubin], _ = target.curation.get_entities(["Vera Rubin"], "default")
    assert rubin.name == "Vera Rubin" and rubin.type == "Person"  # the file's fields win
    assert rubin.observations == ["Known for dark matter.", "Born in 1928.", "Died in 2016."]  # kept, then added
    assert {r.type for r in rubin.relations} >= {"STUDIED_AT", "EMPLOYED_BY"}
    assert target.stats()["nodes"] == len(NODES) + 2 + 1
    target.close()


# -- bad files -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lines", "message"), [
    (["not json"], "1: not JSON"),
    ([{"kind": "meta", "format": "duckgraph", "version": 1}, {"kind": "planet"}], "2: unknown kind 'planet'"),
    ([{"kind": "node", "name": "A", "type": "T"}, {"kind": "meta", "format": "duckgraph", "version": 1}],
     "2: the meta line must be the first line"),
    ([{"kind": "meta", "format": "duckgraph", "version": 9}], "version 9"),
    ([{"kind": "node", "name": "A"}], "1: invalid node line: type"),
    ([{"kind": "node", "id": 1, "name": "A", "type": "T"},
      {"kind": "edge", "source_id": 1, "target_id": 7, "type": "KNOWS"}], "2: target_id 7"),
    ([{"kind": "node", "name": "A", "type": "T"}, {"kind": "node", "name": " a ", "type": "T"}], "appears twice"),
    ([{"kind": "node", "id": 1, "name": "A", "type": "T", "embedding": [0.1, 0.2]}], "embeddings but no meta"),
    ([{"name": "A"}], "neither a duckgraph export"),
])
def test_a_bad_file_is_refused_with_its_line_and_nothing_is_written(tmp_path, lines, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    target = open_kb(tmp_path / "kb.duckdb")
    with pytest.raises(InvalidInputError, match=message):
        import_file(target, path)
    assert target.stats()["nodes"] == 0
    target.close()


# -- the reference memory server's memory.jsonl ---------------------------------------------------------


def test_a_memory_server_file_is_imported_whole(tmp_path):
    path = write_lines(tmp_path / "memory.jsonl", MEMORY_LINES)
    kb = open_kb(tmp_path / "kb.duckdb")
    summary = import_file(kb, path)
    assert summary.format == "memory"
    assert (summary.nodes_created, summary.edges_created, summary.skipped) == (3, 3, [])

    graph = memory_compat.read_graph(kb)
    entities = {e.name: e for e in graph.entities}
    assert set(entities) == {"John_Smith", "Anthropic", "Jane Doe"}
    assert entities["John_Smith"].entityType == "person"
    assert entities["John_Smith"].observations == ["Speaks fluent Spanish", "Graduated in 2019"]
    assert entities["Anthropic"].observations == ["Makes Claude"]
    relations = {(r.from_, r.relationType, r.to) for r in graph.relations}
    assert relations == {("John_Smith", "works_at", "Anthropic"), ("Jane Doe", "mentors", "John_Smith"),
                         ("Jane Doe", "works_at", "Anthropic")}  # spelt as in the file
    [john], _ = kb.curation.get_entities(["John_Smith"], "default")
    assert {(r.type, r.target) for r in john.relations} >= {("WORKS_AT", "Anthropic")}
    # The entities are searchable: their vectors were computed.
    assert kb.search("Speaks fluent Spanish").anchors[0].name == "John_Smith"

    # Re-running changes nothing.
    before = export(kb, embeddings=True)
    again = import_file(kb, path)
    assert (again.nodes_created, again.nodes_updated, again.edges_created) == (0, 0, 0)
    assert (again.nodes_unchanged, again.edges_unchanged) == (3, 3)
    assert export(kb, embeddings=True) == before
    kb.close()


def test_a_file_saved_with_a_byte_order_mark_is_imported(tmp_path, source):
    """Notepad and some editors start UTF-8 with a byte order mark: it is no JSON, and ignored (probe bug 7)."""
    memory = tmp_path / "memory.jsonl"
    memory.write_bytes(b"\xef\xbb\xbf" + write_lines(tmp_path / "plain.jsonl", MEMORY_LINES).read_bytes())
    kb = open_kb(tmp_path / "kb.duckdb")
    assert (import_file(kb, memory).format, kb.stats()["nodes"]) == ("memory", 3)
    kb.close()
    lines = "\ufeff" + export(source)  # a duckgraph export, read as lines (standard input)
    kb = open_kb(tmp_path / "kb2.duckdb")
    assert import_lines(kb, io.StringIO(lines)).format == "duckgraph"
    assert export(kb) == export(source)
    kb.close()


def test_a_memory_file_adds_observations_to_stored_entities_and_reports_what_it_skips(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    kb.add_knowledge_graph([NodeInput(name="john_smith", type="Engineer", description="Works on compilers.")], [])
    kb.curation.add_observations("john_smith", ["Graduated in 2019"], "default")
    objects = [*MEMORY_LINES,
               {"type": "relation", "from": "John_Smith", "to": "Nobody", "relationType": "knows"},
               {"type": "relation", "from": "Anthropic", "to": "anthropic", "relationType": "is"},
               {"type": "entity", "name": "Broken", "observations": []},
               {"type": "something-else"}]
    path = write_lines(tmp_path / "memory.jsonl", objects)
    summary = import_file(kb, path)
    # 'Nobody' is no entity: created with type 'unknown' to keep the relation, as create_relations does.
    # 'Broken' has no type: it is kept with type 'unknown' and reported (docs/export-import.md).
    assert summary.nodes_created == 4 and summary.nodes_updated == 1 and summary.placeholders == ["Nobody"]
    assert [reason.split(":")[0] for reason in summary.skipped] == ["line 8", "line 10"]
    assert "itself" in summary.skipped[0]
    assert summary.partly_imported == ["line 9: entity 'Broken': entityType: is required; imported with entityType "
                                       "'unknown'"]
    [nobody], _ = kb.curation.get_entities(["Nobody"], "default")
    assert nobody.type == "unknown" and {(r.type, r.source) for r in nobody.relations} == {("KNOWS", "john_smith")}
    again = import_file(kb, path)
    assert (again.nodes_created, again.edges_created, again.placeholders) == (0, 0, [])

    [john], _ = kb.curation.get_entities(["John_Smith"], "default")
    assert john.name == "john_smith" and john.type == "Engineer" and john.description == "Works on compilers."
    assert john.observations == ["Graduated in 2019", "Speaks fluent Spanish"]
    assert kb.stats()["edges"] == 4
    kb.close()


# -- the command line ------------------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch, tmp_path: Path):
    """No user config, no DUCKGRAPH_* variables, and the hashing embedder registered as 'fake' and chosen."""
    config = tmp_path / "empty-config.toml"
    config.write_text("")
    for name in ("DB", "NAMESPACE", "LOG_LEVEL", "WARM_UP", "STORE", "STORE_OPTIONS", "EMBEDDER_OPTIONS",
                 "EXTRACTOR", "EXTRACTOR_OPTIONS", "TOOLS", "HTTP_TOKEN"):
        monkeypatch.delenv(f"DUCKGRAPH_{name}", raising=False)
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))
    monkeypatch.setenv("DUCKGRAPH_EMBEDDER", "fake")

    def plugin_manager():
        pm = build_plugin_manager(load_entry_points=False)
        pm.register(FakeEmbedderPlugin(), name="fake-embedder")
        return pm

    monkeypatch.setattr(bootstrap_module, "build_plugin_manager", plugin_manager)


def test_cli_export_and_import(cli_env, source, tmp_path, capsys):
    source.close()
    exported = tmp_path / "kb.jsonl"
    assert main(["export", "--db", str(tmp_path / "source.duckdb"), "-o", str(exported), "--embeddings"]) == 0
    assert "with embeddings" in capsys.readouterr().err
    assert not (tmp_path / "kb.jsonl.partial").exists()

    copy = tmp_path / "copy.duckdb"
    assert main(["import", str(exported), "--db", str(copy), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["nodes_created"] == len(NODES) + 2 and summary["texts_embedded"] == 0

    assert main(["export", "--db", str(copy)]) == 0  # to standard output
    without = capsys.readouterr().out
    assert main(["export", "--db", str(copy), "--embeddings"]) == 0
    assert capsys.readouterr().out == exported.read_text(encoding="utf-8")
    assert json.loads(without.splitlines()[0])["embeddings"] is False

    memory = write_lines(tmp_path / "memory.jsonl", MEMORY_LINES)
    assert main(["import", str(memory), "--db", str(copy)]) == 0
    assert "memory file imported: 0 documents written (0 unchanged), 3 entities created" in capsys.readouterr().out

    assert main(["import", str(tmp_path / "missing.jsonl"), "--db", str(copy)]) == 1
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("what", ["missing", "folder", "unreadable"])
def test_an_import_of_a_file_it_cannot_read_creates_no_database(cli_env, tmp_path, capsys, what):
    """The database used to be created (~800 KB) before the input was found missing."""
    source = tmp_path / "input.jsonl"
    if what == "folder":
        source.mkdir()
    elif what == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads every file")
        write_lines(source, MEMORY_LINES).chmod(0)
    new = tmp_path / "new.duckdb"
    assert main(["import", str(source), "--db", str(new)]) == 1
    problem = {"missing": "does not exist", "folder": "is a folder", "unreadable": "is not readable by this user"}
    assert capsys.readouterr().err == f"duckgraph: cannot read {source}: it {problem[what]}; nothing was imported\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("new.duckdb")]


# -- the store's part ------------------------------------------------------------------------------------


def test_restore_is_all_or_nothing(tmp_path):
    kb = open_kb(tmp_path / "kb.duckdb")
    with kb.writing() as writer:  # binds the embedder, as an import does
        node = NodeRecord(namespace="default", key="ada lovelace", name="Ada Lovelace", type="Person",
                          observations=("Wrote the first program.",), embedding=kb.embedder.embed_query("Ada"))
        with pytest.raises(InvalidInputError, match="mentions"):
            writer.restore(Snapshot(nodes=[node], mentions=[("default", "ada lovelace", "no-such-doc", 0)]))
        assert kb.stats()["nodes"] == 0 and node.id is None
        assert kb.store.get_vectors("node", [1]) == {}

        summary = writer.restore(Snapshot(nodes=[node]))
        assert (summary.nodes_created, summary.nodes_updated) == (1, 0)
        again = writer.restore(Snapshot(nodes=[NodeRecord(namespace="default", key="ada lovelace",
                                                          name="Ada Lovelace", type="Mathematician")]))
    assert (again.nodes_created, again.nodes_updated) == (0, 1)
    [stored] = kb.store.find_nodes("default", ["ada lovelace"])
    assert stored.type == "Mathematician"
    assert kb.store.get_observations([stored.id]) == {stored.id: ["Wrote the first program."]}  # None: kept
    assert list(kb.store.get_vectors("node", [stored.id])) == [stored.id]  # no embedding: the vector stays
    kb.close()


def embedded_node_lines(count: int, dims: int, seed: int) -> list[dict]:
    """A meta line and `count` node lines, each with a random embedding of `dims` floats."""
    rng = np.random.default_rng(seed)
    return [{"kind": "meta", "format": "duckgraph", "version": 1,
             "embedder": {"id": "test:fake-hashing", "dimensions": dims}, "embeddings": True},
            *({"kind": "node", "id": i + 1, "name": f"Entity {i}", "type": "Thing",
               "embedding": [round(float(v), 5) for v in rng.standard_normal(dims)]} for i in range(count))]


def test_import_keeps_an_embedded_line_in_a_fraction_of_its_json_size(tmp_path):
    """The reading loop holds each line as validated and its vector as float32 (1.5 KB for 384 dimensions), not
    every raw JSON object of the file (a list of 384 Python floats is ~12 KB, validated twice that)."""
    import tracemalloc

    count, dims = 2_000, 384
    objects = embedded_node_lines(count, dims, seed=3)
    path = write_lines(tmp_path / "vectors.jsonl", objects)
    with open_kb(tmp_path / "target.duckdb", HashingEmbedder(dimensions=dims)) as kb:
        kb.stats()  # the file opened before the measure
        tracemalloc.start()
        try:
            summary = import_file(kb, path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert summary.nodes_created == count and summary.texts_embedded == 0
    assert peak / count < 8_000, f"{peak / count:.0f} bytes a line at the peak"


def test_an_import_holds_no_batch_s_vectors_after_writing_it_and_loads_the_graph_when_first_read(tmp_path,
                                                                                                monkeypatch):
    """The vectors of a written batch are not kept until the commit (DuckDB kept a registered Arrow table alive
    for the whole transaction: ~1.5 KB a vector), and the graph is loaded from the file by the first read after
    the import, not at its commit (an `import` command that ends there never holds it)."""
    import tracemalloc

    monkeypatch.setattr(import_module, "BATCH_LINES", 200)
    count, dims = 2_000, 384
    objects = embedded_node_lines(count, dims, seed=5)
    path = write_lines(tmp_path / "vectors.jsonl", objects)
    held: list[int] = []
    original = snapshot_restore.restore_snapshot

    def measured(*args):
        summary = original(*args)
        held.append(tracemalloc.get_traced_memory()[0])
        return summary

    monkeypatch.setattr("duckgraph.plugins.duckdb.store.restore_snapshot", measured)
    with open_kb(tmp_path / "target.duckdb", HashingEmbedder(dimensions=dims)) as kb:
        kb.stats()
        tracemalloc.start()
        try:
            assert import_file(kb, path).nodes_created == count
        finally:
            tracemalloc.stop()
        assert len(held) == 11  # the meta line and 199 nodes, then 200 nodes a batch
        batch = 200 * dims * 4  # a batch's vectors in float32
        assert held[-1] - held[1] < batch, [round(h / batch, 2) for h in held]  # not one more per batch
        assert kb.store._stale == {"graph", "vectors"}
        assert kb.store.find_nodes("default", ["entity 1999"])[0].name == "Entity 1999"
        assert not kb.store._stale
        vector = np.asarray(objects[-1]["embedding"], dtype=np.float32)
        assert kb.store.vector_search("node", vector / np.linalg.norm(vector), 1, "default")[0][0] == count


# -- times: written with their zone, read with or without one ---------------------------------------------------


TIME_FIELDS = ("created_at", "updated_at", "valid_from", "valid_until", "time")


def test_every_exported_time_says_it_is_utc_and_imports_to_the_same_moment(source, tmp_path):
    text = export(source)
    times = [line[field] for line in map(json.loads, text.splitlines()) for field in TIME_FIELDS
             if line.get(field) is not None]
    assert times and all(t.endswith("Z") and datetime.fromisoformat(t).utcoffset().total_seconds() == 0
                         for t in times)
    assert "1960-01-01T00:00:00.000000Z" in times and "2020-01-02T00:00:00.000000Z" in times

    target = open_kb(tmp_path / "copy.duckdb")
    import_lines(target, text.splitlines(keepends=True))
    stored = {(e.description, e.valid_from, e.valid_until, e.created_at, e.updated_at)
              for e in target.store.list_edges("default", include_expired=True)}
    assert ("An earlier collaboration.", datetime(1960, 1, 1), datetime(1965, 6, 30), datetime(2020, 1, 1),
            datetime(2020, 1, 2)) in stored  # naive UTC again, the very moments exported
    assert export(target) == text
    target.close()


def test_an_export_written_without_zones_imports_as_utc(cli_env, tmp_path, capsys):
    """Exports of earlier versions wrote naive UTC times ("2020-01-01T09:30:00.000000"); they read as UTC, as
    the same moments written with "Z" or "+00:00" do, and export again with "Z"."""
    edge = {"kind": "edge", "source_id": 1, "target_id": 2, "source": "Ravi", "target": "Acme", "type": "WORKS_AT",
            "valid_from": "2020-01-01T09:30:00.000000", "valid_until": "2024-06-01T00:00:00.000000",
            "created_at": "2020-01-01T09:30:00.000000", "updated_at": "2024-06-01T00:00:00.000000"}
    at = {"created_at": "2020-01-01T09:30:00.000000", "updated_at": "2020-01-01T09:30:00.000000"}
    nodes = [{"kind": "node", "id": 1, "name": "Ravi", "type": "Person", **at},
             {"kind": "node", "id": 2, "name": "Acme", "type": "Company", **at}]
    meta = {"kind": "meta", "format": "duckgraph", "version": 1}
    old = write_lines(tmp_path / "old.jsonl", [meta, *nodes, edge])
    new = write_lines(tmp_path / "new.jsonl", [meta, *nodes, {**edge, "valid_from": "2020-01-01T09:30:00Z",
                                                                "valid_until": "2024-06-01T02:00:00+02:00"}])
    exported = []
    for file in (old, new):
        db = tmp_path / f"{file.stem}.duckdb"
        assert main(["import", str(file), "--db", str(db)]) == 0
        assert main(["export", "--db", str(db)]) == 0
        exported.append(capsys.readouterr().out)
        kb = open_kb(db)  # the hashing embedder, which the CLI's 'fake' is
        [stored] = kb.store.list_edges("default", include_expired=True)
        assert (stored.valid_from, stored.valid_until) == (datetime(2020, 1, 1, 9, 30), datetime(2024, 6, 1))
        kb.close()
    assert exported[0] == exported[1]
    [line] = [json.loads(e) for e in exported[0].splitlines() if '"kind":"edge"' in e]
    assert (line["valid_from"], line["valid_until"]) == ("2020-01-01T09:30:00.000000Z", "2024-06-01T00:00:00.000000Z")

