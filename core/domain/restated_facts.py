"""A relation stated again after it ended, without dates: does the write reopen it from now, or support the period
that ended? Decided by the dates of the sources it cites (`restate_ended`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duckgraph.core.domain.moments import now, period, short
from duckgraph.ports import GraphStore


def restate_ended(store: GraphStore, edges: Any, records: Sequence[Any], namespace: str) -> list[str]:
    """Settle the call's undated edges that state a relation again after it ended (none of its periods holds now
    or is to come), and say what became of each. Re-read from a source that dates from the fact's time (every cited
    document dated at or before its last end), the statement supports the period that ended: the write is pinned
    to that period (the store updates the period a write names exactly), so the fact stays ended and gains the
    provenance. Otherwise the store opens a new period from now, as for any fact stated again after it ended, and
    a hint says so: an agent re-reading an old note must not make an ended fact current without a word."""
    undated = [w for w in edges.writes if w.valid_from is None and w.valid_until is None]
    if not undated:
        return []
    ids = {n.key: n.id for n in records if n.id is not None}
    others = {k for w in undated for k in (w.source_key, w.target_key)} - {n.key for n in records}
    ids.update({n.key: n.id for n in store.find_nodes(namespace, others) if n.key in others})
    moment = now()
    periods: dict[tuple[int, int, str], list[Any]] = {}
    for edge in store.edges_among(sorted(set(ids.values())), namespace, include_expired=True):
        periods.setdefault((edge.source_id, edge.target_id, edge.type), []).append(edge)
    ended = []  # (write, its relation's periods), for relations none of whose periods holds now or is to come
    for write in undated:
        rows = periods.get((ids.get(write.source_key), ids.get(write.target_key), write.type), [])
        if rows and all(r.valid_until is not None and r.valid_until <= moment for r in rows):
            ended.append((write, rows))
    if not ended:
        return []
    doc_times = {d.id: d.time for d in store.get_documents({i for w, _ in ended for i in w.source_ids}, namespace)}
    chunk_times = store.chunk_times({i for w, _ in ended for i in w.source_chunk_ids}, namespace)
    hints: dict[str, str] = {}  # by relation: a relation written twice in the call is said once, reopened first
    for write, rows in ended:
        label = f"{edges.names.get(write.source_key, write.source_key)} -{write.type}-> " \
                f"{edges.names.get(write.target_key, write.target_key)}"
        last = max(r.valid_until for r in rows)
        dates = [doc_times.get(i) for i in write.source_ids] + [chunk_times.get(i) for i in write.source_chunk_ids]
        if dates and None not in dates and max(dates) <= last:
            # The period the sources' latest date falls in, else the first to end after it (the last one when
            # that date is its end): what they can have told of.
            told = max(dates)
            kept = min((r for r in rows if r.valid_until > told), key=lambda r: r.valid_until,
                       default=max(rows, key=lambda r: r.valid_until))
            write.valid_from, write.valid_until = kept.valid_from, kept.valid_until
            hints.setdefault(label, f"{label} ended on {short(last)}; the sources given are dated by then, so it stays "
                                    f"ended and they support its period ({period(kept.valid_from, kept.valid_until)}): "
                                    "give valid_from to say it holds again")
        else:
            hints[label] = (f"{label} had ended on {short(last)}; stated again without valid_from (and without "
                            "sources all dated by then), it holds again from now: if it still has ended, "
                            "delete_relations removes the new period (the ended one stays)")
    listed = list(hints.values())
    return listed[:10] + ([f"... and {len(listed) - 10} more relations that had ended"] if len(listed) > 10 else [])
