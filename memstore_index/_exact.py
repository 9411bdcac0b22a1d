"""Exact scans: every candidate scored by numpy, for small sets and the exhaustive fallback.

An exact scan is both exact and faster than the graph up to
``EXACT_THRESHOLD`` candidates. A partition set (a search's partitions plus
the shared entries) is scanned from a cached :class:`Subset`, kept until the
next write: a contiguous copy of its vectors (gathering the rows on every
query would cost ~30x more), and what a centred score needs of the rows
alone (the mean, each row's dot with it and its centred norm), so a query
makes one matrix-vector product, in BLAS calls small enough to run on the
calling thread (:func:`~memstore_index._centring.row_dots`: a busy host's
thread pool would make it wait). Ties keep every entry level with the k-th
score, so they break by id.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from itertools import repeat
from operator import is_

import numpy as np
import numpy.typing as npt

from memstore._entry_rule import ReadableAt
from memstore.item import SCOPE_PRIVATE
from memstore_index import _tuning as tune
from memstore_index._centring import Centred, Vector, centred_rows, similarities
from memstore_index._state import CellState, Visible
from memstore_index.entry import IndexEntry

__all__ = ["ExactScan", "Subset", "by_score_then_id"]


@dataclass(frozen=True, slots=True)
class Subset:
    """A partition set laid out for exact scans, valid for one index generation."""

    generation: int
    labels: npt.NDArray[np.intp]
    """The set's labels, ascending."""
    matrix: Vector
    """Their vectors, contiguous, in ``labels`` order."""
    mu: Vector | None
    """The mean a centred search subtracts (``None``: plain cosine)."""
    centred: Centred | None
    """The rows' side of the centred score (``None`` with ``mu``)."""
    public: npt.NDArray[np.bool_]
    """Rows whose entry is not private (:class:`~memstore._entry_rule.ReadableAt`'s mask)."""
    deadlines: tuple[tuple[int, _dt.datetime], ...]
    """``(row, stale_after)`` of the public rows that have a deadline."""
    inverse: npt.NDArray[np.intp] | None = None
    """With twins in the set, ``matrix`` holds each distinct vector once and label
    ``labels[i]`` scores as its row ``inverse[i]`` (``None``: a row per label)."""


def by_score_then_id(pair: tuple[IndexEntry, float]) -> tuple[float, str]:
    return -pair[1], pair[0].id


def _readable(sub: Subset, now: _dt.datetime) -> npt.NDArray[np.bool_] | None:
    """The rows :class:`ReadableAt` at ``now`` passes (``None``: a deadline that does not
    compare with ``now``, so the caller tests entry by entry, as the rule itself would)."""
    if not sub.deadlines:
        return sub.public
    keep = sub.public.copy()
    try:
        for row, deadline in sub.deadlines:
            if now >= deadline:
                keep[row] = False
    except TypeError:
        return None
    return keep


class ExactScan(CellState):
    """Exact top-k over a label set (or everything), plain or centred."""

    def _subset_hit(self, key: tuple[str, ...]) -> Subset | None:
        """The cached layout of the partition set ``key``, if still current."""
        hit: Subset | None = self._subsets.get(key)
        return hit if hit is not None and hit.generation == self._generation else None

    def _subset(
        self,
        key: tuple[str, ...],
        allowed: set[int],
        mu: Vector | None,
    ) -> Subset | None:
        """The partition set laid out for exact scans, cached until the next write.

        ``None`` when the set is empty or above :data:`SUBSET_SCAN_MAX` rows
        (the graph serves it).
        """
        if not allowed or len(allowed) > tune.SUBSET_SCAN_MAX:
            return None
        labels = np.fromiter(allowed, np.intp, len(allowed))
        labels.sort()
        distinct, inverse = self._distinct(labels)
        matrix = np.ascontiguousarray(self._vecs[distinct])
        rows = [self._entries[lab] for lab in labels.tolist()]
        public = np.array([e is not None and e.scope != SCOPE_PRIVATE for e in rows], np.bool_)
        deadlines = tuple(
            (i, e.stale_after)
            for i, e in enumerate(rows)
            if e is not None and public[i] and e.stale_after is not None
        )
        sub = Subset(
            self._generation,
            labels,
            matrix,
            mu,
            None if mu is None else centred_rows(matrix, mu),
            public,
            deadlines,
            inverse,
        )
        if len(self._subsets) >= tune.SUBSET_CACHE_SIZE:
            self._subsets.pop(next(iter(self._subsets)))
        self._subsets[key] = sub
        return sub

    def _scan_subset(
        self, q: Vector, k: int, sub: Subset, visible: Visible | None
    ) -> list[tuple[IndexEntry, float]]:
        """The best ``k`` entries of a cached partition set that pass ``visible``."""
        scores = similarities(sub.matrix, q, sub.mu, sub.centred)
        if sub.inverse is not None:
            scores = scores[sub.inverse]
        labels = sub.labels
        if isinstance(visible, ReadableAt) and not visible.kind:
            keep = _readable(sub, visible.now)
            if keep is not None:  # the rule as one mask: the walk tests nothing per entry
                labels, scores, visible = labels[keep], scores[keep], None
        return self._best(k, labels, scores, visible)

    def _scan(
        self,
        q: Vector,
        k: int,
        allowed: set[int] | None,
        visible: Visible | None,
        mu: Vector | None,
    ) -> list[tuple[IndexEntry, float]]:
        if allowed is None:
            labels = np.flatnonzero(self._alive)
        else:
            labels = np.fromiter(allowed, np.intp, len(allowed))
        if labels.size == 0:
            return []
        rows, inverse = self._distinct(labels)
        scores = similarities(self._vecs[rows], q, mu)
        if inverse is not None:
            scores = scores[inverse]
        return self._best(k, labels, scores, visible)

    def _distinct(
        self, labels: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp] | None]:
        """One label per distinct vector of ``labels`` and, when there are twins among
        them, where each label's vector is in that list (``None``: they are all distinct).

        Scoring each vector once makes twins score the very same float, so they
        tie and order by id as any tie does (a BLAS product over the rows can
        round two identical rows apart, by their position), and a set of many
        copies costs a product of its distinct vectors only.
        """
        if not self._twins.count:
            return labels, None
        _, first, inverse = np.unique(self._vid[labels], return_index=True, return_inverse=True)
        if first.size == labels.size:
            return labels, None
        return labels[first], inverse.reshape(-1)

    def _best(
        self,
        k: int,
        labels: npt.NDArray[np.intp],
        scores: npt.NDArray[np.float32],
        visible: Visible | None,
    ) -> list[tuple[IndexEntry, float]]:
        """The ``k`` best-scored live entries that pass ``visible``, by score then id.

        Walks the labels best first and stops past the k-th passing score
        (everything tied with it is kept, so ties break by id); the final
        sort by id runs only when two scores walked are equal.
        """
        if visible is None and labels.size > k:
            kth = np.partition(scores, labels.size - k)[labels.size - k]
            keep = scores >= kth
            labels, scores = labels[keep], scores[keep]
        order = np.argsort(-scores, kind="stable")
        walked = scores[order]
        entries = self._entries
        if visible is None:
            # Every row kept is at or above the k-th score: no walk, one pass in C.
            found = list(map(entries.__getitem__, labels[order].tolist()))
            pairs = list(zip(found, walked.tolist(), strict=True))
            if any(map(is_, found, repeat(None))):
                pairs = [p for p in pairs if p[0] is not None]
            if walked.size > 1 and bool(np.any(walked[1:] == walked[:-1])):
                pairs.sort(key=by_score_then_id)  # type: ignore[arg-type]
            return pairs[:k]  # type: ignore[return-value]
        out: list[tuple[IndexEntry, float]] = []
        last = 0.0
        n = 0
        for lab, s in zip(labels[order].tolist(), walked.tolist(), strict=True):
            if len(out) >= k and s < last:
                break
            n += 1
            e = entries[lab]
            if e is None or (visible is not None and not visible(e)):
                continue
            out.append((e, s))
            last = s
        if n > 1 and bool(np.any(walked[1:n] == walked[: n - 1])):
            out.sort(key=by_score_then_id)
        return out[:k]
