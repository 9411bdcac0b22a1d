"""Exact scans as BLAS calls that OpenBLAS runs on the calling thread.

:func:`memstore_index._centring.row_dots` splits a matrix-vector product
into blocks below OpenBLAS's threading threshold (a busy machine makes a
threaded product wait for the pool: see ``benchmarks/blas_load.py``). These
tests hold it to the exact products within float32 rounding (a bound, not a
tolerance picked to pass), at sizes around the block boundaries, through the
CellStore's own searches too; and, where numpy's OpenBLAS lets a test see its
thread pool, that a scan hands no work to the pool and leaves its setting as
the host had it.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import numpy.__config__
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore_index import _centring
from memstore_index._tuning import CENTER_MIN
from memstore_index._vectorfile import StoredVector
from memstore_index.cellstore import CellStore
from memstore_index.entry import IndexEntry
from memstore_index.hash_embedder import HashEmbedder

F32 = npt.NDArray[np.float32]
U = 2.0**-24
"""float32's unit roundoff."""


def unit_rows(n: int, dim: int, seed: int) -> F32:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((max(n, 1), dim)).astype(np.float32)
    out: F32 = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)[:n]
    return out


def assert_exact_within_rounding(got: npt.NDArray[Any], rows: F32, q: F32) -> None:
    """``got`` is ``rows @ q`` up to float32 rounding, in any order of summation.

    A sum of ``d`` products rounded in float32 (with or without fused
    multiply-adds) is within ``d * u / (1 - d * u)`` of the exact sum,
    relative to the sum of the products' magnitudes; the result's own
    rounding adds one more ``u``.
    """
    d = rows.shape[1]
    exact = rows.astype(np.float64) @ q.astype(np.float64)
    scale = np.abs(rows).astype(np.float64) @ np.abs(q).astype(np.float64)
    gamma = (d + 1) * U / (1 - (d + 1) * U)
    assert got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= gamma * scale + 1e-30)


@contextmanager
def budget(elements: int) -> Iterator[None]:
    with mock.patch.object(_centring, "PRODUCT_ELEMENTS", elements):
        yield


# ----------------------------------------------------------------- the split


@pytest.mark.parametrize("dim", [1, 3, 16, 384, 768, 1536, 4096, 100_000])
def test_a_block_is_a_multiple_of_four_rows_within_the_budget(dim: int) -> None:
    step = _centring.rows_per_product(dim)
    assert step % 4 == 0 and step >= 4
    assert step * dim <= _centring.PRODUCT_ELEMENTS or step == 4


@pytest.mark.parametrize(
    ("blas", "expected"),
    [
        ({"name": "scipy-openblas", "version": "0.3.31.188.0"}, "large"),
        ({"name": "scipy-openblas", "version": "0.3.27"}, "large"),
        ({"name": "openblas64", "version": "0.3.23.dev"}, "small"),
        ({"name": "openblas", "version": "0.2.20"}, "small"),
        ({"name": "mkl-sdl", "version": "2024.1"}, "small"),
        ({"name": "accelerate"}, "small"),
        ({}, "small"),
    ],
)
def test_the_budget_follows_the_blas_numpy_was_built_with(
    blas: dict[str, str], expected: str
) -> None:
    config = {"Build Dependencies": {"blas": blas}}
    with mock.patch.object(numpy.__config__, "CONFIG", config, create=True):
        got = _centring._product_budget()
    assert got == {"large": _centring._LARGE_PRODUCT, "small": _centring._SMALL_PRODUCT}[expected]


def test_an_unreadable_build_record_gets_the_small_budget() -> None:
    with mock.patch.object(numpy.__config__, "CONFIG", None, create=True):
        assert _centring._product_budget() == _centring._SMALL_PRODUCT


@st.composite
def around_a_boundary(
    draw: st.DrawFn,
    dims: tuple[int, ...] = (1, 3, 8, 37, 384),
    whole_budget: bool = True,
    min_rows: int = 0,
) -> tuple[int, int, int]:
    """``(rows, dim, budget)`` with ``rows`` within 5 of a whole number of blocks.

    ``whole_budget=False`` keeps to budgets of a few rows a block, so
    ``rows`` stays in the hundreds (the real budget at ``dim=1`` is a
    quarter of a million rows a block: too many to load into a CellStore);
    the blocks start at the first boundary past ``min_rows``.
    """
    dim = draw(st.sampled_from(dims))
    budgets = [dim * 4, dim * 8 + 3, dim * 20] + ([1 << 18] if whole_budget else [])
    budget_ = draw(st.sampled_from(budgets))
    with budget(budget_):
        step = _centring.rows_per_product(dim)
    first = -(-min_rows // step)
    blocks = draw(st.integers(first, first + 4))
    rows = max(min_rows, blocks * step + draw(st.integers(-5, 5)))
    return rows, dim, budget_


@settings(max_examples=150, deadline=None)
@given(around_a_boundary(), st.integers(0, 2**32 - 1), st.sampled_from(["C", "F", "strided"]))
def test_row_dots_is_the_exact_product_within_rounding(
    case: tuple[int, int, int], seed: int, layout: str
) -> None:
    n, dim, budget_ = case
    rows = unit_rows(2 * n if layout == "strided" else n, dim, seed)
    if layout == "strided":
        rows = rows[::2]
    elif layout == "F":
        rows = np.asfortranarray(rows)
    q = unit_rows(1, dim, seed + 1)[0]
    with budget(budget_):
        got = _centring.row_dots(rows, q)
    assert got.dtype == np.float32
    assert_exact_within_rounding(got, rows, q)


def test_row_dots_of_no_rows_is_empty() -> None:
    assert _centring.row_dots(np.zeros((0, 384), np.float32), np.ones(384, np.float32)).size == 0


# ----------------------------------------------------------------- through the CellStore


def cellstore(vecs: F32, *, center: bool = False) -> CellStore:
    """Every vector in partition ``p`` (no graph below 2,049 entries: every search scans)."""
    cells = CellStore(HashEmbedder(dim=vecs.shape[1]), center=center, target_recall=None)
    cells.apply(
        [
            StoredVector(IndexEntry(f"v{i}", partition="p"), -1, f"h{i}", "", v)
            for i, v in enumerate(vecs)
        ]
    )
    return cells


def assert_top_k_within_rounding(
    hits: list[tuple[IndexEntry, float]], scores64: npt.NDArray[np.float64], k: int, eps: float
) -> None:
    """The hits are a top ``k`` of the exact scores, up to ``eps`` of rounding.

    Each hit's score is its exact score within ``eps``; the hits' exact
    scores are the ``k`` best within ``2 * eps`` (two entries closer than that
    may trade places, as they may between one BLAS and another).
    """
    assert len(hits) == min(k, scores64.size)
    rows = np.array([int(e.id[1:]) for e, _ in hits])
    got = np.array([s for _, s in hits])
    assert np.all(np.abs(got - scores64[rows]) <= eps)
    best = np.sort(scores64)[::-1][: len(hits)]
    assert np.all(np.abs(np.sort(scores64[rows])[::-1] - best) <= 2 * eps)
    assert list(got) == sorted(got, reverse=True)


@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from([-1, 0, 1, 2]),
    st.integers(1, 2),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1, 10, 50]),
)
def test_partition_scans_are_exact_around_the_block_boundaries(
    offset: int, blocks: int, seed: int, k: int
) -> None:
    dim = 384
    n = blocks * _centring.rows_per_product(dim) + offset
    vecs = unit_rows(n, dim, seed)
    q = unit_rows(1, dim, seed + 1)[0]
    hits = cellstore(vecs).search_vector(q, k, partitions=["p"])
    scores = vecs.astype(np.float64) @ q.astype(np.float64)
    assert_top_k_within_rounding(hits, scores, k, eps=(dim + 1) * U * 1.01)


@settings(max_examples=20, deadline=None)
@given(
    # Centring needs CENTER_MIN vectors: the rows start past it.
    around_a_boundary(dims=(8, 37, 384), whole_budget=False, min_rows=CENTER_MIN),
    st.integers(0, 2**32 - 1),
)
def test_centred_and_exhaustive_scans_are_exact_with_small_blocks(
    case: tuple[int, int, int], seed: int
) -> None:
    n, dim, budget_ = case
    vecs = unit_rows(n, dim, seed)
    q = unit_rows(1, dim, seed + 1)[0]
    plain = vecs.astype(np.float64) @ q.astype(np.float64)
    mu = vecs.astype(np.float64).mean(0)
    moved = vecs - mu
    centred = (moved / np.linalg.norm(moved, axis=1, keepdims=True)) @ (
        (q - mu) / np.linalg.norm(q - mu)
    )
    with budget(budget_):
        plain_cells, centred_cells = cellstore(vecs), cellstore(vecs, center=True)
        for cells, exact in ((plain_cells, plain), (centred_cells, centred)):
            for hits in (
                cells.search_vector(q, 10, partitions=["p"]),
                cells.exact_search(q, 10),
            ):
                # The centred score divides by norms around the mean: a wider bound.
                eps = (dim + 1) * U * (1.01 if cells is plain_cells else 64)
                assert_top_k_within_rounding(hits, exact, 10, eps)


# ----------------------------------------------------------------- OpenBLAS's pool


class Pool:
    """numpy's OpenBLAS seen from a test: its thread setting, and its hand-offs to the pool.

    OpenBLAS (0.3.29 on) lets a program replace its thread server with a callback;
    this one runs each job on a thread of its own, as the pool would, and counts.
    """

    def __init__(self) -> None:
        here = os.path.dirname(np.__file__)
        libs = glob.glob(here + ".libs/*openblas*.so*") + glob.glob(here + "/.dylibs/*openblas*")
        self.lib: ctypes.CDLL | None = ctypes.CDLL(libs[0]) if libs else None
        self.dispatches = 0
        dojob = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
        self._type = ctypes.CFUNCTYPE(
            None, ctypes.c_int, dojob, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int
        )
        self._set = self._symbol(
            "scipy_openblas_set_threads_callback_function64_",
            "openblas_set_threads_callback_function64_",
            "openblas_set_threads_callback_function",
        )
        self._get = self._symbol(
            "scipy_openblas_get_num_threads64_",
            "openblas_get_num_threads64_",
            "openblas_get_num_threads",
        )

        def run(sync: int, job: Any, n: int, size: int, data: int, arg: int) -> None:
            self.dispatches += 1
            workers = [
                threading.Thread(target=job, args=(i, data + i * size, arg)) for i in range(n)
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join()

        self._callback = self._type(run)

    def _symbol(self, *names: str) -> Any:
        for name in names:
            if self.lib is not None and hasattr(self.lib, name):
                return getattr(self.lib, name)
        return None

    def threads(self) -> int:
        if self._get is None:
            pytest.skip("numpy's OpenBLAS does not say its thread setting")
        return int(self._get())

    @contextmanager
    def watched(self) -> Iterator[None]:
        if self._set is None:
            pytest.skip("numpy's OpenBLAS has no thread-server callback (0.3.29 on has)")
        self._set(self._callback)
        try:
            yield
        finally:
            self._set(self._type())  # NULL: OpenBLAS's own pool again


@pytest.fixture(scope="module")
def pool() -> Pool:
    return Pool()


def test_a_partition_scan_hands_no_product_to_openblass_pool(pool: Pool) -> None:
    dim, n = 1024, 2000  # 2 million elements: a threaded product in one call
    vecs = unit_rows(n, dim, 5)
    q = unit_rows(1, dim, 6)[0]
    plain, centred = cellstore(vecs), cellstore(vecs, center=True)
    before = pool.threads()
    with pool.watched():
        _ = vecs @ q
        if pool.dispatches == 0:
            pytest.skip("OpenBLAS runs one thread here: nothing to hand off")
        pool.dispatches = 0
        for cells in (plain, centred):
            cells.search_vector(q, 10, partitions=["p"])  # lays the set out, then scans
            cells.search_vector(q, 10, partitions=["p"])  # the cached set
            cells.exact_search(q, 10)
        assert pool.dispatches == 0
    assert pool.threads() == before
