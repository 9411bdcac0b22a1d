"""CPU time of one HTTP recall's search, in process: the server's staged recalls, no HTTP.

``benchmarks/http.py`` measures a real server; its CPU per request mixes the
search with the HTTP stack and the threads' hand-offs, and moves with the
machine's other load. This runs the server's own search steps
(:meth:`memstore.protocol.verbs.Verbs.prepare_recall`, its ``start()`` then
``finish(vec)``, the query's vector embedded beforehand as the batcher
would) over a copy of the folder ``http.py --data-cache DIR`` keeps
(``DIR/hash-10000``), one thread, each query once: the queries ``http.py
--queries 20000`` draws from, distinct, in order, so that as in that run
most recalls meet a token or two the lexicon has not matched yet.

``--skip`` queries warm the process up, then ``--count`` are timed (thread
CPU time, all of it: a compiled step that releases the GIL counts too).
Repeat it and take the least: the machine's other load only adds.
``--match-cpu`` also reports the part spent in ``Lexicon.match_token`` (a
query token's matches, most of them cold here; the timing wrapper adds about a
microsecond a call). ``--digest`` instead runs every distinct query once and prints a digest of
all their hits (ids, scores, relevances, stamps): two checkouts that answer
alike print the same digest. ``--checkout DIR`` measures another checkout's
memstore (an A/B run from one script)::

    python benchmarks/http.py --embedders hash --data-cache /tmp/cache --queries 20000
    python benchmarks/recall_cpu.py --data-cache /tmp/cache
    python benchmarks/recall_cpu.py --data-cache /tmp/cache --checkout ../main
    python benchmarks/recall_cpu.py --data-cache /tmp/cache --digest
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TENANT = "bench"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data-cache", type=Path, required=True, help="http.py's --data-cache")
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=20_000, help="http.py's --queries")
    ap.add_argument("--skip", type=int, default=500, help="untimed recalls first")
    ap.add_argument("--count", type=int, default=3000, help="timed recalls")
    ap.add_argument("--digest", action="store_true", help="every query once: a digest of hits")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure")
    ap.add_argument(
        "--match-cpu", action="store_true", help="also the CPU of Lexicon.match_token alone"
    )
    args = ap.parse_args()
    root = args.checkout.resolve()
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    corpus: Any = importlib.import_module("corpus")
    memstore: Any = importlib.import_module("memstore")
    verbs: Any = importlib.import_module("memstore.protocol.verbs")
    models: Any = importlib.import_module("memstore.protocol.models")
    print(f"memstore from {memstore.__file__}", file=sys.stderr)
    matching = [0.0]  # thread CPU seconds in Lexicon.match_token (--match-cpu)
    if args.match_cpu:
        lexicon: Any = importlib.import_module("memstore.lexical").Lexicon
        match_token = lexicon.match_token

        def timed_match(self: Any, tok: str, *, fuzzy: bool = True) -> Any:
            t0 = time.thread_time()
            try:
                return match_token(self, tok, fuzzy=fuzzy)
            finally:
                matching[0] += time.thread_time() - t0

        lexicon.match_token = timed_match
    notes = corpus.generate_corpus(args.chunks)
    asked = [q.text for q in corpus.make_queries(notes, n=args.queries)]
    distinct = list(dict.fromkeys(asked))
    kept = args.data_cache / f"hash-{args.chunks}"
    if not kept.exists():
        raise SystemExit(f"no {kept}: run benchmarks/http.py --data-cache first")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(kept, data, ignore=shutil.ignore_patterns("*.lock"))
        with memstore.Memory(data, embedder="hash", hub=True) as memory:
            server = verbs.Verbs(memory)
            queries = distinct if args.digest else distinct[: args.skip + args.count]
            vectors: dict[str, Any] = {}
            for start in range(0, len(queries), 500):  # embed_queries takes 1,000 at most
                part = queries[start : start + 500]
                vectors.update(zip(part, memory.embed_queries(part), strict=True))

            def recall(query: str) -> list[dict[str, Any]]:
                request = models.RecallRequest(query=query, k=10)
                stage = server.prepare_recall(TENANT, request).start()
                hits: list[dict[str, Any]] = stage.finish(
                    vectors[query] if stage.wants_vector else None
                )
                return hits

            if args.digest:
                h = hashlib.sha256()
                for q in queries:
                    hits = recall(q)
                    row = [(x["id"], x["score"], x["relevance"], x["valid_from"]) for x in hits]
                    h.update(json.dumps([q, row]).encode())
                print(f"{len(queries)} distinct queries, hits digest {h.hexdigest()}")
                return
            for q in queries[: args.skip]:
                recall(q)
            timed = queries[args.skip :]
            matching[0] = 0.0
            t0 = time.thread_time()
            for q in timed:
                recall(q)
            cpu = time.thread_time() - t0
            print(f"{cpu * 1000 / len(timed):.3f} ms CPU a recall ({len(timed)} recalls)")
            if args.match_cpu:
                print(f"{matching[0] * 1000 / len(timed):.3f} ms of it in Lexicon.match_token")


if __name__ == "__main__":
    main()
