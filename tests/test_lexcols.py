"""The compiled rank's columns are its tuples, and a search that reads them returns the same.

``lex_rank`` with no hit type hands the lean path a ranking as columns
(:class:`~memstore._lexhits.LexicalColumns`: lexicon slots, ids, scores,
covered, fuzzy) instead of :class:`~memstore._lexindex.LexicalHit` tuples, and
the index's :class:`~memstore._lexhits.SlotMap` turns the lexicon slots into a
snapshot's slots, remembering them. Here stores are driven through writes
(new ids, replaced ones, links), deletions, snapshots taken along the way and
``Store.save_lexicon`` compactions (which move every lexicon slot without a
write: a map keyed by the write generation alone would place moved slots),
and after each step:

* the columns read as a sequence are the tuple path's hits, field for field
  and type for type, and the numpy path's (``MEMSTORE_PURE_PYTHON``'s, the oracle),
  the lexical channel's and the BM25 channel's alike;
* the map places each hit where the snapshot's ``id -> slot`` dictionary does,
  the current snapshot's and an older one's alike;
* the lean fusion left by the columns is the one left by the tuples;
* a hybrid search (lean, and general with ``explain``) returns the same
  results, scores and relevances bit for bit as the pure-Python one.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore import Config, Item, Store, _wordbatch
from memstore._lexhits import LexicalColumns, LexicalHit, SlotMap, any_fuzzy
from memstore._lexindex import LexicalHits
from memstore._search_snapshot import SearchSnapshot, micros
from memstore.search import SearchConfig, Searcher, SearchResult
from memstore.search._lean import LeanFusion
from memstore_index.cellstore import CellStore
from memstore_index.hash_embedder import HashEmbedder
from tests.conftest import T0, FakeClock

pytestmark = pytest.mark.skipif(
    _wordbatch.speedups is None, reason="memstore._speedups is not built (or switched off)"
)

WORDS = ["ledger", "pool", "deploy", "friday", "tax", "kitten", "pottery", "bowl", "api"]
QUERY_WORDS = [*WORDS, "ledgr", "pot", "kittens", "zebra"]
"""Exact words, a typo and a prefix (fuzzy and substring matches), a plural, an unknown."""
KINDS = ["note", "event", "stable_fact"]
PARTS = ["", "a", "b"]

_ops = st.one_of(
    st.tuples(
        st.just("put"),
        st.integers(0, 12),  # an id: a held one is replaced
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
        st.sampled_from(KINDS),
        st.sampled_from(PARTS),
        st.booleans(),  # links to the id before it
    ),
    st.tuples(st.just("delete"), st.integers(0, 12)),
    st.tuples(st.just("save")),
    st.tuples(st.just("snapshot")),
    st.tuples(
        st.just("search"),
        st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=3),
        st.sampled_from(["", "", "note"]),
        st.sampled_from([None, "a", "b"]),
        st.integers(1, 30),
    ),
)


def _item(i: int, words: list[str], kind: str, part: str, linked: bool, n: int) -> Item:
    return Item.model_validate(
        {
            "id": f"i{i:03d}",
            "kind": kind,
            "title": " ".join(words[:2]),
            "content": " ".join(words[2:]) or words[0],
            "tags": [f"tenant/{part}"] if part else [],
            "links": [{"to_id": f"i{i - 1:03d}", "relation": "precedes"}] if linked and i else [],
            "updated_at": T0 + dt.timedelta(hours=n % 3),  # update times that tie
            "event_date": "2025-01-02" if kind == "event" else "",
            "confidence": "high" if kind == "stable_fact" else "",
        }
    )


def _typed(hits: Any) -> list[tuple[Any, ...]]:
    """The hits with each field's type: ``1 == True``, and equal tuples must not hide it."""
    return [(*h, *map(type, h), type(h)) for h in hits]


def _same_hits(cols: Any, tuples: LexicalHits) -> None:
    """``cols`` reads as ``tuples``: one hit at a time (before and after), whole, and sliced."""
    assert len(cols) == len(tuples)
    if len(tuples):
        assert _typed([cols[0], cols[-1]]) == _typed([tuples[0], tuples[-1]])
    assert _typed(cols) == _typed(tuples)
    assert _typed(cols[1:4]) == _typed(tuples[1:4])
    assert any_fuzzy(cols) == any(h.fuzzy for h in tuples)
    if isinstance(cols, LexicalColumns):
        assert cols.ids == tuples.ids
        assert cols.scores.tobytes() == tuples.scores.tobytes()


def _fusions(store: Store, snap: SearchSnapshot, by_score: bool, hits: list[Any]) -> None:
    """Lean fusions fed each of ``hits`` (as the lexical channel, then as feedback) end alike."""
    searcher = Searcher(SearchConfig(store=store))
    states = []
    for h in hits:
        fusion = LeanFusion(searcher, snap, micros(T0), "", "", by_score)
        fusion.add_lexical(h, None)
        fusion.add_feedback(h, 0.5)
        raw = fusion.lexical_column()
        assert raw is not None
        states.append((fusion._base.tobytes(), fusion._scored.tobytes(), raw.tobytes()))
    assert all(s == states[0] for s in states)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_ops, min_size=1, max_size=40), by_score=st.booleans())
def test_the_columns_are_the_tuples_through_writes_deletions_and_saves(
    ops: list[tuple[Any, ...]], by_score: bool
) -> None:
    store = Store(Config(clock=FakeClock(T0)))  # a clock that stands: update times tie
    old: SearchSnapshot | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for n, op in enumerate(ops):
            if op[0] == "put":
                store.upsert(_item(op[1], *op[2:], n))
            elif op[0] == "delete":
                store.delete(f"i{op[1]:03d}")
            elif op[0] == "save":  # compacts the lexicon: every live slot may move
                store.save_lexicon(os.path.join(tmp, "lex.npz"), generation=n)
            elif op[0] == "snapshot":
                old = store.search_snapshot()
            if op[0] == "search":
                _check(store, old, by_score, *op[1:])
            else:  # and a broad query after every other step, matching most items
                _check(store, old, by_score, WORDS, "", None, 30)


def _check(
    store: Store,
    old: SearchSnapshot | None,
    by_score: bool,
    words: list[str],
    kind: str,
    part: str | None,
    limit: int,
) -> None:
    """The columns against the tuples and the oracle, the map against ``old`` (a snapshot
    taken earlier, or ``None``) and the current snapshot, the fusions against each other."""
    query = " ".join(words)
    cols, k = store._keyword_columns(query, kind, "", limit, part)
    tuples, k2 = store.keyword_ranked(query, kind, limit=limit, partition=part)
    with _wordbatch.pure_python():
        oracle, k3 = store.keyword_ranked(query, kind, limit=limit, partition=part)
    assert k == k2 == k3
    assert isinstance(tuples, LexicalHits)
    assert _typed(tuples) == _typed(oracle)
    assert not tuples or isinstance(cols, LexicalColumns)
    _same_hits(cols, tuples)
    snap = store.search_snapshot()
    assert snap is not None
    for s in (snap, old):
        if s is not None and isinstance(cols, LexicalColumns):
            want = [s.slot_of(h.id) for h in tuples]
            got, every = cols.snapshot_slots(s.slot, len(s))
            assert got.tolist() == want and every == (-1 not in want)
    _fusions(store, snap, by_score, [cols, tuples, list(tuples)])
    # The BM25 channel: the same columns of its own ranking.
    bm25 = store._bm25_ranked(query, kind, "", limit, part, columns=True)
    bm25_tuples = store.keyword_bm25(query, kind, limit=limit, partition=part)
    with _wordbatch.pure_python():
        bm25_oracle = store.keyword_bm25(query, kind, limit=limit, partition=part)
    assert _typed(bm25_tuples) == _typed(bm25_oracle)
    assert not bm25_tuples or isinstance(bm25, LexicalColumns)
    _same_hits(bm25, bm25_tuples)


def _placed(cols: LexicalColumns, snap: SearchSnapshot) -> dict[str, int]:
    slots, _ = cols.snapshot_slots(snap.slot, len(snap))
    return dict(zip(cols.ids, slots.tolist(), strict=True))


def test_the_map_learns_an_id_a_later_snapshot_adds() -> None:
    """An id the snapshot's dictionary lacks is not remembered as missing: the next
    snapshot, derived from it, shares the dictionary and adds the id."""
    store = Store()
    store.upsert(Item(id="a", kind="note", content="ledger pool"))
    first = store.search_snapshot()
    assert first is not None
    store.upsert(Item(id="b", kind="note", content="ledger"))  # sorts above "a": derived
    cols, _ = store._keyword_columns("ledger", "", "", 10, None)
    assert isinstance(cols, LexicalColumns) and sorted(cols.ids) == ["a", "b"]
    assert _placed(cols, first) == {"a": 0, "b": -1}
    second = store.search_snapshot()
    assert second is not None and second.slot is first.slot  # shared, grown
    assert _placed(cols, second) == {"a": 0, "b": 1}


def test_a_save_between_two_searches_moves_no_hit() -> None:
    """A compaction renumbers the lexicon without a write: the snapshot (and its dictionary)
    stay, the lexicon's ids list is new, and the map must not place a hit by its old slot."""
    store = Store()
    for i in range(4):
        store.upsert(Item(id=f"x{i}", kind="note", content=f"filler {i}"))
    store.upsert(Item(id="y", kind="note", content="filler ledger"))
    store.keyword_search("filler")  # indexed (writes wait for the next read)
    store.delete("x0")
    store.delete("x1")  # two dead slots first: a compaction moves every other one
    snap = store.search_snapshot()
    assert snap is not None
    before, _ = store._keyword_columns("filler", "", "", 10, None)
    assert isinstance(before, LexicalColumns)
    assert _placed(before, snap) == {id: snap.slot[id] for id in before.ids}
    with tempfile.TemporaryDirectory() as tmp:
        store.save_lexicon(os.path.join(tmp, "lex.npz"), generation=1)
    assert store.search_snapshot() is snap  # no write: the same snapshot
    after, _ = store._keyword_columns("filler", "", "", 10, None)
    assert isinstance(after, LexicalColumns) and after.ids == before.ids
    assert after.lex_slots.tolist() != before.lex_slots.tolist()  # moved
    assert _placed(after, snap) == {id: snap.slot[id] for id in after.ids}


def test_the_map_starts_again_for_another_lexicon_list_or_dictionary() -> None:
    ids: list[str | None] = ["a", "b", "c"]
    m = SlotMap()

    def placed(lexicon: list[str | None], slot: dict[str, int], at: list[int]) -> list[int]:
        got, _ = m.slots(
            lexicon, slot, np.array(at, np.intp), tuple(lexicon[i] or "" for i in at), 9
        )
        return got.tolist()

    assert placed(ids, {"a": 5, "c": 7}, [2, 0]) == [7, 5]
    assert placed(ids, {"a": 5, "c": 7}, [2, 0]) == [7, 5]
    slot = {"a": 1, "c": 0}  # a new dictionary
    assert placed(ids, slot, [2, 0]) == [0, 1]
    moved: list[str | None] = ["c", "a"]  # a compaction: a new list, the same dictionary
    assert placed(moved, slot, [1, 0]) == [1, 0]


@st.composite
def _lookups(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Calls of one map: over two ids lists and two dictionaries (values past ``size`` too),
    the lists growing, the dictionaries gaining ids, in any order."""
    names = [f"n{i}" for i in range(30)]
    lists: list[list[str | None]] = [[], []]
    dicts: list[dict[str, int]] = [{}, {}]
    calls = []
    for _ in range(draw(st.integers(1, 12))):
        which, d = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        lexicon = lists[which]
        lexicon.extend(draw(st.lists(st.sampled_from([*names, None]), max_size=8)))
        for name in draw(st.lists(st.sampled_from(names), max_size=6)):
            dicts[d].setdefault(name, len(dicts[d]))
        live = [i for i, id in enumerate(lexicon) if id is not None]
        at = draw(st.lists(st.sampled_from(live), unique=True)) if live else []
        size = draw(st.integers(0, 32))
        calls.append((lexicon, dicts[d], at, tuple(lexicon[i] or "" for i in at), size))
    return calls


@settings(max_examples=200, deadline=None)
@given(_lookups())
def test_the_compiled_map_is_the_numpy_one(calls: list[tuple[Any, ...]]) -> None:
    native, oracle = SlotMap(), SlotMap()
    for lexicon, slot, at, ids, size in calls:
        lex_slots = np.array(at, np.intp)
        got = native.slots(lexicon, slot, lex_slots, ids, size)
        with _wordbatch.pure_python():
            want = oracle.slots(lexicon, slot, lex_slots, ids, size)
        assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
        held = [slot.get(id, -1) for id in ids]
        assert got[0].tolist() == [v if v < size else -1 for v in held]
        assert native._state is not None and oracle._state is not None
        assert native._state[2].tolist() == oracle._state[2].tolist()


def _results(results: list[SearchResult]) -> list[tuple[Any, ...]]:
    return [(r.item.id, r.score, r.relevance, r.collapsed_count, r.via) for r in results]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(_ops, min_size=1, max_size=30),
    fusion=st.sampled_from(["score", "rrf"]),
    always_fuse=st.booleans(),
    bm25_weight=st.sampled_from([0.0, 0.1]),
)
def test_a_search_on_the_columns_is_the_pure_python_search(
    ops: list[tuple[Any, ...]], fusion: str, always_fuse: bool, bm25_weight: float
) -> None:
    clock = FakeClock(T0)
    store = Store(Config(clock=clock))
    cells = CellStore(HashEmbedder(dim=32))
    cells.attach(store)
    cfg = SearchConfig(
        store=store,
        cells=lambda: cells,
        fusion=fusion,
        always_fuse=always_fuse,
        bm25_weight=bm25_weight,
        spread_relations=("precedes",),
    )
    searcher = Searcher(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        for n, op in enumerate(ops):
            clock.advance(dt.timedelta(minutes=10))
            if op[0] == "put":
                store.upsert(_item(op[1], *op[2:], n))
            elif op[0] == "delete":
                store.delete(f"i{op[1]:03d}")
            elif op[0] == "save":
                store.save_lexicon(os.path.join(tmp, "lex.npz"), generation=n)
            elif op[0] == "search":
                _, words, kind, part, limit = op
                query = " ".join(words)
                partition = part or "*"
                for explain in (False, True):  # the lean path, then the general one
                    got = searcher.hybrid_search(
                        query, kind=kind, partition=partition, limit=limit, explain=explain
                    )
                    with _wordbatch.pure_python():
                        want = searcher.hybrid_search(
                            query, kind=kind, partition=partition, limit=limit, explain=explain
                        )
                    assert _results(got) == _results(want)


def test_a_hit_reads_as_the_tuple_path_builds_it() -> None:
    store = Store()
    store.upsert(Item(id="a", kind="note", content="pottery bowl"))
    store.upsert(Item(id="b", kind="note", content="pottery"))
    cols, _ = store._keyword_columns("pottery bowl", "", "", 10, None)
    tuples, _ = store.keyword_ranked("pottery bowl")
    assert isinstance(cols, LexicalColumns)
    assert cols[1] == tuples[1] and type(cols[1]) is LexicalHit
    with pytest.raises(IndexError):
        cols[2]
    assert list(cols) == tuples
