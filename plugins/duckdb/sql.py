"""How the store's statements bind values: a column of values as one JSON array unnested in SQL, not one
parameter per value (DuckDB binds a Python list parameter element by element, slowly); and times as naive UTC."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

#: A list parameter bound as JSON text and unpacked in SQL (`JSON_IDS % n` for $n).
JSON_IDS = "from_json($%d, '[\"BIGINT\"]')"
JSON_NAMES = "from_json($%d, '[\"VARCHAR\"]')"


def json_list(values: Iterable[Any]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def rows(first: int, **columns: tuple[str, list[Any]]) -> tuple[str, list[str]]:
    """A subquery `w` yielding the given columns row by row, and its parameters ($first, $first+1, ...).

    Each column is bound as one JSON array and unnested in SQL: one parameter per column, not per value.
    Times are naive UTC datetimes (or None).
    """
    selects, params = [], []
    for position, (name, (sql_type, values)) in enumerate(columns.items(), start=first):
        if sql_type == "TIMESTAMP":
            values = [None if v is None else v.isoformat(timespec="microseconds") for v in values]
        element = f'["{sql_type[:-2]}"]' if sql_type.endswith("[]") else f'"{sql_type}"'
        selects.append(f"unnest(from_json(${position}, '[{element}]')) AS {name}")
        params.append(json.dumps(values, ensure_ascii=False, allow_nan=False))
    return f"(SELECT {', '.join(selects)}) w", params


def insert_pairs(con: Any, table: str, pairs: set[tuple[int, int]]) -> None:
    if pairs:
        selected, params = rows(1, a=("BIGINT", [a for a, _ in pairs]), b=("BIGINT", [b for _, b in pairs]))
        con.execute(f"INSERT OR IGNORE INTO {table} SELECT a, b FROM {selected}", params)


def now() -> datetime:
    """Times are stored as naive UTC (TIMESTAMP): reading TIMESTAMPTZ back would need pytz."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def holds_at(moment: str, alias: str = "") -> str:
    """SQL true for an edge (of the table named `alias`, if given) that holds at `moment` (a parameter such as
    "$2", bound to a naive UTC time): started, or with no start, and not yet ended. The mirror's `holding`
    applies the same rule to what search shows, so counts and listings agree with it."""
    column = f"{alias}." if alias else ""
    return (f"({column}valid_from IS NULL OR {column}valid_from <= {moment}) "
            f"AND ({column}valid_until IS NULL OR {column}valid_until > {moment})")


def naive_utc(moment: datetime | None) -> datetime | None:
    """Times are compared as naive UTC, as they are stored."""
    if isinstance(moment, datetime) and moment.tzinfo is not None:  # (a search's TimeFilter is naive UTC already)
        return moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def quoted(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'
