"""Communities benchmark: build time and memory, extractive report time, global_search latency, and quality on
planted clusters; optionally the ten largest communities of a real graph (e.g. the MuSiQue one musique.py builds).

    python contrib/bench/communities.py [--sizes 10k,100k] [--search 1k,10k] [--json-out results.json]
    python contrib/bench/communities.py --sizes "" --search "" --real /tmp/m.duckdb --questions DIR
    python contrib/bench/communities.py --embedder default --cache /tmp/vectors   # what a user waits for

Graphs (--sizes): N entities in planted clusters of --cluster entities, 5 relations each (90% inside the
entity's cluster, the rest to any entity; weights 1), written straight into a fresh file with SQL, with the
entities' vectors (of their names and types, as a write stores them) by the run's embedder: words hashed into 384
dimensions (instant: the build's own time), or with `--embedder default` the real default model (computed once
per graph and kept in --cache: 100k names take minutes; the time a user waits for). Each size is built in a fresh
process (its own peak RSS) by `CommunityService.build`. Timed from the build's progress: reading the relations,
hierarchical Leiden, extractive reports (+ their vectors: derived from members' or embedded, the embedding also
timed alone), storing; then 1% more relations are added and the build runs again (what it embeds again).
Quality: NMI of each level's partition against the planted clusters. The real model's throughput on report texts
is printed once after hashing runs.

global_search (--search): K communities (planted clusters of 10 entities, with their vectors by the real model:
leaf communities at the finest level), reports by the build, then `global_search` for a cluster's own word, in
process (query embedding included) and through the official MCP client (in memory, the real server); p50/p95
over 100 queries, and how often the first report is the queried cluster's community (the one holding most of its
members).

A real graph (--real FILE): its communities built with the real model and its ten largest listed; with
--questions (the set's folder, e.g. MuSiQue's, whose corpus the file holds) how often global_search's first report
(and any of the first three) holds an entity that a question's supporting passages mention.

Progress goes to stderr, tables to stdout, everything to --json-out. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from duckgraph.core.domain.knowledge_base import KnowledgeBase
from duckgraph.plugins.duckdb import DuckDBStore
from duckgraph.plugins.leiden import LeidenDetector
from duckgraph.ports import Embedder

SYLLABLES = ["ka", "zu", "mor", "tel", "vin", "qua", "rix", "lo", "pen", "dra", "sul", "ové", "gim", "bar", "ny",
             "fex", "tor", "wa", "lis", "cho"]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def count(text: str) -> int:
    text = text.strip().lower()
    return int(float(text[:-1]) * {"k": 1_000, "m": 1_000_000}[text[-1]]) if text[-1] in "km" else int(text)


class HashingEmbedder(Embedder):
    """Words hashed into 384 dimensions: instant, so that a build's time is the build's own."""

    id = "bench:hashing-384"
    dimensions = 384
    batch_size = 4_096

    def embed_batch(self, texts):
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, int(hashlib.blake2b(word.encode(), digest_size=4).hexdigest(), 16) % 384] += 1.0
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


def theme_word(cluster: int) -> str:
    rng = random.Random(cluster)
    return "".join(rng.choice(SYLLABLES) for _ in range(3)) + str(cluster)


def planted_names(n: int, cluster: int) -> tuple[list[str], list[str]]:
    """The planted entities' names (their cluster's word and their number) and types."""
    labels = np.arange(n) // cluster
    words = [theme_word(int(c)) for c in range(int(labels.max()) + 1)]
    return [f"{words[labels[i]]} {i}" for i in range(n)], [f"Kind{labels[i] % 7}" for i in range(n)]


def entity_vectors(n: int, cluster: int, embedder: Embedder, cache: Path | None) -> np.ndarray:
    """The planted entities' vectors by `embedder` (what a write would store: `node_text`), kept in `cache` (the
    real model takes minutes for 100k names on 2 cores)."""
    from duckgraph.core.domain.texts import node_text
    from duckgraph.ports import NodeRecord

    kept = cache / f"entities-{n}-{cluster}-{embedder.id.replace('/', '_').replace(':', '_')}.npy" if cache else None
    if kept is not None and kept.exists():
        return np.load(kept)
    names, types = planted_names(n, cluster)
    texts = [node_text(NodeRecord(namespace="default", key=name.lower(), name=name, type=kind))
             for name, kind in zip(names, types)]
    vectors = np.concatenate([embedder.embed_documents(texts[i:i + 4_096]) for i in range(0, n, 4_096)])
    if kept is not None:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(kept, vectors.astype(np.float32))
    return vectors


def write_planted(path: Path, n: int, cluster: int, seed: int = 0, vectors: tuple[str, np.ndarray] | None = None
                  ) -> np.ndarray:
    """A fresh file holding N entities in clusters of `cluster` and 5 relations per entity; the planted labels.
    `vectors`: (embedder id, one vector per entity) to store as the entities' vectors, the file bound to it."""
    import duckdb

    store = DuckDBStore(path)
    store.open()  # creates the schema
    if vectors is not None:
        store.bind_embedder(vectors[0], vectors[1].shape[1])
    store.close()
    rng = np.random.default_rng(seed)
    labels = np.arange(n) // cluster
    sources = np.repeat(np.arange(n), 5)
    inside = rng.random(len(sources)) < 0.9
    targets = np.where(inside, labels[sources] * cluster + rng.integers(0, cluster, len(sources)),
                       rng.integers(0, n, len(sources)))
    targets = np.minimum(targets, n - 1)
    keep = sources != targets
    sources, targets = sources[keep], targets[keep]
    con = duckdb.connect(str(path))
    names, types = planted_names(n, cluster)
    con.register("_n", {"id": np.arange(1, n + 1), "name": np.array(names, dtype=object),
                        "type": np.array(types, dtype=object)})
    con.execute("INSERT INTO nodes (id, namespace, key, name, type, created_at, updated_at) "
                "SELECT id, 'default', lower(name), name, type, now(), now() FROM _n")
    con.execute("INSERT INTO node_names SELECT 'default', lower(name), id FROM _n")
    con.register("_e", {"id": np.arange(1, len(sources) + 1), "s": sources + 1, "t": targets + 1})
    con.execute("INSERT INTO edges (id, namespace, source_id, target_id, type, created_at, updated_at) "
                "SELECT id, 'default', s, t, 'LINKED_TO', now(), now() FROM _e")
    if vectors is not None:
        from duckgraph.plugins.duckdb.vector_tables import insert_vectors

        insert_vectors(con, "node_vectors", np.arange(1, n + 1), vectors[1], vectors[1].shape[1], replace=False)
    con.close()
    return labels


def nmi(found: dict[int, int], planted: np.ndarray) -> float:
    """Normalised mutual information (arithmetic mean) of two partitions of the same nodes."""
    nodes = sorted(found)
    a, b = [found[i] for i in nodes], [int(planted[i - 1]) for i in nodes]
    total = len(nodes)
    joint, ca, cb = Counter(zip(a, b)), Counter(a), Counter(b)
    mutual = sum(c / total * math.log(c * total / (ca[x] * cb[y])) for (x, y), c in joint.items())
    entropy = lambda counts: -sum(c / total * math.log(c / total) for c in counts.values())  # noqa: E731
    return 2 * mutual / max(entropy(ca) + entropy(cb), 1e-12)


def nmi_by_level(found: list, planted: np.ndarray) -> dict[int, float]:
    """NMI against the planted clusters of each level's partition (its communities and coarser leaves): the
    hierarchy gives a partition per scale, and the planted clusters are one scale."""
    from duckgraph.core.domain.communities.hierarchy import level_view

    return {level: round(nmi({m: c.id for c in level_view(found, level) for m in c.members}, planted), 4)
            for level in sorted({c.level for c in found})}


class TimedEmbedder(Embedder):
    """Another embedder, with the time and the texts of its `embed_documents` calls counted."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.batch_size = inner, inner.batch_size
        self.seconds, self.texts, self.characters = 0.0, 0, 0

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def dimensions(self) -> int:
        return self.inner.dimensions

    def embed_batch(self, texts):
        return self.inner.embed_batch(texts)

    def embed_documents(self, texts):
        began = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - began
            self.texts += len(texts)
            self.characters += sum(map(len, texts))


def make_embedder(name: str) -> TimedEmbedder:
    if name == "hashing":
        return TimedEmbedder(HashingEmbedder())
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    embedder = SentenceTransformersEmbedder()
    embedder.warm_up()
    return TimedEmbedder(embedder)


def add_relations(path: Path, share: float, cluster: int, seed: int = 7) -> int:
    """Add `share` of the file's relations again (inside a planted cluster), as writes since a build would."""
    import duckdb

    con = duckdb.connect(str(path))
    n, edges, last = con.execute("SELECT (SELECT max(id) FROM nodes), count(*), max(id) FROM edges").fetchone()
    rng = np.random.default_rng(seed)
    count_new = max(1, int(edges * share))
    sources = rng.integers(0, n, count_new)
    targets = np.minimum(sources // cluster * cluster + rng.integers(0, cluster, count_new), n - 1)
    con.register("_e", {"id": np.arange(last + 1, last + count_new + 1), "s": sources + 1, "t": targets + 1})
    con.execute("INSERT INTO edges (id, namespace, source_id, target_id, type, created_at, updated_at) "
                "SELECT id, 'default', s, t, 'LINKED_TO', now(), now() FROM _e")
    con.close()
    return count_new


def measure_build(n: int, cluster: int, workdir: Path, embedder_name: str = "hashing",
                  change: float = 0.01, cache: Path | None = None) -> dict[str, Any]:
    path = workdir / f"build-{n}.duckdb"
    embedder = make_embedder(embedder_name)
    started = time.perf_counter()
    labels = write_planted(path, n, cluster, vectors=(embedder.id, entity_vectors(n, cluster, embedder, cache)))
    log(f"{n}: graph written in {time.perf_counter() - started:.1f} s")
    embedder.seconds, embedder.texts, embedder.characters = 0.0, 0, 0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    marks: list[float] = []
    with KnowledgeBase(DuckDBStore(path), embedder, community_detector=LeidenDetector()) as kb:
        kb.open()
        rss_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        started = time.perf_counter()
        outcome = kb.communities._build("default", lambda done, total, message: marks.append(time.perf_counter()))
        total = time.perf_counter() - started
        found = kb.store.communities("default")
    by_level = nmi_by_level(found, labels)
    phases = np.diff([started, *marks]).tolist()
    embedded = {"embedder": embedder.id, "embed_s": round(embedder.seconds, 2), "texts_embedded": embedder.texts,
                "mean_text_chars": round(embedder.characters / max(embedder.texts, 1)),
                "vectors_derived": getattr(outcome, "vectors_derived", 0)}
    if change:  # a rebuild after `change` of the relations were added: what it embeds again
        added = add_relations(path, change, cluster)
        embedder.seconds, embedder.texts = 0.0, 0
        with KnowledgeBase(DuckDBStore(path), embedder, community_detector=LeidenDetector()) as kb:
            kb.open()
            began = time.perf_counter()
            again = kb.communities._build("default")
            embedded.update(rebuild_added_relations=added, rebuild_s=round(time.perf_counter() - began, 2),
                            rebuild_embed_s=round(embedder.seconds, 2), rebuild_texts_embedded=embedder.texts,
                            rebuild_reports_kept=again.reports_kept, rebuild_communities=again.communities,
                            rebuild_vectors_derived=getattr(again, "vectors_derived", 0))
    return {
        "entities": n, "relations": outcome.relations, "communities": outcome.communities, "levels": outcome.levels,
        "seconds": round(total, 2), "read_s": round(phases[1], 2), "leiden_s": round(phases[2], 2),
        "reports_s": round(phases[3], 2), "store_s": round(phases[4], 2), **embedded,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0),
        "rss_before_mb": round(rss_before, 0), "rss_open_mb": round(rss_open, 0),
        "nmi_by_level": by_level, "nmi_best": max(by_level.values()),
        "leaf_sizes_p50": statistics.median(len(c.members) for c in found if c.leaf),
    }


def measure_search(k: int, workdir: Path, queries: int = 100, cache: Path | None = None) -> dict[str, Any]:
    import anyio

    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    path = workdir / f"search-{k}.duckdb"
    embedder = SentenceTransformersEmbedder()
    embedder.warm_up()
    labels = write_planted(path, k * 10, 10, vectors=(embedder.id, entity_vectors(k * 10, 10, embedder, cache)))
    with KnowledgeBase(DuckDBStore(path), embedder, community_detector=LeidenDetector()) as kb:
        started = time.perf_counter()
        outcome = kb.communities.build("default")
        build_s = time.perf_counter() - started
        rng = random.Random(1)
        wanted = [rng.randrange(int(labels.max()) + 1) for _ in range(queries)]
        members = {c.id: set(c.members) for c in kb.store.communities("default")}
        first_right, local, levels_chosen = 0, [], Counter()
        for cluster in wanted:
            began = time.perf_counter()
            result = kb.communities.global_search(f"everything about {theme_word(cluster)}", "default",
                                                  token_budget=1_000)
            local.append(time.perf_counter() - began)
            first_right += bool(result.reports) and holds_cluster(members[result.reports[0].id], cluster, 10)
            levels_chosen[result.level] += 1
    client = anyio.run(_client_latencies, path, embedder, wanted)
    ms = lambda values, q: round(1000 * float(np.percentile(values, q)), 1)  # noqa: E731
    return {"communities": outcome.communities, "entities": k * 10, "build_with_model_s": round(build_s, 1),
            "levels": outcome.levels,
            "in_process_p50_ms": ms(local, 50), "in_process_p95_ms": ms(local, 95),
            "client_p50_ms": ms(client, 50), "client_p95_ms": ms(client, 95),
            "theme_first_share": first_right / queries, "levels_chosen": dict(levels_chosen)}


def holds_cluster(members: set[int], cluster: int, size: int) -> bool:
    """Whether a community holds most of planted cluster `cluster` (node ids start at 1): it is that cluster's
    community at its level."""
    planted = range(cluster * size + 1, cluster * size + size + 1)
    return 2 * sum(node in members for node in planted) > size


async def _client_latencies(path: Path, embedder: Embedder, wanted: list[int]) -> list[float]:
    from mcp import Client

    from duckgraph.core.bootstrap import bootstrap
    from duckgraph.core.config import load_settings
    from duckgraph.core.mcp.server import build_server

    config = path.with_suffix(".toml")
    config.write_text("", encoding="utf-8")
    services = bootstrap(load_settings(config, env={}, db=str(path), warm_up=False), embedder=embedder)
    seconds = []
    async with Client(build_server(services)) as client:
        await client.call_tool("global_search", {"query": "warm up"})
        for cluster in wanted:
            began = time.perf_counter()
            result = await client.call_tool("global_search", {"query": f"everything about {theme_word(cluster)}",
                                                              "token_budget": 1_000})
            seconds.append(time.perf_counter() - began)
            assert not result.is_error, result.content
    return seconds


def real_graph(path: Path, questions: Path | None = None) -> dict[str, Any]:
    """Build the communities of an existing file with the real model and list its ten largest, coarsest first;
    with `questions` (a folder musique.py reads, whose corpus the file holds), how often global_search's first
    (and top 3) reports hold an entity that a question's supporting passages mention."""
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    embedder = SentenceTransformersEmbedder()
    with KnowledgeBase(DuckDBStore(path), embedder, community_detector=LeidenDetector()) as kb:
        started = time.perf_counter()
        outcome = kb.communities._build("default", lambda d, t, m: log(f"real graph: {m}"))
        seconds = time.perf_counter() - started
        found = kb.store.communities("default")
        answered = questions_found(kb, questions) if questions else {}
    top = sorted((c for c in found if c.level == 0), key=lambda c: -len(c.members))[:10]
    return {"communities": outcome.communities, "levels": outcome.levels, "entities": outcome.entities,
            "relations": outcome.relations, "build_with_model_s": round(seconds, 1),
            "vectors_derived": getattr(outcome, "vectors_derived", 0),
            "texts_embedded": getattr(outcome, "texts_embedded", outcome.reports_written), **answered,
            "largest": [{"size": len(c.members), "title": c.title, "summary": c.summary[:300]} for c in top]}


def questions_found(kb: KnowledgeBase, folder: Path) -> dict[str, Any]:
    """global_search with each question of the set: how often the first report, and any of the first three, is
    of a community holding an entity its supporting passages mention (documents are passages by corpus index)."""
    from musique import load_dataset

    dataset = load_dataset(folder)
    members = {c.id: set(c.members) for c in kb.store.communities("default")}
    first = top3 = 0
    for question in dataset.questions:
        documents = [str(i) for i in question.gold]
        chunks = [c.id for c in kb.store.document_chunks("default", documents)]
        gold = {int(node) for node in kb.store.links((), chunks, "default").chunk_nodes[1]}
        result = kb.communities.global_search(question.text, "default")
        hits = [bool(members[r.id] & gold) for r in result.reports[:3]]
        first += bool(hits) and hits[0]
        top3 += any(hits)
    return {"questions": len(dataset.questions), "first_report_holds_gold": first, "top3_hold_gold": top3}


def report_throughput() -> float:
    """Report texts a second through the real default model (what a build adds per report to embed)."""
    from duckgraph.plugins.sentence_transformers import SentenceTransformersEmbedder

    embedder = SentenceTransformersEmbedder()
    embedder.warm_up()
    texts = [f"{theme_word(i)} {i}, {theme_word(i)} {i + 1} and {theme_word(i)} {i + 2}. 10 entities, mostly Kind1 "
             f"(10). Central: " + "; ".join(f"{theme_word(i)} {i + j} (Kind1)" for j in range(5)) +
             ". Facts: a linked to b; b linked to c." for i in range(512)]
    embedder.embed_documents(texts[:32])
    started = time.perf_counter()
    embedder.embed_documents(texts)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k", help="entity counts of the build runs (\"\": none)")
    parser.add_argument("--cluster", type=int, default=50, help="planted cluster size of the build runs")
    parser.add_argument("--embedder", choices=("hashing", "default"), default="hashing",
                        help="what embeds the reports of the build runs: words hashed (the build's own time) or "
                             "the default model (what a user waits for)")
    parser.add_argument("--search", default="1k,10k", help="community counts of the global_search runs")
    parser.add_argument("--real", type=Path, help="a knowledge base file to build and list (e.g. MuSiQue's)")
    parser.add_argument("--questions", type=Path, help="with --real: the question set folder whose corpus it holds "
                                                       "(e.g. MuSiQue's), to score global_search's reports")
    parser.add_argument("--cache", type=Path, help="a folder keeping the planted entities' vectors by the real "
                                                   "model between runs (100k names take minutes)")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one measurement in this process
    args = parser.parse_args()
    if args.one:
        kind, value = args.one.split(":")
        with tempfile.TemporaryDirectory() as folder:
            result = (measure_build(count(value), args.cluster, Path(folder), args.embedder, cache=args.cache)
                      if kind == "build" else measure_search(count(value), Path(folder), cache=args.cache))
        print(json.dumps(result))
        return
    results: dict[str, Any] = {"builds": [], "searches": []}
    for kind, values in (("build", args.sizes), ("search", args.search)):
        for value in filter(None, values.split(",")):
            log(f"{kind} {value} ...")
            done = subprocess.run([sys.executable, __file__, "--one", f"{kind}:{value}", "--cluster",
                                   str(args.cluster), "--embedder", args.embedder,
                                   *(["--cache", str(args.cache)] if args.cache else [])],
                                  capture_output=True, text=True)
            if done.returncode:
                log(done.stderr[-3_000:])
                continue
            results["builds" if kind == "build" else "searches"].append(json.loads(done.stdout.splitlines()[-1]))
            log(json.dumps(results["builds" if kind == "build" else "searches"][-1]))
    if results["builds"] and args.embedder == "hashing":
        results["report_texts_per_s_real_model"] = round(report_throughput(), 1)
    if args.real:
        results["real"] = real_graph(args.real, args.questions)
    print(json.dumps(results, indent=2, ensure_ascii=False))
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
