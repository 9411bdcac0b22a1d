"""Adaptive ``ef``: the smallest HNSW beam that reaches a recall target on this data.

How wide a graph search must look depends on the data far more than on its
size. Vectors uniform on a 384-dimensional sphere (every point nearly
equidistant from every other) need a wide beam; sentence embeddings, whose
intrinsic dimension is a few dozen, reach the same recall with a fraction of
it, i.e. in a fraction of the time. No fixed ``ef`` suits both, so the
CellStore measures: whenever its graph is built, and again each time the graph
has grown by :data:`RECALIBRATE_GROWTH`, it searches a *held-out* sample of
its own vectors (rows that are not in the graph yet, so none finds itself),
compares with the exact top ``k`` by brute force, and keeps the smallest
``ef`` (binary search, at most the configured ``ef_search``) whose recall
reaches the target.

Held out, the sample behaves like fresh queries from the same distribution:
on 100k embedding-like vectors its recall tracked that of independent
queries within 0.02 at every ``ef`` from 10 to 300, and within 0.003 from
``ef`` 64 up, where the choice is made (see ``docs/vector.md``).
Only plain, unfiltered graph searches use the calibrated beam; a filtered or
centred search keeps the full ``ef_search``, which its filter or its
re-scoring needs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from memstore_index._centring import Vector

__all__ = [
    "CALIBRATION_K",
    "CALIBRATION_MIN",
    "CALIBRATION_SAMPLE",
    "DEFAULT_TARGET_RECALL",
    "RECALIBRATE_GROWTH",
    "calibrate_ef",
    "held_out",
]

DEFAULT_TARGET_RECALL = 0.98
"""Recall@10 a calibrated beam must reach on the held-out sample (a margin over 0.97)."""
CALIBRATION_K = 10
"""The ``k`` recall is measured at."""
CALIBRATION_SAMPLE = 128
"""Held-out queries per calibration (recall's standard error ~0.004 at 0.98)."""
CALIBRATION_MIN = 32
"""Fewest held-out rows worth a calibration; a smaller batch waits for a bigger one."""
RECALIBRATE_GROWTH = 1.5
"""Recalibrate once the graph holds this many times what it held at the last one."""
_CHUNK = 8192
"""Rows scored at a time for the exact answer (bounds the scratch memory)."""

Labels = npt.NDArray[np.intp]


def held_out(labels: Labels, n: int, seed: int) -> Labels:
    """``n`` of ``labels`` (all of them if fewer), chosen by a seeded generator."""
    if labels.size <= n:
        return labels
    rng = np.random.default_rng(seed)
    chosen: Labels = np.sort(rng.choice(labels, n, replace=False))
    return chosen


def exact_top_k(vecs: Vector, labels: Labels, queries: Vector, k: int) -> Labels:
    """The labels of each query's ``k`` best inner products among ``labels`` (any order)."""
    k = min(k, labels.size)
    best_s = np.full((len(queries), 0), -np.inf, np.float32)
    best_l = np.zeros((len(queries), 0), np.intp)
    for start in range(0, labels.size, _CHUNK):
        chunk = labels[start : start + _CHUNK]
        scores = np.concatenate([best_s, queries @ vecs[chunk].T], axis=1)
        names = np.concatenate([best_l, np.broadcast_to(chunk, (len(queries), chunk.size))], axis=1)
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        best_s = np.take_along_axis(scores, top, axis=1)
        best_l = np.take_along_axis(names, top, axis=1)
    return best_l


def calibrate_ef(
    index: object,
    queries: Vector,
    truth: Labels,
    *,
    floor: int,
    ceiling: int,
    target: float,
    hint: int | None = None,
) -> tuple[int, float]:
    """The smallest ``ef`` in ``floor..ceiling`` whose recall on ``queries`` reaches ``target``.

    ``index`` is an ``hnswlib.Index`` holding none of the queries; ``truth``
    their exact top-k labels. Recall grows with ``ef`` (a wider beam finds a
    superset, up to ties), so a binary search needs about eight batched
    queries; its first probe is ``hint`` (the last calibration's answer,
    usually close), which spares the costly wide probes. Returns the ``ef``
    and its measured recall; ``ceiling`` when even that misses the target.
    """
    k = int(truth.shape[1])
    want = [set(row) for row in truth.tolist()]

    def recall(ef: int) -> float:
        index.set_ef(max(ef, k))  # type: ignore[attr-defined]
        got, _ = index.knn_query(queries, k=k)  # type: ignore[attr-defined]
        hits = sum(len(w.intersection(g)) for w, g in zip(want, got.tolist(), strict=True))
        return float(hits) / (k * len(want))

    lo, hi = max(floor, k), max(ceiling, k)
    best: float | None = None  # the recall measured at ``hi``, once it is
    if hint is not None and hint >= hi:  # last time only the ceiling would do
        best = recall(hi)
        if best < target:
            return hi, best
    probe = hint if hint is not None and lo <= hint < hi else (lo + hi) // 2
    while lo < hi:
        r = recall(probe)
        if r >= target:
            hi, best = probe, r
        else:
            lo = probe + 1
        probe = (lo + hi) // 2
    if best is None:  # never met the target below the ceiling
        best = recall(hi)
    return hi, best
