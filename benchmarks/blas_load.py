"""Exact partition scans on a busy machine: OpenBLAS's thread pool against one thread.

numpy's OpenBLAS splits a large enough matrix-vector product across its
thread pool (one thread per core). On an idle machine that halves a big
product; on a busy one a worker thread waits for a core, and the caller
waits for the worker: a product worth 0.1 ms can take 20 ms. memstore's
exact scans (a partition set of up to ``SUBSET_SCAN_MAX`` rows, and the
exact answer a graph calibration compares with) are such products.

What it times, with memstore's own code (``--src`` picks the checkout):

* ``search_vector(q, 10, partitions=[p])`` on one CellStore holding one
  partition per size (random unit vectors, dim 384, seeded): the cached
  partition-set scan of ``memstore_index._exact``;
* ``_calibrate.exact_top_k`` of 128 queries over the largest partition's rows
  (the exact answer of a graph calibration: one matrix-matrix product per
  8,192 rows, which this change leaves to OpenBLAS's pool).

Each configuration runs in a child process of its own, since OpenBLAS reads
``OPENBLAS_NUM_THREADS`` once, when numpy loads it: threads as numpy has them
(``default``) or ``1``. A child measures with no load of its own ("idle": the
machine's other work goes on, the report gives its load average), then starts
``--load`` busy-loop processes, measures again and kills them. Children run one at a time, in
turn (each checkout, each thread setting), ``--rounds`` times; the report
gives the median over rounds of each child's per-query p50 and p99 (wall) and
CPU per query (all of the process's threads, so spinning workers count).

Usage::

    python benchmarks/blas_load.py [--sizes 1000,2048,10000,50000] [--load 2]
        [--src /path/to/other/checkout ...] [--rounds 3] [--smoke] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DIM = 384
TOP_K = 10
CALIBRATION_QUERIES = 128
DEFAULT_SIZES = (1_000, 2_048, 10_000, 50_000)
SMOKE_SIZES = (500, 3_000)
BUSY = "while True: pass"
PAUSE_S = 0.5
"""Pause between cases (OpenBLAS's idle workers spin for a while, then sleep); none in
``--smoke``, whose figures are never read as measurements."""


def _child(args: argparse.Namespace) -> None:
    """Build the store, time idle, time under load; one JSON line on stdout."""
    sys.path.insert(0, args.src[0])
    import numpy as np

    from memstore_index import _calibrate as cal
    from memstore_index._vectorfile import StoredVector
    from memstore_index.cellstore import CellStore
    from memstore_index.entry import IndexEntry
    from memstore_index.hash_embedder import HashEmbedder

    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((sum(sizes), DIM), dtype=np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    parts = [f"p{n}" for n in sizes]
    owner = np.repeat(np.arange(len(sizes)), sizes)
    # The graph is not what is measured (a partition set is scanned exactly):
    # a cheap one keeps the build short, and no calibration runs.
    cells = CellStore(HashEmbedder(dim=DIM), m=4, ef_construction=16, target_recall=None)
    rows = [
        StoredVector(IndexEntry(f"v{i}", partition=parts[owner[i]]), -1, f"h{i}", "", vecs[i])
        for i in range(len(vecs))
    ]
    for start in range(0, len(rows), 5_000):
        cells.apply(rows[start : start + 5_000])
    queries = rng.standard_normal((args.queries, DIM), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    big = np.flatnonzero(owner == len(sizes) - 1).astype(np.intp)
    cal_q = np.ascontiguousarray(queries[:CALIBRATION_QUERIES])

    def phase() -> dict[str, Any]:
        out: dict[str, Any] = {}
        wall: list[float] = []
        c0 = time.process_time()
        for _ in range(args.cal_repeats):
            t0 = time.perf_counter()
            cal.exact_top_k(cells._vecs, big, cal_q, cal.CALIBRATION_K)
            wall.append((time.perf_counter() - t0) * 1e3)
        cpu = (time.process_time() - c0) * 1e3 / len(wall)
        out[f"exact_top_k {len(cal_q)}q x {sizes[-1]}"] = _stats(wall, cpu)
        # A threaded product leaves the pool's workers spinning for a while:
        # let them sleep, so that their CPU is not counted against the scans.
        time.sleep(args.pause)
        for n, p in zip(sizes, parts, strict=True):
            cells.search_vector(queries[0], TOP_K, partitions=[p])  # lays the set out
            wall = []
            c0 = time.process_time()
            for _ in range(args.repeats):
                for q in queries:
                    t0 = time.perf_counter()
                    cells.search_vector(q, TOP_K, partitions=[p])
                    wall.append((time.perf_counter() - t0) * 1e3)
            cpu = (time.process_time() - c0) * 1e3 / len(wall)
            out[f"scan {n}"] = _stats(wall, cpu)
            time.sleep(args.pause)
        return out

    phase()  # warm-up: first calls, page faults, the thread pool's start
    result: dict[str, Any] = {"idle": phase(), "load_before": os.getloadavg()[0]}
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.load)]
    try:
        time.sleep(0.3)
        result["loaded"] = phase()
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.wait()
    print(json.dumps(result), flush=True)


def _stats(wall: list[float], cpu_ms: float) -> dict[str, float]:
    xs = sorted(wall)
    return {
        "p50": statistics.median(xs),
        "p99": xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))],
        "cpu": cpu_ms,
    }


def _run(src: str, threads: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop("OPENBLAS_NUM_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)
    if threads != "default":
        env["OPENBLAS_NUM_THREADS"] = threads
    cmd = [sys.executable, __file__, "--child", "--src", src, "--sizes", args.sizes]
    cmd += ["--load", str(args.load), "--queries", str(args.queries)]
    cmd += ["--repeats", str(args.repeats), "--cal-repeats", str(args.cal_repeats)]
    cmd += ["--pause", str(args.pause)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({src}, threads {threads}):\n{proc.stderr}")
    got: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return got


def _median(runs: list[dict[str, Any]], phase: str, case: str, stat: str) -> float:
    return statistics.median(r[phase][case][stat] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--src", action="append", help="checkout(s) to measure (default: this one)")
    ap.add_argument("--load", type=int, default=2, help="busy-loop processes while loaded")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cal-repeats", type=int, default=5)
    ap.add_argument("--threads", default="default,1", help="OPENBLAS_NUM_THREADS settings")
    ap.add_argument("--pause", type=float, default=PAUSE_S, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one round, no pauses")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.smoke:
        args.sizes = ",".join(map(str, SMOKE_SIZES))
        args.rounds, args.queries, args.repeats, args.cal_repeats = 1, 20, 1, 1
        args.pause = 0.0
    if args.child:
        _child(args)
        return
    srcs = [str(Path(s).resolve()) for s in (args.src or [str(ROOT)])]
    threads = args.threads.split(",")
    configs = [(s, t) for s in srcs for t in threads]
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {c: [] for c in configs}
    for r in range(args.rounds):
        for src, t in configs:
            print(f"round {r + 1}: {src} threads={t}", file=sys.stderr, flush=True)
            runs[(src, t)].append(_run(src, t, args))
    cases = list(next(iter(runs.values()))[0]["idle"])
    print(f"load: {args.load} busy loops; {args.rounds} round(s); medians over rounds")
    print(
        f"load average before each child's idle phase: "
        f"{[round(x['load_before'], 1) for rs in runs.values() for x in rs]}"
    )
    print("| checkout | threads | phase | case | p50 ms | p99 ms | CPU ms/call |")
    print("|---|---|---|---|---|---|---|")
    for src, t in configs:
        for phase in ("idle", "loaded"):
            for case in cases:
                p50, p99, cpu = (
                    _median(runs[(src, t)], phase, case, s) for s in ("p50", "p99", "cpu")
                )
                print(
                    f"| {Path(src).name} | {t} | {phase} | {case} | {p50:.3f} | "
                    f"{p99:.3f} | {cpu:.3f} |"
                )
    if "1" in threads and "default" in threads:
        print("\nratio default / 1 thread (p50, p99), per checkout")
        for src in srcs:
            for phase in ("idle", "loaded"):
                for case in cases:
                    d = runs[(src, "default")]
                    o = runs[(src, "1")]
                    r50 = _median(d, phase, case, "p50") / _median(o, phase, case, "p50")
                    r99 = _median(d, phase, case, "p99") / _median(o, phase, case, "p99")
                    print(f"  {Path(src).name} {phase:6s} {case:28s} {r50:6.2f}x {r99:6.2f}x")
    if args.out is not None:
        serial = {f"{Path(s).name}|{t}": v for (s, t), v in runs.items()}
        args.out.write_text(
            json.dumps(
                {"args": vars(args) | {"out": str(args.out)}, "runs": serial}, indent=1, default=str
            )
        )


if __name__ == "__main__":
    main()
