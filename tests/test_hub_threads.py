"""The hub under 8 publisher threads, with thread and asyncio subscribers at once.

Each publisher thread publishes a bounded, numbered sequence (never a
wall-clock loop), half of it to its own partition. Subscribers that keep up
(their queue can hold everything) must receive exactly the events their
partition takes, each once, in one global order that keeps every publisher's
own order; a subscriber with a tiny queue must account for every event it
did not get. The hub's close ends every reader, so no test waits on a clock.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

import pytest

from memstore_hub import Event, Hub, MetricsSnapshot, Subscription

PUBLISHERS = 8
PER_PUBLISHER = 600
TOTAL = PUBLISHERS * PER_PUBLISHER
JOIN_TIMEOUT = 120.0
"""A hang guard (never reached unless a wake-up is lost)."""


def _partition(t: int, i: int) -> str:
    """Odd events go to every partition, even ones to the publisher's parity partition."""
    return "" if i % 2 else f"p{t % 2}"


def _publish(hub: Hub, t: int, start: threading.Barrier) -> None:
    start.wait()
    for i in range(PER_PUBLISHER):
        hub.publish_metrics({"t": t, "i": i}, partition=_partition(t, i))


def _expected(partition: str | None) -> int:
    return sum(
        1
        for t in range(PUBLISHERS)
        for i in range(PER_PUBLISHER)
        if partition is None or _partition(t, i) in ("", partition)
    )


def _check_stream(events: list[Event], partition: str | None) -> None:
    """Each event once, global order by seq, every publisher's order kept."""
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(e.dropped == 0 for e in events)
    per_publisher: dict[int, list[int]] = defaultdict(list)
    for e in events:
        assert isinstance(e, MetricsSnapshot)
        t, i = int(e.values["t"]), int(e.values["i"])
        assert partition is None or _partition(t, i) in ("", partition)
        per_publisher[t].append(i)
    for t in range(PUBLISHERS):
        wanted = [
            i
            for i in range(PER_PUBLISHER)
            if partition is None or _partition(t, i) in ("", partition)
        ]
        assert per_publisher[t] == wanted, t
    assert len(events) == _expected(partition)


def test_eight_publishers_thread_and_asyncio_subscribers_lose_nothing_when_keeping_up() -> None:
    hub = Hub()
    partitions: list[str | None] = [None, "p0", "p1"]
    thread_subs = [hub.subscribe(partition=p, maxsize=TOTAL) for p in partitions]
    async_subs = [hub.subscribe(partition=p, maxsize=TOTAL) for p in partitions]
    tiny = hub.subscribe(maxsize=4)

    thread_got: dict[int, list[Event]] = {}
    async_got: dict[int, list[Event]] = {}
    tiny_got: list[Event] = []

    def read(sub: Subscription) -> None:
        thread_got[sub.id] = list(sub)

    def read_tiny() -> None:
        tiny_got.extend(tiny)

    loop_ready = threading.Event()

    def run_loop() -> None:
        async def read_async(sub: Subscription) -> None:
            async_got[sub.id] = [ev async for ev in sub]

        async def main() -> None:
            tasks = [asyncio.ensure_future(read_async(s)) for s in async_subs]
            await asyncio.sleep(0)
            loop_ready.set()
            await asyncio.gather(*tasks)

        asyncio.run(main())

    readers = [threading.Thread(daemon=True, target=read, args=(s,)) for s in thread_subs]
    readers.append(threading.Thread(daemon=True, target=read_tiny))
    readers.append(threading.Thread(daemon=True, target=run_loop))
    for r in readers:
        r.start()
    assert loop_ready.wait(JOIN_TIMEOUT)

    start = threading.Barrier(PUBLISHERS)
    publishers = [
        threading.Thread(daemon=True, target=_publish, args=(hub, t, start))
        for t in range(PUBLISHERS)
    ]
    for th in publishers:
        th.start()
    for th in publishers:
        th.join(JOIN_TIMEOUT)
    stats = {s.id: s for s in hub.stats().per_subscriber}
    hub.close()
    for r in readers:
        r.join(JOIN_TIMEOUT)
    assert not any(r.is_alive() for r in readers + publishers)

    assert hub.seq == TOTAL
    # The streams themselves show nothing lost (every event once, in order, none
    # marked as following a drop). The counters were read while the readers
    # still ran, so their ``dropped`` (pushed - read - queued) can count an
    # event a reader holds between the queue and its counter: not checked here.
    for sub, p in zip(thread_subs, partitions, strict=True):
        _check_stream(thread_got[sub.id], p)
        assert stats[sub.id].received == _expected(p)
    for sub, p in zip(async_subs, partitions, strict=True):
        _check_stream(async_got[sub.id], p)
        assert stats[sub.id].received == _expected(p)
    # The tiny queue lost most of it, and says exactly what it lost.
    previous = 0
    for ev in tiny_got:
        assert ev.dropped == ev.seq - previous - 1
        previous = ev.seq
    assert previous == TOTAL
    assert len(tiny_got) + sum(e.dropped for e in tiny_got) == TOTAL


ROUNDS = 3_000


@pytest.mark.parametrize("reader", ["thread", "thread-timeout", "asyncio"])
def test_ping_pong_never_loses_a_wake_up(reader: str) -> None:
    """A publisher that waits for each event to be read before the next.

    Any lost wake-up leaves the reader asleep with an event queued and the
    publisher waiting for it: the exchange stalls and the hang guard fails
    the test. Readers in a thread, with and without timeouts, and on a loop.
    """
    hub = Hub()
    sub = hub.subscribe()
    acked = threading.Semaphore(0)
    got: list[int] = []

    def on_event(ev: Event) -> None:
        assert isinstance(ev, MetricsSnapshot)
        got.append(int(ev.values["k"]))
        acked.release()

    def read_thread(timeout: float | None) -> None:
        while (ev := sub.get(timeout)) is not None or not sub.closed:
            if ev is not None:
                on_event(ev)

    def read_loop() -> None:
        async def main() -> None:
            async for ev in sub:
                on_event(ev)

        asyncio.run(main())

    if reader == "asyncio":
        thread = threading.Thread(daemon=True, target=read_loop)
    else:
        timeout = 0.0005 if reader == "thread-timeout" else None
        thread = threading.Thread(daemon=True, target=read_thread, args=(timeout,))
    thread.start()
    for k in range(ROUNDS):
        hub.publish_metrics({"k": k})
        assert acked.acquire(timeout=JOIN_TIMEOUT), k
    hub.close()
    thread.join(JOIN_TIMEOUT)
    assert not thread.is_alive()
    assert got == list(range(ROUNDS))
