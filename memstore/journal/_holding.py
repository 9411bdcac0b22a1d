"""Holding a store's lock as its own calls do, for what a journal writes into it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memstore.store import Store

__all__ = ["_holding"]


@contextlib.contextmanager
def _holding(store: Store, *, settle: bool = True) -> Iterator[None]:
    """Hold ``store``'s lock as its own calls do; tell its listeners once it is released.

    What an import, a purge or a follower's apply writes inside commits with
    the lock held, but its change listeners and hooks run only after the
    lock is released, in commit order with every other write, as those of
    an ordinary write do: a listener that reads the store, or takes its
    time, never holds up (or deadlocks) the store's writers. And as an
    ordinary write does, the block returns once they heard it (whichever
    thread told them), unless ``settle`` is false: a follower's apply does
    not wait (a listener waiting for the follower, say a conflicted write in
    ``atomically``, would wait for it in turn); ``wait_for`` waits instead.
    """
    try:
        with store._locked():
            yield
    finally:
        store._drain()
        if settle:
            store._await_published()
