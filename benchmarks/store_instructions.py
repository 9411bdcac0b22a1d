"""Instructions per write, counted: the old command line of ``write_instructions.py``.

The store's write workloads (``upsert``, ``add_many``, ``add_many_journal``)
are parts of :mod:`write_instructions` now, one harness for every write
count (see its docstring for what each part writes). This keeps the command
line the store's counts were first taken with::

    python benchmarks/store_instructions.py                 # all three, 5,000 items
    python benchmarks/store_instructions.py --what upsert --items 2000
    python benchmarks/store_instructions.py --root ../other-checkout   # another tree's code

which is ``python benchmarks/write_instructions.py --part
upsert,add_many,add_many_journal`` (and ``--notes`` for ``--items``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from write_instructions import HERE, run

WHAT = ("upsert", "add_many", "add_many_journal")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--what", default=",".join(WHAT), help="comma-separated: " + ", ".join(WHAT))
    ap.add_argument("--items", type=int, default=5000, help="writes counted (default 5000)")
    ap.add_argument("--warmup", type=int, default=1000, help="writes before them (default 1000)")
    ap.add_argument("--keep", type=Path, help="keep the cachegrind files in this folder")
    ap.add_argument(
        "--root", type=Path, default=HERE.parent, help="the checkout to count (default: this one)"
    )
    args = ap.parse_args()
    parts = args.what.split(",")
    for part in parts:
        if part not in WHAT:
            raise SystemExit(f"--what: {part!r} is not one of {', '.join(WHAT)}")
    run(parts, args.items, args.warmup, args.root, args.keep)


if __name__ == "__main__":
    main()
