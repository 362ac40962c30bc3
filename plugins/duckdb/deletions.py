"""The log of what writes delete (table `deletions`, schema.py), for recent_changes: the rows themselves are gone, so
each deletion is recorded as words (a label), in the write's transaction, before its rows go; so are the
property values a write replaces (`property_changes`)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from duckgraph.plugins.duckdb.schema import LABEL_CHARS, NAMED_PER_WRITE
from duckgraph.ports.text import shortened


def record(con: Any, kind: str, rows: str, params: list[Any], now: datetime) -> None:
    """Record in `deletions` what this write deletes (or replaces): `rows`, a query of (namespace, label,
    position) whose parameters (`params`) are $3 on, each thing once. Run before its rows go, in the write's
    transaction. Per namespace the first `NAMED_PER_WRITE` (by position) are named, the others counted in one
    row; labels are cut to `LABEL_CHARS` (a document's id, at most as long, stays whole: recent_changes matches
    a replaced document by it). One statement, whatever the count."""
    con.execute(
        f"INSERT INTO deletions SELECT namespace, $1, $2, CASE WHEN n <= {NAMED_PER_WRITE} "
        f"OR total = {NAMED_PER_WRITE + 1} THEN left(label, {LABEL_CHARS}) "
        f"ELSE format('… and {{:,}} more, not named one by one', total - {NAMED_PER_WRITE}) END FROM "
        "(SELECT namespace, label, row_number() OVER (PARTITION BY namespace ORDER BY position) AS n, "
        f"count(*) OVER (PARTITION BY namespace) AS total FROM ({rows})) WHERE n <= {NAMED_PER_WRITE + 1}",
        [now, kind, *params])


def forget(con: Any, namespaces: list[str]) -> None:
    """Delete the log of `namespaces` (deleted whole, `WriteBatch.forget_deletions`), inside the caller's
    transaction and after its last `record`: the labels hold the texts that went (observations, property values)."""
    if namespaces:
        con.execute("DELETE FROM deletions WHERE namespace IN (SELECT unnest($1::VARCHAR[]))", [namespaces])


def fact_label(edge: str, source: str, target: str) -> str:
    """SQL for the label of a fact (the tables' aliases `edge`, `source`, `target`), as recent_changes words a fact
    (core/domain/texts.py `fact_sentence`, moments.py `period`, without its description): "Ada works at Acme
    (since 2024-06)"."""
    def short(moment: str) -> str:  # `moments.short`: the date, or to the minute, or to the second (marked UTC)
        return (f"CASE WHEN {moment} = date_trunc('day', {moment}) THEN strftime({moment}, '%Y-%m-%d') "
                f"WHEN {moment} = date_trunc('minute', {moment}) THEN strftime({moment}, '%Y-%m-%d %H:%M UTC') "
                f"ELSE strftime({moment}, '%Y-%m-%d %H:%M:%S UTC') END")

    start, end = f"{edge}.valid_from", f"{edge}.valid_until"
    return (f"{source}.name || ' ' || lower(replace({edge}.type, '_', ' ')) || ' ' || {target}.name || CASE "
            f"WHEN {start} IS NULL AND {end} IS NULL THEN '' "
            f"WHEN {end} IS NULL THEN ' (since ' || {short(start)} || ')' "
            f"WHEN {start} IS NULL THEN ' (until ' || {short(end)} || ')' "
            f"ELSE ' (' || {short(start)} || ' to ' || {short(end)} || ')' END")


def node_label(node: str) -> str:
    """SQL for the label of an entity (the table's alias `node`), as recent_changes shows one: "Ada [Person]"."""
    return f"{node}.name || ' [' || {node}.type || ']'"


#: A property an entity does not have, before or after a write (`property_changes`).
_NONE = object()


def property_changes(before: dict[str, Any], after: dict[str, Any]) -> str:
    """The properties a write changes, as the log names them ("role: SRE -> lead; tier: (none) -> gold"); "" when
    none changed."""
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k, _NONE) != after.get(k, _NONE)]
    return "; ".join(f"{key}: {_value(before.get(key, _NONE))} -> {_value(after.get(key, _NONE))}" for key in keys)


def _value(value: Any) -> str:
    """A property's value as the log names it: a string bare, other values as JSON, cut short."""
    if value is _NONE:
        return "(none)"
    return shortened(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), 60)
