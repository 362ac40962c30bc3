"""The keyword index: how the store's own BM25 index compares with the libraries that could hold it, and what it
costs inside the store.

Part "libraries": the texts of generated entities (name, type, description, observations) and of their relations
(the fact sentences), 10k / 100k entities and 5 relations each (`_data.py`), indexed by
- the store's index (plugins/duckdb/mirror/keywords.py: numpy postings, updated in place),
- bm25s (static: a change means building it again),
- tantivy (Rust engine; in memory here; a change is delete + add + commit + reload),
- DuckDB's fts extension (an index built by a PRAGMA; a change means building it again),
all fed the same words (`duckgraph.ports.tokens`). For each: build seconds, memory (the process's resident
growth; the store's index also its own count), query p50 / p95 (generated questions, top 10) and the cost of
changing one row so that the next query sees it. Libraries that are not installed are skipped; `--libs DIR` adds
a folder (a `pip install --target DIR bm25s tantivy duckdb-extension-fts`) to the end of the import path.

Part "store": a DuckDB store with the same graph (and one passage per 5 entities, no vectors) written through
`GraphStore.write`, then reopened: open seconds, the index as `health()` reports it, `keyword_search` p50 per
kind, and a write of one entity followed by the search that finds it.

    python contrib/bench/keywords.py [--sizes 10000 100000] [--parts libraries store] [--libs /tmp/kw/libs]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import entities, entity_text, passages, questions, relation_text, relations  # noqa: E402

from duckgraph.plugins.duckdb.keyword_texts import Rows  # noqa: E402
from duckgraph.plugins.duckdb.mirror.keywords import KeywordIndex  # noqa: E402
from duckgraph.ports import tokens  # noqa: E402

QUERIES = 200
UPDATES = 50


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"{statistics.median(ordered) * 1e3:.3f} / {ordered[int(0.95 * (len(ordered) - 1))] * 1e3:.3f} ms"


def timed(run, items) -> list[float]:
    samples = []
    for item in items:
        start = time.perf_counter()
        run(item)
        samples.append(time.perf_counter() - start)
    return samples


# -- candidates: each builds from (ids, words), answers a query's words, and replaces one row -------------------


class Ours:
    name = "store index (numpy, in place)"

    def build(self, ids, words):
        self.index = KeywordIndex()
        self.index.build({"node": [Rows.of_lists(ids, ["default"] * len(ids), words)]})

    def search(self, query):
        return self.index.search("node", query, 10, "default")

    def replace(self, row, words):
        self.index.replace("node", [row], Rows.of_lists([row], ["default"], [words]))

    def own_mb(self):
        return self.index.sizes()["megabytes"]


class Bm25s:
    name = "bm25s (static)"

    def __init__(self):
        import bm25s

        self.bm25s = bm25s

    def build(self, ids, words):
        self.words = list(words)
        self.model = self.bm25s.BM25(k1=1.2, b=0.75)
        self.model.index(self.words, show_progress=False)
        self.vocab = self.model.vocab_dict

    def search(self, query):
        known = [w for w in query if w in self.vocab]
        if not known:
            return []
        docs, scores = self.model.retrieve([known], k=10, show_progress=False, n_threads=1)
        return list(zip(docs[0].tolist(), scores[0].tolist()))

    def replace(self, row, words):
        self.words[row] = words
        self.build(None, self.words)


class Tantivy:
    name = "tantivy (in memory)"

    def __init__(self):
        import tantivy

        self.tantivy = tantivy

    def build(self, ids, words):
        builder = self.tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("ns", tokenizer_name="raw")
        builder.add_text_field("words", tokenizer_name="whitespace")
        self.schema = builder.build()
        self.index = self.tantivy.Index(self.schema)
        writer = self.index.writer(heap_size=200_000_000, num_threads=1)
        for row, row_words in zip(ids, words):
            writer.add_document(self.tantivy.Document(id=row, ns="default", words=" ".join(row_words)))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, query):
        terms = [self.tantivy.Query.term_query(self.schema, "words", w) for w in dict.fromkeys(query)]
        if not terms:
            return []
        occur = self.tantivy.Occur
        words = self.tantivy.Query.boolean_query([(occur.Should, t) for t in terms])
        namespace = self.tantivy.Query.term_query(self.schema, "ns", "default")
        query = self.tantivy.Query.boolean_query([(occur.Must, words), (occur.Must, namespace)])
        return [(self.searcher.doc(address)["id"][0], score)
                for score, address in self.searcher.search(query, 10).hits]

    def replace(self, row, words):
        writer = self.index.writer(heap_size=50_000_000, num_threads=1)
        writer.delete_documents_by_term("id", row)
        writer.add_document(self.tantivy.Document(id=row, ns="default", words=" ".join(words)))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()


class DuckdbFts:
    name = "DuckDB fts (PRAGMA index)"

    def __init__(self):
        import duckdb
        import duckdb_extension_fts

        self.con = duckdb.connect()
        extension = next(Path(duckdb_extension_fts.__file__).parent.rglob("fts.duckdb_extension"))
        self.con.execute(f"LOAD '{extension}'")

    def build(self, ids, words):
        self.con.execute("CREATE OR REPLACE TABLE docs (id BIGINT, ns VARCHAR, words VARCHAR)")
        self._bulk(ids, words)
        self._index()

    def _bulk(self, ids, words):
        import pyarrow as pa

        table = pa.table({"id": pa.array(ids, pa.int64()), "ns": pa.array(["default"] * len(ids)),
                          "words": pa.array([" ".join(w) for w in words])})
        self.con.register("arrow_rows", table)
        self.con.execute("INSERT INTO docs SELECT * FROM arrow_rows")
        self.con.unregister("arrow_rows")

    def _index(self):
        self.con.execute("PRAGMA create_fts_index('docs', 'id', 'words', stemmer='none', stopwords='none', "
                         "ignore='', strip_accents=0, lower=0, overwrite=1)")

    def search(self, query):
        return self.con.execute(
            "SELECT id, s FROM (SELECT id, fts_main_docs.match_bm25(id, ?, k := 1.2, b := 0.75) AS s FROM docs "
            "WHERE ns = 'default') WHERE s IS NOT NULL ORDER BY s DESC LIMIT 10", [" ".join(query)]).fetchall()

    def replace(self, row, words):
        self.con.execute("UPDATE docs SET words = ? WHERE id = ?", [" ".join(words), row])
        self._index()


CANDIDATES = {"ours": Ours, "bm25s": Bm25s, "tantivy": Tantivy, "fts": DuckdbFts}


def corpora(n: int):
    ents, rels = entities(n), relations(n)
    return {"entities": [tokens(entity_text(e)) for e in ents],
            "relations": [tokens(relation_text(r)) for r in rels]}, [tokens(q) for q in questions(ents, QUERIES)]


def libraries(n: int, names: list[str]) -> None:
    texts, queries = corpora(n)
    for corpus, words in texts.items():
        ids = list(range(len(words)))
        print(f"\n{n:,} entities: {corpus}, {len(words):,} rows, {sum(map(len, words)):,} words")
        for name in names:
            try:
                candidate = CANDIDATES[name]()
            except ImportError as exc:
                print(f"  {name}: not installed ({exc.name})")
                continue
            gc.collect()
            before = rss_mb()
            start = time.perf_counter()
            candidate.build(ids, words)
            build = time.perf_counter() - start
            grown = rss_mb() - before
            own = f", own count {candidate.own_mb():.1f} MB" if hasattr(candidate, "own_mb") else ""
            candidate.search(queries[0])  # warm
            slow = name in ("bm25s", "fts")  # each change builds the whole index again: a few are enough
            query = percentiles(timed(candidate.search, queries[:20] if name == "fts" else queries))
            rows = list(range(0, len(words), max(1, len(words) // UPDATES)))[:UPDATES]
            changes = timed(lambda row: (candidate.replace(row, words[row][::-1]), candidate.search(words[row][:3])),
                            rows[:3] if slow else rows)
            print(f"  {candidate.name:32s} build {build:7.2f} s, resident +{grown:7.1f} MB{own}; query p50/p95 {query};"
                  f" change one row + query {statistics.median(changes) * 1e3:9.2f} ms")
            del candidate
            gc.collect()


def store(n: int) -> None:
    from duckgraph.plugins.duckdb.store import DuckDBStore
    from duckgraph.ports import ChunkRecord, DocumentRecord, EdgeWrite, NodeRecord, WriteBatch, entity_key

    ents, rels = entities(n), relations(n)
    docs = passages(rels)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "keywords.db"
        db = DuckDBStore(path)
        db.open()
        start = time.perf_counter()
        step = 5_000
        for first in range(0, n, step):
            batch = WriteBatch(nodes=[
                NodeRecord(namespace="default", key=entity_key(e["name"]), name=e["name"], type=e["type"],
                           description=e["description"], observations=tuple(e["observations"]))
                for e in ents[first:first + step]])
            db.write(batch)
        for first in range(0, len(rels), 5 * step):
            db.write(WriteBatch(edges=[
                EdgeWrite(namespace="default", source_key=entity_key(r["source"]), target_key=entity_key(r["target"]),
                          type=r["type"].upper()) for r in rels[first:first + 5 * step]]))
        for first in range(0, len(docs), step):
            group = [docs[g] for g in range(first, min(first + step, len(docs)))]
            db.write(WriteBatch(documents=[DocumentRecord(id=d["id"], namespace="default", text=d["text"],
                                                          title=d["title"]) for d in group],
                                chunks=[ChunkRecord(d["id"], 0, d["text"]) for d in group]))
        loaded = time.perf_counter() - start
        db.close()
        gc.collect()
        before = rss_mb()
        start = time.perf_counter()
        db = DuckDBStore(path)
        db.open()
        opened = time.perf_counter() - start
        health = db.health()
        print(f"\nstore at {n:,} entities, {len(rels):,} relations, {len(docs):,} passages (written in {loaded:.1f} s):"
              f" open {opened:.2f} s (resident +{rss_mb() - before:.0f} MB), keyword index: {health['keyword_index']}")
        asked = questions(ents, QUERIES, seed=1)
        for kind in ("node", "edge", "chunk"):
            db.keyword_search(kind, asked[0], 10, "default")
            print(f"  keyword_search {kind:5s} p50/p95 "
                  f"{percentiles(timed(lambda q: db.keyword_search(kind, q, 10, 'default'), asked))}")
        writes = []
        for i in range(20):
            name = f"Orders-DB replica {i} INC-{1000 + i}"
            start = time.perf_counter()
            db.write(WriteBatch(nodes=[NodeRecord(namespace="default", key=entity_key(name), name=name, type="Service",
                                                  observations=(f"Paged on call for v2.{i}",))]))
            written = time.perf_counter() - start
            [(found, _)] = db.keyword_search("node", f"INC-{1000 + i}", 1, "default")
            assert db.get_nodes([found])[0].name == name
            writes.append(written)
        print(f"  a write of one entity, then found by its id: write p50 {statistics.median(writes) * 1e3:.1f} ms")
        from duckgraph.plugins.duckdb import keyword_texts

        def refresh(row: int) -> None:  # the keyword index's share of a write: read the row's words, replace them
            db._keywords.replace("node", [row], keyword_texts.rows_of(db._con, db._graph, "node", [row]))

        shares = timed(refresh, range(1, 200, 10))
        print(f"  of which the keyword index (read one entity's words, replace them) p50 "
              f"{statistics.median(shares) * 1e3:.2f} ms")
        for kind, index in db._keywords.kinds.items():  # what the write path pays now and then
            start = time.perf_counter()
            index.compact()
            print(f"  rebuilding the {kind} postings from memory (after 10% of rows changed): "
                  f"{time.perf_counter() - start:.2f} s")
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--parts", nargs="+", default=["libraries", "store"], choices=["libraries", "store"])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=list(CANDIDATES))
    parser.add_argument("--libs", help="a folder of optional libraries, added to the end of the import path")
    args = parser.parse_args()
    if args.libs:
        sys.path.append(args.libs)
    for n in args.sizes:
        if "libraries" in args.parts:
            libraries(n, args.candidates)
        if "store" in args.parts:
            store(n)


if __name__ == "__main__":
    main()
