"""What an import changed and the stored values it replaced: the summary an import returns, and the bookkeeping
that fills it (core/files/import_.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from duckgraph.core.domain.memory_server import PLACEHOLDER_TYPE
from duckgraph.ports import DocumentRecord, EdgeRecord, EdgeWrite, NodeRecord, WriteSummary

#: Entities named in `ImportSummary.values_replaced` (and relations in `relation_values_replaced`, names in
#: `resolved`): enough to see what happened, however long the file.
MAX_REPLACED_LISTED = 20


class ImportSummary(BaseModel):
    """What an import changed. Rows already stored as the file has them count as unchanged."""

    format: Literal["duckgraph", "memory"]
    documents_written: int = 0
    documents_unchanged: int = 0
    chunks_written: int = 0
    nodes_created: int = 0
    nodes_updated: int = 0
    nodes_unchanged: int = 0
    edges_created: int = 0
    edges_updated: int = 0
    edges_unchanged: int = 0
    mentions_added: int = 0
    evidence_added: int = 0
    community_reports_restored: int = 0
    texts_embedded: int = 0
    skipped: list[str] = Field(default_factory=list, description="Lines left out, and why.")
    partly_imported: list[str] = Field(
        default_factory=list,
        description="Lines of a memory server file imported in part: what was left out (observations over a limit, "
                    "a type the tools refuse), by line and position, and why.",
    )
    complete: bool | None = Field(
        None, description="Whether the file held every line its end line counts: true when it did; false when it "
                          "did not and was imported with allow_incomplete; null when that cannot be told (a memory "
                          "server file, or an export written before format version 2, which has no end line).")
    completeness: str = Field(
        "", description="Said when a duckgraph export's completeness cannot be checked, or what an incomplete one "
                        "imported with allow_incomplete lacks.")
    documents_values_replaced: int = Field(
        0, description="Stored documents the file's replaced (same id): their text, title, metadata, time or "
                       "passages were other than the file's, and are gone.")
    documents_replaced: list[str] = Field(
        default_factory=list,
        description=f"The first {MAX_REPLACED_LISTED} of those documents, with the fields replaced: "
                    "\"notes.md (text)\".",
    )
    nodes_values_replaced: int = Field(
        0, description="Stored entities whose name's spelling, type, description, aliases or properties the file's "
                       "replaced (the file's values win): a stored value they held is gone.")
    values_replaced: list[str] = Field(
        default_factory=list,
        description=f"The first {MAX_REPLACED_LISTED} of those entities, with the fields replaced (a name "
                    "respelled with its new spelling): \"Maya Chen (name: 'maya chen', description, aliases)\".",
    )
    edges_values_replaced: int = Field(
        0, description="Stored relations (one period of one each) whose description, weight, properties or dates "
                       "the file's replaced (the file's values win): a stored value they held is gone.")
    relation_values_replaced: list[str] = Field(
        default_factory=list,
        description=f"The first {MAX_REPLACED_LISTED} of those relations, with the fields replaced: "
                    "\"Tom Reyes -WORKS_AT-> Acme Corp (description, weight)\".",
    )
    names_resolved: int = Field(
        0, description="Names in the file that no stored entity has as its name but one stored entity has as an "
                       "alias (or, for an entity line, as its name or an alias up to accents and punctuation, with "
                       "the same type): imported onto that entity, as the tools resolve a name.")
    resolved: list[str] = Field(
        default_factory=list,
        description=f"The first {MAX_REPLACED_LISTED} of those names, with the stored entity each went to: "
                    "\"Bob Smith -> Robert Smith\".",
    )
    homonyms_merged: list[str] = Field(
        default_factory=list,
        description="Entity lines of a memory server file merged into an entity of another type whose name differs "
                    "from theirs only in case or spacing (an earlier line's, or a stored entity's): the reference "
                    "server keeps such names apart; each says how to keep them apart (rename it in the file).",
    )
    placeholders: list[str] = Field(
        default_factory=list,
        description=f"Entities created with type {PLACEHOLDER_TYPE!r} for the missing end of a relation of a memory "
                    "server file, as create_relations creates them.",
    )


_MISSING = object()


def note_replaced(summary: ImportSummary, old: NodeRecord, new: NodeRecord, *, appended: bool = False) -> None:
    """Count (and list the first few of) the stored entities whose stored values the file's replace: the file's
    values win, but a stored value lost that way (another description, an alias or property the file lacks) is
    said, not dropped silently. Filling in a blank field or a placeholder's type loses nothing, and neither does a
    description `appended` to the stored one (a line resolved onto a stored entity, `_merged_into`)."""
    fields = [name for name, lost in (
        (f"name: {new.name!r}", old.name != new.name),  # the same key, spelt otherwise ("maya chen")
        ("type", old.type != new.type and old.type != PLACEHOLDER_TYPE),
        ("description", bool(old.description) and old.description != new.description and not appended),
        ("aliases", bool(set(old.aliases) - set(new.aliases))),
        ("properties", any(new.properties.get(key, _MISSING) != value for key, value in old.properties.items())),
    ) if lost]
    if not fields:
        return
    summary.nodes_values_replaced += 1
    if len(summary.values_replaced) < MAX_REPLACED_LISTED:
        summary.values_replaced.append(f"{old.name} ({', '.join(fields)})")


def note_document_replaced(summary: ImportSummary, old: DocumentRecord, new: DocumentRecord,
                           same_passages: bool) -> None:
    """Count (and list the first few of) the stored documents the file's of the same id replace, as
    `note_replaced` for entities: a title, time or metadata the stored one had and the file's lacks or changes, its
    text, or its passages (the same text cut otherwise: what they held, such as their entities' mentions, goes with
    them)."""
    fields = [name for name, lost in (
        ("text", old.text != new.text),
        ("title", bool(old.title) and old.title != new.title),
        ("metadata", any(new.metadata.get(key, _MISSING) != value for key, value in old.metadata.items())),
        ("time", old.time is not None and old.time != new.time),
        ("passages", old.text == new.text and not same_passages),
    ) if lost]
    if not fields:
        return
    summary.documents_values_replaced += 1
    if len(summary.documents_replaced) < MAX_REPLACED_LISTED:
        summary.documents_replaced.append(f"{old.id} ({', '.join(fields)})")


def note_edge_replaced(summary: ImportSummary, label: str, old: EdgeRecord, new: EdgeWrite) -> None:
    """As `_note_replaced`, for a stored period of a relation the file's line writes over: a start or an end the
    stored period had and the line moves (a reopened relation loses its end) is lost too; a start or end the
    stored period lacked is filled in."""
    fields = [name for name, lost in (
        ("description", bool(old.description) and old.description != new.description),
        ("weight", old.weight != new.weight),
        ("properties", any(new.properties.get(key, _MISSING) != value for key, value in old.properties.items())),
        ("valid_from", old.valid_from is not None and old.valid_from != new.valid_from),
        ("valid_until", old.valid_until is not None and old.valid_until != new.valid_until),
    ) if lost]
    if not fields:
        return
    summary.edges_values_replaced += 1
    if len(summary.relation_values_replaced) < MAX_REPLACED_LISTED:
        summary.relation_values_replaced.append(f"{label} ({', '.join(fields)})")


def note_resolved(summary: ImportSummary, name: str, into: str) -> None:
    """Count (and list the first few of) the file's names taken as a stored entity's alias."""
    summary.names_resolved += 1
    if len(summary.resolved) < MAX_REPLACED_LISTED:
        summary.resolved.append(f"{name} -> {into}")


def add_written(summary: ImportSummary, written: WriteSummary) -> None:
    summary.documents_written += written.documents_written
    summary.chunks_written += written.chunks_written
    summary.nodes_created += written.nodes_created
    summary.nodes_updated += written.nodes_updated
    summary.edges_created += written.edges_created
    summary.edges_updated += written.edges_updated
    summary.mentions_added += written.mentions_added
    summary.evidence_added += written.evidence_added
