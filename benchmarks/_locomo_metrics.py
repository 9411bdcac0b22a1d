"""The LoCoMo benchmark's metrics: recall, session recall and MRR per question, latency per mode.

Part of ``benchmarks/locomo.py`` (run that script).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from _common import percentile
from _locomo_data import CATEGORIES, Question
from _locomo_modes import Search

LATENCY_K = 10
"""Latency is reported for the ``limit=10`` call."""


@dataclass
class Scores:
    """One mode on one question."""

    recall: dict[int, float]
    session_recall: dict[int, float]
    rr: float
    first_hit: int | None
    """1-based rank of the first evidence turn, ``None`` when it is not in the top max-k."""


def score(q: Question, by_k: dict[int, list[str]]) -> Scores:
    """Turn and session recall@k of the ranking returned for each k; RR of the deepest one."""
    ev = set(q.evidence)
    deepest = by_k[max(by_k)]
    first = next((i for i, id in enumerate(deepest, 1) if id in ev), None)
    recall: dict[int, float] = {}
    sess: dict[int, float] = {}
    for k, ranked in by_k.items():
        top = ranked[:k]
        recall[k] = len(ev.intersection(top)) / len(ev)
        touched = {int(id.rsplit(":", 2)[-2][1:]) for id in top}
        sess[k] = len(q.sessions & touched) / len(q.sessions)
    return Scores(recall, sess, 1.0 / first if first else 0.0, first)


@dataclass
class Metrics:
    """Means over a set of questions."""

    questions: int
    recall: dict[str, float]
    session_recall: dict[str, float]
    mrr: float


def aggregate(scores: Sequence[Scores], ks: Sequence[int]) -> Metrics:
    """Means of the per-question scores (zeros for an empty set)."""
    n = len(scores)

    def mean(xs: Iterable[float]) -> float:
        xs = list(xs)
        return statistics.fmean(xs) if xs else 0.0

    return Metrics(
        questions=n,
        recall={str(k): mean(s.recall[k] for s in scores) for k in ks},
        session_recall={str(k): mean(s.session_recall[k] for s in scores) for k in ks},
        mrr=mean(s.rr for s in scores),
    )


@dataclass
class Latency:
    """Per-query search time in ms (one timed pass, query embedding excluded)."""

    p50_ms: float
    p95_ms: float
    mean_ms: float
    includes_embedding: bool
    note: str


LATENCY_NOTES = {
    "lexical": "Store.keyword_search call",
    "semantic": "CellStore.search_timed index_s (exact scan of the partition)",
    "hybrid": "Searcher.hybrid_search call minus its embed phase (a cache hit)",
    "hybrid_full": "Searcher.hybrid_search_full call minus its embed phase (a cache hit)",
    "bm25s": "bm25s.tokenize + retrieve, one query per call",
    "dense": "numpy matrix-vector product + argpartition",
    "rrf": "bm25s and dense rankings (depth 100) + fusion",
}


@dataclass
class ModeResult:
    """Everything one mode produced."""

    mode: str
    available: bool
    reason: str = ""
    overall: Metrics | None = None
    by_category: dict[str, Metrics] = field(default_factory=dict)
    latency: Latency | None = None
    searcher_stats: dict[str, Any] | None = None
    """The Searcher's own counters and phase timings (hybrid modes)."""
    abstention: dict[str, Any] | None = None
    """Relevance against LoCoMo's category 5 (hybrid modes; see ``_locomo_relevance``)."""
    per_question: dict[str, list[Any]] = field(default_factory=dict)
    """Per question, in the order of the top-level ``questions``: first-hit rank
    (``None``: no evidence in the top max-k), recall@k, and for a Searcher mode the path
    of the k=10 call (``lexical`` fast path or ``fused``) and its top hit's ``relevance``
    (``top_relevance``, ``None`` when it returned nothing)."""


def run_mode(
    mode: str, search: Search, questions: Sequence[Question], ks: Sequence[int]
) -> tuple[ModeResult, list[list[str]]]:
    """Ask every question once per k; metrics overall and per category, and the rankings.

    Each k gets its own call with ``limit=k`` (a fused ranking depends on the
    limit); latency is that of the ``limit=10`` call.
    """
    all_scores: list[Scores] = []
    times: list[float] = []
    paths: list[str] = []
    rankings: list[list[str]] = []
    top_relevance: list[float | None] = []
    for q in questions:
        by_k: dict[int, list[str]] = {}
        for k in ks:
            ids, ms, path, rel = search(q, k)
            by_k[k] = ids
            if k == LATENCY_K:
                times.append(ms)
                paths.append(path)
                top_relevance.append(round(rel[0], 5) if rel else None)
        rankings.append(by_k[LATENCY_K])
        all_scores.append(score(q, by_k))
    by_cat = {
        str(c): aggregate(
            [s for q, s in zip(questions, all_scores, strict=True) if q.category == c], ks
        )
        for c in CATEGORIES
        if any(q.category == c for q in questions)
    }
    latency = Latency(
        p50_ms=percentile(times, 50),
        p95_ms=percentile(times, 95),
        mean_ms=statistics.fmean(times),
        includes_embedding=False,
        note=LATENCY_NOTES[mode],
    )
    per_q: dict[str, list[Any]] = {"first_hit": [s.first_hit for s in all_scores]}
    for k in ks:
        per_q[f"recall@{k}"] = [round(s.recall[k], 4) for s in all_scores]
    if any(paths):
        per_q["path"] = paths
    if any(r is not None for r in top_relevance):
        per_q["top_relevance"] = top_relevance
    res = ModeResult(
        mode=mode,
        available=True,
        overall=aggregate(all_scores, ks),
        by_category=by_cat,
        latency=latency,
        per_question=per_q,
    )
    return res, rankings
