"""Paired hybrid-search timing of two checkouts on LoCoMo, question by question.

On a shared, noisy machine two runs of ``locomo.py`` minutes apart differ more
than two versions of the search do. This runs one worker process per checkout
(each imports its own ``memstore``), builds the stores, CellStore and Searchers
as ``locomo.py`` does, asks every question at ``limit`` 5, 10 and 20 once to
warm up (as the benchmark asks them), then times the ``limit=10`` call of
each question in the two workers one right after the other (the order swapped
every other question), for ``--rounds`` rounds. The embedding phase (a cache
hit) is taken off, as the benchmark does. It prints, per checkout, the p50 wall
time of each round, the p50 over questions of the per-question minimum (wall
and CPU), and the median over questions of the CPU ratio B/A, and counts the
questions whose results (id, score, relevance) differ between the two.

Usage (the embedding cache must hold the vectors: run ``locomo.py`` with the
same ``--cache-dir`` once first)::

    python benchmarks/_locomo_ab.py --data ../shared/datasets/locomo/dev.json \\
        --cache-dir /tmp/locomo-cache OLD_CHECKOUT NEW_CHECKOUT [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def worker(root: Path, data: Path, cache_dir: Path) -> None:
    """Serve timing requests on stdin: a question index in, ``wall cpu digest`` out."""
    sys.path[:0] = [str(root / "benchmarks"), str(root)]
    from _locomo_data import load
    from _locomo_embed import CachingEmbedder, make_embedder
    from _locomo_modes import Built, build_cells, build_stores, make_searchers

    import memstore

    assert Path(memstore.__file__).is_relative_to(root), memstore.__file__
    convs, _ = load(data, None)
    qs = [q for c in convs for q in c.questions]
    built = Built()
    build_stores(convs, "transcript", built)
    emb = CachingEmbedder(make_embedder("local"), cache_dir)
    emb.embed([q.text for q in qs])
    build_cells(convs, emb, built)
    make_searchers(convs, built, "hybrid", {"spread_relations": ("precedes",), "fusion": "score"})
    stats = built.search_stats["hybrid"]
    embed_ns = "search.phase.embed.ns"
    for q in qs:
        for k in (5, 10, 20):
            built.searchers["hybrid"][q.conv].hybrid_search(q.text, partition=q.conv, limit=k)
    print("ready", len(qs), flush=True)
    for line in sys.stdin:
        q = qs[int(line)]
        searcher = built.searchers["hybrid"][q.conv]
        before = stats.ops().get(embed_ns, 0)
        c0, t0 = time.process_time(), time.perf_counter()
        res = searcher.hybrid_search(q.text, partition=q.conv, limit=10)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        embed = (stats.ops().get(embed_ns, 0) - before) / 1e9
        got = repr([(r.item.id, r.score, r.relevance) for r in res]).encode()
        print(wall - embed, cpu - embed, hashlib.sha1(got).hexdigest(), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("old", type=Path)
    p.add_argument("new", type=Path)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--cache-dir", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:  # old is the checkout to serve
        worker(args.old.resolve(), args.data, args.cache_dir)
        return 0
    procs: list[Any] = []
    for root in (args.old, args.new):
        cmd = [sys.executable, __file__, str(root), str(root), "--worker"]
        cmd += ["--data", str(args.data), "--cache-dir", str(args.cache_dir)]
        procs.append(
            subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        )
    sizes = {int(proc.stdout.readline().split()[1]) for proc in procs}
    assert len(sizes) == 1, f"the checkouts load different questions: {sizes}"
    n = sizes.pop()
    wall: list[list[list[float]]] = [[[] for _ in range(n)] for _ in procs]
    cpu: list[list[list[float]]] = [[[] for _ in range(n)] for _ in procs]
    differ = 0
    for rnd in range(args.rounds):
        for i in range(n):
            digests = []
            for k in (0, 1) if (i + rnd) % 2 == 0 else (1, 0):
                procs[k].stdin.write(f"{i}\n")
                procs[k].stdin.flush()
                w, c, digest = procs[k].stdout.readline().split()
                wall[k][i].append(float(w))
                cpu[k][i].append(float(c))
                digests.append(digest)
            differ += digests[0] != digests[1]
    for proc in procs:
        proc.stdin.close()
        proc.wait()
    for k, root in enumerate((args.old, args.new)):
        rounds = [statistics.median(w[r] for w in wall[k]) * 1e3 for r in range(args.rounds)]
        print(
            f"{root}: p50 wall ms per round {[round(x, 3) for x in rounds]}; "
            f"p50 of per-question min: wall {statistics.median(map(min, wall[k])) * 1e3:.3f} ms, "
            f"CPU {statistics.median(map(min, cpu[k])) * 1e3:.3f} ms "
            f"(mean {statistics.fmean(map(min, cpu[k])) * 1e3:.3f})"
        )
    ratio = statistics.median(min(cpu[1][i]) / min(cpu[0][i]) for i in range(n))
    print(
        f"median per-question CPU ratio new/old {ratio:.3f}; "
        f"questions whose results differ: {differ}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
