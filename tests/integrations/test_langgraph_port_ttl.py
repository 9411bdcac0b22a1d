"""LangGraph's TTL and namespace-validation tests, run against MemstoreStore.

Ported from langchain-ai/langgraph, libs/checkpoint-sqlite/tests/test_ttl.py
and test_namespace_validation.py (MIT licence). ADAPTED throughout: time is a
fake clock moved by the test instead of ``time.sleep``, and an expired row is
made by moving the clock instead of rewriting ``expires_at`` in SQL. memstore
always omits expired items (``omit_expired=True`` in LangGraph's terms), so
``test_omit_expired_disabled_preserves_expired_rows`` is left out.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
    TTLConfig,
)

from memstore import Config, Memory
from memstore.integrations.langgraph import MemstoreStore
from tests.conftest import FakeClock

TTL_MINUTES = 5


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make(clock: FakeClock, tmp_path: Any) -> Iterator[Any]:
    opened: list[Memory] = []

    def make_store(ttl: TTLConfig | None = None) -> MemstoreStore:
        memory = Memory(tmp_path / f"m{len(opened)}", embedder=None, config=Config(clock=clock))
        opened.append(memory)
        return MemstoreStore(memory, ttl=ttl)

    yield make_store
    for memory in opened:
        memory.close()


def test_omit_expired_filters_read_paths(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": TTL_MINUTES, "omit_expired": True})
    expired_ns, control_ns = ("omit", "expired"), ("omit", "control")
    store.put(expired_ns, "e", {"data": "gone"}, ttl=TTL_MINUTES)
    store.put(control_ns, "c", {"data": "keep"}, ttl=None)
    clock.advance(dt.timedelta(minutes=TTL_MINUTES + 1))
    assert store.get(expired_ns, "e") is None
    assert store.get(control_ns, "c") is not None
    assert store.search(expired_ns) == []
    assert [i.key for i in store.search(control_ns)] == ["c"]
    namespaces = store.list_namespaces(prefix=("omit",))
    assert expired_ns not in namespaces and control_ns in namespaces


def test_omit_expired_refresh_ttl_only_refreshes_live_rows(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": TTL_MINUTES, "refresh_on_read": True})
    ns = ("refresh",)
    store.put(ns, "expired", {"n": 0}, ttl=1)
    store.put(ns, "live_get", {"n": 1}, ttl=TTL_MINUTES)
    store.put(ns, "live_search", {"n": 2}, ttl=TTL_MINUTES)
    clock.advance(dt.timedelta(minutes=2))
    assert store.get(ns, "expired", refresh_ttl=True) is None  # not resurrected
    assert "expired" not in [i.key for i in store.search(ns, refresh_ttl=True)]
    assert store.get(ns, "live_get", refresh_ttl=True) is not None
    clock.advance(dt.timedelta(minutes=TTL_MINUTES - 1))  # 6 minutes after the puts
    assert store.get(ns, "live_get", refresh_ttl=False) is not None  # both were extended
    assert store.get(ns, "live_search", refresh_ttl=False) is not None
    assert store.sweep_ttl() == 1


def test_omit_expired_search_pagination(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": TTL_MINUTES})
    ns = ("page",)
    for key, ttl in [("c", TTL_MINUTES), ("b", TTL_MINUTES), ("expired", 1), ("a", TTL_MINUTES)]:
        store.put(ns, key, {"k": key}, ttl=ttl)
        clock.advance(dt.timedelta(seconds=1))
    clock.advance(dt.timedelta(minutes=1))
    # newest first is a, expired, b, c: the expired one sits inside the first page
    assert [i.key for i in store.search(ns, limit=2, offset=0)] == ["a", "b"]
    assert [i.key for i in store.search(ns, limit=2, offset=2)] == ["c"]


def test_async_omit_expired_filters_read_paths(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": TTL_MINUTES, "omit_expired": True})

    async def run() -> None:
        await store.aput(("omit", "expired"), "e", {"data": "gone"}, ttl=TTL_MINUTES)
        await store.aput(("omit", "control"), "c", {"data": "keep"}, ttl=None)
        clock.advance(dt.timedelta(minutes=TTL_MINUTES + 1))
        assert await store.aget(("omit", "expired"), "e") is None
        assert await store.aget(("omit", "control"), "c") is not None
        assert await store.asearch(("omit", "expired")) == []
        assert [i.key for i in await store.asearch(("omit", "control"))] == ["c"]
        assert await store.alist_namespaces(prefix=("omit",)) == [("omit", "control")]

    asyncio.run(run())


def test_ttl_basic(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": 1 / 60})
    store.put(("test",), "item1", {"value": "test"})
    item = store.get(("test",), "item1")
    assert item is not None and item.value["value"] == "test"
    clock.advance(dt.timedelta(seconds=2))
    store.sweep_ttl()
    assert store.get(("test",), "item1") is None


def test_ttl_refresh(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": 1 / 60, "refresh_on_read": True})
    store.put(("test",), "item1", {"value": "test"})
    clock.advance(dt.timedelta(seconds=0.5))
    assert store.sweep_ttl() == 0
    assert store.get(("test",), "item1", refresh_ttl=True) is not None
    clock.advance(dt.timedelta(seconds=0.5))
    assert store.sweep_ttl() == 0
    item = store.get(("test",), "item1")
    assert item is not None and item.value["value"] == "test"
    clock.advance(dt.timedelta(seconds=1.75))
    assert store.sweep_ttl() == 1
    assert store.get(("test",), "item1") is None


def test_ttl_sweeper(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": 2 / 60, "sweep_interval_minutes": 0.0005})  # every 30 ms
    store.start_ttl_sweeper()
    store.put(("test",), "item1", {"value": "test"})
    assert store.get(("test",), "item1") is not None
    clock.advance(dt.timedelta(seconds=3))
    deadline = time.monotonic() + 30  # a generous bound for a loaded machine, not a timing
    while store.memory.stats().items:  # until the sweeper has deleted it
        assert time.monotonic() < deadline, "the sweeper never deleted the expired item"
        time.sleep(0.01)
    assert store.get(("test",), "item1") is None
    assert store.stop_ttl_sweeper(timeout=10)


def test_ttl_custom_value(make: Any, clock: FakeClock) -> None:
    store = make()
    store.put(("test",), "item1", {"value": "short"}, ttl=1 / 60)
    store.put(("test",), "item2", {"value": "long"}, ttl=3 / 60)
    clock.advance(dt.timedelta(seconds=2))
    store.sweep_ttl()
    assert store.get(("test",), "item1") is None
    assert store.get(("test",), "item2") is not None
    clock.advance(dt.timedelta(seconds=4))
    store.sweep_ttl()
    assert store.get(("test",), "item2") is None


def test_ttl_override_default(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": 5 / 60})
    store.put(("test",), "item1", {"value": "override"}, ttl=1 / 60)
    store.put(("test",), "item2", {"value": "default"})
    store.put(("test",), "item3", {"value": "permanent"}, ttl=None)
    clock.advance(dt.timedelta(seconds=2))
    store.sweep_ttl()
    # ADAPTED: refresh_ttl=False, or the read would extend item2's TTL (refresh_on_read
    # defaults to True, and a TTL counts from the last access)
    assert store.get(("test",), "item1", refresh_ttl=False) is None
    assert store.get(("test",), "item2", refresh_ttl=False) is not None
    assert store.get(("test",), "item3", refresh_ttl=False) is not None
    clock.advance(dt.timedelta(seconds=4))
    store.sweep_ttl()
    assert store.get(("test",), "item2") is None
    assert store.get(("test",), "item3") is not None


def test_search_with_ttl(make: Any, clock: FakeClock) -> None:
    store = make({"default_ttl": 1 / 60})
    store.put(("test",), "item1", {"value": "apple"})
    store.put(("test",), "item2", {"value": "banana"})
    results = store.search(("test",), filter={"value": "apple"})
    assert [r.key for r in results] == ["item1"]
    clock.advance(dt.timedelta(seconds=2))
    store.sweep_ttl()
    assert store.search(("test",), filter={"value": "apple"}) == []


@pytest.mark.parametrize("namespace", [("foo.bar",), ("foo", ""), ("foo", 1)])
@pytest.mark.parametrize("kind", ["get", "put", "delete", "search", "prefix", "suffix"])
def test_invalid_namespace_batch(namespace: Any, kind: str) -> None:
    operations = {
        "get": GetOp(namespace, "key"),
        "put": PutOp(namespace, "key", {"changed": True}),
        "delete": PutOp(namespace, "key", None),
        "search": SearchOp(namespace),
        "prefix": ListNamespacesOp((MatchCondition("prefix", namespace),)),
        "suffix": ListNamespacesOp((MatchCondition("suffix", namespace),)),
    }
    with MemstoreStore() as store:
        store.put(("foo", "bar"), "key", {"original": True})
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("valid",), "key", {}), operations[kind]])
        item = store.get(("foo", "bar"), "key")
        assert item is not None and item.value == {"original": True}
        assert store.get(("valid",), "key") is None


@pytest.mark.parametrize("method", ["get", "delete", "search"])
def test_invalid_namespace_public(method: str) -> None:
    with MemstoreStore() as store:
        store.put(("foo", "bar"), "key", {"original": True})
        args = (("foo.bar",),) if method == "search" else (("foo.bar",), "key")
        with pytest.raises(InvalidNamespaceError):
            getattr(store, method)(*args)
        item = store.get(("foo", "bar"), "key")
        assert item is not None and item.value == {"original": True}


def test_async_namespace_validation() -> None:
    async def run(store: MemstoreStore) -> None:
        await store.aput(("foo", "bar"), "key", {"original": True})
        for op in (
            GetOp(("foo.bar",), "key"),
            PutOp(("foo.bar",), "key", {}),
            PutOp(("foo.bar",), "key", None),
            SearchOp(("foo.bar",)),
            ListNamespacesOp((MatchCondition("prefix", ("foo.bar",)),)),
        ):
            with pytest.raises(InvalidNamespaceError):
                await store.abatch([op])
        with pytest.raises(InvalidNamespaceError):
            await store.aget(("foo.bar",), "key")
        with pytest.raises(InvalidNamespaceError):
            await store.adelete(("foo.bar",), "key")
        with pytest.raises(InvalidNamespaceError):
            await store.asearch(("foo.bar",))
        item = await store.aget(("foo", "bar"), "key")
        assert item is not None and item.value == {"original": True}

    with MemstoreStore() as store:
        asyncio.run(run(store))


def test_hierarchical_search_and_listing_preserved() -> None:
    with MemstoreStore() as store:
        namespaces = [("user_%",), ("user_%", "child"), ("userX%",), ("USER_%",)]
        for ns in namespaces:
            store.put(ns, "key", {})
        assert {item.namespace for item in store.search(())} == set(namespaces)
        assert {item.namespace for item in store.search(("user_%",))} == set(namespaces[:2])
        assert store.list_namespaces(prefix=("user_%", "*")) == [("user_%", "child")]
