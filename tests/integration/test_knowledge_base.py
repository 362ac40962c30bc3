"""The knowledge base use cases on a real DuckDB file: idempotent merges, atomic batches, documents,
provenance, the embedder binding, concurrency and the CLI."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from duckgraph.core.cli import main
from duckgraph.core.domain.model import DocumentInput, EdgeInput, NodeInput
from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.duckdb.settings import default_memory_limit
from duckgraph.ports import EmbedderMismatchError, InvalidInputError, entity_key
from tests.fakes import HashingEmbedder

JMP = "Journal of Mathematical Physics"


def one_node(kb: KnowledgeBase, name: str):
    found = [n for n in kb.store.find_nodes(kb.namespace, [entity_key(name)]) if n.key == entity_key(name)]
    assert len(found) == 1, found
    return found[0]


def edges_of(kb: KnowledgeBase, name: str):
    return kb.store.neighbors([one_node(kb, name).id], kb.namespace)


def long_text(topic: str, sentences: int) -> str:
    return " ".join(f"Sentence {i} about {topic} number {i * 7919 % 1000}." for i in range(sentences))


# -- 2. embedder binding through the knowledge base --------------------------------------------------------


def test_other_embedder_is_refused_before_anything_is_written(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        before = kb.stats()

    other = HashingEmbedder(name="other")
    with KnowledgeBase(DuckDBStore(db_path), other) as kb:
        with pytest.raises(EmbedderMismatchError) as err:
            kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
        message = str(err.value)
        assert str(db_path) in message
        assert "'test:fake-hashing'" in message and "'test:other'" in message
        assert "DUCKGRAPH_EMBEDDER" in message and "duckgraph import --re-embed" in message
        with pytest.raises(EmbedderMismatchError):
            kb.add_documents([DocumentInput(id="d", text="Babbage designed the Analytical Engine.")])
        with pytest.raises(EmbedderMismatchError):
            kb.search("Ada Lovelace")
        assert other.calls == []  # refused before any text was embedded
        assert kb.stats() == before
        assert kb.store.embedder_info() == ("test:fake-hashing", 64)


def test_same_embedder_id_with_other_dimensions_is_refused(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(dimensions=32)) as kb:
        with pytest.raises(EmbedderMismatchError, match="64 dimensions"):
            kb.add_knowledge_graph([NodeInput(name="Charles Babbage", type="Person")], [])
        assert kb.stats()["nodes"] == 1


def test_a_deletion_binds_no_embedder(db_path: Path):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(name="other")) as kb:
        assert kb.curation.delete_entities(["Ada Lovelace"], kb.namespace).deleted == ["Ada Lovelace"]
        assert kb.store.embedder_info() == ("test:fake-hashing", 64)


# -- 3. idempotent upserts ---------------------------------------------------------------------------------


def test_same_entity_in_other_case_and_spacing_is_one_node(fake_kb: KnowledgeBase):
    first = fake_kb.add_knowledge_graph(
        [NodeInput(name=JMP, type="Journal", aliases=["JMP"], properties={"issn": "0022-2488"})], []
    )
    second = fake_kb.add_knowledge_graph(
        [NodeInput(name="  journal of mathematical physics ", type="Journal", aliases=["J. Math. Phys."],
                   properties={"publisher": "AIP"}, description="A monthly journal.")], []
    )
    assert (first.nodes_created, first.nodes_updated) == (1, 0)
    assert (second.nodes_created, second.nodes_updated) == (0, 1)
    assert second.nodes[0].id == first.nodes[0].id and second.nodes[0].created is False
    assert fake_kb.stats()["nodes"] == 1

    node = one_node(fake_kb, JMP)
    assert node.name == JMP  # the first spelling is kept
    assert node.aliases == ("JMP", "J. Math. Phys.")  # the other spelling is not an alias: same key
    assert node.properties == {"issn": "0022-2488", "publisher": "AIP"}
    assert node.description == "A monthly journal."
    # Every alias finds it.
    assert [n.id for n in fake_kb.store.find_nodes("default", ["jmp"])] == [node.id]
    assert [n.id for n in fake_kb.store.find_nodes("default", [entity_key("J. Math. Phys.")])] == [node.id]


def test_every_alias_written_over_time_is_kept(fake_kb: KnowledgeBase):
    """A call gives at most 50 aliases, but an entity written again gathers more: none is dropped (the fifty-first
    and later were, silently: then its old names no longer found it)."""
    first = [f"JMP {i}" for i in range(50)]
    later = [f"J. Math. Phys. {i}" for i in range(10)]
    fake_kb.add_knowledge_graph([NodeInput(name=JMP, type="Journal", aliases=first)], [])
    fake_kb.add_knowledge_graph([NodeInput(name=JMP, type="Journal", aliases=later)], [])
    resolved = fake_kb.add_knowledge_graph([NodeInput(name="J. Math. Phys. 9", type="Journal")], [])
    assert one_node(fake_kb, JMP).aliases == (*first, *later)
    assert resolved.nodes_created == 0 and [r.into for r in resolved.resolved] == [JMP]
    assert fake_kb.stats()["nodes"] == 1


def test_variants_in_one_call_are_one_node(fake_kb: KnowledgeBase):
    result = fake_kb.add_knowledge_graph(
        [NodeInput(name=JMP, type="Journal"), NodeInput(name="  JOURNAL of  mathematical physics", type="Journal")],
        [],
    )
    assert (result.nodes_created, result.nodes_updated) == (1, 0)
    assert fake_kb.stats()["nodes"] == 1
    assert fake_kb.health()["vectors"]["node"] == 1


def test_same_edge_twice_is_one_edge(fake_kb: KnowledgeBase):
    nodes = [NodeInput(name="Freeman Dyson", type="Person"), NodeInput(name=JMP, type="Journal")]
    first = fake_kb.add_knowledge_graph(
        nodes, [EdgeInput(source="Freeman Dyson", target=JMP, type="PUBLISHED_IN", properties={"year": 1962})]
    )
    second = fake_kb.add_knowledge_graph(
        [], [EdgeInput(source="freeman dyson", target=" journal of mathematical physics", type="published in",
                       weight=2.5, properties={"volume": 3})]
    )
    assert (first.edges_created, first.edges_updated) == (1, 0)
    assert (second.edges_created, second.edges_updated) == (0, 1)
    stats = fake_kb.stats()
    assert stats["edges"] == 1
    assert stats["edge_types"] == {"PUBLISHED_IN": 1}
    [edge] = edges_of(fake_kb, JMP)
    assert edge.type == "PUBLISHED_IN"
    assert edge.weight == 2.5
    assert edge.properties == {"year": 1962, "volume": 3}
    assert fake_kb.health()["vectors"]["edge"] == 1


def test_edge_type_spellings_are_one_type(fake_kb: KnowledgeBase):
    fake_kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person"), NodeInput(name="Analytical Society", type="Organization")],
        [],
    )
    result = fake_kb.add_knowledge_graph([], [
        EdgeInput(source="Ada Lovelace", target="Analytical Society", type="works at"),
        EdgeInput(source="Ada Lovelace", target="Analytical Society", type="WORKS_AT"),
        EdgeInput(source="Ada Lovelace", target="Analytical Society", type="Works-At"),
    ])
    assert (result.edges_created, result.edges_updated) == (1, 0)  # the spellings name the edge the call creates
    assert fake_kb.stats()["edge_types"] == {"WORKS_AT": 1}
    [edge] = edges_of(fake_kb, "Ada Lovelace")
    assert (edge.type, edge.weight) == ("WORKS_AT", 1.0)  # no weight given: the default survives the repeats


# -- 4. atomic batches -------------------------------------------------------------------------------------


def test_edge_to_an_unknown_node_rejects_the_whole_batch(fake_kb: KnowledgeBase):
    fake_kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    before, vectors_before = fake_kb.stats(), fake_kb.health()["vectors"]

    with pytest.raises(InvalidInputError) as err:
        fake_kb.add_knowledge_graph(
            [NodeInput(name="Charles Babbage", type="Person"), NodeInput(name="Analytical Engine", type="Machine")],
            [EdgeInput(source="Charles Babbage", target="Analytical Engine", type="designed"),
             EdgeInput(source="Charles Babbage", target="Difference Engine No. 2", type="designed")],
        )
    message = str(err.value)
    assert "edges[1]" in message and "'Difference Engine No. 2'" in message
    assert fake_kb.stats() == before
    assert fake_kb.health()["vectors"] == vectors_before
    assert fake_kb.store.find_nodes("default", ["charles babbage", "analytical engine"]) == []


def test_source_ids_naming_a_missing_document_write_nothing(fake_kb: KnowledgeBase):
    fake_kb.add_documents([DocumentInput(id="real", text="Ada Lovelace wrote the first program.")])
    fake_kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person", source_ids=["real"])], [])
    before, vectors_before = fake_kb.stats(), fake_kb.health()["vectors"]
    ada = one_node(fake_kb, "Ada Lovelace")
    mentions_before = fake_kb.store.chunks_mentioning([ada.id])

    with pytest.raises(InvalidInputError) as err:
        fake_kb.add_knowledge_graph(
            [NodeInput(name="Charles Babbage", type="Person", source_ids=["real"]),
             NodeInput(name="Ada Lovelace", type="Person", description="Mathematician.", source_ids=["missing-doc"])],
            [EdgeInput(source="Ada Lovelace", target="Charles Babbage", type="corresponded with")],
        )
    assert "missing-doc" in str(err.value)
    assert fake_kb.stats() == before
    assert fake_kb.health()["vectors"] == vectors_before
    assert fake_kb.store.find_nodes("default", ["charles babbage"]) == []
    assert one_node(fake_kb, "Ada Lovelace").description == ""  # the update was rolled back too
    assert fake_kb.store.chunks_mentioning([ada.id]) == mentions_before


# -- 5. documents ------------------------------------------------------------------------------------------


def test_documents_keep_ids_and_are_chunked(fake_kb: KnowledgeBase):
    text = long_text("glaciers", 150)
    assert len(text) > 4 * fake_kb.chunk_chars
    result = fake_kb.add_documents([DocumentInput(id="glaciers-2024", title="Glaciers", text=text,
                                                  metadata={"lang": "en"})])
    [doc] = result.documents
    assert doc.id == "glaciers-2024" and not doc.unchanged
    assert len(doc.chunk_ids) >= 4 and result.chunks_written == len(doc.chunk_ids)
    chunks = sorted(fake_kb.store.get_chunks(doc.chunk_ids), key=lambda c: c.ordinal)
    assert [c.ordinal for c in chunks] == list(range(len(doc.chunk_ids)))
    assert all(0 < len(c.text) <= fake_kb.chunk_chars for c in chunks)
    assert all(c.document_id == "glaciers-2024" for c in chunks)
    assert chunks[0].text.startswith("Sentence 0 about glaciers") and chunks[-1].text.endswith(text[-20:])
    [stored] = fake_kb.store.get_documents(["glaciers-2024"], "default")
    assert (stored.text, stored.title, stored.metadata) == (text, "Glaciers", {"lang": "en"})
    assert fake_kb.stats()["chunks"] == fake_kb.health()["vectors"]["chunk"] == len(chunks)


def test_re_adding_the_same_document_changes_nothing(fake_kb: KnowledgeBase):
    doc = DocumentInput(id="d1", title="Glaciers", text=long_text("glaciers", 60))
    first = fake_kb.add_documents([doc])
    calls = len(fake_kb.embedder.calls)
    second = fake_kb.add_documents([doc])
    assert second.documents[0].unchanged is True
    # Its passages are listed as stored (the field is "its passages in order"), none written.
    assert second.documents[0].chunk_ids == first.documents[0].chunk_ids and second.chunks_written == 0
    assert len(fake_kb.embedder.calls) == calls  # nothing re-embedded
    assert fake_kb.stats()["chunks"] == len(first.documents[0].chunk_ids)
    assert fake_kb.store.get_chunks(first.documents[0].chunk_ids)  # the original chunks are still there


def test_new_text_under_the_same_id_replaces_the_chunks(fake_kb: KnowledgeBase):
    old_text = long_text("volcanoes erupting lava", 60)
    old = fake_kb.add_documents([DocumentInput(id="d1", text=old_text)]).documents[0]
    new = fake_kb.add_documents([DocumentInput(id="d1", text="Penguins swim in the cold southern ocean.")])
    [doc] = new.documents
    assert not doc.unchanged and len(doc.chunk_ids) == 1
    assert not set(doc.chunk_ids) & set(old.chunk_ids)
    assert fake_kb.store.get_chunks(old.chunk_ids) == []
    assert fake_kb.stats()["chunks"] == 1 and fake_kb.stats()["documents"] == 1
    assert fake_kb.health()["vectors"]["chunk"] == 1

    hits = fake_kb.store.vector_search("chunk", fake_kb.embedder.embed_query(old_text[:200]), 10, "default")
    assert [i for i, _ in hits] == doc.chunk_ids
    result = fake_kb.search("volcanoes erupting lava")
    assert all("volcano" not in p.text for p in result.passages)


def test_documents_without_id_get_a_stable_content_id(fake_kb: KnowledgeBase, tmp_path: Path):
    text = "Marie Curie won two Nobel Prizes."
    first = fake_kb.add_documents([DocumentInput(text=text)]).documents[0]
    assert first.id.startswith("doc-")
    again = fake_kb.add_documents([DocumentInput(text=text)]).documents[0]
    assert again.id == first.id and again.unchanged
    other = fake_kb.add_documents([DocumentInput(text=text + " Twice.")]).documents[0]
    assert other.id != first.id
    with KnowledgeBase(DuckDBStore(tmp_path / "elsewhere.duckdb"), HashingEmbedder()) as kb:
        assert kb.add_documents([DocumentInput(text=text)]).documents[0].id == first.id


# -- 6. provenance -----------------------------------------------------------------------------------------


def test_source_ids_link_nodes_to_the_chunks_naming_them(db_path: Path):
    paragraphs = [
        "The glacier retreated forty metres last summer. " * 4,
        "Marie Curie isolated radium from pitchblende in her Paris laboratory. " * 3,
        "Tides are caused by the moon and, to a lesser degree, the sun. " * 4,
    ]
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder(), chunk_chars=250, chunk_overlap=0) as kb:
        [doc] = kb.add_documents([DocumentInput(id="notes", text="\n\n".join(paragraphs))]).documents
        assert len(doc.chunk_ids) >= 3
        chunks = {c.id: c.text for c in kb.store.get_chunks(doc.chunk_ids)}
        kb.add_knowledge_graph(
            [NodeInput(name="Marie Curie", type="Person", source_ids=["notes"]),
             NodeInput(name="Radium", type="Element", source_ids=["notes"]),
             NodeInput(name="Pierre Curie", type="Person", source_ids=["notes"])],  # not named in any chunk
            [EdgeInput(source="Marie Curie", target="Radium", type="isolated", source_ids=["notes"])],
        )
        curie, pierre = one_node(kb, "Marie Curie"), one_node(kb, "Pierre Curie")
        mentioned = {chunk_id for chunk_id, node_id in kb.store.chunks_mentioning([curie.id]) if node_id == curie.id}
        assert mentioned == {i for i, text in chunks.items() if "marie curie" in text.casefold()}
        assert mentioned and mentioned < set(chunks)
        # Not named anywhere: linked to the passage nearest to him (by vector: the one sharing "Curie"), not to
        # every passage of the document.
        assert {c for c, _ in kb.store.chunks_mentioning([pierre.id])} == mentioned
        # The passages of a search about her come from the chunk naming her.
        result = kb.search("Marie Curie radium")
        assert result.passages and result.passages[0].chunk_id in mentioned


# -- 9. threads --------------------------------------------------------------------------------------------


def test_a_write_waits_while_writes_are_paused(fake_kb: KnowledgeBase):
    done = threading.Event()

    def add() -> None:
        fake_kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
        done.set()

    with fake_kb.writes_paused():
        thread = threading.Thread(target=add)
        thread.start()
        assert not done.wait(0.3)
    thread.join(timeout=30)
    assert done.is_set() and fake_kb.stats()["nodes"] == 1


def test_concurrent_writes_and_searches(fake_kb: KnowledgeBase):
    threads, ops = 4, 50
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(ops):
                if i % 2 == 0:
                    fake_kb.add_knowledge_graph(
                        [NodeInput(name="Hub", type="Thing", properties={f"t{t}": i}),
                         NodeInput(name=f"worker {t} item {i}", type="Thing", description=f"made by thread {t}")],
                        [EdgeInput(source=f"worker {t} item {i}", target="hub", type="links to")],
                    )
                else:
                    result = fake_kb.search(f"worker {t} item {i - 1}")
                    assert result.anchors, f"nothing found for worker {t} item {i - 1}"
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers)
    assert errors == []

    writes = threads * ops // 2
    stats = fake_kb.stats()
    assert stats["nodes"] == writes + 1
    assert stats["edges"] == writes
    assert fake_kb.health()["vectors"] == {"node": writes + 1, "chunk": 0, "edge": writes}
    hub = one_node(fake_kb, "Hub")
    assert hub.properties == {f"t{t}": ops - 2 for t in range(threads)}
    assert len(fake_kb.store.neighbors([hub.id], "default")) == writes


# -- 10. the CLI -------------------------------------------------------------------------------------------


@pytest.fixture
def cli_env(monkeypatch, tmp_path: Path):
    """Default settings: no user config file, no DUCKGRAPH_* variables from the environment."""
    config = tmp_path / "empty-config.toml"
    config.write_text("")
    for name in ("DB", "NAMESPACE", "LOG_LEVEL", "WARM_UP", "STORE", "STORE_OPTIONS", "EMBEDDER",
                 "EMBEDDER_OPTIONS", "EXTRACTOR", "EXTRACTOR_OPTIONS"):
        monkeypatch.delenv(f"DUCKGRAPH_{name}", raising=False)
    monkeypatch.setenv("DUCKGRAPH_CONFIG", str(config))


def test_doctor_on_a_fresh_file(cli_env, tmp_path: Path, capsys):
    path = tmp_path / "fresh.duckdb"
    with KnowledgeBase(DuckDBStore(path), HashingEmbedder()):
        pass  # an empty file, no embedder bound yet (doctor never creates one: tests/integration/test_doctor.py)
    code = main(["doctor", "--db", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0, report
    assert report["embedder"]["id"] == "sentence-transformers:all-MiniLM-L6-v2"
    assert report["embedder"]["queries"].startswith("onnxruntime once the server's warm-up has exported the model")
    # PyTorch's bfloat16 on a CPU with AMX, float32 on the export elsewhere
    assert report["embedder"]["batches"].startswith(("PyTorch in bfloat16 if", "onnxruntime in float32 once"))
    assert report["settings"]["db"] == str(path)
    main(["doctor", "--db", str(path)])
    printed = capsys.readouterr().out
    assert "embedder queries: onnxruntime once the server's warm-up" in printed
    assert "passage texts: in memory (0.0 MB, up to passage_texts_mb=256)" in printed
    assert f"memory limit: {default_memory_limit()} for DuckDB's cache and indexes" in printed
    assert "vectors in memory: none (no embedder bound yet)" in printed
    assert "vectors in the file: none (no embedder bound yet)" in printed
    store = report["store"]
    assert store["path"] == str(path)
    assert store["vss"]["loaded"] is True and store["vss"]["path"].endswith(".duckdb_extension")
    assert set(store["vector_search"]) >= {"node", "chunk"}
    assert all(mode.startswith("none") for mode in store["vector_search"].values())  # nothing bound yet
    assert store["embedder"] is None
    assert report["problems"] == []


def test_doctor_reports_an_embedder_mismatch(cli_env, db_path: Path, capsys):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person")], [])
    code = main(["doctor", "--db", str(db_path), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["store"]["embedder"] == {"id": "test:fake-hashing", "dimensions": 64}
    assert report["store"]["vector_search"]["node"].startswith("exact scan")
    assert report["store"]["vectors_in_file"] == "node float32, chunk float32, edge bfloat16"
    assert any("test:fake-hashing" in p and "all-MiniLM-L6-v2" in p for p in report["problems"])


def test_stats_prints_the_counts(cli_env, db_path: Path, capsys):
    with KnowledgeBase(DuckDBStore(db_path), HashingEmbedder()) as kb:
        kb.add_documents([DocumentInput(id="d1", text="Ada Lovelace wrote about the Analytical Engine.")])
        kb.add_knowledge_graph(
            [NodeInput(name="Ada Lovelace", type="Person"), NodeInput(name="Analytical Engine", type="Machine")],
            [EdgeInput(source="Ada Lovelace", target="Analytical Engine", type="wrote about", source_ids=["d1"])],
        )
    assert main(["stats", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out
    assert "2 nodes, 1 edges, 1 documents, 1 passages" in out
    assert "Person (1)" in out and "WROTE_ABOUT (1)" in out

    assert main(["stats", "--db", str(db_path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["nodes"], stats["edges"], stats["documents"], stats["chunks"]) == (2, 1, 1, 1)


# -- real vectors ------------------------------------------------------------------------------------------


@pytest.mark.model
def test_real_model_search_finds_the_entity_and_its_passage(real_kb: KnowledgeBase):
    real_kb.add_documents([
        DocumentInput(id="curie", text="Marie Curie was a physicist and chemist who discovered polonium and "
                                       "radium and won Nobel Prizes in both physics and chemistry."),
        DocumentInput(id="bread", text="Sourdough bread rises because wild yeast and lactic acid bacteria "
                                       "ferment the dough over many hours."),
    ])
    real_kb.add_knowledge_graph(
        [NodeInput(name="Marie Curie", type="Person", description="Physicist and chemist", source_ids=["curie"]),
         NodeInput(name="Radium", type="Chemical element", source_ids=["curie"]),
         NodeInput(name="Sourdough", type="Food", description="Bread leavened by wild yeast", source_ids=["bread"])],
        [EdgeInput(source="Marie Curie", target="Radium", type="discovered", source_ids=["curie"])],
    )
    result = real_kb.search("Which scientist discovered a radioactive element?")
    assert result.anchors and result.anchors[0].name in {"Marie Curie", "Radium"}
    assert "Sourdough" not in {n.name for n in result.nodes}
    assert result.passages and result.passages[0].document_id == "curie"
    assert real_kb.health()["embedder"] == {"id": "sentence-transformers:all-MiniLM-L6-v2", "dimensions": 384}


# -- observations, vague types ---------------------------------------------------------------------------


def test_nodes_bring_observations_added_once_after_the_stored_ones(fake_kb: KnowledgeBase):
    first = fake_kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person", observations=["wrote the first program", "born 1815"])], [])
    assert first.observations_added == 2
    again = fake_kb.add_knowledge_graph(
        [NodeInput(name="ada lovelace", type="Person", observations=["born 1815", "died 1852", "died 1852"])], [])
    assert again.observations_added == 1 and again.nodes_created == 0
    [entity], _ = fake_kb.curation.get_entities(["Ada Lovelace"], fake_kb.namespace)
    assert entity.observations == ["wrote the first program", "born 1815", "died 1852"]


def test_too_many_observations_write_nothing(fake_kb: KnowledgeBase):
    from duckgraph.core.domain.limits import MAX_OBSERVATIONS

    fake_kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person", observations=["born 1815"])], [])
    before = fake_kb.stats()
    many = [f"fact {i}" for i in range(MAX_OBSERVATIONS)]
    with pytest.raises(InvalidInputError, match=f"'Ada Lovelace' would have {MAX_OBSERVATIONS + 1} observations"):
        fake_kb.add_knowledge_graph([NodeInput(name="Ada Lovelace", type="Person", observations=many),
                                     NodeInput(name="Charles Babbage", type="Person")], [])
    assert fake_kb.stats() == before
    assert fake_kb.curation.get_entities(["Ada Lovelace"], fake_kb.namespace)[0][0].observations == ["born 1815"]


@pytest.mark.parametrize("vague", ["RELATED_TO", "related to", "Relates-To", "ASSOCIATED_WITH", "is related to",
                                   "IS_ASSOCIATED_WITH", "connected to"])
def test_a_vague_relation_type_is_stored_and_flagged(fake_kb: KnowledgeBase, vague: str):
    result = fake_kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person"), NodeInput(name="Charles Babbage", type="Person")],
        [EdgeInput(source="Ada Lovelace", target="Charles Babbage", type=vague),
         EdgeInput(source="Ada Lovelace", target="Charles Babbage", type="CORRESPONDED_WITH")])
    assert result.edges_created == 2
    assert [(e.source, e.target) for e in result.vague_edges] == [("Ada Lovelace", "Charles Babbage")]
    [hint] = result.hints
    assert result.vague_edges[0].type in hint and "specific type" in hint and "delete_relations" in hint


def test_specific_types_are_not_flagged(fake_kb: KnowledgeBase):
    result = fake_kb.add_knowledge_graph(
        [NodeInput(name="Ada Lovelace", type="Person"), NodeInput(name="Byron", type="Person")],
        [EdgeInput(source="Ada Lovelace", target="Byron", type=t) for t in ("CHILD_OF", "RELATED_BY_BLOOD_TO")])
    assert not result.vague_edges and not result.hints
