"""Moments in time as duckgraph takes and shows them: ISO 8601 dates or date-times in, naive UTC inside (as the
store compares them), short dates out ("since 2024-06", "2024-01 to 2024-06")."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Any

#: The forms taken, as an error names them: ISO 8601's extended calendar date, alone or with a time of day (to the
#: minute at least) and an optional zone; a space for the T too, as RFC 3339 allows and people write it. Python's
#: own parser takes more (week dates, ordinal dates, the basic format "20240601", an hour alone): forms a model
#: rarely means and a reader cannot check at a glance.
FORMS = ("YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS[.ffffff]][Z|+HH:MM|-HH:MM] (T or a space before the time), e.g. "
         "2024-06-01 or 2024-06-01T09:30:00Z (no zone = UTC)")
FORMAT_HINT = f"an ISO 8601 date or date-time in a form duckgraph takes: {FORMS}"
#: " UTC" after a time of day is how `short` shows one: a model copying a time back writes it so.
_MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:\d{2}| UTC)?)?")
#: A month or a year alone (reduced precision): refused rather than read as its first day, since as an end
#: ("valid_until 2024-06") it reads as much "through June" as "until June began".
_REDUCED = re.compile(r"(\d{4})(?:-(\d{2}))?")


def parse_moment(value: Any) -> datetime:
    """An ISO 8601 date or date-time (or a datetime/date) as a naive UTC datetime; ValueError otherwise."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if not _MOMENT.fullmatch(text):
            raise ValueError(_not_a_moment(value, text))
        try:
            moment = datetime.fromisoformat(text.removesuffix(" UTC"))  # naive: UTC already
        except ValueError as exc:  # the right shape with a field out of range: "2024-13-01", "2024-02-30"
            raise ValueError(f"{value!r} is not a valid date or time ({exc}): write {FORMAT_HINT}") from None
    else:
        raise ValueError(f"must be {FORMAT_HINT}")
    return naive_utc(moment)


def _not_a_moment(value: str, text: str) -> str:
    """Why `value` is refused: a month or a year alone is named as such, with the day to write instead."""
    reduced = _REDUCED.fullmatch(text)
    if reduced is None or not 1 <= int(reduced[1]) < 9999 or not 1 <= int(reduced[2] or 1) <= 12:
        return f"{value!r} is not {FORMAT_HINT}"
    year, month = int(reduced[1]), int(reduced[2] or 0)
    if month:
        after = f"{year + 1:04d}-01-01" if month == 12 else f"{year:04d}-{month + 1:02d}-01"
        return (f"{value!r} is a month, not a date: write its first day, {year:04d}-{month:02d}-01 (an end is "
                f"exclusive: a period through that month ends at {after}); duckgraph takes ISO 8601 in the forms "
                f"{FORMS}")
    return (f"{value!r} is a year, not a date: write its first day, {year:04d}-01-01 (an end is exclusive: a period "
            f"through that year ends at {year + 1:04d}-01-01); duckgraph takes ISO 8601 in the forms {FORMS}")


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
    below 1000 with its four digits, as it was given, where strftime does not. A time of day is marked " UTC":
    stored times are UTC, and a reader takes a bare "08:00" for local time (a meeting given as 10:00+02:00 would
    read two hours early). A date alone stays as given."""
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return moment.date().isoformat()
    precision = "seconds" if (moment.second, moment.microsecond) != (0, 0) else "minutes"
    return moment.replace(tzinfo=None).isoformat(sep=" ", timespec=precision) + " UTC"


def period(valid_from: datetime | None, valid_until: datetime | None) -> str:
    """A fact's validity in words: "since 2024-06-01", "2024-01-01 to 2024-06-01", "until 2024-06-01 10:00 UTC",
    "planned, from 2090-03-01" (one that starts after now: "since" would say it holds), or ""."""
    if valid_from is None and valid_until is None:
        return ""
    if valid_from is not None and valid_from > now():
        return f"planned, from {short(valid_from)}" + (f" to {short(valid_until)}" if valid_until else "")
    if valid_until is None:
        return f"since {short(valid_from)}"  # type: ignore[arg-type]
    if valid_from is None:
        return f"until {short(valid_until)}"
    return f"{short(valid_from)} to {short(valid_until)}"


def check_period(valid_from: datetime | None, valid_until: datetime | None, label: str, *,
                 empty_ok: bool = False) -> None:
    """Refuse a period that ends before it starts, or when it starts (ValueError, as the input models raise): the
    end is exclusive, so such a period holds at no moment and no search would ever find the fact. `empty_ok` lets
    the second through: an export of an older duckgraph, which stored such periods, imports as it was written."""
    if valid_from is not None and valid_until is not None and valid_until < valid_from:
        raise ValueError(f"{label}: valid_until ({short(valid_until)}) is before valid_from ({short(valid_from)})")
    if valid_from is not None and valid_from == valid_until and not empty_ok:
        instead = (f"for the day {short(valid_from)} write valid_until {short(valid_from + timedelta(days=1))}"
                   if valid_from.time() == datetime.min.time() and valid_from.date() < date.max
                   else "give a valid_until after valid_from")
        raise ValueError(f"{label}: valid_until {short(valid_until)} equals valid_from: the period is empty (the end "
                         f"is exclusive); {instead}")
