"""Query signals: a named date, a "when" question, a named subject reorder what the channels found.

Behaviour a caller relies on (the May 2023 item first for "in May 2023", the
statement that says when for "when did..."), each signal's switch, and a
property test holding the lean path and the general path (``explain=True``)
to the same results with the signals on.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore.search import SIGNAL_WEIGHT, SearchConfig, Searcher
from memstore_index.cellstore import CellStore
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import T0, FakeClock

OFF: dict[str, Any] = {"date_signal": False, "when_signal": False, "subject_signal": False}


def _event(id: str, text: str, date: str, subject: str = "") -> Item:
    return Item(id=id, kind="event", content=text, event_date=date, subject=subject)


def _ids(searcher: Searcher, query: str, limit: int = 5) -> list[str]:
    return [r.item.id for r in searcher.hybrid_search(query, limit=limit)]


def _store(*items: Item) -> Store:
    store = Store(Config(clock=FakeClock(T0)))
    for it in items:
        store.upsert(it)
    return store


def test_a_query_naming_a_month_ranks_that_months_event_first() -> None:
    # Same words; only the date tells them apart.
    store = _store(
        _event("apr", "Mel painted a lake at the pottery class", "2023-04-12"),
        _event("may", "Mel painted a lake at the pottery class", "2023-05-20"),
        _event("jun", "Mel painted a lake at the pottery class", "2023-06-02"),
    )
    on = Searcher(SearchConfig(store=store))
    assert _ids(on, "what did Mel paint in May 2023")[0] == "may"
    assert _ids(on, "what did Mel paint on 12 April 2023")[0] == "apr"
    assert _ids(on, "what did Mel paint in June")[0] == "jun"


def test_a_relative_date_resolves_against_the_stores_clock() -> None:
    # T0 is Monday 2025-01-06: "last week" is 2024-12-30 .. 2025-01-06.
    store = _store(
        _event("a", "the deploy of the billing service", "2024-11-02"),
        _event("b", "the deploy of the billing service", "2025-01-02"),
    )
    assert _ids(Searcher(SearchConfig(store=store)), "billing deploy last week")[0] == "b"
    off = Searcher(SearchConfig(store=store, date_signal=False))
    assert _ids(off, "billing deploy last week")[0] == "a"  # a tie, broken by id


def test_before_a_date_favours_what_happened_before_it() -> None:
    store = _store(
        _event("a", "Jon lost his job at the bank", "2023-01-19"),
        _event("b", "Jon lost his job at the bank", "2023-03-01"),
    )
    searcher = Searcher(SearchConfig(store=store))
    assert _ids(searcher, "Jon job before February 2023")[0] == "a"
    assert _ids(searcher, "Jon job after February 2023")[0] == "b"


def test_a_when_question_favours_the_statement_that_says_when() -> None:
    store = _store(
        _event("a", "Caroline went to the support group with her mum", "2023-05-08"),
        _event("b", "Caroline went to the support group the other day", "2023-05-08"),
    )
    on = Searcher(SearchConfig(store=store, subject_signal=False))
    assert _ids(on, "When did Caroline go to the support group?")[0] == "b"
    off = Searcher(SearchConfig(store=store, when_signal=False, subject_signal=False))
    assert _ids(off, "When did Caroline go to the support group?")[0] == "a"  # a tie: by id


def test_a_query_naming_a_subject_favours_items_about_it() -> None:
    store = _store(
        _event("m", "I went camping with the kids at the lake", "2023-05-08", "Melanie"),
        _event("c", "I went camping with the kids at the lake", "2023-05-08", "Caroline"),
    )
    assert _ids(Searcher(SearchConfig(store=store)), "where did Melanie go camping")[0] == "m"
    assert _ids(Searcher(SearchConfig(store=store)), "where did Caroline go camping")[0] == "c"


def test_signals_reorder_but_never_add_a_candidate() -> None:
    store = _store(
        _event("hit", "the pottery class", "2024-01-01"),
        _event("miss", "a walk on the beach", "2025-01-02"),  # last week, but no word matches
    )
    assert _ids(Searcher(SearchConfig(store=store)), "pottery last week") == ["hit"]


def test_explain_reports_what_the_signals_added() -> None:
    store = _store(_event("may", "the lake painting", "2023-05-20"))
    (r,) = Searcher(SearchConfig(store=store)).hybrid_search("lake painting May 2023", explain=True)
    assert r.explanation is not None
    assert r.explanation.signal_score == pytest.approx(SIGNAL_WEIGHT)


def test_a_signal_weight_outside_0_1_is_refused() -> None:
    with pytest.raises(ValueError, match="signal_weight"):
        Searcher(SearchConfig(store=Store(), signal_weight=1.5))


SUBJECTS = ["", "Caroline", "Melanie", "Jon Snow"]
TEXTS = ["painted a lake", "went camping", "pottery class", "support group", "the beach"]
TIMES = ["", " yesterday", " last week", " in May", " two years ago"]
QUERIES = [
    "when did Caroline paint a lake",
    "Melanie camping in May 2023",
    "pottery class before June 2023",
    "what did Jon Snow do last week",
    "support group 2023-05-08",
    "the beach",
]


_FEW = st.integers(1, 12)
_TEXT = st.sampled_from(TEXTS)


@st.composite
def signal_stores(
    draw: st.DrawFn,
    sizes: st.SearchStrategy[int] = _FEW,
    texts: st.SearchStrategy[str] = _TEXT,
) -> tuple[Store, CellStore]:
    clock = FakeClock(dt.datetime(2023, 6, 14, 9, tzinfo=dt.UTC))
    store = Store(Config(clock=clock))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    for i in range(draw(sizes)):
        month = draw(st.integers(3, 7))
        day = draw(st.integers(1, 28))
        date = draw(st.sampled_from([f"2023-{month:02d}-{day:02d}", ""]))
        store.upsert(
            Item(
                id=f"i{i:03d}",
                kind="event" if date else "note",
                content=draw(texts) + draw(st.sampled_from(TIMES)),
                subject=draw(st.sampled_from(SUBJECTS)),
                event_date=date,
            )
        )
    return store, cells


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=signal_stores(),
    query=st.sampled_from(QUERIES),
    cfg=st.sampled_from([{}, {"fusion": "rrf"}, {"signal_weight": 0.5, "always_fuse": True}]),
    limit=st.integers(1, 6),
)
def test_lean_and_general_paths_agree_with_signals_on(
    env: tuple[Store, CellStore], query: str, cfg: dict[str, Any], limit: int
) -> None:
    store, cells = env
    searcher = Searcher(SearchConfig(store=store, cells=lambda: cells, **cfg))
    lean = searcher.hybrid_search(query, limit=limit)
    general = searcher.hybrid_search(query, limit=limit, explain=True)  # the general path
    assert [r.item.id for r in lean] == [r.item.id for r in general]
    for a, b in zip(lean, general, strict=True):
        assert a.score == b.score
    assert store.search_snapshot() is not None


def test_with_every_signal_off_nothing_changes() -> None:
    store = _store(
        _event("a", "Mel went camping yesterday", "2023-05-01", "Mel"),
        _event("b", "Mel went camping", "2023-06-01", "Caroline"),
    )
    off = Searcher(SearchConfig(store=store, signal_weight=0.0))
    also_off = Searcher(SearchConfig(store=store, **OFF))
    q = "when did Mel go camping in June 2023"
    assert _ids(off, q) == _ids(also_off, q)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(env=signal_stores(), query=st.sampled_from(QUERIES))
def test_signals_change_the_order_never_the_set_of_candidates(
    env: tuple[Store, CellStore], query: str
) -> None:
    store, cells = env
    on = Searcher(SearchConfig(store=store, cells=lambda: cells, signal_weight=1.0))
    off = Searcher(SearchConfig(store=store, cells=lambda: cells, **OFF))
    got = [r.item.id for r in on.hybrid_search(query, limit=50)]
    assert sorted(got) == sorted(r.item.id for r in off.hybrid_search(query, limit=50))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=signal_stores(),
    asks=st.lists(
        st.tuples(
            st.lists(st.integers(0, 11), min_size=1, max_size=8),
            st.sets(st.sampled_from(SUBJECTS), max_size=3).map(frozenset),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_signal_columns_read_each_asked_slot_as_its_own_item_says(
    env: tuple[Store, CellStore], asks: list[tuple[list[int], frozenset[str]]]
) -> None:
    """Filled slot by slot, in any order, repeats and all: the same facts as each item's own."""
    from memstore.eventdate import parse_event_date
    from memstore.search._signals import _Columns
    from memstore.timeexpr import mentions_time

    store, _ = env
    snap = store.search_snapshot()
    assert snap is not None
    cols = _Columns(snap)
    for wanted, named in asks:
        slots = np.array([s % len(snap) for s in wanted], np.intp)
        items = [snap.items[s] for s in slots]
        us, month = cols.event(slots)
        for it, u, m in zip(items, us.tolist(), month.tolist(), strict=True):
            when = parse_event_date(it.event_date) if it.event_date else None
            assert (m, u != np.iinfo(np.int64).min) == ((when.month, True) if when else (0, False))
        said = cols.said(slots).tolist()
        assert said == [mentions_time(f"{it.title}\n{it.content}") for it in items]
        hit = cols.named(named, slots).tolist()
        assert hit == [1.0 if it.subject in named else 0.0 for it in items]


def test_a_when_question_after_a_write_reads_only_its_candidates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every write starts a new snapshot; the first "when" question after it must not read
    every stored text (a pause that grew with the store: ~0.5 s at 20k items)."""
    import memstore.search._signals as signals
    from memstore import _store_search

    read: list[str] = []
    original = signals.mentions_time

    def counted(text: str) -> bool:
        read.append(text)
        return original(text)

    store = _store(
        *(
            Item(id=f"n{i:04d}", kind="note", content=f"note {i} on shard {i % 97} and disk {i}")
            for i in range(2000)
        ),
        Item(id="hit", kind="note", content="the migration of shard 7 finished last week"),
    )
    searcher = Searcher(SearchConfig(store=store))
    monkeypatch.setattr(signals, "mentions_time", counted)
    # Every search on the lean path, the first after a write included (the
    # store's amortising of snapshot builds is another test's).
    monkeypatch.setattr(_store_search, "SNAPSHOT_AMORTISE", 10**9)
    for round in range(3):
        read.clear()
        got = _ids(searcher, "when did the migration of shard 7 finish?")
        assert got[0] == "hit"
        assert 0 < len(read) < 300, len(read)  # the candidates, not the 2,000 items
        assert store.search_snapshot() is not None
        store.upsert(Item(id=f"w{round}", kind="note", content=f"a later note {round}"))


_CROWD_WORDS = ["lake", "camping", "pottery", "class", "group", "beach", "paint", "went", "the"]


def crowded_stores() -> st.SearchStrategy[tuple[Store, CellStore]]:
    """Many more candidates than a pool: the lean path reads the signals of those that can place."""
    words = st.lists(st.sampled_from(_CROWD_WORDS), min_size=1, max_size=5).map(" ".join)
    return signal_stores(sizes=st.integers(60, 160), texts=words)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=crowded_stores(),
    query=st.sampled_from([*QUERIES, "when did they go camping at the lake", "the class"]),
    weight=st.sampled_from([SIGNAL_WEIGHT, 0.5, 1.0]),
    limit=st.integers(1, 4),
)
def test_a_crowded_lean_search_orders_as_the_general_path_with_signals_on(
    env: tuple[Store, CellStore], query: str, weight: float, limit: int
) -> None:
    """Signals read only for candidates that can place (the lean path's cut), the same order."""
    store, cells = env
    cfg = SearchConfig(store=store, cells=lambda: cells, signal_weight=weight, always_fuse=True)
    searcher = Searcher(cfg)
    assert store.search_snapshot() is not None
    lean = searcher.hybrid_search(query, limit=limit)
    general = searcher.hybrid_search(query, limit=limit, explain=True)
    assert [r.item.id for r in lean] == [r.item.id for r in general]
    assert [r.score for r in lean] == [r.score for r in general]
