"""Read your writes: a write returns once every after-commit listener heard it.

Listeners are told in commit order by one thread at a time, outside the
store's lock. When another thread holds that turn (another writer, a
PostgreSQL journal's follower), it tells them of this write's changes too:
the write waits for it (``memstore/_publisher.py``), except where waiting
could deadlock (a listener's own write, a write under the store's lock) or
would never end (a listener that blocks: the wait is bounded).

Each race is forced: a listener blocks on an event while another thread
publishes, so the writer's change is certainly that thread's to deliver.
What is asserted is what the writer saw when it returned, never how long
anything took.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from memstore import AsyncMemory, Item, Memory, Store
from memstore.config import Change
from memstore.journal import Journal
from memstore_index import HashEmbedder, embed_text
from tests.journals import open_journal
from tests.pgtest import PgPlace

if TYPE_CHECKING:
    from memstore.journal import PostgresJournal

WAIT_S = 30.0
"""Long enough for anything that is going to happen (never a measure of speed)."""
STILL_S = 0.5
"""How long a writer that must not return yet is watched for (more only makes it surer)."""
LATE = "returns before its after-commit listeners heard it"
"""The warning a writer logs when its bounded wait ran out."""


# ------------------------------------------------------------------ stores


@pytest.fixture(params=["plain", "sqlite", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Journal | None]:
    """The journal of each kind of store, durability off: none (a plain store), an
    SQLite file, a PostgreSQL schema of the test's own."""
    if request.param == "plain":
        yield None
        return
    place = (
        tmp_path / "journal.db"
        if request.param == "sqlite"
        else request.getfixturevalue("pg_place")
    )
    with open_journal(place, durability="off") as opened:
        yield opened


@pytest.fixture
def store(journal: Journal | None) -> Store:
    """A store restored from (and writing to) :func:`journal`."""
    store = Store()
    if journal is not None:
        journal.attach(store)
    return store


@pytest.fixture
def follower(
    pg_place: PgPlace,
) -> Iterator[tuple[Store, PostgresJournal, Store, PostgresJournal]]:
    """Two processes' stores on one PostgreSQL journal: ours, and the other one whose
    writes our journal's follower applies (and then tells our listeners of)."""
    from memstore.journal import PostgresJournal  # psycopg: only where PostgreSQL is

    opts: dict[str, Any] = {"durability": "off", "poll_interval": 0.05}
    ours = PostgresJournal(pg_place.dsn, schema=pg_place.schema, **opts)
    theirs = PostgresJournal(pg_place.dsn, schema=pg_place.schema, **opts)
    with ours, theirs:
        store, other = Store(), Store()
        ours.attach(store)
        theirs.attach(other)
        yield store, ours, other, theirs


def note(id: str, title: str = "") -> Item:
    return Item(id=id, kind="note", title=title or f"note {id}")


class Blocking:
    """An after-commit listener that records every id it hears and stops at one.

    Hearing ``stop_at`` it sets :attr:`entered` and waits for :attr:`release`:
    the thread publishing is held there, with every change committed meanwhile
    queued behind it.
    """

    def __init__(self, stop_at: str) -> None:
        self.stop_at = stop_at
        self.heard: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, op: str, item: Item | None, id: str, kind: str) -> None:
        if id == self.stop_at:
            self.entered.set()
            assert self.release.wait(WAIT_S)
        self.heard.append(id)


class Committed:
    """A before-commit listener: :attr:`seen` is set as the group holding ``id`` commits.

    It runs under the store's lock, just before the group becomes visible: a
    reader that takes the lock after it fired finds the group committed.
    """

    def __init__(self, id: str) -> None:
        self.id = id
        self.seen = threading.Event()

    def __call__(self, changes: Any) -> None:
        if any(c.id == self.id for c in changes):
            self.seen.set()


class Writer(threading.Thread):
    """Runs ``write`` and keeps what ``listener`` had heard the moment it returned."""

    def __init__(self, write: Callable[[], object], listener: Blocking) -> None:
        super().__init__(daemon=True)
        self._write, self._listener = write, listener
        self.heard_on_return: list[str] | None = None
        self.returned = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._write()
            self.heard_on_return = list(self._listener.heard)
        except BaseException as e:  # reported by the test
            self.error = e
        finally:
            self.returned.set()


def hold_publication(store: Store, listener: Blocking) -> threading.Thread:
    """Another thread writes ``listener.stop_at`` and is held publishing it."""
    first = threading.Thread(target=store.upsert, args=(note(listener.stop_at),), daemon=True)
    first.start()
    assert listener.entered.wait(WAIT_S)
    return first


# ------------------------------------------------------------------- tests


def test_a_write_another_thread_publishes_returns_once_its_listener_heard_it(store: Store) -> None:
    listener = Blocking("slow")
    store.add_change_listener(listener)
    committed = Committed("mine")
    store.add_change_listener(committed, before_commit=True)
    first = hold_publication(store, listener)
    writer = Writer(lambda: store.upsert(note("mine")), listener)
    writer.start()
    assert committed.seen.wait(WAIT_S)
    assert store.get("mine") is not None  # committed, and readable at once
    assert not writer.returned.wait(STILL_S), "returned before its listener heard it"
    listener.release.set()
    assert writer.returned.wait(WAIT_S) and writer.error is None
    assert writer.heard_on_return == ["slow", "mine"]
    first.join(WAIT_S)


def test_a_write_the_postgres_follower_publishes_returns_once_its_listener_heard_it(
    follower: tuple[Store, PostgresJournal, Store, PostgresJournal],
) -> None:
    """The thread holding the turn is the follower, telling of another process's write."""
    store, _, other, _ = follower
    listener = Blocking("theirs")
    store.add_change_listener(listener)
    other.upsert(note("theirs"))  # our follower applies it, and is held telling of it
    assert listener.entered.wait(WAIT_S)
    writer = Writer(lambda: store.upsert(note("mine")), listener)
    writer.start()
    assert not writer.returned.wait(STILL_S), "returned before its listener heard it"
    listener.release.set()
    assert writer.returned.wait(WAIT_S) and writer.error is None
    assert writer.heard_on_return == ["theirs", "mine"]


def test_wait_for_returns_once_the_listeners_heard_the_other_processs_write(
    follower: tuple[Store, PostgresJournal, Store, PostgresJournal],
) -> None:
    """``wait_for`` another process's write: the listeners (vector index, hub) have it too.

    A local writer is held publishing, so the follower's apply is that
    writer's thread to deliver: the store holds the write at once, but
    ``wait_for`` answers only once the listener heard it (the follower
    itself does not wait: it applies on).
    """
    store, ours, other, theirs = follower
    store._publish_wait = 2 * WAIT_S  # no bound runs out while this test looks
    listener = Blocking("slow")
    store.add_change_listener(listener)
    applied = Committed("later")
    store.add_change_listener(applied, before_commit=True)
    first = hold_publication(store, listener)
    other.upsert(note("theirs"))
    lsn = theirs.last_lsn()
    assert lsn is not None
    assert not ours.wait_for(lsn, STILL_S), "answered before it was heard"
    other.upsert(note("later"))
    assert applied.seen.wait(WAIT_S), "the follower waited for the listener"
    assert store.get("theirs") is not None and store.get("later") is not None
    listener.release.set()
    lsn = theirs.last_lsn()
    assert lsn is not None and ours.wait_for(lsn, WAIT_S)
    assert listener.heard[:3] == ["slow", "theirs", "later"]
    first.join(WAIT_S)


def test_a_listener_that_writes_does_not_wait_for_itself(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Its write is told by its own thread, after it returns: it must not wait for that.

    The writer of ``a`` waits for the thread holding the turn, which then
    runs the listener that writes ``a-echo``: that write returns at once
    (waiting, it would hold up every writer for the bound, and log it).
    """
    store._publish_wait = WAIT_S
    listener = Blocking("slow")
    store.add_change_listener(listener)

    def echo(op: str, item: Item | None, id: str, kind: str) -> None:
        if id in {"a", "b"}:
            store.upsert(note(f"{id}-echo"))

    store.add_change_listener(echo)
    first = hold_publication(store, listener)
    writer = Writer(lambda: store.upsert(note("a")), listener)
    writer.start()
    assert not writer.returned.wait(STILL_S)
    with caplog.at_level(logging.WARNING, logger="memstore"):
        listener.release.set()
        assert writer.returned.wait(WAIT_S) and writer.error is None
        assert writer.heard_on_return is not None and "a" in writer.heard_on_return
        first.join(WAIT_S)
        assert not first.is_alive()
        store.upsert(note("b"))  # this thread publishes, and its listener writes
        assert listener.heard[-2:] == ["b", "b-echo"]
    assert LATE not in caplog.text
    assert set(listener.heard) == {"slow", "a", "a-echo", "b", "b-echo"}


def test_a_write_inside_a_batch_waits_when_the_batch_ends(store: Store) -> None:
    """Inside ``batch()`` the thread holds the store's lock: the outermost group waits, once.

    A write inside the batch cannot wait (its group commits at the end, and
    a listener reading the store would wait for the lock the batch holds):
    it returns while the other thread still publishes; the batch's end
    returns only once both of its writes were heard.
    """
    listener = Blocking("slow")
    store.add_change_listener(listener)

    def reader(op: str, item: Item | None, id: str, kind: str) -> None:
        store.get(id)  # a listener that reads the store (takes its lock)

    store.add_change_listener(reader)
    first = hold_publication(store, listener)
    inside = threading.Event()

    def batch() -> None:
        with store.batch():
            store.upsert(note("x"))
            store.upsert(note("y"))
            inside.set()

    writer = Writer(batch, listener)
    writer.start()
    assert inside.wait(WAIT_S), "a write inside the batch waited under the store's lock"
    assert not writer.returned.wait(STILL_S), "the batch returned before it was heard"
    listener.release.set()
    assert writer.returned.wait(WAIT_S) and writer.error is None
    assert writer.heard_on_return == ["slow", "x", "y"]
    first.join(WAIT_S)


def test_a_listener_that_blocks_holds_a_write_up_to_the_bound_then_it_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A listener that never returns cannot hold writers for ever: they return, and log it."""
    store = Store()
    store._publish_wait = 0.2
    listener = Blocking("slow")
    store.add_change_listener(listener)
    first = hold_publication(store, listener)
    with caplog.at_level(logging.WARNING, logger="memstore"):
        store.upsert(note("mine"))  # returns, committed, not yet heard
    assert LATE in caplog.text
    assert store.get("mine") is not None and listener.heard == []
    listener.release.set()
    assert store._settled(timeout=WAIT_S)
    assert listener.heard == ["slow", "mine"]
    first.join(WAIT_S)


def test_a_listener_that_raises_does_not_keep_a_writer_waiting() -> None:
    """The change is delivered to the others: the writer returns once they heard it."""
    store = Store()
    listener = Blocking("slow")

    def raising(op: str, item: Item | None, id: str, kind: str) -> None:
        raise RuntimeError(f"listener failed on {id}")

    store.add_change_listener(raising)
    store.add_change_listener(listener)
    first = hold_publication(store, listener)
    writer = Writer(lambda: store.upsert(note("mine")), listener)
    writer.start()
    assert not writer.returned.wait(STILL_S)
    listener.release.set()
    assert writer.returned.wait(WAIT_S) and writer.error is None
    assert writer.heard_on_return == ["slow", "mine"]
    first.join(WAIT_S)


def test_a_grouped_listener_hears_the_write_before_it_returns() -> None:
    """Grouped listeners (the vector index) count as listeners: the run reached them."""
    store = Store()
    listener = Blocking("slow")
    store.add_change_listener(listener)
    runs: list[list[str]] = []

    def grouped(changes: list[Change]) -> None:
        runs.append([c.id for c in changes])

    store.add_change_listener(grouped, grouped=True)
    first = hold_publication(store, listener)
    runs_on_return: list[list[str]] = []

    def write() -> None:
        store.upsert(note("mine"))
        runs_on_return.extend(runs)

    writer = Writer(write, listener)
    writer.start()
    assert not writer.returned.wait(STILL_S)
    listener.release.set()
    assert writer.returned.wait(WAIT_S) and writer.error is None
    assert ["mine"] in runs_on_return
    first.join(WAIT_S)


# ------------------------------------------------- Memory, with its vectors


def test_memory_add_then_a_semantic_search_finds_it_while_another_thread_writes(
    journal: Journal | None,
) -> None:
    """Every round: add, then at once look the item up by its vector.

    Another thread adds notes without pause, so the publishing turn is often
    its own when this thread's add commits: its thread then indexes this
    add's vector. The add must not return before that.
    """
    with Memory(journal=journal, embedder=HashEmbedder(dim=32)) as mem:
        cells = mem.cells
        assert cells is not None
        stop = threading.Event()
        errors: list[BaseException] = []

        def churn() -> None:
            try:
                for n in itertools.count():
                    if stop.is_set():
                        return
                    mem.add(f"background chatter number {n} about the weather", dedup=False)
            except BaseException as e:  # reported below
                errors.append(e)

        other = threading.Thread(target=churn, daemon=True)
        other.start()
        missed: list[int] = []
        try:
            for r in range(ROUNDS):
                it = mem.add(f"round {r}: the ledger pool ran dry at {r} o'clock", dedup=False)
                if it.id not in cells:  # not indexed yet: a search by vector misses it
                    missed.append(r)
                    continue
                vector = cells.embed_query(embed_text(it))
                top = cells.search_vector(vector, 1, exact=True)
                assert [e.id for e, _ in top] == [it.id]
        finally:
            stop.set()
            other.join(WAIT_S)
        assert errors == []
        assert missed == [], f"{len(missed)} of {ROUNDS} adds returned before their vector"


ROUNDS = 300


def test_an_async_add_returns_once_the_vector_index_has_it() -> None:
    """``await amem.add(...)``: the worker thread waits, so the coroutine resumes after it.

    Another thread holds the publishing turn (a listener blocks), so the
    add's vector is that thread's to index: the add is not done before the
    listener is released, and once done its vector is in the index.
    """

    async def run() -> None:
        async with AsyncMemory(embedder=HashEmbedder(dim=32)) as amem:
            store, cells = amem.memory.store, amem.memory.cells
            assert cells is not None
            listener = Blocking("slow")
            store.add_change_listener(listener)
            first = await asyncio.to_thread(hold_publication, store, listener)
            add = asyncio.ensure_future(amem.add("the ledger pool ran dry", id="mine"))
            done, _ = await asyncio.wait([add], timeout=STILL_S)
            assert not done, "the add returned before its vector was indexed"
            listener.release.set()
            item = await asyncio.wait_for(add, WAIT_S)
            assert item.id in cells and "mine" in listener.heard
            await asyncio.to_thread(first.join, WAIT_S)

    asyncio.run(run())
