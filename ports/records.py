"""Plain records that cross the store and extractor ports. Validation happens in core before they are built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypedDict

if TYPE_CHECKING:
    import numpy as np

VectorKind = Literal["node", "chunk", "edge"]


@dataclass(slots=True)
class NodeRecord:
    """An entity. `key` is the normalised name, unique within a namespace; `id` is None until stored."""

    namespace: str
    key: str
    name: str
    type: str
    description: str = ""
    aliases: tuple[str, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    embedding: np.ndarray | None = None
    #: Ids of documents this node was learned from (written as provenance, not read back).
    source_ids: tuple[str, ...] = ()
    #: Ids of the exact chunks it was extracted from, when known (written as provenance, not read back).
    source_chunk_ids: tuple[int, ...] = ()
    #: The node's observations (short facts); None leaves the stored ones as they are.
    observations: tuple[str, ...] | None = None
    #: Written without provenance by the caller (or curated: observations added, fields edited): it stays when
    #: documents it was also extracted from are replaced or deleted. Once set it stays set (written, not read back).
    by_hand: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None


#: Edge property holding the relation type as the caller spelt it ("works at"; the edge type is WORKS_AT), kept
#: by the reference memory server's tools (core/domain/memory_server.py): duckgraph's own, not the caller's.
ORIGINAL_TYPE = "relationType"


@dataclass(slots=True)
class EdgeWrite:
    """A relationship to upsert; endpoints are node keys because new nodes have no id yet."""

    namespace: str
    source_key: str
    target_key: str
    type: str
    description: str = ""
    weight: float | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    source_ids: tuple[str, ...] = ()
    source_chunk_ids: tuple[int, ...] = ()
    #: As `NodeRecord.by_hand`: stated without provenance, it stays when its documents go.
    by_hand: bool = False
    #: Vector of the fact as a sentence ("Marie Curie won Nobel Prize in Physics").
    embedding: np.ndarray | None = None
    #: Validity (naive UTC; None: unknown start / still holds). `write` stores the given validity on the matching
    #: edge that has not ended (or a new one; see `GraphStore.write`); `restore` stores all four as given.
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(slots=True, frozen=True)
class EdgeRecord:
    """A stored relationship; `valid_until` None means it still holds."""

    id: int
    source_id: int
    target_id: int
    type: str
    description: str
    weight: float
    properties: dict[str, Any]
    valid_from: datetime | None
    valid_until: datetime | None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(slots=True, frozen=True)
class TimeFilter:
    """Which edges a graph read follows, by validity (times naive UTC), where `as_of` takes more than a moment.

    Valid at `as_of` (None: now), unless a window is given without `as_of`; `history` adds the edges that ended
    before that moment; `after` / `before` keep only edges valid at some moment between them. A plain datetime
    as `as_of` is `TimeFilter(as_of=it)`; None is "valid now".
    """

    as_of: datetime | None = None
    history: bool = False
    after: datetime | None = None
    before: datetime | None = None


@dataclass(slots=True)
class Links:
    """The entity-passage graph around some nodes and chunks: what a walk over it needs, in both directions.

    Each field is a pair of equally long id sequences (lists or numpy arrays), one link per position, in any
    order: a walk moves weight over all of them at once, and the count of an id's links is its degree.
    """

    #: (node, neighbour): each asked node and the other end of each of its edges that hold (at the asked moment),
    #: one pair per edge: two facts joining the same nodes are two links
    node_neighbors: tuple[Sequence[int], Sequence[int]]
    #: (node, chunk): each asked node and the chunks that mention it
    node_chunks: tuple[Sequence[int], Sequence[int]]
    #: (chunk, node): each asked chunk and the nodes it mentions
    chunk_nodes: tuple[Sequence[int], Sequence[int]]


def link_counts(ids: Sequence[int], *owners: Sequence[int]) -> np.ndarray:
    """How many links each of the distinct `ids` owns: how often it occurs in the `owners` arrays (the first
    halves of `Links` pairs, all of them among `ids`), in the order of `ids`."""
    import numpy as np  # numpy is only needed once the graph is walked

    ids = np.asarray(ids, dtype=np.int64)
    values = np.concatenate([np.zeros(0, dtype=np.int64), *(np.asarray(o, dtype=np.int64) for o in owners)])
    counts = np.zeros(len(ids), dtype=np.int64)
    if len(values):
        order = np.argsort(ids, kind="stable")
        counts[order] = np.bincount(np.searchsorted(ids[order], values), minlength=len(ids))
    return counts


#: The span of ids up to which `isin_ids` always uses a table (one byte per id of the span, zeroed per call).
TABLE_SPAN = 1 << 21


def isin_ids(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """np.isin for integer ids, through a table over the span of `ids` when it is at most TABLE_SPAN (or 64 bytes
    per id compared): for thousands of ids ten times faster than numpy's default here, which sorts both arrays
    unless the span is within six times their length."""
    import numpy as np  # see link_counts

    if len(values) and len(ids) and int(ids.max()) - int(ids.min()) <= max(TABLE_SPAN, 64 * (len(values) + len(ids))):
        return np.isin(values, ids, kind="table")
    return np.isin(values, ids)


@dataclass(slots=True)
class DocumentRecord:
    """A source text; its chunks carry the embeddings."""

    id: str
    namespace: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    #: When it was stored (read back by the store; `write` sets it, `restore` keeps a given one).
    created_at: datetime | None = None
    #: When what it tells happened or was written (naive UTC; None: unknown), given by the caller.
    time: datetime | None = None


@dataclass(slots=True)
class ChunkRecord:
    """A passage of a document; `id` is None until stored (in a write, the id of the stored passage it keeps: see
    `WriteBatch.chunks`)."""

    document_id: str
    ordinal: int
    text: str
    id: int | None = None
    embedding: np.ndarray | None = None
    #: The headings above it, "Installation > Linux"; "" when none.
    section: str = ""
    #: Its document's namespace, in a write (reads leave it None). None there: that of the batch's one document
    #: with `document_id`; a batch that holds that id in several namespaces must say which (the write sets it).
    namespace: str | None = None
    #: Who read it for its graph (`GraphStore.extraction_marks`), in a restore; a write of a new passage and reads
    #: leave it None.
    extracted_by: str | None = None


@dataclass(slots=True)
class WriteBatch:
    """Everything one call writes. The store applies it in a single transaction: all of it or nothing."""

    nodes: list[NodeRecord] = field(default_factory=list)
    edges: list[EdgeWrite] = field(default_factory=list)
    documents: list[DocumentRecord] = field(default_factory=list)
    #: Chunks of the documents above, replacing any chunks those documents had. One with an `id` keeps that stored
    #: chunk of its document (it must have the same text and section): the row with its mentions, evidence and
    #: extraction mark, and its vector unless `embedding` gives another; it moves to `ordinal`. Only the others are
    #: inserted; the stored chunks none keeps go (see `delete_documents`).
    chunks: list[ChunkRecord] = field(default_factory=list)
    #: (target node id, source node ids): the sources' edges and provenance move to the target, self-loops
    #: and duplicate edges that result collapse, and the sources are deleted. Applied before `nodes`.
    merges: list[tuple[int, list[int]]] = field(default_factory=list)
    #: Nodes to delete with everything that hangs on them (edges, provenance, vectors, observations).
    delete_nodes: list[int] = field(default_factory=list)
    delete_edges: list[int] = field(default_factory=list)
    #: (edge id, moment): edges that stop holding at that moment (valid_until), kept as history.
    end_edges: list[tuple[int, datetime]] = field(default_factory=list)
    #: (namespace, document id): documents to delete with their chunks and what those chunks alone supported:
    #: the nodes all of whose mentions, and the edges all of whose evidence, are in them (with the nodes' edges),
    #: unless they were ever written `by_hand`. A replaced document's old chunks that none of `chunks` keeps go the
    #: same way (see `keep_named`).
    delete_documents: list[tuple[str, str]] = field(default_factory=list)
    #: Namespaces whose communities and reports go too (derived data): those deleted whole.
    drop_communities: list[str] = field(default_factory=list)
    #: (namespace, since, until): the lines of the namespace's log of what writes deleted or replaced (recent_changes'
    #: "... deleted" and "properties changed" lines, with the texts that went) recorded in [since, until) (None: no
    #: bound) go, after this batch's own lines: a namespace deleted whole (else the texts outlive it), or the log
    #: forgotten on purpose (`duckgraph changes forget`).
    forget_deletions: list[tuple[str, datetime | None, datetime | None]] = field(default_factory=list)
    #: For the documents above that replace stored ones: a node that a dropped chunk mentioned gets, as mentions,
    #: the document's inserted chunks whose text names it (its name or an alias), and an edge that a dropped chunk
    #: supported those naming both its ends, so that neither goes while the new text names it. False: what only
    #: the dropped chunks supported goes with them (an extractor is to read the new ones).
    keep_named: bool = False
    #: Nodes renamed or merged into (by this batch or an earlier one of the same use case): the edges written here
    #: that touch them changed, their sentences naming them, even when their values did not. An edge written again
    #: as it is, touching none, keeps its updated time.
    renamed: list[int] = field(default_factory=list)


@dataclass(slots=True)
class Snapshot:
    """Rows to store exactly as given, times included: what an import writes (`GraphStore.restore`).

    Rows are matched by natural keys, never by id, so a snapshot taken from one file can be restored into
    another. A document replaces the stored document with the same (namespace, id) together with its
    chunks; a node replaces the node with the same (namespace, key); an edge replaces the edge with the
    same (namespace, source, target, type) among edges that still hold or, for an edge that no longer holds,
    the one that also has the same validity, else the stored period of that relation that starts at the same
    moment and overlaps it (the snapshot's end replaces its end; an import refuses any other overlap). Nodes and
    edges keep their stored vector when `embedding` is None. Mentions and evidence are added to what is stored.
    """

    documents: list[DocumentRecord] = field(default_factory=list)
    #: The chunks of the documents above (all of them), with vectors.
    chunks: list[ChunkRecord] = field(default_factory=list)
    #: Nodes with their `observations` (None: keep the stored ones) and times.
    nodes: list[NodeRecord] = field(default_factory=list)
    edges: list[EdgeWrite] = field(default_factory=list)
    #: (namespace, node key, document id, chunk ordinal): the chunk mentions the node.
    mentions: list[tuple[str, str, str, int]] = field(default_factory=list)
    #: (namespace, source key, target key, edge type, valid_from, valid_until, document id, chunk ordinal):
    #: the chunk supports the edge.
    evidence: list[tuple[str, str, str, str, datetime | None, datetime | None, str, int]] = field(
        default_factory=list
    )
    #: Taken before passages were marked as read (an export of schema 5 or older): the chunks `mentions` names
    #: are marked as read, as the upgrade to schema 6 marks a file's, so an extracting re-run skips them.
    before_marks: bool = False
    #: Stored nodes (namespace, key) and edges (keyed as `evidence` is, without the chunk) to mark as written by
    #: hand, as `NodeRecord.by_hand` marks them: what an export taken before the marks says of them is known only
    #: once its provenance is read, after their lines were written.
    nodes_by_hand: list[tuple[str, str]] = field(default_factory=list)
    edges_by_hand: list[tuple[str, str, str, str, datetime | None, datetime | None]] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class WriteSummary:
    """What a batch changed."""

    nodes_created: int = 0
    #: Stored nodes and edges the batch changed; `_unchanged`: those it wrote again exactly as stored (their
    #: updated_at stays, and recent_changes does not list them). An edge named twice in a batch counts once.
    nodes_updated: int = 0
    nodes_unchanged: int = 0
    edges_created: int = 0
    edges_updated: int = 0
    edges_unchanged: int = 0
    documents_written: int = 0
    #: Chunks inserted; `chunks_kept`: stored chunks a replacement kept (`WriteBatch.chunks`).
    chunks_written: int = 0
    chunks_kept: int = 0
    nodes_deleted: int = 0
    edges_deleted: int = 0
    documents_deleted: int = 0
    edges_ended: int = 0
    #: Lines of the log of what writes deleted or replaced that `WriteBatch.forget_deletions` deleted.
    deletions_forgotten: int = 0
    #: Edge writes that began a new version of a fact (`plugins/duckdb/periods.starts_new_version`): (index in
    #: `WriteBatch.edges`, start of the period before, which the write ended at its `valid_from`; None: no known start).
    edges_versioned: list[tuple[int, datetime | None]] = field(default_factory=list)
    #: Nodes and edges that only dropped chunks supported, kept by `WriteBatch.keep_named` (their ids).
    nodes_kept: list[int] = field(default_factory=list)
    edges_kept: list[int] = field(default_factory=list)
    #: Nodes that only dropped or deleted chunks supported, kept because edges ever written by hand (their ids, the
    #: values) have them as an end: they would go with them. Those `nodes_kept` lists are not among them.
    nodes_held: dict[int, list[int]] = field(default_factory=dict)
    node_ids: dict[str, int] = field(default_factory=dict)
    #: Document id -> the ids of all its chunks in the batch (kept and inserted), in the batch's order.
    chunk_ids: dict[str, list[int]] = field(default_factory=dict)
    #: Provenance pairs added by `restore` (pairs already stored are not counted).
    mentions_added: int = 0
    evidence_added: int = 0


@dataclass(slots=True, frozen=True)
class ChangeRecord:
    """One thing a write did, for a list of what changed: `kind` is "entity created", "entity updated", "fact added",
    "fact updated", "fact ended" or "document added", with the id of what changed; "observations added" (to a stored
    entity, with the entity's id and `label`); or, for what a write took away, "entity deleted", "entity merged",
    "fact deleted", "observations deleted", "properties changed" (the values replaced), "type changed" (the type
    replaced), "document deleted" or "document replaced" (its text: the document then holds another one), with
    `label`, the thing as it was in words (cut short; one label may count the things of a large deletion not named
    one by one) and, for a document replaced, its id. `at` is when it was written (naive UTC). An entity created with another type than it has now
    has `label` too: its name and the type it was created with ("Jordan [Country]")."""

    at: datetime
    kind: str
    node_id: int | None = None
    edge_id: int | None = None
    document_id: str | None = None
    label: str | None = None


class GraphFragment(TypedDict):
    """A graph in the shape `add_knowledge_graph` accepts: lists of node and edge objects."""

    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
