"""Concurrency: the Store under several writer, reader and batch threads.

Every thread runs a bounded, seeded sequence of operations (never a
wall-clock loop) on ids drawn from a small shared pool, so the threads keep
colliding on the same items. A before-commit listener records every committed
write group in commit order (it runs with the store's lock held, once per
group, and never sees a rolled-back group); that log is the reference the final
state, the after-commit listeners and the change hook are checked against.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import itertools
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from memstore import (
    VALID_THOUGHT_LINK_RELATIONS,
    Change,
    Config,
    InvalidItemError,
    Item,
    ItemNotFoundError,
    Store,
    ThoughtLink,
)

POOL = [f"t{i}" for i in range(10)]
OWNERS = ("u1", "u2")
WORDS = (
    "payment api timeout ledger deploy deployment retries queue latency database pool "
    "cache auth token incident rollback canary café naïve Привет 数据库 🚀 q3 9:30"
).split()
QUERIES = (
    "payment",
    "paymnet timeout",
    "ledger pool",
    "deploying",
    "paymentapi",
    "latency queue",
    "cafe",
    "数据库",
    "q3 plan",
    "auth token expiry",
)
ROLLBACK_MARKER = "xqzvjwk"
"""A word only items written by groups destined to roll back carry."""
BASE_TIME = _dt.datetime(2024, 1, 1, tzinfo=_dt.UTC)
JOIN_TIMEOUT = 60.0


class TickClock:
    """A clock that moves one microsecond per reading (thread-safe, never repeats)."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> _dt.datetime:
        return BASE_TIME + _dt.timedelta(microseconds=next(self._ticks))


class Rollback(Exception):
    """Raised inside a batch on purpose to roll it back."""


@dataclass
class CommitLog:
    """Every committed change in commit order, recorded by a before-commit listener."""

    changes: list[Change] = field(default_factory=list)
    dumps: list[dict[str, Any] | None] = field(default_factory=list)
    """Each change's item as it was at commit time (``None`` for a delete)."""
    groups: int = 0

    def __call__(self, group: Sequence[Change]) -> None:
        self.groups += 1
        self.changes.extend(group)
        self.dumps.extend(c.item.model_dump() if c.item is not None else None for c in group)


@contextlib.contextmanager
def fast_switching() -> Iterator[None]:
    """Make the interpreter switch threads often, so interleavings vary more."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(targets: Sequence[Callable[[], None]], errors: list[BaseException]) -> None:
    """Run each target in its own daemon thread, recording what escapes, and join them."""

    def guard(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # every escape is a finding
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guard(t), daemon=True) for t in targets]
    with fast_switching():
        for t in threads:
            t.start()
        deadline = time.monotonic() + JOIN_TIMEOUT
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    assert not [t for t in threads if t.is_alive()], "threads still running: a deadlock?"


def make_item(rng: random.Random, id: str, *, marker: str = "", dedup: bool = False) -> Item:
    """A valid item with random text, kind and scope."""
    title = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
    content = " ".join(rng.choices(WORDS, k=rng.randint(0, 5)))
    if marker:
        content = f"{content} {marker}"
    if dedup:
        kind = rng.choice(("watch_item", "hypothesis"))
    else:
        kind = rng.choice(("note", "event", "watch_item", "note", "hypothesis", "stable_fact"))
    private = rng.random() < 0.2
    return Item(
        id=id,
        kind=kind,
        title=title,
        content=content,
        confidence="high" if kind == "stable_fact" else "",
        event_date="2024-03-01" if kind == "event" else "",
        scope="private" if private else "public",
        tags=[f"user:{rng.choice(OWNERS)}"] if private else [],
        evidence_refs=[f"cell:{rng.choice(POOL)}"] if rng.random() < 0.3 else [],
    )


def random_link(rng: random.Random, from_id: str) -> ThoughtLink:
    to_id = rng.choice([p for p in POOL if p != from_id])
    return ThoughtLink(
        to_id=to_id,
        relation=rng.choice(VALID_THOUGHT_LINK_RELATIONS),
        weight=rng.choice((0.2, 0.5, 0.8, 1.0)),
    )


def touch(it: Item) -> bool:
    it.content = f"{it.content} revised"
    return True


def write_op(store: Store, rng: random.Random, *, marker: str = "") -> int:
    """One random write on a pool id; returns the number of changes it committed.

    Only operations whose change count the caller can tell from the return
    value are used here (``expire`` and ``refute`` are not).
    """
    id = rng.choice(POOL)
    r = rng.random()
    try:
        if r < 0.35:
            store.upsert(make_item(rng, id, marker=marker))
            return 1
        if r < 0.5:
            store.upsert_dedup(
                make_item(rng, id if rng.random() < 0.7 else "", marker=marker, dedup=True)
            )
            return 1
    except InvalidItemError:
        # The items are valid, so this is the lineage rule: a retired item made
        # current again with the supersedes it kept would fork a chain another
        # item took over since. Refused, it changed nothing.
        return 0
    if r < 0.65:
        return int(store.delete(id))
    if r < 0.85:
        return int(store.add_link(id, random_link(rng, id)))
    return int(store.mutate(id, touch))


def any_write_op(store: Store, rng: random.Random) -> None:
    """:func:`write_op` plus the operations whose change count is not observable."""
    id = rng.choice(POOL)
    r = rng.random()
    if r < 0.7:
        write_op(store, rng)
    elif r < 0.78:
        store.expire(id)
    elif r < 0.84:
        store.refute(id, "contradicted by a later measurement", [f"cell:{rng.choice(POOL)}"])
    elif r < 0.9:
        store.mark_superseded(id, rng.choice(POOL))
    elif r < 0.96:
        new_id = rng.choice([p for p in POOL if p != id])
        # id was not there, or another item already supersedes it: nothing changed
        with contextlib.suppress(ItemNotFoundError, InvalidItemError):
            store.supersede(id, make_item(rng, new_id))
    else:
        store.sweep_expired()


def batch_group(store: Store, rng: random.Random) -> tuple[int, bool]:
    """One ``with store.batch()`` group; returns (changes it made, whether it committed).

    A group destined to roll back marks every item it writes with
    :data:`ROLLBACK_MARKER`; a nested savepoint that raises is always undone.
    """
    roll_back = rng.random() < 0.35
    marker = ROLLBACK_MARKER if roll_back else ""
    n = 0
    try:
        with store.batch():
            for _ in range(rng.randint(2, 4)):
                n += write_op(store, rng, marker=marker)
            if rng.random() < 0.3:
                try:
                    with store.batch():
                        write_op(store, rng, marker=ROLLBACK_MARKER)
                        store.upsert(make_item(rng, rng.choice(POOL), marker=ROLLBACK_MARKER))
                        raise Rollback
                except (Rollback, InvalidItemError):  # a refused upsert undoes the savepoint too
                    pass
                n += write_op(store, rng, marker=marker)
            if roll_back:
                raise Rollback
    except Rollback:
        return 0, False
    return n, True


def check_visible(store: Store, items: Sequence[Item], *, owner: str = "") -> None:
    """Reader-side invariants: no one else's private item, no rolled-back text."""
    for it in items:
        assert it.scope == "public" or (owner and f"user:{owner}" in it.tags), it
        assert ROLLBACK_MARKER not in it.content, it


def read_op(store: Store, rng: random.Random) -> None:
    r = rng.random()
    if r < 0.3:
        kind = rng.choice(("", "note", "watch_item"))
        hits = store.keyword_search(rng.choice(QUERIES), kind=kind, limit=50)
        check_visible(store, hits)
        assert all(h.status == "active" for h in hits)
        assert not kind or all(h.kind == kind for h in hits)
    elif r < 0.45:
        hits, _ = store.keyword_search_scored(rng.choice(QUERIES))
        check_visible(store, hits)
    elif r < 0.6:
        assert store.keyword_search(ROLLBACK_MARKER, limit=100) == []
        owner = rng.choice(OWNERS)
        assert store.keyword_search_for_user(owner, ROLLBACK_MARKER, limit=100) == []
    elif r < 0.75:
        out = store.traverse(rng.sample(POOL, 3))
        check_visible(store, out)
        assert all(it.status == "active" for it in out)
    elif r < 0.9:
        owner = rng.choice(OWNERS)
        check_visible(store, store.for_user(owner), owner=owner)
    else:
        check_visible(store, store.items())
        assert store.count_active() >= 0


def replay(log: CommitLog) -> dict[str, dict[str, Any]]:
    """The state the committed changes, applied in commit order, leave (items as dumps)."""
    state: dict[str, dict[str, Any]] = {}
    for c, dump in zip(log.changes, log.dumps, strict=True):
        if c.op == "delete":
            state.pop(c.id, None)
        else:
            assert dump is not None
            state[c.id] = dump
    return state


def assert_matches_log(store: Store, log: CommitLog) -> None:
    """The store holds exactly what replaying the commit log gives, and search finds it."""
    store._check()
    expected = replay(log)
    assert len(store) == len(expected)
    for id, want in expected.items():
        got = store.get(id)
        assert got is not None, f"{id} was left present by its last committed write"
        assert got.model_dump() == want, id
        assert ROLLBACK_MARKER not in got.content, f"{id} holds a rolled-back write"
    for id in POOL:
        if id not in expected:
            assert store.get(id) is None, f"{id} was deleted by its last committed write"
    for id, want in expected.items():
        if want["status"] == "active" and want["scope"] == "public":
            found = store.keyword_search(want["title"], kind=want["kind"], limit=1000)
            assert id in [it.id for it in found], (id, want["title"])
        else:
            assert not store.indexed(id), id


SEED = 20240601
WRITER_OPS = 1500
READER_OPS = 1000
BATCH_GROUPS = 300


def test_concurrent_writers_readers_and_batches_keep_every_index_consistent() -> None:
    clock = TickClock()
    store = Store(Config(clock=clock))
    log = CommitLog()
    store.add_change_listener(log, before_commit=True)
    errors: list[BaseException] = []
    committed_groups: list[bool] = []

    def writer(k: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(SEED + k)
            for _ in range(WRITER_OPS):
                any_write_op(store, rng)

        return run

    def reader(k: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(SEED + 100 + k)
            for _ in range(READER_OPS):
                read_op(store, rng)

        return run

    def batcher() -> None:
        rng = random.Random(SEED + 200)
        for _ in range(BATCH_GROUPS):
            committed_groups.append(batch_group(store, rng)[1])

    run_threads([*(writer(k) for k in range(4)), reader(0), reader(1), batcher], errors)
    assert errors == [], errors
    assert True in committed_groups and False in committed_groups
    assert_matches_log(store, log)
    assert all(ROLLBACK_MARKER not in c.item.content for c in log.changes if c.item is not None)


def test_deliveries_arrive_once_per_committed_change_in_commit_order() -> None:
    clock = TickClock()
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def counter(name: str) -> Callable[[], None]:
        def bump() -> None:
            with lock:
                counts[name] += 1

        return bump

    store = Store(
        Config(
            clock=clock,
            dirty=counter("dirty"),
            signal=counter("signal"),
            published=counter("published"),
        )
    )
    log = CommitLog()
    store.add_change_listener(log, before_commit=True)
    delivered: list[tuple[str, Item | None, str, str]] = []
    delivered_2: list[tuple[str, Item | None, str, str]] = []
    hooked: list[tuple[str, Item | None, str, str]] = []

    def first(op: str, it: Item | None, id: str, kind: str) -> None:
        delivered.append((op, it, id, kind))
        time.sleep(0)  # a listener doing I/O: other threads run mid-delivery

    store.add_change_listener(first)
    store.add_change_listener(lambda op, it, id, kind: delivered_2.append((op, it, id, kind)))
    store.set_change_hook(lambda op, it, id, kind: hooked.append((op, it, id, kind)))
    writes: list[int] = []
    errors: list[BaseException] = []

    def writer(k: int) -> Callable[[], None]:
        def run() -> None:
            rng = random.Random(SEED + 300 + k)
            n = 0
            for _ in range(WRITER_OPS):
                n += write_op(store, rng)
            writes.append(n)

        return run

    def batcher() -> None:
        rng = random.Random(SEED + 400)
        n = 0
        for _ in range(BATCH_GROUPS):
            n += batch_group(store, rng)[0]
        writes.append(n)

    def reader() -> None:
        rng = random.Random(SEED + 500)
        for _ in range(READER_OPS):
            read_op(store, rng)

    run_threads([*(writer(k) for k in range(4)), batcher, reader], errors)
    assert errors == [], errors
    total = sum(writes)
    assert len(log.changes) == total, "the commit log disagrees with the writers' own count"
    assert counts["dirty"] == counts["signal"] == total

    # Every listener got every committed change exactly once, in commit order.
    committed = [(c.op, c.item, c.id, c.kind) for c in log.changes]
    for seen in (delivered, delivered_2):
        assert len(seen) == total
        for got, want in zip(seen, committed, strict=True):
            assert got[0] == want[0] and got[2:] == want[2:]
            assert got[1] is want[1], "a delivery carries another change's item"

    # The change hook got exactly the published ones, and a published item made
    # private as its delete, in the same order.
    def withdraws(c: Change) -> bool:
        private = c.item is not None and c.item.scope == "private"
        return private and c.previous is not None and c.previous.scope == "public"

    published = [
        (c.op, c.item, c.id, c.kind) if c.published else ("delete", None, c.id, c.kind)
        for c in log.changes
        if c.published or withdraws(c)
    ]
    assert len(hooked) == len(published)
    assert counts["published"] == sum(c.published for c in log.changes)
    assert all(
        g[0] == w[0] and g[1] is w[1] and g[2] == w[2]
        for g, w in zip(hooked, published, strict=True)
    )
    assert all(c.item is None or c.item.scope == "public" for c in log.changes if c.published)

    # Per id, what is delivered never goes back in time.
    for seen in (delivered, hooked):
        last: dict[str, _dt.datetime] = {}
        for op, it, id, _ in seen:
            if op == "upsert":
                assert it is not None and it.updated_at is not None
                assert it.updated_at >= last.get(id, it.updated_at), id
                last[id] = it.updated_at
    assert_matches_log(store, log)


def test_a_listener_that_writes_still_sees_each_id_in_commit_order() -> None:
    """A listener may write to the store; the deliveries per id must keep commit order.

    The batch commits ``x`` then ``y``. While ``x`` is being delivered, the
    listener writes ``y`` again: that write commits after the batch, so ``y``
    ends holding the listener's version and a follower replaying the
    deliveries must end there too.
    """
    store = Store()
    seen: list[tuple[str, str]] = []

    def listener(op: str, item: Item | None, id: str, kind: str) -> None:
        assert item is not None
        seen.append((id, item.title))
        if id == "x" and item.title == "first":
            store.upsert(Item(id="y", kind="note", title="written by the listener"))

    store.add_change_listener(listener)
    with store.batch():
        store.upsert(Item(id="x", kind="note", title="first"))
        store.upsert(Item(id="y", kind="note", title="written by the batch"))
    final = store.get("y")
    assert final is not None and final.title == "written by the listener"
    assert [t for id, t in seen if id == "y"] == ["written by the batch", "written by the listener"]


def test_a_raising_listener_does_not_lose_deliveries_to_the_others() -> None:
    """One failing listener must not cost the other listeners committed changes."""
    store = Store()
    seen: list[str] = []

    def failing(op: str, item: Item | None, id: str, kind: str) -> None:
        if id == "x":
            raise RuntimeError("journal unavailable")

    store.add_change_listener(failing)
    store.add_change_listener(lambda op, item, id, kind: seen.append(id))
    try:
        with store.batch():
            store.upsert(Item(id="x", kind="note", title="first"))
            store.upsert(Item(id="y", kind="note", title="second"))
    except RuntimeError:
        pass  # whether the failure propagates is not what this test is about
    store.upsert(Item(id="z", kind="note", title="third"))
    assert len(store) == 3
    assert sorted(seen) == ["x", "y", "z"]


def hold_lock_and_upsert(store: Store) -> None:
    """A read-modify-write under the host-held lock."""
    assert "a" in {it.id for it in store.items_locked()}
    store.upsert(Item(id="b", kind="note", title="from thread b"))


def hold_lock_and_forget(store: Store) -> None:
    """``forget_locked`` exactly as documented: lock held, publish after release."""
    gone = store.forget_locked(lambda it: it.id == "old")
    assert [r.id for r in gone] == ["old"]


@pytest.mark.parametrize("host_write", [hold_lock_and_upsert, hold_lock_and_forget])
def test_a_writer_holding_the_store_lock_does_not_deadlock_with_a_publisher(
    host_write: Callable[[Store], None],
) -> None:
    """A host may hold ``store.lock`` (``*_locked`` methods require it) and write meanwhile.

    Thread C is delivering a change to a slow listener. Thread A commits a
    write and waits for its turn to publish. Host thread B takes the store's
    lock and writes (an upsert, or ``forget_locked`` as documented). When C
    finishes, A takes the publish turn and waits for the store's lock, which B
    holds while it waits for the publish turn: neither can move. The
    interleaving is forced with events and sleeps, so it does not depend on
    scheduling luck.
    """
    store = Store()
    store.upsert(Item(id="old", kind="note", title="to be forgotten"))
    release_listener = threading.Event()
    in_listener = threading.Event()

    def slow_listener(op: str, item: Item | None, id: str, kind: str) -> None:
        if id == "slow":
            in_listener.set()
            release_listener.wait(5.0)

    store.add_change_listener(slow_listener)
    errors: list[BaseException] = []

    def publisher_c() -> None:  # delivers "slow" and stalls inside the listener
        store.upsert(Item(id="slow", kind="note", title="a slow journal write"))

    def writer_a() -> None:  # commits, then waits to publish behind C
        store.upsert(Item(id="a", kind="note", title="from thread a"))

    def host_b() -> None:  # holds the store lock across its write
        store.lock.acquire()
        try:
            release_listener.set()
            time.sleep(0.2)  # A now owns the publish turn and waits for the store lock
            host_write(store)
        finally:
            store.lock.release()

    threads: list[threading.Thread] = []

    def start(fn: Callable[[], None]) -> None:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=run, daemon=True)
        threads.append(t)
        t.start()

    start(publisher_c)
    assert in_listener.wait(5.0)
    start(writer_a)
    time.sleep(0.2)  # A has committed and queued behind C's delivery
    start(host_b)
    deadline = time.monotonic() + 3.0
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t for t in threads if t.is_alive()]
    assert not stuck, (
        "deadlock: the store lock holder waits to publish, the publisher waits for the lock"
    )
    assert errors == []
    assert {"slow", "a"} <= {it.id for it in store.items()}


def test_a_write_under_a_host_held_lock_returns_and_is_settled_once_published() -> None:
    """Under ``with store.lock:`` a write cannot wait for its listeners; ``_settled`` can.

    Thread C is delivering a change to a slow listener when the main thread,
    holding the store's lock, writes: its write commits and returns (a write
    waits for its listeners, but never under the store's lock: a listener
    that reads the store would wait for it, see the test above), and C
    delivers it after its own. A check of an index that follows the store by
    its listeners (``CellStore._check(store)``) waits for C first.
    """
    store = Store()
    heard: list[str] = []
    in_listener, release = threading.Event(), threading.Event()

    def slow_listener(op: str, item: Item | None, id: str, kind: str) -> None:
        if id == "slow":
            in_listener.set()
            release.wait(5.0)
        heard.append(id)

    store.add_change_listener(slow_listener)
    c = threading.Thread(target=store.upsert, args=(Item(id="slow", kind="note", title="x"),))
    c.start()
    assert in_listener.wait(5.0)
    with store.lock:  # type: ignore[attr-defined]
        store.upsert(Item(id="mine", kind="note", title="written while C publishes"))
    assert heard == [] and store.get("mine") is not None  # committed, not yet heard
    assert not store._settled(timeout=0.05)  # C is still in the listener
    release.set()
    assert store._settled()
    assert heard == ["slow", "mine"]
    c.join(5.0)


def test_forgotten_deletes_reach_listeners_in_commit_order() -> None:
    """A follower replaying the deliveries ends where the store is, ``forget_locked`` included.

    ``forget_locked`` commits its deletes under the host-held lock but leaves
    their delivery to ``publish_removed`` after the lock is released. A writer
    that re-creates the id in that gap commits after the delete; its upsert
    must not be delivered before the delete, or a follower (a journal, a change
    stream consumer) ends without an item the store holds.
    """
    store = Store()
    follower: dict[str, Item] = {}

    def follow(op: str, item: Item | None, id: str, kind: str) -> None:
        if item is None:
            follower.pop(id, None)
        else:
            follower[id] = item

    store.add_change_listener(follow)
    store.upsert(Item(id="x", kind="note", title="first version"))
    recreated = threading.Event()

    def writer() -> None:  # runs in the gap between the forget and its publication
        store.upsert(Item(id="x", kind="note", title="second version"))
        recreated.set()

    store.lock.acquire()
    try:
        gone = store.forget_locked(lambda it: it.id == "x")
    finally:
        store.lock.release()
    t = threading.Thread(target=writer, daemon=True)
    t.start()
    assert recreated.wait(5.0)
    t.join(5.0)
    store.publish_removed(gone)
    final = store.get("x")
    assert final is not None and final.title == "second version"
    assert "x" in follower, "the follower applied the forget after the later upsert"
    assert follower["x"].title == "second version"


class _HostLock:
    """A host's reentrant lock that cannot say who holds it (no ``_is_owned``)."""

    def __init__(self) -> None:
        self._inner = threading.RLock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._inner.acquire(blocking, timeout)

    def release(self) -> None:
        self._inner.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def test_in_batch_and_holds_lock_answer_for_the_calling_thread_alone() -> None:
    # A journal asks these (before, it read the store's private thread-local
    # depth and the RLock's private _is_owned itself).
    store = Store()
    seen: list[tuple[bool, bool]] = []
    store.add_change_listener(
        lambda changes: seen.append((store.in_batch(), store.holds_lock())), before_commit=True
    )
    assert (store.in_batch(), store.holds_lock()) == (False, False)
    store.upsert(Item(id="a", kind="note", title="a"))
    assert seen == [(False, True)]  # the group is closing: a write there would be its own
    other: list[tuple[bool, bool]] = []
    with store.batch():
        assert (store.in_batch(), store.holds_lock()) == (True, True)
        with store.batch():  # a savepoint: still the one group
            assert store.in_batch()
        # Another thread is in no group and holds nothing while this one does.
        t = threading.Thread(target=lambda: other.append((store.in_batch(), store.holds_lock())))
        t.start()
        t.join()
    assert other == [(False, False)]
    with contextlib.suppress(RuntimeError), store.batch():
        raise RuntimeError("undone")
    assert (store.in_batch(), store.holds_lock()) == (False, False)
    with store.lock:  # the host takes the lock itself: held, but no group is open
        assert (store.in_batch(), store.holds_lock()) == (False, True)
    assert store.holds_lock() is False


def test_holds_lock_with_a_host_lock_that_cannot_name_its_owner() -> None:
    lock = _HostLock()
    store = Store(lock=lock)
    with lock:  # taken outside the store: nothing says this thread holds it
        assert store.holds_lock() is False
    with store.batch():  # the store's own scope knows
        assert store.holds_lock() is True
    assert store.holds_lock() is False
