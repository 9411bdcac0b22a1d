"""Query signals: what a query says about its answer beyond its words, as a bonus on fused scores.

Fusion ranks by how well an item's words and meaning match the query's. Some
queries also say something about the *answer* that no channel scores:

* **dates** (``SearchConfig.date_signal``): "what did Mel paint in July 2023?"
  is about events of July 2023. The spans :func:`~memstore.timeexpr.query_dates`
  reads from the query are matched against each candidate's ``event_date``
  (:func:`~memstore.timeexpr.span_match`: 1 inside, 0.5 told shortly after).
* **when** (``SearchConfig.when_signal``): "when did Mel paint a sunrise?" is
  answered by a statement that says when ("I painted it last year"): a
  question that :func:`~memstore.timeexpr.asks_when` favours candidates whose
  text :func:`~memstore.timeexpr.mentions_time`.
* **subject** (``SearchConfig.subject_signal``): "what does Caroline like?"
  names the subject the answer is about: a candidate whose ``subject`` is
  named in the query is favoured (a conversation turn's subject is its
  speaker). Which subjects a query names is the store's rule,
  :meth:`~memstore.Store.named_subjects` (the subjects it has indexed whose
  every word is a query word); the Searcher asks it once per search and
  hands the same set to this stage and to relevance, so a hit the signal
  favours as named is never one relevance counts as about another subject.

Each signal that holds for a candidate is worth 1 (a date half-match 0.5);
the candidate gains ``signal_weight`` times their sum on top of its fused
score (after spreading). A signal only reorders candidates the channels
found; it never adds one. Both search paths apply it: the general one per
item (:func:`item_bonus`), the lean one over the snapshot's slots
(:func:`slot_bonus`), with the same arithmetic.
"""

from __future__ import annotations

import datetime as _dt
import threading
import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memstore._search_snapshot import SearchSnapshot, micros
from memstore.eventdate import parse_event_date
from memstore.item import Item
from memstore.search._types import SearchConfig
from memstore.timeexpr import DateSpan, asks_when, mentions_time, query_dates, span_match

__all__ = ["QuerySignals", "analyse", "item_bonus", "max_bonus", "slot_bonus"]

_NO_DATE_US = np.iinfo(np.int64).min


@dataclass(frozen=True)
class QuerySignals:
    """The signals one query carries (see the module docstring); ``weight`` is per signal."""

    spans: tuple[DateSpan, ...]
    when: bool
    named: frozenset[str]
    """The subjects the query names (empty: none, or the subject signal is off)."""
    weight: float

    @property
    def active(self) -> bool:
        """Whether any signal can change a score."""
        return self.weight > 0.0 and (bool(self.spans) or self.when or bool(self.named))


def analyse(
    cfg: SearchConfig, query: str, now: _dt.datetime, named: frozenset[str]
) -> QuerySignals | None:
    """The query's signals under ``cfg``, or ``None`` when none is on or none applies.

    ``named``: the subjects the query names (:meth:`~memstore.Store.named_subjects`),
    ignored when ``cfg.subject_signal`` is off.
    """
    if cfg.signal_weight <= 0.0:
        return None
    spans = tuple(query_dates(query, now)) if cfg.date_signal else ()
    when = cfg.when_signal and asks_when(query)
    sig = QuerySignals(spans, when, named if cfg.subject_signal else frozenset(), cfg.signal_weight)
    return sig if sig.active else None


def _text(item: Item) -> str:
    return f"{item.title}\n{item.content}"


def item_bonus(sig: QuerySignals, item: Item) -> float:
    """What ``item`` gains from the query's signals (the general path)."""
    date = 0.0
    if sig.spans:
        when = parse_event_date(item.event_date)
        if when is not None:
            date = max(span_match(s, when) for s in sig.spans)
    said = 1.0 if sig.when and mentions_time(_text(item)) else 0.0
    named = 1.0 if item.subject in sig.named else 0.0
    return sig.weight * ((date + said) + named)


def max_bonus(sig: QuerySignals) -> float:
    """The largest bonus any item can get from ``sig`` (every signal that is on, holding)."""
    n = (1.0 if sig.spans else 0.0) + (1.0 if sig.when else 0.0)
    return sig.weight * (n + (1.0 if sig.named else 0.0))


class _Columns:
    """Per-slot facts the signals read, each worked out the first time a search asks for its slot.

    A snapshot lasts one store generation: every write starts a new one. Built
    for every item at the first question after a write, these columns cost
    O(items) for the few hundred candidates a search scores: the time-words
    pattern over every text took ~0.5 s at 20k items, a pause in the first
    "when" answer after each write. Filled per slot instead, a search pays for
    its own candidates not yet seen in this snapshot, and nothing after.
    Searches of one snapshot may run on several threads: a lock keeps each
    fill (and the subject codes it hands out) whole.
    """

    def __init__(self, snap: SearchSnapshot) -> None:
        self._snap = snap
        n = len(snap)
        self._us = np.full(n, _NO_DATE_US, np.int64)
        self._month = np.zeros(n, np.int8)
        self._event_known = np.zeros(n, np.bool_)
        self._said = np.zeros(n, np.bool_)
        self._said_known = np.zeros(n, np.bool_)
        self._subject = np.full(n, -1, np.int32)
        """Each slot's subject as a code into ``_names`` (-1: not read yet)."""
        self._codes: dict[str, int] = {}
        self._names: list[str] = []
        self._named: tuple[frozenset[str], npt.NDArray[np.float64]] | None = None
        self._lock = threading.Lock()

    def event(
        self, slots: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]:
        """Each of ``slots``' event date in microseconds (or a sentinel) and its month (or 0)."""
        items = self._snap.items
        with self._lock:
            for s in _unknown(~self._event_known[slots], slots):
                it = items[s]
                when = parse_event_date(it.event_date) if it.event_date else None
                if when is not None:
                    self._us[s], self._month[s] = micros(when), when.month
                self._event_known[s] = True
            return self._us[slots], self._month[slots]

    def said(self, slots: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
        """Whether each of ``slots``' text mentions a time."""
        items = self._snap.items
        with self._lock:
            for s in _unknown(~self._said_known[slots], slots):
                self._said[s] = mentions_time(_text(items[s]))
                self._said_known[s] = True
            return self._said[slots]

    def named(self, named: frozenset[str], slots: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """1.0 for each of ``slots`` whose subject is in ``named``, else 0.0."""
        subject = self._subject
        with self._lock:
            todo = _unknown(subject[slots] < 0, slots)
            if todo:
                codes, names, items = self._codes, self._names, self._snap.items
                for s in todo:
                    name = items[s].subject
                    code = codes.get(name)
                    if code is None:
                        code = codes[name] = len(names)
                        names.append(name)
                    subject[s] = code
            last = self._named  # per code: 1.0 when named (the last set asked, kept)
            if last is None or last[0] != named or last[1].size != len(self._names):
                names = self._names
                hit = np.fromiter(map(named.__contains__, names), np.float64, len(names))
                last = self._named = (named, hit)
            return last[1][subject[slots]]


def _unknown(fresh: npt.NDArray[np.bool_], slots: npt.NDArray[np.intp]) -> list[int]:
    """The distinct ``slots`` whose ``fresh`` flag (one per slot asked) is set: those not read yet.

    Usually none, found by one vectorised test over the slots asked, never over
    the whole snapshot.
    """
    if not fresh.any():
        return []
    return [int(s) for s in np.unique(slots[fresh])]


_COLUMNS: weakref.WeakKeyDictionary[SearchSnapshot, _Columns] = weakref.WeakKeyDictionary()


def _columns(snap: SearchSnapshot) -> _Columns:
    cols = _COLUMNS.get(snap)
    if cols is None:
        cols = _COLUMNS[snap] = _Columns(snap)
    return cols


def _span_match_us(span: DateSpan, us: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """:func:`~memstore.timeexpr.span_match` over microsecond event dates (sentinel: no date)."""
    dated = us != _NO_DATE_US
    inside = dated.copy()
    if span.start is not None:
        inside &= us >= micros(span.start)
    if span.end is not None:
        inside &= us < micros(span.end)
    out: npt.NDArray[np.float64] = inside.astype(np.float64)
    if span.exact and span.start is not None and span.end is not None:
        end = micros(span.end)
        grace = micros(span.end + min(span.end - span.start, _dt.timedelta(days=31)))
        out[dated & (us >= end) & (us < grace)] = 0.5
    return out


def slot_bonus(
    sig: QuerySignals, snap: SearchSnapshot, slots: npt.NDArray[np.intp]
) -> npt.NDArray[np.float64]:
    """What each of ``slots`` gains from the query's signals (the lean path; same arithmetic)."""
    cols = _columns(snap)
    # The same sum as item_bonus, ((date + said) + named) x weight; a signal that is
    # off adds 0.0, which changes no float, so only the signals that are on are added.
    total: npt.NDArray[np.float64] | None = None
    if sig.spans:
        us, month = cols.event(slots)
        date = np.zeros(slots.size, np.float64)
        for span in sig.spans:
            if span.month:
                got = ((month == span.month) & (us != _NO_DATE_US)).astype(np.float64)
            else:
                got = _span_match_us(span, us)
            date = np.maximum(date, got)
        total = date
    if sig.when:
        said = cols.said(slots).astype(np.float64)
        total = said if total is None else total + said
    if sig.named:
        named = cols.named(sig.named, slots)
        total = named if total is None else total + named
    if total is None:
        return np.zeros(slots.size, np.float64)
    out: npt.NDArray[np.float64] = total * sig.weight
    return out
