"""Bulk writes with an embedder: ``Memory.add_many`` when every item is also embedded and indexed.

``journal.py`` times ``Memory.add_many`` without an embedder; this script times
the same front door with one (``--embedder hash`` by default: the package's
own hash embedder, so the figure is the index's cost, not a model's), ``--batch``
items a call, in a fresh folder (journal, vector file and HNSW graph beside
it). It reports items per wall second and per CPU second (``process_time``,
the figure other work on a shared machine disturbs least), and with
``--profile`` a second, profiled run split by where the time goes:

* ``embed``: the embedder's ``embed`` calls;
* ``hnsw_add``: ``hnswlib.Index.add_items``;
* ``vector_file``: ``VectorFile.write`` (the SQLite file of vectors);
* ``before_commit`` / ``after_commit``: the index's two store listeners, in
  whole (``before_commit`` holds the embedding, ``after_commit`` the graph and
  the file, or the group's apply when the index takes it at once);
* ``add_many``: the whole call (the rest is the store and the journal).

Profiled seconds are CPU seconds (all threads), inflated by the profiler
(Python calls more than C): read them as shares, and the unprofiled run as
the speed.

The script imports ``memstore`` from ``PYTHONPATH`` first (this checkout only
when nothing else is given), so one copy of it can time another checkout::

    PYTHONPATH=/path/to/checkout python benchmarks/embedded_writes.py

Usage::

    python benchmarks/embedded_writes.py [--items 20000] [--batch 1000]
        [--embedder hash] [--profile] [--repeat 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import log, memory_item

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 100

sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout given there wins

# (bucket, file suffix, function name): cumulative seconds of these functions.
_BUCKETS = (
    ("embed", "hash_embedder.py", "embed"),
    ("hnsw_add", "~", "<built-in method hnswlib.add_items>"),
    ("vector_file", "_vectorfile.py", "write"),
    ("before_commit", "_binding.py", "_before_commit"),
    ("after_commit", "_binding.py", "_after_commit"),
    ("after_commit", "_binding.py", "_after_group"),
    ("add_many", "memory.py", "add_many"),
)


def add_many(n: int, batch: int, embedder: str | None) -> dict[str, Any]:
    """Items per second (wall and CPU) through ``Memory.add_many`` with ``embedder``."""
    from memstore import Memory

    items = [memory_item(i, partitions=PARTITIONS) for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp), embedder=embedder) as mem:
        t0, c0 = time.perf_counter(), time.process_time()
        for start in range(0, n, batch):
            mem.add_many(items[start : start + batch])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "items": n,
        "batch": batch,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "items_per_s": round(n / wall),
        "items_per_cpu_s": round(n / cpu),
        "cpu_us_per_item": round(cpu / n * 1e6, 1),
    }


def profile_split(n: int, batch: int, embedder: str | None) -> dict[str, float]:
    """One profiled :func:`add_many`: cumulative seconds per bucket (see the module doc)."""
    prof = cProfile.Profile(time.process_time)  # CPU seconds: a busy machine inflates wall
    prof.enable()
    add_many(n, batch, embedder)
    prof.disable()
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    split: dict[str, float] = {name: 0.0 for name, _, _ in _BUCKETS}
    for (path, _, func), (_, _, _, cum, _) in stats.items():
        for name, suffix, want in _BUCKETS:
            if func == want and path.endswith(suffix):
                split[name] += cum
    pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(12)
    return {k: round(v, 3) for k, v in split.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=1_000)
    ap.add_argument("--embedder", default="hash", help='"hash", "none", "local", ...')
    ap.add_argument("--repeat", type=int, default=1, help="timed runs (the best CPU is kept)")
    ap.add_argument("--profile", action="store_true", help="add a profiled run's split")
    ap.add_argument("--json", type=Path, help="also write the record here")
    args = ap.parse_args()
    import memstore

    embedder = None if args.embedder == "none" else args.embedder
    add_many(min(args.items, 2 * args.batch), args.batch, embedder)  # warm-up
    runs = [add_many(args.items, args.batch, embedder) for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["cpu_s"])
    record: dict[str, Any] = {
        "memstore": str(Path(memstore.__file__).resolve().parent.parent),
        "embedder": args.embedder,
        **best,
        "runs_cpu_s": [r["cpu_s"] for r in runs],
    }
    if args.profile:
        log("profiled run")
        record["profile_s"] = profile_split(args.items, args.batch, embedder)
    print(json.dumps(record, indent=2))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
