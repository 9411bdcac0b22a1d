"""The rebuilt Searcher returns exactly what the old one did.

``tests/search_oracle.py`` is the Searcher as it was before the lean path
(:mod:`memstore.search._lean`) and the package split. Both search the same
store and vector index here; every result must agree: same ids in the same
order, scores within 1e-9, the same collapse counts and ``via`` links. The
stores are drawn by hypothesis (kinds, partitions, scopes, statuses,
deadlines, update times, links, near-duplicate texts, vectors of items the
store does not hold), and one test replays a LoCoMo conversation when the
dataset is present. The oracle predates ``relevance``: each result's must be
the same on the lean path as on the general one (``explain=True`` takes it).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tests.search_oracle as oracle
from memstore import Config, Item, Store
from memstore._lexindex import LexicalHit, LexicalHits
from memstore._search_snapshot import micros
from memstore.search import SearchConfig, Searcher, SearchResult
from memstore.search._lean import LeanFusion
from memstore.vocabulary import Vocabulary
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry, embed_text, entry_for
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import T0, FakeClock

# Two paraphrases of one fact (near-duplicates) and a distinct fact about the same subject.
PARA_A = (
    "payment api timeout",
    "payment api calls to the ledger time out after 30 seconds under load",
)
PARA_B = (
    "payment api timeouts",
    "under heavy load, ledger calls from the payment api time out after 30s",
)
DISTINCT = (
    "payment api retry policy",
    "failed ledger writes from the payment api are retried three times with exponential backoff",
)
WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "pottery", "bowl", "api", "retry"]
KINDS = ["note", "event", "stable_fact", "watch_item", "hypothesis", "system_configuration"]
PARTITIONS = ["", "a", "b"]
_ROOT = Path(__file__).resolve().parents[1]
LOCOMO = next(
    (
        p
        for p in (d / "shared" / "datasets" / "locomo" / "dev.json" for d in _ROOT.parents[:2])
        if p.exists()
    ),
    _ROOT.parent / "shared" / "datasets" / "locomo" / "dev.json",
)
"""The dataset beside the checkout (``../shared``, as the Makefile has it), or one level up."""


def _text(draw: st.DrawFn, n: int) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=n)))


@st.composite
def stores(draw: st.DrawFn) -> tuple[Store, CellStore, FakeClock]:
    """A store on a fake clock with a CellStore attached, and a few foreign vectors."""
    clock = FakeClock(T0)
    vocab = Vocabulary(non_searchable=("system_configuration",))
    store = Store(Config(clock=clock, vocabulary=vocab))
    cells = CellStore(HashEmbedder(dim=32))
    attached = draw(st.booleans())
    if attached:
        cells.attach(store)
    n = draw(st.integers(1, 14))
    ids = [f"i{i:02d}" for i in range(n)]
    for id in ids:
        tags: list[str] = []
        part = draw(st.sampled_from(PARTITIONS))
        if part:
            tags.append(f"tenant/{part}")
        if draw(st.booleans()) and draw(st.booleans()):
            tags.append("shared")
        private = draw(st.integers(0, 7)) == 0
        if private:
            tags.append("user:u1")
        links = [
            {
                "to_id": draw(st.sampled_from([*(o for o in ids if o != id), "missing"])),
                "relation": draw(st.sampled_from(["precedes", "correlates_with"])),
                "weight": draw(st.sampled_from([1.0, 0.5, 0.25])),
            }
            for _ in range(draw(st.integers(0, 2)))
        ]
        deadline = draw(st.sampled_from([None, None, 1, 2, 30]))
        kind = draw(st.sampled_from(KINDS))
        item = Item.model_validate(
            {
                "id": id,
                "kind": kind,
                "title": _text(draw, 3),
                "content": _text(draw, 6),
                "tags": tags,
                "scope": "private" if private else "public",
                "confidence": "high" if kind == "stable_fact" else "",
                "event_date": "2025-01-0" + draw(st.sampled_from("1234"))
                if kind == "event"
                else "",
                "links": links,
                "stale_after": None if deadline is None else T0 + dt.timedelta(days=deadline),
            }
        )
        store.upsert(item)
        clock.advance(dt.timedelta(hours=draw(st.sampled_from([1, 12, 30]))))
    if draw(st.booleans()):  # restatements of one fact: the near-duplicate collapse
        for j, (title, content) in enumerate(draw(st.permutations([PARA_A, PARA_B, DISTINCT]))):
            kind = draw(st.sampled_from(["stable_fact", "stable_fact", "hypothesis"]))
            store.upsert(
                Item(id=f"f{j}", kind=kind, title=title, content=content, confidence="high")
            )
    if not attached:  # indexed once, then left behind by the writes below (stale entries)
        cells.upsert_many((entry_for(it), embed_text(it)) for it in store.all_items())
    for id in draw(st.lists(st.sampled_from(ids), max_size=3, unique=True)):
        other = draw(st.sampled_from(ids))
        if other != id:
            store.mark_superseded(id, other)
    for i in range(draw(st.integers(0, 3))):  # vectors of items this store does not hold
        part = draw(st.sampled_from(PARTITIONS))
        cells.upsert(IndexEntry(f"x{i}", kind="note", partition=part), _text(draw, 5))
    clock.advance(dt.timedelta(days=draw(st.sampled_from([0, 1, 3]))))
    return store, cells, clock


CONFIGS: list[dict[str, Any]] = [
    {},
    {"spread_relations": ("precedes",)},
    {"fusion": "rrf"},
    {"fusion": "rrf", "spread_relations": ("precedes", "correlates_with")},
    {"always_fuse": True, "lexical_weight": 0.3},
    {"no_shaping": True, "spread_relations": ("precedes",)},
    {"no_shaping": True, "fusion": "rrf", "always_fuse": True},
    {"semantic_gap": 0.2, "semantic_cliff": True},
    {"link_expansion": lambda: True},
    {"subject_routing": True},
]


def _same(got: list[SearchResult], want: list[oracle.SearchResult]) -> None:
    assert [r.item.id for r in got] == [r.item.id for r in want]
    for g, w in zip(got, want, strict=True):
        assert g.score == pytest.approx(w.score, abs=1e-9, rel=0)
        assert (g.collapsed_count, g.via) == (w.collapsed_count, w.via)
        assert g.item == w.item


def _counters(ops: dict[str, int]) -> dict[str, int]:
    """The stats both searchers must agree on: every count, no duration."""
    return {k: v for k, v in ops.items() if not k.endswith(".ns")}


NO_SIGNALS: dict[str, Any] = {
    "date_signal": False,
    "when_signal": False,
    "subject_signal": False,
    "bm25_weight": 0.0,
}
"""The query signals and the BM25 channel postdate the old Searcher: it is compared with them
off."""


def _pair(store: Store, cells: CellStore | None, **cfg: Any) -> tuple[Searcher, oracle.Searcher]:
    new = Searcher(
        SearchConfig(store=store, cells=(lambda: cells) if cells else None, **NO_SIGNALS, **cfg)
    )
    old = oracle.Searcher(
        oracle.SearchConfig(store=store, cells=(lambda: cells) if cells else None, **cfg)
    )
    return new, old


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    env=stores(),
    config=st.sampled_from(CONFIGS),
    query=st.lists(st.sampled_from([*WORDS, "i03", "zebra"]), min_size=1, max_size=3),
    partition=st.sampled_from([*PARTITIONS, "*", "c"]),
    kind=st.sampled_from(["", "", "note", "system_configuration"]),
    limit=st.integers(1, 6),
    full=st.booleans(),
    vectors=st.booleans(),
)
def test_the_searcher_matches_the_old_one_on_any_store(
    env: tuple[Store, CellStore, FakeClock],
    config: dict[str, Any],
    query: list[str],
    partition: str,
    kind: str,
    limit: int,
    full: bool,
    vectors: bool,
) -> None:
    store, cells, _ = env
    new, old = _pair(store, cells if vectors else None, **config)
    # explain=True always takes the general path: relevance must not depend on the path.
    general, _ = _pair(store, cells if vectors else None, **config)
    q = " ".join(query)
    for _ in range(2):  # the second call reuses the cached plan and snapshot
        if full:
            got = new.hybrid_search_full(q, kind=kind, partition=partition, limit=limit)
            want = old.hybrid_search_full(q, kind=kind, partition=partition, limit=limit)
            slow = general.hybrid_search_full(
                q, kind=kind, partition=partition, limit=limit, explain=True
            )
        else:
            got = new.hybrid_search(q, kind=kind, partition=partition, limit=limit)
            want = old.hybrid_search(q, kind=kind, partition=partition, limit=limit)
            slow = general.hybrid_search(
                q, kind=kind, partition=partition, limit=limit, explain=True
            )
        _same(got, want)
        assert [(r.item.id, r.relevance) for r in got] == [(r.item.id, r.relevance) for r in slow]
        assert all(0.0 <= r.relevance <= 1.0 for r in got)
    assert store.search_snapshot() is not None, "a small store is searched on the lean path"
    assert _counters(new.stats.ops()) == _counters(old.stats.ops())


def test_a_write_between_searches_is_seen_by_the_next_one(clock: FakeClock) -> None:
    # The snapshot and the plan cache belong to one generation: a write
    # must invalidate both, or the second search would miss "b".
    store = Store(Config(clock=clock))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    store.upsert(Item(id="a", kind="note", title="ledger pool"))
    new, old = _pair(store, cells, spread_relations=("precedes",))
    _same(new.hybrid_search("ledger pool"), old.hybrid_search("ledger pool"))
    store.upsert(
        Item.model_validate(
            {
                "id": "b",
                "kind": "note",
                "title": "ledger pool size",
                "links": [{"to_id": "a", "relation": "precedes"}],
            }
        )
    )
    got = new.hybrid_search("ledger pool")
    assert {r.item.id for r in got} == {"a", "b"}
    _same(got, old.hybrid_search("ledger pool"))
    store.delete("a")
    _same(new.hybrid_search("ledger pool"), old.hybrid_search("ledger pool"))


def test_a_cached_lexical_plan_does_not_outlive_a_write(clock: FakeClock) -> None:
    # Token weights depend on how many items match: after a write, the
    # cached plan of a repeated query must be recomputed, so the scores equal
    # those of a store that never searched before.
    items = [Item(id=f"n{i}", kind="note", title=f"ledger pool {i}") for i in range(3)]
    items.append(Item(id="t", kind="note", title="ledger tax"))
    warm = Store(Config(clock=clock))
    for it in items[:2]:
        warm.upsert(it)
    warm.keyword_hits("ledger pool")  # caches the plan
    cold = Store(Config(clock=clock))
    for it in items:
        warm.upsert(it)
        cold.upsert(it)
    assert [(h.id, h.score) for _, h in warm.keyword_hits("ledger pool")[0]] == [
        (h.id, h.score) for _, h in cold.keyword_hits("ledger pool")[0]
    ]


def test_spreading_skips_a_neighbour_past_its_deadline(clock: FakeClock) -> None:
    store = Store(Config(clock=clock))
    store.upsert(
        Item.model_validate(
            {
                "id": "hit",
                "kind": "note",
                "title": "ledger pool",
                "links": [{"to_id": "gone", "relation": "precedes"}],
            }
        )
    )
    store.upsert(Item(id="gone", kind="note", title="tax", stale_after=T0 + dt.timedelta(hours=1)))
    store.upsert(Item(id="kept", kind="note", title="friday"))
    store.upsert(
        Item.model_validate(
            {
                "id": "hit2",
                "kind": "note",
                "title": "ledger pool size",
                "links": [{"to_id": "kept", "relation": "precedes"}],
            }
        )
    )
    clock.advance(dt.timedelta(hours=2))
    new, old = _pair(store, None, spread_relations=("precedes",))
    got = new.hybrid_search("ledger pool", limit=5)
    assert [r.item.id for r in got] == ["hit", "hit2", "kept"]
    _same(got, old.hybrid_search("ledger pool", limit=5))


def test_restatements_collapse_into_the_best_ranked_one(clock: FakeClock) -> None:
    store = Store(Config(clock=clock))
    for id, (title, content) in zip(["a", "b", "c"], [PARA_A, PARA_B, DISTINCT], strict=True):
        store.upsert(
            Item(id=id, kind="stable_fact", title=title, content=content, confidence="high")
        )
    new, old = _pair(store, None)
    got = new.hybrid_search("payment api timeout")
    assert [(r.item.id, r.collapsed_count) for r in got] == [("a", 1), ("c", 0)]
    _same(got, old.hybrid_search("payment api timeout"))


def test_a_rank_fusion_ranks_only_the_semantic_hits_the_caller_can_read(clock: FakeClock) -> None:
    # The vector index still holds "old" after the store superseded it: in a
    # rank fusion it must take no rank, or every readable hit below it would
    # lose one.
    store = Store(Config(clock=clock))
    for id, title in [("old", "ledger pool quokka"), ("new", "ledger pool"), ("b", "pool tax")]:
        store.upsert(Item(id=id, kind="note", title=title))
    cells = CellStore(HashEmbedder(dim=32))
    cells.upsert_many((entry_for(it), embed_text(it)) for it in store.all_items())
    assert store.mark_superseded("old", "new")
    new, old = _pair(store, cells, fusion="rrf", always_fuse=True, no_shaping=True)
    got = new.hybrid_search("ledger pool quokka", limit=3)
    assert "old" not in [r.item.id for r in got]
    _same(got, old.hybrid_search("ledger pool quokka", limit=3))


def _locomo_turns(conv: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """``(id, speaker, text, next id in the session)`` for each turn of one conversation."""
    c = conv["conversation"]
    out: list[tuple[str, str, str, str]] = []
    n = 1
    while f"session_{n}" in c:
        turns = c[f"session_{n}"]
        for i, t in enumerate(turns):
            nxt = f"{conv['sample_id']}:{turns[i + 1]['dia_id']}" if i + 1 < len(turns) else ""
            out.append((f"{conv['sample_id']}:{t['dia_id']}", t["speaker"], t["text"], nxt))
        n += 1
    return out


@pytest.mark.skipif(not LOCOMO.exists(), reason="the LoCoMo dataset is not present")
def test_the_searcher_matches_the_old_one_on_a_locomo_conversation(clock: FakeClock) -> None:
    conv = json.loads(LOCOMO.read_text())[0]
    store = Store(Config(clock=clock))
    cells = CellStore(HashEmbedder(dim=128), center=True)
    cells.attach(store)
    with store.batch():
        for id, speaker, text, nxt in _locomo_turns(conv):
            links = [{"to_id": nxt, "relation": "precedes"}] if nxt else []
            store.upsert(
                Item.model_validate(
                    {
                        "id": id,
                        "kind": "event",
                        "event_date": "2023-05-08",
                        "title": f"{speaker}: {text}",
                        "subject": speaker,
                        "tags": [f"tenant/{conv['sample_id']}"],
                        "links": links,
                    }
                )
            )
    questions = [qa["question"] for qa in conv["qa"]][:80]
    for cfg in ({"spread_relations": ("precedes",)}, {"fusion": "rrf"}):
        new, old = _pair(store, cells, **cfg)
        for q in questions:
            for limit in (5, 10):
                got = new.hybrid_search(q, partition=conv["sample_id"], limit=limit)
                _same(got, old.hybrid_search(q, partition=conv["sample_id"], limit=limit))
                slow = new.hybrid_search(q, partition=conv["sample_id"], limit=limit, explain=True)
                assert [r.relevance for r in got] == [r.relevance for r in slow]
    assert store.search_snapshot() is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stores(),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.booleans(),
    st.booleans(),
)
def test_lean_fusion_reads_the_index_columns_as_it_reads_the_hits(
    env: tuple[Store, CellStore, FakeClock], query: str, by_score: bool, foreign: bool
) -> None:
    """``add_lexical`` on :class:`LexicalHits` (its ``ids`` and ``scores`` columns) leaves
    the same state as on a plain list of the same hits, one of them unknown or not."""
    store, _, clock = env
    searcher = Searcher(SearchConfig(store=store))
    snap = store.search_snapshot()  # a small store: built at the first ask
    assert snap is not None
    hits, _ = store.keyword_ranked(query, limit=50)
    if foreign:  # an id the store does not hold: its slot is masked out
        more = [*hits, LexicalHit("nowhere", 0.01, 1, False)]
        hits = LexicalHits(more, tuple(h.id for h in more), np.array([h.score for h in more]))
    assert isinstance(hits, LexicalHits)
    fusions = [LeanFusion(searcher, snap, micros(clock()), "", "", by_score) for _ in range(2)]
    fusions[0].add_lexical(hits, None)
    fusions[1].add_lexical(list(hits), None)  # a plain list: read field by field
    a, b = fusions
    assert np.array_equal(a._base, b._base) and np.array_equal(a._scored, b._scored)
    raw_a, raw_b = a.lexical_column(), b.lexical_column()
    assert raw_a is not None and raw_b is not None
    assert np.array_equal(raw_a, raw_b, equal_nan=True)
