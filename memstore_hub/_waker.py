"""Waking coroutines that wait on an event loop, from any thread, one call per burst.

A publish that wakes ten readers waiting on the same loop makes one
``call_soon_threadsafe`` (one write to the loop's self-pipe) instead of ten:
the futures queue in the loop's :class:`LoopWaker`, which one scheduled
callback drains. Wakers are kept per loop, weakly, so closed loops go away.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque

__all__ = ["LoopWaker", "resolve", "waker_for"]


def resolve(fut: asyncio.Future[None]) -> None:
    """Complete ``fut`` unless it already is (cancelled, timed out); on its loop's thread."""
    if not fut.done():
        fut.set_result(None)


class LoopWaker:
    """Resolves futures of one event loop from other threads: a deque of futures
    and at most one scheduled drain at a time."""

    __slots__ = ("_loop", "_pending", "_scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # weak: the registry's key must be able to die
        self._pending: deque[asyncio.Future[None]] = deque()
        self._scheduled = False

    def wake(self, fut: asyncio.Future[None]) -> bool:
        """Resolve ``fut`` on its loop soon; ``False`` if the loop is closed."""
        loop = self._loop()
        if loop is None or loop.is_closed():
            return False
        self._pending.append(fut)  # append, then look at the flag (see _run)
        if not self._scheduled:
            self._scheduled = True
            try:
                loop.call_soon_threadsafe(self._run)
            except RuntimeError:  # closed in between
                return False
        return True

    def _run(self) -> None:
        self._scheduled = False  # first: a wake after this point schedules another run
        pending = self._pending
        while pending:
            resolve(pending.popleft())


_wakers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWaker] = (
    weakref.WeakKeyDictionary()
)
_wakers_lock = threading.Lock()


def waker_for(loop: asyncio.AbstractEventLoop) -> LoopWaker:
    """The waker of ``loop``, created on first use."""
    waker = _wakers.get(loop)
    if waker is None:
        with _wakers_lock:
            waker = _wakers.get(loop)
            if waker is None:
                waker = _wakers[loop] = LoopWaker(loop)
    return waker
