"""Cold lexical token matching on LoCoMo's questions: CPU per question, and the matches.

A write makes every cached token match stale, so in an agent whose writes
interleave with its queries most query tokens are matched *cold*: the
Lexicon expands the token over its vocabulary (exact, prefix, substring,
stem, one-edit and joined-word matches, the fuzzy channel) and gathers the
matched documents. This builds one store per LoCoMo conversation (each turn
an item, as ``locomo.py`` does), then, ``--repeats`` times, clears the token
caches and matches every question's tokens (a token repeated across a
conversation's questions is a cache hit after its first match, as between
two writes). It reports CPU time (``time.process_time``) per question.

``--dump PATH`` pickles every distinct question token's match (slots,
levels, title slots and levels, ``fuzzy_ok``, with and without the fuzzy
channel) and its vocabulary expansion (levels, joined pairs), so two
checkouts can be compared for identical results::

    python benchmarks/cold_match.py --data /path/to/locomo/dev.json --dump /tmp/new.pkl
    python benchmarks/cold_match.py --data ... --dump /tmp/old.pkl --checkout ../old
    python -c "import pickle; print(pickle.load(open('/tmp/old.pkl', 'rb')) == \\
        pickle.load(open('/tmp/new.pkl', 'rb')))"

``--checkout DIR`` measures another checkout's memstore (an A/B run from
one script: ``--checkout /path/to/main``); by default, this one's.
"""

from __future__ import annotations

import argparse
import importlib
import pickle
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    ap.add_argument("--repeats", type=int, default=5, help="timed cold passes")
    ap.add_argument("--dump", type=Path, help="pickle every token's match here instead")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure")
    args = ap.parse_args()
    root = args.checkout.resolve()
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    load: Any = importlib.import_module("_locomo_data").load
    modes: Any = importlib.import_module("_locomo_modes")
    text: Any = importlib.import_module("memstore.text")
    kw_tokens, normalize_query = text.kw_tokens, text.normalize_query
    print(f"memstore from {importlib.import_module('memstore').__file__}", file=sys.stderr)
    convs, _ = load(args.data, None)
    built = modes.Built()
    modes.build_stores(convs, "transcript", built)
    lexicons = {c.sample_id: built.stores[c.sample_id]._lex.lexicon for c in convs}
    jobs = [
        (lexicons[c.sample_id], kw_tokens(normalize_query(q.text)))
        for c in convs
        for q in c.questions
    ]
    if args.dump:
        out = []
        for c in convs:
            lex = lexicons[c.sample_id]
            toks = sorted({t for q in c.questions for t in kw_tokens(normalize_query(q.text))})
            for fuzzy in (True, False):
                lex.clear_caches()
                for t in toks:
                    m = lex.match_token(t, fuzzy=fuzzy)
                    ex = lex._expand(t)
                    out.append(
                        (
                            c.sample_id,
                            t,
                            fuzzy,
                            m.slots.tolist(),
                            m.levels.tolist(),
                            m.title_slots.tolist(),
                            m.title_levels.tolist(),
                            m.fuzzy_ok,
                            sorted(ex.pairs),
                            sorted(ex.levels.items()),
                        )
                    )
        with args.dump.open("wb") as f:
            pickle.dump(out, f)
        print(f"{len(out)} token matches written to {args.dump}")
        return
    for lex, toks in jobs:  # the first read builds the vocabulary tables: not timed
        for t in toks:
            lex.match_token(t)
    for _ in range(args.repeats):
        for lex in lexicons.values():
            lex.clear_caches()
        t0 = time.process_time()
        for lex, toks in jobs:
            for t in toks:
                lex.match_token(t)
        cpu = time.process_time() - t0
        print(f"cold: {cpu / len(jobs) * 1e3:.3f} ms CPU/question ({len(jobs)} questions)")


if __name__ == "__main__":
    main()
