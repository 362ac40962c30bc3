"""Moments in time as duckgraph takes and shows them: ISO 8601 dates or date-times in, naive UTC inside (as the
store compares them), short dates out ("since 2024-06", "2024-01 to 2024-06")."""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

FORMAT_HINT = "an ISO 8601 date or date-time, e.g. 2024-06-01 or 2024-06-01T09:30:00Z (no zone = UTC)"


def parse_moment(value: Any) -> datetime:
    """An ISO 8601 date or date-time (or a datetime/date) as a naive UTC datetime; ValueError otherwise."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value!r} is not {FORMAT_HINT}") from None
    else:
        raise ValueError(f"must be {FORMAT_HINT}")
    return naive_utc(moment)


def naive_utc(moment: datetime) -> datetime:
    """`moment` as naive UTC; ValueError (a field's usual refusal) when that falls outside years 1 to 9999."""
    if moment.tzinfo is not None:
        try:
            return moment.astimezone(timezone.utc).replace(tzinfo=None)
        except OverflowError:  # "0001-01-01T00:30:00+01:00" is in year 0 in UTC, which datetime cannot hold
            raise ValueError(f"{moment.isoformat()} falls outside the years 1 to 9999 in UTC") from None
    return moment


def iso_utc(moment: datetime, timespec: str = "auto") -> str:
    """A stored moment (naive UTC; an aware one is converted) as ISO 8601 ending in "Z": stored times carry no
    zone, and written without one they would read as local time to whoever reads them. `timespec` as isoformat's."""
    return naive_utc(moment).isoformat(timespec=timespec) + "Z"


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def short(moment: datetime) -> str:
    """A moment as briefly as it was likely given: the date, or the date and the time of day to the minute, or to
    the second when it has seconds (a 30-second period must not read "10:00 to 10:00"). isoformat writes a year
    below 1000 with its four digits, as it was given, where strftime does not."""
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return moment.date().isoformat()
    precision = "seconds" if (moment.second, moment.microsecond) != (0, 0) else "minutes"
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec=precision)


def period(valid_from: datetime | None, valid_until: datetime | None) -> str:
    """A fact's validity in words: "since 2024-06-01", "2024-01-01 to 2024-06-01", "until 2024-06-01", or ""."""
    if valid_from is None and valid_until is None:
        return ""
    if valid_until is None:
        return f"since {short(valid_from)}"  # type: ignore[arg-type]
    if valid_from is None:
        return f"until {short(valid_until)}"
    return f"{short(valid_from)} to {short(valid_until)}"


def check_period(valid_from: datetime | None, valid_until: datetime | None, label: str) -> None:
    """Refuse a period that ends before it starts (ValueError, as the input models raise)."""
    if valid_from is not None and valid_until is not None and valid_until < valid_from:
        raise ValueError(f"{label}: valid_until ({short(valid_until)}) is before valid_from ({short(valid_from)})")
