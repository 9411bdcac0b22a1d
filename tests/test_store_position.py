"""``store_position``: the journal position whose record a store holds, exactly.

What the inspector's listings are read at (``memstore.ui.positions.read_at``):
every change at or before it is in the store, none after it. A shared
PostgreSQL journal's follower applies another process's commits and moves its
position in one hold of the store's lock; an own commit ahead of the follower
leaves no one position naming the store's state (``None``), never one before
that commit.
"""

from __future__ import annotations

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


def test_a_followers_store_is_at_the_commits_it_applied(pg_place: PgPlace) -> None:
    options = {"durability": "off", "poll_interval": 0.5}
    a = PostgresJournal(pg_place.dsn, schema=pg_place.schema, **options)
    b = PostgresJournal(pg_place.dsn, schema=pg_place.schema, **options)
    store_a, store_b = Store(), Store()
    a.attach(store_a)
    b.attach(store_b)
    try:
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
    finally:
        a.close()
        b.close()


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
