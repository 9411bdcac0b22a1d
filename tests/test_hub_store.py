"""A hub attached to a real Store: what its changes and search hits become.

The store decides what is published (not private items, not link-only edits,
not quiet ids) and when (after commit, outside its lock, in commit order); the
hub routes each event to the partition of the item it is about, a delete to
the partition of the item it removed.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Sequence

import pytest
from conftest import FakeClock

from memstore import Change, Config, Item, Store, ThoughtLink
from memstore_hub import Event, Hub, ItemChanged, SearchHit, Subscription

JOIN_TIMEOUT = 60.0
"""A hang guard for joins."""


def _note(id: str, *tags: str, title: str = "", private: bool = False) -> Item:
    return Item.model_validate(
        {
            "id": id,
            "kind": "note",
            "title": title or f"note {id}",
            "tags": [*tags, "user:u1"] if private else list(tags),
            "scope": "private" if private else "public",
        }
    )


def _queued(sub: Subscription) -> list[Event]:
    out: list[Event] = []
    while (ev := sub.get_nowait()) is not None:
        out.append(ev)
    return out


def _changes(sub: Subscription) -> list[tuple[str, str, str | None]]:
    return [(e.op, e.id, e.partition) for e in _queued(sub) if isinstance(e, ItemChanged)]


@pytest.fixture
def store(clock: FakeClock) -> Store:
    return Store(Config(clock=clock, quiet=lambda id: id.startswith("heartbeat")))


@pytest.fixture
def hub(store: Store) -> Hub:
    hub = Hub()
    hub.attach(store)
    return hub


def test_upserts_are_published_with_the_stored_item_to_its_partition(
    store: Store, hub: Hub
) -> None:
    alpha, beta, every = (
        hub.subscribe(partition="alpha"),
        hub.subscribe(partition="beta"),
        hub.subscribe(),
    )
    stored = store.upsert(_note("a1", "tenant/alpha"))
    store.upsert(_note("b1", "tenant/beta"))
    store.upsert(_note("s1", "tenant/beta", "shared"))

    got = _queued(alpha)
    assert [(e.id, e.partition) for e in got] == [("a1", "alpha"), ("s1", "")]  # type: ignore[attr-defined]
    first = got[0]
    assert isinstance(first, ItemChanged) and first.op == "upsert" and first.kind == "note"
    assert first.item is not None and first.item.model_dump() == stored.model_dump()
    assert first.lsn is None
    assert _changes(beta) == [("upsert", "b1", "beta"), ("upsert", "s1", "")]
    assert len(_queued(every)) == 3


def test_a_delete_reaches_the_partition_of_the_item_it_removed(store: Store, hub: Hub) -> None:
    store.upsert(_note("a1", "tenant/alpha"))
    store.upsert(_note("b1", "tenant/beta"))
    alpha, beta = hub.subscribe(partition="alpha"), hub.subscribe(partition="beta")

    store.delete("a1")
    store.expire("b1")  # an expiry is an upsert of a stale copy

    got = _queued(alpha)
    assert len(got) == 1 and isinstance(got[0], ItemChanged)
    assert (got[0].op, got[0].id, got[0].kind, got[0].item, got[0].partition) == (
        "delete",
        "a1",
        "note",
        None,
        "alpha",
    )
    assert _changes(beta) == [("upsert", "b1", "beta")]


def test_private_items_quiet_ids_and_link_only_edits_are_never_published(
    store: Store, hub: Hub
) -> None:
    sub = hub.subscribe()
    store.upsert(_note("p", "tenant/alpha", private=True))
    store.upsert(_note("p", "tenant/alpha", title="edited", private=True))
    store.delete("p")
    store.upsert(_note("heartbeat-1", "tenant/alpha"))
    store.delete("heartbeat-1")
    store.upsert(_note("a", "tenant/alpha"))
    store.upsert(_note("b", "tenant/alpha"))
    _queued(sub)

    assert store.add_link("a", ThoughtLink(to_id="b", relation="explains"))
    assert _queued(sub) == []
    assert hub.seq == 2  # a and b only


def test_changes_arrive_in_commit_order_from_concurrent_writers(store: Store, hub: Hub) -> None:
    committed: list[tuple[str, str]] = []
    store.add_change_listener(lambda op, item, id, kind: committed.append((op, id)))
    sub = hub.subscribe(maxsize=10_000)

    def write(t: int) -> None:
        for i in range(100):
            store.upsert(_note(f"t{t}-{i % 7}", f"tenant/p{t % 2}"))
            if i % 5 == 4:
                store.delete(f"t{t}-{i % 7}")

    threads = [threading.Thread(daemon=True, target=write, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(JOIN_TIMEOUT)
    got = [(e.op, e.id) for e in _queued(sub) if isinstance(e, ItemChanged)]
    assert got == committed  # listeners are called in commit order, the hook beside them
    assert len(got) == 4 * 120


def test_the_hook_runs_outside_the_store_lock_and_lsn_of_sees_the_journal_change(
    store: Store,
) -> None:
    seen_before: list[Change] = []
    store.add_change_listener(lambda changes: seen_before.extend(changes), before_commit=True)
    lock_free: list[bool] = []

    def lsn_of(change: Change) -> object:
        probe: list[bool] = []
        t = threading.Thread(daemon=True, target=lambda: probe.append(_try_lock(store)))
        t.start()
        t.join(JOIN_TIMEOUT)
        lock_free.extend(probe)
        # The very object the before-commit listener (a journal) saw, not a copy.
        return (len(seen_before), next(k for k, c in enumerate(seen_before) if c is change))

    hub = Hub()
    hub.attach(store, lsn_of=lsn_of)
    sub = hub.subscribe()
    store.upsert(_note("a", "tenant/alpha"))
    store.delete("a")
    assert [e.lsn for e in _queued(sub) if isinstance(e, ItemChanged)] == [(1, 0), (2, 1)]
    assert lock_free == [True, True]


def _try_lock(store: Store) -> bool:
    got = bool(store.lock.acquire(blocking=False))  # type: ignore[call-arg]
    if got:
        store.lock.release()
    return got


def test_search_hits_are_published_without_private_or_vanished_items(
    store: Store, hub: Hub
) -> None:
    store.upsert(_note("a1", "tenant/alpha"))
    store.upsert(_note("s1", "shared"))
    store.upsert(_note("p1", "tenant/alpha", private=True))
    alpha, beta, every = (
        hub.subscribe(partition="alpha", topics={"hit"}),
        hub.subscribe(partition="beta", topics={"hit"}),
        hub.subscribe(topics={"hit"}),
    )

    store.notify_hit(["p1", "a1", "gone", "s1"], "ledger", "note", ["note", "note", "x", "note"])
    store.notify_hit(["p1"], "secret", "", None)  # nothing left: no event
    store.notify_hit(["s1"], "shared only", "", None)  # the searcher's partition is unknown

    got = _queued(alpha)
    assert len(got) == 1 and isinstance(got[0], SearchHit)
    hit = got[0]
    assert (hit.item_ids, hit.query, hit.kind, hit.kinds, hit.partition) == (
        ("a1", "s1"),
        "ledger",
        "note",
        ("note", "note"),
        "alpha",
    )
    assert _queued(beta) == []
    assert [e.query for e in _queued(every) if isinstance(e, SearchHit)] == [
        "ledger",
        "shared only",
    ]


def test_hit_partition_can_be_supplied_by_the_host(store: Store) -> None:
    store.upsert(_note("s1", "shared"))
    seen: list[Sequence[Item]] = []

    def tenant_of(items: Sequence[Item]) -> str | None:
        seen.append(items)
        return "beta"

    hub = Hub()
    hub.attach(store, hit_partition=tenant_of)
    beta = hub.subscribe(partition="beta")
    store.notify_hit(["s1"], "q", "", None)
    assert [e.partition for e in _queued(beta)] == ["beta"]
    assert [[it.id for it in items] for items in seen] == [["s1"]]


def test_detach_and_close_stop_publishing_and_leave_the_store_working(store: Store) -> None:
    hub = Hub()
    hub.attach(store)
    sub = hub.subscribe()
    store.upsert(_note("a"))
    hub.detach(store)
    store.upsert(_note("b"))
    store.notify_hit(["b"], "q", "", None)
    assert [e.id for e in _queued(sub) if isinstance(e, ItemChanged)] == ["a"]

    hub.attach(store)
    hub.close()
    assert store.upsert(_note("c")).id == "c"
    assert hub.seq == 1


def test_a_dead_async_subscriber_does_not_fail_a_store_write(store: Store, hub: Hub) -> None:
    loop = asyncio.new_event_loop()
    dead = hub.subscribe()
    live = hub.subscribe()
    task = loop.create_task(dead.aget())
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()

    writer = threading.Thread(daemon=True, target=lambda: store.upsert(_note("a")))
    writer.start()
    writer.join(JOIN_TIMEOUT)
    assert store.get("a") is not None
    assert _changes(live) == [("upsert", "a", "")]
    assert dead.closed
    del task
    gc.collect()  # the abandoned task goes now, inside this test


def test_a_failing_lsn_of_is_logged_and_the_change_still_published(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(change: Change) -> object:
        raise RuntimeError("journal offline")

    hub = Hub()
    hub.attach(store, lsn_of=broken)
    sub = hub.subscribe()
    store.upsert(_note("a", "tenant/alpha"))
    got = _queued(sub)
    assert [(e.id, e.lsn) for e in got if isinstance(e, ItemChanged)] == [("a", None)]
    assert "lsn_of raised on upsert a" in caplog.text
