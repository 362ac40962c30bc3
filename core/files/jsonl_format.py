"""The lines of a duckgraph file: a whole knowledge base as JSON Lines, as export writes and import reads it.

duckgraph's format is one JSON object per line, each with a "kind", in this order (documents in the order they
were stored, nodes and edges in the order they were created, the rest sorted by natural keys, so the same
knowledge base always gives the same lines):

- ``meta``: format name and version, schema version, the embedder the vectors come from, whether they are in
  the file;
- ``document`` (namespace, id, title, text, metadata, created_at, time), each followed by its ``chunk`` lines (id,
  document_id, ordinal, text, section, and ``extracted_by`` when it was read for its graph: an extractor's id,
  "host" or "before-marks", see `GraphStore.extraction_marks`; files of schema versions before `MARKED_SINCE`
  have none, and an import marks the chunks their mentions name "before-marks", as the upgrade does);
- ``node``: id, namespace, name, type, description, aliases, properties, observations, created_at, updated_at,
  and ``by_hand`` (true when ever written by hand: deleting the documents it came from keeps it; files of schema
  versions before `BY_HAND_SINCE` have none, and an import infers it for their nodes and edges as the upgrade does);
- ``edge``: id, namespace, source_id and target_id (node ids of this file) with the source and target names,
  type, description, weight, properties, valid_from, valid_until, created_at, updated_at, ``by_hand`` (in files of
  schema versions before `STARTS_SINCE`, a valid_from equal to created_at is no start given: imported as none);
- ``mention`` (node_id, chunk_id) and ``edge_evidence`` (edge_id, chunk_id): the provenance;
- ``community_report``: a report written by a model or the host (level, members: node ids of this file, title,
  summary, author, stale). Communities are derived: an import builds them again and puts these reports back on
  the communities they were written for (extractive reports are written anew);
- ``end`` (from format version 2, `ENDS_SINCE`): the last line, with the count of each kind of line before it but
  the meta line. An export stopped midway (to standard output, a cron job's `> backup.jsonl`) ends on a whole
  line and reads as a smaller memory: an import refuses a file of this version without it, or whose lines do not
  match its counts.

Ids are numbers local to the file (1, 2, ... in line order), not the database's, which differ from file to file.
Nodes and edges come by created_at, then by database id (the order of creation among those one call created, which
share their created_at); an import creates new rows in the order of their created_at, then of their lines, so that
order survives an export and import. Chunk, node and edge lines carry an ``embedding`` only when exported with
embeddings. Times are UTC, ISO 8601: export writes them with "Z"; a time without a zone (earlier exports wrote
them so) is read as UTC, one with another zone converted to it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from duckgraph.core.domain.limits import MAX_OBSERVATIONS, MAX_SUMMARY_CHARS, MAX_TITLE_CHARS
from duckgraph.core.domain.model import (
    Description,
    DocumentText,
    Name,
    Properties,
    SourceId,
    StoredObservation,
    Title,
    TypeLabel,
    Weight,
)
from duckgraph.core.domain.moments import check_period, naive_utc

FORMAT = "duckgraph"
FORMAT_VERSION = 2
#: The format version whose files end with an `EndLine`: an older file's completeness cannot be checked.
ENDS_SINCE = 2
#: The schema version whose exports carry chunks' `extracted_by` (an optional field: format version 1 still).
MARKED_SINCE = 6
#: The schema version whose exports carry `by_hand`: an import infers it for an older file's nodes and edges, as the
#: upgrade to it infers a file's (plugins/duckdb/schema.py, MIGRATIONS[5]; `import_plan.inferred_by_hand`).
BY_HAND_SINCE = 5
#: The schema version from which a relation's `valid_from` is a start given to it: before, writes stored their
#: creation time there, and an import drops a start equal to `created_at` (unknown), as the upgrade to it does
#: (plugins/duckdb/schema.py, MIGRATIONS[2]).
STARTS_SINCE = 2


def _utc(value: datetime | None) -> datetime | None:
    """Times are stored as naive UTC; an aware time is converted."""
    return None if value is None else naive_utc(value)  # a ValueError for a moment outside years 1 to 9999 in UTC


class Line(BaseModel):
    """A line of the file; one without a namespace goes to the importing knowledge base's.

    The namespace is checked by the importer with the tools' check_namespace, unless the import puts every line
    into one namespace of its own (`--namespace`): then the file's is replaced, valid or not."""

    model_config = ConfigDict(extra="forbid")
    namespace: str | None = None

    @field_validator("created_at", "updated_at", "valid_from", "valid_until", "time", mode="after",
                     check_fields=False)
    @classmethod
    def _naive_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class _Embedder(BaseModel):
    id: str
    dimensions: int = Field(ge=1)


class MetaLine(Line):
    kind: Literal["meta"]
    format: Literal["duckgraph"]
    version: int = Field(ge=1)
    schema_version: int | None = None
    embedder: _Embedder | None = None
    embeddings: bool = False


class DocumentLine(Line):
    kind: Literal["document"]
    id: SourceId
    title: Title = ""
    text: DocumentText
    metadata: Properties = Field(default_factory=dict)
    created_at: datetime | None = None
    time: datetime | None = None


class ChunkLine(Line):
    kind: Literal["chunk"]
    id: int
    document_id: str = Field(min_length=1)
    ordinal: int = Field(ge=0)
    text: DocumentText
    section: str = Field("", max_length=2_000)
    #: Who read it for its graph (None: nobody yet), so an extracting re-run after an import skips it.
    extracted_by: str | None = Field(None, min_length=1, max_length=200)
    embedding: list[float] | None = None


class NodeLine(Line):
    kind: Literal["node"]
    id: int | None = None
    name: Name
    type: TypeLabel
    description: Description = ""
    aliases: list[Name] = Field(default_factory=list)  # no count limit: merging entities gathers their names
    properties: Properties = Field(default_factory=dict)
    observations: list[StoredObservation] = Field(default_factory=list, max_length=MAX_OBSERVATIONS)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    by_hand: bool = False
    embedding: list[float] | None = None


class EdgeLine(Line):
    kind: Literal["edge"]
    id: int | None = None
    source_id: int | None = Field(None, description="Id of a node line; or give the source name.")
    target_id: int | None = None
    source: Name | None = None
    target: Name | None = None
    type: TypeLabel
    description: Description = ""
    weight: Weight = 1.0
    properties: Properties = Field(default_factory=dict)
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    by_hand: bool = False
    embedding: list[float] | None = None

    @model_validator(mode="after")
    def _period(self) -> EdgeLine:
        # As add_knowledge_graph refuses it: a period that ends before it starts would be stored and never shown.
        # An empty one (older versions stored them) is restored as exported: an import loses nothing it was given.
        check_period(self.valid_from, self.valid_until,
                     f"{self.source or self.source_id} -{self.type}-> {self.target or self.target_id}", empty_ok=True)
        return self


class MentionLine(Line):
    kind: Literal["mention"]
    node_id: int
    chunk_id: int


class EvidenceLine(Line):
    kind: Literal["edge_evidence"]
    edge_id: int
    chunk_id: int


class CommunityReportLine(Line):
    kind: Literal["community_report"]
    level: int = Field(ge=0)
    members: list[int] = Field(min_length=1)
    title: str = Field(min_length=1, max_length=MAX_TITLE_CHARS)
    summary: str = Field(min_length=1, max_length=MAX_SUMMARY_CHARS)
    author: Literal["model", "host", "sampling"]  # sampling: the host's model, through MCP sampling
    stale: bool = False


#: The kinds of line an `EndLine` counts, in file order.
COUNTED = ("document", "chunk", "node", "edge", "mention", "edge_evidence", "community_report")


class EndLine(Line):
    kind: Literal["end"]
    #: kind -> how many lines of it the file holds (a kind it has none of may be left out).
    lines: dict[str, int] = Field(default_factory=dict)

    @field_validator("lines")
    @classmethod
    def _counts(cls, value: dict[str, int]) -> dict[str, int]:
        if unknown := [kind for kind in value if kind not in COUNTED]:
            raise ValueError(f"counts of unknown kinds {unknown}; the kinds counted are {', '.join(COUNTED)}")
        if any(count < 0 for count in value.values()):
            raise ValueError("the counts must be 0 or more")
        return value


LINE_MODELS: dict[str, type[Line]] = {
    "meta": MetaLine, "document": DocumentLine, "chunk": ChunkLine, "node": NodeLine, "edge": EdgeLine,
    "mention": MentionLine, "edge_evidence": EvidenceLine, "community_report": CommunityReportLine, "end": EndLine,
}
