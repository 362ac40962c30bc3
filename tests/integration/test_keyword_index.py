"""The store's keyword index on real files and real texts: exact ids and rare words ranked first, scores that are
Okapi BM25 of the stored texts through writes, deletes and rebuilds of the postings, and every write path of the
knowledge base (the reference memory server's observations, curation's renames and merges) kept findable."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

import duckgraph.plugins.duckdb.mirror.keywords as keywords
from duckgraph.core.domain import memory_server as memory
from duckgraph.core.domain.model import MemoryEntityInput, ObservationAddition, ObservationDeletion, RelationInput
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import DocumentRecord, ChunkRecord, EdgeWrite, NodeRecord, WriteBatch, entity_key, terms

SESSION = [
    ("Checkout Service", "service", "Takes payments for the web shop.",
     ["INC-142: checkout returned 502 errors for 40 minutes", "Runs on orders-db v2.3"]),
    ("Orders DB", "database", "PostgreSQL cluster holding orders.", ["Alias orders-db", "Upgraded to v2.4 in May"]),
    ("Payments Team", "team", "Owns the payment flow.", ["On call rotation weekly"]),
    ("Omar Haddad", "person", "Leads the Discovery Team.", ["Resolved INC-143 and 142 open tickets"]),
    ("Recommendation Engine", "service", "Suggests products.", ["Order history feeds the model"]),
]


def node(name: str, type_: str = "thing", description: str = "", observations=(), namespace="default", **fields):
    return NodeRecord(namespace=namespace, key=entity_key(name), name=name, type=type_, description=description,
                      observations=tuple(observations), **fields)


@pytest.fixture
def store(db_path: Path):
    s = DuckDBStore(db_path)
    s.open()
    try:
        yield s
    finally:
        s.close()


def names(store: DuckDBStore, hits: list[tuple[int, float]]) -> list[str]:
    by_id = {n.id: n.name for n in store.get_nodes([i for i, _ in hits])}
    return [by_id[i] for i, _ in hits]


def test_exact_ids_versions_and_rare_words_rank_first(store):
    store.write(WriteBatch(nodes=[node(*entity) for entity in SESSION],
                           edges=[EdgeWrite("default", entity_key("Payments Team"), entity_key("Checkout Service"),
                                            "OWNS", description="since the 2023 reorganisation"),
                                  EdgeWrite("default", entity_key("Omar Haddad"), entity_key("Payments Team"),
                                            "ADVISES")]))
    # the whole id outweighs its parts met apart ("INC-143 and 142"): it is a word of its own, and a rare one
    hits = store.keyword_search("node", "Which team owned the service hit by INC-142?", 5, "default")
    assert names(store, hits)[0] == "Checkout Service"
    hits = store.keyword_search("node", "INC-142", 5, "default")
    assert names(store, hits) == ["Checkout Service", "Omar Haddad"] and hits[0][1] > 1.3 * hits[1][1]
    assert names(store, store.keyword_search("node", "orders-db", 5, "default"))[:2] == ["Orders DB",
                                                                                     "Checkout Service"]
    assert names(store, store.keyword_search("node", "v2.4", 5, "default"))[0] == "Orders DB"
    assert names(store, store.keyword_search("node", "Who is on call?", 5, "default")) == ["Payments Team"]
    assert store.keyword_search("node", "What version of Kubernetes is deployed?", 5, "default") == []
    # Words match in their other forms (stemmed): "running" finds "Runs on orders-db v2.3".
    assert names(store, store.keyword_search("node", "what is running", 5, "default")) == ["Checkout Service"]
    [(owns, _), *_] = store.keyword_search("edge", "who owns checkout", 5, "default")
    assert store.get_edges([owns])[0].type == "OWNS"
    assert store.keyword_search("edge", "reorganisation", 5, "default")[0][0] == owns


def test_keyword_scores_score_the_given_rows_as_the_search_does(store):
    store.write(WriteBatch(nodes=[node(*entity) for entity in SESSION]))
    query = "Which team owns the checkout service that runs on orders-db?"
    ranked = dict(store.keyword_search("node", query, 100, "default"))
    ids = [n.id for n in store.list_nodes("default")]
    picked = [ids[0], ids[2], ids[4], 10_000]  # an unknown id is left out, as is a row holding no query term
    scores = store.keyword_scores("node", query, picked, "default")
    assert scores.keys() == {i for i in picked if i in ranked} and len(scores) >= 2
    assert all(math.isclose(scores[i], ranked[i], rel_tol=1e-5) for i in scores)
    assert store.keyword_scores("node", query, picked, "other") == {}
    assert store.keyword_scores("node", "kubernetes", picked, "default") == {}


def reference_bm25(texts: dict[int, tuple[str, list[str]]], query: str, namespace: str) -> dict[int, float]:
    """Okapi BM25 (k1 1.2, b 0.75) computed from scratch over the rows of one namespace."""
    rows = {i: Counter(words) for i, (ns, words) in texts.items() if ns == namespace}
    if not rows:
        return {}
    average = sum(sum(c.values()) for c in rows.values()) / len(rows)
    scores: dict[int, float] = {}
    for word in dict.fromkeys(terms(query)):
        holding = [i for i, c in rows.items() if word in c]
        idf = math.log(1 + (len(rows) - len(holding) + 0.5) / (len(holding) + 0.5))
        for i in holding:
            tf, length = rows[i][word], sum(rows[i].values())
            scores[i] = scores.get(i, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
    return scores


def test_scores_are_bm25_of_the_stored_texts_through_writes_deletes_and_rebuilds(store, monkeypatch):
    monkeypatch.setattr(keywords, "REBUILD_MIN", 5)  # the postings are built again every few writes
    rng = random.Random(3)
    vocabulary = ["alpha", "beta", "gamma", "delta", "orders-db", "v2.3", "paris", "berlin", "ticket", "INC-7"]
    expected: dict[int, tuple[str, list[str]]] = {}
    stored: dict[tuple[str, str], int] = {}
    for step in range(60):
        namespace = rng.choice(["default", "other"])
        name = f"item {rng.randrange(25)}"
        if (namespace, name) in stored and rng.random() < 0.3:
            node_id = stored.pop((namespace, name))
            store.write(WriteBatch(delete_nodes=[node_id]))
            del expected[node_id]
        else:
            observations = [" ".join(rng.choices(vocabulary, k=rng.randrange(1, 6))) for _ in range(rng.randrange(3))]
            description = " ".join(rng.choices(vocabulary, k=rng.randrange(0, 4)))
            record = node(name, "thing", description, observations, namespace)
            record.id = stored.get((namespace, name))
            node_id = store.write(WriteBatch(nodes=[record])).node_ids[record.key]
            stored[(namespace, name)] = node_id
            expected[node_id] = (namespace, terms(f"{name} thing {description} {' '.join(observations)}"))
        for query in ("alpha orders-db", "INC-7 paris paris", "berlin"):
            for ns in ("default", "other"):
                want = reference_bm25(expected, query, ns)
                got = dict(store.keyword_search("node", query, 100, ns))
                assert got.keys() == want.keys(), (step, query, ns)
                assert all(math.isclose(got[i], want[i], rel_tol=1e-5) for i in want), (step, query, ns)


def test_every_write_path_of_the_knowledge_base_keeps_the_words_current(fake_kb):
    store = fake_kb.store

    def found(kind: str, query: str) -> list[int]:
        return [i for i, _ in store.keyword_search(kind, query, 10, fake_kb.namespace)]

    memory.create_entities(fake_kb, [MemoryEntityInput(name="Maya Chen", entityType="person",
                                                       observations=["Prefers Rust over Go"]),
                                     MemoryEntityInput(name="Acme Corp", entityType="company", observations=[])])
    memory.create_relations(fake_kb, [RelationInput.model_validate(
        {"from": "Maya Chen", "to": "Acme Corp", "relationType": "works at"})])
    [maya] = found("node", "rust")
    memory.add_observations(fake_kb, [ObservationAddition(entityName="Maya Chen", contents=["Allergic to peanuts"])])
    assert found("node", "peanuts") == [maya] and found("node", "rust") == [maya]
    memory.delete_observations(fake_kb, [ObservationDeletion(entityName="Maya Chen",
                                                             observations=["Prefers Rust over Go"])])
    assert found("node", "rust") == [] and found("node", "peanuts") == [maya]
    [works] = found("edge", "maya works acme")
    fake_kb.curation.update_entity("Maya Chen", fake_kb.namespace, new_name="Maya Okafor",
                                   properties={"badge": "B-7731"})
    assert found("edge", "okafor") == [works] and found("edge", "chen") == []
    assert found("node", "b-7731") == [maya]
    memory.create_entities(fake_kb, [MemoryEntityInput(name="ACME Inc", entityType="company",
                                                       observations=["Ticket INC-142 closed"])])
    fake_kb.curation.merge_entities(["ACME Inc"], "Acme Corp", fake_kb.namespace)
    [acme] = found("node", "INC-142")
    assert found("edge", "okafor acme") == [works] and found("node", "corp") == [acme]
    fake_kb.curation.delete_entities(["Maya Okafor"], fake_kb.namespace)
    assert found("node", "okafor") == [] and found("edge", "acme") == []


def test_passages_are_found_by_their_words_and_title(store):
    store.write(WriteBatch(
        documents=[DocumentRecord(id="postmortem", namespace="default", text="...", title="INC-142 postmortem")],
        chunks=[ChunkRecord("postmortem", 0, "Checkout failed while orders-db was read-only."),
                ChunkRecord("postmortem", 1, "Omar rolled the config back at 14:05.")]))
    hits = store.keyword_search("chunk", "postmortem of INC-142", 5, "default")
    assert len(hits) == 2  # the title is part of each passage
    [(first, _), *_] = store.keyword_search("chunk", "who rolled back orders-db config", 5, "default")
    assert store.get_chunks([first])[0].ordinal == 1
