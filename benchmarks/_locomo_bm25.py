"""A BM25 score of the query's words as a third channel of the hybrid Searcher, on LoCoMo.

An experiment harness for issue 20 (retrieval without an LLM): it measures
what a plain BM25 channel, fused beside the lexical and semantic channels at
a small share, does to the benchmark's ``hybrid`` mode (spreading along
``precedes``, score fusion, every default lever), without changing the
engine. The channel is injected: ``LeanFusion.add_semantic`` and
``Fusion.add_semantic`` are wrapped to call, after the original and for the
``semantic`` channel only, ``add_feedback(hits, w)`` with the BM25 top
:data:`DEPTH` of the current question (``LexicalHit`` tuples, best first).
``add_feedback`` adds ``w x lexical_weight x minmax(score)``; the lexical and
semantic channels keep their 0.5 each, so a third share ``s`` of (lexical,
semantic, BM25), the first two splitting the rest evenly, is ``w = 2s/(1-s)``
(:func:`feedback_weight`). Only the fused path runs ``add_semantic``: the
lexical fast path is untouched.

The BM25 variants (:data:`VARIANTS`) differ in one thing at a time from the
control, which is bm25s's own scoring (its tokenizer and English stop words,
k1=1.5, b=0.75, Lucene idf; checked against the bm25s library by
:func:`check_control`) over the documents ``locomo.py``'s ``bm25s`` mode
indexes (the transcript lines, one index per conversation):

* ``tokens``: bm25s's tokens with or without its stop words, or memstore's
  (:func:`memstore.text.words` of the item's title and content, plus the
  event date's words; ``lexicon``: the words the store's lexicon holds for
  the item, which adds the id's; the query's tokens as the lexicon plans
  them, ``kw_tokens(normalize_query(q))``);
* ``tf``: the term's count in the document, or 1 for every word present;
* ``k1``, ``b``; ``idf``: Lucene's ``log(1 + (N - df + 0.5)/(df + 0.5))``,
  Robertson's (clipped at 0), ``log(N/df)``, or the lexical plan's own token
  weights (Lucene's over the documents a token matches at any level);
* ``length``: a document's length counts the words indexed, only the ones
  that are not stop words, or the whitespace-separated words of title and
  content (the search snapshot's ``words`` column, ``item_words``);
* ``stems``: every word (and query token) replaced by its light stem
  (:func:`memstore.text.stem`), so a word matches its stem class;
* ``depth``: how many of the best hits are fused (min-max over them).

Two controls are no BM25 (:data:`CONTROLS`): the lexical channel's own hits
fused a second time at the share, and ``SearchConfig.lexical_weight`` raised
instead of a third channel.

Each variant runs the hybrid mode once per share of :data:`SHARES` (and the
engine once with no channel); the share is also chosen leave-one-conversation-
out: each conversation gets the share of the grid (0 excluded) with the best
sum of the metric over the other four (ties: the smaller share), separately
for recall@5, recall@10 and MRR. It prints a summary line per variant (the
LOO figures, the questions they moved, conditions 1-4 of the adoption rule
of docs/benchmarks.md "An information prior": :func:`rule`), then per
variant the figures per share, recall@10 and recall@5 per conversation,
recall@10 per category, and the channel's own cost per query (tokenising the
query, scoring, the top :data:`DEPTH`, building the hits: Python and numpy).
``--out`` keeps every run's per-question record; a rerun with the same file
skips the runs it holds, and ``--report-only`` prints from it.
``--time-scale 10000,100000`` only times the channel over synthetic notes.

Usage::

    python benchmarks/_locomo_bm25.py --data ../shared/datasets/locomo/dev.json \\
        --cache-dir /tmp/locomo-cache [--variants all|control,binary,...] \\
        [--shares 0.05,0.1] [--out FILE] [--report-only] [--embedder local|hash] \\
        [--time-scale N,...]

The figures and what they say: docs/benchmarks.md, "A BM25 channel of the
query's words".
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _locomo_data import TURN_RELATION, Conversation, Question, load, transcript_line
from _locomo_embed import CachingEmbedder, make_embedder
from _locomo_metrics import run_mode
from _locomo_modes import (
    Built,
    bm25_tokenize,
    build_cells,
    build_stores,
    make_search,
    make_searchers,
    per_question_values,
)

from memstore._lexindex import LexicalHit
from memstore._search_snapshot import item_words
from memstore.text import STOP_WORDS, event_date_words, kw_tokens, normalize_query, stem, words

KS = (5, 10, 20)
"""As ``locomo.py``'s defaults: each k its own call, the first hit (MRR) within 20."""
DEPTH = 200
"""The BM25 hits fused: the best this many with a positive score."""
SHARES = (0.05, 0.1, 0.15, 0.2, 0.25)
"""The channel's shares measured, and the grid the leave-one-out choice picks from."""
METRICS = ("recall@5", "recall@10", "rr")

Record = dict[str, list[Any]]


@dataclass(frozen=True)
class Spec:
    """One BM25 variant (see the module docstring)."""

    tokens: str = "bm25s"
    """``bm25s`` (stop words removed), ``bm25s-all`` (kept), ``memstore``, or
    ``memstore-nodates`` (title and content words, no event-date words), ``lexicon`` (the
    words the store's lexicon holds for the item: ``memstore``'s and the id's); or one of the
    :data:`CONTROLS`, which are no BM25."""
    tf: str = "true"
    """``true`` (the count) or ``binary`` (1 for every word present)."""
    k1: float = 1.5
    b: float = 0.75
    idf: str = "lucene"
    """``lucene``, ``robertson`` (clipped at 0) or ``atire`` (``log(N/df)``), or ``plan``: the
    lexicon's own token weight (Lucene's idf of the documents the token matches at any level,
    ``LexicalIndex.plan(tokens).weights``), for memstore's tokens."""
    length: str = "indexed"
    """``indexed`` (the words indexed), ``nonstop`` (those not stop words) or ``ws``
    (whitespace-separated words of title and content, ``item_words``)."""
    stems: bool = False
    depth: int = DEPTH
    """The hits fused: the best this many with a positive score (minmax over them)."""


CONTROLS = ("engine-lexical", "lexical-weight")
"""Two controls that are no BM25: the lexical channel's own hits fused in a second time at
the share (``engine-lexical``), and no third channel but ``SearchConfig.lexical_weight`` raised
to ``(1 + share) / 2``, the lexical side's share if the third channel were lexical
(``lexical-weight``)."""

CONTROL = Spec()
MEMSTORE = Spec(tokens="memstore")
MEM_BINARY = Spec(tokens="memstore", tf="binary")

VARIANTS: dict[str, Spec] = {
    "control": CONTROL,
    # 1. tokens
    "bm25s-stopwords-kept": Spec(tokens="bm25s-all"),
    "memstore": MEMSTORE,
    "memstore-nodates": Spec(tokens="memstore-nodates"),
    # 2. term frequency
    "binary": Spec(tf="binary"),
    "memstore-binary": MEM_BINARY,
    # 4. length and idf (on memstore's tokens, binary tf)
    "memstore-binary-len-nonstop": replace(MEM_BINARY, length="nonstop"),
    "memstore-binary-len-ws": replace(MEM_BINARY, length="ws"),
    "memstore-binary-idf-robertson": replace(MEM_BINARY, idf="robertson"),
    "memstore-binary-idf-atire": replace(MEM_BINARY, idf="atire"),
    "memstore-binary-idf-plan": replace(MEM_BINARY, idf="plan", length="ws"),
    "memstore-binary-b=0-idf-plan": replace(MEM_BINARY, idf="plan", b=0.0),
    "memstore-len-nonstop": replace(MEMSTORE, length="nonstop"),
    "lexicon-binary": replace(MEM_BINARY, tokens="lexicon"),
    "lexicon-binary-len-ws": replace(MEM_BINARY, tokens="lexicon", length="ws"),
    "lexicon-binary-b=0": replace(MEM_BINARY, tokens="lexicon", b=0.0),
    # 5. stems
    "memstore-stems": replace(MEMSTORE, stems=True),
    "memstore-binary-stems": replace(MEM_BINARY, stems=True),
    # the depth fused (minmax over the hits kept), for the recommended build
    "memstore-binary-len-ws-depth=50": replace(MEM_BINARY, length="ws", depth=50),
    "memstore-binary-len-ws-depth=100": replace(MEM_BINARY, length="ws", depth=100),
    "memstore-binary-len-ws-depth=all": replace(MEM_BINARY, length="ws", depth=1_000_000),
    # controls: is it BM25, or more weight on the query's words?
    "engine-lexical": Spec(tokens="engine-lexical"),
    "lexical-weight": Spec(tokens="lexical-weight"),
}
for _k1 in (0.9, 1.2, 1.5):  # 3. robustness in k1 and b, on the two candidate builds
    for _b in (0.0, 0.25, 0.5, 0.75, 1.0):
        for _name, _base in (("memstore-binary", MEM_BINARY), ("memstore", MEMSTORE)):
            _spec = replace(_base, k1=_k1, b=_b)
            if _spec != _base:
                VARIANTS[f"{_name}-k1={_k1}-b={_b}"] = _spec


def feedback_weight(share: float) -> float:
    """``add_feedback``'s weight for a third channel's ``share`` (lexical, semantic split the rest).

    >>> round(feedback_weight(0.2), 4)
    0.5
    """
    return 2.0 * share / (1.0 - share)


# --------------------------------------------------------------------------- tokens


def bm25s_all(texts: list[str]) -> list[list[str]]:
    """bm25s's tokens with its stop words kept."""
    import bm25s  # type: ignore[import-untyped]

    toks: list[list[str]] = bm25s.tokenize(
        texts, stopwords=None, return_ids=False, show_progress=False
    )
    return toks


_BM25S_STOP: frozenset[str] | None = None


def bm25s_stop() -> frozenset[str]:
    """bm25s's English stop words."""
    global _BM25S_STOP
    if _BM25S_STOP is None:
        from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]

        _BM25S_STOP = frozenset(STOPWORDS_EN)
    return _BM25S_STOP


@dataclass
class Docs:
    """One conversation's documents as one variant's tokenizer sees them."""

    ids: list[str]
    tokens: list[list[str]]
    lengths: npt.NDArray[np.float64]


def conversation_docs(c: Conversation, built: Built, spec: Spec) -> Docs:
    """The conversation's turns as ``spec`` tokenises and measures them."""
    lines = [transcript_line(t) for t in c.turns]
    store = built.stores[c.sample_id]
    items = [store.get(t.id) for t in c.turns]
    assert all(it is not None for it in items)
    stop: frozenset[str]
    if spec.tokens == "bm25s":
        toks, stop = bm25_tokenize(lines), frozenset()
    elif spec.tokens == "bm25s-all":
        toks, stop = bm25s_all(lines), bm25s_stop()
    elif spec.tokens == "lexicon":  # the words the store's lexicon holds, the id's too
        lex = store._lex.lexicon
        toks, stop = [list(lex.doc_words(t.id)) for t in c.turns], STOP_WORDS
    elif spec.tokens in ("memstore", "memstore-nodates"):
        dates = spec.tokens == "memstore"
        toks = [
            words(it.title)
            + words(it.content)
            + (event_date_words(it.event_date) if dates and it.event_date else [])
            for it in items
            if it is not None
        ]
        stop = STOP_WORDS
    else:
        raise ValueError(f"unknown tokens {spec.tokens!r}")
    if spec.length == "indexed":
        lengths = [len(t) for t in toks]
    elif spec.length == "nonstop":
        lengths = [sum(w not in stop for w in t) for t in toks]
    elif spec.length == "ws":
        lengths = [item_words(it) for it in items if it is not None]
    else:
        raise ValueError(f"unknown length {spec.length!r}")
    if spec.stems:
        toks = [[stem(w) for w in t] for t in toks]
    return Docs([t.id for t in c.turns], toks, np.array(lengths, np.float64))


def query_tokens(text: str, spec: Spec) -> list[str]:
    """The query's terms for ``spec``: bm25s's (repeats kept, as bm25s scores them) or the
    lexicon's plan tokens (no repeats)."""
    if spec.tokens == "bm25s":
        toks = bm25_tokenize([text])[0]
    elif spec.tokens == "bm25s-all":
        toks = bm25s_all([text])[0]
    else:
        toks = kw_tokens(normalize_query(text))
    if spec.stems:
        toks = [stem(w) for w in toks]
        if spec.tokens.startswith("memstore"):
            toks = list(dict.fromkeys(toks))
    return toks


# --------------------------------------------------------------------------- scoring


def idf(df: int, n: int, rule: str) -> float:
    """A term's idf under ``rule``."""
    if rule in ("lucene", "plan"):  # plan: lucene where the plan's weight is not given
        return math.log1p((n - df + 0.5) / (df + 0.5))
    if rule == "robertson":
        return math.log(max(1.0, (n - df + 0.5) / (df + 0.5)))
    if rule == "atire":
        return math.log(n / df)
    raise ValueError(f"unknown idf {rule!r}")


class Bm25:
    """BM25 over one conversation's documents: postings of (document, tf) per term.

    A query sums ``idf x tf / (tf + k1 (1 - b + b dl/avgdl))`` over its terms
    (a repeated term counts again), as bm25s's Lucene method does (which
    leaves out the constant ``k1 + 1``).
    """

    def __init__(self, docs: Docs, spec: Spec) -> None:
        self.spec = spec
        self.ids = docs.ids
        n = len(docs.tokens)
        self.n = n
        lengths = docs.lengths
        avg = float(lengths.mean()) if n else 1.0
        self.norm = spec.k1 * (1.0 - spec.b + spec.b * lengths / (avg or 1.0))
        found: dict[str, tuple[list[int], list[int]]] = {}
        for d, toks in enumerate(docs.tokens):
            for w, tf in Counter(toks).items():
                slot = found.setdefault(w, ([], []))
                slot[0].append(d)
                slot[1].append(1 if spec.tf == "binary" else tf)
        self.postings: dict[str, tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]] = {
            w: (np.array(ds, np.intp), np.array(tfs, np.float64)) for w, (ds, tfs) in found.items()
        }
        self.idf = {w: idf(len(p[0]), n, spec.idf) for w, p in self.postings.items()}

    def scores(
        self, terms: Sequence[str], weights: dict[str, float] | None = None
    ) -> npt.NDArray[np.float64]:
        """Every document's score for ``terms`` (``weights``: each term's idf instead)."""
        out = np.zeros(self.n, np.float64)
        post, norm, idf = self.postings, self.norm, weights or self.idf
        for w in terms:
            p = post.get(w)
            if p is None:
                continue
            docs, tf = p
            out[docs] += idf[w] * tf / (tf + norm[docs])
        return out

    def top(
        self, terms: Sequence[str], depth: int = DEPTH, weights: dict[str, float] | None = None
    ) -> list[LexicalHit]:
        """The best ``depth`` documents with a positive score, best first, as lexical hits."""
        s = self.scores(terms, weights)
        pos = np.flatnonzero(s > 0.0)
        if pos.size > depth:  # argpartition: the top depth of many, then a sort of those
            pos = pos[np.argpartition(-s[pos], depth - 1)[:depth]]
        pos = pos[np.lexsort((pos, -s[pos]))]
        ids = self.ids
        return [LexicalHit(ids[i], float(s[i]), 0, False) for i in pos.tolist()]


def check_control(convs: Sequence[Conversation], built: Built) -> str:
    """The control's scores against the bm25s library's on every question; a one-line verdict."""
    import bm25s

    worst, top_same, n = 0.0, 0, 0
    for c in convs:
        docs = conversation_docs(c, built, CONTROL)
        mine = Bm25(docs, CONTROL)
        lib = bm25s.BM25()
        lib.index(docs.tokens, show_progress=False)
        for q in c.questions:
            toks = query_tokens(q.text, CONTROL)
            known = [t for t in toks if t in lib.vocab_dict]
            ref = lib.get_scores(known) if known else np.zeros(mine.n)
            got = mine.scores(toks)
            worst = max(worst, float(np.max(np.abs(ref - got) / np.maximum(1.0, np.abs(ref)))))
            n += 1
            top_same += int(np.argmax(ref) == np.argmax(got) or ref.max() == 0)
    return (
        f"control vs bm25s {getattr(bm25s, '__version__', '?')}: {n} questions, "
        f"largest relative score difference {worst:.2e}, same top document {top_same}/{n}"
    )


# --------------------------------------------------------------------------- injection

_NOW: dict[str, Any] = {"hits": None, "weight": 0.0, "lexical": None}
"""The current question's BM25 hits and feedback weight, read by the wrapped fusions, and
the lexical channel's hits of the current search (for the ``engine-lexical`` control)."""
AGAIN = "again"
"""A question's hits that stand for the lexical channel's own (fused in a second time)."""


@contextmanager
def injected() -> Iterator[None]:
    """``add_semantic`` of both fusions wrapped to add the current BM25 hits after it."""
    from memstore.search import _fusion, _lean

    classes = (_lean.LeanFusion, _fusion.Fusion)
    saved = {cls: (cls.add_semantic, cls.add_lexical) for cls in classes}

    def wrap(orig: Callable[..., None]) -> Callable[..., None]:
        def add_semantic(self: Any, hits: Sequence[tuple[Any, float]], channel: str) -> None:
            orig(self, hits, channel)
            extra = _NOW["hits"]
            if extra is AGAIN:
                extra = _NOW["lexical"]
            if extra and channel == "semantic" and _NOW["weight"] > 0.0:
                self.add_feedback(extra, _NOW["weight"])

        return add_semantic

    def keep(orig: Callable[..., None]) -> Callable[..., None]:
        def add_lexical(self: Any, hits: Sequence[LexicalHit], items: Any) -> None:
            _NOW["lexical"] = hits
            orig(self, hits, items)

        return add_lexical

    try:
        for cls, (sem, lex) in saved.items():
            cls.add_semantic = wrap(sem)  # type: ignore[method-assign]
            cls.add_lexical = keep(lex)  # type: ignore[method-assign]
        yield
    finally:
        for cls, (sem, lex) in saved.items():
            cls.add_semantic = sem  # type: ignore[method-assign]
            cls.add_lexical = lex  # type: ignore[method-assign]


def channel_hits(
    convs: Sequence[Conversation], built: Built, spec: Spec
) -> tuple[dict[tuple[str, int], list[LexicalHit]], list[float]]:
    """Per question ``(conv, index)``, the variant's hits; and each query's cost in ms.

    The two controls have none: ``engine-lexical`` stands for the lexical channel's own hits
    (:data:`AGAIN`), ``lexical-weight`` adds no channel.
    """
    out: dict[tuple[str, int], Any] = {}
    ms: list[float] = []
    if spec.tokens in CONTROLS:
        mark = AGAIN if spec.tokens == "engine-lexical" else None
        return {(q.conv, q.index): mark for c in convs for q in c.questions}, [0.0]
    for c in convs:
        index = Bm25(conversation_docs(c, built, spec), spec)
        lex = built.stores[c.sample_id]._lex  # the plan's weights (idf="plan")
        for q in c.questions:
            t0 = time.perf_counter()
            terms = query_tokens(q.text, spec)
            weights = None
            if spec.idf == "plan" and terms:
                plan = lex.plan(terms)
                weights = dict(zip(plan.tokens, plan.weights, strict=True))
            out[(q.conv, q.index)] = index.top(terms, spec.depth, weights)
            ms.append((time.perf_counter() - t0) * 1e3)
    return out, ms


def run_share(
    questions: Sequence[Question],
    built: Built,
    emb: CachingEmbedder,
    hits: dict[tuple[str, int], Any],
    share: float,
) -> tuple[Record, dict[str, float], float]:
    """The hybrid mode with the channel at ``share``: per-question record, R@10 per category,
    and the search's p50 ms."""
    search = make_search("hybrid", built, emb)

    def with_channel(q: Question, k: int) -> Any:
        _NOW["hits"], _NOW["weight"] = hits.get((q.conv, q.index)), feedback_weight(share)
        try:
            return search(q, k)
        finally:
            _NOW["hits"], _NOW["weight"], _NOW["lexical"] = None, 0.0, None

    with injected():
        res, _ = run_mode("hybrid", with_channel, questions, KS)
    assert res.latency is not None
    cats = {c: m.recall["10"] for c, m in res.by_category.items()}
    rec = {k: res.per_question[k] for k in ("first_hit", "recall@5", "recall@10", "recall@20")}
    return rec, cats, res.latency.p50_ms


def time_at_scale(n: int, spec: Spec, queries: int = 200) -> dict[str, float]:
    """The channel's cost per query over ``n`` synthetic notes (``benchmarks/corpus.py``),
    memstore's tokens: p50 and p95 ms of tokenising, scoring and the top :data:`DEPTH`."""
    from corpus import generate_corpus, make_queries

    notes = generate_corpus(n)
    toks = [words(x.title) + words(x.content) for x in notes]
    lengths = np.array([len(t) for t in toks], np.float64)
    index = Bm25(Docs([str(i) for i in range(n)], toks, lengths), spec)
    ms: list[float] = []
    for q in make_queries(notes, queries):
        t0 = time.perf_counter()
        index.top(query_tokens(q.text, spec), spec.depth)
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"notes": n, "p50_ms": statistics.median(ms), "p95_ms": float(np.percentile(ms, 95))}


# --------------------------------------------------------------------------- figures


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def figures(
    questions: Sequence[Question], rec: Record, keep: Callable[[Question], bool]
) -> dict[str, float]:
    """R@5, R@10 and MRR of ``rec`` over the questions ``keep`` keeps."""
    idx = [i for i, q in enumerate(questions) if keep(q)]
    vals = {m: per_question_values(rec, m) for m in METRICS}
    return {m: mean([vals[m][i] for i in idx]) for m in METRICS}


def loo(
    questions: Sequence[Question], runs: dict[float, Record], metric: str
) -> tuple[list[float], dict[str, float]]:
    """Per question, ``metric`` under the share chosen on the other conversations; the picks."""
    convs = sorted({q.conv for q in questions})
    vals = {s: per_question_values(rec, metric) for s, rec in runs.items()}
    picks: dict[str, float] = {}
    for held in convs:
        rest = [i for i, q in enumerate(questions) if q.conv != held]
        picks[held] = max(sorted(runs), key=lambda s: sum(vals[s][i] for i in rest))
    return [vals[picks[q.conv]][i] for i, q in enumerate(questions)], picks


def variant_report(
    name: str, questions: Sequence[Question], base: dict[str, Any], got: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """One variant's markdown and summary: per share, LOO, per conversation and category."""
    runs = {float(s): r["record"] for s, r in got["shares"].items()}
    convs = sorted({q.conv for q in questions})
    cats = sorted({q.category for q in questions})
    b = base["record"]
    bfig = figures(questions, b, lambda q: True)
    lines = [
        f"#### {name}: {json.dumps(got['spec'])}",
        "",
        f"channel cost per query: p50 {got['ms_p50']:.3f} ms, p95 {got['ms_p95']:.3f} ms "
        f"(mean hits {got['mean_hits']:.0f})",
        "",
        "| share | R@5 | R@10 | MRR | p50 ms | " + " | ".join(f"R@10 {c}" for c in convs) + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(convs),
    ]

    def row(label: str, rec: Record, p50: float) -> str:
        f = figures(questions, rec, lambda q: True)
        per = [figures(questions, rec, lambda q, c=c: q.conv == c)["recall@10"] for c in convs]
        return (
            f"| {label} | {f['recall@5']:.3f} | {f['recall@10']:.3f} | {f['rr']:.3f} "
            f"| {p50:.2f} | " + " | ".join(f"{x:.3f}" for x in per) + " |"
        )

    lines.append(row("0 (engine)", b, base["p50_ms"]))
    for s in sorted(runs):
        lines.append(row(f"{s:g}", runs[s], got["shares"][str(s)]["p50_ms"]))
    lines += ["", "| share | " + " | ".join(f"R@5 {c}" for c in convs) + " |"]
    lines.append("|---|" + "---:|" * len(convs))
    for label, rec in [("0 (engine)", b), *((f"{s:g}", runs[s]) for s in sorted(runs))]:
        per = [figures(questions, rec, lambda q, c=c: q.conv == c)["recall@5"] for c in convs]
        lines.append(f"| {label} | " + " | ".join(f"{x:.3f}" for x in per) + " |")
    summary: dict[str, Any] = {"name": name, "spec": got["spec"], "ms_p50": got["ms_p50"]}
    loo_vals: dict[str, list[float]] = {}
    for m in METRICS:
        vals, picks = loo(questions, runs, m)
        loo_vals[m] = vals
        summary[f"loo_{m}"] = mean(vals)
        summary[f"picks_{m}"] = picks
    gains = {
        c: mean([loo_vals["recall@10"][i] for i, q in enumerate(questions) if q.conv == c])
        - figures(questions, b, lambda q, c=c: q.conv == c)["recall@10"]
        for c in convs
    }
    summary["loo_gain_r10_by_conv"] = gains
    for m in ("recall@5", "recall@10"):  # questions the LOO choice moved, up and down
        eng = per_question_values(b, m)
        summary[f"moved_{m}"] = (
            sum(x > e for x, e in zip(loo_vals[m], eng, strict=True)),
            sum(x < e for x, e in zip(loo_vals[m], eng, strict=True)),
        )
    lines += [
        "",
        f"LOO (share picked on the other four, per metric): R@5 {summary['loo_recall@5']:.3f} "
        f"({summary['loo_recall@5'] - bfig['recall@5']:+.3f}), R@10 "
        f"{summary['loo_recall@10']:.3f} ({summary['loo_recall@10'] - bfig['recall@10']:+.3f}), "
        f"MRR {summary['loo_rr']:.3f} ({summary['loo_rr'] - bfig['rr']:+.3f}); R@10 picks "
        + ", ".join(f"{c} {summary['picks_recall@10'][c]:g}" for c in convs)
        + "; LOO R@10 gain per conversation "
        + ", ".join(f"{c} {g:+.3f}" for c, g in gains.items()),
        "",
        "| category | n | engine R@10 | LOO R@10 | "
        + " | ".join(f"{s:g}" for s in sorted(runs))
        + " |",
        "|---|---:|---:|---:|" + "---:|" * len(runs),
    ]
    by_cat: dict[str, dict[str, float]] = {}
    b_r10 = per_question_values(b, "recall@10")
    r10 = {s: per_question_values(runs[s], "recall@10") for s in runs}
    for cat in cats:
        idx = [i for i, q in enumerate(questions) if q.category == cat]
        eng = mean([b_r10[i] for i in idx])
        lo = mean([loo_vals["recall@10"][i] for i in idx])
        at = [mean([r10[s][i] for i in idx]) for s in sorted(runs)]
        by_cat[str(cat)] = {"engine": eng, "loo": lo}
        lines.append(
            f"| {cat} | {len(idx)} | {eng:.3f} | {lo:.3f} | "
            + " | ".join(f"{x:.3f}" for x in at)
            + " |"
        )
    summary["by_category_r10"] = by_cat
    summary["rule"] = rule(questions, b, loo_vals, by_cat)
    return "\n".join(lines), summary


def rule(
    questions: Sequence[Question],
    engine: Record,
    chosen: dict[str, list[float]],
    by_cat: dict[str, dict[str, float]],
) -> str:
    """Conditions 1-4 of the information prior's adoption rule (docs/benchmarks.md, "An
    information prior") on the LOO figures: ``y``/``n`` each, and the worst category.

    1. R@5 up by at least 0.005 and MRR up; 2. R@5 up on at least 4 of the conversations;
    3. R@10 down by no more than 0.002; 4. no category's R@10 down by more than 0.01.
    (Condition 5, the hybrid p50, needs the channel built into the engine.)
    """
    e = figures(questions, engine, lambda q: True)
    got = {m: mean(chosen[m]) for m in METRICS}
    eng5 = per_question_values(engine, "recall@5")
    up = 0
    for c in sorted({q.conv for q in questions}):
        idx = [i for i, q in enumerate(questions) if q.conv == c]
        up += mean([chosen["recall@5"][i] for i in idx]) > mean([eng5[i] for i in idx])
    worst = min(by_cat, key=lambda c: by_cat[c]["loo"] - by_cat[c]["engine"])
    drop = by_cat[worst]["loo"] - by_cat[worst]["engine"]
    ok = [
        got["recall@5"] - e["recall@5"] >= 0.005 and got["rr"] > e["rr"],
        up >= 4,
        got["recall@10"] - e["recall@10"] >= -0.002,
        drop >= -0.01,
    ]
    return " ".join(f"{i}{'y' if x else 'n'}" for i, x in enumerate(ok, 1)) + (
        f" (cat {worst} {drop:+.3f})"
    )


def summary_table(rows: Sequence[dict[str, Any]], base: dict[str, float]) -> str:
    """One line per variant: LOO figures and their change from the engine."""
    lines = [
        "| variant | LOO R@5 | LOO R@10 | LOO MRR | convs up (R@10) | questions +/- R@5 "
        "| questions +/- R@10 | rule 1-4 (worst category R@10) | channel p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
        f"| engine (no channel) | {base['recall@5']:.3f} | {base['recall@10']:.3f} "
        f"| {base['rr']:.3f} | | | | | |",
    ]
    for r in rows:
        up = sum(g > 0 for g in r["loo_gain_r10_by_conv"].values())
        down = sum(g < 0 for g in r["loo_gain_r10_by_conv"].values())
        cells = [
            f"{r[f'loo_{m}']:.3f} ({r[f'loo_{m}'] - base[m]:+.3f})"
            for m in ("recall@5", "recall@10", "rr")
        ]
        lines.append(
            f"| {r['name']} | " + " | ".join(cells) + f" | {up} up, {down} down "
            f"| +{r['moved_recall@5'][0]}/-{r['moved_recall@5'][1]} "
            f"| +{r['moved_recall@10'][0]}/-{r['moved_recall@10'][1]} | {r['rule']} "
            f"| {r['ms_p50']:.3f} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--embedder", choices=("local", "hash"), default="local")
    p.add_argument("--variants", default="control", help=f"of {','.join(VARIANTS)}, or all")
    p.add_argument("--shares", default=",".join(map(str, SHARES)))
    p.add_argument("--out", type=Path, help="per-question records (read first: runs held skip)")
    p.add_argument("--report-only", action="store_true", help="print from --out, run nothing")
    p.add_argument(
        "--time-scale",
        default="",
        help="only time the channel (memstore tokens) over these numbers of synthetic notes",
    )
    args = p.parse_args(argv)
    if args.time_scale:
        for n in (int(x) for x in args.time_scale.split(",")):
            for name in ("memstore", "memstore-binary"):
                print(name, json.dumps(time_at_scale(n, VARIANTS[name])), flush=True)
        return 0
    names = list(VARIANTS) if args.variants == "all" else args.variants.split(",")
    bad = [n for n in names if n not in VARIANTS]
    if bad:
        p.error(f"unknown variant(s) {bad}; known: {', '.join(VARIANTS)}")
    shares = [float(s) for s in args.shares.split(",")]
    store: dict[str, Any] = {}
    if args.out is not None and args.out.exists():
        store = json.loads(args.out.read_text())
    convs, _ = load(args.data, None)
    questions = [q for c in convs for q in c.questions]
    built = Built()
    build_stores(convs, "transcript", built)

    def save() -> None:
        if args.out is not None:
            args.out.write_text(json.dumps(store) + "\n")

    if not args.report_only:
        emb = CachingEmbedder(make_embedder(args.embedder), args.cache_dir)
        build_cells(convs, emb, built)
        emb.save()
        # The engine's own BM25 channel off: the harness injects its variants in its place.
        config = {"spread_relations": (TURN_RELATION,), "fusion": "score", "bm25_weight": 0.0}
        make_searchers(convs, built, "hybrid", config)
        store["check"] = check_control(convs, built)
        print(store["check"], file=sys.stderr, flush=True)
        if "base" not in store:
            rec, cats, p50 = run_share(questions, built, emb, {}, 0.0)
            store["base"] = {"record": rec, "by_category_r10": cats, "p50_ms": p50}
            save()
        for name in names:
            spec = VARIANTS[name]
            got = store.setdefault("variants", {}).setdefault(name, {"shares": {}})
            got["spec"] = asdict(spec)
            todo = [s for s in shares if str(s) not in got["shares"]]
            if not todo:
                continue
            hits, ms = channel_hits(convs, built, spec)
            got["ms_p50"] = statistics.median(ms)
            got["ms_p95"] = float(np.percentile(ms, 95))
            got["mean_hits"] = mean([len(h) if isinstance(h, list) else 0 for h in hits.values()])
            for s in todo:
                print(f"{name} share {s}", file=sys.stderr, flush=True)
                if spec.tokens == "lexical-weight":
                    make_searchers(convs, built, "hybrid", config | {"lexical_weight": (1 + s) / 2})
                rec, cats, p50 = run_share(questions, built, emb, hits, s)
                make_searchers(convs, built, "hybrid", config)
                got["shares"][str(s)] = {"record": rec, "by_category_r10": cats, "p50_ms": p50}
                save()
    base = store["base"]
    bfig = figures(questions, base["record"], lambda q: True)
    rows: list[dict[str, Any]] = []
    texts: list[str] = []
    for name in names:
        got = store.get("variants", {}).get(name)
        if not got or not got["shares"]:
            continue
        text, summary = variant_report(name, questions, base, got)
        texts.append(text)
        rows.append(summary)
    print(store.get("check", ""))
    print()
    print(summary_table(rows, bfig))
    print()
    print("\n\n".join(texts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
