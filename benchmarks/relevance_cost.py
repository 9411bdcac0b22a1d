"""What computing ``relevance`` costs a hybrid search, on the LoCoMo questions.

Builds the LoCoMo benchmark's stores and CellStore (``benchmarks/locomo.py``'s
``hybrid`` mode: spreading along ``precedes``, centred cosine), then, in one
process, asks every question of categories 1-4 (``limit=10``) in alternating
rounds with the relevance step on and replaced by a no-op, and times:

* the relevance step alone (``Searcher._relevance``) per call;
* the whole ``hybrid_search`` call, on and off (its query vector is a cache
  hit, so the embedding is a dictionary lookup).

Alternating rounds in one process share the machine's state, so the
difference is the step's cost even on a busy machine; the absolute figures
are not the benchmark's latency (which subtracts the embed phase).

Usage::

    python benchmarks/relevance_cost.py --data ../shared/datasets/locomo/dev.json \\
        [--cache-dir /tmp/locomo-cache] [--embedder local|hash] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import percentile
from _locomo_data import TURN_RELATION, load
from _locomo_embed import CachingEmbedder, make_embedder
from _locomo_modes import Built, build_cells, build_stores

from memstore.search import SearchConfig, Searcher
from memstore.search import _searcher as searcher_module


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--embedder", choices=("local", "hash"), default="local")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    convs, _ = load(args.data, None)
    built = Built()
    build_stores(convs, "transcript", built)
    emb = CachingEmbedder(make_embedder(args.embedder), args.cache_dir)
    build_cells(convs, emb, built)
    emb.save()
    cells = built.cells
    searchers = {
        c.sample_id: Searcher(
            SearchConfig(
                store=built.stores[c.sample_id],
                cells=lambda: cells,
                spread_relations=(TURN_RELATION,),
            )
        )
        for c in convs
    }
    questions = [q for c in convs for q in c.questions]
    real = searcher_module.Searcher._relevance
    step_us: list[float] = []

    def timed(self: Searcher, *a: Any) -> Any:
        t0 = time.perf_counter()
        out = real(self, *a)
        step_us.append((time.perf_counter() - t0) * 1e6)
        return out

    def off(self: Searcher, query: str, results: Any, *a: Any) -> Any:
        return results

    calls: dict[str, list[float]] = {"on": [], "off": []}
    try:
        for _ in range(args.rounds):
            for mode in ("off", "on"):
                searcher_module.Searcher._relevance = timed if mode == "on" else off  # type: ignore[method-assign]
                for q in questions:
                    t0 = time.perf_counter()
                    searchers[q.conv].hybrid_search(q.text, partition=q.conv, limit=10)
                    calls[mode].append((time.perf_counter() - t0) * 1e3)
    finally:
        searcher_module.Searcher._relevance = real  # type: ignore[method-assign]
    print(
        f"relevance step: p50 {percentile(step_us, 50):.1f} us, p95 {percentile(step_us, 95):.1f} "
        f"us, mean {statistics.fmean(step_us):.1f} us ({len(step_us)} calls)"
    )
    for mode, ms in calls.items():
        print(
            f"hybrid_search, relevance {mode}: p50 {percentile(ms, 50):.3f} ms, "
            f"mean {statistics.fmean(ms):.3f} ms ({len(ms)} calls)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
