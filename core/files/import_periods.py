"""The validity periods of a duckgraph export's relations (see docs/time.md): the periods of one relation never
overlap, neither two lines' of the file nor a line's and a stored period it does not write over. Which stored
period a line writes over is chosen here too, as `restore` chooses it. Used by `import_plan` while it plans a
batch's edges, and by the import (core/files/import_.py) once every batch is written, before the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from duckgraph.core.files.spill import SpilledMap
from duckgraph.ports import EdgeRecord, GraphStore, InvalidInputError, NodeRecord


class PeriodChecks:
    """The periods of the relations an import's lines have given so far, and the stored periods they write over or
    overlap. `fail` is the import's: its errors name the file and line."""

    def __init__(self, store: GraphStore, fail: Callable[[int, str], InvalidInputError]) -> None:
        self.store = store
        self._fail = fail
        #: (namespace, source, target, type) -> [(valid_from, valid_until, line number)]: the file's periods of
        #: each relation, none of which may overlap another.
        self.periods = SpilledMap()
        self.rewritten = SpilledMap()  # as a set: ids of stored edges a line of the file writes over
        #: A line's period that overlaps a stored period it does not write over: refused at the end unless
        #: another line writes over that stored period (moves it); see `check_stored_overlaps`.
        self.overlaps: list[_StoredOverlap] = []

    def close(self) -> None:
        for spilled in (self.periods, self.rewritten):
            spilled.close()

    def stored_edges(self, existing: dict[tuple[str, str], NodeRecord]) -> dict[tuple[str, str, str, str],
                                                                                list[EdgeRecord]]:
        """Stored edges among the stored nodes the file names, by relation (namespace, source, target, type), each
        relation's periods oldest row first (the row `restore` matches first)."""
        found: dict[tuple[str, str, str, str], list[EdgeRecord]] = {}
        by_namespace: dict[str, dict[int, str]] = {}
        for (namespace, key), node in existing.items():
            by_namespace.setdefault(namespace, {})[node.id] = key
        for namespace, keys in by_namespace.items():
            for edge in sorted(self.store.edges_among(sorted(keys), namespace, include_expired=True),
                               key=lambda e: e.id):
                relation = (namespace, keys[edge.source_id], keys[edge.target_id], edge.type)
                found.setdefault(relation, []).append(edge)
        return found

    def check_file_overlap(self, number: int, relation: tuple[str, str, str, str], period: _Period,
                            label: str) -> None:
        """Refuse a line whose period shares a moment with the period of an earlier line of the same relation:
        the periods of one relation never overlap (docs/time.md), or a search would list the fact twice."""
        earlier = self.periods.get(relation, [])
        for valid_from, valid_until, other in earlier:
            if (valid_from, valid_until) == period:
                raise self._fail(number, f"the relation {label} appears twice (as on line {other}); nothing was "
                                         "imported: remove one of the two lines")
            if _overlap(period, (valid_from, valid_until)):
                raise self._fail(number, f"the relation {label} would hold {_span(*period)}, which overlaps its "
                                         f"period {_span(valid_from, valid_until)} on line {other}: the periods of "
                                         "one relation never overlap; nothing was imported: fix the dates of one "
                                         "of the two lines (a period that starts when the other ends)")
        self.periods[relation] = [*earlier, (*period, number)]

    def stored_period(self, relation: tuple[str, str, str, str], period: _Period, stored: list[EdgeRecord],
                       number: int, label: str) -> EdgeRecord | None:
        """The stored period of `relation` the line writes over (as `restore` chooses it: the same period, or the
        one still holding when the line still holds, else the one that starts at the same moment and overlaps
        it: the file's values win, its end included); None: the line adds a period. Any other stored period the
        line overlaps is noted, to be refused unless another line writes over it."""
        valid_from, valid_until = period
        match = next((e for e in stored if e.valid_until == valid_until
                      and (valid_until is None or e.valid_from == valid_from)), None)
        if match is None:
            match = next((e for e in stored if e.valid_from == valid_from and e.id not in self.rewritten
                          and _overlap(period, (e.valid_from, e.valid_until))), None)
        if match is not None:
            self.rewritten.add(match.id)
        for edge in stored:
            if edge is not match and _overlap(period, (edge.valid_from, edge.valid_until)):
                self.overlaps.append(_StoredOverlap(number, label, period, edge.id,
                                                    (edge.valid_from, edge.valid_until)))
        return match

    def check_stored_overlaps(self) -> None:
        """Refuse the import when a line's period overlaps a stored period of its relation that no line of the file
        writes over (a stored period another line moves, as when both files hold the same history, is no clash)."""
        for clash in self.overlaps:
            if clash.edge_id in self.rewritten:
                continue
            start = clash.stored[0]
            named = "null" if start is None else '"%s"' % (
                start.date().isoformat() if start == datetime(start.year, start.month, start.day)
                else start.isoformat() + "Z")
            raise self._fail(
                clash.number,
                f"the relation {clash.label} would hold {_span(*clash.period)}, which overlaps its stored period "
                f"{_span(*clash.stored)}: the periods of one relation never overlap, and a line writes over a stored "
                "period only when it starts at the same moment; nothing was imported: give the line the stored "
                "period's valid_from to replace it with the file's, or dates that start when it ends (or end before "
                "it starts), or delete the stored period first (delete_relations with this relation and valid_from "
                f"{named}) and import again")


_Period = tuple[datetime | None, datetime | None]


@dataclass(frozen=True)
class _StoredOverlap:
    """A line (`number`) whose period overlaps the stored period `stored` of edge `edge_id`, one it does not
    write over."""

    number: int
    label: str
    period: _Period
    edge_id: int
    stored: _Period


def _overlap(a: _Period, b: _Period) -> bool:
    """Whether two periods [from, until) share a moment (None: no known start, or no end); an empty period (an
    older export's) shares none. The store's rule (its `periods` module), which core may not import."""
    def before(start: datetime | None, end: datetime | None) -> bool:
        return start is None or end is None or start < end

    return before(a[0], b[1]) and before(b[0], a[1]) and before(*a) and before(*b)


def _span(valid_from: datetime | None, valid_until: datetime | None) -> str:
    """A period in the words of the tools' overlap error."""
    def moment(value: datetime) -> str:
        return value.isoformat(sep=" ") + " UTC"

    return f"from {moment(valid_from) if valid_from else 'no known start'} to " \
           f"{moment(valid_until) if valid_until else 'no end'}"
