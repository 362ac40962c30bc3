"""The domain model as the outside world sees it: validated inputs and structured results."""

import json
from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import (
    AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, PrivateAttr, StringConstraints,
    WithJsonSchema, model_validator)

from duckgraph.core.domain.limits import (
    MAX_DESCRIPTION_CHARS, MAX_OBSERVATION_CHARS, MAX_OBSERVATIONS, MAX_PROPERTIES_BYTES, MAX_SUMMARY_CHARS,
    MAX_SOURCE_ID_CHARS, MAX_TITLE_CHARS)
from duckgraph.core.domain.moments import check_period, parse_moment
from duckgraph.core.domain.observations import observation_text
from duckgraph.ports import clean_name, no_control_characters
from duckgraph.ports.names import INVISIBLE
from duckgraph.ports.records import ORIGINAL_TYPE

MAX_NODES_PER_CALL = 5_000
MAX_EDGES_PER_CALL = 10_000
MAX_DOCUMENTS_PER_CALL = 1_000
MAX_DOCUMENT_CHARS = 2_000_000
MAX_WEIGHT = 1_000_000

# These types are the one validation of every way in: the tools' inputs below, and `duckgraph import`'s lines
# (core/files/jsonl_format.py) and entities (core/files/memory_import.py), so all accept and refuse the same things
# with the same errors.


def _one_line(value: str) -> str:
    """An id is written on one line wherever it is shown ("[id#2]" before a passage): no control character at all,
    tabs and line breaks of any kind included."""
    if breaks_line(value) or any(ord(ch) < 32 for ch in value):
        raise ValueError("must be one line, without tabs, line or paragraph separators (U+0085, U+2028, U+2029) "
                         "or other control characters")
    return no_control_characters(value)


def _visible(value: str) -> str:
    """An id is a key, cited again in source_ids as typed: one holding characters a reader cannot see (a zero-width
    space, a bidirectional control such as U+202E) would be another document than the one it looks like, and
    would show reversed or garbled where search prints it. Refused rather than stripped, so a document is never
    stored under an id other than the one given."""
    if INVISIBLE.search(value):
        raise ValueError("must not contain invisible characters (zero-width spaces or joiners, bidirectional "
                         "controls such as U+202E, a byte-order mark): type the id without them")
    return value


def _clean_title(value: Any) -> Any:
    # A title is shown, never looked up: control characters (NUL, ESC...) are refused as in a description, and
    # invisible ones and line breaks are dropped and made spaces as in a name (ports/names.py), so a title cannot
    # read reversed or add a line of its own to search's text.
    return clean_name(no_control_characters(value)) if isinstance(value, str) else value


def breaks_line(value: str) -> bool:
    """Whether `value` holds a line break of any kind: one at which `str.splitlines` (so a reader of the text)
    breaks a line: \\n, \\r, \\v, \\f, \\x1c-\\x1e, NEL (U+0085), the line and paragraph separators (U+2028, U+2029)."""
    return "".join(value.splitlines()) != value


def _clean_name(value: Any) -> Any:
    # Names drop invisible characters (ports/names.py): 'Al<ZERO WIDTH SPACE>ice' is stored as 'Alice', and a
    # right-to-left override cannot make a name read as another.
    return clean_name(value) if isinstance(value, str) else value


def _clean_observation(value: Any) -> Any:
    # Composed and trimmed (observations.py), before it is measured: a text pasted decomposed (NFD) and the same
    # text typed are one observation, stored alike.
    return observation_text(value) if isinstance(value, str) else value


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    try:
        encoded = json.dumps(value, allow_nan=False)
    except ValueError as exc:
        raise ValueError("must be plain JSON (no NaN or infinite numbers)") from exc
    if len(encoded) > MAX_PROPERTIES_BYTES:
        raise ValueError(f"is {len(encoded)} bytes as JSON; the limit is {MAX_PROPERTIES_BYTES}")
    return value


def _with_zone(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)




def edge_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """A relation's properties as results show them: the caller's, without duckgraph's own (`ORIGINAL_TYPE`)."""
    return {key: value for key, value in properties.items() if key != ORIGINAL_TYPE}


# Validators run last first: a name is cleaned, then trimmed and measured.
Name = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300), BeforeValidator(_clean_name)
]
TypeLabel = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=80), BeforeValidator(_clean_name)
]
Description = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=MAX_DESCRIPTION_CHARS),
    AfterValidator(no_control_characters),
]
SourceId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SOURCE_ID_CHARS),
                     AfterValidator(_one_line), AfterValidator(_visible)]
Title = Annotated[str, StringConstraints(strip_whitespace=True, max_length=500), BeforeValidator(_clean_title)]
DocumentText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_DOCUMENT_CHARS)]
Properties = Annotated[dict[str, Any], AfterValidator(_json_object)]
Weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]
Observation = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_OBSERVATION_CHARS),
    AfterValidator(no_control_characters), BeforeValidator(_clean_observation),
]
#: A moment: an ISO 8601 date or date-time, no zone = UTC, kept as naive UTC (core/domain/moments.py). Its schema
#: names no format: "date-time" (RFC 3339) would have clients that check arguments refuse a date or a zoneless time.
Moment = Annotated[datetime, BeforeValidator(parse_moment), WithJsonSchema(
    {"type": "string", "description": "ISO 8601 date or date-time, e.g. 2024-06-01 (no zone = UTC)."})]
#: A stored moment in a result: naive UTC inside, written to JSON with its zone ("...Z"), as the schema's
#: date-time format (RFC 3339) asks; clients that check it refuse a time without one.
UtcTime = Annotated[datetime, PlainSerializer(_with_zone, return_type=datetime, when_used="json")]
#: An observation as the reference memory server takes it (blank allowed), with the same cap, characters and
#: normalisation as ours; also what a file's node lines hold, since a stored observation may have come this way.
StoredObservation = Annotated[
    str, StringConstraints(max_length=MAX_OBSERVATION_CHARS), AfterValidator(no_control_characters),
    BeforeValidator(_clean_observation),
]
#: The title and summary of a community report the host writes: global_search hands them on as they are, so they
#: are refused with control characters, as a description is.
ReportTitle = Annotated[str, Field(min_length=1, max_length=MAX_TITLE_CHARS), AfterValidator(no_control_characters)]
ReportSummary = Annotated[
    str, Field(min_length=1, max_length=MAX_SUMMARY_CHARS), AfterValidator(no_control_characters)]


class _Model(BaseModel):
    # Validators are built on first use, not at import: a server answers tools/list before it needs any
    # (core/mcp/tool_listing.py), and the memory tool set's models are never used by the graphrag one.
    model_config = ConfigDict(defer_build=True)


class _Input(_Model):
    # Unknown fields are refused so a misspelt field ("entityType") is reported, not silently dropped.
    model_config = ConfigDict(extra="forbid")


class NodeInput(_Input):
    name: Name = Field(description="Same name, any case = same entity.")
    type: TypeLabel = Field(description="Specific: Person, Organization, Drug...")
    description: Description | None = None
    aliases: list[Name] = Field(default_factory=list, max_length=50)
    observations: list[Observation] = Field(
        default_factory=list, max_length=MAX_OBSERVATIONS, description="Short facts, added to the stored ones.")
    properties: Properties = Field(default_factory=dict, description="Flat JSON object.")
    source_ids: list[SourceId] = Field(default_factory=list, max_length=100, description="Ids of stored documents.")


class EdgeInput(_Input):
    source: Name = Field(description="Entity name, in this call or stored.")
    target: Name
    type: TypeLabel = Field(description="Specific, e.g. FOUNDED, EMPLOYED_BY; not RELATED_TO.")
    description: Description | None = Field(None, description="The fact in one sentence.")
    weight: Weight | None = None
    properties: Properties = Field(default_factory=dict)
    source_ids: list[SourceId] = Field(default_factory=list, max_length=100)
    valid_from: Moment | None = Field(None, description="ISO date the fact became true.")
    valid_until: Moment | None = Field(None, description="ISO date it stopped being true.")

    @model_validator(mode="after")
    def _period(self) -> "EdgeInput":
        check_period(self.valid_from, self.valid_until, f"{self.source} -{self.type}-> {self.target}")
        return self


class RelationRef(_Input):
    """A relation named by its ends and type."""

    source: Name
    target: Name
    type: TypeLabel

    def label(self) -> str:
        return f"{self.source} -{self.type}-> {self.target}"


class RelationToDelete(RelationRef):
    valid_from: Moment | None = Field(None, description=(
        "ISO date: delete exactly the stored period that starts then (an ended one too; get_entities lists them); "
        "omitted, the periods that have not ended."))


class EndRelationInput(RelationRef):
    ended_at: Moment | None = Field(None, description="ISO date; default now.")


class EndedRelation(_Model):
    source: str
    target: str
    type: str
    valid_from: UtcTime | None = None
    valid_until: UtcTime


class RelationsEnded(_Model):
    """What `end_relations` closed (kept as history) and the relations that had no current match (as given)."""

    ended: list[EndedRelation] = Field(default_factory=list)
    not_found: list[RelationRef] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list, description=(
        "Why a relation not found matched nothing (a name no entity has, a type none of its relations has, a "
        "relation that ended already) and what to send instead; and that a relation given an ended_at still to "
        "come holds until then."))


class Change(_Model):
    at: UtcTime = Field(description="When it was written (UTC).")
    change: str = Field(description=(
        "entity created, entity updated, entity deleted, entity merged (into the entity the subject names), fact "
        "added, fact updated, fact ended, fact deleted, observations added, observations deleted, properties "
        "changed (each key: old -> new value), document added, document deleted or document replaced (re-added "
        "with another text)."))
    subject: str


class ChangesResult(_Model):
    """What was written in a span of time, newest first."""

    changes: list[Change] = Field(description="Up to `limit` changes, whatever the text's budget.")
    text: str = Field(description="The changes as lines, as many as fit the token budget; its last line says how "
                      "to list the rest.")
    truncated: bool = Field(description="More changes exist than listed (newest first): recent_changes with "
                            "offset=next_offset (and the same since and until) lists the next ones.")
    next_offset: int | None = None


class DocumentInput(_Input):
    id: SourceId | None = Field(None, description="From the text if absent; an edit reuses the stored id to "
                                "replace it.")
    title: Title | None = Field(None, description="One title for the turns of one conversation, each its own "
                                "document, stored in order: search then also shows the reply to a matching turn.")
    text: DocumentText
    metadata: Properties = Field(default_factory=dict)
    time: Moment | None = Field(None, description="ISO date it was written or happened.")


class NodeRef(_Model):
    id: int
    name: str
    type: str
    created: bool


class ResolvedName(_Model):
    name: str
    into: str


class PossibleDuplicate(_Model):
    name: str
    similar_to: str
    type: str
    similarity: float
    reason: str | None = Field(None, description="Present when the name looks the same as similar_to's but uses "
                               "other letters (another script's look-alikes): a reader cannot tell them apart.")


class SkippedEdge(_Model):
    source: str
    target: str
    type: str
    reason: str


class AddGraphResult(_Model):
    """What `add_knowledge_graph` stored."""

    nodes_created: int
    nodes_updated: int = Field(description="Stored entities this call changed (an entity sent again exactly as "
                               "stored counts in nodes_unchanged).")
    nodes_unchanged: int = Field(0, description="Stored entities sent again exactly as stored: nothing of them "
                                 "changed.")
    edges_created: int
    edges_updated: int = Field(description="Stored relations this call changed (one sent again exactly as stored "
                               "counts in edges_unchanged; a relation named twice in the call counts once).")
    edges_unchanged: int = Field(0, description="Stored relations sent again exactly as stored: nothing of them "
                                 "changed.")
    observations_added: int = 0
    nodes: list[NodeRef]
    resolved: list[ResolvedName] = Field(
        default_factory=list,
        description="Names merged into a stored entity of the same type that has them as an alias or spells them "
        "with other accents or punctuation, or into an entity of the same name (up to case) and another type (see "
        "hints).",
    )
    possible_duplicates: list[PossibleDuplicate] = Field(
        default_factory=list,
        description="New entities very similar to a stored one of the same type, or whose name looks the same as a "
        "stored one's but uses other letters (see reason); if they are the same, call merge_entities.",
    )
    skipped_edges: list[SkippedEdge] = Field(
        default_factory=list,
        description="Edges not stored because name resolution made their two ends one entity; the rest of the "
        "call is stored.",
    )
    vague_edges: list[RelationRef] = Field(
        default_factory=list, description="Edges stored with a vague type such as RELATED_TO (see hints).")
    hints: list[str] = Field(default_factory=list,
                             description="What to do about skipped or vague edges, a description that is full, or "
                             "a node merged into an entity of another type.")


class StoredDocument(_Model):
    id: str
    title: str
    chunk_ids: list[int] = Field(description="Its passages in order, those a replacement kept included.")
    unchanged: bool = Field(False, description="True when the same text was already stored under this id.")
    replaced: bool = Field(False, description="An older text under this id was replaced.")


class ChunkExtraction(_Model):
    """What extraction found in one passage, or why it failed (the passage is stored either way)."""

    document_id: str
    chunk_id: int
    nodes: int = 0
    edges: int = 0
    error: str | None = None
    skipped: bool = Field(False, description="Read before (by an extractor, or by the host through "
                                             "add_knowledge_graph source_ids); not extracted again.")


class AddDocumentsResult(_Model):
    """What `add_documents` stored."""

    documents: list[StoredDocument]
    chunks_written: int = Field(description="Passages written and embedded: new documents' passages, and those of "
                                "replaced documents whose text changed.")
    chunks_kept: int = Field(0, description="Passages of replaced documents whose text did not change: kept as "
                             "stored, with their entities and extraction marks, not embedded again.")
    entities_removed: int = Field(
        0, description="Entities that only the changed passages of replaced documents supported, removed with them "
        "(without extraction: only those the new passages no longer name)."
    )
    relations_removed: int = Field(
        0, description="Relations that only the changed passages of replaced documents supported, removed with them "
        "(without extraction: only those whose two ends no new passage names)."
    )
    entities_kept: int = Field(0, description="Without extraction: entities that only the changed passages supported, "
                               "kept because a new passage names them (now their source).")
    relations_kept: int = Field(0, description="Without extraction: relations that only the changed passages "
                                "supported, kept because a new passage names both their ends (now their source).")
    to_review: list[str] = Field(default_factory=list, description=(
        "The kept entities and relations by name: the new text names them, which does not say they still hold "
        "(\"not Kafka\" names Kafka). Check each against the new text; end_relations or delete_relations what no "
        "longer holds. Also an entity no new passage names that stays because a relation written by hand has it as an "
        "end (with that relation)."))
    extractions: list[ChunkExtraction] = Field(
        default_factory=list, description="Per passage, when extraction was asked for."
    )
    extraction_errors: int = 0
    hints: list[str] = Field(default_factory=list, description=(
        "A document given without an id that looks like an edit of a stored one (its title and most of its words): "
        "stored beside it; which id to pass to replace that one instead."))


class FailedUrl(_Model):
    url: str
    reason: str


class AddUrlsResult(_Model):
    """What `add_urls` stored: page URLs (the documents' ids), by outcome."""

    stored: list[str]
    unchanged: list[str]
    replaced: list[str] = Field(description="Among stored: pages whose text had changed.")
    failed: list[FailedUrl]
    chunks_written: int


class ScoredNode(_Model):
    id: int
    name: str
    type: str
    description: str = ""
    score: float = Field(description="Relevance to the query (cosine similarity), discounted per hop from the anchor.")
    hop: int = Field(description="Graph distance from the nearest anchor (0 = anchor).")
    properties: dict[str, Any] = Field(default_factory=dict)
    observations: list[str] = Field(
        default_factory=list,
        description="Its observations, those sharing the query's rarer words first, each after the later one that "
        "names what it names (at most 20; get_entities lists all).",
    )
    observations_not_shown: int = Field(
        default=0, description="How many more observations it holds than observations lists (those least related "
        "to the query): get_entities lists them all.")


class ResultEdge(_Model):
    id: int
    source: str
    target: str
    type: str
    description: str = ""
    weight: float
    properties: dict[str, Any] = Field(default_factory=dict)
    valid_from: UtcTime | None = Field(None, description="When it became true, if known.")
    valid_until: UtcTime | None = Field(None, description="When it stopped being true; null while it holds.")


class ScoredEdge(ResultEdge):
    score: float = Field(
        description="How well the fact answers the query: the mean similarity to the query of the anchor and the "
        "facts on the path through it."
    )


class Passage(_Model):
    document_id: str
    chunk_id: int
    title: str = ""
    section: str = Field("", description="Headings above it: 'Install > Linux'.")
    text: str
    time: UtcTime | None = Field(None, description="Its document's time, if given.")
    score: float = Field(
        description="Relevance to the query, comparable across queries: the best passage scores the best "
        "passage-to-query cosine similarity, the others in proportion to their graph-walk score."
    )
    also_in: list[str] = Field(
        default_factory=list, description="Other passages with the same text (a copy of the file stored under "
        "another id), as 'document_id#chunk_id': not shown again.")


class TypeCount(_Model):
    """The entities of the type a query asks about ("How many incidents?"): how many the result holds, of how many."""

    type: str
    shown: int
    stored: int
    k_anchors: int | None = Field(
        default=None, description="The k_anchors that shows them all (with max_nodes at least as large); null when "
        "more are stored than a search's anchors.")


class ChainGoesOn(_Model):
    """A chain of facts of one relation type from an entity the query names (X DEPENDS_ON Redis, Y DEPENDS_ON X)
    that goes on past the last hop searched: the entities further along it are not shown."""

    type: str
    start: str = Field(description="The entity the query names that the chain starts from.")
    past: int = Field(description="The hops searched.")
    ends: list[str] = Field(description="The chain's entities at the last hop that it goes on from.")
    more: int = Field(description="The entities one hop further along it, not shown.")
    hops: int | None = Field(
        default=None, description="The hops that shows them; null when more than a search may walk: search for "
        "the ends.")


class SearchResult(_Model):
    """A connected, on-topic subgraph and the passages that support it."""

    query: str
    anchors: list[ScoredNode]
    nodes: list[ScoredNode]
    edges: list[ScoredEdge] = Field(description="The facts among the nodes, those that best answer the query first.")
    passages: list[Passage]
    text: str = Field(description="Compact rendering of the result within the token budget.")
    truncated: bool = Field(description="True when the text rendering had to leave things out.")
    nothing_relevant: bool = Field(
        default=False, description="True when nothing stored is relevant enough to the query (all lists empty).")
    empty_window: str | None = Field(
        default=None, description="With nothing_relevant: the time window searched (after, before), in words "
        "(\"2024-06-10 to 2024-06-17\"), when no passage stored is timed in it: nothing is recorded for that period, "
        "which says nothing of whether the memory knows the query's topic.")
    anchor_communities: dict[str, str] = Field(
        default_factory=dict, description="Anchor name -> its community (see global_search).")
    hint: str | None = None
    not_stored: list[str] = Field(
        default_factory=list, description="Ids (letters and digits joined: INC-199, v2.7) and capitalised names "
        "(Tokyo) the query names that nothing stored mentions: the result is related content, not about them.")
    more_facts: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="Entity -> relation type -> how many more of its facts of that type are "
        "stored than edges holds, where max_nodes cut the list short: get_entities lists them all.")
    type_count: TypeCount | None = Field(
        default=None, description="When the query asks for the entities of a type and the result holds fewer than "
        "are stored: graph_stats counts them.")
    dates_not_applied: list[str] = Field(
        default_factory=list, description="Dates the query names (March 2025) while no after, before or as_of was "
        "given: the search was not limited to them.")
    chains_go_on: list[ChainGoesOn] = Field(
        default_factory=list, description="Chains of one relation type from an entity the query names that go on "
        "past the last hop searched: a larger hops shows more.")
    ended_not_shown: int = Field(
        default=0, description="Facts of the anchors that ended, left out because the search asked for what holds "
        "now: include_history adds them, as_of shows what held then.")
    planned_not_shown: int = Field(
        default=0, description="Facts of the anchors that start after now, left out as ended ones are: "
        "include_history adds them, as_of shows what holds then.")


class EntityDetail(_Model):
    """An entity with its observations and (a bounded number of) its relations."""

    id: int
    name: str
    type: str
    description: str = ""
    aliases: list[str] = Field(default_factory=list)
    properties: dict[str, Any] = Field(default_factory=dict)
    observations: list[str] = Field(default_factory=list)
    relations: list[ResultEdge] = Field(default_factory=list)
    relations_truncated: bool = Field(
        False, description="More relations exist than listed (strongest first): get_entities with "
        "relations_offset=next_relations_offset lists the next ones."
    )
    next_relations_offset: int | None = None


class UpdatedEntity(EntityDetail):
    """update_entity's answer: the entity as changed, and `hint` when the name given is another entity's alias too."""

    hint: str | None = Field(None, description="Present when the name given is also an alias of other entities: "
                                               "the change was made to the entity it names; which they are.")


class EntitiesResult(_Model):
    entities: list[EntityDetail]
    not_found: list[str] = Field(default_factory=list)
    did_you_mean: dict[str, list[str]] = Field(
        default_factory=dict, description="Name not found -> the stored names it most likely meant (at most 3).")
    hint: str | None = None


class GraphPage(_Model):
    """One page of the graph: entities in creation order and the relations among them."""

    entities: list[EntityDetail]
    relations: list[ResultEdge]
    offset: int
    next_offset: int | None = Field(description="Pass as offset to read the next page; null on the last page.")


class DeletedSummary(_Model):
    deleted: list[str] = Field(default_factory=list)
    not_found: list[str] = Field(default_factory=list)
    edges_deleted: int = 0
    hints: list[str] = Field(default_factory=list, description=(
        "For names not found: the names they likely meant, or that the namespace holds nothing."))


class RelationsDeleted(_Model):
    """What `delete_relations` did: the relations deleted (as stored) and those that match nothing (as given)."""

    deleted: list[RelationRef] = Field(default_factory=list)
    not_found: list[RelationRef] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list, description="Why a relation not found matched nothing.")


class MergeResult(_Model):
    target: str
    merged: list[str]
    aliases: list[str]
    edges_collapsed: int = Field(description="Duplicate relations joined into one by the merge.")
    edges_deleted: int = Field(0, description=(
        "Relations between the merged entities, deleted since they would join the target to itself."))
    hints: list[str] = Field(default_factory=list, description=(
        "What the merge did not keep as it was: a source's property value the target's replaced (kept as an "
        "observation), the relations deleted, the target's type 'unknown' replaced by a source's."))


class ObservationResult(_Model):
    entity: str
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)


class PathResult(_Model):
    source: str
    target: str
    hops: int | None = Field(description="Length of the shortest paths; null when none was found.")
    paths: list[str] = Field(description="Readable chains such as 'A -FOUNDED-> B <-EMPLOYED_BY- C'.")
    message: str | None = Field(
        None, description="When no path was found: why, and the hop limit searched within (null otherwise)."
    )


class RelationInput(_Input):
    """A relation in the reference memory server's shape: {from, to, relationType}."""

    # Like the reference server, unknown fields are dropped rather than refused: drop-in prompts keep working.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    from_: Name = Field(alias="from", description="The name of the entity where the relation starts.")
    to: Name = Field(description="The name of the entity where the relation ends.")
    relationType: TypeLabel = Field(description="The type of the relation, e.g. works_at or FOUNDED.")  # noqa: N815


class GraphStats(_Model):
    nodes: int
    edges: int
    documents: int
    chunks: int
    node_types: dict[str, int] = Field(
        description="Entities per type, a type written in another case or number counted with it (\"people\" "
                    "with \"Person\"), under its most common spelling.")
    edge_types: dict[str, int]
    node_type_spellings: dict[str, list[str]] | None = Field(
        None, description="The other spellings stored of each type in node_types that has some.")
    hint: str | None = None


# -- the reference MCP memory server's shapes (@modelcontextprotocol/server-memory) -------------------------
# Inputs drop unknown fields as the reference does; outputs have exactly the reference's fields, plus
# optional ones that are left out when they carry nothing.


class MemoryEntityInput(_Model):
    """An entity in the reference memory server's shape."""

    model_config = ConfigDict(extra="ignore")
    name: Name = Field(description="The name of the entity")
    entityType: TypeLabel = Field(description="The type of the entity")  # noqa: N815
    observations: list[StoredObservation] = Field(
        max_length=MAX_OBSERVATIONS, description="An array of observation contents associated with the entity"
    )
    # The name as sent, before it was cleaned: the reference skips a stored name only when it is that very string,
    # and keeps "Alice " (a new name there) with its observations; create_entities adds them to "Alice".
    _sent_name: str | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_sent_name(cls, data: Any, handler: Any) -> "MemoryEntityInput":
        entity = handler(data)
        sent = data.get("name") if isinstance(data, dict) else None
        entity._sent_name = sent if isinstance(sent, str) else None
        return entity

    @property
    def sent_name(self) -> str:
        """The name as the caller sent it (the cleaned name, for one built otherwise)."""
        return self.name if self._sent_name is None else self._sent_name


class ObservationAddition(_Model):
    model_config = ConfigDict(extra="ignore")
    entityName: Name = Field(description="The name of the entity to add the observations to")  # noqa: N815
    contents: list[StoredObservation] = Field(
        max_length=MAX_OBSERVATIONS, description="An array of observation contents to add")


#: A name open_nodes and delete_entities look up: blank allowed, as in the reference (no entity has that name, so
#: it is skipped or reported not found, rather than failing the whole call).
LookupName = Annotated[str, StringConstraints(max_length=300)]


class ObservationDeletion(_Model):
    model_config = ConfigDict(extra="ignore")
    entityName: Name = Field(description="The name of the entity containing the observations")  # noqa: N815
    observations: list[str] = Field(max_length=1_000, description="An array of observations to delete")


class MemoryEntity(_Model):
    name: str
    entityType: str  # noqa: N815
    observations: list[str]


class MemoryRelation(_Model):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
    from_: str = Field(alias="from")
    to: str
    relationType: str  # noqa: N815


class GraphEntity(MemoryEntity):
    """An entity as read_graph, search_nodes and open_nodes return it: the reference's shape, plus `description`."""

    description: str | None = Field(
        None, description="Present only when the entity has a description (add_knowledge_graph and extraction "
                          "write one): what it is, in addition to its observations.")


class GraphRelation(MemoryRelation):
    """A relation as read_graph, search_nodes and open_nodes return it: the reference's shape, plus `description`
    and `properties`."""

    description: str | None = Field(
        None, description="Present only when the relation has a description (add_knowledge_graph and extraction "
                          "write one): what the relation says beyond its type, such as the reason for a choice.")
    properties: dict[str, Any] | None = Field(
        None, description="Present only when the relation has properties (add_knowledge_graph stores them).")


class CreatedEntity(MemoryEntity):
    """create_entities' answer for one entity: the reference's shape, plus `merged_into` when it was merged and
    `note` when its name became an alias."""

    merged_into: str | None = Field(
        None, description="Present when an entity of the same name but for case or spacing existed (or, of the "
                          "same type, but for accents and punctuation, or an alias of it): its name. The "
                          "observations listed were added to it (its type is kept).",
    )
    note: str | None = Field(
        None, description="Present when the name was merged other than by case or spacing: it is now an alias of "
                          "the entity, so later calls with it reach that entity; when it was taken, by the "
                          "entityType given, as the entity that has it as an alias rather than the one it names; "
                          "when the entityType given differs from the stored entity's, which was kept; or when the "
                          "name looks the same as a stored entity's but uses other letters: it was stored apart.",
    )


class CreatedRelation(MemoryRelation):
    """create_relations' answer for one relation: the reference's shape, plus `note` when more was done."""

    note: str | None = Field(
        None, description="Present when an end did not exist and was created with entityType 'unknown', when "
                          "an end was taken as the one entity of that name but for accents and punctuation (now "
                          "its alias), when the relation was not stored because both ends are one entity, when "
                          "it had ended and holds again from now, when its source holds another relation of "
                          "its type that this one may replace, or when an end is the name of one entity and an "
                          "alias of others.",
    )


class MemoryEntities(_Model):
    entities: list[CreatedEntity]
    note: str | None = Field(
        None, description="Present when an entity named exactly as a stored one was skipped (as the reference "
                          "skips it) with observations the stored one lacks, which were not added, or with another "
                          "entityType: what to do.")


class MemoryRelations(_Model):
    relations: list[CreatedRelation]


class AddedObservations(_Model):
    entityName: str  # noqa: N815
    addedObservations: list[str]  # noqa: N815


class AddObservationsResult(_Model):
    results: list[AddedObservations]
    note: str | None = Field(
        None, description="Present when a name given is one entity's name and other entities' alias: the "
                          "observations were added to the entity it names; how to move them to another.")


class MemoryGraph(_Model):
    """Entities and relations, as read_graph, search_nodes and open_nodes return them (core/domain/memory_pages.py:
    a page within a token bound)."""

    entities: list[GraphEntity]
    relations: list[GraphRelation]
    next_offset: int | None = Field(
        None, description="Present when more entities remain: pass it as offset to read on."
    )
    relations_truncated: bool | None = Field(
        None, description="Present (true) when an entity too large for one answer is shown with only some of its "
                          "relations."
    )
    observations_truncated: bool | None = Field(
        None, description="Present (true) when an entity too large for one answer is shown with only its first "
                          "observations."
    )
    entities_truncated: bool | None = Field(
        None, description="search_nodes only: present (true) when more entities matched than it reads (1,000)."
    )
    #: What was left out and how to read on: the tools send it as a text block after the JSON (never in it, so the
    #: JSON stays the reference's and the graph resource's).
    note: str | None = Field(None, exclude=True)


class MemoryDeleteResult(DeletedSummary):
    """The reference's {success, message}, with what was deleted and what was not found."""

    success: bool
    message: str


class RemovedObservations(_Model):
    entity: str = Field(description="The entity's stored name.")
    removed: list[str]


class UnmatchedObservation(_Model):
    entity: str = Field(description="The entity's stored name.")
    observation: str = Field(description="The text given, which none of its observations is.")
    nearest: str | None = Field(None, description="Its stored observation most like the text, if one is alike.")


class ObservationsDeleted(_Model):
    """The reference's {success, message}, with what was removed, what matched nothing, and the entities that were
    not found."""

    success: bool
    message: str
    removed: list[RemovedObservations] = Field(default_factory=list, description="Per entity, what was removed.")
    not_found: list[str] = Field(default_factory=list, description="Entity names that match nothing (ignored).")
    unmatched: list[UnmatchedObservation] = Field(
        default_factory=list, description="Observations given that the entity does not hold: nothing was removed "
                                          "for them, so what they meant is still stored.")
    hints: list[str] = Field(default_factory=list, description="When an entity name or an observation matched "
                             "nothing: which, and the stored names it likely meant or the nearest stored observation.")


# -- namespaces (core/domain/namespaces.py) ------------------------------------------------------------------


class NamespaceInfo(_Model):
    name: str
    entities: int
    relations: int
    documents: int
    last_write: str | None = Field(None, description="UTC, ISO 8601; none while it is empty.")
    default: bool = Field(False, description="This server's default namespace.")


class NamespacesResult(_Model):
    namespaces: list[NamespaceInfo]


class NamespaceDeleted(_Model):
    namespace: str
    entities: int
    relations: int
    documents: int
    message: str


class DocumentsDeleted(_Model):
    """What `delete_documents` did (core/domain/documents.py)."""

    deleted: list[str] = Field(default_factory=list, description="The documents deleted, by their stored ids.")
    not_found: list[str] = Field(default_factory=list, description="Ids (as given) that name no document.")
    entities_removed: int = Field(0, description="Entities only these documents supported, deleted with them.")
    relations_removed: int = Field(0, description="Relations only these documents supported, deleted with them.")
    hints: list[str] = Field(default_factory=list, description=(
        "Why an id not found named nothing; an entity only these documents supported that stays because a relation "
        "written by hand has it as an end (with that relation)."))


class DocumentPassage(_Model):
    chunk_id: int
    position: int = Field(description="Its place in the document: 1 for the first passage.")
    section: str = Field("", description="Headings above it: 'Install > Linux'.")
    text: str = Field(description="Its text, without its first `repeats` characters.")
    repeats: int = Field(0, description="How many characters of its start `text` leaves out: those repeating the end "
                         "of the passage shown just before it (passages overlap; a table's passages each repeat its "
                         "header). 0 for the first passage shown, which is whole.")
    cut: bool = Field(False, description="True when it alone takes more than the answer's bound: `text` is cut short.")


class DocumentRead(_Model):
    """What `read_document` shows of a document (core/domain/document_reading.py)."""

    document_id: str = Field(description="As stored.")
    title: str = ""
    time: UtcTime | None = Field(None, description="Its time, if given.")
    passages_total: int = Field(description="How many passages the document has.")
    passages: list[DocumentPassage] = Field(description="Those shown, in document order.")
    previous_chunk_id: int | None = Field(
        None, description="The passage just before the first shown (null: that is the first).")
    next_chunk_id: int | None = Field(
        None, description="The passage just after the last shown (null: that is the last).")
    previous_document: str | None = Field(
        None, description="Shown from its first passage: the document whose text it goes on from (the turn before "
        "in a conversation kept one turn per document, the part before of a long file).")
    previous_document_chunk_id: int | None = Field(
        None, description="The last passage of `previous_document`: read its end from there.")
    next_document: str | None = Field(
        None, description="Shown to its last passage: the document its text goes on in (the next turn, the next part).")
    truncated: bool = Field(description="True when the answer's token bound left out passages asked for.")
    text: str = Field(description="The passages as text, with where to read on.")


# -- communities (core/domain/communities/) ------------------------------------------------------------------


class CommunityFreshness(_Model):
    built_at: str = Field(description="UTC, ISO 8601.")
    changed_share: float = Field(description="Share of the entities and relations written since the build.")
    stale: bool = Field(description="Enough changed that a rebuild is due (it runs in the background).")
    rebuilding: bool


class BuildCommunitiesResult(_Model):
    namespace: str
    communities: int
    levels: int
    entities: int
    relations: int
    reports_written: int = Field(description="Extractive reports written by this build.")
    reports_kept: int = Field(description="Reports of unchanged communities, or stale written ones, kept.")
    written_reports_dropped: int = Field(0, description="Reports a model or the host wrote whose community no "
                                         "longer holds half their members, or lost members to a deletion: replaced "
                                         "by extractive ones.")
    seconds: float
    sampling: str | None = Field(None, description="With community_reports_by_sampling: the reports the host's "
                                 "model wrote through MCP sampling, or why it wrote none.")


class KeyEntity(_Model):
    name: str
    type: str


class CommunityReport(_Model):
    id: int
    level: int
    size: int = Field(description="Entities in the community.")
    title: str
    summary: str
    key_entities: list[KeyEntity]
    author: str = Field(description="extractive, model or host.")
    stale: bool = Field(False, description="Written before its community, or an entity or fact it names, last "
                        "changed.")
    score: float = 0.0


class GlobalSearchResult(_Model):
    query: str
    level: int | None = Field(description="The level whose reports were ranked (0 = coarsest).")
    levels: int
    reports: list[CommunityReport]
    text: str = Field(description="The reports rendered within the token budget.")
    truncated: bool
    freshness: CommunityFreshness | None = None
    hint: str | None = None


class ReportToWrite(_Model):
    id: int
    level: int
    size: int
    stale: bool
    current_title: str
    material: str = Field(description="Entities, facts and passages to summarise.")


class ReportsToWrite(_Model):
    namespace: str
    communities: list[ReportToWrite]
    remaining: int = Field(description="Communities still without a written report after these.")


class ReportsWritten(_Model):
    namespace: str
    written: int
    failed: list[str] = Field(default_factory=list)
    remaining: int
