"""Instructions a write costs, counted by cachegrind: a figure a busy machine does not move.

Timings on a machine shared with other work swing by more than a change of a
tenth; instruction counts do not. For each part asked, this runs a child
process twice under ``valgrind --tool=cachegrind --cache-sim=no``
(``PYTHONHASHSEED=0`` and ``OPENBLAS_NUM_THREADS=1`` unless set: OpenBLAS's
idle worker threads spin, and cachegrind counts every thread's
instructions), side by side: once writing ``--notes`` items after a warm-up
of ``--warmup``, once doing only the warm-up (the
interpreter's start, the imports, the items built, the warm-up writes), and
prints the difference per item. The child exits without closing anything (no
index saved at close). Two runs of one tree agree within about 1k an item
(the minted ids' random parts and the clock still vary).

The parts (the notes are :mod:`corpus`'s, the in-memory benchmark's):

* ``upsert``: ``Store.upsert`` of each note (ids minted by the store), then
  one search, which applies the lexical index's queued writes: the in-memory
  figure of ``journal.py`` and its first search.
* ``upsert-loop``: the same without the search, but with the index's queued
  writes applied (the postings' log, which the first search turns into
  arrays, left alone): what ``journal.py``'s upserts/s times.
* ``lexicon``: the lexical index alone (``LexicalIndex.put`` of items with
  ids given, then a flush), the lexicon's share of an upsert.
* ``replace``: the lexical index after it holds the notes, each note put
  again with new text (the path of a replaced document: its old words taken
  out of the counts).
* ``add_many``: durable ``Memory.add_many`` of the notes, 1,000 a call, no
  embedder, on the SQLite journal (``Memory``'s default).
* ``add_many_journal``: the same with ``benchmarks/_common.memory_item``, the
  items ``journal.py``'s ``add_many`` row writes (ids given, a tenant tag).
* ``upsert_many``: ``Store.upsert_many`` of those items, 1,000 a call, on a
  ``SqliteJournal`` (durability ``"full"``).
* ``batch``: ``Store.upsert`` of each of them inside ``with store.batch():``,
  1,000 a block, on the same journal: ``journal.py``'s batched writes.

Usage (needs ``valgrind``, Debian's package)::

    python benchmarks/write_instructions.py                       # --part upsert, 5,000 notes
    python benchmarks/write_instructions.py --part lexicon,add_many --notes 2000
    python benchmarks/write_instructions.py --part all            # every part
    python benchmarks/write_instructions.py --root ../other-checkout   # another tree's code
    MEMSTORE_PURE_PYTHON=1 python benchmarks/write_instructions.py   # the pure loops

``benchmarks/store_instructions.py`` is this harness under its old command
line (``--what upsert,add_many,add_many_journal --items N``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = (
    "upsert",
    "upsert-loop",
    "lexicon",
    "replace",
    "add_many",
    "add_many_journal",
    "upsert_many",
    "batch",
)
BATCH = 1000
"""Items an ``add_many`` call writes."""


def _notes(total: int) -> list[object]:
    """The first ``total`` corpus notes as id-less ``Item`` s (the store mints the ids)."""
    from corpus import generate_corpus

    from memstore import Item

    return [
        Item(
            kind=x.kind,
            title=x.title,
            content=x.content,
            subject=x.subject,
            confidence=x.confidence,
            event_date=x.event_date,
        )
        for x in generate_corpus(total)
    ]


def _lexicon(part: str, warmup: int, n: int, total: int) -> None:
    """``lexicon`` and ``replace``: the lexical index alone, items with ids given."""
    from corpus import generate_corpus

    from memstore import Item
    from memstore._lexindex import LexicalIndex

    corpus = generate_corpus(warmup + total)

    def item(i: int, rev: int = 0) -> Item:
        x = corpus[i]
        content = x.content if not rev else f"{x.content} revised {rev}"
        return Item(
            id=f"n{i:07d}",
            kind=x.kind,
            title=x.title,
            content=content,
            subject=x.subject,
            confidence=x.confidence,
            event_date=x.event_date,
        )

    index = LexicalIndex()
    first = [item(i) for i in range(warmup + (total if part == "replace" else 0))]
    for it in first:
        index.put(it, False)
    index.flush()
    rev = 1 if part == "replace" else 0
    todo = [item(i, rev) for i in range(warmup, warmup + total)]  # built whatever n is
    for it in todo[:n]:
        index.put(it, False)
    index.flush()


def child(root: str, part: str, warmup: int, n: int, total: int) -> None:
    """Write ``warmup`` items, then ``n`` more (of ``total`` built either way), and exit.

    ``memstore`` is imported from ``root``; the corpus from beside this script.
    """
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, root)
    if part in ("lexicon", "replace"):
        _lexicon(part, warmup, n, total)
    elif part in ("upsert", "upsert-loop"):
        from memstore import Store

        items = _notes(warmup + total)  # the same items built whatever n is
        store = Store()
        for it in items[:warmup]:
            store.upsert(it)
        store.keyword_search("payment timeout")
        upsert = store.upsert
        for it in items[warmup : warmup + n]:
            upsert(it)
        if part == "upsert":
            store.keyword_search("payment timeout")
        else:  # the queue applied, the postings' log left for the first search
            store._lex.flush()
    elif part in ("upsert_many", "batch"):
        from _common import memory_item

        from memstore import Item, Store
        from memstore.journal import SqliteJournal

        items: list[Item] = [memory_item(i) for i in range(warmup + total)]
        store = Store()
        SqliteJournal(Path.cwd() / f"journal-{n}.db", durability="full").attach(store)

        def write(chunk: list[Item]) -> None:
            if part == "upsert_many":
                store.upsert_many(chunk)
                return
            with store.batch():
                for it in chunk:
                    store.upsert(it)

        for start in range(0, warmup, BATCH):
            write(items[start : min(start + BATCH, warmup)])
        for start in range(warmup, warmup + n, BATCH):
            write(items[start : min(start + BATCH, warmup + n)])
    else:
        from memstore import Memory

        if part == "add_many_journal":
            from _common import memory_item

            items = [memory_item(i) for i in range(warmup + total)]
        else:
            items = _notes(warmup + total)
        mem = Memory(Path.cwd() / f"memory-{n}", embedder=None)  # the parent's temporary folder
        for start in range(0, warmup, BATCH):
            mem.add_many(items[start : min(start + BATCH, warmup)])
        for start in range(warmup, warmup + n, BATCH):
            mem.add_many(items[start : min(start + BATCH, warmup + n)])
    sys.stdout.flush()
    os._exit(0)  # no close: the index saved at close is not a write's cost


def counts(root: Path, part: str, warmup: int, ns: list[int], keep: Path | None) -> list[int]:
    """Instructions of one child run under cachegrind for each of ``ns`` (run side by side)."""
    # One BLAS thread: OpenBLAS's idle workers spin, and cachegrind counts
    # their spinning (about 1k instructions an item that varied run to run).
    env = dict(
        os.environ,
        PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"),
        OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"),
    )
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for n in ns:
            out = (keep or Path(tmp)) / f"cachegrind.{part}.{n}.out"
            cmd = [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                str(root),
                part,
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
                raise RuntimeError(f"{part}: the child failed:\n{err.decode()[-3000:]}")
            summary = [ln for ln in out.read_text().splitlines() if ln.startswith("summary:")]
            found.append(int(summary[0].split()[1]))
        return found


def run(parts: list[str], notes: int, warmup: int, root: Path, keep: Path | None) -> None:
    """Count each of ``parts`` and print its instructions per item."""
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    for part in parts:
        if part not in PARTS:
            raise SystemExit(f"--part: {part!r} is not one of {', '.join(PARTS)}")
        without, with_writes = counts(root.resolve(), part, warmup, [0, notes], keep)
        per = (with_writes - without) / notes
        print(
            f"{part}: {with_writes:,} - {without:,} instructions = {per / 1000:.1f}k an item"
            f" ({notes:,} items)",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", default="upsert", help="comma-separated, or all: " + ", ".join(PARTS))
    ap.add_argument("--notes", "--items", type=int, default=5_000, help="writes counted")
    ap.add_argument("--warmup", type=int, default=1_000, help="writes before them")
    ap.add_argument("--keep", type=Path, help="keep the cachegrind files in this folder")
    ap.add_argument(
        "--root", type=Path, default=HERE.parent, help="the checkout to count (default: this one)"
    )
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        root, part, warmup, n, total = args.child
        child(root, part, int(warmup), int(n), int(total))
        return
    parts = list(PARTS) if args.part == "all" else args.part.split(",")
    run(parts, args.notes, args.warmup, args.root, args.keep)


if __name__ == "__main__":
    main()
