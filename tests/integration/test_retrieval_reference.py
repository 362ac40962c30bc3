"""The array-based expansion (core/domain/retrieval.py) and passage walk (core/domain/passage_ranking.py) against
plain loops that say what they mean, on random graphs (hubs, parallel edges, weights above and below 1, ties) in a
real DuckDB store."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from duckgraph.core.domain import passage_ranking, retrieval
from duckgraph.core.domain.relation_types import replaced_end
from duckgraph.core.domain.retrieval import Reached
from duckgraph.core.domain.search_options import SearchOptions
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.ports import ChunkRecord, DocumentRecord, EdgeWrite, NodeRecord, WriteBatch, normalize

DIMS = 8


def reference_expand(store, query, namespace, anchors, options, named=frozenset()):
    """Breadth-first: a node keeps the first step that brings it the most proximity, and the best relevance of a
    step: the fact's, or the node's it leaves when the fact says that node was replaced, or goes on with the type
    and direction of the chain that reached that node from a named anchor (the chain a node ends, its `chain`)."""
    reached = {a.node_id: a for a in anchors}
    frontier = [a.node_id for a in anchors]
    chains: dict[int, tuple[str, bool]] = {}
    for hop in range(1, options.hops + 1):
        if not frontier:
            break
        found: dict[int, Reached] = {}
        fact: dict[int, float] = {}
        chain_of: dict[int, tuple[str, bool]] = {}
        walked = list(zip(*(column.tolist() for column in store.neighbor_ends(
            frontier, namespace, limit=options.frontier * 20))))
        similarity = store.similarities("edge", [e for e, _, _, _ in walked], query)
        types = store.edge_types([e for e, _, _, _ in walked])
        for edge_id, source, target, weight in walked:
            for here, there, forwards in ((source, target, True), (target, source, False)):
                if here not in frontier or there in reached:
                    continue
                step = (types[edge_id], forwards)
                lends = (replaced_end(types[edge_id]) == ("source" if forwards else "target")
                         or chains.get(here) == step)
                value = similarity.get(edge_id, -1.0)
                value = max(value, reached[here].relevance) if lends else value
                proximity = reached[here].proximity * options.hop_decay * min(weight, 1.0)
                if there not in found or proximity > found[there].proximity:
                    found[there] = Reached(there, hop, proximity, parent=here, via_edge=edge_id, lent=lends)
                    chain_of[there] = step
                fact[there] = max(fact.get(there, -1.0), value)
        for node_id, value in store.similarities("node", list(found), query).items():
            found[node_id].relevance = value
        for node_id, value in fact.items():
            found[node_id].relevance = max(found[node_id].relevance, value)
        for node_id, item in found.items():
            if item.parent in named or chains.get(item.parent) == chain_of[node_id]:
                chains[node_id] = item.chain = chain_of[node_id]
        reached.update(found)
        frontier = [r.node_id for r in sorted(found.values(), key=lambda r: -r.score)[: options.frontier]]
    return reached


def reference_walk(store, node_seeds, chunk_seeds, namespace, options):
    """Power iteration with dicts: each node or chunk shares its weight equally over its links."""
    damping = options.walk_damping
    negligible = 1e-4 * (sum(node_seeds.values()) + sum(chunk_seeds.values()))
    nodes, chunks = dict(node_seeds), dict(chunk_seeds)
    for step in range(options.walk_steps):
        last = step == options.walk_steps - 1
        nodes = {n: w for n, w in nodes.items() if w >= negligible}
        chunks = {c: w for c, w in chunks.items() if w >= negligible}
        links = store.links(list(nodes), [] if last else list(chunks), namespace)
        neighbours, mentioning, mentioned = defaultdict(list), defaultdict(list), defaultdict(list)
        for a, b in zip(*links.node_neighbors):
            neighbours[int(a)].append(int(b))
        for a, b in zip(*links.node_chunks):
            mentioning[int(a)].append(int(b))
        for a, b in zip(*links.chunk_nodes):
            mentioned[int(a)].append(int(b))
        next_nodes = defaultdict(float, {n: (1 - damping) * w for n, w in node_seeds.items()})
        next_chunks = defaultdict(float, {c: (1 - damping) * w for c, w in chunk_seeds.items()})
        for node_id, weight in nodes.items():
            degree = len(neighbours[node_id]) + len(mentioning[node_id])
            for other in neighbours[node_id] if degree and not last else ():
                next_nodes[other] += damping * weight / degree
            for chunk_id in mentioning[node_id] if degree else ():
                next_chunks[chunk_id] += damping * weight / degree
        for chunk_id, weight in chunks.items() if not last else ():
            for node_id in mentioned[chunk_id]:
                next_nodes[node_id] += damping * weight / len(mentioned[chunk_id])
        nodes, chunks = next_nodes, next_chunks
    return dict(chunks)


@pytest.fixture(params=[1, 2, 3])
def graph(request, tmp_path):
    rng = np.random.default_rng(request.param)
    n = 300
    vectors = normalize(rng.standard_normal((n + 2_000, DIMS)).astype(np.float32))
    store = DuckDBStore(tmp_path / "g.duckdb")
    store.open()
    store.bind_embedder("test:reference", DIMS)
    names = [f"e{i}" for i in range(n)]
    documents = [DocumentRecord(id=f"d{i}", namespace="default", text=f"doc {i}") for i in range(40)]
    chunks = [ChunkRecord(document_id=f"d{i % 40}", ordinal=i // 40, text=f"chunk {i}", embedding=vectors[n + i])
              for i in range(80)]
    nodes = [NodeRecord(namespace="default", key=name, name=name, type="Thing", embedding=vectors[i]) for i, name in
             enumerate(names)]
    store.write(WriteBatch(nodes=nodes, documents=documents, chunks=chunks))
    # Heavy-tailed targets (hubs), a few weights per edge so that proximities tie and differ; types that say one end
    # replaced the other, either way, and chains of one type.
    edges, seen = [], set()
    for i in range(1_500):
        source, target = int(rng.integers(n)), int(n * rng.random() ** 3)
        relation = ("A", "B", "A", "B", "SUPERSEDES", "REPLACED_BY")[i % 6]
        if source == target or (source, target, relation) in seen:
            continue
        seen.add((source, target, relation))
        edges.append(EdgeWrite(namespace="default", source_key=names[source], target_key=names[target], type=relation,
                               weight=float(rng.choice([0.5, 1.0, 2.0])), embedding=vectors[n + 100 + i]))
    store.write(WriteBatch(edges=edges))
    ids = {r.key: r.id for r in store.find_nodes("default", names)}
    chunk_ids = [c.id for c in chunks]
    mentions = {(int(rng.choice(chunk_ids)), ids[names[int(n * rng.random() ** 2)]]) for _ in range(400)}
    store._con.execute("INSERT INTO mentions SELECT unnest($1), unnest($2)",
                       [[c for c, _ in mentions], [m for _, m in mentions]])
    store.close()
    store.open()  # the mirror loads the mentions from the file
    try:
        yield store, rng, [ids[name] for name in names], chunk_ids
    finally:
        store.close()


def test_expansion_matches_the_loop(graph):
    store, rng, node_ids, _ = graph
    lent: set[str] = set()  # the types of the steps that lent a node its parent's relevance
    chained = 0  # the nodes compared that end a chain from a named anchor past its first hop
    for frontier, hops in ((100, 2), (7, 3), (1, 2)):
        options = SearchOptions(frontier=frontier, hops=hops)
        for _ in range(8):
            query = normalize(rng.standard_normal(DIMS).astype(np.float32))
            picked = rng.choice(node_ids, size=int(rng.integers(1, 6)), replace=False).tolist()
            named = frozenset(picked[: int(rng.integers(0, len(picked) + 1))])
            similarity = store.similarities("node", picked, query)
            anchors = [Reached(i, 0, 1.0, similarity[i]) for i in picked]
            want = reference_expand(store, query, "default", [Reached(a.node_id, 0, 1.0, a.relevance) for a in anchors],
                                    options, named)
            got, _ = retrieval._expand(store, query, "default", anchors, options, named)
            threshold = retrieval._keep_threshold(anchors, options)
            # Every record it keeps is the loop's; it leaves out only nodes that can be neither kept nor carried.
            assert {k: vars(v) for k, v in got.items()} == {k: vars(want[k]) for k in got}
            assert all(r.relevance < threshold for k, r in want.items() if k not in got)
            assert [r.node_id for r in retrieval._prune(got, anchors, options)] == [
                r.node_id for r in retrieval._prune(want, anchors, options)]
            lent |= set(store.edge_types([r.via_edge for r in got.values() if r.lent]).values())
            chained += sum(r.chain is not None and r.hop > 1 for r in got.values())
    assert lent >= {"A", "SUPERSEDES", "REPLACED_BY"}  # both kinds of lending were compared
    assert chained


def test_walk_matches_the_loop(graph):
    store, rng, node_ids, chunk_ids = graph
    for steps in (1, 2, 3, 4):
        options = SearchOptions(walk_steps=steps)
        for _ in range(5):
            node_seeds = {int(i): float(rng.random()) for i in rng.choice(node_ids, size=4, replace=False)}
            chunk_seeds = {int(i): float(rng.random()) / 20 for i in rng.choice(chunk_ids, size=10, replace=False)}
            chunk_ids, scores, _ = passage_ranking._walk(store, node_seeds, chunk_seeds, "default", options)
            got = dict(zip(chunk_ids.tolist(), scores.tolist()))
            want = reference_walk(store, node_seeds, chunk_seeds, "default", options)
            assert got.keys() >= {c for c, w in want.items() if w > 0}
            assert all(got.get(c, 0.0) == pytest.approx(w, rel=1e-9, abs=1e-15) for c, w in want.items())
            assert all(w == pytest.approx(want.get(c, 0.0), rel=1e-9, abs=1e-15) for c, w in got.items())
