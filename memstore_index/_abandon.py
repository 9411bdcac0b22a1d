"""Blocking network calls a ``close()`` can walk away from: each on its own daemon thread.

Why: a thread blocked in a socket read cannot be woken from another thread
(closing an httpx client does not interrupt a read in progress, and httpx
gives no handle on the socket while it waits for the response headers). A
server's worker thread blocked that way on a provider that hangs keeps the
process alive after SIGTERM until the request times out, because interpreter
exit joins every non-daemon thread (asyncio's and anyio's worker threads,
``concurrent.futures`` pools).

So the call itself runs on a fresh *daemon* thread, and the caller waits for
it on an event that :meth:`AbandonableCalls.close` also sets: after
``close()`` every waiting caller gets :class:`CallAbandoned` at once (and new
calls get it straight away), its own thread is free again, and the daemon
thread left behind in the read does not hold up interpreter exit. Without a
``close()`` nothing changes: the caller gets the call's result or its
exception (re-raised in the caller's thread), after the call's own timeouts.

>>> calls = AbandonableCalls()
>>> calls.run(lambda: 6 * 7)
42
>>> calls.run(lambda: int("forty-two"))
Traceback (most recent call last):
...
ValueError: invalid literal for int() with base 10: 'forty-two'
>>> calls.close()
>>> calls.run(lambda: 6 * 7)
Traceback (most recent call last):
...
memstore_index._abandon.CallAbandoned: closed
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

__all__ = ["AbandonableCalls", "CallAbandoned"]

T = TypeVar("T")


class CallAbandoned(Exception):
    """The calls were closed: the caller stopped waiting (the call may still be running)."""


class _Call(Generic[T]):
    """One call: ``outcome`` is ``(True, result)`` or ``(False, exception)``, None until done."""

    __slots__ = ("done", "outcome")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.outcome: tuple[Literal[True], T] | tuple[Literal[False], BaseException] | None = None


class AbandonableCalls:
    """Runs blocking calls on daemon threads; :meth:`close` releases every waiting caller.

    :param name: the daemon threads' name (seen in a thread dump).
    """

    def __init__(self, name: str = "memstore-abandonable-call") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._closed = False
        self._waiting: set[_Call[Any]] = set()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def run(self, call: Callable[[], T]) -> T:
        """``call()`` on a new daemon thread: its result, or its exception raised here.

        :raises CallAbandoned: :meth:`close` was called, before or while ``call`` ran.
        """
        pending: _Call[T] = _Call()
        with self._lock:
            if self._closed:
                raise CallAbandoned("closed")
            self._waiting.add(pending)

        def target() -> None:
            try:
                pending.outcome = (True, call())
            except BaseException as e:  # handed to the caller, raised in its thread
                pending.outcome = (False, e)
            pending.done.set()

        try:
            threading.Thread(target=target, name=self._name, daemon=True).start()
            pending.done.wait()
        finally:
            with self._lock:
                self._waiting.discard(pending)
        outcome, pending.outcome = pending.outcome, None  # no cycle through a traceback
        if outcome is None:
            raise CallAbandoned("closed while the call was running")
        if outcome[0]:
            return outcome[1]
        raise outcome[1]

    def close(self) -> None:
        """Release every caller waiting (:class:`CallAbandoned`) and refuse new calls.

        Idempotent. A call still running is left to its daemon thread: it ends
        when its own timeout does, or with the process.
        """
        with self._lock:
            self._closed = True
            waiting = list(self._waiting)
        for pending in waiting:
            pending.done.set()
