"""The hub: publication order, topics and partitions, bounded queues, resumption, stats, close.

Every check reads real subscriptions of a real hub; nothing is timed. A
subscriber that never reads is the fastest way to make a publisher "far
faster" than it, and a thread that reads while another floods checks the same
accounting under a real race.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from memstore import Item, Store
from memstore_hub import (
    GAP_EXPIRED,
    GAP_UNKNOWN,
    TOPIC_CHANGE,
    TOPIC_HIT,
    TOPIC_METRICS,
    TOPICS,
    Event,
    Hub,
    HubClosedError,
    ItemChanged,
    MetricsSnapshot,
    SearchHit,
    Subscription,
)

JOIN_TIMEOUT = 60.0
"""A hang guard for joins (never reached unless a wake-up is lost)."""


def _note(id: str, *tags: str, scope: str = "public") -> Item:
    return Item.model_validate(
        {"id": id, "kind": "note", "title": id, "tags": list(tags), "scope": scope}
    )


def _queued(sub: Subscription) -> list[Event]:
    """What ``sub`` holds right now, in order."""
    out: list[Event] = []
    while (ev := sub.get_nowait()) is not None:
        out.append(ev)
    return out


# ------------------------------------------------------------- publishing


def test_events_are_numbered_in_publication_order_across_topics() -> None:
    hub = Hub()
    sub = hub.subscribe()
    a = hub.publish_change("upsert", _note("a"))
    h = hub.publish_hit(["a"], "q")
    m = hub.publish_metrics({"search.total": 3})
    assert a is not None and h is not None
    assert [a.seq, h.seq, m.seq] == [1, 2, 3]
    assert hub.seq == 3
    got = _queued(sub)
    assert got == [a, h, m]
    assert [e.topic for e in got] == [TOPIC_CHANGE, TOPIC_HIT, TOPIC_METRICS]
    assert got[0] is a  # shared, not copied, when nothing was dropped


def test_publish_returns_the_stamped_event_and_refuses_to_publish_it_twice() -> None:
    hub = Hub()
    ev = SearchHit(item_ids=("a",), query="q", partition="")
    assert hub.publish(ev) is ev and ev.seq == 1
    with pytest.raises(ValueError, match="already published"):
        hub.publish(ev)


def test_subscribers_see_only_what_is_published_after_they_subscribe() -> None:
    hub = Hub()
    hub.publish_hit(["a"], "before")
    sub = hub.subscribe()
    assert sub.position == 1
    hub.publish_hit(["b"], "after")
    assert [e.query for e in _queued(sub)] == ["after"]  # type: ignore[attr-defined]


def test_change_events_carry_what_the_store_would_say() -> None:
    hub = Hub()
    sub = hub.subscribe()
    item = _note("n1", "tenant/alpha")
    up = hub.publish_change("upsert", item, lsn=(1700, 2))
    gone = hub.publish_change("delete", None, "n1", "note", previous=item)
    assert up == ItemChanged(
        op="upsert", id="n1", kind="note", item=item, lsn=(1700, 2), partition="alpha", seq=1
    )
    assert gone == ItemChanged(op="delete", id="n1", kind="note", partition="alpha", seq=2)
    assert _queued(sub) == [up, gone]


def test_a_delete_without_the_removed_item_goes_to_every_partition_subscriber_only() -> None:
    hub = Hub()
    everything, alpha = hub.subscribe(), hub.subscribe(partition="alpha")
    ev = hub.publish_change("delete", None, "n1", "note")
    assert ev is not None and ev.partition is None
    assert _queued(everything) == [ev]
    assert _queued(alpha) == []


def test_private_items_are_never_published() -> None:
    hub = Hub()
    sub = hub.subscribe()
    secret = _note("p", "tenant/alpha", "user:u1", scope="private")
    assert hub.publish_change("upsert", secret) is None
    assert hub.publish_change("delete", None, "p", "note", previous=secret) is None
    assert _queued(sub) == [] and hub.seq == 0


def test_publish_change_names_the_misuse() -> None:
    hub = Hub()
    with pytest.raises(ValueError, match="carries the stored item"):
        hub.publish_change("upsert", None, "a", "note")
    with pytest.raises(ValueError, match="pass the removed one as previous"):
        hub.publish_change("delete", _note("a"))
    with pytest.raises(ValueError, match="op must be"):
        hub.publish_change("merge", _note("a"))  # type: ignore[arg-type]


def test_empty_hits_are_no_event_and_misaligned_kinds_are_dropped() -> None:
    hub = Hub()
    assert hub.publish_hit([], "q") is None
    hit = hub.publish_hit(["a", "b"], "q", "note", ["note"])
    assert hit is not None and hit.kinds is None
    hit = hub.publish_hit(["a", "b"], "q", "", ["note", "event"])
    assert hit is not None and hit.kinds == ("note", "event")


def test_metrics_go_to_every_partition_subscribers_only_by_default() -> None:
    hub = Hub()
    ops, alpha = hub.subscribe(partition="*"), hub.subscribe(partition="alpha")
    values = {"search.total": 4.0}
    m = hub.publish_metrics(values)
    values["search.total"] = 5.0  # the event kept a copy
    assert _queued(ops) == [m] and m.values == {"search.total": 4.0}
    assert _queued(alpha) == []
    shown = hub.publish_metrics({"x": 1}, partition="alpha")
    assert _queued(alpha) == [shown]


# ------------------------------------------------------ topics, partitions


def test_topics_filter_and_unknown_topics_are_refused_with_the_valid_ones() -> None:
    hub = Hub()
    hits = hub.subscribe(topics={TOPIC_HIT})
    hub.publish_change("upsert", _note("a"))
    h = hub.publish_hit(["a"], "q")
    assert _queued(hits) == [h]
    with pytest.raises(ValueError, match=r"unknown topics \['hits'\]; choose from") as err:
        hub.subscribe(topics={"hits"})
    assert all(t in str(err.value) for t in TOPICS)


def test_partition_subscribers_see_their_partition_and_what_every_partition_sees() -> None:
    hub = Hub()
    alpha, beta, bare, every = (
        hub.subscribe(partition="alpha"),
        hub.subscribe(partition="beta"),
        hub.subscribe(partition=""),
        hub.subscribe(),
    )
    a = hub.publish_change("upsert", _note("a", "tenant/alpha"))
    b = hub.publish_change("upsert", _note("b", "tenant/beta"))
    shared = hub.publish_change("upsert", _note("s", "tenant/beta", "shared"))
    untagged = hub.publish_change("upsert", _note("u"))
    assert _queued(alpha) == [a, shared, untagged]
    assert _queued(beta) == [b, shared, untagged]
    assert _queued(bare) == [shared, untagged]
    assert _queued(every) == [a, b, shared, untagged]


# ----------------------------------------------------------- bounded queues


def test_a_slow_subscriber_loses_its_oldest_events_and_is_told_exactly_how_many() -> None:
    hub = Hub()
    slow, fast = hub.subscribe(maxsize=10), hub.subscribe(maxsize=1000)
    published = [hub.publish_hit([f"i{k}"], f"q{k}") for k in range(250)]

    got = _queued(slow)
    assert [e.seq for e in got] == list(range(241, 251))  # the newest ten
    assert [e.dropped for e in got] == [240] + [0] * 9
    assert _queued(fast) == published  # the other subscriber lost nothing
    assert published[240] is not None and published[240].dropped == 0  # a copy carries it

    stats = {s.id: s for s in hub.stats().per_subscriber}
    assert (stats[slow.id].received, stats[slow.id].read, stats[slow.id].dropped) == (250, 10, 240)
    assert stats[fast.id].dropped == 0 and hub.stats().dropped == 240

    more = [hub.publish_hit(["x"], f"late{k}") for k in range(3)]
    assert _queued(slow) == more  # nothing lost since: nothing to report


def test_drop_accounting_is_exact_while_a_reader_races_a_flooding_publisher() -> None:
    hub = Hub()
    total = 20_000
    sub = hub.subscribe(maxsize=16)
    got: list[Event] = []

    def read() -> None:
        for ev in sub:
            got.append(ev)

    reader = threading.Thread(daemon=True, target=read)
    reader.start()
    for k in range(total):
        hub.publish_hit(["x"], str(k))
    hub.close()  # the reader drains what is queued, then its loop ends
    reader.join(JOIN_TIMEOUT)
    assert not reader.is_alive()

    seqs = [e.seq for e in got]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    previous = 0
    for ev in got:  # every event says exactly how many were lost right before it
        assert ev.dropped == ev.seq - previous - 1
        previous = ev.seq
    assert seqs[-1] == total  # the newest event is never the one dropped
    assert len(got) + sum(e.dropped for e in got) == total


def test_maxsize_must_be_positive() -> None:
    with pytest.raises(ValueError, match="maxsize must be a whole number >= 1, got 0"):
        Hub().subscribe(maxsize=0)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"topics": TOPIC_HIT}, "topics must be a collection of topic names, not a string"),
        ({"topics": [1]}, "unknown topics"),
        ({"maxsize": "10"}, "maxsize must be a whole number >= 1, got '10'"),
        ({"maxsize": True}, "maxsize must be a whole number >= 1, got True"),
        ({"partition": 5}, "partition must be a string or None, got 5"),
        ({"after": "3"}, "after must be a whole number or None, got '3'"),
        ({"name": None}, "name must be a string, got None"),
        ({"topics": 5}, "topics must be a collection of topic names, got 5"),
        ({"topics": True}, "topics must be a collection of topic names, got True"),
        ({"topics": [["change"]]}, "topics must be topic names"),
        ({"maxsize": 10**30}, "maxsize must be a whole number >= 1"),
    ],
)
def test_subscribe_refuses_arguments_of_the_wrong_type(
    options: dict[str, object], words: str
) -> None:
    hub = Hub()
    with pytest.raises(ValueError, match=re.escape(words)):
        hub.subscribe(**options)  # type: ignore[arg-type]
    assert hub.stats().subscribers == 0


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"replay": "10"}, "replay must be a whole number >= 0, got '10'"),
        ({"replay": True}, "replay must be a whole number >= 0, got True"),
        ({"replay": 10**30}, "replay must be a whole number >= 0"),
        ({"epoch": 5}, "epoch must be a non-empty string or None, got 5"),
        ({"epoch": ""}, "epoch must be a non-empty string or None"),
        ({"epoch": "a\nevent: x"}, "epoch cannot hold a line break or NUL"),
        ({"epoch": "a\rb"}, "epoch cannot hold a line break or NUL"),
        ({"epoch": "a\x00b"}, "epoch cannot hold a line break or NUL"),
    ],
)
def test_a_hub_option_of_the_wrong_type_is_refused(options: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        Hub(**options)  # type: ignore[arg-type]


_WRONG_PUBLISH: list[tuple[str, Callable[[Hub], object], str]] = [
    ("hit ids text", lambda h: h.publish_hit("memory-1", "q"), "item_ids must be a list of ids"),
    ("hit ids int", lambda h: h.publish_hit(5, "q"), "item_ids must be a list of ids"),
    ("hit ids dict", lambda h: h.publish_hit({"m-1": 1}, "q"), "item_ids must be a list of ids"),
    ("hit kinds text", lambda h: h.publish_hit(["a"], "q", kinds="note"), "kinds must be a list"),
    ("hit query", lambda h: h.publish_hit(["a"], None), "query and kind must be strings"),
    ("hit partition", lambda h: h.publish_hit(["a"], "q", partition=["p"]), "partition must be"),
    ("metrics values", lambda h: h.publish_metrics([("a", 1.0)]), "values must be a mapping"),
    ("metrics partition", lambda h: h.publish_metrics({}, partition=5), "partition must be"),
    ("change item", lambda h: h.publish_change("upsert", "memory-1"), "item must be an Item"),
    ("change previous", lambda h: h.publish_change("delete", previous={}), "previous must be"),
    ("change id", lambda h: h.publish_change("delete", id=None), "id and kind must be strings"),
    ("publish", lambda h: h.publish({"topic": "change"}), "publish takes an event"),
    ("attach", lambda h: h.attach("store"), "attach takes a memstore.Store"),
    ("attach lsn_of", lambda h: h.attach(Store(), lsn_of="lsn"), "lsn_of must be a function"),
]


@pytest.mark.parametrize(
    ("call", "words"), [w[1:] for w in _WRONG_PUBLISH], ids=[w[0] for w in _WRONG_PUBLISH]
)
def test_a_publish_or_attach_with_a_wrong_argument_is_refused_and_delivers_nothing(
    call: Callable[[Hub], object], words: str
) -> None:
    hub = Hub()
    sub = hub.subscribe()
    with pytest.raises(ValueError, match=re.escape(words)):
        call(hub)
    assert hub.seq == 0 and sub.get_nowait() is None


# -------------------------------------------------------------- resumption


def test_resuming_replays_what_was_missed_then_follows_live() -> None:
    hub = Hub(replay=100)
    first = hub.subscribe(partition="alpha")
    hub.publish_change("upsert", _note("a1", "tenant/alpha"))
    hub.publish_change("upsert", _note("b1", "tenant/beta"))
    seen = _queued(first)
    first.close()
    hub.publish_change("upsert", _note("a2", "tenant/alpha"))
    hub.publish_change("upsert", _note("b2", "tenant/beta"))
    hub.publish_change("upsert", _note("s", "shared"))

    again = hub.subscribe(partition="alpha", after=seen[-1].seq)
    live = hub.publish_change("upsert", _note("a3", "tenant/alpha"))
    assert again.gap == ""
    got = _queued(again)
    assert [e.id for e in got] == ["a2", "s", "a3"]  # type: ignore[attr-defined]
    assert got[-1] is live


def test_resuming_from_the_head_replays_nothing_and_is_no_gap() -> None:
    hub = Hub(replay=0)
    hub.publish_hit(["a"], "q")
    sub = hub.subscribe(after=1)
    assert sub.gap == "" and _queued(sub) == []


def test_resuming_beyond_the_replay_buffer_is_a_gap_and_replays_nothing() -> None:
    hub = Hub(replay=5)
    for k in range(20):
        hub.publish_hit(["a"], str(k))
    ok = hub.subscribe(after=15)  # 16..20 are still buffered
    assert ok.gap == "" and [e.seq for e in _queued(ok)] == [16, 17, 18, 19, 20]
    late = hub.subscribe(after=14)  # 15 is gone
    assert late.gap == GAP_EXPIRED and _queued(late) == [] and late.position == 20
    assert hub.subscribe(after=99).gap == GAP_UNKNOWN
    assert hub.subscribe(after=-1).gap == GAP_UNKNOWN


def test_a_replay_larger_than_the_queue_is_accounted_as_dropped() -> None:
    hub = Hub(replay=100)
    for k in range(50):
        hub.publish_hit(["a"], str(k))
    sub = hub.subscribe(after=0, maxsize=5)
    got = _queued(sub)
    assert [e.seq for e in got] == [46, 47, 48, 49, 50] and got[0].dropped == 45


# --------------------------------------------------------- stats and close


def test_stats_count_subscribers_publications_and_drops() -> None:
    hub = Hub(replay=3)
    a = hub.subscribe(name="ui", partition="alpha", topics={TOPIC_HIT}, maxsize=2)
    b = hub.subscribe()
    for k in range(5):
        hub.publish_hit(["x"], str(k), partition="alpha")
    b.get_nowait()
    stats = hub.stats()
    assert (stats.subscribers, stats.published, stats.replay_buffered) == (2, 5, 3)
    sa, sb = stats.per_subscriber
    assert (sa.id, sa.name, sa.partition, sa.topics, sa.maxsize) == (
        a.id,
        "ui",
        "alpha",
        ("hit",),
        2,
    )
    assert (sa.received, sa.read, sa.queued, sa.dropped) == (5, 0, 2, 3)
    assert (sb.received, sb.read, sb.queued, sb.dropped) == (5, 1, 4, 0)
    b.close()
    assert hub.stats().subscribers == 1


def test_close_ends_every_subscription_after_what_is_queued_and_stops_publishing() -> None:
    hub = Hub()
    sub = hub.subscribe()
    hub.publish_hit(["a"], "q")
    hub.close()
    hub.close()  # idempotent
    assert hub.closed and sub.closed
    assert [e.query for e in sub] == ["q"]  # type: ignore[attr-defined]
    late = hub.publish_hit(["b"], "late")
    assert late is not None and late.seq == 0
    with pytest.raises(HubClosedError, match="closed"):
        hub.subscribe()


def test_closing_a_subscription_discards_its_queue_and_unsubscribes() -> None:
    hub = Hub()
    with hub.subscribe() as sub:
        hub.publish_hit(["a"], "q")
    assert sub.closed and list(sub) == [] and hub.stats().subscribers == 0
    sub.close()  # idempotent
    hub.publish_hit(["a"], "q")
    assert sub.get_nowait() is None


def test_get_times_out_with_none_and_a_closed_subscription_unblocks_a_reader() -> None:
    hub = Hub()
    sub = hub.subscribe()
    assert sub.get(timeout=0) is None and sub.get(timeout=0.01) is None and not sub.closed
    results: list[Event | None] = []
    reader = threading.Thread(daemon=True, target=lambda: results.append(sub.get()))
    reader.start()
    sub.close()
    reader.join(JOIN_TIMEOUT)
    assert not reader.is_alive() and results == [None]


def test_a_blocked_reader_is_woken_by_a_publisher_in_another_thread() -> None:
    hub = Hub()
    sub = hub.subscribe()
    got: list[Event] = []
    reader = threading.Thread(daemon=True, target=lambda: got.extend(itertools.islice(sub, 3)))
    reader.start()
    for k in range(3):
        hub.publish_metrics({"k": k})
    reader.join(JOIN_TIMEOUT)
    assert not reader.is_alive()
    assert [e.values["k"] for e in got if isinstance(e, MetricsSnapshot)] == [0, 1, 2]


# ------------------------------------------------------------- the package


def test_the_front_door_exports_what_it_lists_and_errors_are_builtins() -> None:
    import memstore_hub

    assert all(hasattr(memstore_hub, name) for name in memstore_hub.__all__)
    assert issubclass(HubClosedError, RuntimeError)
    from memstore import MemstoreError

    assert issubclass(HubClosedError, MemstoreError)


def test_the_hub_needs_no_web_framework_and_no_vector_index() -> None:
    code = (
        "import sys, memstore_hub, memstore_hub.sse; "
        "print(' '.join(sorted(m for m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    for banned in ("starlette", "fastapi", "uvicorn", "memstore.protocol", "memstore_index"):
        assert banned not in out, banned


# ------------------------------------------------- forgotten subscriptions


def test_a_subscription_dropped_without_close_is_unsubscribed_and_freed() -> None:
    """``for e in hub.subscribe(): break`` and friends: a subscription nobody
    can read any more must not stay subscribed, filling its queue for ever
    and costing every publish (before, the hub kept each one alive)."""
    import gc
    import weakref

    hub = Hub()
    kept = hub.subscribe(topics={"metrics"})
    gone = [weakref.ref(hub.subscribe(maxsize=10)) for _ in range(200)]
    for partition in (None, "alpha"):
        sub = hub.subscribe(partition=partition)
        hub.publish_hit(["n1"], "q", partition="alpha")
        next(iter(sub))  # read one, then walk away without close()
    del sub
    gc.collect()
    for k in range(20):
        hub.publish_metrics({"k": k})
    assert all(ref() is None for ref in gone), "the hub kept a forgotten subscription alive"
    stats = hub.stats()
    assert stats.subscribers == 1 and [s.id for s in stats.per_subscriber] == [kept.id]
    assert [_k(e) for e in iter(kept.get_nowait, None)] == list(range(20))


def test_a_reader_still_waiting_keeps_its_subscription_even_if_nothing_else_does() -> None:
    """A consumer task nobody holds a reference to (fire and forget), and a
    thread reader, keep their subscription: they can still read it."""
    import asyncio
    import gc

    hub = Hub()
    from_thread: list[float] = []

    def read_two() -> None:
        from_thread.extend(_k(e) for e in itertools.islice(hub.subscribe(), 2))

    reader = threading.Thread(target=read_two, daemon=True)

    async def main() -> list[float]:
        got: list[float] = []
        done = asyncio.Event()

        async def consume() -> None:
            async for e in hub.subscribe():
                got.append(_k(e))
                if len(got) == 2:
                    done.set()
                    return

        asyncio.ensure_future(consume())  # noqa: RUF006 (on purpose: only the hub can reach it)
        await asyncio.sleep(0)
        reader.start()
        while hub.stats().subscribers < 2:
            await asyncio.sleep(0.001)
        gc.collect()
        await asyncio.to_thread(lambda: [hub.publish_metrics({"k": k}) for k in range(2)])
        await asyncio.wait_for(done.wait(), JOIN_TIMEOUT)  # a hang guard
        return got

    assert asyncio.run(main()) == [0, 1]
    reader.join(JOIN_TIMEOUT)
    assert from_thread == [0, 1]


def _k(event: Event | None) -> float:
    assert isinstance(event, MetricsSnapshot)
    return event.values["k"]


# --------------------------------------------------------- reader timeouts


def test_an_infinite_timeout_waits_as_none_does_in_a_thread_and_on_a_loop() -> None:
    """``timeout=math.inf`` (or any number past what a thread can wait) waits
    for the next event; before, ``get`` raised OverflowError at once."""
    import asyncio
    import math

    hub = Hub()
    sub = hub.subscribe()
    got: list[Event | None] = []
    reader = threading.Thread(daemon=True, target=lambda: got.append(sub.get(timeout=math.inf)))
    reader.start()
    hub.publish_metrics({"k": 1})
    reader.join(JOIN_TIMEOUT)
    assert not reader.is_alive() and [_k(e) for e in got] == [1]

    async def follow() -> Event | None:
        waiting = asyncio.ensure_future(sub.aget(timeout=1e300))
        await asyncio.sleep(0)  # waiting on the loop now
        await asyncio.to_thread(hub.publish_metrics, {"k": 2})
        return await asyncio.wait_for(waiting, JOIN_TIMEOUT)  # a hang guard

    assert _k(asyncio.run(follow())) == 2


@pytest.mark.parametrize("timeout", [float("nan"), "1", True, [1]])
def test_a_timeout_that_is_not_a_number_of_seconds_is_refused_by_get_and_aget(
    timeout: object,
) -> None:
    """NaN made ``aget`` wait for ever and ``get`` return at once; text raised a
    TypeError from deep inside. Each is now one ValueError, and the
    subscription still works."""
    import asyncio

    hub = Hub()
    sub = hub.subscribe()
    with pytest.raises(ValueError, match="timeout must be a number of seconds or None"):
        sub.get(timeout=timeout)  # type: ignore[arg-type]

    async def aget() -> Event | None:
        return await sub.aget(timeout=timeout)  # type: ignore[arg-type]

    with pytest.raises(ValueError, match="timeout must be a number of seconds or None"):
        asyncio.run(asyncio.wait_for(aget(), JOIN_TIMEOUT))
    hub.publish_metrics({"k": 2})
    assert _k(sub.get(timeout=-1)) == 2 and sub.get(timeout=-1) is None
