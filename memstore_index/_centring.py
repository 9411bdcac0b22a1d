"""Centred similarity: running sums for the mean, and cosines measured around it.

A ``center=True`` search scores the query and every entry after both are
moved by minus the mean of the entries searched (see
:class:`~memstore_index.CellStore`). :class:`Sums` keeps that mean cheap to
read for any set of partitions; :func:`scores` computes centred (or plain)
cosines of many rows at once without copying them.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memstore.errors import MemstoreError
from memstore_index.entry import IndexEntry

__all__ = ["Centred", "Sums", "Vector", "centred_rows", "normalise", "similarities"]

Vector = npt.NDArray[np.float32]


class Sums:
    """Running vector sums per partition, for the mean a centred search subtracts.

    A search's candidates are its partitions' entries plus every ``shared``
    one; a shared entry of a requested partition is in both, so the shared
    sums are also kept per partition, to count it once. Float64, so that
    adding and removing the same vector many times leaves no drift worth
    the name.
    """

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self.all = np.zeros(dim, np.float64)
        self.by_partition: dict[str, npt.NDArray[np.float64]] = {}
        self.shared = np.zeros(dim, np.float64)
        self.shared_by_partition: dict[str, npt.NDArray[np.float64]] = {}

    def _bucket(self, table: dict[str, npt.NDArray[np.float64]], key: str) -> npt.NDArray[Any]:
        got = table.get(key)
        if got is None:
            got = table[key] = np.zeros(self._dim, np.float64)
        return got

    def change(self, entry: IndexEntry, vec: Vector, sign: float) -> None:
        """Add (``sign`` 1) or remove (-1) one entry's vector."""
        v = vec.astype(np.float64) * sign
        self.all += v
        self._bucket(self.by_partition, entry.partition)[:] += v
        if entry.shared:
            self.shared += v
            self._bucket(self.shared_by_partition, entry.partition)[:] += v

    def mean(self, partitions: Collection[str] | None, n: int) -> Vector:
        """The mean over everything (``None``) or those partitions plus shared entries."""
        if partitions is None:
            total = self.all
        else:
            total = self.shared.copy()
            for p in set(partitions):
                if p in self.by_partition:
                    total += self.by_partition[p]
                if p in self.shared_by_partition:
                    total -= self.shared_by_partition[p]
        mean: Vector = (total / n).astype(np.float32)
        return mean


@dataclass(frozen=True, slots=True)
class Centred:
    """The rows' side of a centred cosine, for one set of rows and one mean.

    It does not depend on the query, so a cached partition set computes it
    once (:func:`centred_rows`) and a query makes one matrix-vector product.
    """

    m: npt.NDArray[np.float32]
    """Each row's dot with the mean."""
    mm: float
    """The mean's squared norm."""
    d_norm: npt.NDArray[np.float32]
    """Each row's norm once moved by minus the mean."""


def centred_rows(rows: Vector, mu: Vector) -> Centred:
    """What :func:`similarities` computes of ``rows`` and ``mu`` alone (the same arithmetic)."""
    m = rows @ mu
    mm = float(mu @ mu)
    sq = np.einsum("ij,ij->i", rows, rows)
    d_norm = np.sqrt(np.maximum(sq - 2.0 * m + mm, 1e-12))
    return Centred(m, mm, d_norm)


def similarities(
    rows: Vector, q: Vector, mu: Vector | None, centred: Centred | None = None
) -> npt.NDArray[np.float32]:
    """Cosine of unit query ``q`` with each row, or of both moved by ``-mu`` when given.

    cos(q - mu, d - mu) expands to inner products the rows already give:
    ``(q.d - mu.d - q.mu + mu.mu) / (|q - mu| |d - mu|)``, with
    ``|d - mu|^2 = d.d - 2 mu.d + mu.mu``: two matrix-vector products and no
    copy of the rows. ``centred`` is :func:`centred_rows` of these rows and
    ``mu``, computed earlier (the same numbers): then one product is left.
    """
    dots: npt.NDArray[np.float32] = rows @ q
    if mu is None:
        return dots
    c = centred if centred is not None else centred_rows(rows, mu)
    qm = float(q @ mu)
    q_norm = max(1.0 - 2.0 * qm + c.mm, 1e-12) ** 0.5
    out: npt.NDArray[np.float32] = ((dots - c.m - qm + c.mm) / (q_norm * c.d_norm)).astype(
        np.float32
    )
    return out


def normalise(vecs: npt.ArrayLike, dim: int) -> Vector:
    """Rows as float32 unit vectors of ``dim`` values (zero rows stay zero)."""
    arr = np.asarray(vecs, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise MemstoreError(f"embedder returned shape {arr.shape}, expected (n, {dim})")
    if not np.all(np.isfinite(arr)):
        raise MemstoreError("embedder returned non-finite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.where(norms > 0, arr / np.maximum(norms, 1e-12), arr).astype(np.float32)
