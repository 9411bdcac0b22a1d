"""A read of the store together with the journal position of the state it read.

The inspector shows a listing and keeps it up to date with the change stream,
whose every change carries the journal position it was recorded at. To tell,
change by change, whether a listing it was answered already holds a change
(or the change is to be applied on top of it), the page needs the position
the listing was read at, exactly: every change at or before it is in the
listing, none after it is. :func:`read_at` gives that.

The engine's seam is :meth:`JournalBase.store_position
<memstore.journal.base.JournalBase.store_position>`, read under the store's
lock: the position whose record the store holds (a single writer's head; a
shared PostgreSQL journal's follower position, which it advances in the same
hold of the lock as it applies a batch). The read itself does not hold the
lock (a search may embed its query, and writers would wait for it): the
position is read before it and after it, and the same position both times
means the store did not change meanwhile, since every change to it moves the
position (or makes it ``None``, for a moment no one position names).

>>> import tempfile
>>> from memstore import Memory
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
...     _ = mem.add("Alice moved to Lyon.", partition="acme")
...     n, at = read_at(mem, lambda: len(mem.store))
...     n, at == mem.journal.head()
(1, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from memstore.journal import Lsn
from memstore.memory import Memory

__all__ = ["READ_TRIES", "SETTLE_SECONDS", "read_at"]

READ_TRIES: Final = 3
"""How many times :func:`read_at` reads while the store keeps changing under it."""
SETTLE_SECONDS: Final = 1.0
"""How long :func:`read_at` waits, per try, for a shared journal's follower to pass the head."""

_T = TypeVar("_T")


def read_at(memory: Memory, read: Callable[[], _T]) -> tuple[_T, Lsn | None]:
    """``read()`` and the journal position of the store's state it read (``None``: unknown).

    Every change recorded at or before the position is in what ``read``
    saw, none after it is. Read again (up to :data:`READ_TRIES` times) when
    the store changed while it read; a store that no one position names
    (an own write of a shared journal's process ahead of its follower) is
    first given :data:`SETTLE_SECONDS` for the follower to catch up. A memory
    that never stops changing, or has no journal, gets its last read with
    ``None``: the caller cannot place it among the changes.
    """
    journal = memory.journal
    if journal is None:
        return read(), None
    position: Callable[[], Lsn | None] = getattr(journal, "store_position", journal.head)
    lock = memory.store.lock

    def now() -> Lsn | None:
        lock.acquire()
        try:
            return position()
        finally:
            lock.release()

    for _ in range(READ_TRIES - 1):
        before = now()
        if before is None:
            _settle(journal)
            before = now()
        found = read()
        if before is not None and now() == before:
            return found, before
    before = now()
    found = read()
    return found, before if before is not None and now() == before else None


def _settle(journal: object) -> None:
    """Wait (a little) for a shared journal's follower to pass everything on record."""
    wait_for = getattr(journal, "wait_for", None)
    head = getattr(journal, "head", None)
    if callable(wait_for) and callable(head):
        wait_for(head(), SETTLE_SECONDS)
