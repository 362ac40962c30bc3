"""Plain records that cross the store and extractor ports. Validation happens in core before they are built."""

from __future__ import annotations

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
    created_at: datetime | None = None
    updated_at: datetime | None = None


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
    #: Vector of the fact as a sentence ("Marie Curie won Nobel Prize in Physics").
    embedding: np.ndarray | None = None


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


@dataclass(slots=True)
class DocumentRecord:
    """A source text; its chunks carry the embeddings."""

    id: str
    namespace: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ChunkRecord:
    """A passage of a document; `id` is None until stored."""

    document_id: str
    ordinal: int
    text: str
    id: int | None = None
    embedding: np.ndarray | None = None


@dataclass(slots=True)
class WriteBatch:
    """Everything one call writes. The store applies it in a single transaction: all of it or nothing."""

    nodes: list[NodeRecord] = field(default_factory=list)
    edges: list[EdgeWrite] = field(default_factory=list)
    documents: list[DocumentRecord] = field(default_factory=list)
    #: Chunks of the documents above, replacing any chunks those documents had.
    chunks: list[ChunkRecord] = field(default_factory=list)
    #: (target node id, source node ids): the sources' edges and provenance move to the target, self-loops
    #: and duplicate edges that result collapse, and the sources are deleted. Applied before `nodes`.
    merges: list[tuple[int, list[int]]] = field(default_factory=list)
    #: Nodes to delete with everything that hangs on them (edges, provenance, vectors, observations).
    delete_nodes: list[int] = field(default_factory=list)
    delete_edges: list[int] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class WriteSummary:
    """What a batch changed."""

    nodes_created: int = 0
    nodes_updated: int = 0
    edges_created: int = 0
    edges_updated: int = 0
    documents_written: int = 0
    chunks_written: int = 0
    nodes_deleted: int = 0
    edges_deleted: int = 0
    node_ids: dict[str, int] = field(default_factory=dict)
    chunk_ids: dict[str, list[int]] = field(default_factory=dict)


class GraphFragment(TypedDict):
    """A graph in the shape `add_knowledge_graph` accepts: lists of node and edge objects."""

    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]
