"""Catching up with the other processes that share a PostgreSQL journal, before a delete.

Processes sharing a PostgreSQL journal each read their own store, which
follows the others' writes a few milliseconds late (the journal's follower).
A read there may lag, and the servers say so. A delete that reads what to
delete may not: it would miss an item another process had already
acknowledged, and report that it deleted nothing, or less than everything it
names, while the item stays. :meth:`Memory.atomically
<memstore.memory.Memory.atomically>` does not catch it: it refuses a group
only when another process wrote one of the ids the group writes, and a
delete that found nothing writes none of them.

:func:`catch_up` closes that gap: it reads the journal's head (the newest
write on record, whichever process made it) and waits until this process has
applied it. One query when the process is up to date. A journal no other
process writes (SQLite, or PostgreSQL without a follower) has nothing to
apply, and a caller holding the store's lock (inside its own
``store.batch()``) is not made to wait, since the follower could apply
nothing meanwhile (:meth:`~memstore.journal.postgres.PostgresJournal.atomically`
does the same).

>>> from memstore import Memory
>>> with Memory() as mem:  # no journal: nothing to catch up with
...     catch_up(mem)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from memstore.memory import Memory

__all__ = ["CATCH_UP_SECONDS", "catch_up"]

CATCH_UP_SECONDS: Final = 10.0
"""How long :func:`catch_up` waits by default for this process to apply the others' writes."""


def catch_up(memory: Memory, timeout: float = CATCH_UP_SECONDS) -> bool:
    """Apply every write on record, other processes' too; whether it got there in ``timeout`` s.

    Call it before a delete reads what to delete. ``False``: this process is
    still behind after ``timeout`` seconds (the caller should delete nothing and
    say so: a server answers 503, to be sent again). Costs one query of the
    journal's head when a follower runs, nothing otherwise.
    """
    journal = memory.journal
    feed_status = getattr(journal, "feed_status", None)
    wait_for = getattr(journal, "wait_for", None)
    if journal is None or feed_status is None or wait_for is None:
        return True
    if not feed_status().following or memory.store.holds_lock():
        return True
    return bool(wait_for(journal.head(), timeout))
