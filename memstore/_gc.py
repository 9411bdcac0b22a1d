"""The cyclic garbage collector around long-lived objects: bulk loads, and servers.

A memory engine's heap is mostly long-lived: every item is a handful of
tracked containers (its model, tag and link lists, data dictionary), so 10k
stored items are about 200k objects that every full collection walks. Two
places settle them so that the collector stops walking them again:
:func:`bulk_load` while a restore builds them, and :func:`frozen_heap` around
a server's serving loop.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = [
    "COLLECT_AFTER",
    "SERVING_YOUNG_THRESHOLD",
    "WALK_EVERY",
    "BulkLoad",
    "bulk_load",
    "frozen_heap",
    "thaw",
    "write_batch",
]

COLLECT_AFTER = 200_000
"""Objects a load must have left behind before its closing full collection is worth it."""

SERVING_YOUNG_THRESHOLD = 10_000
"""The young generation's threshold inside :func:`frozen_heap` (the interpreter's is 700).

The count it is compared with is tracked objects allocated less those freed
since the last young collection. In a server it rises and falls by
thousands as requests start and finish, so at 700 it crossed the threshold
about 37 times a second under load (32 connections, HTTP recall), each
collection promoting whatever the requests in flight held: ~3 full
collections every 10 s, 10-40 ms each. At 10,000 only lasting growth and
cyclic garbage reach it: 3-4 young collections in 10 s (3-7 ms each) and
no full one, for at most 10,000 garbage objects held a little longer.
"""

WALK_EVERY = 8
"""One large :func:`write_batch` in this many resumes the collector the usual way.

The others move what they built to the oldest generation unwalked, where
only a full collection looks at it. CPython starts a full collection when
the objects its middle collections moved there since the last one reach a
quarter of what that one left, and a move it did not make does not count;
so every eighth batch goes through the young generation as before, and full
collections still come (about eight times further apart) to reclaim any
cyclic garbage that a batch's host code (an embedder, a hook, a listener)
left among what was moved.
"""

_frozen_lock = threading.Lock()
_frozen_holders = 0  # open loads whose objects sit in the permanent generation
_serving_lock = threading.Lock()
_serving = 0  # open frozen_heap()s; the first raises the threshold, the last gives it back
_serving_thresholds: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())  # (before, raised)
_batches = 0  # large write batches ended (see write_batch)


class BulkLoad:
    """What a :func:`bulk_load` did on exit: ``frozen`` when it froze the heap.

    A holder of a frozen load calls :func:`thaw` once, when what it loaded is
    let go (a journal's close), so that garbage among the frozen objects
    becomes collectable again.
    """

    __slots__ = ("frozen",)

    def __init__(self) -> None:
        self.frozen = False


@contextlib.contextmanager
def bulk_load(*, collect: bool = True, freeze: bool = False) -> Iterator[BulkLoad]:
    """Pause the cyclic collector for a bulk load, then (``collect``) settle the heap once.

    A restore allocates millions of objects (items, index sets) that all live
    on; with the collector running, every collection they trigger walks the
    objects built so far, about a third of a restore's time. Reference counting
    still frees everything else meanwhile. On exit the survivors are settled,
    so the deferred work is not paid as a pause in the first queries after the
    load: by one full collection, which moves them to the oldest generation
    (a walk of the whole heap, ~0.3 s at 100k items); or, with ``freeze``, by
    :func:`gc.freeze`, which moves every tracked object to the permanent
    generation without walking any (constant time), and later collections
    skip them. The price of freezing: cyclic garbage among those objects is
    not reclaimed until :func:`thaw` (the caller's duty, when it lets the load
    go; the yielded :class:`BulkLoad` says whether it froze). A small load
    (fewer than :data:`COLLECT_AFTER` new objects) does neither, since a full
    collection walks the whole heap, however little was loaded. When the
    collector was off already (the host's choice, or an enclosing bulk load),
    nothing changes. ``collect=False`` only pauses: for short, repeated windows
    (a replica applying a catch-up chunk), where the normal collector catches
    up after.
    """
    outcome = BulkLoad()
    was = gc.isenabled()
    gc.disable()
    try:
        yield outcome
    finally:
        if was:
            # Settled before the collector resumes: resumed first, the next
            # allocation would start a young collection walking all of the load.
            grown = gc.get_count()[0]  # tracked objects allocated (net) while paused
            if collect and grown >= COLLECT_AFTER:
                if freeze:
                    _hold_frozen()
                    outcome.frozen = True
                else:
                    gc.collect()
            gc.enable()


@contextlib.contextmanager
def write_batch() -> Iterator[None]:
    """Pause the cyclic collector for a batch of writes, and resume it without a walk.

    What a batch builds lives on (the stored items) or is handed back to the
    caller: ``Memory.add_many`` of 1,000 items leaves ~12k tracked objects in
    the young generation, and the young collection that the first allocation
    after a plain resume runs walks them all (~9k instructions an item) to
    find nothing to free; ten of those later, a middle collection walks the
    survivors again. Here the young generations are collected on entry
    instead, while they hold only the caller's objects (so a reference cycle
    the caller dropped between two batches is reclaimed then), and a batch
    that ended well and grew past the young threshold is moved to the oldest
    generation by :func:`gc.freeze` then :func:`gc.unfreeze` (constant time,
    nothing walked). Not when anything is frozen (a load's holder, or the
    host's own :func:`gc.freeze`, as a pre-forking server does: the unfreeze
    would let it go), not on an exception, not when collections are off (the
    collector disabled, or a young threshold of 0: the host's choice), and not
    for one large batch in :data:`WALK_EVERY`: those resume as
    :func:`bulk_load` does.
    """
    global _batches
    if not gc.isenabled() or gc.get_threshold()[0] == 0:
        yield
        return
    gc.collect(1)
    gc.disable()
    done = False
    try:
        yield
        done = True
    finally:
        if done and gc.get_count()[0] >= gc.get_threshold()[0]:
            with _frozen_lock:
                _batches += 1
                if _batches % WALK_EVERY and not _frozen_holders and not gc.get_freeze_count():
                    gc.freeze()
                    gc.unfreeze()
        gc.enable()


def _hold_frozen() -> None:
    """Freeze the heap for one more holder (each gives it back with :func:`thaw`)."""
    global _frozen_holders
    with _frozen_lock:
        gc.freeze()
        _frozen_holders += 1


def thaw() -> None:
    """Release one frozen :func:`bulk_load`; the last release unfreezes the heap.

    :func:`gc.unfreeze` puts the permanent generation back into the oldest one
    (constant time: nothing is walked now); the next full collection there
    reclaims whatever became garbage meanwhile.
    """
    global _frozen_holders
    with _frozen_lock:
        if _frozen_holders > 0:
            _frozen_holders -= 1
            if _frozen_holders == 0:
                gc.unfreeze()


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Serve with what is loaded moved out of the collector's walks, then give it back.

    A server under load keeps dozens of requests in flight; every young
    collection promotes their short-lived objects, and about once a second the
    promoted count sets off a full collection, which walks the whole heap with
    every request waiting: ~50 ms at 10k items on an idle core, 85-135 ms under
    load, so the p99 of a loaded server's answers was that pause. Inside,
    everything allocated so far sits in the permanent generation
    (:func:`gc.freeze`, after one full collection so no garbage is frozen);
    full collections walk only what the server allocated since, and the young
    generation's threshold is at least :data:`SERVING_YOUNG_THRESHOLD`, so
    that requests in flight no longer set off collections (and the full ones
    their promotions add up to) by the dozen a second. Cyclic garbage
    among the frozen objects (an item replaced while serving is freed by
    reference counting as usual) waits for the exit, which unfreezes them
    (:func:`thaw`'s bookkeeping: a restore's own freeze is kept until its
    journal closes), and gives the threshold back. With the collector off
    (the host's choice), nothing changes.

    Two may overlap in one process (two servers, in any order of exit): the
    threshold is the process's, so the first to enter raises it and the last
    to leave gives it back (before, the first to leave put it back under the
    other, still serving, and one leaving second could keep it raised).
    """
    global _serving, _serving_thresholds
    if not gc.isenabled():
        yield
        return
    gc.collect()
    _hold_frozen()
    with _serving_lock:
        if _serving == 0:
            before = gc.get_threshold()
            raised = (max(before[0], SERVING_YOUNG_THRESHOLD), *before[1:])
            if before[0] > 0:  # 0: the host turned collections off that way; leave it so
                gc.set_threshold(*raised)
            _serving_thresholds = (before, raised)
        _serving += 1
    try:
        yield
    finally:
        with _serving_lock:
            _serving -= 1
            host, serving = _serving_thresholds
            if _serving == 0 and gc.get_threshold() == serving:  # unless the host chose another
                gc.set_threshold(*host)
        thaw()
