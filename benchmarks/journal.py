"""Journal benchmark: durable writes, batches, restore and as-of reads on SQLite.

Measured, in one process against a raw-``sqlite3`` floor doing the same I/O:

* durable single writes per second: ``Store.upsert`` with a ``SqliteJournal``
  (durability ``"full"``: every write is synced before it is acknowledged),
  against one ``INSERT`` + ``COMMIT`` per row with the same pragmas;
* batched writes per second: ``with store.batch()`` around 1,000 upserts,
  against ``executemany`` of 1,000 rows per transaction;
* ``Memory.add_many`` per second, 1,000 items a call, no embedder (the front
  door's durable path), and in-memory ``Store.upsert`` per second of the
  lexical benchmark's notes (no journal; with the lexical index's share);
* restore: a fresh process opens the journal and attaches an empty store
  (every item parsed; the lexical index loaded from the file the journal saved at
  close, and once more re-tokenising every item); wall time, CPU time (the
  figure a loaded machine disturbs least) and peak RSS of that process
  (``--restore-child PATH`` runs that child alone on an existing journal);
* ``as_of`` at N items with 10 versions each, at random positions: the whole
  store, and one partition of 1% of the items.

Results go to a JSON file and a markdown table (PASS/MISS per target) on
stdout; progress on stderr. The exit status is 0 whether targets pass or not.

Usage::

    python benchmarks/journal.py [--items 100000] [--upserts 20000] [--smoke] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _common import (
    TargetResult,
    cpu_model,
    fmt,
    git_commit,
    log,
    memory_item,
    percentile,
    print_targets,
    status,
    version,
    write_json,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "journal.json"
VERSIONS = 10
PARTITIONS = 100

sys.path.insert(0, str(ROOT))


def single_writes(folder: Path, n: int) -> dict[str, float]:
    """Acknowledged durable upserts per second: ours, and the raw SQLite floor."""
    from memstore import Store
    from memstore.journal import SqliteJournal

    items = [memory_item(i, partitions=PARTITIONS) for i in range(n)]
    with SqliteJournal(folder / "single.db", durability="full") as journal:
        store = Store()
        journal.attach(store)
        t0 = time.perf_counter()
        for it in items:
            store.upsert(it)
        ours = n / (time.perf_counter() - t0)

    payloads = [it.model_dump_json() for it in items]
    conn = _raw(folder / "single-raw.db")
    t0 = time.perf_counter()
    for i, p in enumerate(payloads):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?)", (i, p))
        conn.execute("COMMIT")
    raw = n / (time.perf_counter() - t0)
    conn.close()
    return {"ours_per_s": ours, "raw_sqlite_per_s": raw, "writes": n}


def batched_writes(folder: Path, n: int, batch: int = 1000) -> dict[str, float]:
    """Items per second written in acknowledged batches of ``batch``."""
    from memstore import Store
    from memstore.journal import SqliteJournal

    items = [memory_item(i, partitions=PARTITIONS) for i in range(n)]
    with SqliteJournal(folder / "batched.db", durability="full") as journal:
        store = Store()
        journal.attach(store)
        t0, c0 = time.perf_counter(), time.process_time()
        for start in range(0, n, batch):
            with store.batch():
                for it in items[start : start + batch]:
                    store.upsert(it)
        ours = n / (time.perf_counter() - t0)
        ours_cpu = n / (time.process_time() - c0)
        journal_only = _journal_share(journal, items, batch)

    payloads = [it.model_dump_json() for it in items]
    conn = _raw(folder / "batched-raw.db")
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO t VALUES (?, ?)",
            ((start + j, p) for j, p in enumerate(payloads[start : start + batch])),
        )
        conn.execute("COMMIT")
    raw = n / (time.perf_counter() - t0)
    conn.close()
    return {
        "ours_items_per_s": ours,
        "ours_items_per_cpu_s": ours_cpu,
        "journal_only_items_per_s": journal_only,
        "raw_sqlite_items_per_s": raw,
        "items": n,
        "batch": batch,
    }


def memory_add_many(folder: Path, n: int, batch: int = 1000) -> dict[str, float]:
    """Items per second through ``Memory.add_many`` (no embedder), ``batch`` at a time.

    The front door's whole durable path: entries checked and built, validated,
    indexed, and one journal transaction (synced) per call.
    """
    from memstore import Memory

    items = [memory_item(i, partitions=PARTITIONS) for i in range(n)]
    with Memory(folder / "memory", embedder=None) as mem:
        t0, c0 = time.perf_counter(), time.process_time()
        for start in range(0, n, batch):
            mem.add_many(items[start : start + batch])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"items_per_s": n / wall, "items_per_cpu_s": n / cpu, "items": n, "batch": batch}


def memory_upserts(n: int) -> dict[str, float]:
    """In-memory ``Store.upsert`` per second of ``n`` notes from ``benchmarks/corpus.py``.

    The notes of the lexical benchmark (ids minted by the store), built first
    and not timed; no journal. ``searchable_per_s`` counts to the end of the
    first search after the loop (the lexical index applies the writes it
    queued at its first read). ``lexicon_share`` is the part of the time spent
    in the lexical index's ``put`` (timed around it in a second, equal build).
    """
    from corpus import generate_corpus

    from memstore import Item, Store

    notes = generate_corpus(n)

    def items() -> list[Item]:
        return [
            Item(
                kind=x.kind,
                title=x.title,
                content=x.content,
                subject=x.subject,
                confidence=x.confidence,
                event_date=x.event_date,
            )
            for x in notes
        ]

    walls: list[float] = []
    cpus: list[float] = []
    searchable: list[float] = []
    for _ in range(3):  # the median of three builds: one is at the mercy of the machine
        built = items()
        store = Store()
        upsert = store.upsert
        t0, c0 = time.perf_counter(), time.process_time()
        for it in built:
            upsert(it)
        walls.append(n / (time.perf_counter() - t0))
        cpus.append(n / (time.process_time() - c0))
        # The lexical index applies its queued writes at the first read: the
        # writes are searchable once one search has run.
        store.keyword_search("payment timeout")
        searchable.append(n / (time.perf_counter() - t0))

    built = items()
    store = Store()
    put = store._lex.put
    spent = [0.0]

    def timed_put(item: Item, index_id: bool) -> None:
        t = time.perf_counter()
        put(item, index_id)
        spent[0] += time.perf_counter() - t

    store._lex.put = timed_put  # type: ignore[method-assign]
    t0 = time.perf_counter()
    for it in built:
        store.upsert(it)
    t = time.perf_counter()
    store._lex.flush()  # the writes still queued: the lexicon's work, paid at the next read
    spent[0] += time.perf_counter() - t
    total = time.perf_counter() - t0
    return {
        "upserts_per_s": statistics.median(walls),
        "upserts_per_cpu_s": statistics.median(cpus),
        "searchable_per_s": statistics.median(searchable),
        "items": n,
        "lexicon_share": spent[0] / total,
    }


def _journal_share(journal: Any, items: list[Any], batch: int) -> float:
    """Items/s of the journal's own part of a batch (rows built and committed)."""
    from memstore.config import Change

    changes = [Change("upsert", it.clone(id=it.id + "-j"), it.id + "-j", it.kind) for it in items]
    t0 = time.perf_counter()
    for start in range(0, len(changes), batch):
        journal._on_commit(changes[start : start + batch])
    return len(changes) / (time.perf_counter() - t0)


def _raw(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, item TEXT)")
    return conn


def build_history(path: Path, n: int, versions: int) -> None:
    """A journal of ``n`` items with ``versions`` versions each (rows written directly)."""
    from memstore.config import Change
    from memstore.journal import SqliteJournal

    wall = [1_750_000_000_000]
    with SqliteJournal(path, durability="off", wall=lambda: wall[0]) as journal:
        for rev in range(versions):
            for start in range(0, n, 10_000):
                changes = [
                    Change("upsert", it, it.id, it.kind)
                    for it in (
                        memory_item(i, rev, PARTITIONS)
                        for i in range(start, min(n, start + 10_000))
                    )
                ]
                journal._on_commit(changes)
            wall[0] += 60_000


def _peak_rss_kb() -> int:
    """This process's peak RSS in KiB.

    ``VmHWM`` where Linux has it: ``ru_maxrss`` survives ``exec``, so a child
    started by this (large) benchmark process would report the parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def restore_child(path: str) -> None:
    """(In a fresh process) open, attach, report time and peak memory as JSON."""
    from memstore import Store
    from memstore.journal import SqliteJournal

    base = _peak_rss_kb()
    t0, c0 = time.perf_counter(), time.process_time()
    journal = SqliteJournal(path)
    store = Store()
    journal.attach(store)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = _peak_rss_kb()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu_seconds": cpu,
                "items": len(store),
                "peak_rss_mb": peak / 1024,
                "rss_growth_mb": (peak - base) / 1024,
            }
        )
    )
    journal.close()


def restore(path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--restore-child", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def as_of_latency(path: Path, queries: int) -> dict[str, float]:
    from memstore.journal import Lsn, SqliteJournal

    rng = random.Random(7)
    with SqliteJournal(path, readonly=True) as journal:
        head = journal.head()
        first = Lsn(head.wall_ms - (VERSIONS - 1) * 60_000, 0)
        spans = [
            Lsn(rng.randrange(first.wall_ms, head.wall_ms + 1), 1 << 19) for _ in range(queries)
        ]
        whole: list[float] = []
        one: list[float] = []
        sizes = []
        for at in spans[: max(3, queries // 10)]:
            t0 = time.perf_counter()
            sizes.append(len(journal.as_of(at)))
            whole.append((time.perf_counter() - t0) * 1000)
        for at in spans:
            t0 = time.perf_counter()
            journal.as_of(at, partition=f"t{rng.randrange(PARTITIONS)}")
            one.append((time.perf_counter() - t0) * 1000)
    return {
        "all_items_p50_ms": statistics.median(whole),
        "all_items_returned": statistics.median(sizes),
        "partition_p50_ms": percentile(one, 50),
        "partition_p95_ms": percentile(one, 95),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--single", type=int, default=2_000)
    ap.add_argument("--batched", type=int, default=50_000)
    ap.add_argument("--upserts", type=int, default=20_000)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--restore-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.restore_child:
        restore_child(args.restore_child)
        return
    if args.smoke:
        args.items, args.single, args.batched, args.upserts = 2_000, 100, 2_000, 2_000

    with tempfile.TemporaryDirectory(prefix="memstore-journal-bench-") as tmp:
        folder = Path(tmp)
        log(f"single durable writes x{args.single}")
        single = single_writes(folder, args.single)
        log(f"batched writes x{args.batched}")
        batched = batched_writes(folder, args.batched)
        log(f"Memory.add_many x{args.batched}")
        add_many = memory_add_many(folder, args.batched)
        log(f"in-memory upserts x{args.upserts}")
        upserts = memory_upserts(args.upserts)
        log(f"restore of {args.items} items")
        from memstore import Store
        from memstore.journal import SqliteJournal

        with SqliteJournal(folder / "restore.db", durability="off") as journal:
            store = Store()
            journal.attach(store)
            for start in range(0, args.items, 1000):
                with store.batch():
                    for i in range(start, min(args.items, start + 1000)):
                        store.upsert(memory_item(i, partitions=PARTITIONS))
        # Closing that journal saved the store's lexical index beside it; time a
        # restore without it (re-tokenising every item) and one that loads it.
        saved = Path(f"{folder / 'restore.db'}.lexicon.npz")
        saved.unlink(missing_ok=True)
        retokenised = restore(folder / "restore.db")  # its close saves the index again
        restored = restore(folder / "restore.db")
        restored["saved_index_used"] = saved.exists()
        log(f"as_of over {args.items} items x {VERSIONS} versions")
        build_history(folder / "history.db", args.items, VERSIONS)
        as_of = as_of_latency(folder / "history.db", 20 if args.smoke else 50)

    full = not args.smoke and args.items >= 100_000
    targets = [
        TargetResult(
            "single durable writes/s >= 1,000",
            single["ours_per_s"],
            "writes/s",
            status(single["ours_per_s"], 1000, at_least=True),
        ),
        TargetResult(
            "batched items/s >= 20,000",
            batched["ours_items_per_s"],
            "items/s",
            status(batched["ours_items_per_s"], 20_000, at_least=True),
        ),
        TargetResult(
            "durable Memory.add_many items/s >= 30,000 (batches of 1,000, no embedder)",
            add_many["items_per_s"],
            "items/s",
            status(add_many["items_per_s"], 30_000, at_least=True),
        ),
        TargetResult(
            f"in-memory Store.upsert/s >= 40,000 ({args.upserts:,} notes)",
            upserts["upserts_per_s"],
            "upserts/s",
            status(upserts["upserts_per_s"], 40_000, at_least=True),
        ),
        TargetResult(
            "restore of 100k items <= 1.5 s (from the saved lexical index)",
            restored["seconds"] if full else None,
            "s",
            status(restored["seconds"] if full else None, 1.5),
        ),
        TargetResult(
            "restore peak RSS <= 0.5 GB",
            restored["peak_rss_mb"] / 1024 if full else None,
            "GB",
            status(restored["peak_rss_mb"] / 1024 if full else None, 0.5),
        ),
    ]
    record = {
        "benchmark": "journal",
        "smoke": args.smoke,
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "single": single,
        "batched": batched,
        "add_many": add_many,
        "upserts": upserts,
        "restore": restored,
        "restore_retokenised": retokenised,
        "as_of": as_of,
        "items": args.items,
        "versions_per_item": VERSIONS,
        "targets": [asdict(t) for t in targets],
        "machine": {
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "memstore_commit": git_commit(ROOT),
            "pydantic": version("pydantic"),
        },
    }
    write_json(args.out, record)

    print("| measure | memstore | raw sqlite3 |\n|---|---:|---:|")
    print(
        f"| durable single writes/s | {fmt(single['ours_per_s'])} | "
        f"{fmt(single['raw_sqlite_per_s'])} |"
    )
    print(
        f"| batched items/s (1,000 per batch) | {fmt(batched['ours_items_per_s'])} | "
        f"{fmt(batched['raw_sqlite_items_per_s'])} |"
    )
    print(f"| of which the journal alone, items/s | {fmt(batched['journal_only_items_per_s'])} | |")
    print(
        f"| durable `Memory.add_many` items/s (1,000 per call) | {fmt(add_many['items_per_s'])} | |"
    )
    print(
        f"| in-memory `Store.upsert`/s ({upserts['items']:,} notes; lexicon's share "
        f"{upserts['lexicon_share']:.0%}) | {fmt(upserts['upserts_per_s'])} | |"
    )
    print(f"| same, through the first search after | {fmt(upserts['searchable_per_s'])} | |")
    print(f"| restore {restored['items']:,} items, s | {fmt(restored['seconds'])} | |")
    print(f"| same, CPU seconds of the open | {fmt(restored['cpu_seconds'])} | |")
    print(f"| same, re-tokenising (no saved index), s | {fmt(retokenised['seconds'])} | |")
    print(f"| restore peak RSS, MB | {fmt(restored['peak_rss_mb'], 0)} | |")
    print(
        f"| as_of all {as_of['all_items_returned']:,.0f} items p50, ms | "
        f"{fmt(as_of['all_items_p50_ms'])} | |"
    )
    print(
        f"| as_of one partition (1%) p50 / p95, ms | {fmt(as_of['partition_p50_ms'])} / "
        f"{fmt(as_of['partition_p95_ms'])} | |"
    )
    print(
        "\nPer CPU second of this process (what the code costs, whatever the machine's load;"
        " the durable rows leave out the wait for the disk):\n"
    )
    print("| measure | items per CPU s |\n|---|---:|")
    print(f"| batched (1,000 per batch) | {fmt(batched['ours_items_per_cpu_s'])} |")
    print(f"| durable `Memory.add_many` (1,000 per call) | {fmt(add_many['items_per_cpu_s'])} |")
    print(f"| in-memory `Store.upsert` | {fmt(upserts['upserts_per_cpu_s'])} |")
    print_targets(targets)


if __name__ == "__main__":
    main()
