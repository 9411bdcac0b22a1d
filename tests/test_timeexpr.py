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
        ("from May 2023 to June 2023", ["2023-05-01..2023-07-01"]),
        ("between August 11 and August 15 2023", ["2023-08-11..2023-08-16"]),
        ("between 11 Aug and 15 Aug, 2023", ["2023-08-11..2023-08-16"]),
        ("from May to July 2023", ["2023-05-01..2023-08-01"]),
        ("between 2019 and 2021", ["2019-01-01..2022-01-01"]),
        # Backwards, or no year anywhere: no range; each side read as it would be alone.
        ("between August 15 and August 11 2023", ["month 8", "2023-08-11..2023-08-12"]),
        ("between August 11 and August 15", ["month 8"]),  # one span, named twice
        ("Where was Tim in the week before 16 November 2023?", ["2023-11-09..2023-11-16"]),
        ("the week after 16 November 2023", ["2023-11-17..2023-11-24"]),
        ("two weeks before August 11, 2023", ["2023-07-28..2023-08-11"]),
        ("a couple of days after 2023-05-08", ["2023-05-09..2023-05-11"]),
        ("the month before March 31, 2023", ["2023-02-28..2023-03-31"]),
        ("the year before 2020", ["2019-01-01..2020-01-01"]),
        ("last weekend before April 10, 2023", ["2023-04-08..2023-04-10"]),  # a Monday
        ("the weekend after 2023-06-14", ["2023-06-17..2023-06-19"]),  # a Wednesday
        ("the day before yesterday", ["2023-06-13..2023-06-14"]),  # no date: not anchored
        ("the week before May", ["month 5"]),  # no year: not anchored
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


@given(
    st.dates(dt.date(1990, 1, 1), dt.date(2030, 12, 31)),
    st.integers(1, 40),
    st.sampled_from(["day", "week"]),
    st.booleans(),
)
def test_a_span_anchored_to_a_day_ends_where_it_starts_or_starts_where_it_ends(
    day: dt.date, n: int, unit: str, before: bool
) -> None:
    """ "n units before D" is the stretch that ends where D starts; after, starts where D ends."""
    d = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    text = f"{n} {unit}s {'before' if before else 'after'} {d:%B} {day.day}, {day.year}"
    (span,) = query_dates(text, NOW)
    length = dt.timedelta(days=n * (7 if unit == "week" else 1))
    end = d + dt.timedelta(days=1)
    assert (span.start, span.end) == ((d - length, d) if before else (end, end + length))
    assert span.exact  # an event told on the day itself half-matches (the grace)
    assert span_match(span, d) == (0.5 if before else 0.0)


@given(
    st.dates(dt.date(1990, 1, 1), dt.date(2030, 12, 31)),
    st.dates(dt.date(1990, 1, 1), dt.date(2030, 12, 31)),
)
def test_a_range_runs_from_its_first_day_through_its_last(a: dt.date, b: dt.date) -> None:
    text = f"between {a:%B} {a.day}, {a.year} and {b:%B} {b.day}, {b.year}"
    spans = query_dates(text, NOW)
    if a <= b:
        start = dt.datetime(a.year, a.month, a.day, tzinfo=dt.UTC)
        end = dt.datetime(b.year, b.month, b.day, tzinfo=dt.UTC) + dt.timedelta(days=1)
        assert [(s.start, s.end) for s in spans] == [(start, end)]
    else:  # backwards: no range, the two days as they are
        assert len(spans) == 2 and all(s.end - s.start == dt.timedelta(days=1) for s in spans)


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


_DATE_PIECES = (
    "between and from to until through - before after prior following the a last two "
    "couple of several 1000 day days week weeks weekend month months year years "
    "August Aug 11 29 31 0 00 1st 2023 1900 2099 1899 February Feb. of , May june "
    "2023-02-29 2023-13-01 2023-08-11 Sunday"
).split()


@settings(max_examples=400)
@given(st.lists(st.sampled_from(_DATE_PIECES), min_size=1, max_size=9).map(" ".join))
@example("between 31 Feb and 1 March 2023")  # an impossible first day: no range
@example("the weekend before Sunday 2099-12-31")
@example("1000 years before 1900")  # out of the calendar: no span
@example("a month after 31 January 2023")  # clamped to February's end
def test_ranges_and_anchored_spans_never_fail_and_are_ordered(text: str) -> None:
    for span in query_dates(text, NOW):
        if span.start is not None and span.end is not None:
            assert span.start < span.end, (text, span.label)


@settings(max_examples=500)
@given(
    st.lists(
        st.sampled_from(
            [*_DATE_PIECES, *_TIME_PIECES, "market", "decide", "502", "12019", "x2023"]
        ),
        max_size=8,
    ).map("".join)
)
@example("error 502 at the market")
@example("two days ago")
@example("what did we ship last week, in 1999?")
@example("laſt week")  # long s: the pattern's case folding reads "last"
@example("in 20٢٣")  # Arabic-Indic digits are digits to the pattern
def test_the_pre_check_passes_every_text_the_patterns_can_read(text: str) -> None:
    """The cheap gate before the patterns may let through more than the trigger
    pattern, never less, so every text gets the spans of the ungated parse."""
    from memstore import timeexpr

    if timeexpr._TRIGGER.search(text) is not None:
        assert timeexpr._may_name_a_date(text)
    if not timeexpr._may_name_a_date(text):
        gate = timeexpr._may_name_a_date
        try:
            timeexpr._may_name_a_date = lambda _: True  # type: ignore[assignment]
            assert query_dates(text, NOW) == []
        finally:
            timeexpr._may_name_a_date = gate
