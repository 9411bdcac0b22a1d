"""Replication benchmark: durable writes to PostgreSQL, replication lag, catch-up.

Measured against a real PostgreSQL (``--dsn``, default ``$MEMSTORE_TEST_PG_DSN``
or ``postgresql://postgres@127.0.0.1:5432/test``), in a fresh schema dropped
at the end:

* durable single writes per second: ``Store.upsert`` with a
  ``PostgresJournal`` (``durability="full"``: ``synchronous_commit = on``,
  each write acknowledged after the server flushed it), against one raw
  ``INSERT`` + ``COMMIT`` per row over psycopg with the same setting;
* batched writes per second: ``with store.batch()`` around 1,000 upserts;
* replication lag: this process writes one item at a time at a steady pace,
  another process (a replica, started by this script) records when each one
  reached its store; the lag is that moment minus the moment the write was
  acknowledged here (same machine, same clock), p50/p99;
* catch-up: the replica is paused (SIGSTOP) while this process writes N
  versions, then resumed; the time until its store holds everything on
  record, as versions per second. Three shapes: N new items; N versions of
  N/10 items; N new items with vectors (the replica takes them from
  PostgreSQL into its vector index, no embedding).

Results go to a JSON file and a markdown table (PASS/MISS per target) on
stdout; progress on stderr. The exit status is 0 whether targets pass or not.

Usage::

    python benchmarks/replication.py [--missed 100000] [--smoke] [--dsn DSN] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import secrets
import signal
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
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "replication.json"
DEFAULT_DSN = os.environ.get("MEMSTORE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
BATCH = 1000
LAG_INTERVAL_S = 0.01
"""The pace of the lag run: one write every 10 ms (well below the write capacity)."""
DIM = 384

sys.path.insert(0, str(ROOT))


def _journal(dsn: str, schema: str, **kwargs: Any) -> Any:
    from memstore.journal import PostgresJournal

    return PostgresJournal(dsn, schema=schema, **kwargs)


# --------------------------------------------------------------- writes


def single_writes(dsn: str, schema: str, n: int) -> dict[str, float]:
    """Acknowledged durable upserts per second: ours, and a raw psycopg floor."""
    import psycopg

    from memstore import Store

    items = [memory_item(i) for i in range(n)]
    journal = _journal(dsn, schema, durability="full", replicate=False)
    store = Store()
    journal.attach(store)
    t0 = time.perf_counter()
    for it in items:
        store.upsert(it)
    ours = n / (time.perf_counter() - t0)
    journal.close()

    payloads = [it.model_dump_json() for it in items]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")
        conn.execute(f'CREATE TABLE "{schema}".raw (id INTEGER PRIMARY KEY, item TEXT)')
        t0 = time.perf_counter()
        for i, p in enumerate(payloads):
            with conn.transaction():
                conn.execute(f'INSERT INTO "{schema}".raw VALUES (%s, %s)', (i, p))
        raw = n / (time.perf_counter() - t0)
    return {"ours_per_s": ours, "raw_psycopg_per_s": raw, "writes": n}


def batched_writes(dsn: str, schema: str, n: int) -> dict[str, float]:
    """Items per second written in acknowledged durable batches of :data:`BATCH`."""
    from memstore import Store

    items = [memory_item(i) for i in range(n)]
    journal = _journal(dsn, schema, durability="full", replicate=False)
    store = Store()
    journal.attach(store)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        with store.batch():
            for it in items[start : start + BATCH]:
                store.upsert(it)
    ours = n / (time.perf_counter() - t0)
    journal.close()
    return {"ours_items_per_s": ours, "items": n, "batch": BATCH}


# -------------------------------------------------------------- replica


class Replica:
    """A replica process (this script with ``--replica-child``) and its line protocol."""

    def __init__(self, dsn: str, schema: str, *, vectors: bool) -> None:
        args = [sys.executable, __file__, "--replica-child", dsn, schema]
        self.proc = subprocess.Popen(
            [*args, *(["--vectors"] if vectors else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.answer()  # ready

    def ask(self, command: str) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def answer(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the replica process died")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.send("quit")
            self.proc.wait(timeout=60)


def replica_child(dsn: str, schema: str, vectors: bool) -> None:
    """(In a replica process) follow the journal; answer the parent's commands as JSON lines."""
    from memstore import Store
    from memstore.journal import Lsn

    journal = _journal(dsn, schema, durability="full")
    store = Store()
    applied: dict[str, float] = {}
    store.add_change_listener(lambda op, item, id, kind: applied.setdefault(id, time.time()))
    journal.attach(store)
    if vectors:
        from memstore_index import CellStore, HashEmbedder

        journal.attach_cells(CellStore(HashEmbedder(dim=DIM)))
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "wait":
            ok = journal.wait_for(Lsn.parse(arg), 600.0)
            status = journal.feed_status()
            answer: Any = {
                "t": time.time(),
                "ok": ok,
                "items": len(store),
                "read_s": status.read_s,
                "apply_s": status.apply_s,
            }
        elif cmd == "applied":
            answer = applied
        elif cmd == "quit":
            break
        else:
            answer = {"error": f"unknown command {cmd!r}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    journal.close()


# ------------------------------------------------------------------ lag


def lag(dsn: str, schema: str, n: int) -> dict[str, float]:
    """Commit-to-visibility lag in another process, ms (p50, p99, max)."""
    from memstore import Store

    replica = Replica(dsn, schema, vectors=False)
    journal = _journal(dsn, schema, durability="full", replicate=False)
    store = Store()
    journal.attach(store)
    acked: dict[str, tuple[float, float]] = {}
    next_at = time.perf_counter()
    for i in range(n):
        it = memory_item(10_000_000 + i)
        now = time.perf_counter()
        if now < next_at:
            time.sleep(next_at - now)
        next_at += LAG_INTERVAL_S
        start = time.time()
        store.upsert(it)
        acked[it.id] = (start, time.time())
    replica.ask(f"wait {journal.head()}")
    applied = replica.ask("applied")
    replica.close()
    journal.close()
    from_ack = [(applied[id] - done) * 1000 for id, (_, done) in acked.items()]
    from_call = [(applied[id] - start) * 1000 for id, (start, _) in acked.items()]
    return {
        "writes": n,
        "interval_ms": LAG_INTERVAL_S * 1000,
        "p50_ms": percentile(from_ack, 50),
        "p99_ms": percentile(from_ack, 99),
        "max_ms": max(from_ack),
        "min_ms": min(from_ack),
        "from_call_p50_ms": percentile(from_call, 50),
        "from_call_p99_ms": percentile(from_call, 99),
    }


# ------------------------------------------------------------- catch-up


def catch_up(dsn: str, schema: str, n: int, shape: str) -> dict[str, Any]:
    """Versions per second a paused replica applies when it resumes, ``n`` versions behind.

    ``shape``: ``"new"`` (n new items), ``"edits"`` (10 versions of n/10 items)
    or ``"vectors"`` (n new items with their vectors, into the replica's index).
    """
    from memstore import Store

    vectors = shape == "vectors"
    replica = Replica(dsn, schema, vectors=vectors)
    journal = _journal(dsn, schema, durability="off", replicate=False)
    store = Store()
    journal.attach(store)
    if vectors:
        from memstore_index import CellStore, HashEmbedder

        journal.attach_cells(CellStore(HashEmbedder(dim=DIM)))
    replica.proc.send_signal(signal.SIGSTOP)
    try:
        if shape == "edits":
            ids = max(1, n // 10)
            plan = [(i % ids, i // ids) for i in range(n)]
        else:
            plan = [(i, 0) for i in range(n)]
        t0 = time.perf_counter()
        for start in range(0, n, BATCH):
            with store.batch():
                for i, rev in plan[start : start + BATCH]:
                    store.upsert(memory_item(20_000_000 + i, rev))
        write_s = time.perf_counter() - t0
        head = journal.head()
        replica.send(f"wait {head}")
        resumed = time.time()
    finally:
        replica.proc.send_signal(signal.SIGCONT)
    done = replica.answer()
    seconds = done["t"] - resumed
    replica.close()
    journal.close()
    return {
        "shape": shape,
        "versions": n,
        "items_after": done["items"],
        "caught_up": done["ok"],
        "seconds": seconds,
        "versions_per_s": n / seconds,
        "follower_read_s": done["read_s"],
        "follower_apply_s": done["apply_s"],
        "writer_seconds": write_s,
    }


def store_floor(n: int) -> dict[str, float]:
    """Items/s a bare Store takes in from JSON (parse and index, no journal): the ceiling."""
    from memstore import Item, Store

    writer = Store()  # items as the record holds them: stamped by a writer's store
    for start in range(0, n, BATCH):
        with writer.batch():
            for i in range(start, min(n, start + BATCH)):
                writer.upsert(memory_item(30_000_000 + i))
    texts = [it.model_dump_json() for it in writer.items()]
    del writer
    t0 = time.perf_counter()
    Store().restore(Item.model_validate_json(t) for t in texts)
    seconds = time.perf_counter() - t0
    return {"items": n, "seconds": seconds, "items_per_s": n / seconds}


# ----------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default=DEFAULT_DSN)
    ap.add_argument("--single", type=int, default=1_000)
    ap.add_argument("--batched", type=int, default=50_000)
    ap.add_argument("--lag", type=int, default=1_000, help="writes timed for the lag")
    ap.add_argument("--missed", type=int, default=100_000, help="versions a replica misses")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks the script runs")
    ap.add_argument(
        "--out", type=Path, default=None, help=f"default {DEFAULT_OUT} (smoke: a temp file)"
    )
    ap.add_argument("--replica-child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--vectors", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replica_child:
        replica_child(*args.replica_child, args.vectors)
        return
    if args.smoke:
        args.single, args.batched, args.lag, args.missed = 30, 2_000, 30, 2_000
    if args.out is None:  # a smoke run never overwrites the committed results
        args.out = Path(tempfile.mkstemp(suffix=".json")[1]) if args.smoke else DEFAULT_OUT

    import psycopg

    prefix = f"bench_repl_{secrets.token_hex(4)}"
    schemas = [f"{prefix}_{name}" for name in ("single", "batched", "lag", "new", "edits", "vec")]
    try:
        log(f"single durable writes x{args.single}")
        single = single_writes(args.dsn, schemas[0], args.single)
        log(f"batched durable writes x{args.batched}")
        batched = batched_writes(args.dsn, schemas[1], args.batched)
        log(f"replication lag over {args.lag} writes")
        lags = lag(args.dsn, schemas[2], args.lag)
        runs = []
        for shape, schema in zip(("new", "edits", "vectors"), schemas[3:], strict=True):
            log(f"catch-up after {args.missed} missed versions ({shape})")
            runs.append(catch_up(args.dsn, schema, args.missed, shape))
        log(f"a bare store taking in {args.missed} items")
        floor = store_floor(args.missed)
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    full = not args.smoke and args.missed >= 100_000
    new = runs[0]
    targets = [
        TargetResult(
            "replication lag p99 < 50 ms (loopback)",
            lags["p99_ms"],
            "ms",
            status(lags["p99_ms"], 50.0),
        ),
        TargetResult(
            "catch-up >= 10,000 versions/s after 100k missed (new items)",
            new["versions_per_s"] if full else None,
            "versions/s",
            status(new["versions_per_s"] if full else None, 10_000, at_least=True),
        ),
    ]
    record = {
        "benchmark": "replication",
        "smoke": args.smoke,
        "when": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "single": single,
        "batched": batched,
        "lag": lags,
        "catch_up": runs,
        "store_floor": floor,
        "targets": [asdict(t) for t in targets],
        "machine": {
            "cpu": cpu_model(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "postgresql": _server_version(args.dsn),
            "psycopg": version("psycopg"),
            "memstore_commit": git_commit(ROOT),
        },
    }
    write_json(args.out, record)

    print("| measure | memstore | raw psycopg |\n|---|---:|---:|")
    print(
        f"| durable single writes/s | {fmt(single['ours_per_s'])} | "
        f"{fmt(single['raw_psycopg_per_s'])} |"
    )
    print(
        f"| durable batched items/s ({BATCH:,} per batch) | {fmt(batched['ours_items_per_s'])} | |"
    )
    print(
        f"| replication lag p50 / p99 / max, ms | {fmt(lags['p50_ms'])} / "
        f"{fmt(lags['p99_ms'])} / {fmt(lags['max_ms'])} | |"
    )
    for run in runs:
        print(
            f"| catch-up, {run['versions']:,} versions ({run['shape']}), versions/s | "
            f"{fmt(run['versions_per_s'])} ({fmt(run['seconds'])} s: read "
            f"{fmt(run['follower_read_s'])} s, apply {fmt(run['follower_apply_s'])} s) | |"
        )
    print(
        f"| a bare Store taking in {floor['items']:,} items (parse + index), items/s | "
        f"{fmt(floor['items_per_s'])} | |"
    )
    print_targets(targets)


def _server_version(dsn: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except psycopg.Error:
        return None
    return None if row is None else str(row[0])


if __name__ == "__main__":
    main()
