"""What the information prior (``SearchConfig.info_prior``) costs a hybrid search, on LoCoMo.

Builds the LoCoMo benchmark's stores and CellStore (``benchmarks/locomo.py``'s
``hybrid`` mode: spreading along ``precedes``, centred cosine), then, in one
process, asks every question of categories 1-4 (``limit=10``) in alternating
rounds with each ``info_prior`` setting (``off``, ``semantic``, ``fused`` and
``length``, or those ``--priors`` names; the order rotated each round), and
prints each setting's p50 and mean per call. The
query vector is a cache hit (a dictionary lookup, the same for every setting).

Alternating rounds in one process share the machine's state, so the
differences are the prior's cost even on a busy machine; the absolute figures
are not the benchmark's latency (which subtracts the embed phase). It also
times the word count a snapshot build adds (one ``split`` per item).

Usage::

    python benchmarks/prior_cost.py --data ../shared/datasets/locomo/dev.json \\
        [--cache-dir /tmp/locomo-cache] [--embedder local|hash] [--rounds 5] \\
        [--priors off,length]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from _common import percentile
from _locomo_data import TURN_RELATION, load
from _locomo_embed import CachingEmbedder, make_embedder
from _locomo_modes import Built, build_cells, build_stores

from memstore._search_snapshot import item_words
from memstore.search import SearchConfig, Searcher
from memstore.search._prior import INFO_PRIORS


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--embedder", choices=("local", "hash"), default="local")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--priors", default=",".join(INFO_PRIORS), help="comma-separated settings")
    args = p.parse_args(argv)
    priors = tuple(args.priors.split(","))
    unknown = set(priors) - set(INFO_PRIORS)
    if unknown:
        p.error(f"unknown --priors {sorted(unknown)}; known: {', '.join(INFO_PRIORS)}")
    convs, _ = load(args.data, None)
    built = Built()
    build_stores(convs, "transcript", built)
    emb = CachingEmbedder(make_embedder(args.embedder), args.cache_dir)
    build_cells(convs, emb, built)
    emb.save()
    cells = built.cells
    searchers = {
        prior: {
            c.sample_id: Searcher(
                SearchConfig(
                    store=built.stores[c.sample_id],
                    cells=lambda: cells,
                    spread_relations=(TURN_RELATION,),
                    info_prior=prior,
                )
            )
            for c in convs
        }
        for prior in priors
    }
    questions = [q for c in convs for q in c.questions]
    for prior in priors:  # warm: snapshots (and their word column), plans, the vector cache
        for q in questions:
            searchers[prior][q.conv].hybrid_search(q.text, partition=q.conv, limit=10)
    calls: dict[str, list[float]] = {prior: [] for prior in priors}
    for r in range(args.rounds):
        order = priors[r % len(priors) :] + priors[: r % len(priors)]
        for prior in order:
            for q in questions:
                t0 = time.perf_counter()
                searchers[prior][q.conv].hybrid_search(q.text, partition=q.conv, limit=10)
                calls[prior].append((time.perf_counter() - t0) * 1e3)
    for prior, ms in calls.items():
        print(
            f"hybrid_search, info_prior={prior}: p50 {percentile(ms, 50):.3f} ms, "
            f"mean {statistics.fmean(ms):.3f} ms ({len(ms)} calls)"
        )
    items = [it for store in built.stores.values() for it in store.items()]
    t0 = time.perf_counter()
    for _ in range(10):
        for it in items:
            item_words(it)
    us = (time.perf_counter() - t0) * 1e6 / (10 * len(items))
    print(f"word count at snapshot build: {us:.2f} us per item ({len(items)} items)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
