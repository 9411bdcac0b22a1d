"""Relevance: how likely a hit is to be evidence for the query, from absolute signals.

A result's ``score`` orders one call's results and says nothing across calls:
it is rank-shaped (1.100, 1.048, 1.000, ...) whatever was found, so a caller
cannot cut unrelated results with it, and a question the memory cannot answer
fills the list all the same. ``relevance`` is the answer to that: a number in
[0, 1] computed from what the hit itself has in common with the query, never
from its rank or from the other hits, so a threshold means the same on every
call (``search(..., min_relevance=...)``).

The signals, per hit:

``lexical`` (L, in [0, 1])
    The hit's lexical score: the share of the query's IDF weight the hit's
    words match, each query token weighted by how well it matched (exact 1,
    prefix 0.9, stem 0.85, one edit 0.8, substring 0.6, fuzzy at most 0.5),
    with the title bonus (:data:`~memstore.lexical.TITLE_WEIGHT`). 0 when it
    matches no query token. A hit beyond the lexical channel's pool (which
    stops at its depth, :data:`~memstore.search.FUSION_POOL` for a score
    fusion) scores at most the pool's weakest score, and is given that bound:
    scoring it on its own would cost more than the rest of the search.
``cosine`` (C, in [-1, 1])
    The plain cosine of the query's vector and the hit's stored vector (not
    the centred similarity a ``CellStore(center=True)`` ranks by, which
    depends on the collection). Known when this call embedded the query (the
    semantic channel ran) and the vector index holds the hit.
``other_subject`` (S, 0 or 1)
    1 when the query names a subject the store knows (every word of an
    item's ``subject``, or ``service/`` tag value, is a word of the query)
    and the hit's subject is another one: the hit is about someone else.
    "What did Caroline say about the race?" answered by a turn of Melanie's.

The model is logistic, with one set of weights for a hit whose cosine is
known and one for a hit whose cosine is not (the lexical fast path made no
embedding call)::

    relevance = 1 / (1 + exp(-(b0 + bL * L + bC * C + bS * S)))      cosine known
    relevance = 1 / (1 + exp(-(a0 + aL * L + aS * S)))               cosine unknown

Meaning: **an estimate of the probability that the hit is one of the query's
evidence items**, fitted on LoCoMo's development conversations (the top-10
hybrid hits of the questions of categories 1-4, each labelled by whether it is
an annotated evidence turn; the ``all-MiniLM-L6-v2`` int8 embedder; see
``docs/benchmarks.md`` for the fit, its leave-one-conversation-out check and
the calibration table). About one hit in eleven was evidence there, so most
values are small: 0.5 is a strong hit, 0.05 a weak one. The weights are
readable: matching the query's whole weight lexically multiplies the odds by
about e^3 (L is at most 0.8 for an item without a title); each 0.1 of cosine by
about 1.17; a hit about another subject than the one the query names has its
odds cut by about e^-2.5 (a factor of 12). With another embedder the cosine term is on that
model's scale: the order of hits is kept, the probability reading holds
approximately (the hash embedder scores unrelated texts near 0, as MiniLM does).

An item whose id is the query (``hybrid_search_full``'s exact-id match) has
relevance 1; a host's live match keeps the relevance its host gave it, if
higher than its own signals'. Every other result, a source that replaced a hit
(``source_relation``) or an item reached by a link (link expansion) included,
is scored on its own signals: what it shares with the query.

>>> round(relevance(0.0, 0.0, False), 3)          # nothing in common
0.021
>>> round(relevance(0.6, 0.5, False), 2), round(relevance(0.6, 0.5, True), 3)
(0.3, 0.034)
>>> relevance(0.8, 0.7, False) > relevance(0.3, 0.4, False) > relevance(0.3, 0.4, True)
True
>>> 0.0 <= relevance(1.0, None, False) <= 1.0
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from memstore.item import EXACT_ID_MATCH_SCORE
from memstore.search._types import SearchResult

__all__ = [
    "RELEVANCE_MODEL",
    "RelevanceModel",
    "Signals",
    "assign_relevance",
    "relevance",
    "signals",
]

RowsOf: TypeAlias = Callable[[Sequence[str]], tuple[npt.NDArray[np.float32], list[int]]]
"""An index's vectors of many ids: the rows of those it holds, and their positions."""


@dataclass(frozen=True)
class RelevanceModel:
    """The logistic model's weights (see :mod:`memstore.search._relevance`)."""

    intercept: float
    """b0: log-odds of a hit with nothing in common with the query."""
    lexical: float
    """bL: log-odds per unit of lexical score."""
    cosine: float
    """bC: log-odds per unit of cosine."""
    other_subject: float
    """bS: log-odds added when the hit is about another subject than the query names."""
    lexical_only_intercept: float
    """a0: b0 for a hit whose cosine is unknown."""
    lexical_only: float
    """aL: bL for a hit whose cosine is unknown."""
    lexical_only_other_subject: float
    """aS: bS for a hit whose cosine is unknown."""


RELEVANCE_MODEL = RelevanceModel(
    intercept=-3.85,
    lexical=3.71,
    cosine=1.56,
    other_subject=-2.5,
    lexical_only_intercept=-3.28,
    lexical_only=4.08,
    lexical_only_other_subject=-2.83,
)
"""The weights in use: LoCoMo dev's fit (``benchmarks/locomo.py``, mode ``hybrid``,
``refit_all``), rounded to two decimals."""


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def relevance(
    lexical: float,
    cosine: float | None,
    other_subject: bool,
    model: RelevanceModel = RELEVANCE_MODEL,
) -> float:
    """The relevance of a hit with these signals (``cosine=None``: unknown), in [0, 1]."""
    if cosine is None:
        z = model.lexical_only_intercept + model.lexical_only * lexical
        z += model.lexical_only_other_subject if other_subject else 0.0
    else:
        z = model.intercept + model.lexical * lexical + model.cosine * cosine
        z += model.other_subject if other_subject else 0.0
    return _sigmoid(z)


@dataclass(frozen=True)
class Signals:
    """One hit's signals: what :func:`relevance` is computed from."""

    lexical: float
    cosine: float | None
    other_subject: bool


def signals(
    results: Sequence[SearchResult],
    lexical: Mapping[str, float],
    beyond: float,
    query_vector: npt.NDArray[np.float32] | None,
    vector_of: Callable[[str], npt.NDArray[np.float32] | None] | None,
    named_subjects: frozenset[str],
) -> list[Signals]:
    """Each result's signals.

    ``lexical`` maps ids to the lexical channel's scores; a result missing
    from it gets ``beyond`` (0 when the channel returned every match, else the
    weakest score it returned). ``vector_of`` reads a stored vector
    (``None`` or no ``query_vector``: cosines unknown). ``named_subjects``: the
    known subjects the query names.
    """
    cosines = _cosines(results, query_vector, vector_of)
    return [
        Signals(lexical.get(r.item.id, beyond), cos, _other_subject(r.item.subject, named_subjects))
        for r, cos in zip(results, cosines, strict=True)
    ]


def _other_subject(subject: str, named_subjects: frozenset[str]) -> bool:
    """Whether a hit about ``subject`` is about another subject than the query names."""
    return bool(named_subjects) and bool(subject) and subject not in named_subjects


def _cosines(
    results: Sequence[SearchResult],
    query_vector: npt.NDArray[np.float32] | None,
    vector_of: Callable[[str], npt.NDArray[np.float32] | None] | None,
    rows_of: RowsOf | None = None,
) -> list[float | None]:
    """Each result's cosine with the query, ``None`` where either vector is missing.

    ``rows_of``: the index's vectors of many ids in one call (its
    ``vector_rows``: the rows of the ids it holds, and their positions), read
    instead of ``vector_of`` once per result when given: the same rows.
    """
    if query_vector is None or (vector_of is None and rows_of is None):
        return [None] * len(results)
    q = np.asarray(query_vector, np.float32).ravel()
    # Scaled by the power of two that brings its largest value into [0.5, 1) (exact): a
    # direction of any size (a caller's query_vector * 1e20) then has a float32 norm.
    # (``math.frexp`` of the float32 maximum: its exponent, as ``np.frexp``'s, one call less.)
    q = np.ldexp(q, -math.frexp(float(np.abs(q).max(initial=0.0)))[1])
    qn = float(q @ q) ** 0.5
    out: list[float | None] = [None] * len(results)
    rows: npt.NDArray[np.float32]
    if rows_of is not None:
        rows, at = rows_of([r.item.id for r in results])
        if rows.ndim != 2 or rows.shape[1:] != q.shape:  # another index's dimension
            return out
    else:
        assert vector_of is not None
        vecs = [vector_of(r.item.id) for r in results]
        at = [i for i, v in enumerate(vecs) if v is not None and v.shape == q.shape]
        # np.array of equal-shaped rows: what np.stack builds, without its per-row Python.
        rows = np.array([vecs[i] for i in at]) if at else np.zeros((0, 0), np.float32)
    if not at or qn == 0.0:
        return out
    norms = np.sqrt(np.einsum("ij,ij->i", rows, rows)) * qn
    dots = rows @ q
    if norms.min() >= 1e-30:  # the common case: no zero vector, no guard needed
        cos: list[float] = (dots / norms).tolist()
    else:
        cos = np.where(norms > 0, dots / np.maximum(norms, 1e-30), 0.0).tolist()
    if len(at) == len(out):  # every result has its vector: the cosines in order
        return [*cos]
    for i, c in zip(at, cos, strict=True):
        out[i] = float(c)
    return out


def assign_relevance(
    results: Sequence[SearchResult],
    lexical: Mapping[str, float],
    beyond: float,
    query_vector: npt.NDArray[np.float32] | None,
    vector_of: Callable[[str], npt.NDArray[np.float32] | None] | None,
    named_subjects: frozenset[str],
    rows_of: RowsOf | None = None,
) -> None:
    """Set every result's ``relevance`` in place (arguments as for :func:`signals`;
    ``rows_of`` as for :func:`_cosines`)."""
    # signals() and relevance() inlined, without a Signals object or a call per hit: the
    # same operations in the same order (``test_relevance_inlined`` holds them to it).
    cosines = _cosines(results, query_vector, vector_of, rows_of)
    m = RELEVANCE_MODEL
    b0, b_lex, b_cos, b_other = m.intercept, m.lexical, m.cosine, m.other_subject
    a0, a_lex, a_other = m.lexical_only_intercept, m.lexical_only, m.lexical_only_other_subject
    get, exp = lexical.get, math.exp
    for r, cos in zip(results, cosines, strict=True):
        if r.score >= EXACT_ID_MATCH_SCORE:
            r.relevance = 1.0
            continue
        item = r.item
        subject = item.subject
        other = bool(named_subjects) and bool(subject) and subject not in named_subjects
        lex = get(item.id, beyond)
        if cos is None:
            z = a0 + a_lex * lex
            z += a_other if other else 0.0
        else:
            z = b0 + b_lex * lex + b_cos * cos
            z += b_other if other else 0.0
        if z >= 0:
            p = 1.0 / (1.0 + exp(-z))
        else:
            e = exp(z)
            p = e / (1.0 + e)
        if p > r.relevance:  # max(r.relevance, p)
            r.relevance = p
