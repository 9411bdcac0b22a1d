"""Lexical search benchmark: memstore's keyword search against bm25s and rank_bm25.

For each corpus size (synthetic agent-memory notes from :mod:`corpus`), in one
process and on the same notes and queries:

* memstore: upsert throughput, keyword-search latency (p50/p95/p99 of
  per-query medians, overall and per query category) *warm* (a repeated query
  token is a cache hit, as in an agent's session) and *cold* (the token caches
  cleared before every query), memory per item (RSS delta and, in a separate
  build pass, ``tracemalloc`` current/peak), and hit@10 of the queries lifted
  from a note;
* bm25s: index build time, per-query latency (tokenise + retrieve, one query
  at a time), per category too, hit@10;
* rank_bm25: ``BM25Okapi`` build time and ``get_top_n`` latency (on a subset
  of the queries, a few of each category, at large sizes, where one query
  takes tens of milliseconds).

Results go to a JSON file, a markdown table (with PASS/MISS per target) to
stdout and, with ``--plot PATH``, a PNG of p50 against corpus size per query
category; progress goes to stderr. The exit status is 0 whether targets pass
or not: this is a report, not a test.

Usage::

    python benchmarks/lexical.py [--sizes 1000,10000,100000] [--smoke] [--out PATH] [--plot PNG]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import psutil  # type: ignore[import-untyped]
from _common import TargetResult, git_commit, log, percentile, time_queries
from _common import cpu_model as _cpu_model
from _common import fmt as _fmt
from _common import status as _status
from _common import version as _version
from corpus import Note, Query, generate_corpus, make_queries

if TYPE_CHECKING:
    from memstore import Item, Store

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "lexical.json"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
SMOKE_SIZES = (200, 1_000)
TOP_K = 10
RANK_BM25_FULL_MAX_SIZE = 20_000
"""Above this many items rank_bm25 is timed on a subset of the queries."""
RANK_BM25_PER_CATEGORY = 4
"""Queries of each category rank_bm25 is timed on above that size."""
DEFAULT_PLOT = ROOT / "benchmarks" / "results" / "lexical.png"

R = TypeVar("R")

# Targets (a report, never an assertion).
TARGET_P50_MS = {1_000: 0.1}
TARGET_SIZE = 100_000
TARGET_BM25S_CATEGORIES = ("common", "question")
TARGET_BM25S_P50_RATIO = 1.0
TARGET_BM25S_P99_RATIO = 3.0
TARGET_TYPO_HIT = 0.95
TARGET_RANK_SPEEDUP = 20.0
TARGET_UPSERTS_PER_S = 40_000.0


@dataclass
class Latency:
    """Per-query latency: percentiles over queries of each query's median time."""

    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    queries: int
    repeats: int


def summarize(per_query_ms: Sequence[float], repeats: int) -> Latency:
    """Percentiles over queries of per-query times (already in milliseconds)."""
    return Latency(
        p50_ms=percentile(per_query_ms, 50),
        p95_ms=percentile(per_query_ms, 95),
        p99_ms=percentile(per_query_ms, 99),
        mean_ms=statistics.fmean(per_query_ms),
        max_ms=max(per_query_ms),
        queries=len(per_query_ms),
        repeats=repeats,
    )


# --------------------------------------------------------------------------- results


@dataclass
class Quality:
    """Sanity checks of result quality (not a relevance benchmark)."""

    hit_at_10_exact: float | None
    """Fraction of ``exact`` queries whose source note is in the top 10."""
    hit_at_10_typo: float | None
    """The same for ``typo`` queries (one edit away from the note's words)."""
    hit_at_10_common: float | None
    """The same for ``common`` queries (frequent words: many notes hold them)."""
    hit_at_10_question: float | None
    """The same for ``question`` queries."""
    empty_results_miss: float | None
    """Fraction of ``miss`` queries (made-up words) that return nothing."""
    mean_results: float
    """Mean number of results per query."""


@dataclass
class MemstoreResult:
    """memstore's numbers at one corpus size."""

    item_build_per_s: float
    """``Item(...)`` constructions per second (not part of the upsert figure)."""
    upsert_per_s: float
    upsert_total_s: float
    stored_ids: int
    """Distinct ids the upserts returned (fewer than the notes means merges)."""
    rss_delta_bytes_per_item: float
    tracemalloc_current_bytes_per_item: float
    tracemalloc_peak_bytes_per_item: float
    first_query_ms: float
    """The first query after the build (pays for any lazy index work)."""
    latency: Latency
    latency_by_category: dict[str, Latency]
    cold_latency: Latency
    """The same queries with the token caches cleared before each one."""
    cold_latency_by_category: dict[str, Latency]
    quality: Quality


@dataclass
class PeerResult:
    """A peer library's numbers at one corpus size."""

    tokenize_s: float
    index_s: float
    build_s: float
    latency: Latency
    latency_by_category: dict[str, Latency]
    quality: Quality
    note: str = ""


@dataclass
class SizeResult:
    """Everything measured at one corpus size."""

    size: int
    corpus_gen_s: float
    queries_by_category: dict[str, int]
    memstore: MemstoreResult
    bm25s: PeerResult
    rank_bm25: PeerResult
    ratios: dict[str, float | None] = field(default_factory=dict)


# --------------------------------------------------------------------------- timing


def rss_bytes() -> int:
    """This process's resident set size."""
    return int(psutil.Process().memory_info().rss)


# --------------------------------------------------------------------------- quality


def quality(
    queries: Sequence[Query],
    hits: Sequence[Sequence[Hashable]],
    source_key: Callable[[int], Hashable],
) -> Quality:
    """hit@10 per category, empty results for misses, mean result count."""

    def frac(cat: str, ok: Callable[[Query, Sequence[Hashable]], bool]) -> float | None:
        pairs = [(q, h) for q, h in zip(queries, hits, strict=True) if q.category == cat]
        return sum(ok(q, h) for q, h in pairs) / len(pairs) if pairs else None

    def found(q: Query, h: Sequence[Hashable]) -> bool:
        return q.source is not None and source_key(q.source) in h[:TOP_K]

    return Quality(
        hit_at_10_exact=frac("exact", found),
        hit_at_10_typo=frac("typo", found),
        hit_at_10_common=frac("common", found),
        hit_at_10_question=frac("question", found),
        empty_results_miss=frac("miss", lambda _q, h: not h),
        mean_results=statistics.fmean(len(h) for h in hits) if hits else 0.0,
    )


def by_category(
    queries: Sequence[Query], per_query_ms: Sequence[float], repeats: int
) -> dict[str, Latency]:
    """Latency summaries per query category."""
    cats = sorted({q.category for q in queries})
    return {
        c: summarize(
            [t for q, t in zip(queries, per_query_ms, strict=True) if q.category == c], repeats
        )
        for c in cats
    }


# --------------------------------------------------------------------------- memstore


def load_memstore() -> ModuleType:
    """Import memstore from the repository this script lives in (not an installed copy)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("memstore")


def to_item(ms: ModuleType, note: Note) -> Item:
    """The memstore item for one note."""
    item: Item = ms.Item(
        kind=note.kind,
        title=note.title,
        content=note.content,
        subject=note.subject,
        confidence=note.confidence,
        event_date=note.event_date,
    )
    return item


def build_timed(ms: ModuleType, notes: Sequence[Note]) -> tuple[Store, list[str], dict[str, float]]:
    """Build a store, timing item construction and upserts and taking the RSS delta."""
    gc.collect()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    items = [to_item(ms, n) for n in notes]
    t1 = time.perf_counter()
    store: Store = ms.Store()
    upsert = store.upsert
    ids = [upsert(it).id for it in items]
    t2 = time.perf_counter()
    del items
    gc.collect()
    rss1 = rss_bytes()
    n = len(notes)
    stats = {
        "item_build_per_s": n / (t1 - t0),
        "upsert_per_s": n / (t2 - t1),
        "upsert_total_s": t2 - t1,
        "rss_delta_bytes_per_item": (rss1 - rss0) / n,
    }
    return store, ids, stats


def build_traced(ms: ModuleType, notes: Sequence[Note]) -> tuple[float, float]:
    """Build a throwaway store under ``tracemalloc``: (current, peak) bytes per item.

    Items are constructed inside the traced region, so an item the store keeps
    counts in full; garbage (a copied item, temporaries) only in the peak.
    """
    gc.collect()
    tracemalloc.start()
    store: Store = ms.Store()
    for n in notes:
        store.upsert(to_item(ms, n))
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del store
    gc.collect()
    return current / len(notes), peak / len(notes)


@dataclass
class _Timed:
    """What the timed build and query passes of memstore measured."""

    build: dict[str, float]
    ids: list[str]
    first_query_ms: float
    per_query_ms: list[float]
    cold_per_query_ms: list[float]
    hits: list[list[str]]


def _time_memstore(
    ms: ModuleType, notes: Sequence[Note], queries: Sequence[str], repeats: int
) -> _Timed:
    """Build a store and time the queries on it; the store is dropped on return."""
    log("  memstore: build")
    store, ids, build = build_timed(ms, notes)

    def search(q: str) -> list[Item]:
        return store.keyword_search(q, limit=TOP_K)

    t0 = time.perf_counter_ns()
    search(queries[0])
    first_ms = (time.perf_counter_ns() - t0) / 1e6
    log("  memstore: queries")
    per_query, warm = time_queries(search, queries, repeats)

    def cold(q: str) -> list[Item]:
        store.clear_search_caches()  # what a write makes stale: token matches, query plans
        return store.keyword_search(q, limit=TOP_K)

    log("  memstore: queries, caches cleared")
    cold_per_query, _ = time_queries(cold, queries, repeats)
    hits = [[it.id for it in res] for res in warm]
    return _Timed(build, ids, first_ms, per_query, cold_per_query, hits)


def run_memstore(
    ms: ModuleType, notes: Sequence[Note], queries: Sequence[Query], repeats: int
) -> tuple[MemstoreResult, list[float]]:
    """memstore at one size; also returns the per-query medians (for peer ratios)."""
    timed = _time_memstore(ms, notes, [q.text for q in queries], repeats)
    gc.collect()
    log("  memstore: tracemalloc build")
    current, peak = build_traced(ms, notes)
    result = MemstoreResult(
        item_build_per_s=timed.build["item_build_per_s"],
        upsert_per_s=timed.build["upsert_per_s"],
        upsert_total_s=timed.build["upsert_total_s"],
        stored_ids=len(set(timed.ids)),
        rss_delta_bytes_per_item=timed.build["rss_delta_bytes_per_item"],
        tracemalloc_current_bytes_per_item=current,
        tracemalloc_peak_bytes_per_item=peak,
        first_query_ms=timed.first_query_ms,
        latency=summarize(timed.per_query_ms, repeats),
        latency_by_category=by_category(queries, timed.per_query_ms, repeats),
        cold_latency=summarize(timed.cold_per_query_ms, repeats),
        cold_latency_by_category=by_category(queries, timed.cold_per_query_ms, repeats),
        quality=quality(queries, timed.hits, lambda i: timed.ids[i]),
    )
    return result, timed.per_query_ms


# --------------------------------------------------------------------------- peers


def run_bm25s(
    notes: Sequence[Note], queries: Sequence[Query], repeats: int
) -> tuple[PeerResult, list[float]]:
    """bm25s: tokenize + index the notes, then tokenize + retrieve one query at a time."""
    import bm25s  # type: ignore[import-untyped]

    log("  bm25s: build")
    t0 = time.perf_counter()
    corpus_tokens = bm25s.tokenize([n.text for n in notes], stopwords="en", show_progress=False)
    t1 = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(corpus_tokens, show_progress=False)
    t2 = time.perf_counter()
    k = min(TOP_K, len(notes))

    def search(q: str) -> Any:
        tokens = bm25s.tokenize(q, stopwords="en", show_progress=False)
        return retriever.retrieve(tokens, k=k, show_progress=False)

    log("  bm25s: queries")
    per_query, warm = time_queries(search, [q.text for q in queries], repeats)
    # Zero-score documents are filler (bm25s always returns k), not results.
    hits = [[int(d) for d, s in zip(r[0][0], r[1][0], strict=True) if s > 0] for r in warm]
    result = PeerResult(
        tokenize_s=t1 - t0,
        index_s=t2 - t1,
        build_s=t2 - t0,
        latency=summarize(per_query, repeats),
        latency_by_category=by_category(queries, per_query, repeats),
        quality=quality(queries, hits, lambda i: i),
        note='bm25s.tokenize(stopwords="en") + BM25().retrieve(k=10), one query per call',
    )
    return result, per_query


_WORD = re.compile(r"(?u)\b\w\w+\b")


def rank_bm25_subset(size: int, queries: Sequence[Query]) -> list[int]:
    """Indices of the queries rank_bm25 is timed on: all, or the first few of each category."""
    if size <= RANK_BM25_FULL_MAX_SIZE:
        return list(range(len(queries)))
    taken: dict[str, int] = {}
    out = []
    for i, q in enumerate(queries):
        if taken.get(q.category, 0) < RANK_BM25_PER_CATEGORY:
            taken[q.category] = taken.get(q.category, 0) + 1
            out.append(i)
    return out


def run_rank_bm25(
    notes: Sequence[Note], queries: Sequence[Query], repeats: int, subset: Sequence[int]
) -> PeerResult:
    """rank_bm25's BM25Okapi with bm25s's tokenisation (same regex and stop words)."""
    from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]
    from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

    stop = frozenset(STOPWORDS_EN)

    def tokenize(text: str) -> list[str]:
        return [w for w in _WORD.findall(text.lower()) if w not in stop]

    log("  rank_bm25: build")
    t0 = time.perf_counter()
    corpus_tokens = [tokenize(n.text) for n in notes]
    t1 = time.perf_counter()
    bm = BM25Okapi(corpus_tokens)
    t2 = time.perf_counter()
    doc_ids = list(range(len(notes)))
    k = min(TOP_K, len(notes))

    def search(q: str) -> Any:
        return bm.get_top_n(tokenize(q), doc_ids, n=k)

    chosen = [queries[i] for i in subset]
    log(f"  rank_bm25: {len(chosen)} queries")
    per_query, warm = time_queries(search, [q.text for q in chosen], repeats)
    hits = [list(r) for r in warm]
    note = "BM25Okapi.get_top_n(n=10)"
    if len(chosen) < len(queries):
        note += f"; timed on {len(chosen)} of {len(queries)} queries (too slow for all)"
    return PeerResult(
        tokenize_s=t1 - t0,
        index_s=t2 - t1,
        build_s=t2 - t0,
        latency=summarize(per_query, repeats),
        latency_by_category=by_category(chosen, per_query, repeats),
        quality=quality(chosen, hits, lambda i: i),
        note=note,
    )


# --------------------------------------------------------------------------- one size


def run_size(ms: ModuleType, size: int, n_queries: int, repeats: int, seed: int) -> SizeResult:
    """Every measurement at one corpus size."""
    log(f"[{size:,} items]")
    t0 = time.perf_counter()
    notes = generate_corpus(size, seed)
    queries = make_queries(notes, n_queries, seed)
    gen_s = time.perf_counter() - t0
    ours, ours_per_query = run_memstore(ms, notes, queries, repeats)
    gc.collect()
    bm25s_res, bm25s_per_query = run_bm25s(notes, queries, repeats)
    gc.collect()
    subset = rank_bm25_subset(size, queries)
    rank_res = run_rank_bm25(notes, queries, repeats, subset)
    gc.collect()
    ours_on_subset = percentile([ours_per_query[i] for i in subset], 50)
    del bm25s_per_query
    counts = {
        c: sum(q.category == c for q in queries) for c in sorted({q.category for q in queries})
    }
    return SizeResult(
        size=size,
        corpus_gen_s=gen_s,
        queries_by_category=counts,
        memstore=ours,
        bm25s=bm25s_res,
        rank_bm25=rank_res,
        ratios={
            "memstore_over_bm25s_p50": ours.latency.p50_ms / bm25s_res.latency.p50_ms,
            "memstore_over_bm25s_p99": ours.latency.p99_ms / bm25s_res.latency.p99_ms,
            "memstore_cold_over_bm25s_p50": ours.cold_latency.p50_ms / bm25s_res.latency.p50_ms,
            "rank_bm25_over_memstore_p50": rank_res.latency.p50_ms / ours_on_subset,
            "memstore_p50_ms_on_rank_bm25_queries": ours_on_subset,
        },
    )


# --------------------------------------------------------------------------- targets


def _cat_ratio(r: SizeResult, cat: str, attr: str, *, cold: bool = False) -> float | None:
    """memstore's ``attr`` percentile over bm25s's on category ``cat``."""
    ours = (r.memstore.cold_latency_by_category if cold else r.memstore.latency_by_category).get(
        cat
    )
    peer = r.bm25s.latency_by_category.get(cat)
    if ours is None or peer is None:
        return None
    return float(getattr(ours, attr)) / float(getattr(peer, attr))


def evaluate_targets(results: Sequence[SizeResult]) -> list[TargetResult]:
    """PASS/MISS for each target; N/A when its corpus size was not measured."""
    by_size = {r.size: r for r in results}
    out: list[TargetResult] = []
    for size, limit in TARGET_P50_MS.items():
        r = by_size.get(size)
        v = r.memstore.latency.p50_ms if r else None
        name = f"keyword search p50 <= {limit:g} ms at {size:,} items"
        out.append(TargetResult(name, v, "ms", _status(v, limit, at_least=False)))
    big = by_size.get(TARGET_SIZE)
    for cat in TARGET_BM25S_CATEGORIES:
        for attr, limit, label in (
            ("p50_ms", TARGET_BM25S_P50_RATIO, "p50"),
            ("p99_ms", TARGET_BM25S_P99_RATIO, "p99"),
        ):
            v = _cat_ratio(big, cat, attr) if big else None
            out.append(
                TargetResult(
                    f"`{cat}` {label} <= {limit:g}x bm25s at {TARGET_SIZE:,} items",
                    v,
                    "x (ours/bm25s)",
                    _status(v, limit, at_least=False),
                )
            )
    v = big.ratios["rank_bm25_over_memstore_p50"] if big else None
    out.append(
        TargetResult(
            f">= {TARGET_RANK_SPEEDUP:g}x faster than rank_bm25 at {TARGET_SIZE:,} items",
            v,
            "x (rank_bm25/ours)",
            _status(v, TARGET_RANK_SPEEDUP, at_least=True),
        )
    )
    for r in results:
        v = r.memstore.quality.hit_at_10_typo
        out.append(
            TargetResult(
                f"typo hit@10 >= {TARGET_TYPO_HIT:g} at {r.size:,} items",
                v,
                "",
                _status(v, TARGET_TYPO_HIT, at_least=True),
            )
        )
    for r in results:
        out.append(
            TargetResult(
                f"upserts >= {TARGET_UPSERTS_PER_S:,.0f} items/s at {r.size:,} items",
                r.memstore.upsert_per_s,
                "items/s",
                _status(r.memstore.upsert_per_s, TARGET_UPSERTS_PER_S, at_least=True),
            )
        )
    return out


# --------------------------------------------------------------------------- report


def _categories(results: Sequence[SizeResult]) -> list[str]:
    return sorted({c for r in results for c in r.memstore.latency_by_category})


def markdown(results: Sequence[SizeResult], targets: Sequence[TargetResult]) -> str:
    """The markdown report: latency tables (overall, per category), build/memory, targets."""
    lines = [
        "### Keyword search latency (ms; p50/p99 over queries of each query's median)",
        "",
        "memstore *warm*: repeated query tokens hit the token caches; *cold*: caches "
        "cleared before every query.",
        "",
        "| items | category | memstore p50 | memstore p99 | cold p50 | cold p99 | bm25s p50 "
        "| bm25s p99 | rank_bm25 p50 | rank_bm25 p99 | ours/bm25s p50 | cold/bm25s p50 |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ours, cold = r.memstore.latency_by_category, r.memstore.cold_latency_by_category
        peer, rank = r.bm25s.latency_by_category, r.rank_bm25.latency_by_category
        rows = [("all", r.memstore.latency, r.memstore.cold_latency, r.bm25s.latency)]
        rows += [(c, ours[c], cold[c], peer[c]) for c in _categories([r])]
        for cat, m, c, b in rows:
            k = r.rank_bm25.latency if cat == "all" else rank.get(cat)
            lines.append(
                f"| {r.size:,} | {cat} | {_fmt(m.p50_ms)} | {_fmt(m.p99_ms)} | {_fmt(c.p50_ms)} "
                f"| {_fmt(c.p99_ms)} | {_fmt(b.p50_ms)} | {_fmt(b.p99_ms)} "
                f"| {_fmt(k.p50_ms if k else None)} | {_fmt(k.p99_ms if k else None)} "
                f"| {_fmt(m.p50_ms / b.p50_ms, 2)} | {_fmt(c.p50_ms / b.p50_ms, 2)} |"
            )
    lines += [
        "",
        "### Build, memory and result quality",
        "",
        "| items | upserts/s | RSS B/item | tracemalloc cur B/item | tracemalloc peak B/item "
        "| bm25s build s | rank_bm25 build s | hit@10 exact ours / bm25s "
        "| hit@10 typo ours / bm25s | hit@10 common ours / bm25s "
        "| hit@10 question ours / bm25s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ours_r = r.memstore
        q, bq = ours_r.quality, r.bm25s.quality
        lines.append(
            f"| {r.size:,} | {_fmt(ours_r.upsert_per_s)} "
            f"| {_fmt(ours_r.rss_delta_bytes_per_item, 0)} "
            f"| {_fmt(ours_r.tracemalloc_current_bytes_per_item, 0)} "
            f"| {_fmt(ours_r.tracemalloc_peak_bytes_per_item, 0)} | {_fmt(r.bm25s.build_s, 2)} "
            f"| {_fmt(r.rank_bm25.build_s, 2)} "
            f"| {_fmt(q.hit_at_10_exact, 2)} / {_fmt(bq.hit_at_10_exact, 2)} "
            f"| {_fmt(q.hit_at_10_typo, 2)} / {_fmt(bq.hit_at_10_typo, 2)} "
            f"| {_fmt(q.hit_at_10_common, 2)} / {_fmt(bq.hit_at_10_common, 2)} "
            f"| {_fmt(q.hit_at_10_question, 2)} / {_fmt(bq.hit_at_10_question, 2)} |"
        )
    notes = [f"- {r.size:,} items: rank_bm25 {r.rank_bm25.note}" for r in results]
    notes = [n for n in notes if "timed on" in n]
    if notes:
        lines += ["", *notes, "  (rank_bm25/ours uses memstore's p50 on the same queries)"]
    lines += ["", "### Targets", "", "| target | value | status |", "|---|---:|:---:|"]
    for t in targets:
        value = "-" if t.value is None else f"{_fmt(t.value, 3)} {t.unit}"
        lines.append(f"| {t.name} | {value} | {t.status} |")
    return "\n".join(lines)


def plot(results: Sequence[SizeResult], path: Path) -> None:
    """A PNG of keyword p50 against corpus size, one panel per query category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cats = ["all", *_categories(results)]
    cols = 4
    rows = (len(cats) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.4 * rows), squeeze=False)
    sizes = [r.size for r in results]

    def series(pick: Callable[[SizeResult], Latency | None]) -> list[float]:
        out = []
        for r in results:
            lat = pick(r)
            out.append(lat.p50_ms if lat else float("nan"))
        return out

    for ax, cat in zip(axes.flat, cats, strict=False):
        if cat == "all":
            lines = {
                "memstore": series(lambda r: r.memstore.latency),
                "memstore (cold)": series(lambda r: r.memstore.cold_latency),
                "bm25s": series(lambda r: r.bm25s.latency),
                "rank_bm25": series(lambda r: r.rank_bm25.latency),
            }
        else:
            lines = {
                "memstore": series(lambda r, c=cat: r.memstore.latency_by_category.get(c)),
                "memstore (cold)": series(
                    lambda r, c=cat: r.memstore.cold_latency_by_category.get(c)
                ),
                "bm25s": series(lambda r, c=cat: r.bm25s.latency_by_category.get(c)),
                "rank_bm25": series(lambda r, c=cat: r.rank_bm25.latency_by_category.get(c)),
            }
        for label, ys in lines.items():
            style = "--" if "cold" in label else "-"
            ax.plot(sizes, ys, style, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{cat} queries")
        ax.set_xlabel("items")
        ax.set_ylabel("p50 ms")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(cats) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("Keyword search p50 latency against corpus size (one query per call)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def _source_digest(ms: ModuleType) -> str | None:
    """A digest of memstore's ``*.py`` files: which engine code was measured."""
    files = sorted(Path(p) for d in getattr(ms, "__path__", []) for p in Path(d).glob("*.py"))
    if not files:
        return None
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def machine_info(ms: ModuleType) -> dict[str, Any]:
    """Where and with what this run happened."""
    return {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "cpu_model": _cpu_model(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": _version("numpy"),
        "bm25s": _version("bm25s"),
        "rank_bm25": _version("rank-bm25"),
        "psutil": _version("psutil"),
        "memstore": getattr(ms, "__version__", None) or _version("memstore"),
        "git_commit": git_commit(ROOT),
        "memstore_path": str(Path(ms.__file__).parent) if ms.__file__ else None,
        "memstore_source_sha256": _source_digest(ms),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (``--smoke`` changes the defaults, explicit flags win)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", help="comma-separated corpus sizes (default 1000,10000,100000)")
    p.add_argument("--smoke", action="store_true", help="tiny run: 200 and 1000 items, 20 queries")
    p.add_argument(
        "--out", type=Path, help=f"JSON output (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    p.add_argument("--queries", type=int, help="queries per size (default 200, smoke 20)")
    p.add_argument("--repeats", type=int, help="timed passes (default 5, smoke 1)")
    p.add_argument("--seed", type=int, default=42, help="corpus and query seed (default 42)")
    p.add_argument(
        "--plot",
        type=Path,
        help=f"PNG of p50 against size (default {DEFAULT_PLOT.relative_to(ROOT)}; smoke: none)",
    )
    args = p.parse_args(argv)
    if args.sizes:
        args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    else:
        args.sizes = list(SMOKE_SIZES if args.smoke else DEFAULT_SIZES)
    if args.queries is None:
        args.queries = 20 if args.smoke else 200
    if args.repeats is None:
        args.repeats = 1 if args.smoke else 5
    if args.out is None:
        tmp = Path(tempfile.gettempdir()) / "memstore-lexical-smoke.json"
        args.out = tmp if args.smoke else DEFAULT_OUT
    if args.plot is None and not args.smoke:
        args.plot = DEFAULT_PLOT
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, write the JSON, print the report. Always 0."""
    args = parse_args(argv)
    ms = load_memstore()
    results = [run_size(ms, n, args.queries, args.repeats, args.seed) for n in args.sizes]
    targets = evaluate_targets(results)
    payload = {
        "benchmark": "lexical",
        "smoke": args.smoke,
        "config": {
            "sizes": args.sizes,
            "queries": args.queries,
            "repeats": args.repeats,
            "seed": args.seed,
            "top_k": TOP_K,
            "rank_bm25_subset_above_size": RANK_BM25_FULL_MAX_SIZE,
            "rank_bm25_subset_queries_per_category": RANK_BM25_PER_CATEGORY,
        },
        "machine": machine_info(ms),
        "results": [asdict(r) for r in results],
        "targets": [asdict(t) for t in targets],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(markdown(results, targets))
    print(f"\nJSON written to {args.out}")
    if args.plot is not None:
        plot(results, args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
