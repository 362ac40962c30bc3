"""The store port: where nodes, edges, documents, chunks and their vectors live."""

from __future__ import annotations

import os
import re
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from duckgraph.ports.communities import CommunityBuild, CommunityRecord

    import numpy as np

from duckgraph.ports.errors import StoreError
from duckgraph.ports.records import (
    ChangeRecord,
    ChunkRecord,
    DocumentRecord,
    EdgeRecord,
    Links,
    NodeRecord,
    Snapshot,
    VectorKind,
    WriteBatch,
    WriteSummary,
    link_counts,
)


#: Bytes 8-11 of every DuckDB database file, the default store's. Defined in the contract, which both may import,
#: so that the store (plugins/duckdb/connection.py) and the commands' path checks (core/files/paths.py), which
#: must not import each other, recognise a database file alike.
DUCKDB_MAGIC = b"DUCK"


def is_duckdb_header(head: bytes) -> bool:
    """Whether `head`, the first bytes of a file (12 at least), are those of a DuckDB database file."""
    return head[8:12] == DUCKDB_MAGIC


#: What a path that is neither a regular file nor a folder is, by its stat mode.
_SPECIAL_FILES = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def special_file(mode: int) -> str | None:
    """What a stat mode says a path is when it is neither a regular file nor a folder ("a character device", as
    /dev/null is), or None: such a path is never a memory, and is never renamed over (that would replace the
    device or pipe itself)."""
    return next((what for test, what in _SPECIAL_FILES if test(mode)), None)


def duckgraph_command(pid: int) -> str | None:
    """The duckgraph command process `pid` runs ("ingest", "serve"; "" for none), read from its command line, or
    None when it is not duckgraph or its command line cannot be read (only Linux has /proc): what a refusal of a
    file in use names."""
    try:
        argv = [os.fsdecode(arg) for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if arg]
    except OSError:
        return None
    for i, arg in enumerate(argv[:3]):  # the script, alone or after its interpreter, or python -m
        if Path(arg).name == "duckgraph" or arg == "duckgraph.core.cli":
            return next((later for later in argv[i + 1:] if not later.startswith("-")), "")
    return None


class GraphStore(ABC):
    """A knowledge graph with vectors. Implementations must be safe to call from several threads.

    Construction must be cheap; `open` does the work (files, extensions, indexes).

    An adapter implements the abstract methods. The others are helpers built on them (a record form of a lean
    read, a lean form of a record read, a batch of searches); a store may override one to answer faster, with the
    same result (tests/contract/test_store_contract.py checks both).
    """

    @abstractmethod
    def open(self) -> None:
        """Open or create the database. Raises StoreError with the reason when it cannot."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the database. Safe to call twice."""

    # -- embedder binding ------------------------------------------------------------------------------

    @abstractmethod
    def embedder_info(self) -> tuple[str, int] | None:
        """The (embedder id, dimensions) the file was built with, or None for a fresh file."""

    @abstractmethod
    def bind_embedder(self, embedder_id: str, dimensions: int) -> None:
        """Record the embedder of a fresh file, or of one that holds no vectors yet (a first write that failed after
        binding it must not tie it to an embedder that never worked); raise EmbedderMismatchError if the file holds
        vectors of another."""

    # -- writes ----------------------------------------------------------------------------------------

    @abstractmethod
    def write(self, batch: WriteBatch) -> WriteSummary:
        """Apply a batch atomically.

        Nodes with an `id` replace that node; nodes without one are inserted. Edges are upserted on
        (namespace, source, target, type) among edges that still hold. Documents replace documents with the
        same id together with their chunks.
        """

    # -- reads -----------------------------------------------------------------------------------------

    @abstractmethod
    def find_nodes(self, namespace: str, keys: Iterable[str]) -> list[NodeRecord]:
        """Nodes whose key, one of whose alias keys, or the `loose_key` of either is in `keys` (no embeddings).

        Callers that need exact matches compare the returned records' keys and aliases themselves.
        """

    @abstractmethod
    def get_nodes(self, ids: Iterable[int]) -> list[NodeRecord]:
        """Nodes by id (without embeddings); unknown ids are skipped."""

    @abstractmethod
    def list_nodes(self, namespace: str, *, offset: int = 0, limit: int = 100) -> list[NodeRecord]:
        """A page of nodes in id order (without embeddings)."""

    @abstractmethod
    def get_observations(self, node_ids: Iterable[int]) -> dict[int, list[str]]:
        """Observations of the given nodes, oldest first; nodes without any are left out."""

    @abstractmethod
    def nodes_containing(self, namespace: str, text: str, *, limit: int = 1_000) -> list[int]:
        """Ids, in id order, of the nodes whose name, type or one of whose observations contains `text`, ignoring
        case and accents (both sides read through `ports.names.unaccented`: the reference memory server's search_nodes
        match, made to find "Łukasz" by "Lukasz" as names are found); at most `limit`. An empty `text` matches all."""

    @abstractmethod
    def edges_among(
        self, node_ids: Sequence[int], namespace: str, *, include_expired: bool = False
    ) -> list[EdgeRecord]:
        """Edges that still hold (with `include_expired`, all edges) and have both ends among `node_ids`."""

    @abstractmethod
    def list_edges(
        self, namespace: str, *, offset: int = 0, limit: int = 100, include_expired: bool = False
    ) -> list[EdgeRecord]:
        """A page of edges that still hold (with `include_expired`, all edges), in id order."""

    @abstractmethod
    def edges_from(self, node_ids: Iterable[int], namespace: str, *, limit: int = 1000) -> list[EdgeRecord]:
        """Edges that hold now and start at one of `node_ids` (whatever comes in to them is left out), by source
        id then id, at most `limit`: read_graph's relations of a page, which must not be crowded out by a hub's
        incoming edges as `neighbors` (strongest first, either direction) would let them be."""

    @abstractmethod
    def get_documents(self, ids: Iterable[str], namespace: str) -> list[DocumentRecord]:
        """Documents by id; unknown ids are skipped."""

    @abstractmethod
    def get_chunks(self, ids: Iterable[int]) -> list[ChunkRecord]:
        """Chunks by id (without embeddings); unknown ids are skipped."""

    def chunk_documents(self, ids: Iterable[int]) -> dict[int, str]:
        """The document id of each known chunk of `ids`. Searches ask it for dozens of candidates before they read
        a few texts; stores that hold this mapping in memory should answer it without a query."""
        return {c.id: c.document_id for c in self.get_chunks(ids)}

    def edge_types(self, ids: Iterable[int]) -> dict[int, str]:
        """The type of each known edge of `ids`. Search reads those of the facts it ranks (a thousand a search on
        a graph with hubs): a store that holds edge types in memory should answer it without building records."""
        return {e.id: e.type for e in self.get_edges(ids)}

    def adjacent_chunks(self, ids: Iterable[int], namespace: str) -> dict[int, tuple[int | None, int | None]]:
        """For each known chunk of `ids` in `namespace`, the chunks just before and after it in reading order
        (None where there is none): the chunks stored just before and after it when they go on with its text
        (`reads_on`), the text a passage was cut from or the turns of a conversation around one. Searches ask it for
        a few passages; stores that hold chunk ordinals in memory should answer it without a query. This default
        takes a store's chunk ids to follow the order they were stored in (a document's chunks at once, in order);
        a store whose ids do not should override it."""
        ids = list(ids)
        near = self.get_chunks([*ids, *(i + step for i in ids for step in (-1, 1))])
        documents = {c.document_id for c in near}
        here = {c.id: c for c in self.document_chunks(namespace, documents)}  # the namespace's own only
        titles = self.document_titles(documents, namespace)
        times = self.chunk_times(list(here), namespace)

        def place(chunk_id: int) -> tuple[str, int, str, datetime | None] | None:
            chunk = here.get(chunk_id)
            return None if chunk is None else (chunk.document_id, chunk.ordinal, titles.get(chunk.document_id, ""),
                                               times.get(chunk_id))

        return {i: (i - 1 if reads_on(place(i - 1), place(i)) else None, i + 1 if reads_on(place(i), place(i + 1))
                    else None) for i in ids if i in here}

    def chunk_times(self, ids: Iterable[int], namespace: str) -> dict[int, datetime]:
        """The time of each known chunk's document, for those whose document has one (a search's window and
        its passages' dates)."""
        documents = self.chunk_documents(ids)
        times = {d.id: d.time for d in self.get_documents(set(documents.values()), namespace) if d.time is not None}
        return {chunk_id: times[doc] for chunk_id, doc in documents.items() if doc in times}

    def timed_chunks(self, namespace: str, after: datetime | None, before: datetime | None) -> np.ndarray:
        """The chunks (sorted int64 ids) of `namespace` whose document's time lies in [after, before) (None:
        unbounded): the passages a search's time window may show, compared with the query among themselves. This
        default reads every document of the namespace; a store holding document times in memory should answer it
        without a query."""
        import numpy as np  # see similarities

        documents, page = [], 1000
        while batch := self.list_documents(namespace, offset=len(documents), limit=page):
            documents += batch
        wanted = [d.id for d in documents if d.time is not None and (after is None or d.time >= after)
                  and (before is None or d.time < before)]
        return np.unique(np.asarray([c.id for c in self.document_chunks(namespace, wanted)], dtype=np.int64))

    @abstractmethod
    def changes(self, namespace: str, since: datetime | None, until: datetime | None, limit: int) -> list[ChangeRecord]:
        """What writes did in [since, until) (naive UTC; None: unbounded), newest first, at most `limit`: entities
        created, entities updated (last update), observations added to stored entities, edges added, edges ended
        (when the end was written), documents stored; and what they deleted (entities, facts, observations,
        documents, a merge's sources) or replaced (a document's text, properties' values), recorded when it was
        written: see `ChangeRecord`."""

    def document_titles(self, ids: Iterable[str], namespace: str) -> dict[str, str]:
        """The title of each known document of `ids` ("" for none), for a search's passages."""
        return {d.id: d.title or "" for d in self.get_documents(ids, namespace)}

    @abstractmethod
    def document_chunks(self, namespace: str, document_ids: Iterable[str]) -> list[ChunkRecord]:
        """The chunks of the given documents (without embeddings), in document order."""

    def document_chunk_window(self, namespace: str, document_id: str, start: int, stop: int
                              ) -> tuple[list[ChunkRecord], int]:
        """The chunks of one document whose ordinals lie in [start, stop), in document order (without embeddings),
        and how many chunks the document has (0: none, or no such document): a few passages of a long document
        read where a search found one. This default reads all of its chunks; a store should read only those."""
        chunks = self.document_chunks(namespace, [document_id])
        return [c for c in chunks if start <= c.ordinal < stop], len(chunks)

    @abstractmethod
    def neighbor_ends(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None, limit: int = 1000
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The edges touching any of `node_ids`, in either direction, valid at `as_of` (None: now; a `TimeFilter`
        for more than a moment, as every `as_of` below), at
        most `limit` of them, the strongest (then the lowest id) first: arrays of their ids, source ids, target ids
        (int64) and weights (float64), aligned. Walks need no more of an edge until it is kept (then `get_edges`)."""

    def neighbors(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None, limit: int = 1000,
        offset: int = 0,
    ) -> list[EdgeRecord]:
        """The edges of `neighbor_ends` as records, in its order, the first `offset` of them skipped."""
        edge_ids = self.neighbor_ends(node_ids, namespace, as_of=as_of, limit=offset + limit)[0].tolist()[offset:]
        records = {e.id: e for e in self.get_edges(edge_ids)}
        return [records[i] for i in edge_ids if i in records]

    @abstractmethod
    def mentioned_chunks(self, chunk_ids: Iterable[int]) -> set[int]:
        """Those of the given chunks that already have entities linked to them."""

    def extracted_chunks(self, chunk_ids: Iterable[int]) -> set[int]:
        """Those of the given chunks that were read for their graph, whatever was found (`extraction_marks`):
        an extracting ingest skips them."""
        return set(self.extraction_marks(chunk_ids))

    @abstractmethod
    def extraction_marks(self, chunk_ids: Iterable[int]) -> dict[int, str]:
        """Chunk id -> who read it for its graph, of those of the given chunks that were: the extractor's id
        (`mark_extracted`), "host" when a write with `source_ids` linked entities or relations to it (the host LLM
        read it; provenance a replacement moves to new passages, `WriteBatch.keep_named`, marks nothing), or
        "before-marks" when it had entities linked to it before passages were marked."""

    @abstractmethod
    def mark_extracted(self, chunk_ids: Iterable[int], extractor_id: str) -> None:
        """Record that the extractor `extractor_id` read these chunks, in one transaction; chunks no longer stored
        (replaced or deleted since) are passed over. Called under `KnowledgeBase.writing()`."""

    @abstractmethod
    def chunks_mentioning(self, node_ids: Sequence[int], *, limit: int = 1000) -> list[tuple[int, int]]:
        """(chunk id, node id) provenance pairs for the given nodes."""

    @abstractmethod
    def links(
        self, node_ids: Sequence[int], chunk_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None
    ) -> Links:
        """Every neighbour and mentioning chunk of `node_ids` and every node mentioned by `chunk_ids`, unlimited,
        as pairs (see `Links`).

        Neighbours are joined by edges valid at `as_of` (None: still holding); ids that are unknown or have no
        links appear in no pair.
        """

    def passage_links(
        self, node_ids: Sequence[int], namespace: str, *, as_of: datetime | None = None
    ) -> tuple[np.ndarray, tuple[Sequence[int], Sequence[int]]]:
        """What the last step of a walk needs, which moves weight into passages only: the degree of each of the
        (distinct) `node_ids` as `links` counts it (its neighbour links plus its mentioning chunks), in their
        order, and their (node, chunk) pairs. The default counts what `links` returns; a store that keeps the
        degrees answers without listing a hub's thousands of neighbours."""
        links = self.links(node_ids, (), namespace, as_of=as_of)
        return link_counts(node_ids, links.node_neighbors[0], links.node_chunks[0]), links.node_chunks

    @abstractmethod
    def get_edges(self, ids: Iterable[int]) -> list[EdgeRecord]:
        """Edges by id, expired ones included; unknown ids are skipped."""

    @abstractmethod
    def vector_search(
        self, kind: VectorKind, query: np.ndarray, k: int, namespace: str
    ) -> list[tuple[int, float]]:
        """The `k` nearest (id, cosine similarity) pairs, best first."""

    def vector_search_batch(
        self, kind: VectorKind, queries: np.ndarray, k: int, namespace: str
    ) -> list[list[tuple[int, float]]]:
        """`vector_search` of each row of `queries` (an n x d array), in their order. This default searches one
        query at a time; a store that can score many queries in one pass should override it."""
        return [self.vector_search(kind, query, k, namespace) for query in queries]

    @abstractmethod
    def keyword_search(self, kind: VectorKind, query: str, k: int, namespace: str) -> list[tuple[int, float]]:
        """The `k` rows of `kind` in `namespace` that best match the words of `query`, as (id, Okapi BM25 score)
        pairs, best first (ties: lowest id first); only rows holding at least one of the query's words.

        Words are the terms of `duckgraph.ports.terms` (case-folded, accents dropped, English stop words left out,
        stemmed: "painting" matches "painted"; an id such as "INC-142" or "orders-db" is a term of its own besides its
        parts, kept as written). BM25 with k1 = 1.2 and b = 0.75,
        over the query's distinct words; the document frequencies, row count and average length are those of
        `kind` in `namespace`, so a score is comparable across queries of one namespace and kind, not across kinds.
        Scores are raw (not normalised): a sum over matched words of idf x saturated term frequency, each word
        giving at most about idf x (k1 + 1), so a fusion should rank-combine them or scale by the query's own best.

        What a row's words are: a node's name, aliases, type, description, every observation and its properties'
        string and number values; an edge's fact as `edge_text` writes it ("<source name> <type words> <target
        name>: <description>"; edges that no longer hold are included, as in `vector_search`); a chunk's text
        and its document's title. The index must follow every committed write: a row written by one call is
        found by the next, a deleted one is not, and renaming a node changes the words of its edges.
        """

    def keyword_scores(self, kind: VectorKind, query: str, ids: Sequence[int], namespace: str) -> dict[int, float]:
        """The BM25 score of each of `ids` for `query`, as `keyword_search` scores them; ids holding none of the
        query's terms (or not of `kind` in `namespace`) are left out. Search asks it for the candidates the vectors
        found, so that each is ranked on both channels: a store should answer it without ranking every row that
        holds a query term (this default does, and is slow when a term is common)."""
        wanted = set(ids)
        return {i: s for i, s in self.keyword_search(kind, query, 2**31 - 1, namespace) if i in wanted}

    @abstractmethod
    def similarity_array(self, kind: VectorKind, ids: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of `query` to the stored vector of each of `ids` (an int64 array), aligned with it;
        NaN where no vector is stored. Search asks this of thousands of ids per hop: a store holding its vectors
        in memory should answer it without a Python loop."""

    def similarities(self, kind: VectorKind, ids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        """Cosine similarity of `query` to each of the given stored vectors; ids without one are left out."""
        import numpy as np  # numpy is only needed once vectors are compared

        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        found = self.similarity_array(kind, ids, query)
        stored = ~np.isnan(found)
        return dict(zip(ids[stored].tolist(), found[stored].tolist()))

    @abstractmethod
    def stats(self, namespace: str | None = None) -> dict[str, Any]:
        """Counts of nodes, edges, documents and chunks, and the types in use with their counts, most common first:
        every node type as stored (each spelling apart), the 50 most common edge types."""

    @abstractmethod
    def relation_counts(self, at: datetime) -> dict[str, int]:
        """Every relation stored, of every namespace, ended ones included: ``{"edges", "edges_ended"}``, the second
        those of them that had ended by `at` (their history). `stats` counts only those that hold, so a copy that
        lost history would pass a check of its counts: a backup, restore or compact checks and reports these."""

    @abstractmethod
    def type_examples(self, namespace: str, *, limit: int | None = 50) -> dict[str, list[dict[str, Any]]]:
        """The node and edge types in use (edges that still hold), most common first (ties by type), at most `limit`
        of each (None: every one), each spelling as stored.

        ``{"node_types": [{"type", "count", "example"}], "edge_types": [{"type", "count", "example"}]}``: a
        node example is an entity name, an edge example ``{"source", "target"}`` names.
        """

    def most_connected(self, namespace: str, *, limit: int = 20) -> list[tuple[int, int]]:
        """The `limit` nodes of `namespace` with the most edges that still hold (either direction), as (node id,
        edge count) pairs, most first (ties: lowest id first). This default reads every edge; a store should
        answer it with one query."""
        from collections import Counter

        counts: Counter[int] = Counter()
        offset = 0
        while page := self.list_edges(namespace, offset=offset, limit=10_000):
            counts.update(i for e in page for i in (e.source_id, e.target_id))
            offset += len(page)
        return sorted(counts.items(), key=lambda pair: (-pair[1], pair[0]))[:limit]

    def types_held_many(self, namespace: str, types: Iterable[str]) -> set[str]:
        """Of the edge `types`, those some node of `namespace` holds now to two or more other nodes: types the
        memory shows to have many ends (HAS_CHILD, SPEAKS). This default reads every edge; a store should answer it
        with one query."""
        wanted = set(types)
        ends: dict[tuple[int, str], set[int]] = {}
        offset = 0
        while page := self.list_edges(namespace, offset=offset, limit=10_000):
            for edge in page:
                if edge.type in wanted:
                    ends.setdefault((edge.source_id, edge.type), set()).add(edge.target_id)
            offset += len(page)
        return {kind for (_, kind), targets in ends.items() if len(targets) > 1}

    # -- bulk reads and restore (export and import) ------------------------------------------------------

    @abstractmethod
    def namespaces(self) -> list[str]:
        """Every namespace that holds a node, an edge or a document, sorted."""

    def namespace_summaries(self) -> list[dict[str, Any]]:
        """Per namespace (sorted): ``{"namespace", "nodes", "edges" (that still hold), "documents", "last_write"}``,
        the last a naive UTC datetime of its newest row or deletion (None when unknown). A store that keeps a log
        of deletions lists a namespace that holds only that log too, with zero counts."""
        summaries = []
        for namespace in self.namespaces():
            stats = self.stats(namespace)
            summaries.append({"namespace": namespace, "nodes": stats["nodes"], "edges": stats["edges"],
                              "documents": stats["documents"], "last_write": None})
        return summaries

    @abstractmethod
    def list_documents(self, namespace: str, *, offset: int = 0, limit: int = 100) -> list[DocumentRecord]:
        """A page of documents in the order they were stored (their chunks' ids; those without chunks last, by
        id), with `created_at`: an export written in this order keeps a conversation's turns in order."""

    @abstractmethod
    def edge_evidence(self, edge_ids: Iterable[int]) -> list[tuple[int, int]]:
        """(edge id, chunk id) provenance pairs for the given edges."""

    def written_by_hand(self, kind: Literal["node", "edge"], ids: Iterable[int]) -> set[int]:
        """Those of the nodes or edges `ids` ever written by hand (`NodeRecord.by_hand`), for an export to keep.
        A store that keeps no such marks (and so deletes what only deleted documents support) has none."""
        return set()

    @abstractmethod
    def get_vectors(self, kind: VectorKind, ids: Iterable[int]) -> dict[int, np.ndarray]:
        """Stored vectors by id; ids without a vector are left out."""

    @abstractmethod
    def restore_stream(self) -> AbstractContextManager[Callable[[Snapshot], WriteSummary]]:
        """Restore in several snapshots and ONE transaction, for a file too large to hold at once:
        `with store.restore_stream() as restore: restore(a); restore(b)` writes each snapshot as `restore` does
        and commits them all when the block ends; an error anywhere in the block (in a `restore` call or between
        two) rolls every one of them back. A snapshot may name the rows of earlier ones of the block (the ends of
        an edge, the chunk of a mention): they are visible to it. Until the block has committed, what the store's
        other reads return of the block's snapshots is not specified (some read the file, some what was committed):
        the caller keeps what it needs of earlier snapshots (their keys) itself.
        """

    @abstractmethod
    def restore(self, snapshot: Snapshot) -> WriteSummary:
        """Store the snapshot's rows exactly as given (see `Snapshot`), in one transaction: all or nothing.

        Restoring the same snapshot twice changes nothing the second time. Mentions and evidence must name
        chunks and nodes or edges that exist once the snapshot's rows are stored (InvalidInputError otherwise).
        """

    @abstractmethod
    def health(self) -> dict[str, Any]:
        """What `duckgraph doctor` shows: file, schema version, extensions, vector search mode and why."""

    # -- backup ----------------------------------------------------------------------------------------

    def backup(self, destination: Path) -> None:
        """Write a consistent copy of the whole open store to `destination`, a path that does not exist yet.

        The copy is what the store held at one moment (no write of another thread is half in it) and opens
        directly as a store of the same kind, with the same rows and vectors. It may be taken while the store is
        in use; writes wait until it is done. On failure the store deletes whatever it wrote to `destination`
        and raises StoreError. Choosing a temporary name, refusing to overwrite and renaming into place are the
        caller's job (`KnowledgeBase.backup`).

        The default refuses: a store that cannot copy itself says so instead of writing something partial.
        """
        raise StoreError(
            f"the {type(self).__name__} store cannot make backups; use `duckgraph export` to save its contents"
        )

    # -- communities (derived data, see ports/communities.py); a store without them refuses ---------------

    def _no_communities(self) -> StoreError:
        return StoreError(f"the {type(self).__name__} store does not keep communities")

    def edge_arrays(self, namespace: str, at: datetime) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Ids, source ids, target ids (int64) and weights (float64) of the namespace's edges valid at `at`."""
        raise self._no_communities()

    def replace_communities(self, namespace: str, communities: Sequence[CommunityRecord],
                            build: CommunityBuild) -> None:
        """Replace the namespace's communities (ids are given to the records; parents by `parent_ref`) and record
        the build, in one transaction. Called through `KnowledgeBase.writing()` only."""
        raise self._no_communities()

    def save_reports(self, communities: Sequence[CommunityRecord]) -> None:
        """Store the reports (title, summary, details, author, stale, embedding) of existing communities, in one
        transaction; StoreError naming an id that no longer exists. Called through `KnowledgeBase.writing()`."""
        raise self._no_communities()

    def communities(self, namespace: str, ids: Sequence[int] | None = None, *, members: bool = True,
                    vectors: bool = False) -> list[CommunityRecord]:
        """The namespace's communities (or those of `ids`), coarsest level first."""
        raise self._no_communities()

    def community_build(self, namespace: str) -> CommunityBuild | None:
        """The namespace's last build, None before the first."""
        raise self._no_communities()

    def changed_since_build(self, namespace: str, since: datetime, now: datetime) -> int:
        """Nodes and edges written since `since`, edges whose period began or ended since, by `now` (an end still
        to come is no change yet), plus members and relations deleted since the build."""
        raise self._no_communities()

    def periods_passed(self, namespace: str, since: datetime, until: datetime, limit: int) -> dict[int, datetime]:
        """Edge id -> when its period last began or ended after `since` and by `until`, at most `limit` edges:
        facts that time, not a write, made start or stop holding."""
        raise self._no_communities()

    def next_period_boundary(self, namespace: str, after: datetime) -> datetime | None:
        """The first start or end of an edge's period after `after` (None: none is to come): until then, what
        holds changes only by a write."""
        raise self._no_communities()

    def node_communities(self, node_ids: Sequence[int], namespace: str) -> dict[int, list[tuple[int, int, str]]]:
        """Node id -> its communities as (id, level, title), coarsest first."""
        raise self._no_communities()

    def search_reports(self, namespace: str, vector: np.ndarray, query: str, candidates: Sequence[int]
                       ) -> tuple[dict[int, float], dict[int, float]]:
        """For the communities of `candidates`: the cosine similarity of their report vectors to `vector`, and the
        BM25 score of their report words for `query` (only those that match)."""
        raise self._no_communities()


#: The longest pause between two turns of one sitting of a conversation kept one turn per document, each timed:
#: a sitting's turns come seconds to minutes apart, and half an hour without one ends a visit as web analytics
#: count them. Documents of one title timed further apart are not one text: an email and another of the same
#: subject days later, a weekly (daily, hourly) meeting's notes, one per meeting.
SITTING_PAUSE = timedelta(minutes=30)


def reads_on(before: tuple[str, int, str, datetime | None] | None,
             after: tuple[str, int, str, datetime | None] | None) -> bool:
    """Whether the chunk `after`, stored just after the chunk `before` (each given as its document's id, its
    ordinal, its document's title and its document's time, None if untimed), goes on with its text: the next chunk
    of the same document, or the first chunk of another document, the next turn of a conversation kept one turn per
    document (of the same title, not empty, and of one sitting: `_one_sitting`), or of the next part of a text
    stored as several documents (`part_title`, whatever their times)."""
    if before is None or after is None:
        return False
    if before[0] == after[0]:
        return after[1] == before[1] + 1
    return bool(before[2]) and after[1] == 0 and (
        (after[2] == before[2] and _one_sitting(before[3], after[3])) or _next_part(before[2], after[2]))


def _one_sitting(before: datetime | None, after: datetime | None) -> bool:
    """Whether documents timed `before` and, stored next, `after` (None: untimed) can be turns of one sitting: both
    untimed (a transcript's turns, as LoCoMo's, dated by their title if at all), or `after` at most SITTING_PAUSE
    past `before` (the same time: turns dated by their session's day). One timed and the other not were not written
    as one conversation's turns are, nor was a turn timed before the one it would follow."""
    if before is None or after is None:
        return before is None and after is None
    return timedelta(0) <= after - before <= SITTING_PAUSE


def part_title(title: str, n: int, parts: int) -> str:
    """The title of part `n` of a text stored as `parts` documents, because it is longer than one may be."""
    return f"{title} (part {n} of {parts})"


_PART_TITLE = re.compile(r"(.*) \(part (\d+) of (\d+)\)")


def _next_part(before: str, after: str) -> bool:
    """Whether `after` is the title of the part of a text that follows the part titled `before`."""
    first, then = _PART_TITLE.fullmatch(before), _PART_TITLE.fullmatch(after)
    return bool(first and then and first[1] == then[1] and first[3] == then[3] and int(then[2]) == int(first[2]) + 1)
