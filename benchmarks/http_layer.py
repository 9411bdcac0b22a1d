"""CPU time of the HTTP layer around a recall: the event loop's share, apart from the search.

``benchmarks/http.py`` reports what a whole recall costs the server; this
separates the part spent on the event loop's thread (HTTP parsing, the ASGI
middleware, the answer's encoding and writes, the hand-off to the search's
worker thread) from the search itself, on a store of 20 notes where the
search is small. Two measurements, each over ``--checkout``'s memstore:

``asgi``
    In process, no sockets: the app ``memstore serve`` runs (uvicorn's proxy
    headers middleware, :class:`~memstore.web.shutdown.ShutdownAnswer`,
    :func:`~memstore.protocol.app.create_app` with a tokens file, metrics on)
    called by 32 concurrent callers on uvloop; ``time.thread_time()`` of the
    loop's thread per request. Steady: the search runs on the batcher's
    thread and is not counted.
``server`` (with ``--wrk``, when ``wrk`` is installed)
    A real ``memstore serve`` on loopback driven by ``wrk`` (``-c 32``, the
    request ``--body``) for ``--seconds``; the server's CPU per request from
    ``/proc``, split by thread (user and system): the process's main thread
    runs the event loop, the others are workers (the batcher's thread runs
    the searches).

Repeat it and alternate checkouts: the machine's other load only adds::

    python benchmarks/http_layer.py --checkout ../main --wrk
    python benchmarks/http_layer.py --wrk
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/http.py, beside this script, would shadow the standard library's http package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
TOKEN = "bench-token"
BODY = '{"query": "what did Alice deploy?", "k": 10}'


def _load(name: str) -> Any:
    """A module of this folder, by its path (the folder is off ``sys.path``: see above)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CALLERS = 32


def make_store(data: Path) -> None:
    """20 one-chunk notes in one tenant, stored as ``POST /v1/ingest`` stores them."""
    memory_mod: Any = importlib.import_module("memstore")
    mapping: Any = importlib.import_module("memstore.protocol.mapping")
    with memory_mod.Memory(data, embedder="hash") as memory:
        for n in range(20):
            for item in mapping.episode_items(
                "bench",
                f"01J{n:023d}",
                f"fs/note{n}.md",
                f"# Note {n}\nAlice deployed service {n} on Friday after the review.\n",
                t_ref="2026-01-01T00:00:00+00:00",
                metadata={},
            ):
                memory.store.upsert(item)


def tokens_file(folder: Path) -> Path:
    path = folder / "tokens.json"
    path.write_text(json.dumps({TOKEN: {"tenant": "bench", "scopes": ["recall"]}}))
    return path


def asgi_cpu(data: Path, tokens: Path, requests: int, body: bytes) -> dict[str, Any]:
    """Loop-thread CPU microseconds per plain recall through the served ASGI stack."""
    import uvloop
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    memstore: Any = importlib.import_module("memstore")
    app_mod: Any = importlib.import_module("memstore.protocol.app")
    auth: Any = importlib.import_module("memstore.protocol.auth")
    errors: Any = importlib.import_module("memstore.protocol.errors")
    batching: Any = importlib.import_module("memstore.web.batching")
    shutdown: Any = importlib.import_module("memstore.web.shutdown")
    web_tokens: Any = importlib.import_module("memstore.web.tokens")
    memory = memstore.Memory(data, embedder="hash", hub=True)
    table = web_tokens.TokensFile(tokens, auth.TokenTable.from_json)
    app = app_mod.create_app(memory, tokens=table, rate_per_second=1e9, burst=10**9)
    served = ProxyHeadersMiddleware(
        shutdown.ShutdownAnswer(app, render=errors.render_refusal), trusted_hosts="127.0.0.1"
    )
    asgi = _load("_asgi_recall")
    statuses: list[bytes] = []

    async def one() -> None:
        statuses.append((await asgi.recall(served, body, TOKEN))[0])

    async def run() -> float:
        for _ in range(200):  # warm-up
            await one()
        each = requests // CALLERS

        async def caller() -> None:
            for _ in range(each):
                await one()

        t0 = time.thread_time()
        await asyncio.gather(*(caller() for _ in range(CALLERS)))
        return (time.thread_time() - t0) / (each * CALLERS)

    try:
        seconds = uvloop.run(run())
    finally:
        batching.close_batcher(app)
        memory.close()
    if set(statuses) != {b"200"}:
        raise RuntimeError(f"answers other than 200: {sorted(set(statuses))}")
    return {"requests": requests, "loop_thread_us": round(seconds * 1e6, 1)}


def _threads(pid: int) -> dict[str, tuple[str, int, int]]:
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        out[tid] = (name, int(fields[11]), int(fields[12]))
    return out


def _healthz(port: int) -> None:
    """GET /healthz answered 200."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        if not conn.recv(64).startswith(b"HTTP/1.1 200"):
            raise OSError("not answering yet")


def server_cpu(root: Path, data: Path, tokens: Path, seconds: int, body: str) -> dict[str, Any]:
    """``memstore serve`` under ``wrk -c 32``: requests/s and CPU per request by thread."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [sys.executable, "-m", "memstore.cli", "serve", "--data", str(data)]
    command += ["--embedder", "hash", "--port", str(port), "--tokens-file", str(tokens)]
    command += ["--rate-per-second", "1000000", "--rate-burst", "1000000"]
    proc = subprocess.Popen(command, cwd=root, env=env, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:  # answering, not only listening (the port is bound before the load)
            try:
                _healthz(port)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.2)
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
            lua.write(
                f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
                'wrk.headers["Content-Type"] = "application/json"\n'
                f'wrk.headers["Authorization"] = "Bearer {TOKEN}"\n'
            )
        url = f"http://127.0.0.1:{port}/v1/recall"
        wrk = ["wrk", "-t1", "-s", lua.name]
        subprocess.run([*wrk, "-c4", "-d2s", url], capture_output=True, check=True)  # warm-up
        before = _threads(proc.pid)
        out = subprocess.run(
            [*wrk, f"-c{CALLERS}", f"-d{seconds}s", url], capture_output=True, text=True, check=True
        ).stdout
        after = _threads(proc.pid)
        os.unlink(lua.name)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    lines = out.splitlines()
    done = int(next(line for line in lines if "requests in" in line).split()[0])
    if any("Non-2xx" in line for line in lines):
        raise RuntimeError(f"answers other than 2xx:\n{out}")
    tick = os.sysconf("SC_CLK_TCK")
    threads: dict[str, dict[str, float]] = {}
    for tid, (name, user, system) in after.items():
        _, user0, system0 = before.get(tid, (name, 0, 0))
        if user - user0 + system - system0 > 0:
            us = 1e6 / tick / done
            role = "event loop" if tid == str(proc.pid) else "worker"  # the batcher's, mostly
            threads[f"{role} {tid}"] = {
                "user_us": round((user - user0) * us, 1),
                "system_us": round((system - system0) * us, 1),
            }
    return {"requests": done, "per_s": round(done / seconds, 1), "threads": threads}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure")
    ap.add_argument("--requests", type=int, default=20_000, help="in-process recalls timed")
    ap.add_argument("--wrk", action="store_true", help="also a real server under wrk")
    ap.add_argument("--seconds", type=int, default=10, help="wrk's duration")
    ap.add_argument("--body", default=BODY, help="the recall request's JSON body")
    ap.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    ap.add_argument("--smoke", action="store_true", help="a few in-process recalls, no wrk")
    args = ap.parse_args()
    if args.smoke:
        args.requests, args.wrk = 2 * CALLERS, False
    root = args.checkout.resolve()
    sys.path.insert(0, str(root))
    memstore: Any = importlib.import_module("memstore")
    print(f"memstore from {memstore.__file__}", file=sys.stderr)
    record: dict[str, Any] = {"checkout": str(root), "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = folder / "data"
        make_store(data)
        tokens = tokens_file(folder)
        if args.wrk:
            if shutil.which("wrk") is None:
                print("wrk is not installed: no server measurement", file=sys.stderr)
            else:
                record["server"] = server_cpu(
                    root, folder / "data", tokens, args.seconds, args.body
                )
        record["asgi"] = asgi_cpu(data, tokens, args.requests, args.body.encode())
    record["load_after"] = os.getloadavg()
    text = json.dumps(record, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
