"""The order a search shows facts in when some do not hold at the moment searched (fact_order.in_time_order)."""

from __future__ import annotations

from datetime import datetime

from duckgraph.core.domain.fact_order import in_time_order as _in_time_order
from duckgraph.ports import EdgeRecord

NOW = datetime(2026, 6, 1)


def edge(i: int, source: int, target: int, type: str, start: str | None = None, end: str | None = None) -> EdgeRecord:
    return EdgeRecord(id=i, source_id=source, target_id=target, type=type, description="", weight=1.0, properties={},
                      valid_from=datetime.fromisoformat(start) if start else None,
                      valid_until=datetime.fromisoformat(end) if end else None)


def test_when_every_fact_holds_the_ranking_is_kept() -> None:
    ranked = [(edge(1, 1, 9, "LEADS", "2024-01-01"), 0.9), (edge(2, 2, 9, "LEADS"), 0.8),
              (edge(3, 1, 8, "LIVES_IN"), 0.7)]
    assert _in_time_order(ranked, NOW) == ranked


def test_a_family_s_current_fact_takes_its_best_place_and_other_families_keep_theirs() -> None:
    ann = (edge(1, 1, 9, "ON_CALL_FOR", "2026-01-01", "2026-02-01"), 0.90)
    lives = (edge(2, 5, 7, "LIVES_IN", "2020-01-01"), 0.85)  # another family: keeps the second place
    ben = (edge(3, 2, 9, "ON_CALL_FOR", "2026-03-01", "2026-04-01"), 0.84)
    cy = (edge(4, 3, 9, "ON_CALL_FOR", "2026-05-01"), 0.80)  # holds now
    dee = (edge(5, 4, 9, "ON_CALL_FOR", "2026-09-01"), 0.79)  # planned
    order = _in_time_order([ann, lives, ben, cy, dee], NOW)
    assert [e.id for e, _ in order] == [4, 2, 5, 3, 1]  # now, (other family), planned, then ended newest first


def test_an_ended_fact_ranks_after_an_equally_relevant_one_that_holds() -> None:
    ended = (edge(1, 1, 9, "WORKED_AT", "2020-01-01", "2024-01-01"), 0.800)
    holding = (edge(2, 1, 8, "EMPLOYED_BY", "2024-01-01"), 0.790)  # another type, within 2%
    far = (edge(3, 3, 7, "KNOWS"), 0.700)
    assert [e.id for e, _ in _in_time_order([ended, holding, far], NOW)] == [2, 1, 3]
    much_better = (edge(1, 1, 9, "WORKED_AT", "2020-01-01", "2024-01-01"), 0.900)
    assert [e.id for e, _ in _in_time_order([much_better, holding, far], NOW)] == [1, 2, 3]
