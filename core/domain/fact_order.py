"""The order a search shows facts in when some do not hold at the moment searched (with history, or a window):
those that hold first, so that the text reads the current fact before its past and a token budget, which cuts from
the end, drops the oldest periods first."""

from __future__ import annotations

from datetime import datetime
from typing import Any

#: A fact that does not hold at the moment searched (ended, or planned) ranks after one that does and is at most
#: this much more relevant ("equally relevant": the names alone move a fact's score by a few percent).
NOT_HOLDING_WEIGHT = 0.98


def in_time_order(edges: list[tuple[Any, float]], moment: datetime) -> list[tuple[Any, float]]:
    """The facts (edge records and scores, best first) with those that hold at `moment` before the others: first
    before the equally relevant (`NOT_HOLDING_WEIGHT`), then, within each family of facts of one type that share
    an end (who is on call for Payments, over the weeks), on the family's places in the ranking, those that hold,
    then the planned ones (soonest first), then the ended ones newest first. Read with history, the fact that
    holds now would otherwise sit anywhere among its ended periods, and a small budget (which cuts from the end)
    could keep those and cut it. When every fact holds (a search of one moment), the order is unchanged."""
    def rank(edge: Any) -> int:  # 0: holds at `moment`, 1: starts later, 2: ended
        if edge.valid_from is not None and edge.valid_from > moment:
            return 1
        return 2 if edge.valid_until is not None and edge.valid_until <= moment else 0

    ranks = {edge.id: rank(edge) for edge, _ in edges}
    if not any(ranks.values()):
        return edges
    order = sorted(edges, key=lambda item: -item[1] * (NOT_HOLDING_WEIGHT if ranks[item[0].id] else 1.0))
    # Families: facts of one type sharing a source or a target, joined transitively (union-find over positions).
    parent = list(range(len(order)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[tuple[str, str, int], int] = {}
    for i, (edge, _) in enumerate(order):
        for key in ((edge.type, "source", edge.source_id), (edge.type, "target", edge.target_id)):
            parent[root(i)] = root(first.setdefault(key, i))
    families: dict[int, list[int]] = {}
    for i in range(len(order)):
        families.setdefault(root(i), []).append(i)

    placed: list[Any] = [None] * len(order)
    for places in families.values():
        edge = {i: order[i][0] for i in places}
        holding = [i for i in places if ranks[edge[i].id] == 0]
        planned = sorted((i for i in places if ranks[edge[i].id] == 1), key=lambda i: edge[i].valid_from)
        ended = sorted((i for i in places if ranks[edge[i].id] == 2), reverse=True,  # stable: ties keep their rank
                       key=lambda i: (edge[i].valid_until, edge[i].valid_from or datetime.min))
        for place, i in zip(places, [*holding, *planned, *ended]):
            placed[place] = order[i]
    return placed
