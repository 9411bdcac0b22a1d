"""Exact scans: every candidate scored by numpy, for small sets and the exhaustive fallback.

An exact scan is both exact and faster than the graph up to
``EXACT_THRESHOLD`` candidates; a partition set up to ``SUBSET_SCAN_MAX``
rows is scanned from a cached contiguous copy of its vectors (gathering the
rows on every query would cost ~30x more). Ties keep every entry level with
the k-th score, so they break by id.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from memstore_index import _tuning as tune
from memstore_index._centring import Vector, similarities
from memstore_index._state import CellState, Visible
from memstore_index.entry import IndexEntry

__all__ = ["ExactScan"]


class ExactScan(CellState):
    """Exact top-k over a label set (or everything), plain or centred."""

    def _subset(
        self, key: tuple[str, ...], allowed: set[int]
    ) -> tuple[npt.NDArray[np.intp], Vector] | None:
        """A contiguous copy of a partition set's vectors, kept until the next write.

        Scanning a contiguous matrix is ~30x faster than gathering the rows on
        every query, and an exact scan beats a filtered graph walk up to
        :data:`SUBSET_SCAN_MAX` rows. ``None`` when the set is too large.
        """
        if len(allowed) > tune.SUBSET_SCAN_MAX or len(allowed) <= tune.EXACT_THRESHOLD:
            return None
        hit = self._subsets.get(key)
        if hit is not None and hit[0] == self._generation:
            return hit[1], hit[2]
        labels = np.fromiter(allowed, np.intp, len(allowed))
        labels.sort()
        matrix = np.ascontiguousarray(self._vecs[labels])
        if len(self._subsets) >= tune.SUBSET_CACHE_SIZE:
            self._subsets.pop(next(iter(self._subsets)))
        self._subsets[key] = (self._generation, labels, matrix)
        return labels, matrix

    def _scan_subset(
        self,
        q: Vector,
        k: int,
        labels: npt.NDArray[np.intp],
        matrix: Vector,
        mu: Vector | None,
    ) -> list[tuple[IndexEntry, float]]:
        scores = similarities(matrix, q, mu)
        if labels.size > k:
            kth = np.partition(scores, labels.size - k)[labels.size - k]
            keep = scores >= kth
            labels, scores = labels[keep], scores[keep]
        entries = self._entries
        out = [
            (e, float(sc))
            for lab, sc in zip(labels.tolist(), scores.tolist(), strict=True)
            if (e := entries[lab]) is not None
        ]
        out.sort(key=lambda p: (-p[1], p[0].id))
        return out[:k]

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
        scores = similarities(self._vecs[labels], q, mu)
        entries = self._entries
        if visible is None and labels.size > k:
            # Keep everything tied with the k-th score, so ties break by id below.
            kth = np.partition(scores, labels.size - k)[labels.size - k]
            keep = scores >= kth
            labels, scores = labels[keep], scores[keep]
        order = np.argsort(-scores, kind="stable")
        out: list[tuple[IndexEntry, float]] = []
        last = 0.0
        for i in order.tolist():
            s = float(scores[i])
            if len(out) >= k and s < last:
                break
            e = entries[int(labels[i])]
            if e is None or (visible is not None and not visible(e)):
                continue
            out.append((e, s))
            last = s
        out.sort(key=lambda p: (-p[1], p[0].id))
        return out[:k]
