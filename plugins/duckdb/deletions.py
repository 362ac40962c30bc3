"""The log of what writes delete (table `deletions`, schema.py), for recent_changes: the rows themselves are gone, so
each deletion is recorded as words (a label), in the write's transaction, before its rows go; so are the
property values a write replaces (`property_changes`). The words follow the rule of the texts core shows
(`ports.text.as_field`): a stored name, type, key or value that holds a delimiter of its place in the line is
written as a JSON string, so that it cannot fake another field ("dx: (none) -> a; clearance: top-secret")."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from duckgraph.plugins.duckdb import sql
from duckgraph.plugins.duckdb.schema import LABEL_CHARS, NAMED_PER_WRITE
from duckgraph.ports import entity_key
from duckgraph.ports.text import (
    DOCUMENT_ID_DELIMITERS,
    FACT_NAME_DELIMITERS,
    KEY_DELIMITERS,
    NAME_DELIMITERS,
    VALUE_DELIMITERS,
    as_field,
    entity_header,
    shortened,
)

#: The lines that tell what an entity held (the texts of its observations and property values, which no other line
#: keeps): deleting the entity deletes them (`forget_contents`). Its "entity deleted" line stays, and so do the lines
#: of its facts and merges, which name it.
CONTENTS = ("properties changed", "type changed", "observations deleted")
#: The type an entity was created with, recorded (row of this kind, label "<node id> <type>") by the first write that
#: changes it, so that its "entity created" line names the type it was created with: no line of its own
#: (reads.py `changes` leaves it out), and it goes with its entity (`forget_created_types`).
CREATED_TYPE = "type at creation"
#: The name at the head of a line of `CONTENTS` ("Name [Type]: ..."): the JSON string `entity_header` wrote, else
#: the text before " [" (bare, as older versions wrote every name); "" where the line was cut before its type.
_HEAD = ("CASE WHEN starts_with(label, '\"') THEN regexp_extract(label, $1, 1) "
         "WHEN contains(label, ' [') THEN split_part(label, ' [', 1) ELSE '' END")
_QUOTED_HEAD = r'^("(?:[^"\\]|\\.)*") \['
#: Where a property's old or new value ends in a "properties changed" line ("key: old -> new; key: ...").
_CHANGE_VALUE_DELIMITERS = (*VALUE_DELIMITERS, " -> ")
#: What a "properties changed" line says of a property an entity did not have, or no longer has.
_ABSENT = "(none)"


def record(con: Any, kind: str, rows: str, params: list[Any], now: datetime, label: Callable[..., str]) -> None:
    """Record in `deletions` what this write deletes (or replaces): `rows`, a query of (namespace, position,
    *parts) whose parameters (`params`) are $1 on, each thing once, and `label`, which words a thing from its parts.
    Run before its rows go, in the write's transaction. Per namespace the first `NAMED_PER_WRITE` (by position) are
    named, the others counted in one row; labels are cut to `LABEL_CHARS` (a document's id, at most as long, stays
    whole: recent_changes matches a replaced document by it). Two statements whatever the count: at most
    `NAMED_PER_WRITE` + 1 things per namespace are read back to be worded."""
    found = con.execute(
        "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY namespace ORDER BY position) AS named_as, "
        f"count(*) OVER (PARTITION BY namespace) AS named_of FROM ({rows})) WHERE named_as <= {NAMED_PER_WRITE + 1}",
        params).fetchall()
    if not found:
        return
    labels = [label(*row[2:-2]) if row[-2] <= NAMED_PER_WRITE or row[-1] == NAMED_PER_WRITE + 1
              else f"… and {row[-1] - NAMED_PER_WRITE:,} more, not named one by one" for row in found]
    written, values = sql.rows(3, namespace=("VARCHAR", [row[0] for row in found]),
                               label=("VARCHAR", [text[:LABEL_CHARS] for text in labels]))
    con.execute(f"INSERT INTO deletions SELECT namespace, $1, $2, label FROM {written}", [now, kind, *values])


def forget(con: Any, spans: Sequence[tuple[str, datetime | None, datetime | None]]) -> int:
    """Delete the lines of the log of each (namespace, since, until) of `spans` recorded in [since, until) (None: no
    bound): a namespace deleted whole, or `duckgraph changes forget` (`WriteBatch.forget_deletions`). Inside the
    caller's transaction and after its last `record`: the labels hold the texts that went (observations, property
    values). Returns how many lines went."""
    gone = 0
    for namespace, since, until in spans:
        # The types entities were created with go too (their lines then name the type they have), uncounted: no
        # line of the log shows them.
        span = ("FROM deletions WHERE namespace = $1 AND deleted_at >= coalesce($2::TIMESTAMP, "
                "'-infinity'::TIMESTAMP) AND deleted_at < coalesce($3::TIMESTAMP, 'infinity'::TIMESTAMP)")
        params = [namespace, sql.naive_utc(since), sql.naive_utc(until)]
        gone += con.execute(f"SELECT count(*) {span} AND kind <> $4", [*params, CREATED_TYPE]).fetchone()[0]
        con.execute(f"DELETE {span}", params)
    return gone


def forget_contents(con: Any, ids: list[int], deleted: list[int], skipped: Sequence[str]) -> None:
    """Delete the lines of `CONTENTS` about the nodes `ids`, which this write deletes (`deleted`: all the nodes it
    deletes, merged ones included), before they go: what a deleted entity held is not to outlive it in the log
    ("What was deleted is gone from the other lines", docs/time.md). A line is found by the name it was written under:
    the entity's name or one of its aliases (a renamed entity's old name, a merged one's), unless an entity this
    write keeps answers to that name too (the line may be about it). Those of the namespaces `skipped` go whole with
    their log (`forget`)."""
    if not ids:
        return
    named = con.execute(
        f"SELECT namespace, name, aliases FROM nodes WHERE id IN (SELECT unnest({sql.JSON_IDS % 1})) "
        f"AND namespace NOT IN (SELECT unnest({sql.JSON_NAMES % 2}))", [sql.json_list(ids), sql.json_list(skipped)]
    ).fetchall()
    names = {(namespace, name) for namespace, first, aliases in named for name in (first, *aliases)}
    if not names:
        return
    keys, params = sql.rows(2, ns=("VARCHAR", [ns for ns, _ in names]),
                            key=("VARCHAR", [entity_key(name) for _, name in names]))
    kept = set(con.execute(
        f"SELECT DISTINCT namespace, key FROM node_names WHERE node_id NOT IN (SELECT unnest({sql.JSON_IDS % 1})) "
        f"AND (namespace, key) IN (SELECT ns, key FROM {keys})", [sql.json_list(deleted), *params]).fetchall())
    # Each name as `entity_header` writes it, and bare (older lines).
    heads = {(ns, head) for ns, name in names if (ns, entity_key(name)) not in kept
             for head in (as_field(name, NAME_DELIMITERS), name)}
    if not heads:
        return
    listed, params = sql.rows(2, ns=("VARCHAR", [ns for ns, _ in heads]), head=("VARCHAR", [h for _, h in heads]))
    kinds = ", ".join(f"'{kind}'" for kind in CONTENTS)
    con.execute(f"DELETE FROM deletions WHERE kind IN ({kinds}) AND (namespace, {_HEAD}) IN "
                f"(SELECT ns, head FROM {listed})", [_QUOTED_HEAD, *params])
    # A line cut within its head (a name near `LABEL_CHARS` long) is the start of the head and of the type's bracket.
    con.execute(f"DELETE FROM deletions WHERE kind IN ({kinds}) AND {_HEAD} = '' AND EXISTS (SELECT 1 FROM {listed} "
                "WHERE w.ns = deletions.namespace AND starts_with(w.head || ' [', deletions.label))",
                [_QUOTED_HEAD, *params])


def period(edge: str) -> str:
    """SQL for the period of a fact (the table's alias `edge`) as recent_changes words it (moments.py `period`), in
    brackets after a space, or '' when it has none: " (since 2024-06)"."""
    def short(moment: str) -> str:  # `moments.short`: the date, or to the minute, or to the second (marked UTC)
        return (f"CASE WHEN {moment} = date_trunc('day', {moment}) THEN strftime({moment}, '%Y-%m-%d') "
                f"WHEN {moment} = date_trunc('minute', {moment}) THEN strftime({moment}, '%Y-%m-%d %H:%M UTC') "
                f"ELSE strftime({moment}, '%Y-%m-%d %H:%M:%S UTC') END")

    start, end = f"{edge}.valid_from", f"{edge}.valid_until"
    return (f"CASE WHEN {start} IS NULL AND {end} IS NULL THEN '' "
            f"WHEN {end} IS NULL THEN ' (since ' || {short(start)} || ')' "
            f"WHEN {start} IS NULL THEN ' (until ' || {short(end)} || ')' "
            f"ELSE ' (' || {short(start)} || ' to ' || {short(end)} || ')' END")


def fact_label(source: str, type_: str, target: str, when: str) -> str:
    """A fact as recent_changes words one (core/domain/render.py `shown_fact`, without its description), with its
    `period`: "Ada works at Acme (since 2024-06)"."""
    return (f"{as_field(source, FACT_NAME_DELIMITERS)} {type_.replace('_', ' ').lower()} "
            f"{as_field(target, FACT_NAME_DELIMITERS)}{when}")


def document_label(document_id: str) -> str:
    """A deleted document: its id, as recent_changes shows a document's id in its other lines (`history.py`): a JSON
    string where it holds ": " ("notes.md: Payroll approved" would read as the document notes.md and its title).
    Quoted, an id near `LABEL_CHARS` long is cut as other long labels are (`record`)."""
    return as_field(document_id, DOCUMENT_ID_DELIMITERS)


def merged_label(name: str, type_: str, target: str, moved: int | None) -> str:
    """A merged entity: "Payments Squad [Team] into Payments Team (2,153 relations moved)"."""
    count = f" ({moved:,} relation{'' if moved == 1 else 's'} moved)" if moved else ""
    return f"{entity_header(name, type_)} into {as_field(target, FACT_NAME_DELIMITERS)}{count}"


def observations_label(name: str, type_: str, texts: Sequence[str]) -> str:
    """Observations of an entity, one line for all: "Ada [Person]: text; text" (a text holding "; " would read as
    two, and is a JSON string)."""
    return f"{entity_header(name, type_)}: " + "; ".join(as_field(text, VALUE_DELIMITERS) for text in texts)


#: A property an entity does not have, before or after a write (`property_changes`).
_NONE = object()


def property_changes(name: str, type_: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """The properties a write changes, as the log names them ("Ada [Person]: role: SRE -> lead; tier: (none) ->
    gold"); "" when none changed."""
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k, _NONE) != after.get(k, _NONE)]
    if not keys:
        return ""
    return f"{entity_header(name, type_)}: " + "; ".join(
        f"{as_field(key, KEY_DELIMITERS)}: {_value(before.get(key, _NONE))} -> {_value(after.get(key, _NONE))}"
        for key in keys)


def type_change(name: str, before: str, after: str) -> str:
    """The type a write replaces, as the log names it, as a property's: "Jordan [Person]: Country -> Person"."""
    return f"{entity_header(name, after)}: {_value(before)} -> {_value(after)}"


def record_created_types(con: Any, changed: Sequence[tuple[str, int, str]], now: datetime) -> None:
    """Record the type each of `changed` (namespace, node id, its type before this write) was created with: the
    type before its first change, so only where none was recorded yet (`CREATED_TYPE`). A change an older duckgraph
    made was not recorded: for an entity it changed, this is the type before the first change recorded."""
    if not changed:
        return
    rows, params = sql.rows(3, ns=("VARCHAR", [ns for ns, _, _ in changed]),
                            label=("VARCHAR", [f"{node} {type_}" for _, node, type_ in changed]))
    con.execute(f"INSERT INTO deletions SELECT ns, $1, $2, label FROM {rows} WHERE NOT EXISTS (SELECT 1 FROM "
                "deletions d WHERE d.kind = $2 AND d.namespace = w.ns AND split_part(d.label, ' ', 1) = "
                "split_part(w.label, ' ', 1))", [now, CREATED_TYPE, *params])


def forget_created_types(con: Any, ids: list[int]) -> None:
    """Delete the types the nodes `ids`, which this write deletes, were created with (`CREATED_TYPE`)."""
    if ids:
        con.execute(f"DELETE FROM deletions WHERE kind = $2 AND split_part(label, ' ', 1) IN (SELECT unnest("
                    f"{sql.JSON_IDS % 1})::VARCHAR)", [sql.json_list(ids), CREATED_TYPE])


def _value(value: Any) -> str:
    """A property's value as the log names it: a string bare (unless it holds a delimiter of its place, or is the
    word for none), other values as JSON, cut short."""
    if value is _NONE:
        return _ABSENT
    if not isinstance(value, str):
        return shortened(json.dumps(value, ensure_ascii=False), 60)
    text = shortened(value, 60)
    return json.dumps(text, ensure_ascii=False) if text == _ABSENT else as_field(text, _CHANGE_VALUE_DELIMITERS)
