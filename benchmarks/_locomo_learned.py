"""A learned rerank of the hybrid search's fused candidates, scored leave-one-conversation-out.

Part of ``benchmarks/locomo.py`` (the ``with learned_rerank (LOO)`` row of
``--ablation``); also runnable alone (``python benchmarks/_locomo_learned.py
--data ... [--probe]``), which prints the tables of docs/benchmarks.md ("A
learned fusion"). It reads the Searcher's lean path by wrapping private
methods (``LeanFusion.ordered``/``add_lexical``/``add_semantic``, and the
Searcher module's ``lexical_hits``) for the duration of :func:`collect`: a benchmark's
liberty, to be revisited if those move.

What it does, per question: ask the default Searcher (``hybrid_search``), and
while it runs read what its lean path computed for every candidate (the
lexical and semantic channels' hits, the spreading loans, the query signals),
then describe each of the best :data:`DEPTH` fused candidates by the general
features of :data:`FEATURES`. A linear model scores them, and the candidates
are reordered by that score (those below :data:`DEPTH` keep their place).

The model is fitted pairwise (RankNet): for every question, every pair
(evidence turn, non-evidence turn) among the candidates is one example of a
logistic regression on the difference of their feature rows, with an L2
penalty of :data:`L2` on standardised features, solved by Newton's method
(numpy only; a few iterations converge). Nothing about the data is in the
features: no speaker names, no LoCoMo ids, only what any memory's search
knows of a candidate.

The leave-one-conversation-out figure fits on four conversations and scores
the fifth, for each fifth in turn; the constants (:data:`DEPTH`, :data:`L2`,
the feature list, and which questions are reranked) were fixed before any
result was looked at.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from _locomo_data import Conversation, Question, transcript_line  # noqa: E402

DEPTH = 30
"""How many of the fused candidates the model reorders (the rest keep their place)."""
ROWS = 50
"""How many candidates each question's :class:`Pool` describes (for the depth probe)."""
ASK_LIMIT = 30
"""The ``limit`` each question is asked with: the Searcher then orders at least
60 candidates exactly (its ``need``), so the first :data:`ROWS` are the fused order."""
L2 = 1.0
"""The ridge penalty on standardised weights, per 1,000 pairs."""
K1 = 1.2
"""BM25's textbook term-frequency saturation (the ``tf`` feature; not fitted)."""
BOUNDARY = False
"""Fit on the pairs straddling the 10th fused place only (a probe's objective)."""
MISSING_RANK = 200
"""The rank given to a candidate a channel did not return (its pool is 200 deep)."""

FEATURES = (
    "fused",  # the engine's score: fused channels + spreading loan + signal bonus
    "lex_norm",  # the lexical channel's min-max normalised score (0: not found)
    "sem_norm",  # the semantic channel's min-max normalised similarity (0: not found)
    "loan",  # what spreading lent it (0.6 x the best linked candidate's score)
    "date_hit",  # the query names a date the item's event_date matches (0.5: near)
    "when_hit",  # a "when" question and the item's text mentions a time
    "subject_hit",  # the item's subject is named in the query
    "coverage",  # share of the query's tokens the lexical match covered
    "log_lex_rank",  # log(1 + lexical rank)
    "log_sem_rank",  # log(1 + semantic rank)
    "log_fused_rank",  # log(1 + fused rank)
    "log_words",  # log(1 + words in the item's text)
    "prev_lex",  # the best lexical score among the items linking to it (its predecessor)
    "prev_sem",  # the best semantic score among them
    "next_lex",  # the best lexical score among the items it links to (its successor)
    "next_sem",  # the best semantic score among them
    "idf_cov",  # share of the query words' IDF mass the item's text holds
    "tf",  # BM25 (k1 = 1.2, b = 0) of the query words in the item, over the pool's best
)
"""The per-candidate features, in column order (general facts of any memory's search)."""


@dataclass
class Pool:
    """One question's best fused candidates as feature rows."""

    question: Question
    fused: bool
    """The fused path ran (else the lexical fast path answered)."""
    ids: list[str]
    """The fused order, at least :data:`DEPTH` deep when the store has that many."""
    x: npt.NDArray[np.float64]
    """``min(DEPTH, len(ids))`` rows of :data:`FEATURES`."""


@dataclass
class _Seen:
    """What one search's lean path computed, read by :func:`_capture`'s wrappers."""

    fusion: Any = None
    slots: list[int] = dataclasses.field(default_factory=list)
    lexical: Any = None
    semantic: list[tuple[Any, float]] = dataclasses.field(default_factory=list)
    n_tokens: int = 0


@contextmanager
def _capture(seen: _Seen) -> Iterator[None]:
    """Wrap the Searcher's lean path so ``seen`` holds the last search's internals."""
    from memstore.search import _lean, _searcher

    lean_cls = _lean.LeanFusion
    orig_ordered, orig_lex = lean_cls.ordered, lean_cls.add_lexical
    orig_sem, orig_lexical = lean_cls.add_semantic, _searcher.lexical_hits

    def ordered(self: Any, need: int) -> list[int]:
        out = orig_ordered(self, need)
        seen.fusion, seen.slots = self, out
        return out

    def add_lexical(self: Any, hits: Any, items: Any) -> None:
        seen.lexical, seen.semantic = hits, []
        orig_lex(self, hits, items)

    def add_semantic(self: Any, hits: Any, channel: str) -> None:
        seen.semantic = list(hits)
        orig_sem(self, hits, channel)

    def lexical(*args: Any, **kw: Any) -> Any:
        got = orig_lexical(*args, **kw)
        seen.n_tokens = got[2]
        return got

    lean_cls.ordered = ordered  # type: ignore[method-assign]
    lean_cls.add_lexical = add_lexical  # type: ignore[method-assign]
    lean_cls.add_semantic = add_semantic  # type: ignore[method-assign]
    _searcher.lexical_hits = lexical
    try:
        yield
    finally:
        lean_cls.ordered = orig_ordered  # type: ignore[method-assign]
        lean_cls.add_lexical = orig_lex  # type: ignore[method-assign]
        lean_cls.add_semantic = orig_sem  # type: ignore[method-assign]
        _searcher.lexical_hits = orig_lexical


def _norm(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    if values.size == 0:
        return values
    hi, lo = values.max(), values.min()
    return np.ones_like(values) if hi <= lo else (values - lo) / (hi - lo)


class _Words:
    """A conversation's word statistics: IDF and term counts per item (the tf/idf features)."""

    def __init__(self, conv: Conversation, tokenize: Callable[[list[str]], list[list[str]]]):
        self.tokenize = tokenize
        toks = tokenize([transcript_line(t) for t in conv.turns])
        self.tf = {t.id: Counter(ts) for t, ts in zip(conv.turns, toks, strict=True)}
        df = Counter(w for ts in toks for w in set(ts))
        n = len(conv.turns)
        self.idf = {w: math.log(1 + (n - d + 0.5) / (d + 0.5)) for w, d in df.items()}


def pool_of(searcher: Any, q: Question, words: _Words, seen: _Seen) -> Pool:
    """Ask ``q`` and describe its best fused candidates (``seen`` wraps the search)."""
    from memstore.search._signals import slot_bonus

    res = searcher.hybrid_search(q.text, partition=q.conv, limit=ASK_LIMIT)
    lf = seen.fusion
    if lf is None:  # the general path ran: no rows (the benchmark's stores take the lean one)
        return Pool(q, False, [r.item.id for r in res], np.zeros((0, len(FEATURES))))
    snap = lf._snap
    slots = np.array(seen.slots, np.intp)
    top = slots[:ROWS]
    n = len(snap)
    lex = np.zeros(n)
    lex_rank = np.full(n, float(MISSING_RANK))
    covered = np.zeros(n)
    hits = seen.lexical or []
    if hits:
        at = np.array([snap.slot.get(h.id, -1) for h in hits], np.intp)
        ok = at >= 0
        lex[at[ok]] = _norm(np.array([h.score for h in hits]))[ok]
        lex_rank[at[ok]] = np.arange(len(hits))[ok]
        covered[at[ok]] = np.array([h.covered for h in hits], np.float64)[ok]
    sem = np.zeros(n)
    sem_rank = np.full(n, float(MISSING_RANK))
    if seen.semantic:
        at = np.array([snap.slot.get(e.id, -1) for e, _ in seen.semantic], np.intp)
        ok = at >= 0
        sem[at[ok]] = _norm(np.array([s for _, s in seen.semantic]))[ok]
        sem_rank[at[ok]] = np.arange(len(seen.semantic))[ok]
    loan = np.zeros(n)
    loan[lf._loan_to] = lf._loan_add
    sig = lf._signals
    hit = {}
    for name, keep in (("date", "spans"), ("when", "when"), ("subject", "named")):
        if sig is None:
            hit[name] = np.zeros(top.size)
            continue
        only = dataclasses.replace(
            sig,
            spans=sig.spans if keep == "spans" else (),
            when=sig.when if keep == "when" else False,
            named=sig.named if keep == "named" else frozenset(),
            weight=1.0,
        )
        hit[name] = slot_bonus(only, snap, top)
    graph = snap.graph(frozenset(searcher.config.spread_relations))
    nbr = np.zeros((top.size, 4))  # prev_lex, prev_sem, next_lex, next_sem
    for i, s in enumerate(top.tolist()):
        lo, hi = graph.start[s], graph.start[s + 1]
        nb, own = graph.other[lo:hi], graph.own[lo:hi]
        for j, side in enumerate((nb[~own], nb[own])):
            if side.size:
                nbr[i, 2 * j], nbr[i, 2 * j + 1] = lex[side].max(), sem[side].max()
    ids = [snap.ids[s] for s in slots.tolist()]
    qwords = set(words.tokenize([q.text])[0])
    mass = sum(words.idf.get(w, 0.0) for w in qwords) or 1.0
    idf_cov = np.zeros(top.size)
    tf = np.zeros(top.size)
    n_words = np.zeros(top.size)
    for i, id in enumerate(ids[:ROWS]):
        counts = words.tf.get(id, Counter())
        n_words[i] = len(snap.items[top[i]].content.split())
        held = [w for w in qwords if counts.get(w)]
        idf_cov[i] = sum(words.idf.get(w, 0.0) for w in held) / mass
        tf[i] = sum(words.idf.get(w, 0.0) * counts[w] * (K1 + 1) / (counts[w] + K1) for w in held)
    tf = tf / tf.max() if tf.size and tf.max() > 0 else tf
    x = np.column_stack(
        [
            lf._final[top],
            lex[top],
            sem[top],
            loan[top],
            hit["date"],
            hit["when"],
            hit["subject"],
            covered[top] / max(seen.n_tokens, 1),
            np.log1p(lex_rank[top]),
            np.log1p(sem_rank[top]),
            np.log1p(np.arange(top.size, dtype=np.float64)),
            np.log1p(n_words),
            nbr,
            idf_cov,
            tf,
        ]
    )
    return Pool(q, bool(seen.semantic), ids, x)


def collect(convs: Sequence[Conversation], searchers: dict[str, Any], tokenize: Any) -> list[Pool]:
    """Every question's :class:`Pool`, asked of its conversation's Searcher."""
    seen = _Seen()
    out: list[Pool] = []
    with _capture(seen):
        for c in convs:
            words = _Words(c, tokenize)
            for q in c.questions:
                seen.fusion, seen.semantic, seen.lexical = None, [], None
                out.append(pool_of(searchers[c.sample_id], q, words, seen))
    return out


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Model:
    """A linear scorer over standardised :data:`FEATURES` (``mean``/``scale`` from the fit)."""

    weights: npt.NDArray[np.float64]
    mean: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]
    columns: tuple[int, ...]

    def score(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        z = (x[:, self.columns] - self.mean) / self.scale
        out: npt.NDArray[np.float64] = z @ self.weights
        return out


def _pairs(
    pools: Sequence[Pool], columns: Sequence[int], depth: int = DEPTH
) -> npt.NDArray[np.float64]:
    """Feature-row differences (evidence minus non-evidence) over every pool's candidates."""
    diffs: list[npt.NDArray[np.float64]] = []
    for p in pools:
        if not p.x.size:
            continue
        gold = set(p.question.evidence)
        x = p.x[:depth, columns]
        lab = np.array([id in gold for id in p.ids[: len(x)]])
        if lab.any() and not lab.all():
            d = x[lab][:, None, :] - x[~lab][None, :, :]
            if BOUNDARY:  # only the pairs on either side of the 10th place
                r = np.arange(len(x))
                cross = (r[lab][:, None] < 10) != (r[~lab][None, :] < 10)
                d = d[cross]
            diffs.append(d.reshape(-1, len(columns)))
    return np.concatenate(diffs) if diffs else np.zeros((0, len(columns)))


def fit(pools: Sequence[Pool], columns: Sequence[int], l2: float = L2, depth: int = DEPTH) -> Model:
    """RankNet weights (pairwise logistic, L2 on standardised features) by Newton's method."""
    cols = tuple(columns)
    blocks = [p.x[:depth, cols] for p in pools if p.x.size]
    if not blocks:  # nothing to learn from: all-zero weights keep the fused order
        return Model(np.zeros(len(cols)), np.zeros(len(cols)), np.ones(len(cols)), cols)
    rows = np.concatenate(blocks)
    mean, scale = rows.mean(axis=0), rows.std(axis=0)
    scale[scale == 0] = 1.0
    d = _pairs(pools, cols, depth) / scale  # differences: the mean cancels
    lam = max(l2 * len(d) / 1000.0, 1e-9)  # no pairs: the zero weights stand
    w = np.zeros(len(cols))
    for _ in range(50):
        m = d @ w
        p = 1.0 / (1.0 + np.exp(m))  # P(wrong order)
        grad = -(d * p[:, None]).sum(axis=0) + lam * w
        hess = (d * (p * (1 - p))[:, None]).T @ d + lam * np.eye(len(cols))
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return Model(w, mean, scale, cols)


def reorder(p: Pool, model: Model | None, depth: int = DEPTH) -> list[str]:
    """The pool's ids with the first ``depth`` reordered by ``model`` (``None``: as fused)."""
    if model is None or not p.x.size:
        return p.ids
    s = model.score(p.x[:depth])
    order = np.lexsort((np.arange(s.size), -s))  # ties keep the fused order
    head = [p.ids[i] for i in order.tolist()]
    return head + p.ids[len(head) :]


def metrics(q: Question, ids: Sequence[str]) -> tuple[float, float, float]:
    """recall@5, recall@10 and reciprocal rank (first evidence in the top 20) of one ranking."""
    gold = set(q.evidence)
    r5 = len(gold & set(ids[:5])) / len(gold)
    r10 = len(gold & set(ids[:10])) / len(gold)
    rr = next((1.0 / (i + 1) for i, id in enumerate(ids[:20]) if id in gold), 0.0)
    return r5, r10, rr


Variant = tuple[str, Callable[[Pool], bool], tuple[int, ...]]
"""A name, which pools are reranked, and the feature columns used."""


def loo(
    pools: Sequence[Pool],
    which: Callable[[Pool], bool],
    columns: Sequence[int],
    l2: float = L2,
    depth: int = DEPTH,
) -> list[tuple[float, float, float]]:
    """Per question, its ranking's metrics under weights fitted without its conversation."""
    convs = sorted({p.question.conv for p in pools})
    got: dict[int, tuple[float, float, float]] = {}
    for held in convs:
        train = [p for p in pools if p.question.conv != held and which(p)]
        model = fit(train, columns, l2, depth)
        for i, p in enumerate(pools):
            if p.question.conv == held:
                got[i] = metrics(p.question, reorder(p, model if which(p) else None, depth))
    return [got[i] for i in range(len(pools))]


GRID_DEPTHS = (10, 20, 30, 50)
GRID_L2 = (0.1, 1.0, 10.0, 100.0)
"""The probe's grid (after the rule's run): depth reranked x ridge penalty."""


def nested(
    pools: Sequence[Pool], which: Callable[[Pool], bool], columns: Sequence[int]
) -> tuple[list[tuple[float, float, float]], list[tuple[int, float]]]:
    """Leave-one-conversation-out with the depth and penalty chosen inside the four.

    For each held conversation, every (depth, L2) of the grid is scored by a
    leave-one-out over the other four alone (mean recall@10), the best is
    fitted on the four and scores the held one: an honest figure for "pick
    the constants on the data you have", whose picks are returned too.
    """
    convs = sorted({p.question.conv for p in pools})
    got: dict[int, tuple[float, float, float]] = {}
    picks: list[tuple[int, float]] = []
    for held in convs:
        rest = [p for p in pools if p.question.conv != held]
        best, pick = -1.0, (DEPTH, L2)
        for depth in GRID_DEPTHS:
            for l2 in GRID_L2:
                r10 = float(np.mean([m[1] for m in loo(rest, which, columns, l2, depth)]))
                if r10 > best + 1e-12:
                    best, pick = r10, (depth, l2)
        picks.append(pick)
        model = fit([p for p in rest if which(p)], columns, pick[1], pick[0])
        for i, p in enumerate(pools):
            if p.question.conv == held:
                got[i] = metrics(p.question, reorder(p, model if which(p) else None, pick[0]))
    return [got[i] for i in range(len(pools))], picks


def table(pools: Sequence[Pool], rows: dict[str, list[tuple[float, float, float]]]) -> str:
    """Markdown: each row's R@5, R@10, MRR, R@10 per category and per conversation."""
    convs = sorted({p.question.conv for p in pools})
    cats = sorted({p.question.category for p in pools})
    head = (
        "| ranking | R@5 | R@10 | MRR | "
        + " | ".join(f"R@10 cat {c}" for c in cats)
        + " | "
        + " | ".join(convs)
        + " |"
    )
    lines = [head, "|---|" + "---:|" * (3 + len(cats) + len(convs))]
    for name, m in rows.items():
        arr = np.array(m)
        cells = [f"{v:.3f}" for v in arr.mean(axis=0)]
        for cat in cats:
            sel = [i for i, p in enumerate(pools) if p.question.category == cat]
            cells.append(f"{arr[sel, 1].mean():.3f}")
        for conv in convs:
            sel = [i for i, p in enumerate(pools) if p.question.conv == conv]
            cells.append(f"{arr[sel, 1].mean():.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _columns(names: Sequence[str]) -> tuple[int, ...]:
    return tuple(FEATURES.index(n) for n in names)


ALL = tuple(range(len(FEATURES)))
VARIANTS: tuple[Variant, ...] = (
    ("learned, fused path (primary)", lambda p: p.fused, ALL),
    ("learned, both paths", lambda p: True, ALL),
    (
        "learned, engine's signals only",
        lambda p: p.fused,
        _columns(("fused", "lex_norm", "sem_norm", "loan", "date_hit", "when_hit", "subject_hit")),
    ),
    ("learned, no tf/idf_cov", lambda p: p.fused, _columns(FEATURES[:-2])),
)
"""The rankings compared; the first is the one the pre-registered rule judges."""


def ablation_row(
    convs: Sequence[Conversation],
    searchers: dict[str, Any],
    questions: Sequence[Question],
    whole: dict[str, list[Any]],
    off: Sequence[str] = (),
) -> tuple[dict[str, Any], str]:
    """``locomo.py --ablation``'s "with learned_rerank" row, and the per-conversation table.

    The row is the primary ranking (:data:`VARIANTS`' first) scored
    leave-one-conversation-out, in the format of the other ablation rows;
    ``whole`` is the default run's per-question record (the "all levers" row),
    against which the row's own leave-one-out (the rerank kept for a
    conversation only if it beat the fused order on the other four) is taken.
    ``off``: the levers the searchers were configured without (recorded in the row).
    """
    from _locomo_modes import bm25_tokenize, leave_one_out, per_conversation

    pools = collect(convs, searchers, bm25_tokenize)
    assert [p.question for p in pools] == list(questions)
    name, which, cols = VARIANTS[0]
    got = loo(pools, which, cols)
    per_q: dict[str, list[Any]] = {
        "recall@5": [m[0] for m in got],
        "recall@10": [m[1] for m in got],
        "first_hit": [round(1 / m[2]) if m[2] else None for m in got],
    }
    cats = sorted({q.category for q in questions})
    row: dict[str, Any] = {
        "variant": "with learned_rerank (LOO)",
        "off": list(off),
        "on": ["learned_rerank"],
        "opt_in": True,
        "recall@5": float(np.mean(per_q["recall@5"])),
        "recall@10": float(np.mean(per_q["recall@10"])),
        "mrr": float(np.mean([m[2] for m in got])),
        "p50_ms": None,
        "by_category_recall@10": {
            str(c): float(
                np.mean([m[1] for m, q in zip(got, questions, strict=True) if q.category == c])
            )
            for c in cats
        },
        "by_conversation_recall@10": per_conversation(questions, per_q, 10),
    }
    for metric in ("recall@5", "recall@10", "rr"):
        key = f"lever_loo_{'mrr' if metric == 'rr' else metric}"
        row[key] = leave_one_out(questions, per_q, whole, metric)
    engine = [metrics(p.question, p.ids) for p in pools]
    text = table(pools, {"engine (fused order)": engine, f"{name}, LOO": got})
    return row, text


def _widened(pools: Sequence[Pool], extra: Callable[[Pool], npt.NDArray[np.float64]]) -> list[Pool]:
    """The pools with columns ``extra(pool)`` appended to each feature row."""
    return [Pool(p.question, p.fused, p.ids, np.hstack([p.x, extra(p)])) for p in pools]


def probe(pools: Sequence[Pool], engine: list[tuple[float, float, float]]) -> None:
    """The probes run after the rule's figures (docs/benchmarks.md lists them as such)."""
    global BOUNDARY
    from memstore.timeexpr import asks_when

    def fused(p: Pool) -> bool:
        return p.fused

    for depth in GRID_DEPTHS:
        for l2 in GRID_L2:
            m = np.array(loo(pools, fused, ALL, l2, depth)).mean(axis=0)
            print(f"  depth {depth:3d} L2 {l2:6.1f}: R@5 {m[0]:.3f} R@10 {m[1]:.3f}", end="")
            print(f" MRR {m[2]:.3f}")
    rows: dict[str, list[tuple[float, float, float]]] = {"engine (fused order)": engine}
    for name, which, cols in VARIANTS[:2]:
        got, picks = nested(pools, which, cols)
        rows[f"{name}, nested LOO"] = got
        print(f"{name}: picks per held conversation {picks}")
    BOUNDARY = True
    try:
        for depth in (20, 30, 50):
            for l2 in (1.0, 10.0):
                rows[f"pairs across the 10th place, depth {depth}, L2 {l2:g}"] = loo(
                    pools, fused, ALL, l2, depth
                )
    finally:
        BOUNDARY = False
    groups = {
        "length": ("log_words",),
        "channel scores": ("lex_norm", "sem_norm"),
        "ranks": ("log_lex_rank", "log_sem_rank", "log_fused_rank"),
        "neighbours": ("prev_lex", "prev_sem", "next_lex", "next_sem"),
        "word statistics": ("coverage", "idf_cov", "tf"),
        "signal hits": ("date_hit", "when_hit", "subject_hit"),
    }
    for name, group in groups.items():
        rows[f"fused + {name}"] = loo(pools, fused, _columns(("fused", *group)))
    upper = np.triu_indices(len(FEATURES))
    quad = _widened(pools, lambda p: (p.x[:, :, None] * p.x[:, None, :])[:, upper[0], upper[1]])
    for l2 in (1.0, 10.0, 100.0):
        rows[f"features and their products, L2 {l2:g}"] = loo(
            quad, fused, tuple(range(quad[0].x.shape[1])), l2
        )
    when = _widened(pools, lambda p: p.x * float(asks_when(p.question.text)))
    for l2 in (1.0, 10.0):
        rows[f"features and a 'when' copy, L2 {l2:g}"] = loo(
            when, fused, tuple(range(when[0].x.shape[1])), l2
        )
    print(table(pools, rows))


def main(argv: Sequence[str] | None = None) -> int:
    from _locomo_data import load
    from _locomo_embed import CachingEmbedder, make_embedder
    from _locomo_modes import Built, bm25_tokenize, build_cells, build_stores, make_searchers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--probe", action="store_true", help="also the depth x L2 grid, nested")
    args = ap.parse_args(argv)
    convs, _ = load(args.data, None)
    built = Built()
    build_stores(convs, "transcript", built)
    emb = CachingEmbedder(make_embedder("local"), args.cache_dir)
    build_cells(convs, emb, built)
    make_searchers(convs, built, "hybrid", {"spread_relations": ("precedes",)})
    pools = collect(convs, built.searchers["hybrid"], bm25_tokenize)
    rows = {"engine (fused order)": [metrics(p.question, p.ids) for p in pools]}
    for name, which, cols in VARIANTS:
        rows[f"{name}, LOO"] = loo(pools, which, cols)
    print(table(pools, rows))
    if args.probe:
        probe(pools, rows["engine (fused order)"])
    model = fit([p for p in pools if p.fused], ALL)
    print("\nweights fitted on all five (fused path, standardised features):")
    for name, w, m, s in zip(FEATURES, model.weights, model.mean, model.scale, strict=True):
        print(f"  {name:16s} {w:+.3f}   (mean {m:.4f}, scale {s:.4f})")
    print(f"\nfused path: {sum(p.fused for p in pools)} of {len(pools)} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
