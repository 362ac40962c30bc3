"""The store port's contract: what every GraphStore does, whatever keeps the data.

`StoreContract` holds the tests; an adapter runs them by subclassing it with a `make_store` fixture, a factory of a
fresh, unopened store at a given path (as `TestDuckDBStore` below does). The helpers the port builds on its abstract
methods (record forms, lean forms, batched search) are run twice: as the store answers them (it may override them
to be faster) and as the port's own code answers them on that store, so both are checked against the same data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from duckgraph.core.plugin_manager import create
from duckgraph.ports import (
    ChunkRecord,
    DocumentRecord,
    EdgeWrite,
    GraphStore,
    InvalidInputError,
    NodeRecord,
    Snapshot,
    WriteBatch,
    entity_key,
    loose_key,
    part_title,
)
from duckgraph.ports.store import SITTING_PAUSE

DIMS = 4


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIMS, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def node(name: str, namespace: str = "default", **fields) -> NodeRecord:
    return NodeRecord(namespace=namespace, key=entity_key(name), name=name, type=fields.pop("type", "Person"),
                      **fields)


def edge(source: str, type_: str, target: str, namespace: str = "default", **fields) -> EdgeWrite:
    return EdgeWrite(namespace=namespace, source_key=entity_key(source), target_key=entity_key(target), type=type_,
                     **fields)


def chunk_document(namespace: str, title: str, texts: list[str], vectors: list[np.ndarray]) -> WriteBatch:
    return WriteBatch(documents=[DocumentRecord(id="notes", namespace=namespace, text=" ".join(texts), title=title)],
                      chunks=[ChunkRecord("notes", i, text, embedding=v) for i, (text, v) in
                              enumerate(zip(texts, vectors))])


@dataclass
class Graph:
    """Ids of what the `graph` fixture wrote (nodes by name, chunks by document in order)."""

    nodes: dict[str, int]
    other_nodes: dict[str, int]
    chunks: list[int]
    other_chunks: list[int]

    def ids(self, *names: str) -> list[int]:
        return [self.nodes[n] for n in names]


#: How a helper is called: as the store answers it, and as the port's own code answers it on that store.
HELPER = pytest.mark.parametrize("helper", [
    pytest.param(lambda store, name: getattr(store, name), id="store"),
    pytest.param(lambda store, name: partial(getattr(GraphStore, name), store), id="port"),
])


class StoreContract:
    """The behaviour of a GraphStore. Subclasses provide `make_store(path) -> GraphStore` as a fixture."""

    @pytest.fixture
    def store(self, make_store: Callable[[Path], GraphStore], tmp_path: Path):
        store = make_store(tmp_path / "store.db")
        store.open()
        store.bind_embedder("contract:unit", DIMS)
        try:
            yield store
        finally:
            store.close()

    @pytest.fixture
    def graph(self, store: GraphStore) -> Graph:
        """In "default": Ada -knew-> Babbage -designed-> Engine, Babbage -baked-> Oven, a document of two chunks;
        in "other": an Ada Lovelace of its own and a document with the same id."""
        chunks = store.write(chunk_document("default", "Notes", ["Ada wrote notes.", "The oven was hot."],
                                            [unit(1), unit(0, 0, 1)])).chunk_ids["notes"]
        other_chunks = store.write(chunk_document("other", "Other notes", ["Ada elsewhere."],
                                                  [unit(1)])).chunk_ids["notes"]
        summary = store.write(WriteBatch(
            nodes=[node("Ada Lovelace", aliases=("Countess of Lovelace",), embedding=unit(1),
                        source_chunk_ids=(chunks[0],), observations=("Wrote the first program.", "Born in 1815.")),
                   node("Charles Babbage", embedding=unit(0, 1)),
                   node("Analytical Engine", type="Machine", embedding=unit(1, 1)),
                   node("Oven", type="Thing", embedding=unit(0, 0, 1), source_chunk_ids=(chunks[1],))],
            edges=[edge("Ada Lovelace", "KNEW", "Charles Babbage", weight=1.0, embedding=unit(1, 0, 0, 1),
                        source_chunk_ids=(chunks[0],)),
                   edge("Charles Babbage", "DESIGNED", "Analytical Engine", weight=2.0, embedding=unit(1, 1, 0, 1)),
                   edge("Charles Babbage", "BAKED", "Oven", weight=0.5)],
        ))
        other = store.write(WriteBatch(nodes=[node("Ada Lovelace", "other", embedding=unit(1),
                                                   source_chunk_ids=(other_chunks[0],))]))
        assert (summary.nodes_created, summary.edges_created, other.nodes_created) == (4, 3, 1)
        by_key = {n.key: n.name for n in store.list_nodes("default")}
        return Graph(nodes={by_key[k]: i for k, i in summary.node_ids.items()},
                     other_nodes={"Ada Lovelace": other.node_ids[entity_key("Ada Lovelace")]},
                     chunks=chunks, other_chunks=other_chunks)

    # -- write and read ------------------------------------------------------------------------------------

    def test_nodes_are_found_by_key_alias_and_loose_key(self, store, graph):
        ada = graph.nodes["Ada Lovelace"]
        for key in (entity_key("Ada Lovelace"), entity_key("Countess of Lovelace"), loose_key("Ada-Lovelace")):
            assert [n.id for n in store.find_nodes("default", [key])] == [ada]
        [record] = store.get_nodes([ada, 10**9])
        assert (record.name, record.type, record.aliases, record.embedding) == (
            "Ada Lovelace", "Person", ("Countess of Lovelace",), None)
        assert [n.id for n in store.list_nodes("default", limit=2)] == sorted(graph.nodes.values())[:2]
        assert store.get_observations([ada, graph.nodes["Oven"]]) == {
            ada: ["Wrote the first program.", "Born in 1815."]}

    def test_nodes_containing_match_name_type_or_observation_ignoring_case(self, store, graph):
        ada, babbage, engine = graph.ids("Ada Lovelace", "Charles Babbage", "Analytical Engine")
        assert store.nodes_containing("default", "LOVELACE") == [ada]  # the name
        assert store.nodes_containing("default", "machine") == [engine]  # the type
        assert store.nodes_containing("default", "first PROG") == [ada]  # an observation, inside a word too
        assert store.nodes_containing("default", "person") == sorted([ada, babbage])  # in id order, once each
        assert store.nodes_containing("default", "kubernetes") == []
        assert store.nodes_containing("default", "%") == []  # no pattern characters
        assert store.nodes_containing("default", "") == sorted(graph.nodes.values())
        assert store.nodes_containing("default", "", limit=2) == sorted(graph.nodes.values())[:2]
        assert store.nodes_containing("other", "ada") == [graph.other_nodes["Ada Lovelace"]]

    def test_a_node_with_an_id_is_replaced_and_an_edge_upserted(self, store, graph):
        [ada] = store.get_nodes([graph.nodes["Ada Lovelace"]])
        ada.description = "Mathematician."
        summary = store.write(WriteBatch(nodes=[ada], edges=[edge("Ada Lovelace", "KNEW", "Charles Babbage",
                                                                  description="Met in 1833.")]))
        assert (summary.nodes_created, summary.nodes_updated, summary.edges_created, summary.edges_updated) == (
            0, 1, 0, 1)
        assert store.get_nodes([ada.id])[0].description == "Mathematician."
        [knew] = store.edges_among(graph.ids("Ada Lovelace", "Charles Babbage"), "default")
        assert (knew.type, knew.description, knew.weight) == ("KNEW", "Met in 1833.", 1.0)

    def test_documents_and_their_chunks(self, store, graph):
        [document] = store.get_documents(["notes", "no such document"], "default")
        assert (document.title, document.text) == ("Notes", "Ada wrote notes. The oven was hot.")
        assert [d.id for d in store.list_documents("default")] == ["notes"]
        chunks = store.document_chunks("default", ["notes"])
        assert [(c.id, c.ordinal, c.text) for c in chunks] == [
            (graph.chunks[0], 0, "Ada wrote notes."), (graph.chunks[1], 1, "The oven was hot.")]
        assert sorted(c.id for c in store.get_chunks([*graph.chunks, 10**9])) == graph.chunks
        # Rewriting a document replaces its chunks and what hangs on them.
        new = store.write(chunk_document("default", "Notes", ["Rewritten."], [unit(0, 1)])).chunk_ids["notes"]
        assert store.get_chunks(graph.chunks) == []
        assert [c.id for c in store.document_chunks("default", ["notes"])] == new
        assert store.mentioned_chunks([*graph.chunks, *new]) == set()
        assert [i for i, _ in store.vector_search("chunk", unit(1), 5, "default")] == new

    def test_provenance(self, store, graph):
        ada, oven = graph.nodes["Ada Lovelace"], graph.nodes["Oven"]
        assert sorted(store.chunks_mentioning([ada, oven])) == [(graph.chunks[0], ada), (graph.chunks[1], oven)]
        assert store.mentioned_chunks([*graph.chunks, 10**9]) == set(graph.chunks)
        [knew] = store.edges_among(graph.ids("Ada Lovelace", "Charles Babbage"), "default")
        assert store.edge_evidence([knew.id]) == [(knew.id, graph.chunks[0])]

    def test_delete_removes_what_hangs_on_a_node(self, store, graph):
        babbage, oven = graph.nodes["Charles Babbage"], graph.nodes["Oven"]
        edges = [e.id for e in store.list_edges("default")]
        baked = [e.id for e in store.edges_among([babbage, oven], "default")]
        summary = store.write(WriteBatch(delete_nodes=[babbage], delete_edges=baked))
        assert (summary.nodes_deleted, summary.edges_deleted) == (1, 3)
        assert store.get_nodes([babbage]) == [] and store.list_edges("default", include_expired=True) == []
        assert babbage not in [i for i, _ in store.vector_search("node", unit(0, 1), 10, "default")]
        assert store.get_vectors("edge", edges) == {} and store.edge_evidence(edges) == []

    def test_merge_moves_edges_and_mentions_to_the_target(self, store, graph):
        ada, oven = graph.nodes["Ada Lovelace"], graph.nodes["Oven"]
        store.write(WriteBatch(merges=[(ada, [oven])]))
        assert store.get_nodes([oven]) == []
        assert sorted(store.chunks_mentioning([ada])) == [(graph.chunks[0], ada), (graph.chunks[1], ada)]
        assert {(e.source_id, e.type, e.target_id) for e in store.neighbors([ada], "default")} == {
            (ada, "KNEW", graph.nodes["Charles Babbage"]), (graph.nodes["Charles Babbage"], "BAKED", ada)}

    def test_vectors_are_read_back(self, store, graph):
        ada = graph.nodes["Ada Lovelace"]
        stored = store.get_vectors("node", [ada, 10**9])
        assert list(stored) == [ada] and np.allclose(stored[ada], unit(1), atol=1e-2)

    # -- namespaces ----------------------------------------------------------------------------------------

    def test_namespaces_are_kept_apart(self, store, graph):
        ada, other_ada = graph.nodes["Ada Lovelace"], graph.other_nodes["Ada Lovelace"]
        assert store.namespaces() == ["default", "other"] and ada != other_ada
        assert [n.id for n in store.find_nodes("other", [entity_key("Ada Lovelace")])] == [other_ada]
        assert store.find_nodes("other", [entity_key("Charles Babbage")]) == []
        assert [i for i, _ in store.vector_search("node", unit(1), 10, "other")] == [other_ada]
        assert [i for i, _ in store.vector_search("chunk", unit(1), 10, "other")] == graph.other_chunks
        assert [d.title for d in store.get_documents(["notes"], "other")] == ["Other notes"]
        assert store.neighbors([ada], "other") == [] and store.edges_among([ada], "other") == []
        assert store.list_edges("other") == [] and store.list_nodes("nowhere") == []
        assert {key: store.stats("other")[key] for key in ("nodes", "edges", "documents", "chunks")} == {
            "nodes": 1, "edges": 0, "documents": 1, "chunks": 1}

    # -- vector search -------------------------------------------------------------------------------------

    def test_vector_search_is_nearest_first_and_its_batch_agrees(self, store, graph):
        hits = store.vector_search("node", unit(1), 2, "default")
        assert [i for i, _ in hits] == graph.ids("Ada Lovelace", "Analytical Engine")
        assert [s for _, s in hits] == pytest.approx([1.0, 2**-0.5], abs=1e-2)
        queries = np.stack([unit(1), unit(0, 0, 1), unit(0, 1, 1)])
        for kind in ("node", "chunk", "edge"):
            one_by_one = [store.vector_search(kind, q, 3, "default") for q in queries]
            assert store.vector_search_batch(kind, queries, 3, "default") == one_by_one
            assert GraphStore.vector_search_batch(store, kind, queries, 3, "default") == one_by_one
        assert store.vector_search_batch("node", np.zeros((0, DIMS), dtype=np.float32), 3, "default") == []

    @HELPER
    def test_similarities_are_similarity_array_without_missing_vectors(self, store, graph, helper):
        edges = {e.type: e.id for e in store.list_edges("default")}
        for kind, ids in (("node", [*graph.nodes.values(), 10**9, -1]), ("edge", [*edges.values(), 10**9])):
            aligned = store.similarity_array(kind, np.asarray(ids, dtype=np.int64), unit(0, 0, 1, 1))
            expected = {i: v for i, v in zip(ids, aligned.tolist()) if not np.isnan(v)}
            assert helper(store, "similarities")(kind, ids, unit(0, 0, 1, 1)) == expected
            assert len(expected) == len(ids) - 2  # unknown ids, and BAKED, stored without a vector, are left out
        oven = np.asarray([graph.nodes["Oven"]])
        assert store.similarity_array("node", oven, unit(0, 0, 1)) == pytest.approx([1.0], abs=1e-2)

    # -- the graph around nodes ------------------------------------------------------------------------------

    @HELPER
    def test_neighbors_are_the_records_of_neighbor_ends(self, store, graph, helper):
        babbage = graph.nodes["Charles Babbage"]
        edge_ids, sources, targets, weights = store.neighbor_ends([babbage], "default")
        assert [e.dtype for e in (edge_ids, sources, targets, weights)] == [np.int64] * 3 + [np.float64]
        assert weights.tolist() == [2.0, 1.0, 0.5]  # the strongest first
        records = helper(store, "neighbors")([babbage], "default")
        assert [(e.id, e.source_id, e.target_id, e.weight) for e in records] == list(
            zip(edge_ids.tolist(), sources.tolist(), targets.tolist(), weights.tolist()))
        by_id = {e.id: e for e in store.get_edges(edge_ids.tolist())}
        assert records == [by_id[i] for i in edge_ids.tolist()]
        assert [e.weight for e in helper(store, "neighbors")([babbage], "default", limit=2)] == [2.0, 1.0]
        assert helper(store, "neighbors")([], "default") == []

    @HELPER
    def test_passage_links_count_what_links_lists(self, store, graph, helper):
        nodes = graph.ids("Charles Babbage", "Ada Lovelace", "Oven")
        links = store.links(nodes, graph.chunks, "default")
        assert sorted(zip(*map(list, links.node_neighbors))) == sorted(
            [(nodes[0], nodes[1]), (nodes[0], graph.nodes["Analytical Engine"]), (nodes[0], nodes[2]),
             (nodes[1], nodes[0]), (nodes[2], nodes[0])])
        assert sorted(zip(*map(list, links.node_chunks))) == [(nodes[1], graph.chunks[0]), (nodes[2], graph.chunks[1])]
        assert sorted(zip(*map(list, links.chunk_nodes))) == [(graph.chunks[0], nodes[1]), (graph.chunks[1], nodes[2])]
        degrees, (mentioned, mentioning) = helper(store, "passage_links")(nodes, "default")
        assert degrees.tolist() == [3, 2, 2]
        assert sorted(zip(list(mentioned), list(mentioning))) == sorted(zip(*map(list, links.node_chunks)))

    @HELPER
    def test_chunk_documents_and_titles_are_read_from_the_records(self, store, graph, helper):
        ids = [*graph.chunks, *graph.other_chunks, 10**9]
        assert helper(store, "chunk_documents")(ids) == {c.id: c.document_id for c in store.get_chunks(ids)}
        assert helper(store, "chunk_documents")(ids) == dict.fromkeys([*graph.chunks, *graph.other_chunks], "notes")
        for namespace, title in (("default", "Notes"), ("other", "Other notes")):
            assert helper(store, "document_titles")(["notes", "none"], namespace) == {"notes": title}

    @HELPER
    def test_a_document_chunk_window_is_its_chunks_by_ordinal_and_its_count(self, store, graph, helper):
        window = helper(store, "document_chunk_window")
        texts = [f"Passage {i}." for i in range(5)]
        five = store.write(chunk_document("default", "Notes", texts, [unit(1)] * 5)).chunk_ids["notes"]
        chunks, total = window("default", "notes", 1, 3)
        assert [(c.id, c.ordinal, c.text, c.document_id) for c in chunks] == [
            (five[1], 1, "Passage 1.", "notes"), (five[2], 2, "Passage 2.", "notes")]
        assert total == 5
        assert [c.id for c in window("default", "notes", 0, 100)[0]] == five
        assert window("default", "notes", 5, 9) == ([], 5)  # past its end: none, still counted
        other, count = window("other", "notes", 0, 9)  # the same id in another namespace is another document
        assert ([c.id for c in other], count) == (graph.other_chunks, 1)
        assert window("default", "no such document", 0, 9) == ([], 0)

    @HELPER
    def test_edge_types_are_read_from_the_records(self, store, graph, helper):
        edges = store.edges_among(list(graph.nodes.values()), "default")
        ids = [e.id for e in edges]
        assert helper(store, "edge_types")([*ids, 10**9]) == {e.id: e.type for e in edges}
        assert sorted(helper(store, "edge_types")(ids).values()) == ["BAKED", "DESIGNED", "KNEW"]
        assert helper(store, "edge_types")([]) == {}

    @HELPER
    def test_adjacent_chunks_go_on_in_reading_order(self, store, graph, helper):
        """Before and after each chunk: its document's chunks, and across a document's end the documents stored
        just before and after it under the same title (a conversation's turns) or as its next part, never another
        namespace's."""
        adjacent = helper(store, "adjacent_chunks")
        first, second = graph.chunks
        (other,) = graph.other_chunks  # stored just after `second`, in another namespace
        assert adjacent([first, second, other, 10**9], "default") == {first: (None, second), second: (first, None)}
        assert adjacent([first, other], "other") == {other: (None, None)}
        parts = {"turn0": ["Did you go?"], "turn1": ["Yes, on Sunday.", "It rained."], "aside": ["Unrelated."],
                 "turn2": ["Good."]}
        store.write(WriteBatch(
            documents=[DocumentRecord(id=doc, namespace="default", text=" ".join(texts),
                                      title="Elsewhere" if doc == "aside" else "Chat, 1 May")
                       for doc, texts in parts.items()],
            chunks=[ChunkRecord(doc, i, text) for doc, texts in parts.items() for i, text in enumerate(texts)]))
        ids = {(c.document_id, c.ordinal): c.id for c in store.document_chunks("default", list(parts))}
        t0, t1a, t1b, aside, t2 = (ids[key] for key in (("turn0", 0), ("turn1", 0), ("turn1", 1), ("aside", 0),
                                                         ("turn2", 0)))
        assert adjacent([t0, t1a, t1b, aside, t2], "default") == {
            t0: (None, t1a), t1a: (t0, t1b), t1b: (t1a, None), aside: (None, None), t2: (None, None)}
        # A long text stored as parts reads on from one part into the next (each stored just after the one
        # before), not into a part of another text or of another count, nor past a part that is missing.
        titled = {"a1": "Manual (part 1 of 3)", "a2": "Manual (part 2 of 3)", "x3": "Manual (part 3 of 4)",
                  "g3": "Guide (part 3 of 3)", "n1": "Notes (part 1 of 3)", "n3": "Notes (part 3 of 3)"}
        store.write(WriteBatch(
            documents=[DocumentRecord(id=doc, namespace="default", text=doc, title=title)
                       for doc, title in titled.items()],
            chunks=[ChunkRecord(doc, 0, doc) for doc in titled]))
        ids = {c.document_id: c.id for c in store.document_chunks("default", list(titled))}
        assert adjacent(list(ids.values()), "default") == {
            chunk_id: ((ids["a1"], None) if doc == "a2" else (None, ids["a2"]) if doc == "a1" else (None, None))
            for doc, chunk_id in ids.items()}

    @HELPER
    def test_documents_of_one_title_read_on_only_within_one_sitting(self, store, graph, helper):
        """Across a document's end, the next stored document of the same title goes on with its text when both are
        untimed or it was written at most SITTING_PAUSE after it (turns of one sitting); not when they are days or a
        week apart (emails of one subject line, a weekly meeting's notes), one is untimed, or it is timed before.
        The next part of a text reads on whatever their times."""
        day = datetime(2026, 11, 20, 9)
        pairs = {  # title: (the first document's time, the second's, whether the second reads on from the first)
            "Chat with Ana": (day, day.replace(minute=2), True),
            "Session 1, 20 November": (day.replace(hour=0), day.replace(hour=0), True),  # turns dated by the day
            "Transcript": (None, None, True),
            "Lunch plans": (day, day + SITTING_PAUSE, True),
            "Coffee": (day, day + SITTING_PAUSE + timedelta(minutes=1), False),
            "Quick question": (day, datetime(2026, 11, 25, 15), False),
            "Ops weekly sync": (day, day + timedelta(weeks=1), False),
            "Status": (day, None, False),
            "Status update": (None, day, False),
            "Reminder": (day, day - timedelta(minutes=5), False),
        }
        documents = [DocumentRecord(id=f"{title}/{which}", namespace="default", text=title, title=title, time=time)
                     for title, times in pairs.items() for which, time in zip(("first", "second"), times[:2])]
        documents += [DocumentRecord(id=f"Manual/{which}", namespace="default", text="Manual", title=part_title(
                          "Manual", n, 2), time=datetime(year, 1, 1))  # parts of one text, timed years apart
                      for n, which, year in ((1, "first", 2020), (2, "second", 2026))]
        store.write(WriteBatch(documents=documents, chunks=[ChunkRecord(d.id, 0, d.text) for d in documents]))
        ids = {c.document_id: c.id for c in store.document_chunks("default", [d.id for d in documents])}
        adjacent = helper(store, "adjacent_chunks")(list(ids.values()), "default")
        expected = {**{title: reads for title, (_, _, reads) in pairs.items()}, "Manual": True}
        assert {title: adjacent[ids[f"{title}/first"]][1] is not None for title in expected} == expected
        assert {title: adjacent[ids[f"{title}/second"]][0] is not None for title in expected} == expected

    # -- restore and validity ------------------------------------------------------------------------------

    @pytest.fixture
    def restored(self, store) -> dict[str, int]:
        """A snapshot restored into the store: Ada -KNEW-> Babbage since 1950, and -WORKED_WITH-> 1960 to 1965."""
        store.restore(self.snapshot())
        return {n.name: n.id for n in store.list_nodes("default")}

    @staticmethod
    def snapshot() -> Snapshot:
        times = {"created_at": datetime(2020, 1, 1), "updated_at": datetime(2020, 1, 2)}
        return Snapshot(
            documents=[DocumentRecord(id="letters", namespace="default", text="Dear Ada.", title="Letters",
                                      created_at=datetime(2019, 5, 1))],
            chunks=[ChunkRecord("letters", 0, "Dear Ada.", embedding=unit(1))],
            nodes=[node("Ada Lovelace", embedding=unit(1), observations=("Born in 1815.",), **times),
                   node("Charles Babbage", embedding=unit(0, 1), **times)],
            edges=[edge("Ada Lovelace", "KNEW", "Charles Babbage", valid_from=datetime(1950, 1, 1), **times),
                   edge("Ada Lovelace", "WORKED_WITH", "Charles Babbage", embedding=unit(1, 1),
                        valid_from=datetime(1960, 1, 1), valid_until=datetime(1965, 6, 30), **times)],
            mentions=[("default", entity_key("Ada Lovelace"), "letters", 0)],
            evidence=[("default", entity_key("Ada Lovelace"), entity_key("Charles Babbage"), "WORKED_WITH",
                       datetime(1960, 1, 1), datetime(1965, 6, 30), "letters", 0)],
        )

    def test_restore_keeps_rows_as_given(self, store, restored):
        ada = restored["Ada Lovelace"]
        [record] = store.get_nodes([ada])
        assert (record.created_at, record.updated_at) == (datetime(2020, 1, 1), datetime(2020, 1, 2))
        assert store.get_observations([ada]) == {ada: ["Born in 1815."]}
        assert store.get_documents(["letters"], "default")[0].created_at == datetime(2019, 5, 1)
        edges = {e.type: e for e in store.list_edges("default", include_expired=True)}
        assert {t: (e.valid_from, e.valid_until) for t, e in edges.items()} == {
            "KNEW": (datetime(1950, 1, 1), None), "WORKED_WITH": (datetime(1960, 1, 1), datetime(1965, 6, 30))}
        [chunk] = store.document_chunks("default", ["letters"])
        assert store.chunks_mentioning([ada]) == [(chunk.id, ada)]
        assert store.edge_evidence([edges["WORKED_WITH"].id]) == [(edges["WORKED_WITH"].id, chunk.id)]
        assert store.vector_search("edge", unit(1, 1), 1, "default")[0][0] == edges["WORKED_WITH"].id

    def test_restoring_again_changes_nothing(self, store, restored):
        def contents():
            return (store.list_nodes("default"), store.list_edges("default", include_expired=True),
                    store.list_documents("default"), store.document_chunks("default", ["letters"]),
                    store.chunks_mentioning(list(restored.values())), store.get_observations(restored.values()))

        before = contents()
        summary = store.restore(self.snapshot())
        assert (summary.nodes_created, summary.edges_created) == (0, 0)
        after = contents()  # the document's chunks are written anew (with their provenance), so ids may change
        assert after[:3] == before[:3]
        assert [(c.ordinal, c.text) for c in after[3]] == [(c.ordinal, c.text) for c in before[3]]
        assert len(after[4]) == len(before[4]) and after[5] == before[5]

    def test_restore_is_all_or_nothing(self, store):
        bad = self.snapshot()
        bad.mentions.append(("default", entity_key("Ada Lovelace"), "no such document", 0))
        with pytest.raises(InvalidInputError):
            store.restore(bad)
        assert store.namespaces() == [] and store.list_nodes("default") == []

    @staticmethod
    def in_parts(snapshot: Snapshot) -> list[Snapshot]:
        """The snapshot as three, each naming rows of the ones before it: documents, then nodes, then the rest."""
        return [Snapshot(documents=snapshot.documents, chunks=snapshot.chunks), Snapshot(nodes=snapshot.nodes),
                Snapshot(edges=snapshot.edges, mentions=snapshot.mentions, evidence=snapshot.evidence)]

    def test_a_restore_stream_commits_every_snapshot_at_the_end(self, store):
        written = []
        with store.restore_stream() as restore:
            for part in self.in_parts(self.snapshot()):
                written.append(restore(part))
        assert [(w.documents_written, w.nodes_created, w.edges_created, w.mentions_added, w.evidence_added)
                for w in written] == [(1, 0, 0, 0, 0), (0, 2, 0, 0, 0), (0, 0, 2, 1, 1)]
        ada = {n.name: n.id for n in store.list_nodes("default")}["Ada Lovelace"]
        assert store.get_observations([ada]) == {ada: ["Born in 1815."]}
        edges = {e.type: e for e in store.list_edges("default", include_expired=True)}
        [chunk] = store.document_chunks("default", ["letters"])
        assert store.chunks_mentioning([ada]) == [(chunk.id, ada)]
        assert store.edge_evidence([edges["WORKED_WITH"].id]) == [(edges["WORKED_WITH"].id, chunk.id)]
        assert store.vector_search("edge", unit(1, 1), 1, "default")[0][0] == edges["WORKED_WITH"].id

    @pytest.mark.parametrize("failure", ["bad snapshot", "error between snapshots"])
    def test_a_restore_stream_is_all_or_nothing(self, store, failure):
        first, second, third = self.in_parts(self.snapshot())
        if failure == "bad snapshot":
            third.mentions.append(("default", entity_key("Ada Lovelace"), "no such document", 0))
        with pytest.raises((InvalidInputError, RuntimeError)):
            with store.restore_stream() as restore:
                restore(first)
                restore(second)
                if failure != "bad snapshot":
                    raise RuntimeError("the caller failed")
                restore(third)
        assert store.namespaces() == [] and store.list_nodes("default") == []
        assert store.list_documents("default") == [] and store.list_edges("default", include_expired=True) == []
        store.restore(self.snapshot())  # the store is usable after the rollback
        assert len(store.list_nodes("default")) == 2

    def test_edges_hold_between_valid_from_and_valid_until(self, store, restored):
        ada, babbage = restored["Ada Lovelace"], restored["Charles Babbage"]
        types = {e.id: e.type for e in store.list_edges("default", include_expired=True)}
        for as_of, holding in ((None, ["KNEW"]), (datetime(1962, 1, 1), ["KNEW", "WORKED_WITH"]),
                               (datetime(1970, 1, 1), ["KNEW"]), (datetime(1940, 1, 1), [])):
            assert sorted(types[i] for i in store.neighbor_ends([ada], "default", as_of=as_of)[0].tolist()) == holding
            assert sorted(e.type for e in store.neighbors([babbage], "default", as_of=as_of)) == holding
            links = store.links([ada], [], "default", as_of=as_of)
            assert list(links.node_neighbors[1]) == [babbage] * len(holding)
        assert [e.type for e in store.list_edges("default")] == ["KNEW"]
        assert [e.type for e in store.edges_among([ada, babbage], "default")] == ["KNEW"]
        assert sorted(e.type for e in store.edges_among([ada, babbage], "default", include_expired=True)) == [
            "KNEW", "WORKED_WITH"]
        assert sorted(e.type for e in store.get_edges(types)) == ["KNEW", "WORKED_WITH"]
        assert store.stats("default")["edges"] == 1

    def test_counts_and_listings_take_the_edges_that_hold_now(self, store, restored):
        """As search: an end still to come holds until then, a start still to come does not hold yet, and an ended
        edge no longer holds; the edge count and the edge types count the same edges."""
        ada, babbage = restored["Ada Lovelace"], restored["Charles Babbage"]
        store.write(WriteBatch(edges=[
            edge("Ada Lovelace", "CONTRACTED_WITH", "Charles Babbage", valid_until=datetime(2099, 1, 1)),
            edge("Ada Lovelace", "WILL_MEET", "Charles Babbage", valid_from=datetime(2099, 1, 1))]))
        holding = ["CONTRACTED_WITH", "KNEW"]
        assert sorted(e.type for e in store.neighbors([ada], "default")) == holding  # what search follows
        stats = store.stats("default")
        assert stats["edges"] == 2 and stats["edge_types"] == dict.fromkeys(holding, 1)
        assert store.stats()["edges"] == 2
        assert sorted(t["type"] for t in store.type_examples("default")["edge_types"]) == holding
        assert [s["edges"] for s in store.namespace_summaries()] == [2]
        assert sorted(store.most_connected("default")) == [(ada, 2), (babbage, 2)]
        assert sorted(e.type for e in store.list_edges("default")) == holding

    def test_a_write_upserts_only_among_edges_that_hold(self, store, restored):
        summary = store.write(WriteBatch(edges=[edge("Ada Lovelace", "WORKED_WITH", "Charles Babbage"),
                                                edge("Ada Lovelace", "KNEW", "Charles Babbage", weight=3.0)]))
        assert (summary.edges_created, summary.edges_updated) == (1, 1)
        worked = [e for e in store.list_edges("default", include_expired=True) if e.type == "WORKED_WITH"]
        assert sorted((e.valid_until is None) for e in worked) == [False, True]

    # -- keyword search ------------------------------------------------------------------------------------

    @staticmethod
    def found(store, kind: str, query: str, namespace: str = "default", k: int = 10) -> list[int]:
        hits = store.keyword_search(kind, query, k, namespace)
        scores = [score for _, score in hits]
        assert scores == sorted(scores, reverse=True) and all(score > 0 for score in scores)
        return [row for row, _ in hits]

    def test_keywords_find_what_a_write_stored_in_the_next_call(self, store, graph):
        ada, babbage, engine, oven = graph.ids("Ada Lovelace", "Charles Babbage", "Analytical Engine", "Oven")
        edges = {e.type: e.id for e in store.list_edges("default")}
        for query, expected in (("babbage", [babbage]), ("Countess", [ada]), ("born 1815", [ada]),
                                ("machine", [engine]), ("OVEN!", [oven])):
            assert self.found(store, "node", query) == expected, query
        assert self.found(store, "edge", "designed") == [edges["DESIGNED"]]
        assert set(self.found(store, "edge", "Babbage")) == set(edges.values())
        assert self.found(store, "chunk", "oven hot") == [graph.chunks[1]]
        assert self.found(store, "chunk", "notes")[0] == graph.chunks[0]  # in its text and its document's title
        assert self.found(store, "node", "the of and") == [] and self.found(store, "node", "zeppelin") == []
        assert self.found(store, "node", "babbage", namespace="nowhere") == []
        assert self.found(store, "node", "lovelace babbage", k=1) in ([ada], [babbage])

    def test_keywords_keep_namespaces_apart(self, store, graph):
        assert self.found(store, "node", "Ada") == [graph.nodes["Ada Lovelace"]]
        assert self.found(store, "node", "Ada", namespace="other") == [graph.other_nodes["Ada Lovelace"]]
        assert self.found(store, "chunk", "Ada", namespace="other") == graph.other_chunks
        assert self.found(store, "edge", "Babbage", namespace="other") == []

    def test_keywords_follow_updates_renames_and_observations(self, store, graph):
        ada, babbage = graph.ids("Ada Lovelace", "Charles Babbage")
        [record] = store.get_nodes([babbage])
        record.name, record.key, record.properties = "Charles Xavier", entity_key("Charles Xavier"), {
            "release": "v2.3", "port": 5432, "tags": ["INC-142"]}
        [ada_record] = store.get_nodes([ada])
        ada_record.observations = ("Invented loops.",)
        store.write(WriteBatch(nodes=[record, ada_record]))
        edges = {e.type: e.id for e in store.list_edges("default")}
        assert self.found(store, "node", "babbage") == [] and self.found(store, "node", "xavier") == [babbage]
        assert self.found(store, "edge", "babbage") == []
        assert set(self.found(store, "edge", "xavier")) == set(edges.values())
        for query in ("v2.3", "5432", "inc-142"):
            assert self.found(store, "node", query) == [babbage], query
        assert self.found(store, "node", "1815") == [] and self.found(store, "node", "loops") == [ada]

    def test_keywords_forget_deleted_rows(self, store, graph):
        oven = graph.nodes["Oven"]
        edges = {e.type: e.id for e in store.list_edges("default")}
        store.write(WriteBatch(delete_nodes=[oven], delete_edges=[edges["DESIGNED"]]))
        assert self.found(store, "node", "oven") == []
        assert set(self.found(store, "edge", "babbage")) == {edges["KNEW"]}
        store.write(chunk_document("default", "Recipes", ["Bread rises."], [unit(1)]))  # replaces the document
        assert self.found(store, "chunk", "oven") == [] and self.found(store, "chunk", "notes") == []
        assert len(self.found(store, "chunk", "bread recipes")) == 1

    def test_keywords_follow_merges(self, store, graph):
        ada, babbage = graph.ids("Ada Lovelace", "Charles Babbage")
        store.write(WriteBatch(merges=[(ada, [babbage])]))
        assert self.found(store, "node", "babbage") == []
        edges = {e.type: e.id for e in store.list_edges("default")}  # the merge dropped the self-loop KNEW
        assert set(self.found(store, "edge", "lovelace")) == {edges["DESIGNED"], edges["BAKED"]}
        assert self.found(store, "edge", "designed lovelace")[0] == edges["DESIGNED"]

    def test_a_failed_write_leaves_keywords_as_they_were(self, store, graph):
        with pytest.raises(InvalidInputError):
            store.write(WriteBatch(nodes=[node("Zeppelin")], edges=[edge("Zeppelin", "KNEW", "Nobody")]))
        assert self.found(store, "node", "zeppelin") == []

    def test_keywords_are_derived_again_at_open_and_after_restore(self, make_store, tmp_path):
        store = make_store(tmp_path / "restored.db")
        store.open()
        store.bind_embedder("contract:unit", DIMS)
        try:
            store.restore(self.snapshot())
            names = {n.name: n.id for n in store.list_nodes("default")}
            assert self.found(store, "node", "1815") == [names["Ada Lovelace"]]
            assert len(self.found(store, "edge", "worked")) == 1 and len(self.found(store, "chunk", "dear")) == 1
            before = [store.keyword_search(kind, "ada babbage letters", 5, "default") for kind in ("node", "edge", "chunk")]
        finally:
            store.close()
        store = make_store(tmp_path / "restored.db")
        store.open()
        try:
            assert [store.keyword_search(kind, "ada babbage letters", 5, "default")
                    for kind in ("node", "edge", "chunk")] == before
        finally:
            store.close()


class TestDuckDBStore(StoreContract):
    @pytest.fixture
    def make_store(self, plugin_manager) -> Callable[[Path], GraphStore]:
        return partial(create, plugin_manager, "store", "duckdb")
