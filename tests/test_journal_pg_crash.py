"""A writer killed with SIGKILL mid-batch, watched by another process on one PostgreSQL journal.

The writer (:mod:`tests.pg_batch_writer`) writes batch after batch; it is
killed at a random moment, often in the middle of one. A follower attached
the whole time, and a process that starts afterwards, must each hold every
acknowledged batch and, of the batch in flight, all of it or none of it:
never some of its items without the others, nor the counter without them.
"""

from __future__ import annotations

import random
import time

from memstore import Memory
from memstore.journal import PostgresJournal
from tests.pg_batch_writer import BATCH
from tests.pgtest import PgPlace
from tests.test_journal_crash import kill_writer

KILLS = 3


def _batches(mem: Memory) -> tuple[int, dict[int, int]]:
    """The counter and, per batch, how many of its items the store holds."""
    counts: dict[int, int] = {}
    counter = -1
    with mem.store.lock:
        for it in mem.store.items_locked():
            if it.id == "counter":
                counter = int(it.title)
            else:
                k = int(it.id[1:].split("-")[0])
                counts[k] = counts.get(k, 0) + 1
    return counter, counts


def _check(mem: Memory, acked: int) -> int:
    """Batches ``0..acked-1`` whole, the next one whole or absent; the batches held."""
    counter, counts = _batches(mem)
    held = counter + 1
    assert held in (acked, acked + 1), (counter, acked)  # the one in flight: in or out
    for k in range(held):
        # Each later batch deleted this batch's first item.
        assert counts.get(k) == (BATCH if k == held - 1 else BATCH - 1), (k, counts)
    assert not [k for k in counts if k >= held], counts  # nothing of a batch not on record
    return held


def _backends(place: PgPlace) -> set[int]:
    """The server processes of this schema's journal connections (every role, every process)."""
    query = "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s"
    return {pid for (pid,) in place.sql(query, f"memstore:{place.schema}:%")}


def _gone(place: PgPlace, kept: set[int]) -> None:
    """Wait until no server process but those of ``kept`` serves this schema's journal.

    A writer killed after sending its COMMIT may still have it committed by
    its server process a moment later: the journal's head is final only once
    the killed writer's server processes are gone.
    """
    deadline = time.monotonic() + 30
    while left := _backends(place) - kept:
        assert time.monotonic() < deadline, f"server processes {left} did not end"
        time.sleep(0.01)


def test_a_batch_killed_midway_is_seen_whole_or_not_at_all(pg_place: PgPlace) -> None:
    rng = random.Random(20261203)
    args = [pg_place.dsn, pg_place.schema]
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    with Memory(journal=journal, embedder=None) as follower:
        held = 0
        for _ in range(KILLS):
            target = held + rng.randrange(2, 12)
            ours = _backends(pg_place)  # the follower's (a closed late one's may linger)
            acked = kill_writer("pg_batch_writer", args, lambda _, n, t=target: n >= t, 0.05, rng)
            _gone(pg_place, ours)
            assert journal.wait_for(journal.head(), 30)
            held = _check(follower, acked)  # the follower, attached all along
            with Memory(
                journal=PostgresJournal(pg_place.dsn, schema=pg_place.schema), embedder=None
            ) as late:
                assert _check(late, acked) == held  # a process started afterwards
                assert _batches(late) == _batches(follower)
