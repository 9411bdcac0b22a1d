"""``search_slots`` hands over exactly the hits ``search_vector`` gives, as slots and similarities.

The oracle is the index's own pair answer: each hit's id looked up in the
caller's ``id -> slot`` dictionary (-1 when it holds none), its similarity as
the pair carries it. Hypothesis draws the index (partitions, kinds, private
entries, twins: one vector under several ids, deletions, a graph or an exact
scan), the dictionary (ids missing, values past a snapshot's length) and the
writes between searches (new ids the dictionary learns, deletions, a
compaction), so the label table kept between searches is checked as it ages.
The lean fusion must then score a :class:`SlotHits` as it scores the pairs.
And the index's shortcut for a plain float32 query vector (``_unit_query``)
must give the full check-and-normalise path's vector, bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store
from memstore._search_snapshot import micros
from memstore.arguments import query_vector_arg
from memstore.search import SearchConfig, Searcher
from memstore.search._lean import LeanFusion
from memstore.search._reads import semantic_hits
from memstore.search._slothits import SlotHits
from memstore_index import _tuning as tune
from memstore_index._search import _unit_query
from memstore_index.cellstore import CellStore
from memstore_index.embedder import unit_rows
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import T0, FakeClock

WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "pottery", "bowl", "api"]
PARTITIONS = ["", "a", "b"]


@contextmanager
def small_graph() -> Iterator[None]:
    """A graph from 9 vectors on (the threshold as a tuning knob, for a small index)."""
    was = tune.EXACT_THRESHOLD
    tune.EXACT_THRESHOLD = 8
    try:
        yield
    finally:
        tune.EXACT_THRESHOLD = was


def _oracle(cells: CellStore, slot: dict[str, int], vec: Any, k: int, **kw: Any) -> Any:
    pairs = cells.search_vector(vec, k, **kw)
    return pairs, [slot.get(e.id, -1) for e, _ in pairs], [s for _, s in pairs]


def _check(cells: CellStore, slot: dict[str, int], vec: Any, k: int, **kw: Any) -> None:
    pairs, slots, sims = _oracle(cells, slot, vec, k, **kw)
    got = cells.search_slots(vec, k, slot, **kw)
    assert isinstance(got, SlotHits)
    assert got.slots.tolist() == slots
    assert got.sims.tolist() == sims  # the same floats, bit for bit
    assert list(got) == pairs  # and the same pairs, made when read


@st.composite
def entries(draw: st.DrawFn, n: int, start: int = 0) -> list[tuple[IndexEntry, str]]:
    out = []
    for i in range(start, start + n):
        kind = draw(st.sampled_from(["note", "event"]))
        scope = "private" if draw(st.integers(0, 6)) == 0 else "public"
        entry = IndexEntry(
            f"e{i:03d}",
            kind=kind,
            subject=draw(st.sampled_from(["", "s1"])),
            scope=scope,
            partition=draw(st.sampled_from(PARTITIONS)),
        )
        out.append(
            (entry, " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))))
        )
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(3, 40), st.integers(1, 12), st.booleans())
def test_search_slots_gives_search_vectors_hits_as_slots(
    data: st.DataObject, n: int, k: int, center: bool
) -> None:
    with small_graph():
        cells = CellStore(HashEmbedder(dim=16), center=center)
        rows = data.draw(entries(n))
        cells.upsert_many(rows)
        ids = [e.id for e, _ in rows]
        # The caller's dictionary: some ids held, some slots past its snapshot's length.
        held = data.draw(st.lists(st.sampled_from(ids), unique=True))
        slot = {id: s for s, id in enumerate(held)}
        queries = [
            cells.embed_query(q)
            for q in data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
        ]
        for step in range(3):
            for vec in queries:
                _check(cells, slot, vec, k)
                _check(cells, slot, vec, k, partitions=("a", ""))
                _check(cells, slot, vec, k, partitions=("b",), subject="s1")
                _check(cells, slot, vec, k, visible=lambda e: e.kind == "note")
                _check(cells, slot, vec, k, exact=True)
            # Writes between searches: new ids (the dictionary learns some), deletions,
            # or a compaction (a new entry list: the table starts afresh).
            more = data.draw(entries(data.draw(st.integers(0, 6)), start=100 * (step + 1)))
            cells.upsert_many(more)
            for e, _ in more:
                if data.draw(st.booleans()):
                    slot[e.id] = len(slot)
            for id in data.draw(st.lists(st.sampled_from(ids), max_size=3, unique=True)):
                cells.remove(id)
                ids.remove(id)
            if data.draw(st.booleans()):
                cells.compact()
            if not ids:
                break


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
        min_size=1,
        max_size=30,
    ),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.booleans(),
    st.booleans(),
)
def test_lean_fusion_scores_slot_hits_as_it_scores_the_pairs(
    texts: list[str], query: str, by_score: bool, foreign: bool
) -> None:
    """``add_semantic`` on :class:`SlotHits` leaves the state it leaves on the same pairs."""
    with small_graph():
        clock = FakeClock(T0)
        store = Store(Config(clock=clock))
        cells = CellStore(HashEmbedder(dim=16))
        cells.attach(store)
        for i, text in enumerate(texts):
            store.upsert(Item(id=f"i{i:02d}", kind="note", content=text, tags=["tenant/a"]))
        if foreign:  # a vector the store does not hold: its slot is masked out
            cells.upsert(IndexEntry("x0", kind="note", partition="a"), query)
        searcher = Searcher(SearchConfig(store=store, cells=lambda: cells))
        snap = store.search_snapshot()
        assert snap is not None
        vec = cells.embed_query(query)
        fusions = [
            LeanFusion(searcher, snap, micros(clock()), "note", "a", by_score) for _ in range(2)
        ]
        cfg, stats = searcher.config, searcher.stats
        hits = semantic_hits(cfg, stats, cells, vec, "note", "", "a", 50, False, fusions[0].slot)
        assert isinstance(hits, SlotHits)
        fusions[0].add_semantic(hits, "semantic")
        fusions[1].add_semantic(
            semantic_hits(cfg, stats, cells, vec, "note", "", "a", 50, False), "semantic"
        )
        a, b = fusions
        assert np.array_equal(a._base, b._base) and np.array_equal(a._scored, b._scored)


def test_a_subclass_search_vector_is_what_search_slots_answers() -> None:
    """An index that overrides ``search_vector`` is asked through it, not around it."""

    class Shifted(CellStore):
        def search_vector(self, vec: Any, k: int, **kw: Any) -> list[tuple[IndexEntry, float]]:
            return [(e, s - 1.0) for e, s in super().search_vector(vec, k, **kw)]

    cells = Shifted(HashEmbedder(dim=16))
    cells.upsert_many([(IndexEntry("a"), "ledger pool"), (IndexEntry("b"), "kitten bowl")])
    vec = cells.embed_query("ledger")
    pairs = cells.search_vector(vec, 2)
    got = cells.search_slots(vec, 2, {"b": 7})
    assert got.sims.tolist() == [s for _, s in pairs] and list(got) == pairs
    assert got.slots.tolist() == [7 if e.id == "b" else -1 for e, _ in pairs]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(width=32, allow_nan=True, allow_infinity=True)
        | st.sampled_from([0.0, -0.0, 1e-45, 3e38, -3e38, 1e-38]),
        min_size=1,
        max_size=40,
    )
)
def test_the_unit_query_shortcut_is_the_full_paths_vector_bit_for_bit(values: list[float]) -> None:
    """``_unit_query`` gives exactly the vector ``query_vector_arg`` + ``unit_rows`` give,
    or ``None`` (NaN, infinity, all zeros: the full path then refuses it)."""
    vec = np.array(values, np.float32)
    got = _unit_query(vec, vec.size)
    finite, nonzero = bool(np.isfinite(vec).all()), bool(vec.any())
    assert (got is None) == (not finite or not nonzero)
    if got is not None:
        want = unit_rows(query_vector_arg(vec, vec.size)[None, :], "q")[0]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert _unit_query(vec.astype(np.float64), vec.size) is None  # other types: the full path
    assert _unit_query(vec, vec.size + 1) is None
