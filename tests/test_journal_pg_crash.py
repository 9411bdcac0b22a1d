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
from memstore.journal.hlc import Lsn
from tests.forker import Forker, kill_writer
from tests.pg_batch_writer import BATCH
from tests.pgtest import PgPlace

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


def _settled(journal: PostgresJournal) -> Lsn:
    """The journal's head once it has stopped moving.

    A writer killed after sending its COMMIT may have it committed by its
    server process a moment later, so the head read right after the kill
    may not be final: read it until two reads 0.2 s apart agree.
    """
    head = journal.head()
    while True:
        time.sleep(0.2)
        now = journal.head()
        if now == head:
            return head
        head = now


def test_a_batch_killed_midway_is_seen_whole_or_not_at_all(
    pg_place: PgPlace, forker: Forker
) -> None:
    rng = random.Random(20261203)
    args: list[object] = [pg_place.dsn, pg_place.schema]
    journal = PostgresJournal(pg_place.dsn, schema=pg_place.schema)
    with Memory(journal=journal, embedder=None) as follower:
        held = 0
        for _ in range(KILLS):
            target = held + rng.randrange(2, 12)
            acked = kill_writer(
                forker, "pg_batch_writer", args, lambda _, n, t=target: n >= t, 0.05, rng
            )
            assert journal.wait_for(_settled(journal), 30)
            held = _check(follower, acked)  # the follower, attached all along
            with Memory(
                journal=PostgresJournal(pg_place.dsn, schema=pg_place.schema), embedder=None
            ) as late:
                assert _check(late, acked) == held  # a process started afterwards
                assert _batches(late) == _batches(follower)
