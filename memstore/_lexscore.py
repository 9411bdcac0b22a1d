"""Scoring a query's candidates over integer slots: the lexical index's ranking math.

A :class:`QueryPlan` holds each query token's matches (slots and levels, from
the :class:`~memstore.lexical.Lexicon`) and weight. :func:`_accumulate` sums
every token's contribution per slot in one ``np.bincount`` over the
concatenated matches (or a sort, when few slots match in a large index), and
:func:`_kth_largest` finds the score at a result limit's cut, so
:class:`~memstore._lexindex.LexicalIndex` ranks in C-level array operations
and builds Python objects only for the hits it returns.

Where the optional C extension is built (``memstore._speedups``, switched off by
``MEMSTORE_PURE_PYTHON=1`` or :func:`memstore._wordbatch.pure_python`),
:func:`native_rank` does all of it (sums, filters, scores, cut and order) in one
compiled pass that releases the GIL (for a query matching a few thousand postings or
more; less work keeps it): a server's other threads run meanwhile. The
numpy path stays, as the fallback and the oracle it is tested against
(``tests/test_lexical_differential.py``): the same hits in the same order, the same
scores bit for bit (sums in token order, as ``np.bincount`` adds them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, cast, overload

import numpy as np
import numpy.typing as npt

from memstore.lexical import LEVEL_SUBSTRING, TITLE_WEIGHT, TokenMatch

__all__ = [
    "NativeColumns",
    "NativeRanked",
    "NativeToken",
    "QueryPlan",
    "Scoring",
    "Unranked",
    "native_rank",
    "order_hits",
    "plan_tokens",
]


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """A query's tokens with what each matched and its weight, computed once.

    A store keeps a query's plan while nothing is written, so what every
    ranking of it needs is worked out once, on the plan: its total weight
    and its tokens as the compiled rank takes them (:func:`plan_tokens`).
    """

    tokens: tuple[str, ...]
    matches: tuple[TokenMatch, ...]
    weights: tuple[float, ...]
    fuzzy_ok: tuple[bool, ...]
    total_weight: float = field(init=False, repr=False, compare=False)
    """The sum of the weights: the best score's denominator."""
    native: tuple[tuple[NativeToken, ...], Scoring] | None = field(
        init=False, repr=False, compare=False, default=None
    )
    """:func:`plan_tokens`' answer, once asked (``None`` before)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_weight", sum(self.weights))


_SPARSE = 8
"""Below ``capacity / _SPARSE`` matched entries a query is scored by a sort, not densely..."""
_DENSE_CAP = 16_384
"""...unless the capacity is at most this: arrays that small cost less than the sort."""
_PARTITION_MAX = 2048
"""Up to this many candidates :func:`_kth_largest` partitions at once (one C call, about
as cheap as one step of its walk at that size)."""


_Ix = npt.NDArray[np.intp]
_F64 = npt.NDArray[np.float64]
_Bool = npt.NDArray[np.bool_]
_Sums = tuple[_Ix, _F64, _F64, _Ix, _Bool]


def _fsum(x: _Ix, w: _F64 | None, n: int) -> _F64:
    """``np.bincount`` with weights, typed (it sums in input order)."""
    return np.asarray(np.bincount(x, w, n), np.float64)


def _accumulate(plan: QueryPlan, cap: int) -> _Sums | None:
    """Every matched slot with its score sums: ``(slots, acc, title, covered, fuzzy)``.

    ``acc`` sums weight * level over the tokens, ``title`` the same for title
    matches, ``covered`` counts the tokens matched by the exact rule and
    ``fuzzy`` tells whether one came from the fuzzy channel. ``None``: no match.
    """
    ms = [(m, w) for m, w in zip(plan.matches, plan.weights, strict=True) if m.slots.size]
    if not ms:
        return None
    slots: _Ix
    levels: _F64
    vals: _F64
    if len(ms) == 1:
        slots, levels, vals = ms[0][0].slots, ms[0][0].levels, ms[0][1] * ms[0][0].levels
    else:
        slots = np.concatenate([m.slots for m, _ in ms])
        levels = np.concatenate([m.levels for m, _ in ms])
        vals = np.concatenate([w * m.levels for m, w in ms])
    tms = [(m, w) for m, w in ms if m.title_slots.size]
    tslots: _Ix | None = np.concatenate([m.title_slots for m, _ in tms]) if tms else None
    tvals: _F64 | None = np.concatenate([w * m.title_levels for m, w in tms]) if tms else None
    exact: _Bool = levels >= LEVEL_SUBSTRING
    cand: _Ix
    title: _F64
    if len(ms) == 1:
        # One token: its slots are distinct and sorted already.
        cand = slots
        title = np.zeros(cand.size, np.float64)
        if tslots is not None and tvals is not None:
            title[np.searchsorted(cand, tslots)] = tvals
        return _nonzero(cand, vals, title, exact.astype(np.intp), ~exact)
    if slots.size * _SPARSE < cap and cap > _DENSE_CAP:
        cand, inv = _distinct(slots)
        n = int(cand.size)
        title = (
            _fsum(np.searchsorted(cand, tslots), tvals, n)
            if tslots is not None
            else np.zeros(n, np.float64)
        )
        return _nonzero(
            cand,
            _fsum(inv, vals, n),
            title,
            np.bincount(inv[exact], minlength=n),
            np.bincount(inv[~exact], minlength=n) > 0,
        )
    dense = _fsum(slots, vals, cap)
    cand = np.flatnonzero(dense != 0.0)  # a bool test: numpy's nonzero is slow on floats
    covered: _Ix = np.bincount(slots[exact], minlength=cap)[cand]
    fuzzy: _Bool = (np.bincount(slots[~exact], minlength=cap) > 0)[cand]
    title = _fsum(tslots, tvals, cap)[cand] if tslots is not None else np.zeros(cand.size)
    return cand, dense[cand], title, covered, fuzzy


def _distinct(slots: _Ix) -> tuple[_Ix, _Ix]:
    """``np.unique(slots, return_inverse=True)``: the distinct slots, ascending, and where
    each of ``slots`` is among them, by the same sort, without ``np.unique``'s layers of
    Python (on a query's 650 slots: 9 us, where ``np.unique`` took 15)."""
    order = np.argsort(slots)
    ordered = slots[order]
    first = np.empty(ordered.size, np.bool_)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    inv = np.empty(ordered.size, np.intp)
    inv[order] = np.cumsum(first) - 1
    return ordered[first], inv


_KTH_STEPS = 4
"""Distinct top scores :func:`_kth_largest` walks before it partitions."""


def _kth_largest(scores: _F64, k: int) -> float:
    """The ``k``-th largest of ``scores`` (``k <= scores.size``), ties counted.

    Lexical scores take few distinct values at the top (a handful of levels
    times the token weights), so walking down the distinct maxima finds it in
    a pass or two of C loops; a partition is the fallback, and the way for a
    few candidates.
    """
    if scores.size <= _PARTITION_MAX:
        return float(np.partition(scores, scores.size - k)[scores.size - k])
    top = float(scores.max())
    seen = int(np.count_nonzero(scores >= top))
    for _ in range(_KTH_STEPS):
        if seen >= k:
            return top
        below = scores[scores < top]
        top = float(below.max())
        seen += int(np.count_nonzero(below >= top))
    if seen >= k:
        return top
    return float(np.partition(scores, scores.size - k)[scores.size - k])


def order_hits(
    cand: _Ix,
    scores: _F64,
    pos: _Ix,
    limit: int | None,
    updated: _F64,
    ids: Sequence[str | None],
) -> _Ix:
    """The first ``limit`` of ``pos`` by score desc, then most recently updated, then id.

    ``cand``: the candidates' slots; ``scores``: theirs; ``updated``: each
    slot's update time; ``ids``: each slot's id. A vectorised sort on (score,
    update time); only runs tied on both are ordered by id in Python, and only
    those that reach into the cut.
    """
    s = scores[pos]
    u = updated[cand[pos]]
    order = np.lexsort((-u, -s))
    pos, s, u = pos[order], s[order], u[order]
    n = int(pos.size)
    need = n if limit is None else min(limit, n)
    if n <= 1:
        return pos[:need]
    tied = (s[1:] == s[:-1]) & (u[1:] == u[:-1])
    if not tied[:need].any():
        return pos[:need]
    starts = np.flatnonzero(np.concatenate(([True], ~tied))).tolist()
    ends = [*starts[1:], n]
    out: list[int] = []
    for a, b in zip(starts, ends, strict=True):
        if a >= need:
            break
        run = pos[a:b].tolist()
        if b - a > 1:
            run.sort(key=lambda p: ids[int(cand[p])] or "")
        out.extend(run)
    return np.array(out[:need], np.intp)


def _nonzero(cand: _Ix, acc: _F64, title: _F64, covered: _Ix, fuzzy: _Bool) -> _Sums:
    """The candidates whose sum is not zero (a plan may carry a zero weight)."""
    nz = acc != 0.0
    if nz.all():
        return cand, acc, title, covered, fuzzy
    return cand[nz], acc[nz], title[nz], covered[nz], fuzzy[nz]


_WIDE = np.dtype(np.intp).itemsize == 8
"""The compiled rank reads 8-byte slots (a 32-bit build ranks with numpy)."""

NativeRanked = tuple[list[Any], tuple[str, ...], _F64]
"""The hits (``hit_type`` tuples: id, score, tokens covered, fuzzy), best first; their ids;
their scores (read-only)."""
NativeColumns = tuple[bytes, tuple[str, ...], bytes, bytes, bytes]
"""The same hits as columns (``hit_type`` ``None``): lexicon slots (int64), ids, scores
(float64), covered (int32) and fuzzy (uint8), as bytes."""


class Unranked(Exception):
    """:func:`native_rank` cannot rank this plan (a column it does not read): use numpy."""


NativeToken = tuple[_Ix, _F64, _Ix, _F64, float]
"""One token for ``lex_rank``: slots (increasing, live), the level at each, the same two for
title matches, and the token's weight."""
Scoring = tuple[float, float, float]
"""How ``lex_rank`` scores a slot: ``(denom, title_weight, exact_level)`` (:func:`native_rank`)."""


def plan_tokens(plan: QueryPlan) -> tuple[tuple[NativeToken, ...], Scoring]:
    """The plan's matches as ``lex_rank`` tokens, and the lexical channel's scoring.

    Made once a plan and kept on it (:attr:`QueryPlan.native`): a store ranks
    a kept plan again for every search of the same tokens until a write.
    """
    got = plan.native
    if got is None:
        tokens = tuple(
            (m.slots, m.levels, m.title_slots, m.title_levels, w)
            for m, w in zip(plan.matches, plan.weights, strict=True)
            if m.slots.size
        )
        scoring = ((1.0 + TITLE_WEIGHT) * plan.total_weight, TITLE_WEIGHT, LEVEL_SUBSTRING)
        got = (tokens, scoring)
        object.__setattr__(plan, "native", got)  # frozen: set once, as a cache
    return got


@overload
def native_rank(
    native: ModuleType,
    tokens: tuple[NativeToken, ...],
    scoring: Scoring,
    cols: tuple[npt.NDArray[Any], ...],
    codes: tuple[int | None, int | None, int | None],
    hidden: tuple[int, ...],
    now_ts: float,
    limit: int | None,
    ids: list[str | None],
    hit_type: type[tuple[Any, ...]],
) -> NativeRanked | None: ...
@overload
def native_rank(
    native: ModuleType,
    tokens: tuple[NativeToken, ...],
    scoring: Scoring,
    cols: tuple[npt.NDArray[Any], ...],
    codes: tuple[int | None, int | None, int | None],
    hidden: tuple[int, ...],
    now_ts: float,
    limit: int | None,
    ids: list[str | None],
    hit_type: None,
) -> NativeColumns | None: ...
def native_rank(
    native: ModuleType,
    tokens: tuple[NativeToken, ...],
    scoring: Scoring,
    cols: tuple[npt.NDArray[Any], ...],
    codes: tuple[int | None, int | None, int | None],
    hidden: tuple[int, ...],
    now_ts: float,
    limit: int | None,
    ids: list[str | None],
    hit_type: type[tuple[Any, ...]] | None,
) -> NativeRanked | NativeColumns | None:
    """The tokens' hits ranked by the compiled ``lex_rank``; ``None``: no candidate passes.

    A slot's score is ``(sum of weight x level + title_weight x the same over
    title matches) / denom`` (``scoring``), summed in token order as numpy
    sums; a token counts as covered where its level is at least
    ``exact_level``, else the hit is fuzzy. The lexical channel's scoring is
    :func:`plan_tokens`'; the BM25 channel passes each word's documents at
    their length factor (:meth:`~memstore._lexindex.LexicalIndex.bm25`).
    ``cols``: the index's per-slot columns (stale, updated, kind, subject,
    service, partition, shared); ``codes``: the kind, subject and partition
    codes to keep (``None``: no such filter; ``hidden`` applies without a
    kind); ``ids``: each slot's id (``None``: a dead slot), which breaks ties on
    score and update time, as :func:`order_hits` does; ``hit_type``: the tuple
    type of a hit (:class:`~memstore._lexindex.LexicalHit`), built in C; ``None``: the hits as
    columns (:data:`NativeColumns`, no tuple built; else :data:`NativeRanked`).

    :raises Unranked: the compiled rank cannot take these tokens (slots not
        increasing, not 8-byte integers, or not contiguous): rank them with numpy.
    """
    if not _WIDE:
        raise Unranked("slots are not 8-byte integers here")
    if limit is not None and limit < 1:  # no search asks it: numpy answers as it always did
        raise Unranked(f"limit {limit}")
    denom, title_weight, exact_level = scoring
    kind, subject, partition = codes
    try:
        got = native.lex_rank(
            tokens,
            denom,
            title_weight,
            exact_level,
            cols,
            kind,
            subject,
            partition,
            hidden,
            now_ts,
            -1 if limit is None else limit,
            ids,
            hit_type,
        )
    except (TypeError, ValueError, BufferError) as e:  # an array it does not read as it is
        raise Unranked(str(e)) from None
    if got is NotImplemented:
        raise Unranked("a match's slots are not increasing")
    if got is None or hit_type is None:
        return cast("NativeColumns | None", got)
    hits, hit_ids, raw = got
    return hits, hit_ids, np.frombuffer(raw, np.float64)  # read-only: a view of bytes
