"""The served ASGI stack around a plain recall, on one thread: the search replaced by fixed hits.

``benchmarks/http_layer.py`` times the event loop's thread while the batcher's
thread searches beside it: its figures move with the machine's load and with
the two threads' contention for the GIL. This runs the same stack (uvicorn's
proxy headers middleware, :class:`~memstore.web.shutdown.ShutdownAnswer`,
:func:`~memstore.protocol.app.create_app` with a tokens file, metrics on, 32
concurrent callers on uvloop, no sockets) with the fast path's search replaced
by one recall's hits, handed back a loop turn later (as the batcher's worker
hands them back): every instruction counted is the HTTP layer's, and the
process has one busy thread. Its CPU a request still moves with a shared
machine's load (by a third between runs of the same code on a busy 2-core
VM); its instructions a request, under callgrind, do not (0.4%)::

    python benchmarks/asgi_stack.py --save-hits /tmp/hits.json
    python benchmarks/asgi_stack.py --checkout ../main --hits /tmp/hits.json --digest

Under ``valgrind --tool=callgrind`` (3.19 stops at an AVX-512 instruction in
hnswlib's module init), ``--no-hnswlib`` puts a stand-in module in its place
and serves an empty store (the hits come from ``--hits``); the instructions a
request are those of a run with ``--requests N`` less those of one with
``--requests 0`` (the same start-up and warm-up), divided by N::

    valgrind --tool=callgrind python benchmarks/asgi_stack.py --no-hnswlib \\
        --hits /tmp/hits.json --requests 1600
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import importlib.util
import json
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/http.py, beside this script, would shadow the standard library's http package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
CALLERS = 32
WARMUP = 200


def _without_hnswlib() -> None:
    """A stand-in ``hnswlib`` whose index cannot be made (an empty store makes none)."""
    fake = types.ModuleType("hnswlib")

    class Index:
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise RuntimeError("no hnswlib here (--no-hnswlib)")

    fake.Index = Index  # type: ignore[attr-defined]
    sys.modules["hnswlib"] = fake


def run(args: argparse.Namespace) -> dict[str, Any]:
    """CPU a request (and a digest of every answer) through the served stack."""
    spec = importlib.util.spec_from_file_location("http_layer", ROOT / "benchmarks/http_layer.py")
    assert spec is not None and spec.loader is not None
    layer_mod: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layer_mod)  # its store, token and request body
    memstore: Any = importlib.import_module("memstore")
    app_mod: Any = importlib.import_module("memstore.protocol.app")
    auth: Any = importlib.import_module("memstore.protocol.auth")
    errors: Any = importlib.import_module("memstore.protocol.errors")
    fastpath: Any = importlib.import_module("memstore.protocol.fastpath")
    batching: Any = importlib.import_module("memstore.web.batching")
    shutdown: Any = importlib.import_module("memstore.web.shutdown")
    web_tokens: Any = importlib.import_module("memstore.web.tokens")
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    body = layer_mod.BODY.encode()
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if args.hits is None:
            layer_mod.make_store(folder / "data")
        memory = memstore.Memory(folder / "data", embedder="hash", hub=True)
        table = web_tokens.TokensFile(layer_mod.tokens_file(folder), auth.TokenTable.from_json)
        app = app_mod.create_app(memory, tokens=table, rate_per_second=1e9, burst=10**9)
        served = ProxyHeadersMiddleware(
            shutdown.ShutdownAnswer(app, render=errors.render_refusal), trusted_hosts="127.0.0.1"
        )
        asgi = layer_mod._load("_asgi_recall")

        async def one() -> bytes:
            parts: list[bytes] = await asgi.recall(served, body, layer_mod.TOKEN)
            if args.digest:
                digest.update(b"\n".join(parts))
            return parts[-1]

        async def timed() -> float:
            answer = await one()  # a real recall (or none, over an empty store); builds the stack
            hits = json.loads(answer) if args.hits is None else json.loads(args.hits.read_text())
            if args.save_hits is not None:
                args.save_hits.write_text(json.dumps(hits))
            node = app.middleware_stack
            while not isinstance(node, fastpath.RecallFastPath):
                node = node.app
            loop = asyncio.get_running_loop()

            async def fixed(run: Any) -> Any:  # the worker's hand-back: one loop turn later
                done = loop.create_future()
                loop.call_soon(done.set_result, hits)
                return await done

            node.answer = fixed
            for _ in range(WARMUP):
                await one()
            each = args.requests // CALLERS

            async def caller() -> None:
                for _ in range(each):
                    await one()

            cpu = time.process_time()
            await asyncio.gather(*(caller() for _ in range(CALLERS)))
            return (time.process_time() - cpu) / max(1, each * CALLERS)

        import uvloop

        try:
            seconds = uvloop.run(timed())
        finally:
            batching.close_batcher(app)
            memory.close()
    out = {"requests": args.requests // CALLERS * CALLERS, "cpu_us": round(seconds * 1e6, 1)}
    if args.digest:
        out["digest"] = digest.hexdigest()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure")
    ap.add_argument("--requests", type=int, default=20_000, help="timed requests")
    ap.add_argument("--hits", type=Path, default=None, help="the answer's hits (JSON)")
    ap.add_argument("--save-hits", type=Path, default=None, help="write the hits used here")
    ap.add_argument("--no-hnswlib", action="store_true", help="for valgrind: see above")
    ap.add_argument("--digest", action="store_true", help="a digest of every answer")
    args = ap.parse_args()
    if args.no_hnswlib:
        if args.hits is None:
            raise SystemExit("--no-hnswlib serves an empty store: give --hits")
        _without_hnswlib()
    root = args.checkout.resolve()
    sys.path.insert(0, str(root))
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
