"""Centred similarity: running sums for the mean, and cosines measured around it.

A ``center=True`` search scores the query and every entry after both are
moved by minus the mean of the entries searched (see
:class:`~memstore_index.CellStore`). :class:`Sums` keeps that mean cheap to
read for any set of partitions; :func:`scores` computes centred (or plain)
cosines of many rows at once without copying them.

Every matrix-vector product over many rows goes through :func:`row_dots`,
which keeps each call to BLAS small enough that OpenBLAS runs it on the
calling thread. OpenBLAS hands a product above a size threshold to its
thread pool (one thread per core); on a busy machine the caller then waits
for a worker to get a core, and a 0.05 ms product of 2,048 rows takes
milliseconds (p99 20 ms measured with two busy processes on two cores; see
``benchmarks/blas_load.py``). Limiting the pool instead would change a
setting of the whole process, which belongs to the host (and a limit set
and restored around each scan races with any other thread that does the
same); splitting the product changes nothing outside the call.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memstore_index.embedder import EmbeddingError, unit_rows
from memstore_index.entry import IndexEntry

__all__ = [
    "Centred",
    "Sums",
    "Vector",
    "centred_rows",
    "normalise",
    "row_dots",
    "rows_per_product",
    "similarities",
]

Vector = npt.NDArray[np.float32]

_SMALL_PRODUCT = 2304 * 4 - 1
"""Elements (rows x dim) of a matrix-vector product that OpenBLAS up to 0.3.23 runs on
one thread: below ``2304 * GEMM_MULTITHREAD_THRESHOLD`` (4 unless built otherwise).
Measured with numpy 1.26.4 (OpenBLAS 0.3.23): 23 x 384 on one thread, 24 x 384 threaded."""
_LARGE_PRODUCT = 1 << 18
"""The same for OpenBLAS 0.3.27 on, whose threshold is 460,800 elements (numpy 2.0.2's
0.3.27 and 2.4's 0.3.31: 1,199 x 384 on one thread, 1,200 x 384 threaded); about half
of it, so that a product is not split into more calls than it needs."""
_ROW_MULTIPLE = 4
"""A split falls on a multiple of this many rows. OpenBLAS's x86-64 ``sgemv`` kernels
take rows four at a time (another kernel does the last ``n % 4``): split on a multiple
of 4, each row meets the kernel it meets in the whole product. Measured (Haswell
kernel, numpy 2.4): the scores are the very bits of one unsplit single-threaded
product, where two threads, which split the rows anywhere, change a few last bits."""


def _product_budget() -> int:
    """Elements one product may hold, for the BLAS numpy was built with.

    Only an OpenBLAS known to have the high threshold gets the large budget;
    any other BLAS (or an unreadable build record) gets the small one, which
    costs 10-17% of a scan's time on a single-threaded BLAS, against the
    milliseconds a threaded one can lose on a busy machine.
    """
    try:
        import numpy.__config__ as built

        blas = built.CONFIG["Build Dependencies"]["blas"]
        name, version = str(blas.get("name", "")), str(blas.get("version", ""))
    except (ImportError, AttributeError, KeyError, TypeError):
        return _SMALL_PRODUCT
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    known = found is not None and tuple(int(x) for x in found.groups()) >= (0, 3, 27)
    return _LARGE_PRODUCT if known and "openblas" in name.lower() else _SMALL_PRODUCT


PRODUCT_ELEMENTS = _product_budget()
"""Elements (rows x dim) of one BLAS call in :func:`row_dots`."""


def rows_per_product(dim: int) -> int:
    """Rows of ``dim`` values one BLAS call of :func:`row_dots` takes (a multiple of 4)."""
    rows = PRODUCT_ELEMENTS // max(dim, 1) // _ROW_MULTIPLE * _ROW_MULTIPLE
    return max(rows, _ROW_MULTIPLE)


def row_dots(rows: Vector, q: Vector) -> npt.NDArray[np.float32]:
    """``rows @ q``, computed as products OpenBLAS runs on the calling thread.

    The rows are viewed as a stack of blocks of :func:`rows_per_product` rows
    and multiplied in one ``np.matmul`` call, whose loop (in C, without the
    GIL) calls BLAS once per block: each call is below OpenBLAS's threading
    threshold, so no call waits for the thread pool, and the loop costs 1-8%
    over one unsplit product (measured at 2,048-50,000 x 384). Rows left over
    (fewer than a block) are one more call. The results are those of one
    single-threaded product.
    """
    n, dim = rows.shape
    step = rows_per_product(dim)
    if n <= step:
        small: npt.NDArray[np.float32] = rows @ q
        return small
    whole = n - n % step
    out = np.empty(n, np.result_type(rows, q))
    np.matmul(rows[:whole].reshape(-1, step, dim), q, out=out[:whole].reshape(-1, step))
    if whole < n:
        np.matmul(rows[whole:], q, out=out[whole:])
    return out


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
    m = row_dots(rows, mu)
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
    dots = row_dots(rows, q)
    if mu is None:
        return dots
    c = centred if centred is not None else centred_rows(rows, mu)
    qm = float(q @ mu)
    q_norm = max(1.0 - 2.0 * qm + c.mm, 1e-12) ** 0.5
    out: npt.NDArray[np.float32] = ((dots - c.m - qm + c.mm) / (q_norm * c.d_norm)).astype(
        np.float32
    )
    return out


def normalise(vecs: npt.ArrayLike, dim: int, n: int | None = None) -> Vector:
    """An embedder's answer checked, as float32 unit rows of ``dim`` values (``n`` of them).

    ``n`` is the number of texts embedded (``None``: any number). Nothing an
    embedder returns is trusted: a wrong shape or row count (a batch of 3
    texts answered with 2 rows would pair each text with another's vector, or
    none), a value that is not a finite real number, or a zero row (no
    direction, so no cosine) raises
    :class:`~memstore_index.embedder.EmbeddingError` before anything is
    indexed. A float32 answer is normalised in float32, anything else in
    float64; neither can overflow (:func:`~memstore_index.embedder.unit_rows`),
    so a valid direction of any size survives.

    >>> normalise([[3.0, 4.0]], 2).tolist()
    [[0.6000000238418579, 0.800000011920929]]
    >>> normalise([[3.0, 4.0]], 2, n=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memstore_index.embedder.EmbeddingError: the embedder returned 1 vectors for 2 texts; ...
    """
    try:
        arr = np.asarray(vecs)
    except (TypeError, ValueError) as e:  # ragged rows and the like
        raise EmbeddingError(f"the embedder returned no array of vectors ({e})") from None
    if arr.dtype != np.float32:
        if arr.dtype.kind not in "iuf":
            raise EmbeddingError(f"the embedder returned {arr.dtype} values, not real numbers")
        arr = arr.astype(np.float64)
    if arr.ndim != 2 or arr.shape[1] != dim:
        rows = "n" if n is None else str(n)
        raise EmbeddingError(f"the embedder returned shape {arr.shape}, expected ({rows}, {dim})")
    if n is not None and arr.shape[0] != n:
        raise EmbeddingError(
            f"the embedder returned {arr.shape[0]} vectors for {n} texts; "
            "it must return exactly one row per text, in order"
        )
    return unit_rows(arr, "the embedder")
