"""A kept graph walk answers exactly as walking the graph again would.

:meth:`~memstore_index._search.Searching._walk` keeps the unfiltered walks of
one index generation by query vector (a server is asked the same questions
again and again). These tests hold it to the graph: a repeated search gives
the very hits a fresh walk gives, a write (a new generation) or a rebuilt graph
is walked again, and a beam or pool of another size is its own walk.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import memstore_index._tuning as tune
from memstore_index._vectorfile import StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

DIM = 16


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _cells(n: int, monkeypatch: pytest.MonkeyPatch) -> CellStore:
    monkeypatch.setattr(tune, "EXACT_THRESHOLD", 8)  # a graph from 9 vectors on
    cells = CellStore(HashEmbedder(dim=DIM))
    rows = _unit(np.random.default_rng(3).standard_normal((n, DIM)))
    cells.apply(
        [StoredVector(IndexEntry(f"e{i:04d}"), -1, f"h{i}", "", v) for i, v in enumerate(rows)]
    )
    return cells


def _fresh(cells: CellStore, vec: np.ndarray, k: int) -> list[tuple[str, float]]:
    """The hits of a search that walks the graph, whatever is kept."""
    cells._walks.found.clear()
    return [(e.id, s) for e, s in cells.search_vector(vec, k)]


def _hits(cells: CellStore, vec: np.ndarray, k: int) -> list[tuple[str, float]]:
    return [(e.id, s) for e, s in cells.search_vector(vec, k)]


def test_a_repeated_search_gives_a_fresh_walks_hits(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = _cells(300, monkeypatch)
    queries = _unit(np.random.default_rng(5).standard_normal((20, DIM)))
    for q in queries:
        first = _hits(cells, q, 10)
        assert len(cells._walks.found) >= 1
        assert _hits(cells, q, 10) == first == _fresh(cells, q, 10)
        assert _hits(cells, q, 25) == _fresh(cells, q, 25)  # another pool: its own walk
    assert all(not a.flags.writeable for got in cells._walks.found.values() for a in got)


def test_a_write_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = _cells(300, monkeypatch)
    q = _unit(np.random.default_rng(7).standard_normal((1, DIM)))[0]
    before = _hits(cells, q, 10)
    # A vector equal to the query: the nearest of all once it is indexed.
    cells.apply([StoredVector(IndexEntry("new"), -1, "h-new", "", q)])
    after = _hits(cells, q, 10)
    assert after[0][0] == "new" and after != before
    assert after == _fresh(cells, q, 10)
    cells.remove("new")
    assert _hits(cells, q, 10) == before == _fresh(cells, q, 10)


def test_a_rebuilt_graph_is_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = _cells(300, monkeypatch)
    q = _unit(np.random.default_rng(9).standard_normal((1, DIM)))[0]
    _hits(cells, q, 10)
    kept = cells._walks
    cells._rebuild_graph()  # what a compaction does
    again = _hits(cells, q, 10)
    assert cells._walks is not kept and again == _fresh(cells, q, 10)


def test_kept_walks_do_not_keep_a_replaced_graph_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph can be hundreds of megabytes: once rebuilt, the old one is freed at once,
    not when the next search happens to start the walks over."""
    cells = _cells(300, monkeypatch)
    q = _unit(np.random.default_rng(13).standard_normal((1, DIM)))[0]
    _hits(cells, q, 10)
    old = weakref.ref(cells._hnsw)
    cells._rebuild_graph()
    gc.collect()
    assert old() is None
    assert _hits(cells, q, 10) == _fresh(cells, q, 10)


def test_the_oldest_walk_makes_room(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = _cells(300, monkeypatch)
    monkeypatch.setattr(tune, "WALK_CACHE_SIZE", 3)
    queries = _unit(np.random.default_rng(11).standard_normal((5, DIM)))
    for q in queries:
        _hits(cells, q, 10)
    assert len(cells._walks.found) == 3
    kept = list(cells._walks.found)
    _hits(cells, queries[-1], 10)  # the newest is kept: no walk, nothing dropped
    assert list(cells._walks.found) == kept
    _hits(cells, queries[0], 10)  # the oldest was dropped: walked again, at the end
    assert list(cells._walks.found)[:2] == kept[1:]
