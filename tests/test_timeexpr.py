"""The time-expression reader: query date spans, "when" questions, texts that mention a time."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memstore.timeexpr import DateSpan, asks_when, mentions_time, query_dates, span_match

NOW = dt.datetime(2023, 6, 14, 15, 30, tzinfo=dt.UTC)  # a Wednesday


def _labels(text: str) -> list[str]:
    return [s.label for s in query_dates(text, NOW)]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("what happened on 2023-05-08?", ["2023-05-08..2023-05-09"]),
        ("What did Gina find on 1 February, 2023?", ["2023-02-01..2023-02-02"]),
        ("the painting shown on October 13, 2023", ["2023-10-13..2023-10-14"]),
        ("dinner on May 3rd, 2023", ["2023-05-03..2023-05-04"]),
        ("What setback did Melanie face in October 2023?", ["2023-10-01..2023-11-01"]),
        ("how often at the beach in 2023?", ["2023-01-01..2024-01-01"]),
        ("camping in June", ["month 6"]),
        ("before May 2023", ["..2023-05-01"]),
        ("after May 2023", ["2023-06-01.."]),
        ("since 2022", ["2022-01-01.."]),
        ("yesterday", ["2023-06-13..2023-06-14"]),
        ("last week", ["2023-06-05..2023-06-12"]),
        ("this month", ["2023-06-01..2023-07-01"]),
        ("last month", ["2023-05-01..2023-06-01"]),
        ("last year", ["2022-01-01..2023-01-01"]),
        ("three days ago", ["2023-06-11..2023-06-12"]),
        ("two years ago", ["2021-01-01..2022-01-01"]),
        ("last Friday", ["2023-06-09..2023-06-10"]),
        ("from May 2023 to June 2023", ["2023-05-01..2023-06-01", "2023-06-01..2023-07-01"]),
        ("what may Caroline like?", []),
        ("what does Caroline like?", []),
    ],
)
def test_query_dates(text: str, want: list[str]) -> None:
    assert _labels(text) == want


def test_a_naive_now_is_read_as_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert query_dates("yesterday", naive) == query_dates("yesterday", NOW)


def at(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)


def test_span_match_inside_just_after_and_outside() -> None:
    (may,) = query_dates("in May 2023", NOW)
    assert span_match(may, at("2023-05-31T23:00")) == 1.0
    assert span_match(may, at("2023-06-10")) == 0.5  # told within a month afterwards
    assert span_match(may, at("2023-07-05")) == 0.0
    assert span_match(may, at("2023-04-30")) == 0.0
    (before,) = query_dates("before May 2023", NOW)
    assert span_match(before, at("2023-04-30")) == 1.0
    assert span_match(before, at("2023-05-02")) == 0.0  # an open range has no grace


@pytest.mark.parametrize(
    ("q", "want"),
    [
        ("When did Caroline go to the support group?", True),
        ("In which month did John score his career high?", True),
        ("What year did John start surfing?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("Who did Maria have dinner with?", False),
        ("What does Melanie do when she is stressed?", False),
    ],
)
def test_asks_when(q: str, want: bool) -> None:
    assert asks_when(q) is want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("I ran a charity race last Sunday", True),
        ("We went camping two weeks ago", True),
        ("I painted that sunrise in 2022", True),
        ("See you in May!", True),
        ("Back in May we met", True),
        ("That may be true", False),
        ("I love pottery and painting", False),
    ],
)
def test_mentions_time(text: str, want: bool) -> None:
    assert mentions_time(text) is want


@given(st.text(max_size=80))
def test_any_text_parses_without_error_and_spans_are_ordered(text: str) -> None:
    for span in query_dates(text, NOW):
        assert isinstance(span, DateSpan)
        if span.start is not None and span.end is not None:
            assert span.start < span.end
        assert span.month or span.start is not None or span.end is not None


@given(st.integers(2000, 2030), st.integers(1, 12), st.integers(1, 28))
def test_a_written_day_is_that_day(year: int, month: int, day: int) -> None:
    name = dt.date(year, month, day).strftime("%B")
    start = dt.datetime(year, month, day, tzinfo=dt.UTC)
    for text in (f"on {day} {name} {year}", f"on {name} {day}, {year}", f"{start:%Y-%m-%d}"):
        (span,) = query_dates(text, NOW)
        assert (span.start, span.end) == (start, start + dt.timedelta(days=1))


_TIME_PIECES = [
    "last",
    "Next",
    "WEEK",
    "weekend",
    "mondays",
    "Tues",
    "day",
    "days",
    "ago",
    "a while",
    "back",
    "the other",
    "couple of",
    "few",
    "two",
    "12",
    "1999",
    "2024",
    "20245",
    "may",
    "May",
    "in",
    "since",
    "june",
    "yesterday",
    "Today",
    "x",
    "_",
    "-",
    ".",
    "!",
    "?",
    " ",
    "  ",
    "\t",
    "\n",
    "\x0b",
    "\x0c",
    "\r",
    "\x1c",
    "\x1d",
    "\x1e",
    "\x1f",
    "\x85",
    "\xa0",
    "\u2003",
    "ſ",
    "\u212a",
    "İ",
    "é",
    "日",
]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(_TIME_PIECES), max_size=8).map("".join))
@example("last\x1cweek")  # a separator ``re`` counts as space and ``regex`` does not
@example("two\x0bdays")
@example("LAST WEEK")
def test_mentions_time_reads_every_text_as_its_full_pattern_does(text: str) -> None:
    """ASCII texts take a faster engine; every text must get the same answer as the pattern."""
    from memstore.timeexpr import _CAPITAL_MAY, _TIME_WORDS

    want = _TIME_WORDS.search(text) is not None or _CAPITAL_MAY.search(text) is not None
    assert mentions_time.__wrapped__(text) is want
