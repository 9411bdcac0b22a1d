"""The vector index against racing writers: it equals the store after any interleaving.

The bad interleaving (found by an adversarial probe): thread A updates ``x``
and commits, but its change is not yet published to the index; thread B
reverts ``x`` to the text the index still holds. Deciding "text unchanged"
against the lagging index made B's row an empty "keep the stored vector",
which then met A's vector: ``no vector prepared for 'x'`` was logged and the
index kept A's text while the store held B's. These tests force that window
with an after-commit listener that waits on an event (deterministic), then
widen it at random in a bounded, seeded stress run (no wall-clock loop, no
timing assertion).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memstore import Change, Item, Memory, Store
from memstore.journal import SqliteJournal
from memstore_index import CellStore, HashEmbedder, embed_text, entry_for

DIM = 64
WAIT = 60.0
"""A safety net for a deadlock, never a measurement: every wait is released by the test."""


def note(id: str, content: str) -> Item:
    return Item(id=id, kind="note", title=id, content=content)


def unit(cells: CellStore, text: str) -> np.ndarray:
    return cells.embed_query(text)


class Gate:
    """An after-commit listener that holds the publisher on the first change matching ``word``.

    Registered before the CellStore's own listener, it keeps a committed
    change from reaching the index until the test releases it.
    """

    def __init__(self, word: str) -> None:
        self.word = word
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, op: str, item: Item | None, id: str, kind: str) -> None:
        if item is not None and self.word in item.content and not self.entered.is_set():
            self.entered.set()
            assert self.release.wait(WAIT), "the test never released the gate"


def run_race(store: Store, cells: CellStore, gate: Gate) -> None:
    """A: x -> "T1 bananas" (held before the index); B: x -> "T0 apples" meanwhile."""
    store.upsert(note("x", "T0 apples"))
    reverted = threading.Event()

    def watch(changes: Sequence[Change]) -> None:  # before commit, the lock held
        if gate.entered.is_set() and any(c.item and "apples" in c.item.content for c in changes):
            reverted.set()

    store.add_change_listener(watch, before_commit=True)
    a = threading.Thread(target=lambda: store.upsert(note("x", "T1 bananas")))
    b = threading.Thread(target=lambda: store.upsert(note("x", "T0 apples")))
    a.start()
    try:
        assert gate.entered.wait(WAIT), "A never committed"
        # B commits while A's change is committed but unpublished: B's own
        # publication queues behind A's (commit order), and B returns once
        # A's thread has told the index of both (read your writes).
        b.start()
        assert reverted.wait(WAIT), "B never committed"
    finally:
        gate.release.set()
        a.join()
        if b.ident is not None:  # started
            b.join()
    store.remove_change_listener(watch)


def test_a_revert_racing_an_unpublished_update_leaves_the_reverted_vector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Store()
    gate = Gate("bananas")
    store.add_change_listener(gate)
    cells = CellStore(HashEmbedder(dim=DIM))
    cells.attach(store)
    with caplog.at_level(logging.WARNING, logger="memstore"):
        run_race(store, cells, gate)
    item = store.get("x")
    assert item is not None and item.content == "T0 apples"
    got = cells.vector("x")
    assert got is not None
    # The vector is the reverted text's, not the update's.
    assert np.allclose(got, unit(cells, embed_text(item)), atol=1e-5)
    assert not np.allclose(got, unit(cells, "x\nT1 bananas"), atol=1e-3)
    assert cells.search("apples", 1)[0][0].id == "x"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    cells._check(store, vectors=True)


def test_the_race_through_a_journal_and_a_vector_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same window with the commit hook (a journal) and durable vectors."""
    store = Store()
    gate = Gate("bananas")
    store.add_change_listener(gate)
    journal = SqliteJournal(tmp_path / "journal.db")
    journal.attach(store)
    cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    cells.attach(store)
    with caplog.at_level(logging.WARNING, logger="memstore"):
        run_race(store, cells, gate)
    cells._check(store, vectors=True)  # the file's rows included
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    cells.close()
    journal.close()
    reopened = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    assert reopened.entry("x") == entry_for(note("x", "T0 apples"))
    got = reopened.vector("x")
    assert got is not None and np.allclose(got, unit(reopened, "x\nT0 apples"), atol=1e-5)
    reopened.close()


def test_two_writes_of_one_id_in_one_group_apply_in_order() -> None:
    """x: T0 -> T1 -> T0 inside one batch: the second change is "unchanged" only vs T1."""
    store = Store()
    cells = CellStore(HashEmbedder(dim=DIM))
    cells.attach(store)
    store.upsert(note("x", "T0 apples"))
    with store.batch():
        store.upsert(note("x", "T1 bananas"))
        store.upsert(note("x", "T0 apples"))
    cells._check(store, vectors=True)


class JitteryEmbedder(HashEmbedder):
    """A hash embedder that yields the CPU at random, so threads interleave more."""

    def __init__(self, seed: int) -> None:
        super().__init__(dim=DIM)
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._rng_lock:
            pause = self._rng.random() < 0.3
        if pause:
            time.sleep(0)  # a thread switch, not a duration
        return super().embed(texts)


TEXTS = ("T0 apples", "T1 bananas", "T2 cherries", "T3 dates")


def test_eight_threads_mixed_writes_leave_index_equal_to_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Bounded, seeded: 8 threads x 120 operations on 6 ids (updates, reverts, deletes, batches).

    A listener that yields while publishing widens the window between a
    commit and its arrival at the index, where the race lived.
    """
    mem = Memory(tmp_path, embedder=JitteryEmbedder(7))
    publish_rng = random.Random(11)
    rng_lock = threading.Lock()

    def slow_publisher(op: str, item: Item | None, id: str, kind: str) -> None:
        with rng_lock:
            pause = publish_rng.random() < 0.5
        if pause:
            time.sleep(0)

    mem.store.add_change_listener(slow_publisher)
    ids = [f"x{i}" for i in range(6)]
    for id in ids:
        mem.store.upsert(note(id, TEXTS[0]))
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(120):
                id, text = rng.choice(ids), rng.choice(TEXTS)
                roll = rng.random()
                if roll < 0.6:
                    mem.store.upsert(note(id, text))
                elif roll < 0.7:
                    mem.delete(id)
                else:
                    with mem.store.batch():
                        for other in rng.sample(ids, 3):
                            mem.store.upsert(note(other, rng.choice(TEXTS)))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    with caplog.at_level(logging.WARNING, logger="memstore"):
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert mem.cells is not None
    mem.cells._check(mem.store, vectors=True)
    mem.store._check()
    mem.close()
