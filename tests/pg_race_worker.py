"""A process for the race tests: a Memory on a shared PostgreSQL journal, in lockstep.

:func:`race` runs in a process of its own (``multiprocessing``, spawn): it
opens a :class:`~memstore.Memory` on the journal, then for each round waits
at the shared barrier with the other processes and runs its operation on
that round's id at the same moment as they run theirs. Once every round is
done it waits until everything on record is in its store and reports what
each operation answered, the items it holds and the ids its vector index holds.
"""

from __future__ import annotations

import multiprocessing.queues
import multiprocessing.synchronize
from typing import Any


def _run(mem: Any, op: str, id: str) -> object:
    """One operation on ``id``: what it answered, or the name of the error it raised."""
    from memstore.errors import MemstoreError

    try:
        if op == "delete":
            return mem.delete(id)
        if op == "purge":
            return mem.purge([id]) == [id]
        if op == "set_title":
            return mem.update(id, title=f"title of {id}").title
        if op == "set_confidence":
            return mem.update(id, confidence="low").confidence
        if op == "set_tags":
            return mem.update(id, tags=["reviewed"]).tags
        if op.startswith("claim"):  # compare-and-set: take the item if nobody holds it
            me = op

            def claim() -> bool:
                if mem.get(id).data.get("owner"):
                    return False
                mem.update(id, data={"owner": me})
                return True

            return mem.atomically(claim)
        if op == "rename":
            return mem.update(id, title=f"renamed {id}").title
        raise AssertionError(op)
    except MemstoreError as e:
        return type(e).__name__


def race(
    dsn: str,
    schema: str,
    op: str,
    ids: list[str],
    barrier: multiprocessing.synchronize.Barrier,
    out: multiprocessing.queues.Queue[Any],
) -> None:
    """Run ``op`` on each of ``ids`` in step with the other processes; report to ``out``."""
    from memstore import Memory
    from memstore.journal import PostgresJournal

    journal = PostgresJournal(dsn, schema=schema, durability="off")
    with Memory(journal=journal, embedder="hash") as mem:
        answers = []
        for id in ids:
            barrier.wait(30)
            answers.append(_run(mem, op, id))
        barrier.wait(30)  # every process has written: catch up with all of it
        assert journal.wait_for(journal.head(), 30), journal.feed_status()
        mem.cells._check(mem.store, vectors=True)  # exactly the live items, each its own vector
        with mem.store.lock:
            items = sorted(
                (it.model_dump(mode="json") for it in mem.store.items_locked()),
                key=lambda d: d["id"],
            )
        out.put((op, answers, items, sorted(mem.cells.ids())))


def increment(dsn: str, schema: str, n: int, out: multiprocessing.queues.Queue[Any]) -> None:
    """Add one to the item ``counter``'s title ``n`` times; report how many were refused."""
    from memstore import Memory, WriteConflictError
    from memstore.journal import PostgresJournal

    with Memory(journal=PostgresJournal(dsn, schema=schema), embedder=None) as mem:

        def add_one() -> None:
            current = mem.get("counter")
            assert current is not None
            mem.update("counter", title=str(int(current.title) + 1))

        refused = 0
        for _ in range(n):
            try:
                mem.atomically(add_one)
            except WriteConflictError:
                refused += 1
        out.put(refused)
