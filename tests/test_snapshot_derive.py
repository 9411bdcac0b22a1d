"""A search snapshot derived across writes answers as one built from scratch.

The store carries its :class:`~memstore._search_snapshot.SearchSnapshot`
across writes that only add new ids or replace held ones
(:meth:`~memstore._search_snapshot.SearchSnapshot.derive`), so the search
right after an agent's write takes the lean path without a pass over every
item. The oracle is the computation from scratch: a twin store fed the same
writes, its search caches and snapshot dropped before every search. Writes
(new ids in order and out of order, replacements, deletions, supersessions,
links, links to ids not stored yet, deadlines) interleave at random with
hybrid searches (the hash embedder, partitions, kind filters, spreading, both
fusions); every search must return the same hits in the same order with the
same scores, relevance, collapse counts and items. A second property holds
the derived snapshot itself to a built one, column by column.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore._search_snapshot import SearchSnapshot
from memstore.errors import MemstoreError
from memstore.item import ThoughtLink
from memstore.search import SPREAD_DECAY, SearchConfig, Searcher, SearchResult
from memstore.vocabulary import Vocabulary
from memstore_index.cellstore import CellStore
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import T0, FakeClock

WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "api", "retry", "when"]
KINDS = ["note", "event", "stable_fact", "watch_item", "system_configuration"]
PARTITIONS = ["", "a", "b"]
POOL = ["k3", "k5", "k7", "m1"]
"""Ids written out of order: below the ids the counter hands out, or between them."""
RELATIONS = ["precedes", "correlates_with"]
CONFIGS: list[dict[str, Any]] = [
    {"no_shaping": True, "spread_relations": ("precedes",)},
    {"no_shaping": True, "fusion": "rrf", "spread_relations": ("precedes", "correlates_with")},
    {"spread_relations": ("precedes",)},
    {"always_fuse": True, "lexical_weight": 0.3, "spread_relations": ("precedes",)},
    {},
]
"""Spreading in most (a link graph carried across a write is what a search could read wrong),
and fused scores unshaped in some: the rerank's scores follow ranks alone, so a wrong loan
shows there only when it reorders."""

text = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
link = st.tuples(
    st.sampled_from([*POOL, "k1", "k2", "k4", "k10", "gone"]),  # "gone": never written
    st.sampled_from(["precedes", "precedes", "correlates_with"]),
    st.sampled_from([1.0, 0.5]),
)
item_fields = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(KINDS),
        "title": text,
        "content": text,
        "partition": st.sampled_from(PARTITIONS),
        "shared": st.booleans(),
        "private": st.integers(0, 6).map(lambda x: x == 0),
        "links": st.sampled_from([0, 0, 1, 2]).flatmap(
            lambda k: st.lists(link, min_size=k, max_size=k)
        ),
        "deadline": st.sampled_from([None, None, None, 1, 5]),
    }
)
search_op = st.tuples(
    st.just("search"),
    text,
    st.sampled_from([*PARTITIONS, "*"]),
    st.sampled_from(["", "", "note", "event"]),
    st.integers(0, len(CONFIGS) - 1),
    st.booleans(),
)
OPS: dict[str, st.SearchStrategy[tuple[Any, ...]]] = {
    "new": st.tuples(st.just("new"), item_fields),  # the counter's next id: above every held one
    "put": st.tuples(st.just("put"), st.sampled_from(POOL), item_fields),  # out of order, or not
    "rewrite": st.tuples(st.just("rewrite"), st.integers(0, 9), item_fields),  # replace a held id
    "delete": st.tuples(st.just("delete"), st.integers(0, 9)),
    "supersede": st.tuples(st.just("supersede"), st.integers(0, 9), st.integers(0, 9)),
    "link": st.tuples(st.just("link"), st.integers(0, 9), link),
    "advance": st.tuples(st.just("advance"), st.sampled_from([1, 30, 80])),
    "search": search_op,
}
WEIGHTS = ["search", "new", "search", "new", "rewrite", "search", "put", "link", "new", "search"]
WEIGHTS += ["link", "search"]
WEIGHTS += ["supersede", "advance", "delete"]
"""Op names, drawn uniformly: a search or a new id most often (an agent's turn), a deletion
seldom (it makes the next snapshot a build)."""
op = st.sampled_from(WEIGHTS).flatmap(OPS.__getitem__)
WRITES = [w for w in WEIGHTS if w != "search"]


def _item(id: str, f: dict[str, Any], now: dt.datetime) -> Item:
    tags = [f"tenant/{f['partition']}"] if f["partition"] else []
    if f["shared"]:
        tags.append("shared")
    if f["private"]:
        tags.append("user:u1")
    return Item.model_validate(
        {
            "id": id,
            "kind": f["kind"],
            "title": f["title"],
            "content": f["content"],
            "tags": tags,
            "scope": "private" if f["private"] else "public",
            "confidence": "high" if f["kind"] == "stable_fact" else "",
            "event_date": "2025-01-02" if f["kind"] == "event" else "",
            "links": [
                {"to_id": to, "relation": rel, "weight": w} for to, rel, w in f["links"] if to != id
            ],
            "stale_after": None
            if f["deadline"] is None
            else now + dt.timedelta(days=f["deadline"]),
        }
    )


class Twin:
    """A store with its vector index and searchers, one per configuration."""

    def __init__(self, clock: FakeClock) -> None:
        vocab = Vocabulary(non_searchable=("system_configuration",))
        self.store = Store(Config(clock=clock, vocabulary=vocab))
        self.cells = CellStore(HashEmbedder(dim=32))
        self.cells.attach(self.store)
        self.searchers = [
            Searcher(SearchConfig(store=self.store, cells=lambda: self.cells, **cfg))
            for cfg in CONFIGS
        ]

    def cold(self) -> None:
        """Forget every search cache, the snapshot too: the next search works from scratch."""
        self.store.clear_search_caches()
        self.store._drop_search_snapshot()


def _apply(store: Store, o: tuple[Any, ...], counter: list[int], now: dt.datetime) -> None:
    held = sorted(store._items)  # every stored id, retired ones too
    name = o[0]
    if name == "new":
        counter[0] += 1
        store.upsert(_item(f"k{counter[0]}", o[1], now))
    elif name == "put":
        store.upsert(_item(o[1], o[2], now))
    elif name == "rewrite" and held:
        store.upsert(_item(held[o[1] % len(held)], o[2], now))
    elif name == "delete" and held:
        store.delete(held[o[1] % len(held)])
    elif name == "supersede" and held:
        a, b = held[o[1] % len(held)], held[o[2] % len(held)]
        if a != b:
            store.mark_superseded(a, b)
    elif name == "link" and held:
        src = held[o[1] % len(held)]
        to, rel, w = o[2]
        if to != src:
            store.add_link(src, ThoughtLink(to_id=to, relation=rel, weight=w))


def _outcome(store: Store, o: tuple[Any, ...], counter: list[int], now: dt.datetime) -> str:
    """:func:`_apply`, and the error that refused the write (``""``: none)."""
    try:
        _apply(store, o, counter, now)
    except MemstoreError as e:
        return str(e)
    return ""


def _view(results: list[SearchResult]) -> list[tuple[Any, ...]]:
    return [(r.item.id, r.score, r.relevance, r.collapsed_count, r.via, r.item) for r in results]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=12, max_size=40))
def test_searches_after_writes_answer_as_from_scratch(ops: list[tuple[Any, ...]]) -> None:
    clock = FakeClock(T0)
    warm, cold = Twin(clock), Twin(clock)
    counters = ([0], [0])
    for o in ops:
        if o[0] == "advance":
            clock.advance(dt.timedelta(hours=o[1]))
        elif o[0] != "search":
            outcomes = [
                _outcome(twin.store, o, counter, clock())
                for twin, counter in zip((warm, cold), counters, strict=True)
            ]
            assert outcomes[0] == outcomes[1]
        else:
            _, query, partition, kind, cfg, full = o
            cold.cold()
            got, want = (
                (t.searchers[cfg].hybrid_search_full if full else t.searchers[cfg].hybrid_search)(
                    query, kind=kind, partition=partition, limit=5
                )
                for t in (warm, cold)
            )
            assert _view(got) == _view(want), (query, partition, kind, cfg, full)


# --------------------------------------------------------------- the snapshot


def _decoded(snap: SearchSnapshot) -> dict[str, Any]:
    """Everything a search reads from ``snap``, codes turned back into names."""
    n = len(snap)
    kinds = {c: k for k, c in snap.kind_code.items()}
    parts = {c: p for p, c in snap.partition_code.items()}
    out: dict[str, Any] = {
        "ids": snap.ids[:n],
        "items": snap.items[:n],
        "slot": {id: snap.slot_of(id) for id in [*snap.ids, "gone"]},
        "kind": [kinds[int(c)] for c in snap.kind],
        "partition": [parts[int(c)] for c in snap.partition],
        "first_deadline_us": snap.first_deadline_us,
    }
    for name in ("live", "shared", "deadline_us", "updated_us", "has_update", "id_rank", "words"):
        out[name] = getattr(snap, name).tolist()
    for rels in (("precedes",), tuple(RELATIONS)):
        g = snap.graph(rels)
        out[f"graph{rels}"] = [
            sorted(
                zip(
                    g.other[g.start[s] : g.start[s + 1]].tolist(),
                    g.weight[g.start[s] : g.start[s + 1]].tolist(),
                    g.own[g.start[s] : g.start[s + 1]].tolist(),
                    strict=True,
                )
            )
            for s in range(n)
        ]
    start, ranks = snap.linkers()
    out["linkers"] = [ranks[start[s] : start[s + 1]].tolist() for s in range(n)]
    for part in ["a", "b", "", "c"]:
        out[f"partition_mask {part}"] = snap.partition_mask(part).tolist()
    for key in [("", ("system_configuration",), "a"), ("note", (), None), ("", (), "b")]:
        out[f"readable {key}"] = snap.readable_mask(*key).tolist()
    return out


def _warm_up(snap: SearchSnapshot) -> None:
    """Fill the caches a derivation carries: graphs, linker rows, masks."""
    snap.graph(("precedes",))
    snap.graph(tuple(RELATIONS))
    snap.linkers()
    snap.partition_mask("a")
    snap.readable_mask("", ("system_configuration",), "a")
    snap.readable_mask("note", (), None)
    snap.words  # noqa: B018 (the word counts, counted on first use, carried once counted)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(WRITES).flatmap(OPS.__getitem__), min_size=4, max_size=30), st.data()
)
def test_a_derived_snapshot_is_the_one_a_build_makes(
    ops: list[tuple[Any, ...]], data: st.DataObject
) -> None:
    clock = FakeClock(T0)
    store = Store(Config(clock=clock))
    counter = [0]
    derived = 0
    for o in ops:
        if o[0] == "advance":
            clock.advance(dt.timedelta(hours=o[1]))
            continue
        _outcome(store, o, counter, clock())
        if data.draw(st.booleans(), label="search now"):
            before = store._search_snap
            snap = store.search_snapshot()
            assert snap is not None
            derived += before is not None and snap.ids is before.ids
            built = SearchSnapshot(snap.generation, list(store._items.values()))
            assert _decoded(snap) == _decoded(built)
            _warm_up(snap)


def test_a_write_of_a_new_id_derives_the_next_snapshot(clock: FakeClock) -> None:
    store = Store(Config(clock=clock))
    for i in range(3):
        store.upsert(Item(id=f"n{i}", kind="note", title=f"ledger {i}"))
    first = store.search_snapshot()
    assert first is not None
    _warm_up(first)
    store.upsert(Item(id="n9", kind="note", title="ledger pool"))
    second = store.search_snapshot()
    assert second is not None and second is not first
    assert second.ids is first.ids, "derived: the id list is shared and extended"
    assert len(first) == 3 and len(second) == 4 and first.slot_of("n9") == -1
    assert _decoded(second) == _decoded(SearchSnapshot(second.generation, store._items.values()))
    store.upsert(Item(id="a0", kind="note", title="below every id"))
    third = store.search_snapshot()
    assert third is not None and third.ids is not second.ids, "a lower id: built again"
    store.delete("n9")
    assert store._search_snap is None, "a deletion drops the snapshot"
    assert np.array_equal(second.kind, np.zeros(4, np.int32)), "an earlier snapshot is unchanged"


def test_a_new_item_with_a_link_is_spread_to_after_a_write(clock: FakeClock) -> None:
    """The graph is not carried over a new item's link: its neighbour gets its loan."""
    warm, cold = Twin(clock), Twin(clock)
    for twin in (warm, cold):
        twin.store.upsert(Item(id="k1", kind="note", title="ledger pool"))
        twin.store.upsert(Item(id="k2", kind="note", title="kitten"))
    warm.searchers[0].hybrid_search("ledger")  # builds the snapshot and its graph
    for twin in (warm, cold):
        linked = {"to_id": "k2", "relation": "precedes"}
        twin.store.upsert(
            Item.model_validate({"id": "k3", "kind": "note", "title": "ledger", "links": [linked]})
        )
    cold.cold()
    got, want = (t.searchers[0].hybrid_search("ledger") for t in (warm, cold))
    scores = {r.item.id: r.score for r in got}  # unshaped: the fused scores
    assert scores["k2"] == pytest.approx(SPREAD_DECAY * scores["k3"]), "k3's loan to k2"
    assert _view(got) == _view(want)


def test_a_new_item_past_its_deadline_takes_no_loan(clock: FakeClock) -> None:
    """A derived snapshot's earliest deadline counts the new items': one past it is not read."""
    warm, cold = Twin(clock), Twin(clock)
    linked = {"to_id": "k9", "relation": "precedes"}
    for twin in (warm, cold):
        twin.store.upsert(
            Item.model_validate({"id": "k1", "kind": "note", "title": "ledger", "links": [linked]})
        )
    warm.searchers[0].hybrid_search("ledger")  # builds the snapshot: no deadline in it
    for twin in (warm, cold):
        deadline = clock() + dt.timedelta(hours=1)
        twin.store.upsert(Item(id="k9", kind="note", title="kitten", stale_after=deadline))
    clock.advance(dt.timedelta(hours=2))
    cold.cold()
    got, want = (t.searchers[0].hybrid_search("ledger") for t in (warm, cold))
    assert "k9" not in [r.item.id for r in got]
    assert _view(got) == _view(want)
