"""CPU of one HTTP recall by thread, in process: the served ASGI stack, 32 callers, no sockets.

``benchmarks/recall_cpu.py`` times a recall's search alone (one thread, the
vectors embedded beforehand); ``benchmarks/http_layer.py`` times the event
loop's share on a 20-note store. This runs the whole server path over a copy
of the folder ``http.py --data-cache DIR`` keeps (``DIR/hash-10000``; ``--embedder local``:
``DIR/local-10000``, the local model's): the app
``memstore serve`` runs (uvicorn's proxy headers middleware,
:class:`~memstore.web.shutdown.ShutdownAnswer`,
:func:`~memstore.protocol.app.create_app` with a tokens file, metrics on) on
uvloop, ``--callers`` concurrent callers each sending the next of the queries
``http.py --queries 20000`` draws from (distinct, in order: most recalls meet a
token the lexicon has not matched yet). After ``--skip`` untimed recalls,
``--count`` are timed: the process's CPU a recall, and each thread's (the
event loop's, the batcher's worker, the embedding thread), from
``/proc/self/task``. The threads share one GIL: their sum, not any one of them,
is what bounds requests a second when queries rarely repeat.

``--digest`` instead asks every distinct query once and prints a digest of
every answer's status, headers and body bytes: two checkouts that answer alike
print the same digest. ``--checkout DIR`` measures another checkout's memstore::

    python benchmarks/http.py --embedders hash --data-cache /tmp/cache --queries 20000
    python benchmarks/recall_threads.py --data-cache /tmp/cache
    python benchmarks/recall_threads.py --data-cache /tmp/cache --checkout ../main
    python benchmarks/recall_threads.py --data-cache /tmp/cache --digest
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/http.py, beside this script, would shadow the standard library's http package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
TOKEN = "bench-token"
TENANT = "bench"


def thread_ticks() -> dict[str, int]:
    """CPU clock ticks (user + system) of this process's threads so far, by thread name."""
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    out: dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:  # the thread ended
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = names.get(tid, "other")
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data-cache", type=Path, required=True, help="http.py's --data-cache")
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=20_000, help="http.py's --queries")
    ap.add_argument("--skip", type=int, default=500, help="untimed recalls first")
    ap.add_argument("--count", type=int, default=3000, help="timed recalls")
    ap.add_argument("--callers", type=int, default=32, help="concurrent callers")
    ap.add_argument("--digest", action="store_true", help="every query once: a digest of answers")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure")
    ap.add_argument(
        "--embedder",
        choices=("hash", "local"),
        default="hash",
        help="the data cache's folder (DIR/EMBEDDER-CHUNKS) and the server's embedder",
    )
    args = ap.parse_args()
    root = args.checkout.resolve()
    sys.path.insert(0, str(root))
    import uvloop
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    memstore: Any = importlib.import_module("memstore")
    app_mod: Any = importlib.import_module("memstore.protocol.app")
    auth: Any = importlib.import_module("memstore.protocol.auth")
    errors: Any = importlib.import_module("memstore.protocol.errors")
    batching: Any = importlib.import_module("memstore.web.batching")
    shutdown: Any = importlib.import_module("memstore.web.shutdown")
    web_tokens: Any = importlib.import_module("memstore.web.tokens")
    sys.path.insert(1, str(root / "benchmarks"))
    corpus: Any = importlib.import_module("corpus")
    asgi: Any = importlib.import_module("_asgi_recall")
    print(f"memstore from {memstore.__file__}", file=sys.stderr)
    notes = corpus.generate_corpus(args.chunks)
    asked = [q.text for q in corpus.make_queries(notes, n=args.queries)]
    distinct = list(dict.fromkeys(asked))
    kept = args.data_cache / f"{args.embedder}-{args.chunks}"
    if not kept.exists():
        raise SystemExit(f"no {kept}: run benchmarks/http.py --data-cache first")
    answers: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(kept, data, ignore=shutil.ignore_patterns("*.lock"))
        tokens = Path(tmp) / "tokens.json"
        tokens.write_text(json.dumps({TOKEN: {"tenant": TENANT, "scopes": ["recall"]}}))
        memory = memstore.Memory(data, embedder=args.embedder, hub=True)
        table = web_tokens.TokensFile(tokens, auth.TokenTable.from_json)
        app = app_mod.create_app(memory, tokens=table, rate_per_second=1e9, burst=10**9)
        served = ProxyHeadersMiddleware(
            shutdown.ShutdownAnswer(app, render=errors.render_refusal), trusted_hosts="127.0.0.1"
        )

        async def one(query: str) -> None:
            body = json.dumps({"query": query, "k": 10}).encode()
            parts: list[bytes] = await asgi.recall(served, body, TOKEN)
            if args.digest:
                answers[query] = hashlib.sha256(b"\n".join(parts)).hexdigest()

        async def drive(queries: list[str]) -> None:
            it = iter(queries)

            async def caller() -> None:
                for query in it:
                    await one(query)

            await asyncio.gather(*(caller() for _ in range(args.callers)))

        async def run() -> str | None:
            if args.digest:
                await drive(distinct)
                return None
            queries = distinct[: args.skip + args.count]
            await drive(queries[: args.skip])
            timed = queries[args.skip :]
            ticks0, cpu0 = thread_ticks(), time.process_time()
            await drive(timed)
            cpu, ticks = time.process_time() - cpu0, thread_ticks()
            per_tick_ms = 1000 / os.sysconf("SC_CLK_TCK") / len(timed)
            threads = ", ".join(
                f"{name} {(n - ticks0.get(name, 0)) * per_tick_ms:.3f}"
                for name, n in sorted(ticks.items())
                if n != ticks0.get(name, 0)
            )
            return f"{cpu * 1000 / len(timed):.3f} ms CPU a recall ({len(timed)}); {threads}"

        try:
            line = uvloop.run(run())
        finally:
            batching.close_batcher(app)
            memory.close()
    if args.digest:
        h = hashlib.sha256()
        for query in distinct:
            h.update(query.encode() + b"\0" + answers[query].encode())
        print(f"{len(distinct)} distinct queries, answers digest {h.hexdigest()}")
    else:
        print(line)


if __name__ == "__main__":
    main()
