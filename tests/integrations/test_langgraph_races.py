"""Two LangGraph stores in separate processes on one PostgreSQL journal, racing.

Each process reads its own store, which follows the other's writes a few
milliseconds late. A ``put`` replaces a value whole, so the later put wins,
as in every ``BaseStore``; what must never happen is a process writing back
an older version it read (a ``get`` that refreshes a TTL) or deleting a value
it never saw (the TTL sweeper) over another process's newer put. Real
processes (``spawn``), in lockstep at a barrier, round after round.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
from collections.abc import Iterator
from typing import Any

import pytest

from tests.pgtest import PgPlace, run_together

pytest.importorskip("langgraph.store.base", reason='needs "memstore-engine[langgraph]"')

ROUNDS = 8
NS = ("users", "alice")


@contextlib.contextmanager
def _store(dsn: str, schema: str, behind: _dt.timedelta = _dt.timedelta(0)) -> Iterator[Any]:
    """A store on the shared journal whose clock runs ``behind`` the real one; its memory
    closed after.

    The store is given its memory, so it does not close it; before, nothing did, and the
    seeding store's journal follower ran on until the run dropped the schema under it
    (a teardown warning: ``journal follower lost its connection (relation ... does not
    exist)``).
    """
    from memstore import Config, Memory
    from memstore.integrations.langgraph import MemstoreStore
    from memstore.journal import PostgresJournal

    def clock() -> _dt.datetime:
        return _dt.datetime.now(_dt.UTC) - behind

    journal = PostgresJournal(dsn, schema=schema, durability="off")
    with (
        Memory(journal=journal, embedder=None, config=Config(clock=clock)) as memory,
        MemstoreStore(memory) as store,
    ):
        yield store


def _refresh_rounds(store: Any, me: str, wait: Any) -> None:
    """a: ``get`` with a TTL refresh; b, at the same moment: ``put`` a new value."""
    for n in range(ROUNDS):
        wait()
        if me == "a":
            store.get(NS, f"k{n}", refresh_ttl=True)
        else:
            store.put(NS, f"k{n}", {"v": "new"}, ttl=1)


def _sweep_rounds(store: Any, me: str, wait: Any) -> None:
    """b puts a value past its TTL (b's clock runs late); then a sweeps while b puts anew."""
    journal = store.memory.journal
    for n in range(ROUNDS):
        wait()
        if me == "b":
            store.put(NS, f"k{n}", {"v": "old"}, ttl=1)
        wait()
        assert journal.wait_for(journal.head(), 30)  # a holds the expired value
        wait()
        if me == "a":
            store.sweep_ttl()
        else:
            store.put(NS, f"k{n}", {"v": "new"})


_SCENARIOS = {"refresh": _refresh_rounds, "sweep": _sweep_rounds}


def _worker(
    dsn: str,
    schema: str,
    scenario: str,
    me: str,
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.queues.Queue[Any],
) -> None:
    """One process: its side of ``scenario``, then every value once caught up."""
    behind = _dt.timedelta(minutes=10 if (scenario, me) == ("sweep", "b") else 0)
    with _store(dsn, schema, behind) as store:
        journal = store.memory.journal
        _SCENARIOS[scenario](store, me, lambda: barrier.wait(30))
        barrier.wait(30)
        assert journal.wait_for(journal.head(), 30), journal.feed_status()
        values = [store.memory.store.get(f"k{n}") for n in range(ROUNDS)]
        got = [store.get(NS, f"k{n}") for n in range(ROUNDS)]
        out.put((me, [None if v is None else v.value for v in got], len(values)))


def _race(place: PgPlace, scenario: str) -> list[tuple[str, list[Any], int]]:
    where = (place.dsn, place.schema, scenario)
    got = run_together(_worker, [(*where, me) for me in ("a", "b")])
    return sorted(got)


def test_a_ttl_refresh_never_writes_back_a_value_another_process_replaced(
    pg_place: PgPlace,
) -> None:
    # Seeded half a minute late: a's get moves the deadline, b's fresh put does not need it.
    with _store(pg_place.dsn, pg_place.schema, _dt.timedelta(seconds=30)) as store:
        for n in range(ROUNDS):
            store.put(NS, f"k{n}", {"v": "old"}, ttl=1)
    (_, seen_a, _), (_, seen_b, _) = _race(pg_place, "refresh")
    assert seen_a == seen_b == [{"v": "new"}] * ROUNDS


def test_the_ttl_sweeper_never_deletes_a_value_it_did_not_see(pg_place: PgPlace) -> None:
    (_, seen_a, _), (_, seen_b, _) = _race(pg_place, "sweep")
    assert seen_a == seen_b == [{"v": "new"}] * ROUNDS
