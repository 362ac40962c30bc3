"""Time: ending facts (kept as history) and listing what changed."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from duckgraph.core.domain.moments import iso_utc, now, period, short
from duckgraph.core.domain.namespaces import empty_namespace_hint
from duckgraph.core.domain.render import entity_header, estimate_tokens, shown_fact
from duckgraph.core.domain.texts import fact_sentence
from duckgraph.ports import ChangeRecord, InvalidInputError, WriteBatch
from duckgraph.ports.text import DOCUMENT_ID_DELIMITERS, as_field, one_line

if TYPE_CHECKING:
    from duckgraph.core.domain.knowledge_base import KnowledgeBase
    from duckgraph.core.domain.model import ChangesResult, EndRelationInput, RelationsEnded

MAX_CHANGES = 1_000
#: How far recent_changes pages into a span (each page is read from the start).
MAX_CHANGES_OFFSET = 100_000
#: end_relations' hint for an `ended_at` still to come: the fact is not ended yet, and reads as current until then.
PLANNED_END = ("{relation}: ended_at {ended_at} is still to come, so it is a planned end (as a valid_until to come "
               "is): the relation holds, and search shows it as current, until then. To end it now, leave ended_at "
               "out")


def end_relations(kb: KnowledgeBase, relations: Sequence[EndRelationInput], namespace: str) -> RelationsEnded:
    """Close the current relations matching each of `relations` at its `ended_at` (default: now), in one
    transaction; they stay as history. A moment before a relation's start, or a relation named twice, is refused
    and nothing is ended. An `ended_at` still to come is a planned end, as a `valid_until` to come is on write: the
    relation holds until then, and a hint says so."""
    from duckgraph.core.domain.model import EndedRelation, RelationRef, RelationsEnded

    moment = now()
    with kb.writing(vectors=False) as writer:
        found, _ = kb.curation.resolve([n for r in relations for n in (r.source, r.target)], namespace)
        ending: dict[int, tuple[datetime, EndedRelation]] = {}
        asked: dict[int, int] = {}  # edge id -> the item that matched it
        missing: list[RelationRef] = []
        planned: list[str] = []
        for i, relation in enumerate(relations):
            source, target = found.get(relation.source), found.get(relation.target)
            ended_at = relation.ended_at or moment
            matches = ([] if source is None or target is None
                       else kb.curation.relations_not_ended(source, target, relation.type, namespace))
            # A period whose end is due by ended_at ends then already: ending it at ended_at would move its end
            # later (over the period after it). Alone, it is refused below.
            due = [e for e in matches if e.valid_until is not None and e.valid_until <= ended_at]
            matches = [e for e in matches if e not in due]
            # A planned period that starts at ended_at or after stays, beside one that has begun before then;
            # alone, it is refused below (ended before it started, or as it started).
            matches = [e for e in matches if e.valid_from is None or e.valid_from < ended_at] or matches
            if due and not matches:
                last = max(e.valid_until for e in due if e.valid_until is not None)
                raise InvalidInputError(
                    f"relations[{i}] ({relation.label()}): it already ends on {short(last)}, by ended_at "
                    f"{short(ended_at)}: to end it earlier, give an ended_at before that; nothing was ended")
            for edge in matches:
                if edge.id in asked:  # two items, perhaps spelt differently: which ended_at is meant is unclear
                    raise InvalidInputError(
                        f"relations[{asked[edge.id]}] and relations[{i}] name the same relation ({source.name} "
                        f"-{edge.type}-> {target.name}): end each relation once per call; nothing was ended")
                asked[edge.id] = i
                if edge.valid_from is not None and ended_at < edge.valid_from:
                    raise InvalidInputError(
                        f"relations[{i}] ({relation.label()}): ended_at {short(ended_at)} is before the relation "
                        f"started ({short(edge.valid_from)}); nothing was ended")
                if ended_at == edge.valid_from:  # the end is exclusive: the period would hold at no moment
                    # As the argument takes it: a date alone, else the exact moment ("... UTC" is not taken).
                    start = short(ended_at) if ended_at.time() == datetime.min.time() else iso_utc(ended_at)
                    raise InvalidInputError(
                        f"relations[{i}] ({relation.label()}): ended_at {short(ended_at)} is when the relation "
                        "started: ended then, it would never have held (the end is exclusive). If it never held, "
                        f"delete it: delete_relations with valid_from {start}; nothing was ended")
                ending[edge.id] = (ended_at, EndedRelation(source=source.name, target=target.name, type=edge.type,
                                                           valid_from=edge.valid_from, valid_until=ended_at))
            if not matches:
                missing.append(RelationRef(source=relation.source, target=relation.target, type=relation.type))
            elif ended_at > moment:
                planned.append(PLANNED_END.format(relation=relation.label(), ended_at=short(ended_at)))
        if ending:
            writer.commit(WriteBatch(end_edges=[(edge_id, at) for edge_id, (at, _) in ending.items()]))
    return RelationsEnded(ended=[ended for _, ended in ending.values()], not_found=missing,
                          hints=[*planned, *kb.curation.relation_hints(missing, namespace, ending=True)])


def recent_changes(
    kb: KnowledgeBase, namespace: str, *, since: datetime | None = None, until: datetime | None = None,
    limit: int = 50, offset: int = 0, token_budget: int = 2_000,
) -> ChangesResult:
    """What was written in [since, until), newest first, deletions included: the `limit` changes after the first
    `offset`, all of them in `changes`, as many as fit `token_budget` in `text`."""
    from duckgraph.core.domain.model import Change, ChangesResult

    _check_span(since, until)
    if not 1 <= limit <= MAX_CHANGES:
        raise InvalidInputError(f"limit must be between 1 and {MAX_CHANGES}")
    if not 0 <= offset <= MAX_CHANGES_OFFSET:
        raise InvalidInputError(f"offset must be between 0 and {MAX_CHANGES_OFFSET}")
    kb.open()
    # Paged by position, not by moment: the changes of one write share their moment, so no since/until can split
    # them. Each page is read from the start (as get_entities' relations are).
    every = kb.store.changes(namespace, since, until, offset + limit + 1)
    records = every[offset:]
    more = len(records) > limit
    records = records[:limit]
    subjects = _subjects(kb, records, namespace)
    changes = [Change(at=r.at, change=r.kind, subject=subject) for r, (subject, _) in zip(records, subjects)]
    lines, used = [], 0
    for change, (_, shown) in zip(changes, subjects):
        # Marked UTC, as every time of day the text shows: read bare, it passes for the reader's local time. The
        # subject on one line: a description's or observation's line breaks would print changes of their own.
        line = f"- {change.at.strftime('%Y-%m-%d %H:%M:%S')} UTC {change.change}: {one_line(shown)}"
        used += estimate_tokens(line) + 1
        if used > token_budget:
            break
        lines.append(line)
    next_offset = offset + limit if more else None
    text = "\n".join(lines) if lines or changes else _no_changes(kb, namespace, offset, len(every))
    # The text is cut to its budget, the structured result never is: the note says where the text goes on.
    if len(lines) < len(changes):
        text += (f"\n({len(changes) - len(lines)} more of these changes are in the structured result; "
                 f"offset={offset + len(lines)} lists them from here, with the same since and until)")
    elif more:
        text += f"\n(more changes: offset={next_offset} lists the next ones, with the same since and until)"
    return ChangesResult(changes=changes, text=text, truncated=more, next_offset=next_offset)


def forget_changes(kb: KnowledgeBase, namespace: str, *, since: datetime | None = None,
                   until: datetime | None = None) -> int:
    """Delete the namespace's record of what writes deleted or replaced (recent_changes' lines of what was deleted,
    merged or replaced, and of observations deleted and properties changed: the only lines that keep texts the
    memory no longer holds), that of [since, until) or all of it, in one transaction; return how many lines went.
    The other lines are read from what the memory holds, and stay."""
    _check_span(since, until)
    with kb.writing(vectors=False) as writer:
        return writer.commit(WriteBatch(forget_deletions=[(namespace, since, until)])).deletions_forgotten


def _check_span(since: datetime | None, until: datetime | None) -> None:
    if since is not None and until is not None and until <= since:
        raise InvalidInputError(f"until ({short(until)}) must be after since ({short(since)})")


def _subjects(kb: KnowledgeBase, records: list[ChangeRecord], namespace: str) -> list[tuple[str, str]]:
    """What each change is about, in words: an entity "Name [Type]", a fact's sentence and period, a document's
    id and title; what was deleted, as the store recorded it then (its rows are gone). Each as the structured
    result keeps it (as stored) and as the text shows it (a name or id holding a delimiter of its place quoted,
    `ports.text.as_field`)."""
    store = kb.store
    edges = {e.id: e for e in store.get_edges([r.edge_id for r in records if r.edge_id is not None])}
    node_ids = {r.node_id for r in records if r.node_id is not None}
    node_ids |= {i for e in edges.values() for i in (e.source_id, e.target_id)}
    nodes = {n.id: n for n in store.get_nodes(node_ids)}
    titles = store.document_titles({r.document_id for r in records if r.document_id is not None}, namespace)
    subjects = []
    for record in records:
        if record.label is not None and record.document_id is None:
            subjects.append((record.label, record.label))
        elif record.edge_id is not None and record.edge_id in edges:
            edge = edges[record.edge_id]
            names = [nodes[i].name if i in nodes else "?" for i in (edge.source_id, edge.target_id)]
            # "fact added" shows the fact as it was added: a row written since (ended, updated) may have gained its
            # end later, which the row no longer tells, so its end is shown only while the row is as created.
            as_created = record.kind != "fact added" or edge.updated_at == edge.created_at
            when = period(edge.valid_from, edge.valid_until if as_created else None)
            note = f" ({when})" if when else ""
            subjects.append((fact_sentence(names[0], edge.type, names[1], edge.description) + note,
                             shown_fact(names[0], edge.type, names[1], edge.description) + note))
        elif record.node_id is not None and record.node_id in nodes:
            node = nodes[record.node_id]
            subjects.append((f"{node.name} [{node.type}]", entity_header(node.name, node.type)))
        elif record.document_id is not None:
            title = titles.get(record.document_id, "")
            title = f": {title}" if title else ""
            subjects.append((record.document_id + title, as_field(record.document_id, DOCUMENT_ID_DELIMITERS) + title))
        else:
            subjects.append(("(deleted since)", "(deleted since)"))
    return subjects


def check_window(after: datetime | None, before: datetime | None) -> None:
    """Refuse a search window that ends before it starts."""
    if after is not None and before is not None and before <= after:
        raise InvalidInputError(f"before ({short(before)}) must be later than after ({short(after)})")


def _no_changes(kb: KnowledgeBase, namespace: str, offset: int, total: int) -> str:
    """Why a page of changes is empty: the offset is past them (with how many there are), or the namespace holds
    nothing (a misspelt one), or nothing was written in the span."""
    if offset and total:
        return f"offset={offset} is past the {total} change{'s' if total > 1 else ''} of that span."
    return empty_namespace_hint(kb, namespace) or "No changes in that span."
