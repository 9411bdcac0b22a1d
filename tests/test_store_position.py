"""``store_position``: the journal position whose record a store holds, exactly.

What the inspector's listings are read at (``memstore.ui.positions.read_at``):
every change at or before it is in the store, none after it. A shared
PostgreSQL journal's follower applies another process's commits and moves its
position in one hold of the store's lock; an own commit ahead of the follower
leaves no one position naming the store's state (``None``), never one before
that commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from memstore import Item, Memory, Store
from memstore.journal import Lsn
from tests.pgtest import PgPlace, postgres_module
from tests.test_journal_postgres import WAIT_S

PostgresJournal = postgres_module().PostgresJournal


def position_of(store: Store, journal: object) -> Lsn | None:
    with store.lock:  # type: ignore[attr-defined]
        got: Lsn | None = journal.store_position()  # type: ignore[attr-defined]
        return got


def test_a_single_writers_store_is_at_its_head(tmp_path: object) -> None:
    with Memory(str(tmp_path), embedder=None) as mem:
        assert mem.journal is not None
        mem.add(Item(kind="note", content="one"))
        assert position_of(mem.store, mem.journal) == mem.journal.head()


@contextlib.contextmanager
def two_processes(place: PgPlace) -> Iterator[tuple[Any, Store, Any, Store]]:
    """Two journals on one PostgreSQL schema, as two processes have them, each attached
    to a store of its own: ``(a, store_a, b, store_b)``; both closed at the end."""
    options = {"durability": "off", "poll_interval": 0.5}
    a = PostgresJournal(place.dsn, schema=place.schema, **options)
    b = PostgresJournal(place.dsn, schema=place.schema, **options)
    store_a, store_b = Store(), Store()
    a.attach(store_a)
    b.attach(store_b)
    try:
        yield a, store_a, b, store_b
    finally:
        a.close()
        b.close()


def test_a_followers_store_is_at_the_commits_it_applied(pg_place: PgPlace) -> None:
    with two_processes(pg_place) as (a, store_a, b, store_b):
        x = store_a.upsert(Item(kind="note", title="written by a"))
        written = a.last_lsn()
        assert written is not None and b.wait_for(written, WAIT_S)
        assert position_of(store_b, b) == written and store_b.get(x.id) is not None
        store_b.upsert(Item(kind="note", title="written by b"))
        own = b.last_lsn()
        assert own is not None
        at = position_of(store_b, b)  # the follower may have passed it already, or not
        assert at is None or at >= own
        assert b.wait_for(b.head(), WAIT_S)
        assert position_of(store_b, b) == b.head()


def test_no_position_names_a_part_applied_batch_or_an_own_commit_ahead() -> None:
    from memstore.journal._pgposition import FeedPosition

    position = FeedPosition()
    position.track(True)
    position.start_at(3, 30)
    assert position.prefix() == 30
    position.partly_applied()  # a batch's first chunk is in the store, the rest to come
    assert position.prefix() is None
    position.advance(5, 50)
    assert position.prefix() == 50
    position.acknowledge(7, ["own"])  # in the store; commit 6 (another's) may not be
    assert position.prefix() is None
    position.advance(7, 70)
    assert position.prefix() == 70


def test_a_retracted_own_commit_frees_its_number_and_its_ids() -> None:
    """An own commit acknowledged before its COMMIT that then failed is forgotten: its
    number may be another process's next commit, and its ids are owned as before it."""
    from memstore.journal._pgposition import FeedPosition

    position = FeedPosition()
    position.track(True)
    position.start_at(1, 10)
    position.acknowledge(2, ["a", "b"])
    position.acknowledge(3, ["b", "c"])
    position.retract(3)
    assert position.is_acked(2) and not position.is_acked(3)
    assert position.not_overtaken(["a", "b", "c"], top=1) == ["c"]  # a and b: still commit 2's
    position.retract(2)
    position.retract(2)  # twice, or a number never acknowledged: nothing happens
    assert position.not_overtaken(["a", "b", "c"], top=1) == ["a", "b", "c"]
    assert position.prefix() == 10  # no own commit ahead of the follower any more
    assert position.unseen([(3, ["c"])], ["c"]) == {"c"}  # number 3 is another's now


def test_an_own_commit_is_own_before_the_follower_can_read_it(pg_place: PgPlace) -> None:
    """The follower reads a commit the moment it is on record. Were it not yet known as this
    process's own, the follower would wait for the store's lock to apply it, and a writer
    holding that lock while it waits for its own write would wait out its timeout."""
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off")
    store = Store()
    journal.attach(store)
    position = journal._position
    acknowledge = position.acknowledge
    on_record_at_ack: list[int] = []

    def spy(seq: int, ids: object) -> None:
        rows = pg_place.sql("SELECT count(*) FROM {s}.commits WHERE seq = %s", seq)
        on_record_at_ack.append(rows[0][0])
        acknowledge(seq, ids)  # type: ignore[arg-type]

    position.acknowledge = spy
    try:
        for n in range(5):
            store.upsert(Item(kind="note", title=f"mine {n}"))
        assert on_record_at_ack == [0] * 5
    finally:
        journal.close()


def test_an_own_write_is_waited_for_while_holding_the_stores_lock(pg_place: PgPlace) -> None:
    """The follower passes this process's own commits without the store's lock (they are in
    the store already): a writer that holds the lock and waits for its own write gets it."""
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema, durability="off")
    store = Store()
    journal.attach(store)
    try:
        store.upsert(Item(kind="note", title="mine"))
        own = journal.last_lsn()
        assert own is not None
        with store.lock:  # type: ignore[attr-defined]
            assert journal.wait_for(own, WAIT_S)
            assert journal.store_position() == own
    finally:
        journal.close()


def test_a_commit_that_fails_at_commit_time_leaves_its_number_to_another(
    pg_place: PgPlace,
) -> None:
    """A write refused at COMMIT (after it was acknowledged as own) is retracted: the next
    process to commit takes the same number, and this process follows that commit."""
    from memstore.errors import JournalError

    with two_processes(pg_place) as (a, store_a, b, store_b):
        refuse = "BEGIN RAISE EXCEPTION 'refused at commit'; END"
        with (
            pg_place.at_commit("refuse", "commits", refuse),
            pytest.raises(JournalError, match="refused at commit"),
        ):
            store_a.upsert(Item(kind="note", title="refused"))
        assert len(store_a) == 0
        x = store_b.upsert(Item(kind="note", title="written by b"))
        written = b.last_lsn()
        assert written is not None and a.wait_for(written, WAIT_S)
        assert store_a.get(x.id) is not None
