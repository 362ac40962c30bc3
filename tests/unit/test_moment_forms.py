"""The forms a time argument takes (core/domain/moments.py): the extended calendar date, alone or with a time of day
and an optional zone; anything else is refused naming those forms, a month or a year alone with the day to write;
an empty period (the end is exclusive) is refused with what to write instead."""

from __future__ import annotations

from datetime import datetime

import pytest

from duckgraph.core.domain.model import EdgeInput
from duckgraph.core.domain.moments import check_period, parse_moment, short

FORMS = "YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS[.ffffff]][Z|+HH:MM|-HH:MM] (T or a space before the time)"


@pytest.mark.parametrize(("given", "stored"), [
    ("2024-06-01", datetime(2024, 6, 1)),
    (" 2024-06-01 ", datetime(2024, 6, 1)),
    ("2024-06-01 09:30", datetime(2024, 6, 1, 9, 30)),
    ("2024-06-01T09:30:05", datetime(2024, 6, 1, 9, 30, 5)),
    ("2024-06-01T09:30:05.123456Z", datetime(2024, 6, 1, 9, 30, 5, 123456)),  # as results write stored times
    ("2024-06-01T09:30-01:00", datetime(2024, 6, 1, 10, 30)),
])
def test_the_forms_taken(given, stored):
    assert parse_moment(given) == stored


@pytest.mark.parametrize("given", [
    "2024-W23", "2024-W23-1", "2024-153", "20240601", "2024-06-01T0930", "2024-06-01T09", "2024-06-01T09:30+0200",
    "2024-06-01Z", "June 2024", "2024/06/01"])
def test_other_iso_forms_and_the_rest_are_refused_naming_the_forms_taken(given):
    with pytest.raises(ValueError) as refused:
        parse_moment(given)
    assert str(refused.value) == f"{given!r} is not an ISO 8601 date or date-time in a form duckgraph takes: " \
                                 f"{FORMS}, e.g. 2024-06-01 or 2024-06-01T09:30:00Z (no zone = UTC)"


@pytest.mark.parametrize(("given", "first", "after"), [
    ("2024-06", "2024-06-01", "2024-07-01"), ("2024-12", "2024-12-01", "2025-01-01"),
    ("2024", "2024-01-01", "2025-01-01")])
def test_a_month_or_a_year_alone_is_refused_with_the_day_to_write(given, first, after):
    with pytest.raises(ValueError, match=f"write its first day, {first} .an end is exclusive: a period through that "
                                         f"(month|year) ends at {after}.; duckgraph takes ISO 8601 in the forms "
                                         "YYYY-MM-DD or "):
        parse_moment(given)


def test_an_empty_period_is_refused_with_what_to_write_instead():
    with pytest.raises(ValueError, match=r"^a -X-> b: valid_until 2024-06-01 equals valid_from: the period is empty "
                                         r"\(the end is exclusive\); for the day 2024-06-01 write valid_until "
                                         r"2024-06-02$"):
        check_period(datetime(2024, 6, 1), datetime(2024, 6, 1), "a -X-> b")
    with pytest.raises(ValueError, match="the period is empty .the end is exclusive.; give a valid_until after "
                                         "valid_from"):
        EdgeInput(source="a", target="b", type="X", valid_from="2024-06-01T09:30Z",
                  valid_until="2024-06-01T11:30+02:00")
    assert EdgeInput(source="a", target="b", type="X", valid_from="2024-06-01", valid_until="2024-06-02")


@pytest.mark.parametrize("moment", [datetime(2024, 5, 31, 22, 30), datetime(2024, 6, 1, 10, 0, 30),
                                    datetime(2024, 6, 1)])
def test_a_time_as_duckgraph_shows_it_is_taken_back(moment):
    """The text marks a time of day " UTC" (`short`): a model copying it into valid_from gets the same moment."""
    assert parse_moment(short(moment)) == moment
    with pytest.raises(ValueError, match="is not an ISO 8601 date"):
        parse_moment("2024-06-01T10:00Z UTC")  # a zone given twice
