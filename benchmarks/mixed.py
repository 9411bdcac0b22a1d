"""Mixed workload: a search right after each write, against searches with no write between.

An agent writes a memory and searches in the same turn, so most of its
searches are the first of a new store generation: every cache that lives
until the next write (token matches, query plans, the search snapshot, the
vector index's readable-label sets) is cold for them. This benchmark builds a
durable :class:`memstore.Memory` of ``--items`` notes in one partition (the
lexical benchmark's synthetic notes, hash embedder so that no model cost hides
the engine's), then times, for the same queries:

* ``after write``: ``Memory.add`` of one note, then ``Memory.search`` (timed);
* ``reads only``: ``Memory.search`` with no write in between (timed).

Reported: p50 and p99 per phase in ms, and their ratio, per size. No targets:
what it shows is how much of a search's cost is per generation.

Usage::

    python benchmarks/mixed.py [--sizes 10000] [--rounds 200] [--smoke]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import log, percentile
from corpus import generate_corpus, make_queries

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memstore import Memory  # noqa: E402

PARTITION = "tenant-a"


def run_size(n: int, rounds: int, workdir: Path) -> dict[str, float]:
    """The two phases over a Memory of ``n`` notes: p50/p99 ms each."""
    notes = generate_corpus(n)
    queries = [q.text for q in make_queries(notes, n=max(50, rounds // 4))]
    folder = workdir / f"mem-{n}"
    shutil.rmtree(folder, ignore_errors=True)
    rng = random.Random(11)
    with Memory(folder, embedder="hash") as mem:
        log(f"  storing {n} notes")
        batch = 1000
        for i in range(0, n, batch):
            mem.add_many(
                [{"text": x.content, "title": x.title} for x in notes[i : i + batch]],
                partition=PARTITION,
            )
        for q in queries:  # every query once: its words are known, its plan is not cached
            mem.search(q, partition=PARTITION)
        after: list[float] = []
        reads: list[float] = []
        for r in range(rounds):
            q = rng.choice(queries)
            mem.add(f"round {r}: {rng.choice(notes).content}", partition=PARTITION)
            t0 = time.perf_counter()
            mem.search(q, partition=PARTITION)
            after.append((time.perf_counter() - t0) * 1000)
        for _ in range(rounds):
            q = rng.choice(queries)
            t0 = time.perf_counter()
            mem.search(q, partition=PARTITION)
            reads.append((time.perf_counter() - t0) * 1000)
    return {
        "items": n,
        "after_write_p50_ms": percentile(after, 50),
        "after_write_p99_ms": percentile(after, 99),
        "reads_only_p50_ms": percentile(reads, 50),
        "reads_only_p99_ms": percentile(reads, 99),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default="10000", help="comma-separated store sizes")
    ap.add_argument("--rounds", type=int, default=200, help="timed searches per phase")
    ap.add_argument("--smoke", action="store_true", help="tiny run: 500 notes, 20 rounds")
    args = ap.parse_args()
    sizes = [500] if args.smoke else [int(s) for s in args.sizes.split(",")]
    rounds = 20 if args.smoke else args.rounds
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            log(f"[{n} notes]")
            rows.append(run_size(n, rounds, Path(tmp)))
    print("| items | after a write p50 | p99 | reads only p50 | p99 | p50 ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        ratio = row["after_write_p50_ms"] / max(row["reads_only_p50_ms"], 1e-9)
        after = f"{row['after_write_p50_ms']:.3f} | {row['after_write_p99_ms']:.3f}"
        reads = f"{row['reads_only_p50_ms']:.3f} | {row['reads_only_p99_ms']:.3f}"
        print(f"| {row['items']:,} | {after} | {reads} | {ratio:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
