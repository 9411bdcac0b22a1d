"""Subscriptions read from asyncio: async iteration, timeouts, cancellation, cross-thread wake-ups.

Each test runs its own event loop with ``asyncio.run``. Publishers run either
on the loop itself or in plain threads; a subscriber whose loop has gone away
must never make a publisher raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading

from memstore_hub import Event, Hub, MetricsSnapshot, SearchHit

JOIN_TIMEOUT = 60.0
"""A hang guard (never reached unless a wake-up is lost)."""


def _k(ev: Event) -> float:
    assert isinstance(ev, MetricsSnapshot)
    return ev.values["k"]


def test_async_iteration_reads_in_order_and_ends_when_the_hub_closes() -> None:
    hub = Hub()

    async def main() -> list[float]:
        sub = hub.subscribe()
        for k in range(5):
            hub.publish_metrics({"k": k})
        hub.close()
        return [_k(ev) async for ev in sub]

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]


def test_a_waiting_coroutine_is_woken_by_a_publisher_thread() -> None:
    hub = Hub()
    total = 2_000

    async def main() -> list[float]:
        sub = hub.subscribe(maxsize=total)
        publisher = threading.Thread(
            target=lambda: [hub.publish_metrics({"k": k}) for k in range(total)]
        )
        publisher.start()
        got = []
        async for ev in sub:
            got.append(_k(ev))
            if len(got) == total:
                break
        publisher.join(JOIN_TIMEOUT)
        return got

    assert asyncio.run(main()) == list(range(total))


def test_aget_times_out_with_none_then_still_receives() -> None:
    hub = Hub()

    async def main() -> tuple[Event | None, Event | None, bool]:
        sub = hub.subscribe()
        timed_out = await sub.aget(timeout=0.01)
        asyncio.get_running_loop().call_soon(hub.publish_hit, ["a"], "later")
        got = await sub.aget(timeout=JOIN_TIMEOUT)
        return timed_out, got, sub.closed

    timed_out, got, closed = asyncio.run(main())
    assert timed_out is None and not closed
    assert isinstance(got, SearchHit) and got.query == "later"


def test_cancelling_a_waiting_reader_loses_no_event() -> None:
    hub = Hub()

    async def main() -> list[str]:
        sub = hub.subscribe()
        waiter = asyncio.ensure_future(sub.aget())
        await asyncio.sleep(0)  # let it start waiting
        waiter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        hub.publish_hit(["a"], "one")
        hub.publish_hit(["b"], "two")
        hub.close()
        return [ev.query async for ev in sub if isinstance(ev, SearchHit)]

    assert asyncio.run(main()) == ["one", "two"]


def test_closing_the_subscription_ends_a_waiting_async_for() -> None:
    hub = Hub()

    async def main() -> list[Event]:
        sub = hub.subscribe()

        async def read() -> list[Event]:
            return [ev async for ev in sub]

        reader = asyncio.ensure_future(read())
        await asyncio.sleep(0)
        sub.close()
        return await asyncio.wait_for(reader, JOIN_TIMEOUT)

    assert asyncio.run(main()) == []


def test_async_context_manager_closes() -> None:
    hub = Hub()

    async def main() -> bool:
        async with hub.subscribe() as sub:
            hub.publish_hit(["a"], "q")
            assert (await sub.aget()) is not None
        return sub.closed

    assert asyncio.run(main()) and hub.stats().subscribers == 0


def test_a_subscriber_whose_loop_is_gone_never_makes_a_publisher_raise() -> None:
    hub = Hub()
    other = hub.subscribe()
    loop = asyncio.new_event_loop()
    sub = hub.subscribe()
    waiter = loop.create_task(sub.aget())
    loop.run_until_complete(asyncio.sleep(0))  # the reader is now waiting on this loop
    assert not waiter.done()
    loop.close()  # abandoned, with a coroutine still parked in aget()

    result: list[object] = []
    t = threading.Thread(daemon=True, target=lambda: result.append(hub.publish_hit(["a"], "q")))
    t.start()
    t.join(JOIN_TIMEOUT)
    assert isinstance(result[0], SearchHit)  # published, no exception
    assert sub.closed and hub.stats().subscribers == 1  # the dead one was dropped
    assert other.get_nowait() is result[0]
    hub.publish_hit(["b"], "again")
    assert other.get_nowait() is not None
    del waiter
    gc.collect()  # the abandoned task goes now, inside this test


def test_readers_on_many_loops_leave_nothing_behind_once_the_loops_are_gone() -> None:
    from memstore_hub import _waker

    hub = Hub()

    async def wait_once() -> None:
        with hub.subscribe() as sub:
            await sub.aget(timeout=0)

    for _ in range(20):
        asyncio.run(wait_once())
    gc.collect()
    assert len(_waker._wakers) == 0
