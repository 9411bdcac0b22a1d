"""A writer process for the PostgreSQL crash test: batch after batch, each acknowledged.

``python -m tests.pg_batch_writer DSN SCHEMA`` opens a :class:`~memstore.Memory`
on the journal and writes batch ``k = 0, 1, ...``: one ``store.batch()`` that
adds :data:`BATCH` items ``b<k>-<i>``, deletes batch ``k - 1``'s first item
and sets the shared item ``counter`` to ``k``. It prints ``ack k`` once batch
``k`` is acknowledged. The parent kills it with SIGKILL at a moment of its
choosing and checks that every other process saw each batch whole or not at all.
"""

from __future__ import annotations

import sys

BATCH = 60
"""Items one batch adds."""


def write_batch(mem: object, k: int) -> None:
    """Batch ``k``: its items, the previous batch's first item gone, the counter at ``k``."""
    from memstore import Item, Memory

    assert isinstance(mem, Memory)
    with mem.store.batch():
        for i in range(BATCH):
            mem.store.upsert(Item(id=f"b{k}-{i}", kind="note", title=f"batch {k} item {i}"))
        if k:
            mem.store.delete(f"b{k - 1}-0")
        mem.store.upsert(Item(id="counter", kind="note", title=str(k)))


def main(dsn: str, schema: str) -> None:
    from memstore import Memory
    from memstore.journal import PostgresJournal

    mem = Memory(journal=PostgresJournal(dsn, schema=schema), embedder=None)
    counter = mem.get("counter")
    k = int(counter.title) + 1 if counter is not None else 0  # a killed writer's successor
    while True:
        write_batch(mem, k)
        sys.stdout.write(f"ack {k}\n")
        sys.stdout.flush()
        k += 1


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
