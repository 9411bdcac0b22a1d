"""Search spreading reads at most ``SPREAD_REACH`` linkers a pass, on both search paths.

A candidate lends its score to the items linking to it (``spread_relations``);
a hub with 100,000 linkers made every query read all of them. Now a pass
reads at most :data:`~memstore.limits.SPREAD_REACH` linkers,
the best candidates' first (``Store.neighbours``, ``reach``). The tests hold
the bound to a brute force over ``Store.linker_ids`` on random graphs, check
that under it nothing changes, that the lean path (arrays) stops exactly where
the general path stops (the bound lowered to a few linkers, so random graphs
pass it), and count the linkers a search on a real hub reads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import tracemalloc

import pytest
from conftest import T0, FakeClock, count_is_active
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store, _linkers, limits
from memstore.errors import InvalidItemError
from memstore.item import SCOPE_PRIVATE
from memstore.search import SearchConfig, Searcher

WORDS = ["ledger", "pool", "deploy", "tax", "api"]
RELATIONS = ["precedes", "correlates_with", "mentions"]
Neighbours = dict[str, list[tuple[str, float]]]


@st.composite
def graphs(draw: st.DrawFn) -> tuple[Store, FakeClock]:
    """A store whose items link mostly to two hubs, of several relations and states."""
    clock = FakeClock(T0)
    store = Store(Config(clock=clock))
    n = draw(st.integers(2, 12))
    ids = [f"i{i:02d}" for i in range(n)]
    for id in ids:
        targets = st.sampled_from(["i00", "i00", "i01", *ids, "missing"])
        links = [
            {
                "to_id": draw(targets),
                "relation": draw(st.sampled_from(RELATIONS)),
                "weight": draw(st.sampled_from([1.0, 0.5, 0.25])),
            }
            for _ in range(draw(st.integers(0, 3)))
        ]
        private = draw(st.integers(0, 6)) == 0
        lapse = draw(st.sampled_from([None, None, None, 1]))
        store.put(
            Item.model_validate(
                {
                    "id": id,
                    "kind": "note",
                    "title": " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1))),
                    "status": draw(st.sampled_from(["active", "active", "active", "stale"])),
                    "scope": "private" if private else "public",
                    "tags": ["user:u1"] if private else [],
                    "links": links,
                    "stale_after": None if lapse is None else T0 + lapse * dt.timedelta(hours=1),
                    "updated_at": T0,
                    "created_at": T0,
                }
            )
        )
    clock.advance(dt.timedelta(hours=draw(st.sampled_from([0, 2]))))
    return store, clock


def _brute(store: Store, ids: list[str], relations: set[str], reach: int) -> Neighbours:
    """``Store.neighbours`` with ``reach``, from its definition: every item read, no index."""
    now = store.config.clock()
    by_id = {it.id: it for it in store.items_locked()}

    def live(id: str) -> bool:
        it = by_id.get(id)
        return it is not None and it.scope != SCOPE_PRIVATE and it.is_active(now)

    left, out = reach, {}
    for id in ids:
        if not live(id):
            continue
        found = [
            (lk.to_id, lk.weight)
            for lk in by_id[id].links
            if lk.relation in relations and live(lk.to_id)
        ]
        linkers = store.linker_ids(id)  # any relation, any state, in id order
        if reach:
            linkers = linkers[:left]
            left -= len(linkers)
        for src in linkers:
            if live(src):
                found += [
                    (src, lk.weight)
                    for lk in by_id[src].links
                    if lk.to_id == id and lk.relation in relations
                ]
        if found:
            out[id] = sorted(found)
    return out


def _sorted(found: Neighbours) -> Neighbours:
    return {id: sorted(pairs) for id, pairs in found.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=graphs(),
    order=st.permutations([f"i{i:02d}" for i in range(12)]),
    relations=st.sets(st.sampled_from(RELATIONS), min_size=1),
    reach=st.integers(0, 12),
)
def test_neighbours_reads_linkers_up_to_reach_in_the_order_given(
    env: tuple[Store, FakeClock], order: list[str], relations: set[str], reach: int
) -> None:
    store, _ = env
    got = _sorted(store.neighbours(order, relations, reach=reach))
    assert got == _brute(store, order, relations, reach)
    every = sum(len(store.linker_ids(id)) for id in order)
    if reach >= every:  # under the bound: the unbounded answer
        assert got == _sorted(store.neighbours(order, relations))


@pytest.mark.parametrize("reach", [-1, True, 1.5, "3"])
def test_neighbours_refuses_a_reach_that_is_no_count(reach: object) -> None:
    store = Store()
    with pytest.raises(InvalidItemError, match="reach"):
        store.neighbours(["a"], ["precedes"], reach=reach)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=graphs(),
    relations=st.sets(st.sampled_from(RELATIONS), min_size=1),
    reach=st.integers(0, 8),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
    fusion=st.sampled_from(["score", "rrf"]),
)
def test_both_search_paths_stop_spreading_at_the_same_place(
    env: tuple[Store, FakeClock],
    relations: set[str],
    reach: int,
    query: list[str],
    fusion: str,
) -> None:
    store, _ = env
    config = SearchConfig(store=store, spread_relations=tuple(sorted(relations)), fusion=fusion)
    searcher, q = Searcher(config), " ".join(query)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(limits, "SPREAD_REACH", reach)
        lean = searcher.hybrid_search(q, limit=12)
        general = searcher.hybrid_search(q, limit=12, explain=True)  # explain: the general path
    assert store.search_snapshot() is not None, "the plain search took the lean path"
    assert [(r.item.id, r.score) for r in lean] == [(r.item.id, r.score) for r in general]


def test_a_search_on_a_hub_reads_at_most_spread_reach_of_its_linkers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A hub with 3,000 linkers, the bound at 500: a search that finds the hub
    # asks whether each linker it reads is live. Unbounded, it asked all 3,000
    # on every query; now at most 500 are, and the results are the same ones
    # (equal loans tie by id, and the first linkers by id are those read).
    hub = Item(id="hub", kind="note", title="ledger pool exhausted")
    spokes = [
        Item.model_validate(
            {
                "id": f"s{n:05d}",
                "kind": "note",
                "title": f"spoke {n}",
                "links": [{"to_id": "hub", "relation": "precedes"}],
            }
        )
        for n in range(3_000)
    ]
    store = Store()
    store.restore([hub, *spokes])
    searcher = Searcher(SearchConfig(store=store, spread_relations=("precedes",)))
    unbounded = [r.item.id for r in searcher.hybrid_search("ledger pool", explain=True)]
    monkeypatch.setattr(limits, "SPREAD_REACH", 500)
    asked = count_is_active(monkeypatch)
    bounded = [r.item.id for r in searcher.hybrid_search("ledger pool", explain=True)]
    monkeypatch.undo()
    assert bounded == unbounded == ["hub", *(f"s{n:05d}" for n in range(9))]
    assert len({id for id in asked if id.startswith("s")}) <= 500
    assert (
        Searcher(SearchConfig(store=store, spread_relations=("precedes",)))
        .hybrid_search("ledger pool")[1]
        .item.id
        == "s00000"
    )  # the lean path, bounded the same way


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    order=st.permutations([f"i{i:02d}" for i in range(12)]),
    relations=st.sets(st.sampled_from(RELATIONS), min_size=1),
    reach=st.integers(0, 12),
)
def test_linkers_kept_in_order_are_read_as_the_set_through_every_write(
    data: st.DataObject, order: list[str], relations: set[str], reach: int
) -> None:
    """With hubs kept in id order from 2 linkers on, the first linkers read are the set's.

    The orders are made and kept by writes (puts, relinks, deletes, a batch undone)
    and by a restore; ``Store._check`` holds each to its set.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_linkers, "ORDERED_FROM", 2)
        store, clock = data.draw(graphs())
        for _ in range(data.draw(st.integers(0, 8))):
            id = data.draw(st.sampled_from(order))
            now = store.get(id)
            if now is None:
                continue
            action = data.draw(st.sampled_from(["relink", "delete", "undone"]))
            if action == "relink":
                target = data.draw(st.sampled_from(["i00", "i01", *order]))
                link = {"to_id": target, "relation": data.draw(st.sampled_from(RELATIONS))}
                kept = [lk.model_dump() for lk in now.links[: data.draw(st.integers(0, 2))]]
                store.put(Item.model_validate({**now.model_dump(), "links": [*kept, link]}))
            elif action == "delete":
                store.delete(id)
            else:
                with contextlib.suppress(RuntimeError), store.batch():
                    store.delete(id)
                    raise RuntimeError("undo it")
        store._check()  # every set of 2 linkers or more has its order, equal to it
        restored = Store(Config(clock=clock))
        restored.restore(store.items_locked())
        restored._check()
    for each in (store, restored):
        got = _sorted(each.neighbours(order, relations, reach=reach))
        assert got == _brute(store, order, relations, reach)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    relations=st.sets(st.sampled_from(RELATIONS), min_size=1),
    reach=st.integers(0, 8),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
)
def test_both_search_paths_agree_with_hubs_kept_in_order(
    data: st.DataObject, relations: set[str], reach: int, query: list[str]
) -> None:
    """:func:`test_both_search_paths_stop_spreading_at_the_same_place`, the general path
    reading its linkers from the kept orders (from 2 linkers on)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_linkers, "ORDERED_FROM", 2)
        store, _ = data.draw(graphs())
        config = SearchConfig(store=store, spread_relations=tuple(sorted(relations)))
        searcher, q = Searcher(config), " ".join(query)
        patch.setattr(limits, "SPREAD_REACH", reach)
        lean = searcher.hybrid_search(q, limit=12)
        general = searcher.hybrid_search(q, limit=12, explain=True)
    assert store.search_snapshot() is not None, "the plain search took the lean path"
    assert [(r.item.id, r.score) for r in lean] == [(r.item.id, r.score) for r in general]


def test_a_search_on_a_hub_does_not_copy_its_linkers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The general path took a hub's first linkers by id from a copy of its whole set,
    heapified (8-16 ms at 100,000 linkers, for a thousand of them): the memory it
    allocated grew with the hub. Now it reads them from the order kept at write time.

    Measured in bytes allocated (deterministic), not in time: at 30,000 linkers the
    copy alone is 240,000 bytes (a pointer each); a search reading 100 allocates far less.
    """
    n = 30_000
    rnd = random.Random(7)
    spokes = [
        Item.model_validate(
            {
                "id": f"s{rnd.getrandbits(64):016x}",  # not in id order
                "kind": "note",
                "title": "spoke",
                "links": [{"to_id": "hub", "relation": "precedes"}],
            }
        )
        for _ in range(n)
    ]
    store = Store()
    store.restore([Item(id="hub", kind="note", title="ledger pool exhausted"), *spokes])
    searcher = Searcher(SearchConfig(store=store, spread_relations=("precedes",)))
    monkeypatch.setattr(limits, "SPREAD_REACH", 100)
    first = sorted(s.id for s in spokes)[:9]
    assert [r.item.id for r in searcher.hybrid_search("ledger pool", explain=True)] == [
        "hub",
        *first,
    ]
    tracemalloc.start()
    try:
        found = store.neighbours(["hub"], ["precedes"], reach=100)
        one_hop = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        results = searcher.hybrid_search("ledger pool", explain=True)  # the general path
        search = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sorted(o for o, _ in found["hub"]) == sorted(s.id for s in spokes)[:100]
    assert [r.item.id for r in results] == ["hub", *first]
    copy = 8 * n
    assert one_hop < copy // 10, one_hop
    assert search < copy // 2, search
