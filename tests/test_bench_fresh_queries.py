"""The vector benchmark times graph walks, not the CellStore's kept walks.

A CellStore keeps the unfiltered graph walks of its index generation by query
vector, so the benchmark's timed passes must ask vectors it has not seen:
``_common.time_queries(fresh=...)`` asks ``fresh(q, n)`` in timed pass ``n``,
and ``vector.nudged`` makes such a vector, one whose answer is the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.append(str(BENCH))  # after the stdlib: benchmarks/ has an http.py

import _common  # noqa: E402
import vector  # noqa: E402

from memstore_index._vectorfile import StoredVector  # noqa: E402
from memstore_index.cellstore import CellStore  # noqa: E402
from memstore_index.entry import IndexEntry  # noqa: E402
from memstore_index.hash_embedder import HashEmbedder  # noqa: E402


def test_timed_passes_ask_the_fresh_queries_and_the_warm_pass_the_originals() -> None:
    asked: list[str] = []
    per_query, warm = _common.time_queries(
        lambda q: asked.append(q) or q.upper(), ["a", "b"], 3, fresh=lambda q, n: f"{q}{n}"
    )
    assert warm == ["A", "B"]  # the quality checks read the originals' answers
    assert asked == ["a", "b", "a1", "b1", "a2", "b2", "a3", "b3"]
    assert len(per_query) == 2 and all(t >= 0 for t in per_query)


def test_without_fresh_every_pass_asks_the_same_queries() -> None:
    asked: list[str] = []
    _common.time_queries(asked.append, ["a"], 2)
    assert asked == ["a", "a", "a"]


def test_nudged_vectors_are_new_to_the_cellstore_and_find_the_same_neighbours() -> None:
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(2000, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cells = CellStore(HashEmbedder(dim=384), m=16, ef_construction=100)
    cells.apply([StoredVector(IndexEntry(f"v{i}"), -1, f"h{i}", "", v) for i, v in enumerate(vecs)])
    q = vecs[3] + np.float32(0.3) * vecs[4]
    q /= np.linalg.norm(q)
    base = [e.id for e, _ in cells.search_vector(q, 10)]
    seen = {q.tobytes()}
    before = q.copy()
    for n in range(1, 6):
        moved = vector.nudged(q, n)
        # Not a vector asked before: its bytes differ after the CellStore's normalisation.
        unit = moved / np.linalg.norm(moved)
        assert unit.astype(np.float32).tobytes() not in seen
        seen.add(unit.astype(np.float32).tobytes())
        assert np.array_equal(q, before)  # the original is left as it was
        assert [e.id for e, _ in cells.search_vector(moved, 10)] == base
