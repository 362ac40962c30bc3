"""What the DuckDB store answers from memory about observations and keywords is what the file says: after a run of
writes (new nodes, observations added, kept and dropped, renames, merges, deletes, edges with descriptions,
documents replaced), the open store agrees with the same file opened again, which reads everything from the tables."""

from __future__ import annotations

from pathlib import Path

from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import ChunkRecord, DocumentRecord, EdgeWrite, NodeRecord, WriteBatch, entity_key, tokens

NS = "default"


def node(name, observations=None, type_="thing", description="", namespace=NS, **fields):
    return NodeRecord(namespace=namespace, key=entity_key(name), name=name, type=type_, description=description,
                      observations=None if observations is None else tuple(observations), **fields)


def edge(source, type_, target, description="", namespace=NS):
    return EdgeWrite(namespace, entity_key(source), entity_key(target), type_, description=description)


def stored(store, name, namespace=NS):
    [found] = store.find_nodes(namespace, [entity_key(name)])
    return found


def write_history(store: DuckDBStore) -> None:
    store.write(WriteBatch(
        nodes=[node("Maya Chen", ["Allergic to peanuts", "Lives in Zürich", "On call for INC-142"], "person",
                    "Leads the orders-db migration", properties={"team": "Payments", "since": 2021}),
               node("Orders DB", ["Upgraded to v2.3"], "database", aliases=("orders-db",)),
               node("Checkout", [], "service"), node("Old Checkout", ["Retired in 2020"], "service"),
               node("Maya Chen", ["elsewhere"], "person", namespace="other")],
        edges=[edge("Maya Chen", "OWNS", "Orders DB", "since the 2023 reorganisation"),
               edge("Checkout", "READS_FROM", "Orders DB"), edge("Old Checkout", "READS_FROM", "Orders DB")],
        documents=[DocumentRecord(id="notes", namespace=NS, text="Maya fixed INC-142.", title="Incident notes")],
        chunks=[ChunkRecord("notes", 0, "Maya fixed INC-142.")]))
    maya = stored(store, "Maya Chen")
    # keeps one observation, drops two, adds two (in this order), renames the node
    store.write(WriteBatch(nodes=[node("Maya Chen", ["Paged twice", "On call for INC-142", "Speaks Brödel"],
                                       "person", id=maya.id, description=maya.description)]))
    orders = stored(store, "Orders DB")
    store.write(WriteBatch(nodes=[node("Orders Database", None, "database", id=orders.id)]))  # observations kept
    store.write(WriteBatch(merges=[(stored(store, "Checkout").id, [stored(store, "Old Checkout").id])]))
    store.write(WriteBatch(nodes=[node("Temp", ["to be deleted"])]))
    store.write(WriteBatch(delete_nodes=[stored(store, "Temp").id]))
    store.write(WriteBatch(documents=[DocumentRecord(id="notes", namespace=NS, text="Replaced.", title="Notes v2")],
                           chunks=[ChunkRecord("notes", 0, "Replaced: the oven of orders-db.")]))


def snapshot(store: DuckDBStore) -> tuple:
    """Every node's observations, and each kind's keyword hits for every word the store holds."""
    nodes = [n for namespace in (NS, "other") for n in store.list_nodes(namespace)]
    observations = store.get_observations([n.id for n in nodes])
    words = sorted({w for n in nodes for w in tokens(f"{n.name} {n.type} {n.description} {' '.join(n.aliases)}")}
                   | {w for texts in observations.values() for t in texts for w in tokens(t)}
                   | {"reads", "owns", "reorganisation", "replaced", "oven", "notes", "fixed", "2021", "payments"})
    hits = {(kind, namespace, word): store.keyword_search(kind, word, 10, namespace)
            for kind in ("node", "edge", "chunk") for namespace in (NS, "other") for word in words}
    return {n.id: observations.get(n.id) for n in nodes}, hits


def test_observations_and_keywords_from_memory_match_the_file(db_path: Path):
    store = DuckDBStore(db_path)
    store.open()
    store.bind_embedder("test:none", 4)  # replacing a document deletes its chunks' vectors: the tables must exist
    try:
        write_history(store)
        live = snapshot(store)
    finally:
        store.close()
    store = DuckDBStore(db_path, read_only=True)
    store.open()
    try:
        assert snapshot(store) == live
        observed = live[0]
        maya = stored(store, "Maya Chen")
        assert observed[maya.id] == ["On call for INC-142", "Paged twice", "Speaks Brödel"]
        assert observed[stored(store, "Orders Database").id] == ["Upgraded to v2.3"]
        assert observed[stored(store, "Checkout").id] is None
        assert store.keyword_search("node", "brodel", 5, NS)[0][0] == maya.id
        assert store.keyword_search("node", "zurich", 5, NS) == []
    finally:
        store.close()
