"""How a merge joins the periods of one relation: the store does it as it merges (the DuckDB store's
`_apply_merges`), and the web UI's merge preview asks it what the merge will fold, so both say the same."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def joined_periods(rows: list[tuple], now: datetime) -> tuple[dict[int, int], dict[int, tuple]]:
    """Of edges (id, namespace, source, target, type, valid_from, valid_until), oldest first: which go into which
    kept one (id -> kept id) because their periods overlap, transitively, and the kept ones' joined periods
    (kept id -> (valid_from, valid_until); None extends the union: no known start, or no end). Periods that have
    begun by `now` and those that have not are joined apart (see the DuckDB store's `_apply_merges`)."""
    groups: dict[tuple, list[tuple]] = {}
    for row in rows:
        begun = row[5] is None or row[5] <= now
        groups.setdefault((*row[1:5], begun), []).append(row)
    joined: dict[int, int] = {}
    periods: dict[int, tuple] = {}
    for group in groups.values():
        group.sort(key=lambda r: (r[5] is not None, r[5] or now))
        clusters: list[list[Any]] = []  # [ids, start, end]
        for row in group:
            if clusters and overlap((clusters[-1][1], clusters[-1][2]), (row[5], row[6])):
                last = clusters[-1]
                last[0].append(row[0])
                last[2] = None if last[2] is None or row[6] is None else max(last[2], row[6])
            else:
                clusters.append([[row[0]], row[5], row[6]])
        own = {row[0]: (row[5], row[6]) for row in group}
        for ids, start, end in clusters:
            keep = min(ids)
            joined.update((i, keep) for i in ids if i != keep)
            if own[keep] != (start, end):
                periods[keep] = (start, end)
    return joined, periods


def overlap(a: tuple[datetime | None, datetime | None], b: tuple[datetime | None, datetime | None]) -> bool:
    """Whether two periods [from, until) share a moment (None: no known start, or no end)."""
    def before(start: datetime | None, end: datetime | None) -> bool:
        return start is None or end is None or start < end

    return before(a[0], b[1]) and before(b[0], a[1]) and before(*a) and before(*b)
