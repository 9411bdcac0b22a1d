"""The fusion arithmetic both search paths share: constants, normalisation, cut-offs.

Two channels answer a query on their own scales (a lexical share of the
query's weight, a cosine). A *score fusion* (the default) rescales each
channel's pool to [0, 1] (:func:`minmax`) and takes a weighted mean; a *rank
fusion* (``fusion="rrf"``) adds ``1/(RRF_K + rank + 1)`` per channel. Either
way a candidate may then borrow part of a linked candidate's score
(:data:`SPREAD_DECAY`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memstore.graph import DEFAULT_CONTEXT_DECAY

if TYPE_CHECKING:
    from memstore.search._types import SearchResult

__all__ = [
    "BM25_WEIGHT",
    "DEFAULT_FANOUT",
    "FUSION_DEPTH",
    "FUSION_POOL",
    "FUSION_RRF",
    "FUSION_SCORE",
    "LEXICAL_WEIGHT",
    "LONG_QUERY_TOKENS",
    "POOL_LIMIT",
    "RRF_K",
    "SIGNAL_WEIGHT",
    "SPREAD_DECAY",
    "cut",
    "merge_by_rank",
    "minmax",
]

RRF_K = 60
"""Reciprocal Rank Fusion constant: a hit at rank r adds 1/(RRF_K + r)."""
LONG_QUERY_TOKENS = 3
"""Above this many query tokens the lexical fast path needs every token covered."""
FUSION_DEPTH = 1
"""Times the limit each channel contributes to a rank fusion (``fusion="rrf"``)."""
POOL_LIMIT = 10
"""The smallest limit a search cuts its candidate pools for.

A search with a smaller ``limit`` reads the pools of ``limit=10`` and keeps
its first ``limit`` results, so ``search(q, limit=k)`` is the first ``k`` of
``search(q, limit=10)``: the best hit does not change with how many were
asked for. (Cut at the limit itself, a one-hit pool takes the newest of tied
lexical hits, and a lone hit looks confident enough to skip the semantic
channel.) The smaller limits cost what ``limit=10`` costs.
"""
FUSION_SCORE = "score"
"""Fuse the channels on their normalised scores (the default)."""
FUSION_RRF = "rrf"
"""Fuse the channels on their ranks, by Reciprocal Rank Fusion."""
FUSION_POOL = 200
"""Hits each channel contributes to a score fusion (at least; more when the limit asks).

The pool is the channel's sample of its own score distribution: its best hit
normalises to 1 and its weakest to 0, so the pool must reach well past the
results asked for, down to scores that mean "not relevant". A shallow pool
stretches the differences among a few good hits into the whole [0, 1] range.
"""
LEXICAL_WEIGHT = 0.5
"""Share of the lexical channel in a score fusion (the semantic one has the rest).

Equal shares: neither channel is trusted over the other a priori.
"""
BM25_WEIGHT = 0.1
"""The BM25 channel's share of a score fusion when it is on (``SearchConfig.bm25_weight``,
off by default), on top of the two channels' 1.

Small: BM25 scores the same words the lexical channel matched, so it is a
second opinion that reorders near-ties (a short turn holding the query's
rarest word over a long one holding it too), not a third vote of equal
weight. See docs/benchmarks.md for what it buys on conversational data and
what it costs.
"""
SIGNAL_WEIGHT = 0.25
"""What one query signal (a named date, a "when" question, a named subject) adds to a fused score.

Half of one channel's full share (a score fusion's channels have 0.5 each),
a quarter of the fused range: it orders candidates the channels rate about
equally, and lifts a fair match over a slightly better one that does not fit
what the query says about its answer, never a weak match over a strong one.
"""
DEFAULT_FANOUT = 3
"""Times the limit each channel pulls while source replacement runs."""
SPREAD_DECAY = DEFAULT_CONTEXT_DECAY
"""What one hop keeps of a score spread along a link (times the link's weight).

The store's own spreading activation (:meth:`~memstore.store.Store.context`)
decays by the same factor per hop: a search spreads like a traversal does.
"""


def minmax(scores: Sequence[float]) -> list[float]:
    """Scores rescaled to [0, 1] over their own range: best 1, weakest 0.

    A channel's raw scores are on its own scale (a lexical share of the query,
    a cosine), so a fusion first puts both on the same one. When every score
    is equal (or there is one) nothing tells them apart: all are 1.

    >>> minmax([2.0, 1.5, 1.0]), minmax([0.3, 0.3]), minmax([])
    ([1.0, 0.5, 0.0], [1.0, 1.0], [])
    """
    if not scores:
        return []
    hi, lo = max(scores), min(scores)
    if hi <= lo:
        return [1.0] * len(scores)
    span = hi - lo
    return [(s - lo) / span for s in scores]


def tie_ranks(scores: Sequence[float]) -> list[int]:
    """Each hit's rank in a best-first list where equal scores share the best rank of their tie.

    The "1224" ranking: the order within a tie is only recency, so it must
    not weigh in a rank fusion; the other channel breaks the tie instead.

    >>> tie_ranks([0.9, 0.5, 0.5, 0.2])
    [0, 1, 1, 3]
    """
    out: list[int] = []
    rank = 0
    for i, s in enumerate(scores):
        if i and s < scores[i - 1]:
            rank = i
        out.append(rank)
    return out


def cut(hits: list[tuple[Any, float]], gap: float, cliff: bool) -> list[tuple[Any, float]]:
    """Apply the semantic gap and cliff cut-offs to visible hits (best first)."""
    if not hits:
        return hits
    if gap > 0:
        best = hits[0][1]
        hits = [(e, s) for e, s in hits if best - s <= gap]
    if cliff and len(hits) > 1:
        drops = [hits[i][1] - hits[i + 1][1] for i in range(len(hits) - 1)]
        steepest = max(range(len(drops)), key=lambda i: (drops[i], -i))
        if drops[steepest] > 0:
            hits = hits[: steepest + 1]
    return hits


def merge_by_rank(a: list[SearchResult], b: list[SearchResult], limit: int) -> list[SearchResult]:
    """Interleave two ranked lists by reciprocal rank (ties: the first list first).

    An item in both keeps its better rank; at most ``limit`` come back.
    """
    scored: dict[str, tuple[float, int, SearchResult]] = {}
    for lst_no, lst in enumerate((a, b)):
        for rank, r in enumerate(lst):
            s = 1.0 / (RRF_K + rank)
            have = scored.get(r.item.id)
            if have is None or s > have[0]:
                scored[r.item.id] = (s, lst_no, r)
    ordered = sorted(scored.values(), key=lambda t: (-t[0], t[1], t[2].item.id))
    return [r for _, _, r in ordered[:limit]]
