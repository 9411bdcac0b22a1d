"""Blocking work off the event loop, settled before a cancellation reaches the caller.

A worker thread cannot be stopped midway. ``asyncio.to_thread`` hands a
cancelled caller :class:`asyncio.CancelledError` at once while the call runs
on in its thread: a write the caller was told was cancelled lands later (after
the caller moved on, read the memory, or closed it). :func:`run_settled` keeps
the promise a caller needs: when it sees ``CancelledError``, the work either
happened entirely or not at all, and nothing of it still runs.

>>> import asyncio, threading, time
>>> done = threading.Event()
>>> def slow_write() -> None:
...     time.sleep(0.05)
...     done.set()
>>> async def cancel_it() -> bool:
...     task = asyncio.ensure_future(run_settled(slow_write))
...     await asyncio.sleep(0.01)      # the write has started
...     task.cancel()
...     try:
...         await task
...     except asyncio.CancelledError:
...         return done.is_set()       # settled: it finished before the cancellation came back
...     return False
>>> asyncio.run(cancel_it())
True
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["run_settled"]

P = ParamSpec("P")
R = TypeVar("R")


class _NotStarted(Exception):
    """The call was cancelled before its thread picked it up: it never ran."""


async def run_settled(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
    """``fn(*args, **kwargs)`` in the loop's default executor, cancellation-safe.

    Cancelled before its thread starts it, the call never runs; cancelled
    while it runs, the caller waits for it to finish (ignoring further
    cancellations meanwhile), then gets :class:`asyncio.CancelledError`. The
    context variables of the caller are those the call sees, as with
    :func:`asyncio.to_thread`.
    """
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    gate = threading.Lock()
    state = {"started": False, "abandoned": False}

    def work() -> R:
        with gate:
            if state["abandoned"]:
                raise _NotStarted
            state["started"] = True
        return context.run(fn, *args, **kwargs)

    future = loop.run_in_executor(None, work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with gate:
            state["abandoned"] = True
            started = state["started"]
        if started:
            await _settle(future)
        else:
            future.add_done_callback(_consume)  # it raises _NotStarted; nobody awaits it
        raise


async def _settle(future: asyncio.Future[R]) -> None:
    """Wait until ``future`` is done, whatever cancellations arrive meanwhile."""
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            continue  # the caller is cancelled already; the work must settle first
    _consume(future)


def _consume(future: asyncio.Future[R]) -> None:
    """Retrieve an abandoned call's outcome, so asyncio never logs it as unretrieved."""
    if not future.cancelled():
        future.exception()
