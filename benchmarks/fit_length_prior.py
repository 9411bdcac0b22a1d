"""Fit the length prior's weight (``SearchConfig.length_weight``) on LoCoMo, leave-one-out.

The length prior (``info_prior="length"``) adds ``c * ln(1 + words)`` to
every fused score. This runs the benchmark's ``hybrid`` mode (spreading
along ``precedes``, score fusion, every default lever) once per weight of the
grid fixed before measuring (``_locomo_prior.LENGTH_GRID``; ``c = 0`` is the
engine, the prior off), then applies the pre-registered fit of
docs/benchmarks.md, "A length prior fitted leave-one-out": each conversation
is scored with the weight of the highest recall@5 summed over the other
conversations (ties: MRR, then the smaller weight). It prints each weight's
figures, the weight picked per conversation, the LOO tables the adoption rule
reads, and the weight the same rule picks on all conversations (the one
``memstore.search._prior.LENGTH_WEIGHT`` holds).

Usage::

    python benchmarks/fit_length_prior.py --data ../shared/datasets/locomo/dev.json \\
        [--cache-dir /tmp/locomo-cache] [--embedder local|hash] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _locomo_data import TURN_RELATION, load
from _locomo_embed import CachingEmbedder, make_embedder
from _locomo_metrics import ModeResult, run_mode
from _locomo_modes import Built, build_cells, build_stores, make_search, make_searchers
from _locomo_prior import length_fit, length_table

KS = (5, 10, 20)
"""As ``locomo.py``'s defaults: each k its own call, the first hit (MRR) within 20."""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--embedder", choices=("local", "hash"), default="local")
    p.add_argument("--out", type=Path, help="also write the per-question records as JSON")
    args = p.parse_args(argv)
    convs, _ = load(args.data, None)
    built = Built()
    build_stores(convs, "transcript", built)
    emb = CachingEmbedder(make_embedder(args.embedder), args.cache_dir)
    build_cells(convs, emb, built)
    emb.save()
    questions = [q for c in convs for q in c.questions]
    base: dict[str, Any] = {"spread_relations": (TURN_RELATION,), "fusion": "score"}

    def run(fields: dict[str, Any]) -> ModeResult:
        print(f"running hybrid with {fields}", file=sys.stderr, flush=True)
        make_searchers(convs, built, "hybrid", base | fields)
        return run_mode("hybrid", make_search("hybrid", built, emb), questions, KS)[0]

    whole = run({"info_prior": "off"}).per_question
    choice, picks, every, runs = length_fit(questions, whole, run)
    print(length_table(questions, whole, choice, picks, every, runs))
    if args.out is not None:
        args.out.write_text(json.dumps({"picks": picks, "fitted_on_all": every, "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
