"""The cyclic collector around ``Memory.add_many`` and ``Store.upsert_many``
(``memstore._gc.write_batch``).

A large batch is moved to the oldest generation unwalked; these tests hold
that nothing the caller or the batch drops is kept from collection by it, and
that the cases it must leave alone (a frozen load held, an exception, the
collector off) resume as before.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstore import Item, Memory, _gc

BATCH = 300  # items a call: well past the young threshold of 700 tracked objects


class Node:
    """One half of a reference cycle: freed only by the cyclic collector."""

    def __init__(self) -> None:
        self.other: Node | None = None


def dropped_cycle() -> weakref.ref[Node]:
    """A two-node cycle nobody holds, watched through a weak reference."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def notes(start: int) -> list[Item]:
    return [
        Item(kind="note", title=f"note {i}", content=f"body {i}")
        for i in range(start, start + BATCH)
    ]


@pytest.fixture
def collections() -> Iterator[list[int]]:
    """The generations of the collections that start while the test runs."""
    seen: list[int] = []

    def record(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(record)
    try:
        yield seen
    finally:
        gc.callbacks.remove(record)


@pytest.fixture(autouse=True)
def fresh_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test at the first batch of a ``WALK_EVERY`` round."""
    assert gc.isenabled()
    monkeypatch.setattr(_gc, "_batches", 0)


@pytest.mark.parametrize("write", ["add_many", "upsert_many"])
def test_a_cycle_dropped_between_batches_is_collected_by_the_next(
    tmp_path: Path, collections: list[int], write: str
) -> None:
    """``Memory.add_many`` and ``Store.upsert_many`` (which it shares its batch with)."""
    with Memory(tmp_path / "m", embedder=None) as mem:
        call = mem.add_many if write == "add_many" else mem.store.upsert_many
        watched = dropped_cycle()
        for n in range(1, 12):
            batch = notes(n * BATCH)
            collections.clear()
            call(batch)
            assert watched() is None, f"call {n} left the caller's dropped cycle alive"
            if n % _gc.WALK_EVERY:  # the batch itself was not walked: one collection, on entry
                assert collections == [1]
            watched = dropped_cycle()
        assert len(mem.store) == 11 * BATCH


def test_batches_do_not_accumulate_tracked_objects(tmp_path: Path) -> None:
    with Memory(tmp_path / "m", embedder=None) as mem:
        for n in range(3):
            mem.add_many(notes(n * BATCH))
            dropped_cycle()
        gc.collect()
        before = len(gc.get_objects())
        for n in range(3, 19):
            mem.add_many(notes(n * BATCH))
            dropped_cycle()
        grown = len(gc.get_objects()) - before
        assert gc.collect() == 2  # only the last call's cycle was waiting
        assert grown <= 16 * BATCH * 5  # a stored note keeps about four tracked objects


def batch_leaving_a_cycle() -> weakref.ref[Node]:
    """A write batch that builds 1,000 lasting objects and drops one cycle inside."""
    with _gc.write_batch():
        kept = [[] for _ in range(1000)]
        watched = dropped_cycle()
    del kept
    return watched


def test_garbage_made_inside_a_batch_is_reclaimed_by_collections_to_come() -> None:
    watched = [batch_leaving_a_cycle() for _ in range(_gc.WALK_EVERY)]
    [[] for _ in range(10)]  # an allocation: the young collection due after the last batch
    assert watched[-1]() is None  # the round's walked batch: collected on resuming
    assert all(w() is not None for w in watched[:-1])  # the others wait in the oldest generation
    gc.collect()  # where a full collection reclaims them
    assert all(w() is None for w in watched)


def _frozen(obj: object) -> bool:
    """Whether ``obj`` sits in the permanent generation: tracked, yet in none of the
    generations :func:`gc.get_objects` lists. (Not a count of the frozen objects:
    another test's leftovers freed by reference counting meanwhile change that.)"""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


def test_a_held_frozen_load_stays_frozen(collections: list[int]) -> None:
    with _gc.bulk_load(freeze=True):
        loaded = [[] for _ in range(_gc.COLLECT_AFTER)]
    assert _frozen(loaded)
    try:
        watched = batch_leaving_a_cycle()
        assert _frozen(loaded)  # not unfrozen under the load's holder
        gc.collect(0)
        assert watched() is None  # the batch resumed as a plain pause does
    finally:
        _gc.thaw()
    assert gc.get_freeze_count() == 0
    del loaded


def test_the_hosts_own_freeze_is_kept() -> None:
    host = [[] for _ in range(10)]
    gc.freeze()
    try:
        assert _frozen(host)
        watched = batch_leaving_a_cycle()
        assert _frozen(host)  # nothing the host froze let go
        gc.collect(0)
        assert watched() is None
    finally:
        gc.unfreeze()
    del host


def test_a_batch_that_raises_resumes_as_a_plain_pause() -> None:
    watched: list[weakref.ref[Node]] = []
    with pytest.raises(RuntimeError), _gc.write_batch():
        kept = [[] for _ in range(1000)]
        watched.append(dropped_cycle())
        raise RuntimeError("refused")
    del kept
    gc.collect(0)
    assert watched[0]() is None


def test_a_disabled_collector_stays_disabled(collections: list[int]) -> None:
    gc.disable()
    try:
        watched = batch_leaving_a_cycle()
        assert not gc.isenabled()
        assert collections == []
    finally:
        gc.enable()
    gc.collect()
    assert watched() is None


def test_a_young_threshold_of_zero_is_left_alone(collections: list[int]) -> None:
    threshold = gc.get_threshold()
    gc.set_threshold(0)
    try:
        watched = batch_leaving_a_cycle()
        assert collections == []  # no collection on entry either
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert watched() is None
