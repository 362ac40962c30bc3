"""Moments as duckgraph takes and shows them, and the time in a search's text."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from duckgraph.core.domain.model import DocumentInput, EdgeInput, Passage, ScoredEdge, SearchResult
from duckgraph.core.domain.moments import iso_utc, naive_utc, parse_moment, period, short
from duckgraph.core.domain.render import render_search


@pytest.mark.parametrize(("given", "stored"), [
    ("2024-06-01", datetime(2024, 6, 1)),
    ("2024-06-01T09:30", datetime(2024, 6, 1, 9, 30)),
    ("2024-06-01T09:30:00Z", datetime(2024, 6, 1, 9, 30)),
    ("2024-06-01T09:30:00+02:00", datetime(2024, 6, 1, 7, 30)),
    (date(2024, 6, 1), datetime(2024, 6, 1)),
])
def test_iso_dates_and_date_times_become_naive_utc(given, stored):
    assert parse_moment(given) == stored
    assert DocumentInput(text="x", time=given).time == stored


@pytest.mark.parametrize("given", ["June 2024", "2024-06", "01/06/2024", "", "2024-13-01", 1717200000])
def test_anything_else_is_refused_with_the_format_expected(given):
    with pytest.raises(ValueError, match="ISO 8601"):
        EdgeInput(source="a", target="b", type="X", valid_from=given)


def test_a_period_that_ends_before_it_starts_is_refused():
    with pytest.raises(ValueError, match="valid_until .2024-01-01. is before valid_from .2024-06-01."):
        EdgeInput(source="a", target="b", type="X", valid_from="2024-06-01", valid_until="2024-01-01")
    assert EdgeInput(source="a", target="b", type="X", valid_from="2024-06-01", valid_until="2024-06-02")


def test_periods_in_words():
    assert period(None, None) == ""
    assert period(datetime(2024, 6, 1), None) == "since 2024-06-01"
    assert period(None, datetime(2024, 6, 1, 14, 5)) == "until 2024-06-01 14:05 UTC"
    assert period(datetime(2024, 1, 1), datetime(2024, 6, 1)) == "2024-01-01 to 2024-06-01"
    # One that starts after now has not begun: "since" would tell the model it holds.
    assert period(datetime(2090, 3, 1), None) == "planned, from 2090-03-01"
    assert period(datetime(2090, 3, 1), datetime(2091, 3, 1)) == "planned, from 2090-03-01 to 2091-03-01"


def test_the_text_shows_a_fact_s_period_and_a_passage_s_time():
    result = SearchResult(
        query="q", anchors=[], nodes=[], passages=[
            Passage(document_id="d", chunk_id=1, text="Notes.", time=datetime(2024, 6, 3), score=0.5),
            Passage(document_id="e", chunk_id=2, text="Undated.", score=0.4)],
        edges=[ScoredEdge(id=1, source="A", target="B", type="OWNS", weight=1.0, score=0.9,
                          valid_from=datetime(2024, 1, 1), valid_until=datetime(2024, 6, 1)),
               ScoredEdge(id=2, source="C", target="B", type="OWNS", weight=1.0, score=0.8)],
        text="", truncated=False)
    text, _ = render_search(result, 2_000)
    assert "- A owns B (2024-01-01 to 2024-06-01)" in text
    assert "- C owns B\n" in text + "\n" and "C owns B (" not in text
    assert "[d#1] (2024-06-03) Notes." in text and "[e#2] Undated." in text


def test_a_stored_moment_is_shown_as_iso_utc_with_z():
    stored = datetime(2024, 6, 1, 9, 30, 5, 123456)  # naive UTC, as the store keeps it
    assert iso_utc(stored) == "2024-06-01T09:30:05.123456Z"
    assert iso_utc(stored, "seconds") == "2024-06-01T09:30:05Z"
    assert iso_utc(stored, "microseconds") == "2024-06-01T09:30:05.123456Z"
    assert iso_utc(datetime(2024, 6, 1)) == "2024-06-01T00:00:00Z"
    assert iso_utc(datetime(2024, 6, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))) == "2024-06-01T07:30:00Z"
    assert parse_moment(iso_utc(stored)) == stored  # read back as the same moment



@pytest.mark.parametrize("given", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_a_moment_outside_the_years_1_to_9999_in_utc_is_refused_as_a_field_is(given):
    with pytest.raises(ValueError, match="falls outside the years 1 to 9999 in UTC"):
        EdgeInput(source="a", target="b", type="X", valid_until=given)
    with pytest.raises(ValueError, match="outside the years 1 to 9999"):
        naive_utc(datetime.fromisoformat(given))


def test_a_moment_shows_its_seconds_when_it_has_them_and_a_four_digit_year():
    assert period(datetime(2024, 6, 1, 10, 0), datetime(2024, 6, 1, 10, 0, 30)) == \
        "2024-06-01 10:00 UTC to 2024-06-01 10:00:30 UTC"
    assert short(datetime(2024, 6, 1, 10, 0, 0, 500)) == "2024-06-01 10:00:00 UTC"
    assert short(datetime(1, 1, 1, 10, 0)) == "0001-01-01 10:00 UTC"
    assert short(datetime(999, 1, 1)) == "0999-01-01"
