"""Which new namespace ingest and import take for a typo of one the file holds, and which for the next of a series
(proj-b beside proj-a): a series is started on purpose, one after another, so it is not refused; a typo is. A
suggestion for a namespace not found (export, delete, stats) still names a series' other members: there it only
helps."""

from __future__ import annotations

import pytest

from duckgraph.core.domain.namespaces import meant_namespaces, namespace_hint, same_series

SERIES = [("proj-b", "proj-a"), ("client2", "client1"), ("team-2026", "team-2025"), ("v2", "v1"), ("v10", "v9"),
          ("team/b", "team/a"), ("run_3", "run_2"), ("build.c", "build.a")]
TYPOS = [("wrok", "work"), ("Work", "work"), ("proj_a", "proj-a"), ("projet-a", "proj-a"), ("proj-A", "proj-a"),
         ("Proj-b", "proj-a"), ("team-07", "team-7"), ("work2", "work"), ("proj-1", "proj-a"), ("team-07x", "team-07"),
         ("clinet2", "client1")]


@pytest.mark.parametrize(("new", "held"), SERIES, ids=[new for new, _ in SERIES])
def test_the_next_of_a_series_is_no_typo(new: str, held: str) -> None:
    assert same_series(new, held) and same_series(held, new)
    assert meant_namespaces(new, [held, "personal"], series=False) == []
    shown = ", ".join(map(repr, sorted([held, "personal"])))
    assert namespace_hint(new, [held, "personal"], series=False) == f"the file's namespaces are {shown}"


#: Those near enough to be suggested at all (v1 and v2 share too few letters to be taken for one another).
NEAR_SERIES = [(new, held) for new, held in SERIES if not new.startswith("v")]


@pytest.mark.parametrize(("new", "held"), NEAR_SERIES, ids=[new for new, _ in NEAR_SERIES])
def test_a_suggestion_still_names_the_series(new: str, held: str) -> None:
    # Asked for proj-b where only proj-a is, "did you mean 'proj-a'?" helps; only starting proj-b is not refused.
    assert meant_namespaces(new, [held, "personal"]) == [held]


@pytest.mark.parametrize(("new", "held"), TYPOS, ids=[new for new, _ in TYPOS])
def test_a_typo_is_still_meant(new: str, held: str) -> None:
    assert not same_series(new, held)
    assert meant_namespaces(new, [held, "personal"], series=False) == [held]
    assert namespace_hint(new, [held, "personal"], series=False).startswith(f"did you mean {held!r}")


def test_a_typo_of_another_name_is_found_past_a_series_member() -> None:
    # proj-a is of proj-b's series, proj_b is proj-b mistyped: the refusal names proj_b, not the nearest name.
    assert meant_namespaces("proj-b", ["proj-a", "proj_b"], series=False) == ["proj_b"]
    assert meant_namespaces("proj-c", ["proj-a", "proj-b", "client1"], series=False) == []


def test_a_name_is_not_of_a_series_with_itself() -> None:
    assert not same_series("proj-a", "proj-a") and not same_series("v1", "v01")
