"""Time expressions in text: the dates a query names, and whether a text refers to a time at all.

A search for "what did Mel paint in July 2023?" is about events of July 2023,
and "when did Mel paint a sunrise?" asks for a statement that says *when*
("I painted it last year"). This module reads both out of plain English text,
with regular expressions only (no model, no dependency beyond ``regex``):

* :func:`query_dates` turns the date expressions of a query into
  :class:`DateSpan` values: absolute ones (``2023-05-08``, ``8 May 2023``,
  ``May 8th, 2023``, ``May 2023``, ``in 2022``), a month without a year
  (``in June``: June of any year), relative ones resolved against ``now``
  (``yesterday``, ``last week``, ``this month``, ``three days ago``,
  ``last Friday``), open ranges (``before May 2023``, ``after 2022``,
  ``since June 2023``), closed ones (``between August 11 and August 15,
  2023``, ``from May to July 2023``: a first date without a year takes the
  second's), and relative expressions anchored to a date instead of to
  ``now`` (``the week before 16 November 2023``, ``two weeks before August
  11, 2023``, ``last weekend before April 10, 2023``, ``the day after
  2023-05-08``).
* :func:`asks_when` tells a question that asks for a time ("when did...",
  "what year...", "how long ago...").
* :func:`mentions_time` tells a text that refers to a time (a date, a month,
  a weekday, "yesterday", "last week", "two years ago", ...).

>>> now = _dt.datetime(2023, 6, 14, 12, tzinfo=_dt.UTC)
>>> [s.label for s in query_dates("What did Mel paint in July 2023?", now)]
['2023-07-01..2023-08-01']
>>> [s.label for s in query_dates("what happened last week?", now)]
['2023-06-05..2023-06-12']
>>> [s.label for s in query_dates("camping in June", now)]
['month 6']
>>> [s.label for s in query_dates("Where was Tim the week before 16 November 2023?", now)]
['2023-11-09..2023-11-16']
>>> [s.label for s in query_dates("between August 11 and August 15, 2023", now)]
['2023-08-11..2023-08-16']
>>> asks_when("When did Caroline go to the support group?"), asks_when("Who is Caroline?")
(True, False)
>>> mentions_time("I went there yesterday"), mentions_time("I love pottery")
(True, False)
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

import regex

__all__ = ["DateSpan", "asks_when", "mentions_time", "query_dates", "span_match"]


class _Lazy:
    """A ``regex`` pattern compiled on its first use, not at import.

    The date patterns below take tens of milliseconds to compile (the longest,
    with its case folding, over a hundred on a slow machine): every process that
    imports memstore paid that at start, a command line's ``--help`` included,
    though most never read a date. Two threads that race on the first use both
    compile it; the second's copy replaces the first's, which is harmless.
    """

    __slots__ = ("_compiled", "_flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: regex.Pattern[str] | None = None

    def compiled(self) -> regex.Pattern[str]:
        """The compiled pattern."""
        got = self._compiled
        if got is None:
            got = self._compiled = regex.compile(self.pattern, self._flags)
        return got

    def search(self, text: str, pos: int = 0) -> regex.Match[str] | None:
        return self.compiled().search(text, pos)

    def fullmatch(self, text: str) -> regex.Match[str] | None:
        return self.compiled().fullmatch(text)

    def finditer(self, text: str) -> Iterator[regex.Match[str]]:
        return self.compiled().finditer(text)


_MONTH_NAMES = (
    "january february march april may june july august september october november december"
).split()
_MONTHS: dict[str, int] = {}
for _i, _m in enumerate(_MONTH_NAMES, 1):
    _MONTHS[_m] = _i
    _MONTHS[_m[:3]] = _i
_MONTHS["sept"] = 9
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple": 2,
    "few": 3,
    "several": 3,
}

_MON = (
    r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAYN = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_BOUND = _Lazy(r"\b(?P<bound>before|after|since|until|till|by)\s+(?:the\s+)?$", regex.I)
"""A bound word right before a date ("before May 2023"), matched on the text up to the date."""
_ABSOLUTE = [
    _Lazy(rf"\b(?P<iso>{_YEAR}-(?P<m>\d\d)-(?P<d>\d\d))\b", regex.I),
    _Lazy(rf"\b{_DAYN}\s+(?:of\s+)?{_MON}\.?,?\s+{_YEAR}\b", regex.I),
    _Lazy(rf"\b{_MON}\.?\s+{_DAYN},?\s+{_YEAR}\b", regex.I),
    _Lazy(rf"\b{_MON}\.?,?\s+(?:of\s+)?{_YEAR}\b", regex.I),
    _Lazy(rf"\b(?:in|during|of|year)\s+{_YEAR}\b", regex.I),
    _Lazy(rf"\b{_YEAR}\b", regex.I),
]
_MON_ANY = _MON.replace("(?P<mon>", "(?:")
_YEAR_ANY = r"(?:19|20)\d\d"
_DATE = (
    rf"(?:{_YEAR_ANY}-\d\d-\d\d"
    rf"|[0-3]?\d(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON_ANY}\.?(?:,?\s+{_YEAR_ANY})?"
    rf"|{_MON_ANY}\.?\s+[0-3]?\d(?:st|nd|rd|th)?\b(?:,?\s+{_YEAR_ANY})?"
    rf"|{_MON_ANY}\.?(?:,?\s+(?:of\s+)?{_YEAR_ANY})?"
    rf"|{_YEAR_ANY})\b"
)
"""One absolute date (a day, a month or a year) whose year may be left out, for the
two sides of a range and the anchor of an anchored expression; read by :func:`_date_of`."""
_RANGE = _Lazy(
    rf"\b(?:between|from)\s+(?:the\s+)?(?P<a>{_DATE})\s*"
    rf"(?:and|to|until|till|through|-|–)\s*(?:the\s+)?(?P<b>{_DATE})",
    regex.I,
)
"""A closed range: "between August 11 and August 15, 2023", "from May to July 2023"."""
_OFFSET_NUMBER = (
    r"\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"(?:a\s+)?(?:couple|few)(?:\s+of)?|several"
)
_ANCHORED = _Lazy(
    rf"\b(?:(?:the|that|last|previous|past)\s+|(?P<n>{_OFFSET_NUMBER})\s+)?"
    rf"(?P<unit>day|week|weekend|month|year)s?\s+"
    rf"(?P<dir>before|after|prior\s+to|following)\s+(?:the\s+)?(?P<d>{_DATE})",
    regex.I,
)
"""A span measured from a date, not from now: "the week before 16 November 2023"."""
_BARE_MONTH = _Lazy(
    r"\b(?P<mon>january|february|march|april|may|june|july|august|september|october|"
    r"november|december)\b",
    regex.I,
)
_MONTH_PREFIX = _Lazy(
    r"\b(?:in|during|of|early|late|mid|last|this)\s+(?:the\s+month\s+of\s+)?$", regex.I
)
_UNITS = r"(?P<unit>day|week|weekend|month|year)s?"
_RELATIVE = [
    _Lazy(r"\b(?P<word>yesterday|today|tonight|last\s+night)\b", regex.I),
    _Lazy(rf"\b(?P<which>last|this|past|previous)\s+{_UNITS}\b", regex.I),
    _Lazy(
        rf"\b(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
        rf"(?:a\s+)?(?:couple|few)(?:\s+of)?|several)\s+{_UNITS}\s+ago\b",
        regex.I,
    ),
    _Lazy(
        r"\b(?:last|this|past)\s+(?P<weekday>monday|tuesday|wednesday|thursday|friday|"
        r"saturday|sunday)\b",
        regex.I,
    ),
]
_WHEN = _Lazy(
    r"^\W*when\b|\bwhen\s+(?:did|was|were|is|does|do|has|had|will)\b|"
    r"\b(?:what|which)\s+(?:year|month|day|date|time|week|season)\b|"
    r"\bhow\s+long\s+ago\b|\bsince\s+when\b|\bin\s+which\s+(?:year|month)\b|"
    r"\bhow\s+long\s+(?:has|have|had|did|was)\b",
    regex.I,
)
_TIME_WORDS = _Lazy(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|recently|lately|"
    r"(?:last|next|this|past|coming|previous)\s+(?:week|weekend|month|year|night|summer|"
    r"winter|spring|fall|autumn|time|few|couple|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday)|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?|weekends?|"
    r"january|february|march|april|june|july|august|september|october|november|december|"
    r"(?:19|20)\d\d|the\s+other\s+day|a\s+while\s+(?:ago|back)|"
    r"(?:a|one|two|three|four|five|six|\d+|few|couple\s+of)\s+(?:days|weeks|months|years)|"
    r"(?:in|since|during|until|by|of|early|late|mid|last|this|next)\s+may)\b",
    regex.I,
)
_TRIGGER = _Lazy(
    rf"{_YEAR_ANY}|\b{_MON_ANY}\b|\b(?:yesterday|today|tonight|ago)\b|"
    r"\b(?:last|this|past|previous)\s+(?:night|day|week|month|year|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday)",
    regex.I,
)
"""Something every date expression holds: a year, a month's name or abbreviation (a whole
word), a relative-date word. "error 502 at the market" holds none."""
_GATE_WORDS = frozenset(_MONTHS) | {"yesterday", "today", "tonight", "ago"}
_GATE_WORDS |= {"last", "this", "past", "previous"}
_ASCII_RUNS = re.compile(r"[a-z]+|[0-9]{4,}")


@lru_cache(maxsize=1024)
def _may_name_a_date(text: str) -> bool:
    """Whether ``text`` may hold a date expression: :data:`_TRIGGER` or more, never less.

    Cached per text: a server is asked the same queries again and again.

    For ASCII text the lower-cased letter runs are looked up in a set and the
    digit runs searched for a year, several times cheaper than the pattern's
    scan (most queries name no date); other text takes the pattern, whose case
    folding and Unicode digits a set lookup would miss.
    """
    if not text.isascii():
        return _TRIGGER.search(text) is not None
    for run in _ASCII_RUNS.findall(text.lower()):
        if run in _GATE_WORDS or (run[0] <= "9" and ("19" in run[:-2] or "20" in run[:-2])):
            return True
    return False


_CAPITAL_MAY = _Lazy(r"(?<![.!?]\s)(?<!^)\bMay\b")


# The same words for an ASCII text, matched against its lower-cased copy by the
# standard library's engine, about three times faster than ``regex`` with its
# case folding (every candidate of a "when" question is read with it). On ASCII
# the two agree: lower-casing is the case folding, ``\w``, ``\d`` and ``\b`` are
# the same, and ``\s`` is spelled out, since ``re`` also counts the separators
# \x1c-\x1f as space and ``regex`` does not.
@cache
def _time_words_ascii() -> re.Pattern[str]:
    """:data:`_TIME_WORDS` for the standard library's engine, compiled on first use."""
    return re.compile(_TIME_WORDS.pattern.replace(r"\s", r"[\t\n\x0b\x0c\r ]"))


_YEAR_IN = _Lazy(rf"\b{_YEAR_ANY}\b")
_DAY = _dt.timedelta(days=1)
_GRACE_MAX = _dt.timedelta(days=31)


@dataclass(frozen=True)
class DateSpan:
    """A span of time a query names: ``[start, end)`` in UTC, or a month of any year.

    ``start``/``end`` are ``None`` for an open side (``before May 2023`` has
    no start); ``month`` is set (1-12) instead of both for a month named
    without a year (``in June``). ``exact``: the span came from a day, month or
    year, with no open side (an event *told* a little after such a span still
    belongs to it; see :func:`span_match`).
    """

    start: _dt.datetime | None
    end: _dt.datetime | None
    month: int = 0
    exact: bool = True

    @property
    def label(self) -> str:
        """A compact rendering, for explanations and tests."""
        if self.month:
            return f"month {self.month}"
        a = self.start.date().isoformat() if self.start else ""
        b = self.end.date().isoformat() if self.end else ""
        return f"{a}..{b}"


def _utc(y: int, m: int, d: int) -> _dt.datetime:
    return _dt.datetime(y, m, d, tzinfo=_dt.UTC)


def _next_month(y: int, m: int) -> _dt.datetime:
    return _utc(y + 1, 1, 1) if m == 12 else _utc(y, m + 1, 1)


def _bounded(start: _dt.datetime, end: _dt.datetime, bound: str | None) -> DateSpan:
    """The span, or the open range its bound word makes of it."""
    b = (bound or "").lower()
    if b == "before" or b in ("until", "till", "by"):
        return DateSpan(None, start if b == "before" else end, exact=False)
    if b in ("after", "since"):
        return DateSpan(end if b == "after" else start, None, exact=False)
    return DateSpan(start, end)


def _absolute(m: regex.Match[str]) -> tuple[_dt.datetime, _dt.datetime] | None:
    g = m.groupdict()
    try:
        year = int(g["year"])
        if g.get("iso"):
            start = _utc(year, int(g["m"]), int(g["d"]))
            return start, start + _DAY
        month = _MONTHS[g["mon"].lower()] if g.get("mon") else 0
        if month and g.get("day"):
            start = _utc(year, month, int(g["day"]))
            return start, start + _DAY
        if month:
            return _utc(year, month, 1), _next_month(year, month)
        return _utc(year, 1, 1), _utc(year + 1, 1, 1)
    except (ValueError, KeyError):
        return None


def _midnight(now: _dt.datetime) -> _dt.datetime:
    now = now.astimezone(_dt.UTC)
    return _utc(now.year, now.month, now.day)


def _count(words: str) -> int:
    """The number a count spells: "3", "two", "a couple of" (2), "several" (3)."""
    raw = words.lower().split()
    word = raw[-1] if raw[-1] != "of" else raw[-2]
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _relative(m: regex.Match[str], now: _dt.datetime) -> DateSpan | None:
    g = m.groupdict()
    today = _midnight(now)
    if g.get("word"):
        w = " ".join(g["word"].lower().split())
        start = today - _DAY if w in ("yesterday", "last night") else today
        return DateSpan(start, start + _DAY)
    if g.get("weekday"):
        back = (today.weekday() - _WEEKDAYS.index(g["weekday"].lower())) % 7 or 7
        start = today - back * _DAY
        return DateSpan(start, start + _DAY)
    unit = g["unit"].lower()
    if g.get("which"):
        this = g["which"].lower() == "this"
        if unit == "day":
            return DateSpan(today if this else today - _DAY, today + _DAY if this else today)
        if unit in ("week", "weekend"):
            monday = today - today.weekday() * _DAY
            start = monday if this else monday - 7 * _DAY
            if unit == "weekend":
                start += 5 * _DAY
                return DateSpan(start, start + 2 * _DAY)
            return DateSpan(start, start + 7 * _DAY)
        if unit == "month":
            y, mo = today.year, today.month
            if not this:
                y, mo = (y - 1, 12) if mo == 1 else (y, mo - 1)
            return DateSpan(_utc(y, mo, 1), _next_month(y, mo))
        y = today.year if this else today.year - 1
        return DateSpan(_utc(y, 1, 1), _utc(y + 1, 1, 1))
    n = _count(g["n"])
    if unit in ("day", "week", "weekend"):
        days = n * (7 if unit != "day" else 1)
        start = today - days * _DAY
        width = _DAY if unit == "day" else 7 * _DAY
        return DateSpan(start - (width - _DAY) // 2, start + (width + _DAY) // 2)
    if unit == "month":
        y, mo = today.year, today.month - n
        while mo < 1:
            y, mo = y - 1, mo + 12
        return DateSpan(_utc(y, mo, 1), _next_month(y, mo))
    return DateSpan(_utc(today.year - n, 1, 1), _utc(today.year - n + 1, 1, 1))


def _date_of(text: str, year: int | None) -> tuple[_dt.datetime, _dt.datetime] | None:
    """The ``[start, end)`` of the day, month or year one :data:`_DATE` match names.

    A date written without a year takes ``year``; with neither it names no
    span (``None``), and neither does an impossible one ("31 June 2023").
    """
    text = " ".join(text.split())
    if year is not None and _YEAR_IN.search(text) is None:
        text = f"{text} {year}"
    for pat in _ABSOLUTE:
        m = pat.fullmatch(text)
        if m is not None:
            return _absolute(m)
    return None


def _year_in(text: str) -> int | None:
    m = _YEAR_IN.search(text)
    return int(m.group()) if m else None


def _range(m: regex.Match[str]) -> DateSpan | None:
    """The span of a :data:`_RANGE` match: the first date's start to the second's end."""
    year = _year_in(m["b"]) or _year_in(m["a"])
    if year is None:
        return None
    a, b = _date_of(m["a"], year), _date_of(m["b"], year)
    if a is None or b is None or a[0] >= b[1]:
        return None
    return DateSpan(a[0], b[1])


def _months_back(t: _dt.datetime, n: int) -> _dt.datetime:
    """``t`` moved ``n`` calendar months (negative: forward), the day clamped to the month's end."""
    y, m = divmod(t.year * 12 + t.month - 1 - n, 12)
    m += 1
    last = (_next_month(y, m) - _DAY).day
    return t.replace(year=y, month=m, day=min(t.day, last))


def _anchored(m: regex.Match[str]) -> DateSpan | None:
    """The span of an :data:`_ANCHORED` match, measured from its date.

    ``n`` units before a date is the stretch of that length that ends where
    the date starts ("two weeks before August 11": July 28 to August 11);
    after one, the stretch that starts where it ends. A weekend is the
    Saturday and Sunday nearest before (after) the date. So an event told on
    the anchor date itself ("last week I...") falls in the span's grace
    (:func:`span_match`).
    """
    d = _date_of(m["d"], None)
    if d is None:
        return None
    n = _count(m["n"] or "one")
    if not 0 < n <= 1000:
        return None
    unit = m["unit"].lower()
    before = m["dir"].lower().startswith(("before", "prior"))
    edge = d[0] if before else d[1]
    try:
        if unit == "weekend":
            # Saturday on or before the day before the date (after: on or after its end).
            day = edge - _DAY if before else edge
            sat = (
                day - ((day.weekday() - 5) % 7) * _DAY
                if before
                else day + ((5 - day.weekday()) % 7) * _DAY
            )
            if before and sat + 2 * _DAY > edge:
                sat -= 7 * _DAY
            step = 7 * (n - 1) * _DAY
            sat = sat - step if before else sat + step
            return DateSpan(sat, sat + 2 * _DAY)
        if unit in ("day", "week"):
            length = n * (7 if unit == "week" else 1) * _DAY
            far = edge - length if before else edge + length
        else:
            months = n * (12 if unit == "year" else 1)
            far = _months_back(edge, months if before else -months)
    except (OverflowError, ValueError):
        return None
    return DateSpan(far, edge) if before else DateSpan(edge, far)


def query_dates(text: str, now: _dt.datetime) -> list[DateSpan]:
    """The date spans ``text`` names, in the order they appear (see the module docstring).

    Relative expressions resolve against ``now`` (an aware datetime; a naive
    one is read as UTC). Each stretch of text yields at most one span: the
    most specific pattern that matches it (a day before a month before a
    year). A month named without a year ("in June") is June of any year; the
    bare word "may" counts only after a preposition ("in May") or capitalised
    mid-sentence, as the verb is far more common. A span named again is not
    repeated.
    """
    if not _may_name_a_date(text):
        return []
    if now.tzinfo is None:
        now = now.replace(tzinfo=_dt.UTC)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, DateSpan]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= x or a >= y for x, y in taken)

    lower = text.lower()
    for pat, read, words in (
        (_RANGE, _range, ("between", "from")),
        (_ANCHORED, _anchored, ("before", "after", "prior", "following")),
    ):
        if not any(w in lower for w in words):  # the scan costs ~10 us; this, ~0.2
            continue
        for m in pat.finditer(text):
            span = read(m)
            if span is not None and free(*m.span()):
                taken.append(m.span())
                found.append((m.start(), span))
    for pat in _ABSOLUTE:
        for m in pat.finditer(text):
            a, b = m.span()
            if not free(a, b):
                continue
            got = _absolute(m)
            if got is None:
                continue
            taken.append((a, b))
            bound = _BOUND.search(text[max(0, a - 12) : a])
            found.append((a, _bounded(got[0], got[1], bound["bound"] if bound else None)))
    for m in _BARE_MONTH.finditer(text):
        a, b = m.span()
        if not free(a, b):
            continue
        word = m.group("mon")
        before = text[max(0, a - 24) : a]
        bound = _BOUND.search(before)
        prefixed = bound is not None or _MONTH_PREFIX.search(before) is not None
        if word.lower() == "may" and not prefixed and not _CAPITAL_MAY.search(text, a):
            continue
        taken.append((a, b))
        found.append((a, DateSpan(None, None, month=_MONTHS[word.lower()], exact=bound is None)))
    for pat in _RELATIVE:
        for m in pat.finditer(text):
            a, b = m.span()
            if not free(a, b):
                continue
            span = _relative(m, now)
            if span is not None:
                taken.append((a, b))
                found.append((a, span))
    # A span named twice counts once: what a search does with each one is per candidate.
    return list(dict.fromkeys(s for _, s in sorted(found, key=lambda p: p[0])))


def span_match(span: DateSpan, when: _dt.datetime) -> float:
    """How well an event at ``when`` fits ``span``: 1 inside, 0.5 just after an exact span, else 0.

    People tell of an event after it happened ("last week I ran a race"), so
    an item dated up to one span-length (at most 31 days) after an exact span
    half-matches it. An open range ("before May 2023") and a month of any
    year match inside only.
    """
    if span.month:
        return 1.0 if when.month == span.month else 0.0
    if (span.start is None or when >= span.start) and (span.end is None or when < span.end):
        return 1.0
    if span.exact and span.start is not None and span.end is not None and when >= span.end:
        grace = min(span.end - span.start, _GRACE_MAX)
        return 0.5 if when < span.end + grace else 0.0
    return 0.0


@lru_cache(maxsize=1024)
def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time: "when ...", "what year ...", "how long ago ...".

    Cached per query, as :func:`_may_name_a_date` is.

    >>> asks_when("In which month did John score?"), asks_when("What did John eat?")
    (True, False)
    """
    return _WHEN.search(query) is not None


@lru_cache(maxsize=1 << 16)
def mentions_time(text: str) -> bool:
    """Whether ``text`` refers to a time: a date, a month, a weekday, "last week", "ago", ...

    Cached per text (an item's text is read for every "when" question).
    "May" counts when it follows a preposition or is capitalised mid-sentence.

    >>> mentions_time("We may go"), mentions_time("see you in May"), mentions_time("two weeks ago")
    (False, True, True)
    """
    words = _time_words_ascii().search(text.lower()) if text.isascii() else _TIME_WORDS.search(text)
    return words is not None or _CAPITAL_MAY.search(text) is not None
