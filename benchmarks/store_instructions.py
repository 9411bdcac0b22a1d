"""Instructions per write, counted: in-memory ``Store.upsert`` and durable ``Memory.add_many``.

Timed write rates swing with the machine (a shared 2-core VM moves them by more
than a tenth from run to run); instruction counts do not. This script runs a
small write workload twice under ``valgrind --tool=cachegrind --cache-sim=no``,
once with ``--items`` writes after a warm-up and once with none, and prints the
difference per item: the instructions the writes themselves cost, start-up,
imports, the corpus and the warm-up subtracted. ``PYTHONHASHSEED`` is fixed, so
two runs of the same checkout agree to within a few hundred instructions an
item (the minted ids' random parts and the clock still vary).

The workloads:

* ``upsert``: ``Store.upsert`` of notes of ``benchmarks/corpus.py`` (the
  in-memory benchmark's), ids minted by the store, then one search (which
  applies the lexical writes still queued).
* ``add_many``: ``Memory.add_many`` of the same notes as ``Item`` s, 1,000 a
  call, no embedder, on the SQLite journal (``Memory``'s default).
* ``add_many_journal``: the same with ``benchmarks/_common.memory_item``, the
  items ``journal.py``'s ``add_many`` row writes (ids given, a tenant tag).

The child exits without closing anything (no index saved at close): only the
writes are counted. Needs ``valgrind`` (Debian's package)::

    python benchmarks/store_instructions.py                 # all three, 5,000 items
    python benchmarks/store_instructions.py --what upsert --items 2000
    python benchmarks/store_instructions.py --root ../other-checkout   # another tree's code

The two runs of a workload go side by side (two processes).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WHAT = ("upsert", "add_many", "add_many_journal")
BATCH = 1000


def _items(what: str, n: int) -> list[object]:
    from memstore import Item

    if what == "add_many_journal":
        from _common import memory_item

        return [memory_item(i) for i in range(n)]
    from corpus import generate_corpus

    return [
        Item(
            kind=x.kind,
            title=x.title,
            content=x.content,
            subject=x.subject,
            confidence=x.confidence,
            event_date=x.event_date,
        )
        for x in generate_corpus(n)
    ]


def child(root: str, what: str, warmup: int, n: int, total: int) -> None:
    """Write ``warmup`` items, then ``n`` more (of ``total`` built either way), and exit.

    ``memstore`` is imported from ``root``; the corpus from beside this script.
    """
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, root)
    items = _items(what, warmup + total)  # the same items built whatever ``n`` is
    if what == "upsert":
        from memstore import Store

        store = Store()
        for it in items[:warmup]:
            store.upsert(it)
        store.keyword_search("payment timeout")
        upsert = store.upsert
        for it in items[warmup : warmup + n]:
            upsert(it)
        store.keyword_search("payment timeout")
    else:
        from memstore import Memory

        mem = Memory(Path.cwd() / f"memory-{n}", embedder=None)  # the parent's temporary folder
        for start in range(0, warmup, BATCH):
            mem.add_many(items[start : min(start + BATCH, warmup)])
        for start in range(warmup, warmup + n, BATCH):
            mem.add_many(items[start : min(start + BATCH, warmup + n)])
    sys.stdout.flush()
    os._exit(0)  # no close: the index saved at close is not a write's cost


def counts(root: Path, what: str, warmup: int, ns: list[int], keep: Path | None) -> list[int]:
    """Instructions of one child run under cachegrind for each of ``ns`` (run side by side)."""
    env = dict(os.environ, PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"))
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for n in ns:
            out = (keep or Path(tmp)) / f"cachegrind.{what}.{n}.out"
            cmd = [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                str(root),
                what,
                str(warmup),
                str(n),
                str(max(ns)),
            ]
            proc = subprocess.Popen(
                cmd, env=env, cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            runs.append((proc, out))
        found = []
        for proc, out in runs:
            _, err = proc.communicate()
            if proc.returncode:
                raise RuntimeError(f"{what}: the child failed:\n{err.decode()[-3000:]}")
            summary = [ln for ln in out.read_text().splitlines() if ln.startswith("summary:")]
            found.append(int(summary[0].split()[1]))
        return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", default=",".join(WHAT), help="comma-separated: " + ", ".join(WHAT))
    ap.add_argument("--items", type=int, default=5000, help="writes counted (default 5000)")
    ap.add_argument("--warmup", type=int, default=1000, help="writes before them (default 1000)")
    ap.add_argument("--keep", type=Path, help="keep the cachegrind files in this folder")
    ap.add_argument(
        "--root", type=Path, default=HERE.parent, help="the checkout to count (default: this one)"
    )
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        root, what, warmup, n, total = args.child
        child(root, what, int(warmup), int(n), int(total))
        return
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    for what in args.what.split(","):
        if what not in WHAT:
            raise SystemExit(f"--what: {what!r} is not one of {', '.join(WHAT)}")
        base, full = counts(args.root.resolve(), what, args.warmup, [0, args.items], args.keep)
        per = (full - base) / args.items
        print(f"{what}: {per / 1000:.1f}k instructions an item ({args.items:,} items)", flush=True)


if __name__ == "__main__":
    main()
