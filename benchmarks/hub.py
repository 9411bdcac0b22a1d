"""Change hub benchmark: publish throughput, delivery throughput and fan-out latency.

In one process, on the same machine state:

* **publish**: events/s one publisher thread gets through ``Hub.publish_change``
  (the path ``Hub.attach`` takes for every store write), with 0, 1, 10 and 100
  subscribers that never read (their full queues drop the oldest event on
  every push: the publisher's worst case);
* **delivery**: the same publisher, flat out, with 1, 10 and 100 subscribers
  that read everything, as asyncio tasks on one event loop thread or as one
  thread each (up to 10): delivered events/s is what the slowest subscriber
  read divided by the time from the first publish to its last read; queues
  of the default size. Twice: *lossless*, where the harness (never the hub)
  holds the publisher back so that no reader falls half a queue behind
  (every subscriber gets every event: the rate the whole pipeline
  sustains), and *flood*, the publisher flat out (a publisher that outruns
  its readers shows up as drops, never as a stall);
* **latency**: a publisher thread paced at a steady rate (it sleeps between
  events) and 1, 10 and 100 asyncio subscribers on one loop thread; each
  delivery's time from just before ``publish`` to the reader holding the
  event; p50, p99 and max over every delivery;
* **store**: ``Store.upsert`` per second without a hub, with a hub attached,
  and with one subscriber reading in a thread or on an event loop.

Each throughput case runs a warm-up and then ``--repeats`` timed runs; the
median run is reported (and the best). Results go to a JSON file and a
markdown report (with PASS/MISS per target) to stdout; progress to stderr.
The exit status is 0 whether targets pass or not: this is a report, not a test.

Usage::

    python benchmarks/hub.py [--smoke] [--repeats 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import TargetResult, git_commit, load_average, log, percentile, source_digest
from _common import cpu_model as _cpu_model
from _common import fmt as _fmt
from _common import status as _status
from _common import version as _version

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from memstore import Item, Store  # noqa: E402
from memstore_hub import DEFAULT_MAXSIZE, Hub, MetricsSnapshot, Subscription  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "hub.json"
PUBLISH_SUBSCRIBERS = (0, 1, 10, 100)
DELIVERY_SUBSCRIBERS = (1, 10, 100)
THREAD_SUBSCRIBERS_MAX = 10
"""Thread subscribers are measured up to this many (100 threads is not a design to bench)."""
LATENCY_SUBSCRIBERS = (1, 10, 100)
EVENTS = 200_000
"""Events per publish run..."""
DELIVERY_EVENTS = 100_000
"""...per delivery run with up to 10 subscribers..."""
DELIVERY_EVENTS_100 = 20_000
"""...and with 100 (every event is read 100 times)."""
SMOKE_EVENTS = 2_000
LATENCY_EVENTS = 2_000
SMOKE_LATENCY_EVENTS = 100
LATENCY_RATE = 1_000
"""Events per second the paced latency publisher aims at."""
STORE_WRITES = 5_000
SMOKE_STORE_WRITES = 200
WINDOW = DEFAULT_MAXSIZE // 2
"""Lossless delivery: how far the slowest reader may fall behind (half a queue)..."""
WINDOW_CHECK = 100
"""...checked every this many events (so at most WINDOW + WINDOW_CHECK behind: no drop)."""
JOIN_TIMEOUT = 600.0

# Targets (a report, never an assertion).
TARGET_PUBLISH_PER_S = 200_000
TARGET_DELIVERED_PER_S = 50_000
TARGET_DELIVERED_SUBSCRIBERS = 10
TARGET_P99_MS = 5.0
TARGET_LATENCY_SUBSCRIBERS = 10


def _item(i: int) -> Item:
    return Item(
        id=f"memory-{i:06d}",
        kind="stable_fact",
        title="ledger pool exhausted at peak",
        content="the ledger database connection pool runs dry",
        confidence="high",
        tags=[f"tenant/t{i % 8}", "service/ledger"],
    )


ITEMS = [_item(i) for i in range(64)]


# --------------------------------------------------------------------------- results


@dataclass
class Throughput:
    """One throughput case: the median run, the best run, and every run."""

    events: int
    per_s: float
    """Median over the timed runs."""
    best_per_s: float
    runs_per_s: list[float]


@dataclass
class PublishResult:
    """Publisher throughput with subscribers that never read."""

    subscribers: int
    published: Throughput
    ns_per_event: float
    """Median run: nanoseconds per publish call."""


@dataclass
class DeliveryResult:
    """Publisher and reader throughput with subscribers that read everything."""

    subscribers: int
    reader: str
    """``asyncio`` (tasks on one loop thread) or ``thread`` (one thread each)."""
    lossless: bool
    """Whether the harness held the publisher back to the slowest reader's pace."""
    published: Throughput
    delivered: Throughput
    """Events the slowest subscriber read, per second from the first publish to its last read."""
    read: int
    """Events read, summed over subscribers, in the median run..."""
    dropped: int
    """...and events lost (the two add up to events x subscribers)."""
    delivered_total_per_s: float
    """Median run: reads per second summed over subscribers."""


@dataclass
class LatencyResult:
    """Fan-out latency to asyncio subscribers under a paced publisher."""

    subscribers: int
    events: int
    rate_per_s: float
    """The rate the publisher achieved."""
    deliveries: int
    dropped: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass
class StoreResult:
    """``Store.upsert`` per second, alone and publishing through an attached hub."""

    writes: int
    without_hub_per_s: float
    hub_no_reader_per_s: float
    """Hub attached, no subscriber: the cost of building and publishing the events."""
    hub_thread_reader_per_s: float
    """Plus one subscriber reading in its own thread (it shares the GIL with the writer)."""
    hub_asyncio_reader_per_s: float
    """Plus one subscriber reading on an event loop thread."""


# --------------------------------------------------------------------------- runs


def _throughput(events: int, runs: Sequence[float]) -> Throughput:
    return Throughput(
        events=events,
        per_s=statistics.median(runs),
        best_per_s=max(runs),
        runs_per_s=[round(r, 1) for r in runs],
    )


def _publish(hub: Hub, events: int, behind: Callable[[], int] | None = None) -> float:
    """Publish ``events`` changes as fast as one thread can; the seconds it took.

    With ``behind`` (how many events the slowest reader has yet to read), the
    harness holds the publisher back, never the hub: every ``WINDOW_CHECK``
    events it yields until that reader is less than ``WINDOW`` events behind.
    """
    items = ITEMS
    n_items = len(items)
    publish = hub.publish_change
    t0 = time.perf_counter()
    if behind is None:
        for i in range(events):
            publish("upsert", items[i % n_items])
        return time.perf_counter() - t0
    for i in range(events):
        if i % WINDOW_CHECK == 0:
            while behind() >= WINDOW:
                time.sleep(0)  # let the readers run
        publish("upsert", items[i % n_items])
    return time.perf_counter() - t0


def run_publish(subscribers: int, events: int, repeats: int) -> PublishResult:
    """Publisher throughput with ``subscribers`` that never read."""
    runs: list[float] = []
    for r in range(repeats + 1):  # run 0 warms up
        hub = Hub()
        for _ in range(subscribers):
            hub.subscribe()
        gc.collect()
        seconds = _publish(hub, events)
        if r:
            runs.append(events / seconds)
        hub.close()
    tp = _throughput(events, runs)
    return PublishResult(subscribers, tp, 1e9 / tp.per_s)


@dataclass
class _Reads:
    count: int = 0
    dropped: int = 0
    end: float = 0.0


def _start_readers(
    subs: Sequence[Subscription], reader: str
) -> tuple[list[_Reads], Callable[[], None]]:
    """Start reading every subscription; the per-reader tallies and a join function."""
    reads = [_Reads() for _ in subs]

    if reader == "thread":

        def read(sub: Subscription, out: _Reads) -> None:
            for ev in sub:
                out.count += 1
                out.dropped += ev.dropped
            out.end = time.perf_counter()

        threads = [threading.Thread(target=read, args=a) for a in zip(subs, reads, strict=True)]
        for t in threads:
            t.start()

        def join() -> None:
            for t in threads:
                t.join(JOIN_TIMEOUT)

        return reads, join

    ready = threading.Event()

    def run_loop() -> None:
        async def read(sub: Subscription, out: _Reads) -> None:
            async for ev in sub:
                out.count += 1
                out.dropped += ev.dropped
            out.end = time.perf_counter()

        async def main() -> None:
            tasks = [asyncio.ensure_future(read(s, o)) for s, o in zip(subs, reads, strict=True)]
            await asyncio.sleep(0)  # every reader is waiting before the publisher starts
            ready.set()
            await asyncio.gather(*tasks)

        asyncio.run(main())

    loop_thread = threading.Thread(target=run_loop)
    loop_thread.start()
    ready.wait(JOIN_TIMEOUT)
    return reads, lambda: loop_thread.join(JOIN_TIMEOUT)


def run_delivery(
    subscribers: int, reader: str, events: int, repeats: int, *, lossless: bool
) -> DeliveryResult:
    """Publisher and reader throughput with ``subscribers`` reading everything.

    Queues have the default size. ``lossless`` holds the publisher back
    (outside the hub) so that no reader falls ``WINDOW`` events behind:
    every subscriber gets every event, and delivered/s is the rate the whole
    pipeline sustains. Otherwise the publisher runs flat out and readers that
    cannot keep up show drops.
    """
    published: list[float] = []
    delivered: list[float] = []
    totals: list[float] = []
    drops: list[int] = []
    read: list[int] = []
    for r in range(repeats + 1):
        hub = Hub()
        subs = [hub.subscribe(maxsize=DEFAULT_MAXSIZE) for _ in range(subscribers)]
        reads, join = _start_readers(subs, reader)

        def behind(reads: list[_Reads] = reads, hub: Hub = hub) -> int:
            return hub.seq - min(x.count + x.dropped for x in reads)

        gc.collect()
        t0 = time.perf_counter()
        seconds = _publish(hub, events, behind if lossless else None)
        hub.close()  # readers finish what is queued, then stop
        join()
        if not r:
            continue
        slowest = min(reads, key=lambda x: x.count / max(x.end - t0, 1e-9))
        published.append(events / seconds)
        delivered.append(slowest.count / (slowest.end - t0))
        totals.append(sum(x.count for x in reads) / (max(x.end for x in reads) - t0))
        drops.append(sum(x.dropped for x in reads))
        read.append(sum(x.count for x in reads))
    mid = sorted(range(len(delivered)), key=delivered.__getitem__)[len(delivered) // 2]
    return DeliveryResult(
        subscribers=subscribers,
        reader=reader,
        lossless=lossless,
        published=_throughput(events, published),
        delivered=_throughput(events, delivered),
        read=read[mid],
        dropped=drops[mid],
        delivered_total_per_s=totals[mid],
    )


def run_latency(subscribers: int, events: int, rate: float) -> LatencyResult:
    """Fan-out latency from a paced publisher thread to asyncio subscribers."""
    hub = Hub()
    subs = [hub.subscribe(topics={"metrics"}) for _ in range(subscribers)]
    samples: list[list[int]] = [[] for _ in subs]
    dropped = [0] * subscribers
    ready = threading.Event()
    clock = time.perf_counter_ns

    def run_loop() -> None:
        async def read(k: int) -> None:
            out = samples[k]
            async for ev in subs[k]:
                now = clock()
                assert isinstance(ev, MetricsSnapshot)
                out.append(now - int(ev.values["t"]))
                dropped[k] += ev.dropped

        async def main() -> None:
            tasks = [asyncio.ensure_future(read(k)) for k in range(subscribers)]
            await asyncio.sleep(0)
            ready.set()
            await asyncio.gather(*tasks)

        asyncio.run(main())

    loop_thread = threading.Thread(target=run_loop)
    loop_thread.start()
    ready.wait(JOIN_TIMEOUT)
    interval = 1.0 / rate
    publish = hub.publish_metrics
    start = time.perf_counter()
    for i in range(events):
        # Pace against the schedule, not the previous event: sleep overshoot does not accumulate.
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        publish({"t": clock()})
    achieved = events / (time.perf_counter() - start)
    hub.close()  # the readers take what is queued, then stop
    loop_thread.join(JOIN_TIMEOUT)
    ms = [ns / 1e6 for s in samples for ns in s]
    return LatencyResult(
        subscribers=subscribers,
        events=events,
        rate_per_s=achieved,
        deliveries=len(ms),
        dropped=sum(dropped),
        p50_ms=percentile(ms, 50),
        p99_ms=percentile(ms, 99),
        max_ms=max(ms),
    )


STORE_MODES = ("none", "hub", "thread", "asyncio")


def run_store(writes: int, repeats: int) -> StoreResult:
    """``Store.upsert`` per second without a hub, with one, and with one and a reader."""

    def once(mode: str) -> float:
        store = Store()
        join: Callable[[], None] = lambda: None  # noqa: E731
        hub = None
        if mode != "none":
            hub = Hub()
            hub.attach(store)
            if mode != "hub":
                _, join = _start_readers([hub.subscribe()], mode)
        items = [_item(i) for i in range(writes)]
        gc.collect()
        t0 = time.perf_counter()
        for it in items:
            store.upsert(it)
        seconds = time.perf_counter() - t0
        if hub is not None:
            hub.close()
        join()
        return writes / seconds

    runs: dict[str, list[float]] = {m: [] for m in STORE_MODES}
    for r in range(repeats + 1):
        for mode in STORE_MODES:  # interleaved, so drifting machine load hits every mode alike
            rate = once(mode)
            if r:
                runs[mode].append(rate)
    med = {m: statistics.median(v) for m, v in runs.items()}
    return StoreResult(writes, med["none"], med["hub"], med["thread"], med["asyncio"])


# --------------------------------------------------------------------------- targets


def evaluate_targets(
    publish: Sequence[PublishResult],
    delivery: Sequence[DeliveryResult],
    latency: Sequence[LatencyResult],
) -> list[TargetResult]:
    """PASS/MISS for each target; N/A when the case a target needs was not measured."""
    zero = next((p for p in publish if p.subscribers == 0), None)
    v = zero.published.per_s if zero else None
    out = [
        TargetResult(
            f"publish >= {TARGET_PUBLISH_PER_S:,} events/s, no subscribers",
            v,
            "events/s",
            _status(v, TARGET_PUBLISH_PER_S, at_least=True),
        )
    ]
    for d in delivery:
        if d.subscribers == TARGET_DELIVERED_SUBSCRIBERS and d.lossless:
            v = d.delivered.per_s
            out.append(
                TargetResult(
                    f"delivered >= {TARGET_DELIVERED_PER_S:,} events/s to each of "
                    f"{d.subscribers} {d.reader} subscribers, none lost",
                    v,
                    "events/s",
                    _status(v, TARGET_DELIVERED_PER_S, at_least=True),
                )
            )
    lat = next((x for x in latency if x.subscribers == TARGET_LATENCY_SUBSCRIBERS), None)
    v = lat.p99_ms if lat else None
    out.append(
        TargetResult(
            f"fan-out p99 < {TARGET_P99_MS:g} ms to {TARGET_LATENCY_SUBSCRIBERS} asyncio "
            "subscribers",
            v,
            "ms",
            "N/A" if v is None else ("PASS" if v < TARGET_P99_MS else "MISS"),
        )
    )
    return out


# --------------------------------------------------------------------------- report


def markdown(
    publish: Sequence[PublishResult],
    delivery: Sequence[DeliveryResult],
    latency: Sequence[LatencyResult],
    store: StoreResult,
    targets: Sequence[TargetResult],
) -> str:
    """The markdown report: publish, delivery, latency, store and target tables."""
    lines = [
        "### Publish (one publisher thread, subscribers that never read)",
        "",
        "| subscribers | events/s (median) | best | ns/event |",
        "|---:|---:|---:|---:|",
    ]
    for p in publish:
        lines.append(
            f"| {p.subscribers} | {_fmt(p.published.per_s)} | {_fmt(p.published.best_per_s)} "
            f"| {_fmt(p.ns_per_event, 0)} |"
        )
    lines += [
        "",
        f"### Delivery (one publisher thread; subscribers read everything; queues of "
        f"{DEFAULT_MAXSIZE})",
        "",
        "| subscribers | readers | publisher | published/s | delivered/s (slowest) | best "
        "| reads/s (all) | dropped |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for d in delivery:
        lines.append(
            f"| {d.subscribers} | {d.reader} | {'paced to readers' if d.lossless else 'flat out'} "
            f"| {_fmt(d.published.per_s)} "
            f"| {_fmt(d.delivered.per_s)} | {_fmt(d.delivered.best_per_s)} "
            f"| {_fmt(d.delivered_total_per_s)} | {d.dropped:,} |"
        )
    lines += [
        "",
        "### Fan-out latency (paced publisher thread -> asyncio subscribers on one loop)",
        "",
        "| subscribers | events | rate/s | deliveries | dropped | p50 ms | p99 ms | max ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for x in latency:
        lines.append(
            f"| {x.subscribers} | {x.events:,} | {_fmt(x.rate_per_s, 0)} | {x.deliveries:,} "
            f"| {x.dropped} | {_fmt(x.p50_ms)} | {_fmt(x.p99_ms)} | {_fmt(x.max_ms)} |"
        )
    lines += [
        "",
        "### Store writes",
        "",
        "| writes | upserts/s, no hub | hub attached | + thread reader | + asyncio reader |",
        "|---:|---:|---:|---:|---:|",
        f"| {store.writes:,} | {_fmt(store.without_hub_per_s)} "
        f"| {_fmt(store.hub_no_reader_per_s)} | {_fmt(store.hub_thread_reader_per_s)} "
        f"| {_fmt(store.hub_asyncio_reader_per_s)} |",
    ]
    lines += ["", "### Targets", "", "| target | value | status |", "|---|---:|:---:|"]
    for t in targets:
        value = "-" if t.value is None else f"{_fmt(t.value, 3)} {t.unit}"
        lines.append(f"| {t.name} | {value} | {t.status} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def machine_info() -> dict[str, Any]:
    """Where and with what this run happened."""
    return {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "load_average_at_end": load_average(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "pydantic": _version("pydantic"),
        "switch_interval_s": sys.getswitchinterval(),
        "git_commit": git_commit(ROOT),
        "memstore_hub_source_sha256": source_digest(ROOT, "memstore_hub"),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (``--smoke`` changes the defaults, explicit flags win)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--smoke", action="store_true", help="tiny run: 2000 events, 100 paced, 1 timed run"
    )
    p.add_argument(
        "--out", type=Path, help=f"JSON output (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    p.add_argument("--repeats", type=int, help="timed runs per case (default 5, smoke 1)")
    p.add_argument("--events", type=int, help=f"events per publish run (default {EVENTS:,})")
    p.add_argument(
        "--latency-events",
        type=int,
        help=f"paced events per latency case (default {LATENCY_EVENTS:,})",
    )
    p.add_argument(
        "--rate", type=float, default=LATENCY_RATE, help=f"paced events/s (default {LATENCY_RATE})"
    )
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.smoke else 5
    if args.events is None:
        args.events = SMOKE_EVENTS if args.smoke else EVENTS
    args.delivery_events = min(args.events, SMOKE_EVENTS if args.smoke else DELIVERY_EVENTS)
    args.delivery_events_100 = min(args.events, SMOKE_EVENTS if args.smoke else DELIVERY_EVENTS_100)
    if args.latency_events is None:
        args.latency_events = SMOKE_LATENCY_EVENTS if args.smoke else LATENCY_EVENTS
    args.store_writes = SMOKE_STORE_WRITES if args.smoke else STORE_WRITES
    if args.out is None:
        tmp = Path(tempfile.gettempdir()) / "memstore-hub-smoke.json"
        args.out = tmp if args.smoke else DEFAULT_OUT
    if args.events < 1 or args.repeats < 1 or args.latency_events < 1 or args.rate <= 0:
        p.error("events, repeats and latency events must be >= 1; rate > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, write the JSON, print the report. Always 0."""
    args = parse_args(argv)
    load0 = load_average()
    publish = []
    for n in PUBLISH_SUBSCRIBERS:
        log(f"publish: {n} idle subscribers")
        publish.append(run_publish(n, args.events, args.repeats))
    delivery = []
    for lossless in (True, False):
        for n in DELIVERY_SUBSCRIBERS:
            events = args.delivery_events if n <= 10 else args.delivery_events_100
            for reader in ("asyncio", "thread"):
                if reader == "thread" and n > THREAD_SUBSCRIBERS_MAX:
                    continue
                log(f"delivery: {n} {reader} subscribers, {'lossless' if lossless else 'flood'}")
                delivery.append(run_delivery(n, reader, events, args.repeats, lossless=lossless))
    latency = []
    for n in LATENCY_SUBSCRIBERS:
        log(f"latency: {n} asyncio subscribers at {args.rate:g} events/s")
        latency.append(run_latency(n, args.latency_events, args.rate))
    log("store writes")
    store = run_store(args.store_writes, args.repeats)
    targets = evaluate_targets(publish, delivery, latency)
    payload = {
        "benchmark": "hub",
        "smoke": args.smoke,
        "config": {
            "events": args.events,
            "delivery_events": args.delivery_events,
            "delivery_events_100": args.delivery_events_100,
            "latency_events": args.latency_events,
            "latency_rate": args.rate,
            "repeats": args.repeats,
            "maxsize": DEFAULT_MAXSIZE,
            "store_writes": args.store_writes,
            "publish_subscribers": list(PUBLISH_SUBSCRIBERS),
            "delivery_subscribers": list(DELIVERY_SUBSCRIBERS),
            "latency_subscribers": list(LATENCY_SUBSCRIBERS),
        },
        "machine": {**machine_info(), "load_average_at_start": load0},
        "publish": [asdict(p) for p in publish],
        "delivery": [asdict(d) for d in delivery],
        "latency": [asdict(x) for x in latency],
        "store": asdict(store),
        "targets": [asdict(t) for t in targets],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    machine = payload["machine"]
    print(
        f"{args.events:,} events per publish run, {args.repeats} timed runs (median); "
        f"{machine['cpu_count']} CPUs ({machine['cpu_model']}); Python {machine['python']}; "
        f"load average {load0} at start, {machine['load_average_at_end']} at end.\n"
    )
    print(markdown(publish, delivery, latency, store, targets))
    print(f"\nJSON written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
