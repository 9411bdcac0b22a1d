"""Instructions a write costs, counted by cachegrind: a figure a busy machine does not move.

Timings on a machine shared with other work swing by more than a change of a
tenth; instruction counts do not. This runs a child process twice under
``valgrind --tool=cachegrind --cache-sim=no`` (``PYTHONHASHSEED=0``): once
writing ``--notes`` notes of :mod:`corpus` after a warm-up, once doing only
the warm-up (the interpreter's start, the imports, the corpus), and prints the
difference per note.

``--part upsert``: ``Store.upsert`` of each note (ids minted by the store),
then one search, which applies the lexical index's queued writes: the
in-memory figure of ``journal.py`` and its first search. ``--part upsert-loop``: the
same without the search, but with the index's queued writes applied (the postings'
log, which the first search turns into arrays, left alone). ``--part lexicon``: the lexical index
alone (``LexicalIndex.put`` of items with ids given, then a flush), the
lexicon's share of that. ``--part replace``: the lexical index after it holds
the notes, each note put again with new text (the path of a replaced document:
its old words taken out of the counts).

Usage::

    python benchmarks/write_instructions.py [--notes 5000] [--part upsert|lexicon|replace]
    MEMSTORE_PURE_PYTHON=1 python benchmarks/write_instructions.py   # the pure loops
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARMUP = 1_000


def _child(part: str, notes: int, write: bool) -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corpus import generate_corpus

    from memstore import Item, Store
    from memstore._lexindex import LexicalIndex

    corpus = generate_corpus(WARMUP + notes)

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

    if part in ("upsert", "upsert-loop"):
        built = [
            Item(
                kind=x.kind,
                title=x.title,
                content=x.content,
                subject=x.subject,
                confidence=x.confidence,
                event_date=x.event_date,
            )
            for x in corpus
        ]
        store = Store()
        for it in built[:WARMUP]:
            store.upsert(it)
        store.keyword_search("payment timeout")
        if write:
            for it in built[WARMUP:]:
                store.upsert(it)
            if part == "upsert":
                store.keyword_search("payment timeout")
            else:  # the queue applied, the postings' log left for the first search
                store._lex.flush()
        return
    index = LexicalIndex()
    first = [item(i) for i in range(WARMUP + (notes if part == "replace" else 0))]
    for it in first:
        index.put(it, False)
    index.flush()
    if part == "lexicon":
        todo = [item(i) for i in range(WARMUP, WARMUP + notes)]
    else:
        todo = [item(i, 1) for i in range(WARMUP, WARMUP + notes)]
    if write:
        for it in todo:
            index.put(it, False)
        index.flush()


def _count(part: str, notes: int, write: bool) -> int:
    cmd = [
        "valgrind",
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
        "--part",
        part,
        "--notes",
        str(notes),
    ]
    if not write:
        cmd.append("--no-write")
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{out}")
    return int(found[1].replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--notes", type=int, default=5_000)
    ap.add_argument(
        "--part", choices=("upsert", "upsert-loop", "lexicon", "replace"), default="upsert"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.part, args.notes, not args.no_write)
        return
    with_writes = _count(args.part, args.notes, True)
    without = _count(args.part, args.notes, False)
    per = (with_writes - without) / args.notes
    print(
        f"{args.part}: {with_writes:,} - {without:,} instructions = {per / 1000:.1f}k a note"
        f" ({args.notes:,} notes)"
    )


if __name__ == "__main__":
    main()
