"""The vector benchmark's data: seeded unit vectors, filters, exact ground truth.

Two generators (``uniform`` on the sphere, the hardest input for a graph
index; ``lowrank``, near a 32-dimensional subspace, like real sentence
embeddings), the filtered cases (entry ``i`` lives in partition ``i % 100``),
the exact top 10 per query by a numpy scan, and recall@10 against it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DIM = 384
TOP_K = 10
PARTITIONS = 100
"""Entry ``i`` is in partition ``i % 100``: one partition holds 1%, ten hold 10%."""
DATA_KINDS = ("uniform", "lowrank")
LOWRANK_DIM = 32
"""Latent dimension of ``--data lowrank``..."""
LOWRANK_NOISE = 0.3
"""...and its isotropic noise, as a fraction of the signal's norm."""

Vec = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FilterSpec:
    """One filtered-search case: which partitions are visible and how the filter is given."""

    name: str
    share: float
    partitions: tuple[str, ...]
    via: str
    """``partitions`` (CellStore's precomputed label sets) or ``visible`` (a predicate)."""


def partition(i: int) -> str:
    return f"p{i % PARTITIONS:02d}"


FILTERS = (
    FilterSpec("1% partitions", 0.01, (partition(0),), "partitions"),
    FilterSpec("10% partitions", 0.10, tuple(partition(i) for i in range(10)), "partitions"),
    FilterSpec("10% visible", 0.10, tuple(partition(i) for i in range(10)), "visible"),
)


@dataclass
class Quality:
    """How good the results are against an exact scan of the same candidates."""

    recall_at_10: float
    """Mean over queries of |results ∩ exact top 10| / |exact top 10|."""
    mean_results: float
    min_results: int


def unit_vectors(n: int, dim: int, rng: np.random.Generator) -> Vec:
    """``n`` random float32 unit vectors (Gaussian, normalised: uniform on the sphere)."""
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def lowrank_vectors(n: int, dim: int, rng: np.random.Generator, basis: Vec) -> Vec:
    """``n`` unit vectors near the subspace spanned by ``basis`` (plus isotropic noise).

    A stand-in for real sentence embeddings, whose intrinsic dimension is far
    below their length: uniform random vectors in 384 dimensions are the
    hardest case there is for a graph index (every point is nearly equidistant).
    """
    latent = rng.standard_normal((n, basis.shape[1]), dtype=np.float32)
    sigma = LOWRANK_NOISE * np.sqrt(basis.shape[1] / dim)
    x = latent @ basis.T + sigma * rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    out: Vec = x.astype(np.float32)
    return out


def make_data(
    size: int, n_queries: int, dim: int, seed: int, kind: str = "uniform"
) -> tuple[Vec, Vec]:
    """The collection and the queries for one size (same seed, same data).

    ``uniform``: uniform on the unit sphere. ``lowrank``: near a random
    :data:`LOWRANK_DIM`-dimensional subspace (see :func:`lowrank_vectors`).
    """
    rng = np.random.default_rng(seed)
    qrng = np.random.default_rng(seed + 1)
    if kind == "uniform":
        return unit_vectors(size, dim, rng), unit_vectors(n_queries, dim, qrng)
    q, _ = np.linalg.qr(np.random.default_rng(seed + 2).standard_normal((dim, LOWRANK_DIM)))
    basis = q.astype(np.float32)
    return lowrank_vectors(size, dim, rng, basis), lowrank_vectors(n_queries, dim, qrng, basis)


def subset_labels(size: int, spec: FilterSpec) -> Ids:
    """The labels (row numbers) a filter lets through, ascending."""
    wanted = {int(p[1:]) for p in spec.partitions}
    labels = np.arange(size, dtype=np.int64)
    return labels[np.isin(labels % PARTITIONS, list(wanted))]


def exact_top_k(vecs: Vec, queries: Vec, labels: Ids | None, k: int) -> list[set[int]]:
    """The exact top ``k`` row numbers per query among ``labels`` (all rows when None)."""
    cand = vecs if labels is None else vecs[labels]
    k = min(k, len(cand))
    out: list[set[int]] = []
    for start in range(0, len(queries), 50):  # bounded memory at 100k rows
        scores = queries[start : start + 50] @ cand.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        for row in top:
            out.append(set((row if labels is None else labels[row]).tolist()))
    return out


def quality(found: Sequence[Sequence[int]], truth: Sequence[set[int]]) -> Quality:
    """recall@10 and result counts of ``found`` (row numbers, best first) against ``truth``."""
    recalls = [
        len(set(f[:TOP_K]) & t) / len(t) if t else 1.0 for f, t in zip(found, truth, strict=True)
    ]
    counts = [len(f) for f in found]
    return Quality(
        recall_at_10=statistics.fmean(recalls),
        mean_results=statistics.fmean(counts),
        min_results=min(counts),
    )


def sentences(n: int, seed: int) -> list[str]:
    """``n`` short English-ish sentences (6-20 words) from the lexical benchmark's corpus."""
    from corpus import generate_corpus

    out: list[str] = []
    for note in generate_corpus(n, seed):
        words = note.content.rstrip(".").split()[:12]
        out.append(f"{note.title}: {' '.join(words)}.")
    return out
