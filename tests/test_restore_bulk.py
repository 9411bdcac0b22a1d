"""Restore's bulk path equals the per-item path: same state, same search results."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Item, Store, _gc
from memstore.item import ThoughtLink
from memstore.journal import SqliteJournal

_WORDS = ["deploy", "deployment", "api", "orders", "lock", "12", "123", "1234", "2024", "x9", "é"]
_QUERIES = [*_WORDS, "deploi", "1243", "124", "orderslock", "api 123", "lock 2024 deploy"]

_word = st.sampled_from(_WORDS)
_text = st.lists(_word, max_size=6).map(" ".join)
_item = st.builds(
    Item,
    id=st.sampled_from([f"note-{i}" for i in range(8)]),
    kind=st.sampled_from(["observation", "decision"]),
    title=_text,
    content=_text,
    tags=st.lists(st.sampled_from(["tenant/a", "tenant/b", "shared"]), max_size=2, unique=True),
)


def _per_item(items: list[Item]) -> Store:
    store = Store()
    with store._locked():
        for it in items:
            store._set(it.id, it.clone(cell_originated=True))
    return store


def _state(store: Store) -> list[tuple[dict[str, object], bool]]:
    return [(it.model_dump(), it.cell_originated) for it in store.items()]


def _assert_same(a: Store, b: Store) -> None:
    a._check()
    b._check()
    assert _state(a) == _state(b)
    for q in _QUERIES:
        assert [it.id for it in a.keyword_search(q)] == [it.id for it in b.keyword_search(q)], q


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_item, max_size=12))
def test_restore_paths_equal_per_item_sets(items: list[Item]) -> None:
    reference = _per_item(items)
    cloned = Store()
    cloned.restore(items)
    assert all(not it.cell_originated for it in items)  # the caller's items are untouched
    owned = Store()
    owned._restore_owned([Item.model_validate_json(it.model_dump_json()) for it in items])
    _assert_same(reference, cloned)
    _assert_same(reference, owned)
    assert gc.isenabled()


def test_journal_restore_equals_live_store(tmp_path: Path) -> None:
    db = tmp_path / "j.db"
    with SqliteJournal(db, durability="off") as journal:
        live = Store()
        journal.attach(live)
        for i in range(300):
            live.upsert(
                Item(
                    id=f"note-{i % 250}",
                    kind="observation",
                    title=f"deploy {i % 37} of api-{i % 5}",
                    content=f"build {i} paused at stage {i % 7} on the orders table",
                )
            )
    with SqliteJournal(db) as again:
        restored = Store()
        again.attach(restored)
        assert gc.isenabled()
    live._check()
    restored._check()
    assert [it.model_dump() for it in restored.items()] == [it.model_dump() for it in live.items()]
    assert all(it.cell_originated for it in restored.items())
    for q in ["deploy 12", "bulid 123", "api-3 orders", "stage 6", "1234", "deploi"]:
        assert [it.id for it in restored.keyword_search(q)] == [
            it.id for it in live.keyword_search(q)
        ], q


_rich_item = st.builds(
    Item,
    id=st.sampled_from([f"note-{i}" for i in range(8)]),
    kind=st.sampled_from(["observation", "decision"]),
    title=_text,
    content=_text,
    scope=st.sampled_from(["public", "private"]),
    status=st.sampled_from(["active", "active", "stale"]),
    tags=st.lists(st.sampled_from(["tenant/a", "user:u1", "user:u2", "shared"]), max_size=2),
    links=st.lists(
        st.builds(
            ThoughtLink, to_id=st.sampled_from(["note-1", "note-2"]), relation=st.just("supports")
        ),
        max_size=2,
    ),
    evidence_refs=st.lists(st.sampled_from(["note-3", "cell:note-4", "https://x"]), max_size=2),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_rich_item, max_size=8, unique_by=lambda it: it.id))
def test_bulk_fill_of_distinct_ids_equals_per_item_sets(items: list[Item]) -> None:
    """Distinct ids take the one-pass fill: every index (private, links, citations) agrees."""
    reference = _per_item(items)
    filled = Store()
    filled.upsert(Item(id="gone", kind="observation", title="replaced by the restore"))
    filled.restore(items)
    _assert_same(reference, filled)
    assert filled._private == reference._private
    assert filled._backlinks == reference._backlinks
    assert filled._citations == reference._citations


def test_large_journal_restore_freezes_until_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore past ``COLLECT_AFTER`` freezes the heap instead of collecting; close thaws."""
    db = tmp_path / "j.db"
    with SqliteJournal(db, durability="off") as journal:
        live = Store()
        journal.attach(live)
        live.upsert(Item(id="note-1", kind="observation", title="deploy api"))
    monkeypatch.setattr(_gc, "COLLECT_AFTER", 0)
    assert gc.get_freeze_count() == 0
    again = SqliteJournal(db)
    restored = Store()
    again.attach(restored)
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    again.close()
    assert gc.get_freeze_count() == 0
    assert len(restored) == 1


def test_bulk_load_collects_unless_asked_to_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_gc, "COLLECT_AFTER", 0)
    with _gc.bulk_load() as load:
        kept = [[] for _ in range(10)]
    assert not load.frozen and gc.get_freeze_count() == 0
    with _gc.bulk_load(freeze=True) as load:
        kept.append([])
    assert load.frozen and gc.get_freeze_count() > 0
    _gc.thaw()
    assert gc.get_freeze_count() == 0
    _gc.thaw()  # one thaw too many changes nothing
    assert gc.isenabled()


class _Cycle:
    """Garbage only the cyclic collector frees: it refers to itself."""

    def __init__(self, freed: list[bool]) -> None:
        self.me = self
        self.freed = freed

    def __del__(self) -> None:
        self.freed.append(True)


def test_a_frozen_heap_settles_garbage_first_and_gives_the_heap_back() -> None:
    """What a server loaded is out of the collector's walks while it serves, never garbage."""
    freed: list[bool] = []
    gc.collect()  # the young generation empty: no collection before frozen_heap's own
    _Cycle(freed)  # unreachable at once, but a cycle: refcounting alone never frees it
    assert freed == []
    assert gc.get_freeze_count() == 0
    with _gc.frozen_heap():
        assert freed == [True]  # collected before the freeze, not frozen for the server's life
        assert gc.get_freeze_count() > 0
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_frozen_heap_raises_the_young_threshold_while_serving_and_gives_it_back() -> None:
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        with _gc.frozen_heap():
            assert gc.get_threshold() == (_gc.SERVING_YOUNG_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(50_000, 10, 10)  # the host's own, higher: kept
        with _gc.frozen_heap():
            assert gc.get_threshold() == (50_000, 10, 10)
        with _gc.frozen_heap():
            gc.set_threshold(1_000, 5, 5)  # the host's choice while serving: not undone
        assert gc.get_threshold() == (1_000, 5, 5)
    finally:
        gc.set_threshold(*before)


def test_overlapping_frozen_heaps_give_the_threshold_back_when_the_last_one_leaves() -> None:
    """Before: the first to leave put the interpreter's 700 back under the other, still serving.

    Each read the threshold on entry and set it back on exit, so of two servers
    in one process the one entered second saw the raised threshold as the
    host's, and the first to leave restored 700 while the other served.
    """
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        serving = (_gc.SERVING_YOUNG_THRESHOLD, 10, 10)
        for last in ("a", "b"):  # either may leave first
            heaps = {"a": _gc.frozen_heap(), "b": _gc.frozen_heap()}
            heaps["a"].__enter__()
            heaps["b"].__enter__()
            first = "a" if last == "b" else "b"
            heaps[first].__exit__(None, None, None)
            assert gc.get_threshold() == serving, f"{last} still serves"
            assert gc.get_freeze_count() > 0
            heaps[last].__exit__(None, None, None)
            assert gc.get_threshold() == (700, 10, 10)
            assert gc.get_freeze_count() == 0
    finally:
        gc.set_threshold(*before)


def test_a_frozen_heap_keeps_a_restores_freeze_until_its_journal_lets_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_gc, "COLLECT_AFTER", 0)
    with _gc.bulk_load(freeze=True) as load:
        kept = [[] for _ in range(10)]
    assert load.frozen
    with _gc.frozen_heap():
        kept.append([])
    assert gc.get_freeze_count() > 0  # the restore's holder still holds
    _gc.thaw()
    assert gc.get_freeze_count() == 0


def test_a_frozen_heap_with_the_collector_off_changes_nothing() -> None:
    gc.disable()
    try:
        with _gc.frozen_heap():
            assert gc.get_freeze_count() == 0
            assert not gc.isenabled()
    finally:
        gc.enable()
