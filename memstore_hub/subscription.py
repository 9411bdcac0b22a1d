"""A subscriber's end of the hub: a bounded queue read as an iterator or async iterator.

A :class:`Subscription` is what :meth:`Hub.subscribe <memstore_hub.Hub.subscribe>`
returns. Read it from a thread (``for event in sub``, :meth:`~Subscription.get`)
or from asyncio (``async for event in sub``, :meth:`~Subscription.aget`), one
consumer at a time. Publishers never wait for it: when its queue is full the
oldest event is dropped, and the next event it reads says how many it lost
(:attr:`Event.dropped <memstore_hub.events.Event.dropped>`).

How it works without a lock on the reader's side: the hub numbers every event
it pushes to this subscription (1, 2, 3...) and pushes ``(n, event)`` onto a
``deque(maxlen=maxsize)``, which drops the oldest entry by itself. The reader
remembers the last ``n`` it read; a jump in ``n`` is exactly the number of
events dropped. A reader with nothing to read raises a flag and sleeps; the
publisher that sees the flag wakes it (a ``threading.Event`` for a thread;
for a coroutine, its future resolved directly on the loop's own thread, else
through ``call_soon_threadsafe``, once per loop for all the readers a publish
wakes there).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Self

from memstore_hub._waker import LoopWaker, resolve, waker_for
from memstore_hub.events import Event

__all__ = ["GAP_EXPIRED", "GAP_UNKNOWN", "Subscription"]

GAP_EXPIRED = "expired"
"""Resumption gap: events after the requested one were evicted from the replay buffer."""
GAP_UNKNOWN = "unknown"
"""Resumption gap: the requested event id is not one this hub issued."""


def _wait_seconds(timeout: object) -> float | None:
    """A reader's ``timeout`` checked: seconds to wait, ``None`` for as long as it takes.

    ``inf`` (or more than a thread can wait, :data:`threading.TIMEOUT_MAX`)
    waits as ``None`` does; a negative number does not wait. NaN, text or a
    ``bool`` is a mistake, refused rather than read as "never" or "now".
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or math.isnan(timeout):
        raise ValueError(f"timeout must be a number of seconds or None, got {timeout!r:.40}")
    if timeout >= threading.TIMEOUT_MAX:
        return None
    return max(float(timeout), 0.0)


class Subscription:
    """The events one subscriber receives, in publication order.

    Iterating ends once the subscription is closed: by :meth:`close` (at once,
    what was queued is discarded) or by :meth:`Hub.close
    <memstore_hub.Hub.close>` (after what was queued has been read). One that
    is no longer referenced (and has no reader waiting) is unsubscribed when
    Python frees it, its queue with it.
    """

    __slots__ = (
        "__weakref__",
        "_future",
        "_keep",
        "_last",
        "_loop_thread",
        "_pushed",
        "_queue",
        "_read",
        "_ready",
        "_unsubscribe",
        "_waiting",
        "_waker",
        "closed",
        "gap",
        "id",
        "maxsize",
        "name",
        "partition",
        "position",
        "shared",
        "topics",
    )

    def __init__(
        self,
        unsubscribe: Callable[[Subscription], None],
        *,
        id: int,
        topics: frozenset[str] | None,
        partition: str | None,
        maxsize: int,
        name: str = "",
        keep: set[Subscription] | None = None,
        shared: bool = True,
    ) -> None:
        self.id = id
        """The hub's number for this subscription (1, 2, 3...)."""
        self.name = name
        """A label for :meth:`Hub.stats <memstore_hub.Hub.stats>`."""
        self.topics = topics
        """The topics received; ``None`` for all."""
        self.partition = partition
        """The partition whose events are received; ``None`` for every partition."""
        self.shared = shared
        """Whether a partition's subscriber also receives what every partition sees
        (untagged and ``shared`` items); ``False`` keeps to the partition's own."""
        self.maxsize = maxsize
        """How many unread events are kept before the oldest is dropped."""
        self.position = 0
        """The hub's sequence number when this subscription started: it receives
        the events published after it (plus any replayed from before)."""
        self.gap = ""
        """Why a resumption could not be complete (:data:`GAP_EXPIRED`,
        :data:`GAP_UNKNOWN`), or ``""``. With a gap nothing was replayed: the
        subscriber should resynchronise, then follow the live events."""
        self.closed = False
        """Whether no further event will be pushed (the queue may still hold some)."""
        self._unsubscribe = unsubscribe
        # The hub holds subscriptions weakly (a forgotten one is freed); a
        # coroutine waiting in aget() puts its subscription here meanwhile, as a
        # task nobody references is otherwise only reachable through it.
        self._keep = keep if keep is not None else set()
        self._queue: deque[tuple[int, Event]] = deque(maxlen=maxsize)
        self._pushed = 0
        self._last = 0
        self._read = 0
        self._waiting = False
        self._ready = threading.Event()
        self._future: asyncio.Future[None] | None = None
        self._loop_thread = 0
        self._waker: LoopWaker | None = None

    def __repr__(self) -> str:
        return (
            f"Subscription(id={self.id}, name={self.name!r}, partition={self.partition!r}, "
            f"topics={sorted(self.topics) if self.topics is not None else None}, "
            f"queued={len(self._queue)}, closed={self.closed})"
        )

    # ------------------------------------------------------- publisher side

    def _push(self, event: Event) -> bool:
        """Queue ``event`` (the hub's publishing lock held); ``False`` if this
        subscription cannot be woken any more (its event loop is closed)."""
        n = self._pushed + 1
        self._pushed = n
        self._queue.append((n, event))
        if self._waiting:
            return self._wake()
        return True

    def _wake(self) -> bool:
        self._waiting = False  # before the wake-up: a reader that re-arms after it stays armed
        fut = self._future
        if fut is None:
            self._ready.set()
            return True
        if threading.get_ident() == self._loop_thread:
            resolve(fut)
            return True
        waker = self._waker
        if waker is not None and waker.wake(fut):
            return True
        # The reader's loop is closed: nobody will read this subscription again.
        self.closed = True
        self._future = None
        self._queue.clear()
        return False

    def _end(self) -> None:
        """No more events will come (the hub closed); the reader drains what is queued."""
        self.closed = True
        self._wake()

    # ---------------------------------------------------------- reader side

    def _pop(self) -> Event | None:
        try:
            n, event = self._queue.popleft()
        except IndexError:
            return None
        missed = n - self._last - 1
        self._last = n
        self._read += 1
        if missed:  # rare: a copy, since the event object is shared with other subscribers
            return dataclasses.replace(event, dropped=missed)
        return event

    def get_nowait(self) -> Event | None:
        """The next queued event, or ``None`` when there is none right now."""
        return self._pop()

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, waiting up to ``timeout`` seconds (``None``: as long as it takes).

        ``None`` when the time is up, or when the subscription is closed and
        drained (check :attr:`closed` to tell them apart). ``math.inf`` waits as
        ``None`` does; NaN or a non-number raises :class:`ValueError`.
        """
        timeout = _wait_seconds(timeout)
        event = self._pop()
        if event is not None or self.closed:
            return event
        deadline = None if timeout is None else time.monotonic() + timeout
        ready = self._ready
        while True:
            # Arm, then look: a publisher that pushes after the look sees the flag.
            ready.clear()
            self._waiting = True
            event = self._pop()
            if event is not None or self.closed:
                self._waiting = False
                return event if event is not None else self._pop()
            if deadline is None:
                ready.wait()
            else:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not ready.wait(remaining):
                    self._waiting = False
                    return self._pop()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Event:
        event = self.get()
        if event is None:
            raise StopIteration
        return event

    async def aget(self, timeout: float | None = None) -> Event | None:
        """The next event, awaiting up to ``timeout`` seconds (``None``: as long as it takes).

        ``None`` when the time is up, or when the subscription is closed and
        drained (check :attr:`closed` to tell them apart). Cancelling it loses
        no event. ``timeout`` is read as :meth:`get` reads it.
        """
        timeout = _wait_seconds(timeout)
        event = self._pop()
        if event is not None or self.closed:
            return event
        loop = asyncio.get_running_loop()
        self._waker = waker_for(loop)
        timer = None
        expired = False
        if timeout is not None:

            def expire() -> None:
                nonlocal expired
                expired = True
                fut = self._future
                if fut is not None:
                    resolve(fut)

            timer = loop.call_later(timeout, expire)
        self._keep.add(self)
        try:
            while True:
                fut: asyncio.Future[None] = loop.create_future()
                self._loop_thread = threading.get_ident()
                self._future = fut
                self._waiting = True  # arm, then look (see get)
                event = self._pop()
                if event is not None or self.closed or expired:
                    return event if event is not None else self._pop()
                try:
                    await fut
                finally:
                    self._future = None
                    self._waiting = False
        finally:
            self._future = None
            self._waiting = False
            self._keep.discard(self)
            if timer is not None:
                timer.cancel()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        event = self._pop()  # the fast path: no waiting, no future
        if event is None:
            event = await self.aget()
            if event is None:
                raise StopAsyncIteration
        return event

    # ------------------------------------------------------------- closing

    def close(self) -> None:
        """Stop receiving: unsubscribe, discard what is queued, end iteration.

        Safe from any thread and idempotent; a reader waiting in another thread
        or coroutine wakes up and stops.
        """
        if not self.closed:
            self._unsubscribe(self)
        self.closed = True
        self._queue.clear()
        self._wake()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --------------------------------------------------------------- stats

    def _counts(self) -> tuple[int, int, int, int]:
        """(received, read, queued, dropped); exact when no reader runs concurrently."""
        queued = len(self._queue)
        return self._pushed, self._read, queued, max(0, self._pushed - self._read - queued)
