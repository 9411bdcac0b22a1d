"""MemstoreStore's TTL against a model of what LangGraph's ``TTLConfig`` defines.

LangGraph's ``InMemoryStore`` has no TTL (``supports_ttl = False``), so the
reference here is a plain model of the contract in ``langgraph.store.base``
and docs/langgraph.md ("TTL"):

- ``ttl`` is in minutes; ``put`` without one takes ``TTLConfig.default_ttl``,
  ``ttl=None`` none; a put restarts the deadline (now + ttl);
- an item past its deadline is never returned, listed or counted as a match,
  even before a sweep (``omit_expired``), and a read never revives it;
- a ``get``, or a ``search`` for the items of the page it returns, moves the
  deadline to now + ttl when ``refresh_ttl`` (default ``refresh_on_read``,
  itself ``True`` by default) holds; ``created_at`` and ``updated_at`` stay;
- ``sweep_ttl()`` deletes the expired items and says how many; until then a
  put of an expired key is an update (``created_at`` kept), as in LangGraph's
  SQL stores, whose expired row is still there.

The clock moves by whole minutes only when the sequence says, so deadlines
land exactly on the clock's ticks (``now == deadline`` is expired).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import NOT_PROVIDED, TTLConfig

from memstore import Config, Memory
from memstore.integrations.langgraph import MemstoreStore
from tests.conftest import FakeClock

NAMESPACES = [("a",), ("a",), ("a", "b"), ("c",)]
KEYS = ["k1", "k1", "k2"]

put = st.tuples(
    st.just("put"),
    st.sampled_from(NAMESPACES),
    st.sampled_from(KEYS),
    st.integers(0, 9),
    st.sampled_from([NOT_PROVIDED, NOT_PROVIDED, None, 1, 2.5]),
)
get = st.tuples(
    st.just("get"),
    st.sampled_from(NAMESPACES),
    st.sampled_from(KEYS),
    st.sampled_from([None, None, True, False]),
)
wait = st.tuples(st.just("wait"), st.sampled_from([0.5, 1, 2]))
search = st.tuples(
    st.just("search"),
    st.sampled_from([(), ("a",), ("c",)]),
    st.integers(0, 3),
    st.integers(0, 2),
    st.sampled_from([None, True, False]),
)
STEPS: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "put": put,
    "get": get,
    "wait": wait,
    "search": search,
    "delete": st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(KEYS)),
    "list": st.tuples(st.just("list")),
    "sweep": st.tuples(st.just("sweep")),
}
ops = st.sampled_from(["put", "put", "get", "get", "wait", "wait", *STEPS]).flatmap(
    STEPS.__getitem__
)
"""Puts, gets and waits three times as often as the rest (the TTL lives in them)."""


@dataclass
class Kept:
    """The model of one stored item (expired ones too, until a sweep)."""

    value: dict[str, Any]
    ttl: float | None
    deadline: dt.datetime | None
    created: dt.datetime
    updated: dt.datetime

    def live(self, now: dt.datetime) -> bool:
        return self.deadline is None or now < self.deadline


Where = tuple[tuple[str, ...], str]


class Model:
    def __init__(self, config: TTLConfig, clock: FakeClock) -> None:
        self.config, self.clock = config, clock
        self.items: dict[Where, Kept] = {}

    def refresh(self, where: Where, asked: bool | None) -> None:
        it = self.items[where]
        on = asked if asked is not None else self.config.get("refresh_on_read", True)
        if on and it.ttl is not None:
            it.deadline = self.clock.now + dt.timedelta(minutes=it.ttl)

    def live(self) -> list[tuple[Where, Kept]]:
        now = self.clock.now
        found = [(w, it) for w, it in self.items.items() if it.live(now)]
        return sorted(found, key=lambda p: (-p[1].updated.timestamp(), p[0][0], p[0][1]))


def _check(store: MemstoreStore, model: Model, op: tuple[Any, ...], run: Any) -> None:
    now = model.clock.now
    kind = op[0]
    if kind == "put":
        _, ns, key, n, ttl = op
        run(store, "put", ns, key, {"n": n}, ttl=ttl)
        minutes = model.config.get("default_ttl") if ttl is NOT_PROVIDED else ttl
        old = model.items.get((ns, key))
        model.items[ns, key] = Kept(
            {"n": n},
            minutes,
            now + dt.timedelta(minutes=minutes) if minutes is not None else None,
            old.created if old is not None else now,
            now,
        )
    elif kind == "delete":
        _, ns, key = op
        run(store, "delete", ns, key)
        model.items.pop((ns, key), None)
    elif kind == "get":
        _, ns, key, refresh = op
        got = run(store, "get", ns, key, refresh_ttl=refresh)
        it = model.items.get((ns, key))
        if it is None or not it.live(now):
            assert got is None
        else:
            assert got is not None and got.value == it.value
            assert (got.created_at, got.updated_at) == (it.created, it.updated)
            model.refresh((ns, key), refresh)
    elif kind == "search":
        _, prefix, limit, offset, refresh = op
        got = run(store, "search", prefix, limit=limit, offset=offset, refresh_ttl=refresh)
        live = [(w, it) for w, it in model.live() if w[0][: len(prefix)] == prefix]
        page = live[offset : offset + limit]
        assert [(h.namespace, h.key, h.value) for h in got] == [
            (w[0], w[1], it.value) for w, it in page
        ]
        assert [(h.created_at, h.updated_at) for h in got] == [
            (it.created, it.updated) for _, it in page
        ]
        for w, _ in page:
            model.refresh(w, refresh)
    elif kind == "list":
        assert run(store, "list_namespaces") == sorted({w[0] for w, _ in model.live()})
    elif kind == "wait":
        model.clock.advance(dt.timedelta(minutes=op[1]))
    else:
        due = [w for w, it in model.items.items() if not it.live(now)]
        assert store.sweep_ttl() == len(due)
        for w in due:
            del model.items[w]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(ops, min_size=6, max_size=40),
    st.fixed_dictionaries(
        {}, optional={"default_ttl": st.sampled_from([None, 3]), "refresh_on_read": st.booleans()}
    ),
    st.booleans(),
)
def test_ttl_follows_the_model(sequence: list[Any], config: Any, use_async: bool) -> None:
    """Deadlines, refreshes, omission and sweeps as LangGraph's TTLConfig defines them."""
    clock = FakeClock()
    model = Model(config, clock)
    memory = Memory(embedder=None, config=Config(clock=clock))
    with MemstoreStore(memory, ttl=config) as store, asyncio.Runner() as runner:

        def run(s: MemstoreStore, name: str, *args: Any, **kw: Any) -> Any:
            if use_async:
                return runner.run(getattr(s, "a" + name)(*args, **kw))
            return getattr(s, name)(*args, **kw)

        for op in sequence:
            _check(store, model, op, run)
        _check(store, model, ("search", (), 100, 0, False), run)
