"""The contract between duckgraph's core and its adapters. Imports nothing else of duckgraph."""

from duckgraph.ports.embedder import ALL_MINILM_L6_V2_FLOOR, Embedder, json_kind, normalize
from duckgraph.ports.errors import (
    ConfigError,
    DuckgraphError,
    EmbedderError,
    EmbedderMismatchError,
    ExtractionError,
    InvalidInputError,
    NotFoundError,
    StoreError,
    interruption,
)
from duckgraph.ports.extractor import ChatExtractor, Extractor, ReplyFormat
from duckgraph.ports.hookspecs import hookimpl
from duckgraph.ports.names import clean_name, entity_key, loose_key, name_candidates, no_control_characters, relation_type
from duckgraph.ports.records import (
    ChangeRecord,
    ChunkRecord,
    DocumentRecord,
    EdgeRecord,
    EdgeWrite,
    GraphFragment,
    Links,
    NodeRecord,
    isin_ids,
    link_counts,
    Snapshot,
    TimeFilter,
    VectorKind,
    WriteBatch,
    WriteSummary,
)
from duckgraph.ports.store import GraphStore, part_title, reads_on
from duckgraph.ports.text import inflections, terms, tokens

__all__ = [
    "ALL_MINILM_L6_V2_FLOOR",
    "ChangeRecord", "ChatExtractor", "ChunkRecord", "ConfigError", "DocumentRecord", "DuckgraphError", "EdgeRecord", "EdgeWrite", "Embedder",
    "EmbedderError", "EmbedderMismatchError", "ExtractionError", "Extractor", "GraphFragment", "GraphStore",
    "InvalidInputError", "Links", "NodeRecord", "NotFoundError", "ReplyFormat", "Snapshot", "StoreError", "TimeFilter", "interruption", "VectorKind", "WriteBatch",
    "WriteSummary",
    "clean_name", "entity_key", "hookimpl", "inflections", "isin_ids", "link_counts", "loose_key", "name_candidates",
    "no_control_characters",
    "json_kind", "normalize", "part_title", "reads_on", "relation_type", "terms", "tokens",
]
