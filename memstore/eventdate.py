"""Event dates: the two accepted layouts, parsing and the title annotation.

An event date is either a bare day (``2023-05-30``, read as UTC midnight) or a
full RFC 3339 timestamp with an offset (``2023-05-30T14:00:00+02:00``).

>>> event_time_annotation("2023-05-30")
' (2023-05-30)'
>>> event_time_annotation("2023-05-30T14:00:00+02:00")
' (2023-05-30T12:00:00Z)'
>>> event_time_annotation("last tuesday")
''
"""

from __future__ import annotations

import datetime as _dt

import regex

__all__ = ["event_time_annotation", "parse_event_date", "valid_event_date"]

_DAY = regex.compile(r"\d{4}-\d{2}-\d{2}")
_RFC3339 = regex.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:[Zz]|[+-]\d{2}:\d{2})"
)


def parse_event_date(s: str) -> _dt.datetime | None:
    """Parse ``s`` as ``YYYY-MM-DD`` or RFC 3339; ``None`` when it does not parse.

    The result is an aware datetime in UTC. Empty input never parses: callers
    tell "no event date" from "bad event date" themselves, nor does a time
    whose UTC instant falls outside the years 1-9999 that a datetime holds
    (``0001-01-01T00:00:00+14:00`` is in year 0 in UTC).

    >>> parse_event_date("9999-12-31T23:59:59-12:00") is None
    True
    """
    if not s:
        return None
    try:
        if _DAY.fullmatch(s):
            day = _dt.date.fromisoformat(s)
            return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.UTC)
        if _RFC3339.fullmatch(s):
            text = s.replace("z", "Z").replace("t", "T")
            if "." in text:  # fromisoformat takes at most 6 fractional digits
                head, _, rest = text.partition(".")
                digits = regex.match(r"\d+", rest)
                assert digits is not None
                frac = digits.group(0)
                text = f"{head}.{frac[:6].ljust(6, '0')}{rest[len(frac) :]}"
            return _dt.datetime.fromisoformat(text).astimezone(_dt.UTC)
    except (ValueError, OverflowError):
        return None
    return None


def valid_event_date(s: str) -> bool:
    """Whether ``s`` is an event date the store can render back."""
    return parse_event_date(s) is not None


def event_time_annotation(event_date: str) -> str:
    """A compact suffix for a title, so a model reading results sees when it happened.

    The date alone when the time is exactly UTC midnight (what a bare day
    produces), the full RFC 3339 UTC timestamp otherwise, ``""`` when the value
    is empty or does not parse. Append it to the title, never the content: a
    caller truncating content to fit a prompt would cut it off.
    """
    when = parse_event_date(event_date)
    if when is None:
        return ""
    if when.hour == when.minute == when.second == when.microsecond == 0:
        return f" ({when.date().isoformat()})"
    return f" ({when.strftime('%Y-%m-%dT%H:%M:%S')}Z)"
