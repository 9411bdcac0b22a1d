"""The LoCoMo benchmark's ``--embed-context`` choices (``benchmarks/_locomo_context.py``).

Each choice is checked against a brute-force statement of its rule: the
neighbours of a turn (same session only), the ``prev-text`` strings, the
vector mixes, and ``MaxCells`` (the larger of two similarities) against the
maximum of two exact scans. ``build_cells`` must index exactly those vectors,
and leave the default (``own``) as it was.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.append(str(BENCH))  # after the stdlib: benchmarks/ has an http.py

import _locomo_context as lc  # noqa: E402
from _locomo_data import Conversation, Turn, transcript_line  # noqa: E402
from _locomo_embed import CachingEmbedder  # noqa: E402
from _locomo_modes import Built, build_cells, build_stores, make_searchers  # noqa: E402

from memstore_index import CellStore, IndexEntry, text_hash  # noqa: E402
from memstore_index.hash_embedder import HashEmbedder  # noqa: E402

DATE = "2023-05-08T13:56:00Z"
sessions = st.lists(st.integers(1, 4), min_size=1, max_size=12).map(sorted)


def _turns(sess: list[int]) -> list[Turn]:
    return [
        Turn("c", f"D{s}:{i}", s, "AB"[i % 2], f"turn {i} on {i * 7 % 5}", "", DATE)
        for i, s in enumerate(sess)
    ]


@given(sessions)
def test_neighbours_stay_in_the_session(sess: list[int]) -> None:
    turns = _turns(sess)
    prev, nxt = lc.neighbours(turns)
    for i in range(len(turns)):
        before = [j for j in range(i) if turns[j].session == turns[i].session]
        after = [j for j in range(i + 1, len(turns)) if turns[j].session == turns[i].session]
        assert prev[i] == (before[-1] if before else -1)
        assert nxt[i] == (after[0] if after else -1)


@given(sessions)
def test_prev_text_is_the_previous_line_then_the_own_one(sess: list[int]) -> None:
    turns = _turns(sess)
    own = [transcript_line(t) for t in turns]
    texts = lc.prev_text(turns, own)
    prev, _ = lc.neighbours(turns)
    for i, text in enumerate(texts):
        assert text == (own[i] if prev[i] < 0 else own[prev[i]] + "\n" + own[i])


@settings(deadline=None)
@given(sessions, st.sampled_from([0.25, 0.5, 1.0]), st.booleans(), st.integers(0, 2**16))
def test_mix_against_brute_force(sess: list[int], w: float, both: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    own = rng.normal(size=(len(sess), 8)).astype(np.float32)
    own /= np.linalg.norm(own, axis=1, keepdims=True)
    prev, nxt = lc.neighbours(_turns(sess))
    got = lc.mix(own, prev, nxt if both else None, w)
    for i in range(len(sess)):
        want = own[i].astype(np.float64).copy()
        if prev[i] >= 0:
            want += w * own[prev[i]]
        if both and nxt[i] >= 0:
            want += w * own[nxt[i]]
        want /= np.linalg.norm(want)
        np.testing.assert_allclose(got[i], want, atol=1e-6)
        if prev[i] < 0 and (not both or nxt[i] < 0):
            np.testing.assert_allclose(got[i], own[i], atol=1e-6)  # no neighbour: unchanged


def test_unknown_context_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embed context 'window'"):
        lc.turn_vectors(_turns([1]), ["x"], "window", 0.5, HashEmbedder().embed)


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 2**16), st.integers(1, 12), st.booleans())
def test_max_cells_is_the_larger_similarity(seed: int, k: int, center: bool) -> None:
    rng = np.random.default_rng(seed)
    emb = HashEmbedder(dim=16)
    a, b = CellStore(emb, center=center), CellStore(emb, center=center)
    for cells in (a, b):
        rows = rng.normal(size=(10, 16)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        offer = {(f"t{i}", text_hash(f"x{i}")): r for i, r in enumerate(rows)}
        with cells.offered(offer):
            cells.upsert_many((IndexEntry(f"t{i}", partition="c"), f"x{i}") for i in range(10))
    q = rng.normal(size=16).astype(np.float32)
    both = lc.MaxCells(a, b)
    got = both.search_vector(q, k, partitions=["c"])
    best: dict[str, float] = {}
    for cells in (a, b):
        for e, s in cells.search_vector(q, 10, partitions=["c"]):
            best[e.id] = max(best.get(e.id, -2.0), s)
    want = sorted(best.items(), key=lambda p: (-p[1], p[0]))[:k]
    assert [e.id for e, _ in got] == [id for id, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])
    hits, timing = both.search_timed("x1", k, partitions=["c"])
    assert len(hits) == min(k, 10) and timing.index_s >= 0.0
    np.testing.assert_array_equal(both.vector("t3"), a.vector("t3"))


def _conversation() -> Conversation:
    turns = _turns([1, 1, 1, 2, 2])
    return Conversation("c", turns, [], [])


@pytest.mark.parametrize("context", lc.EMBED_CONTEXTS)
def test_build_cells_indexes_the_context_vectors(context: str) -> None:
    conv = _conversation()
    built = Built()
    build_stores([conv], "transcript", built)
    inner = HashEmbedder(dim=32)
    build_cells([conv], CachingEmbedder(inner), built, context=context, weight=0.5)
    lines = [transcript_line(t) for t in conv.turns]
    own = inner.embed(lines)
    prev, nxt = lc.neighbours(conv.turns)
    want = {
        "own": own,
        "prev-text": inner.embed(lc.prev_text(conv.turns, lines)),
        "mix-prev": lc.mix(own, prev, None, 0.5),
        "mix-both": lc.mix(own, prev, nxt, 0.5),
        "max-prev-text": own,  # the first index of the MaxCells: the own vectors
    }[context]
    cells = built.cells
    assert cells is not None
    assert isinstance(cells, lc.MaxCells) == (context == "max-prev-text")
    for t, v in zip(conv.turns, want, strict=True):
        got = cells.vector(t.id)
        assert got is not None
        np.testing.assert_allclose(got, v, atol=1e-6)


def test_module_examples() -> None:
    import doctest

    assert doctest.testmod(lc).failed == 0


def test_the_searcher_searches_through_max_cells() -> None:
    conv = _conversation()
    built = Built()
    build_stores([conv], "transcript", built)
    build_cells([conv], CachingEmbedder(HashEmbedder(dim=32)), built, context="max-prev-text")
    cells = built.cells
    assert isinstance(cells, lc.MaxCells)
    calls: list[int] = []
    search_vector = cells.search_vector

    def counted(*args: Any, **kw: Any) -> list[tuple[Any, float]]:
        calls.append(1)
        return search_vector(*args, **kw)

    cells.search_vector = counted  # type: ignore[method-assign]
    make_searchers([conv], built, "hybrid", {"spread_relations": ("precedes",)})
    searcher = built.searchers["hybrid"]["c"]
    hits = searcher.hybrid_search_full("turn on 3", partition="c", limit=3)
    assert calls and 0 < len(hits) <= 3
    assert all(0.0 <= h.relevance <= 1.0 for h in hits)
