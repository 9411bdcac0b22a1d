"""Listeners of changes a journal makes itself run as those of ordinary writes do.

An import, a purge and a PostgreSQL follower's apply change the store inside
the journal's own hold of the store's lock. Their change listeners and hooks
must still run after that lock is released (a listener that reads the store
from another thread, or is slow, must not stall or deadlock the writers), in
commit order. Each listener here asks, from a second thread, whether the
store's lock is free at the moment it is called: it is, for every change.
"""

from __future__ import annotations

import io
import threading
from pathlib import Path

from memstore import Item, Store
from memstore.config import Change
from memstore.journal import SqliteJournal
from memstore.journal.postgres import PostgresJournal
from tests.journals import Place, attached
from tests.pgtest import PgPlace

WAIT_S = 30


def lock_is_free(store: Store) -> bool:
    """Whether another thread could take ``store``'s lock right now (no waiting)."""
    got: list[bool] = []

    def probe() -> None:
        taken = store.lock.acquire(blocking=False)
        if taken:
            store.lock.release()
        got.append(taken)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return got[0]


class Watcher:
    """Every way to follow a store's changes, each noting the order and the lock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[tuple[str, str, str, bool]] = []  # (channel, op, id, lock free)
        store.add_change_listener(self._listener)
        store.set_change_hook(self._hook)
        store.set_change_record_hook(self._record)

    def _note(self, channel: str, op: str, id: str) -> None:
        self.seen.append((channel, op, id, lock_is_free(self.store)))

    def _listener(self, op: str, item: Item | None, id: str, kind: str) -> None:
        self._note("listener", op, id)

    def _hook(self, op: str, item: Item | None, id: str, kind: str) -> None:
        self._note("hook", op, id)

    def _record(self, change: Change) -> None:
        self._note("record", change.op, change.id)

    def ops(self, channel: str) -> list[tuple[str, str]]:
        return [(op, id) for ch, op, id, _ in self.seen if ch == channel]

    def clear(self) -> None:
        self.seen.clear()

    def all_unlocked(self) -> bool:
        return bool(self.seen) and all(free for *_, free in self.seen)


def test_an_import_tells_its_listeners_after_the_lock_is_released(
    place: Place, tmp_path: Path
) -> None:
    source_store = Store()
    with SqliteJournal(tmp_path / "source.db") as source:
        source.attach(source_store)
        for i in range(3):
            source_store.upsert(Item(id=f"n{i}", kind="note", title=f"note {i}"))
        source_store.delete("n1")
        buf = io.StringIO()
        source.export(None, buf)
    store, journal = attached(place)
    try:
        watcher = Watcher(store)
        store.upsert(Item(id="before", kind="note", title="written before"))
        assert journal.import_(io.StringIO(buf.getvalue())) == 3
        store.upsert(Item(id="after", kind="note", title="written after"))
        expected = [("upsert", "before"), ("upsert", "n0"), ("upsert", "n2"), ("upsert", "after")]
        for channel in ("listener", "hook", "record"):
            assert watcher.ops(channel) == expected, channel
        assert watcher.all_unlocked(), [s for s in watcher.seen if not s[3]]
    finally:
        journal.close()


def test_a_purge_tells_its_listeners_after_the_lock_is_released(place: Place) -> None:
    store, journal = attached(place)
    try:
        for i in range(3):
            store.upsert(Item(id=f"n{i}", kind="note", title=f"note {i}"))
        watcher = Watcher(store)
        erased = journal.purge(
            lambda it: it.id != "n1",
            record=lambda ids: Item(id="audit", kind="note", title=f"erased {len(ids)}"),
        )
        assert erased == ["n0", "n2"]
        store.upsert(Item(id="after", kind="note", title="written after"))
        expected = [("delete", "n0"), ("delete", "n2"), ("upsert", "audit"), ("upsert", "after")]
        for channel in ("listener", "hook", "record"):
            assert watcher.ops(channel) == expected, channel
        assert watcher.all_unlocked(), [s for s in watcher.seen if not s[3]]
    finally:
        journal.close()


def test_a_follower_tells_its_listeners_after_the_lock_is_released(pg_place: PgPlace) -> None:
    writer_store, writer = (
        Store(),
        PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off", replicate=False),
    )
    follower_store, follower = (
        Store(),
        PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off", poll_interval=0.5),
    )
    try:
        writer.attach(writer_store)
        follower.attach(follower_store)
        watcher = Watcher(follower_store)

        def followed() -> None:
            assert follower.wait_for(writer.head(), WAIT_S), follower.feed_status()

        writer_store.upsert(Item(id="a", kind="note", title="first"))
        followed()
        with writer_store.batch():
            writer_store.upsert(Item(id="b", kind="note", title="second"))
            writer_store.upsert(Item(id="c", kind="note", title="third"))
        followed()
        writer_store.delete("a")
        followed()
        expected = [("upsert", "a"), ("upsert", "b"), ("upsert", "c"), ("delete", "a")]
        for channel in ("listener", "hook", "record"):
            assert watcher.ops(channel) == expected, channel
        assert watcher.all_unlocked(), [s for s in watcher.seen if not s[3]]
    finally:
        follower.close()
        writer.close()
