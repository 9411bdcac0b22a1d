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
Only plain graph searches use the calibrated beam (and a filtered one whose
filter passes every live label: the same walk); a truly filtered or centred
search keeps the full ``ef_search``, which its filter or its re-scoring needs.

A graph that grows by small batches (one ``Memory.add`` at a time, as agents
and the HTTP server write) has no batch to hold out. Searching rows that are
already in the graph, excluding each one's own label, is no substitute: each
such query starts at its own node, whose links are its nearest neighbours,
and finds them at any beam (on 10k vectors of the vector benchmark's
``lowrank`` data it measured a recall of 0.998 at ``ef`` 10, where fresh
queries get 0.75; on 10k MiniLM sentence vectors 0.975 against 0.81). So a
:class:`FreshProbe` gathers the held-out sample one write at a time instead:
while a calibration is due, each small batch is searched at a ladder of beams
*before* it enters the graph (fresh queries, like the held-out sample), the
exact answers are computed once the sample is complete, and the smallest
rung whose recall reaches the target becomes the beam. The rows stay
searchable throughout (they enter the graph in the same write).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from memstore_index._centring import Vector

__all__ = [
    "CALIBRATION_K",
    "CALIBRATION_MIN",
    "CALIBRATION_SAMPLE",
    "DEFAULT_TARGET_RECALL",
    "LADDER_RATIO",
    "RECALIBRATE_GROWTH",
    "FreshProbe",
    "calibrate_ef",
    "held_out",
    "ladder",
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
LADDER_RATIO = 1.25
"""Step between the beams a :class:`FreshProbe` tries: its answer is at most this
factor above the smallest ``ef`` meeting the target (never below it)."""
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
        best_s, best_l = _keep_best(best_s, best_l, queries @ vecs[chunk].T, chunk, k)
    return best_l


def _keep_best(
    best_s: npt.NDArray[np.float32],
    best_l: Labels,
    scores: npt.NDArray[np.float32],
    labels: Labels,
    k: int,
) -> tuple[npt.NDArray[np.float32], Labels]:
    """Each query row's ``k`` best of the kept ``(best_s, best_l)`` and a chunk's new columns.

    ``scores`` holds one row per query and one column per label of ``labels``:
    the running top-k of a scan done a chunk at a time (any order within it).
    """
    scores = np.concatenate([best_s, scores], axis=1)
    names = np.concatenate([best_l, np.broadcast_to(labels, (len(best_l), labels.size))], axis=1)
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return np.take_along_axis(scores, top, axis=1), np.take_along_axis(names, top, axis=1)


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


def ladder(floor: int, ceiling: int, hint: int | None = None) -> tuple[int, ...]:
    """The beams a :class:`FreshProbe` tries: ``floor`` to ``ceiling`` by :data:`LADDER_RATIO`.

    With ``hint`` (the last calibration's beam), the rungs stop at twice it and
    the ceiling follows: the wide rungs cost most (a search's work grows with
    its beam) and the answer moves little between growth steps. Should the
    target be missed by every rung up to twice the hint, the ceiling is the
    answer for one step, and the next probe, hinted by it, climbs every rung.
    """
    rungs = [max(floor, 1)]
    while rungs[-1] < ceiling:
        rungs.append(min(ceiling, max(rungs[-1] + 1, round(rungs[-1] * LADDER_RATIO))))
    top = ceiling if hint is None else 2 * hint
    return tuple(r for r in rungs if r <= top or r == rungs[-1])


@dataclass
class FreshProbe:
    """A held-out sample gathered one small write at a time (see the module docstring).

    Each probed row was searched, at every rung of :attr:`efs`, by a graph
    holding exactly the live labels below its ``bound`` (labels are appended,
    and a batch enters the graph after it is probed). Its exact answer is
    computed at :meth:`finish` among the labels below ``bound`` still alive
    then: a label deleted in between is missing from the truth and counts as
    a miss if the graph had found it (conservative, and rare).
    """

    efs: tuple[int, ...]
    k: int = CALIBRATION_K
    queries: list[Vector] = field(default_factory=list)
    bounds: list[int] = field(default_factory=list)
    found: list[Labels] = field(default_factory=list)
    """Per probed row, shape ``(len(efs), k)``: the graph's labels at each rung."""

    def __len__(self) -> int:
        return len(self.queries)

    def probe(self, index: object, vecs: Vector, bound: int) -> None:
        """Search ``vecs`` (rows not in ``index``, labelled from ``bound`` up) at every rung.

        A graph that cannot return ``k`` (``RuntimeError``, mostly deleted) adds nothing.
        """
        queries = np.ascontiguousarray(vecs, np.float32)
        rungs = np.empty((len(queries), len(self.efs), self.k), np.intp)
        try:
            for j, ef in enumerate(self.efs):
                index.set_ef(max(ef, self.k))  # type: ignore[attr-defined]
                got, _ = index.knn_query(queries, k=self.k, num_threads=1)  # type: ignore[attr-defined]
                rungs[:, j, :] = got
        except RuntimeError:
            return
        for q, r in zip(queries, rungs, strict=True):
            self.queries.append(q)
            self.bounds.append(bound)
            self.found.append(r)

    def finish(
        self, vecs: Vector, alive: npt.NDArray[np.bool_], target: float
    ) -> tuple[int, float]:
        """The smallest rung whose recall reaches ``target`` (else the top one), and its recall."""
        queries = np.stack(self.queries)
        bounds = np.asarray(self.bounds, np.intp)
        truth = _exact_below(vecs, alive, queries, bounds, self.k)
        want = [set(row) - {-1} for row in truth.tolist()]
        total = max(1, sum(len(w) for w in want))
        recalls = []
        for j in range(len(self.efs)):
            pairs = zip(want, self.found, strict=True)
            hits = sum(len(w.intersection(f[j].tolist())) for w, f in pairs)
            recalls.append(float(hits) / total)
        for ef, r in zip(self.efs, recalls, strict=True):
            if r >= target:
                return ef, r
        return self.efs[-1], recalls[-1]


def _exact_below(
    vecs: Vector, alive: npt.NDArray[np.bool_], queries: Vector, bounds: Labels, k: int
) -> Labels:
    """Each query's ``k`` best live labels below its own bound (any order; ``-1`` pads)."""
    top_bound = int(bounds.max())
    best_s = np.full((len(queries), k), -np.inf, np.float32)  # k padding places
    best_l = np.full((len(queries), k), -1, np.intp)
    for start in range(0, top_bound, _CHUNK):
        stop = min(start + _CHUNK, top_bound)
        scores = queries @ vecs[start:stop].T
        cols = np.arange(start, stop)
        scores[(cols[None, :] >= bounds[:, None]) | ~alive[start:stop][None, :]] = -np.inf
        best_s, best_l = _keep_best(best_s, best_l, scores, cols, k)
    out: Labels = np.where(np.isfinite(best_s), best_l, -1)
    return out
