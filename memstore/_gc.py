"""Pausing the cyclic garbage collector while a bulk load builds long-lived objects."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["bulk_load"]

COLLECT_AFTER = 200_000
"""Objects a load must have left behind before its closing full collection is worth it."""


@contextlib.contextmanager
def bulk_load(*, collect: bool = True) -> Iterator[None]:
    """Pause the cyclic collector for a bulk load, then (``collect``) collect once.

    A restore allocates millions of objects (items, index sets) that all live
    on; with the collector running, every collection they trigger walks the
    objects built so far, about a third of a restore's time. Reference counting
    still frees everything else meanwhile. On exit one full collection moves the
    survivors to the oldest generation, so the deferred work is paid here and
    not as a pause in the first queries after the load; a small load (fewer
    than :data:`COLLECT_AFTER` new objects) skips it, since a full collection
    walks the whole heap, however little was loaded. When the collector was
    off already (the host's choice, or an enclosing bulk load), nothing changes.
    ``collect=False`` only pauses: for short, repeated windows (a replica
    applying a catch-up chunk), where the normal collector catches up after.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            grown = gc.get_count()[0]  # tracked objects allocated (net) while paused
            gc.enable()
            if collect and grown >= COLLECT_AFTER:
                gc.collect()
