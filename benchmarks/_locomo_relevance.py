"""The LoCoMo benchmark's relevance figures: abstention on category 5, and the relevance fit.

Part of ``benchmarks/locomo.py`` (run that script). For a Searcher mode it asks
every question of categories 1-5 once more (``limit=10``) and measures:

* the AUROC of the top hit's ``relevance`` for "answerable": categories 1-4
  positive, category 5 (adversarial: about what the conversation does not say)
  negative; a question with no hit has top relevance 0;
* recall@10 of categories 1-4 at the threshold that drops half of category 5:
  ``min_relevance`` = the median top relevance of category 5, applied through
  the Searcher (``hybrid_search(..., min_relevance=t)``); a question left with
  no hit counts as recall 0;
* the same at the same threshold used as a gate instead of a cut: a question
  keeps its whole list when its top hit reaches ``t`` and abstains (recall 0)
  otherwise, which is what a caller gets who checks ``hits[0].relevance``
  before answering rather than passing ``min_relevance``;
* the calibration of ``relevance`` as a probability: hits of categories 1-4
  binned by relevance against the share of them that are evidence.

It also refits the relevance model's weights (``memstore.search._relevance``)
on the same hits, each labelled by whether it is an evidence turn of its
(category 1-4) question, and checks them leave-one-conversation-out: each
conversation is scored by weights fitted on the others, its threshold the
median of the other conversations' category-5 top relevance under those
weights. The engine's own weights were fitted on these five development
conversations, so its figures are in-sample; the leave-one-out ones are the
estimate for conversations it has not seen.
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from _common import log  # noqa: E402
from _locomo_data import Question  # noqa: E402
from _locomo_embed import CachingEmbedder  # noqa: E402
from _locomo_modes import Built, Search  # noqa: E402

from memstore.search import FUSION_POOL, SearchResult  # noqa: E402
from memstore.search._relevance import (  # noqa: E402
    RELEVANCE_MODEL,
    RelevanceModel,
    Signals,
    relevance,
    signals,
)

K = 10
"""Results asked per question (the recall@10 the threshold figure is about)."""
L2 = 1e-3
"""Ridge penalty of the logistic fit (keeps it finite on separable folds)."""
CALIBRATION_BINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 1.0)


@dataclass
class Asked:
    """One question asked at ``limit=10``: its hits, their relevance and signals."""

    q: Question
    ids: list[str]
    relevance: list[float]
    signals: list[Signals]


def auroc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """The probability that a positive outscores a negative (ties count half).

    >>> auroc([0.9, 0.8], [0.1, 0.8])
    0.875
    """
    if not pos or not neg:
        return float("nan")
    p = np.asarray(pos, np.float64)[:, None]
    n = np.asarray(neg, np.float64)[None, :]
    return float((p > n).mean() + 0.5 * (p == n).mean())


def _signals_of(
    built: Built, emb: CachingEmbedder, q: Question, ids: list[str], path: str
) -> list[Signals]:
    """The signals the Searcher computed relevance from, recomputed the same way."""
    store = built.stores[q.conv]
    lexical, _ = store.keyword_ranked(q.text, "", "", max(K, FUSION_POOL), partition=q.conv)
    results = [SearchResult(it) for id in ids if (it := store.get(id)) is not None]
    cells = built.cells
    vec = emb.embed([q.text])[0] if path != "lexical" and cells is not None else None
    named = store.named_subjects(q.text)
    vector_of = cells.vector if cells is not None else None
    scores = {h.id: h.score for h in lexical}
    beyond = lexical[-1].score if len(lexical) >= max(K, FUSION_POOL) else 0.0
    return signals(results, scores, beyond, vec, vector_of, named)


def ask(
    search: Search, built: Built, emb: CachingEmbedder, questions: Sequence[Question]
) -> list[Asked]:
    out: list[Asked] = []
    for q in questions:
        ids, _, path, rel = search(q, K)
        out.append(Asked(q, ids, rel, _signals_of(built, emb, q, ids, path)))
    return out


# --------------------------------------------------------------------- the fit

Rows = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]


def _logistic(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> list[float]:
    """Weights (intercept first) of a ridge-penalised logistic regression, by Newton steps."""
    a = np.column_stack([np.ones(len(x)), x])
    w = np.zeros(a.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(a @ w)))
        grad = a.T @ (p - y) + L2 * w
        hess = (a.T * (p * (1.0 - p))) @ a + L2 * np.eye(len(w))
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return [float(v) for v in w]


def fit(asked: Sequence[Asked]) -> RelevanceModel:
    """Both models' weights from the hits of the category 1-4 questions in ``asked``."""
    full_x: list[list[float]] = []
    full_y: list[float] = []
    lex_x: list[list[float]] = []
    lex_y: list[float] = []
    for a in asked:
        if a.q.category == 5:
            continue
        ev = set(a.q.evidence)
        for id, s in zip(a.ids, a.signals, strict=True):
            label = float(id in ev)
            lex_x.append([s.lexical, float(s.other_subject)])
            lex_y.append(label)
            if s.cosine is not None:
                full_x.append([s.lexical, s.cosine, float(s.other_subject)])
                full_y.append(label)
    for name, ys in (("fused", full_y), ("lexical-only", lex_y)):
        if len(set(ys)) < 2:
            raise ValueError(
                f"too few hits to fit the {name} relevance model: {len(ys)} hits, "
                "it needs both evidence and other hits"
            )
    b = _logistic(np.array(full_x), np.array(full_y))
    c = _logistic(np.array(lex_x), np.array(lex_y))
    return RelevanceModel(b[0], b[1], b[2], b[3], c[0], c[1], c[2])


def predict(model: RelevanceModel, a: Asked) -> list[float]:
    return [relevance(s.lexical, s.cosine, s.other_subject, model) for s in a.signals]


# ------------------------------------------------------------------ the figures


def _top(rel: Sequence[float]) -> float:
    return rel[0] if rel else 0.0


def _recall_at(a: Asked, rel: Sequence[float], t: float) -> float:
    ev = set(a.q.evidence)
    kept = [id for id, r in zip(a.ids, rel, strict=True) if r >= t]
    return len(ev.intersection(kept)) / len(ev)


def _gated_recall(a: Asked, rel: Sequence[float], t: float) -> float:
    """Recall@10 of the whole list if its top hit reaches ``t``, else 0 (an abstention)."""
    return _recall_at(a, rel, -1.0) if rel and _top(rel) >= t else 0.0


def figures(asked: Sequence[Asked], rel: Sequence[Sequence[float]], t: float) -> dict[str, float]:
    """AUROC, recall@10 with and without the threshold ``t``, and who was left with no hit."""
    pos = [_top(r) for a, r in zip(asked, rel, strict=True) if a.q.category != 5]
    neg = [_top(r) for a, r in zip(asked, rel, strict=True) if a.q.category == 5]
    ans = [(a, r) for a, r in zip(asked, rel, strict=True) if a.q.category != 5]
    return {
        "auroc": auroc(pos, neg),
        "threshold": t,
        "recall@10": statistics.fmean(_recall_at(a, r, -1.0) for a, r in ans),
        "recall@10_at_threshold": statistics.fmean(_recall_at(a, r, t) for a, r in ans),
        "recall@10_gated": statistics.fmean(_gated_recall(a, r, t) for a, r in ans),
        "answerable_left_without_hit": statistics.fmean(float(_top(r) < t) for _, r in ans),
        "adversarial_left_without_hit": statistics.fmean(float(x < t) for x in neg),
    }


def _median_adversarial(asked: Sequence[Asked], rel: Sequence[Sequence[float]]) -> float:
    return statistics.median(_top(r) for a, r in zip(asked, rel, strict=True) if a.q.category == 5)


def leave_one_out(asked: Sequence[Asked]) -> dict[str, Any]:
    """Each conversation scored by weights (and a threshold) from the other ones."""
    convs = sorted({a.q.conv for a in asked})
    order: list[Asked] = []
    rel: list[list[float]] = []
    recall_t: list[float] = []
    gated: list[float] = []
    folds: list[dict[str, Any]] = []
    for c in convs:
        train = [a for a in asked if a.q.conv != c]
        test = [a for a in asked if a.q.conv == c]
        model = fit(train)
        t = _median_adversarial(train, [predict(model, a) for a in train])
        got = [predict(model, a) for a in test]
        order += test
        rel += got
        recall_t += [
            _recall_at(a, r, t) for a, r in zip(test, got, strict=True) if a.q.category != 5
        ]
        gated += [
            _gated_recall(a, r, t) for a, r in zip(test, got, strict=True) if a.q.category != 5
        ]
        folds.append({"held_out": c, "threshold": t, "model": vars(model)})
    pos = [_top(r) for a, r in zip(order, rel, strict=True) if a.q.category != 5]
    neg = [_top(r) for a, r in zip(order, rel, strict=True) if a.q.category == 5]
    return {
        "auroc": auroc(pos, neg),
        "recall@10_at_threshold": statistics.fmean(recall_t),
        "recall@10_gated": statistics.fmean(gated),
        "folds": folds,
    }


def calibration(asked: Sequence[Asked], rel: Sequence[Sequence[float]]) -> list[dict[str, float]]:
    """Hits of categories 1-4 binned by relevance: mean relevance against the evidence share."""
    pairs = [
        (r, float(id in a.q.evidence))
        for a, rs in zip(asked, rel, strict=True)
        if a.q.category != 5
        for id, r in zip(a.ids, rs, strict=True)
    ]
    out: list[dict[str, float]] = []
    for lo, hi in itertools.pairwise(CALIBRATION_BINS):
        got = [(r, y) for r, y in pairs if lo <= r < hi or (hi == 1.0 and r == 1.0)]
        if got:
            out.append(
                {
                    "from": lo,
                    "to": hi,
                    "hits": len(got),
                    "mean_relevance": statistics.fmean(r for r, _ in got),
                    "evidence_share": statistics.fmean(y for _, y in got),
                }
            )
    return out


def abstention(
    make: Callable[[float], Search],
    built: Built,
    emb: CachingEmbedder,
    questions: Sequence[Question],
    adversarial: Sequence[Question],
) -> dict[str, Any]:
    """Every relevance figure of one Searcher mode (``make(t)``: its search at min_relevance t)."""
    asked = ask(make(0.0), built, emb, [*questions, *adversarial])
    engine_rel = [a.relevance for a in asked]
    t = _median_adversarial(asked, engine_rel)
    engine = figures(asked, engine_rel, t)
    # The same threshold through the Searcher itself: what a caller passing it gets.
    cut = make(t)
    through = [cut(q, K)[0] for q in questions]
    engine["recall@10_at_threshold_searcher"] = statistics.fmean(
        len(set(q.evidence).intersection(ids)) / len(q.evidence)
        for q, ids in zip(questions, through, strict=True)
    )
    mismatched = sum(
        not math.isclose(r, p, rel_tol=0, abs_tol=1e-6)
        for a in asked
        for r, p in zip(a.relevance, predict(RELEVANCE_MODEL, a), strict=True)
    )
    # The refits need enough hits of both kinds (and adversarial questions in
    # every fold): a small run reports the engine's figures and leaves them out.
    refit_all: dict[str, Any] | None = None
    loo: dict[str, Any] | None = None
    try:
        refit = fit(asked)
        refit_rel = [predict(refit, a) for a in asked]
        refit_all = {
            "model": vars(refit),
            **figures(asked, refit_rel, _median_adversarial(asked, refit_rel)),
        }
        loo = leave_one_out(asked)
    except (ValueError, statistics.StatisticsError) as e:
        log(f"relevance refits left out: {e}")
    return {
        "questions_answerable": len(questions),
        "questions_adversarial": len(adversarial),
        "engine": engine,
        "engine_model": vars(RELEVANCE_MODEL),
        "recomputed_mismatches": mismatched,
        "calibration": calibration(asked, engine_rel),
        "refit_all": refit_all,
        "leave_one_conversation_out": loo,
    }
