"""The periods of one relation as the store keeps them: which stored period a write names (which overlapping
periods a merge joins is ports/periods.py's, since the web UI's merge preview asks it too), and the refusal of a write whose period would overlap another of the same relation (the
periods of one relation never share a moment, so a search at any moment lists a fact once)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from duckgraph.ports import EdgeWrite, InvalidInputError
from duckgraph.ports.periods import overlap as _overlap


def matching_edge(rows: list[list[Any]], valid_from: datetime | None, valid_until: datetime | None,
                   now: datetime) -> list[Any] | None:
    """Which stored edge of one (namespace, source, target, type) a write updates (rows as `_edges_between` gives
    them): the one with exactly the given period (an exported row written again, or a rewrite that names its row by
    its period); else the one that has not ended by `now` (as search sees it: an end still to come is current; one
    that holds now before one that has not begun), unless the write's period shares no moment with it: one that
    ends by its start or starts at its end is another period of the relation (a past one before it, a later one
    after it), never a rewrite that would lose it. Nor is a write that gives both dates of a period apart from now
    (`apart_from_now`) a rewrite of the one that holds now: it is another period, refused by `check_period` where
    it overlaps that one, so that the fact that holds now is never lost without a word. None: the write adds an
    edge (a new period)."""
    for row in rows:
        if (row[4], row[5]) == (valid_from, valid_until):
            return row
    apart = apart_from_now(valid_from, valid_until, now)
    current = [row for row in rows if (row[5] is None or row[5] > now)
               and not (apart and (row[4] is None or row[4] <= now))
               and (valid_until is None or row[4] is None or row[4] < valid_until)
               and (valid_from is None or row[5] is None or valid_from < row[5])]
    return min(current, key=lambda row: row[4] is not None and row[4] > now, default=None)


def starts_new_version(row: list[Any], valid_from: datetime | None, properties: str, description: str) -> bool:
    """Whether a write that `matching_edge` sent to the stored period `row` tells the fact changed from
    `valid_from` on: it starts later than the row (a row with no known start counts as holding before any date;
    a row named by its exact period never starts earlier) and says something else (`properties`: the row's
    properties merged with the write's, as JSON; `description`: the write's, "" when it gives none). Such a write
    ends the row at `valid_from`, kept as history with its own provenance, and adds a period of its own: moving
    the row's start in place would lose what held before (a search as of then would find nothing). The same words
    with a later start only restate the fact, and update the row as before."""
    if valid_from is None or (row[4] is not None and valid_from <= row[4]):
        return False
    return json.loads(properties) != json.loads(row[3]) or bool(description and description != row[1])


def apart_from_now(valid_from: datetime | None, valid_until: datetime | None, now: datetime) -> bool:
    """Whether a write gives both dates of a period that does not hold at `now` (a past or a later one)."""
    return valid_from is not None and valid_until is not None and not valid_from <= now < valid_until


def check_period(edge: EdgeWrite, edge_id: int, valid_from: datetime | None, valid_until: datetime | None,
                  rows: list[list[Any]]) -> None:
    """Refuse the period a write leaves a relation with when it overlaps another stored period of the same relation
    (search at a moment of both would list the fact twice). Checked here, where the write's stored row is chosen
    (`matching_edge`, on the rows this transaction sees, earlier edges of the batch included)."""
    for other in rows:
        if other[0] != edge_id and _overlap((valid_from, valid_until), (other[4], other[5])):
            raise PeriodOverlap(edge, (valid_from, valid_until), (other[4], other[5]))


class PeriodOverlap(InvalidInputError):
    """`check_period`'s refusal; `Writer.write` words it with the ends' names as stored (`named`)."""

    def __init__(self, edge: EdgeWrite, given: tuple[datetime | None, datetime | None],
                 stored: tuple[datetime | None, datetime | None]) -> None:
        self.edge, self.given, self.stored = edge, given, stored
        super().__init__(self.text(edge.source_key, edge.target_key))

    def text(self, source: str, target: str) -> str:
        start = self.stored[0]
        # A stored period is changed by deleting it (named by its start) and writing it again: a write with its
        # own dates only names it again, and one with other dates is refused as overlapping it.
        sent = "null" if start is None else '"%s"' % (start.date().isoformat() if start == datetime(
            start.year, start.month, start.day) else start.isoformat() + "Z")
        return (f"the relation {source} -{self.edge.type}-> {target} would hold {_span(*self.given)}, which "
                f"overlaps its stored period {_span(*self.stored)}: give a period that starts when that one ends (or "
                "ends before it starts); to change that period instead, delete it (delete_relations with this "
                f"relation and valid_from {sent}) and write it again with the dates you mean; nothing was written")

    def named(self, source: str, target: str) -> InvalidInputError:
        return InvalidInputError(self.text(source, target))


def _moment(moment: datetime) -> str:
    return moment.isoformat(sep=" ") + " UTC"  # stored naive in UTC; a reader takes a bare time for local


def _span(valid_from: datetime | None, valid_until: datetime | None) -> str:
    return f"from {_moment(valid_from) if valid_from else 'no known start'} to " \
           f"{_moment(valid_until) if valid_until else 'no end'}"
