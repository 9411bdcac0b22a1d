"""HTTP server benchmark: recall and ingest requests/s and latency under concurrent load.

For each embedder (``hash``, and ``local`` when the model is installed):

1. a data folder is preloaded with ``--chunks`` chunks (one-chunk episodes: the
   synthetic notes of the lexical benchmark, in one tenant) through :class:`memstore.Memory` and the
   adapter's own mapping, exactly as POST /v1/ingest would store them;
2. a real ``memstore serve`` subprocess is started on it (loopback, its rate
   limit raised out of the way: this phase measures the server, not the limiter);
3. a bounded load generator (``--concurrency`` connections, HTTP/1.1
   keep-alive, a minimal asyncio client so that the client costs little of
   the shared CPU) sends, after a warm-up (with ``--warm-queries``, every
   distinct query once first, so that no measured query is the first of its
   kind: the lexicon caches a token's expansion), ``recall`` requests for
   ``--seconds``, ``recall`` from one connection for half as long (the
   latency of an unloaded server), then ``ingest`` requests (two-chunk
   episodes) for ``--seconds``. Reported: completed requests/s, p50/p99 latency (time from
   sending a request to its whole answer), errors (any status but 200), the
   server process's CPU time per request (all threads: steadier than req/s when
   other programs share the machine), and this process's (the load generator's)
   CPU time per request: the share of the machine the client takes from the
   server when both run on it. The latency includes the client's own event loop
   (the time an answer waits in the socket for its coroutine): per-request
   timestamps taken in the server put that at 1-2 ms on average and a few ms for
   the slowest requests, with 32 connections at ~0.15 ms of client CPU a request.

Then one **rate-limit** check with the server's default limits (60 rps, burst
120): ``--concurrency`` connections over 4 tenants send as fast as they can;
no tenant may get more requests admitted than ``burst + rate x elapsed``, and
every refusal must be a 429 with Retry-After.

Results go to a JSON file and a markdown report (PASS/MISS per target) to
stdout; progress to stderr. The exit status is 0 whether targets pass or not.

Usage::

    python benchmarks/http.py [--smoke] [--chunks 10000] [--seconds 10] [--out PATH]
        [--data-cache DIR] [--warm-queries] [--queries N]

The recall phases draw their queries at random from ``--queries`` (500)
generated ones, so most requests repeat a query asked before: the server's
query cache (``CellStore(query_cache=...)``, docs/vector.md) then embeds each
distinct query once. ``--queries 20000`` makes repeats rare.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
from _common import TargetResult, git_commit, log, percentile
from _common import cpu_model as _cpu_model
from _common import fmt as _fmt
from _common import status as _status
from corpus import generate_corpus, make_queries

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memstore import Memory  # noqa: E402
from memstore.protocol.mapping import episode_items  # noqa: E402

TOKEN = "bench-token"
TENANT = "bench"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "http.json"


# ----------------------------------------------------------------------- corpus


def preload(data: Path, embedder: str, chunks: int, n_queries: int = 500) -> list[str]:
    """Store ``chunks`` one-chunk episodes in ``data``; the queries to ask of them.

    The notes and queries of the lexical benchmark (:mod:`corpus`): each note
    is an episode ``# <title>\\n<content>`` (one chunk under one heading), the
    queries its mix of exact, typo, miss and multi-word questions.
    """
    notes = generate_corpus(chunks)
    with Memory(data, embedder=embedder) as memory:
        batch = 500
        for start in range(0, chunks, batch):
            with memory.store.batch():
                for n in range(start, min(start + batch, chunks)):
                    note = notes[n]
                    for item in episode_items(
                        TENANT,
                        f"01J{n:023d}",
                        f"bench:fs/{note.subject}/note{n}.md",
                        f"# {note.title}\n{note.content}\n",
                        t_ref="2026-01-01T00:00:00+00:00",
                        metadata={"kind": note.kind, "n": n},
                    ):
                        memory.store.upsert(item)
            log(f"  preloaded {min(start + batch, chunks)}/{chunks}")
    return queries_of(notes, n_queries)


def queries_of(notes: list[Any], n: int = 500) -> list[str]:
    """The ``n`` recall queries asked of a corpus (the lexical benchmark's mix)."""
    return [q.text for q in make_queries(notes, n=n)]


def preload_cached(
    data: Path, embedder: str, chunks: int, cache: Path | None, n_queries: int = 500
) -> list[str]:
    """:func:`preload` into ``data``, or a copy of the folder a previous run kept in ``cache``.

    The server writes to its folder (the ingest phase), so each run gets a
    fresh copy; the cached folder itself is only ever read.
    """
    if cache is None:
        return preload(data, embedder, chunks, n_queries)
    kept = cache / f"{embedder}-{chunks}"
    if not kept.exists():
        partial = cache / f"{embedder}-{chunks}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        preload(partial, embedder, chunks)
        partial.rename(kept)
    else:
        log(f"  copying the preloaded folder {kept}")
    shutil.copytree(kept, data, ignore=shutil.ignore_patterns("*.lock"))
    return queries_of(generate_corpus(chunks), n_queries)


# ------------------------------------------------------------------ the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_server(data: Path, embedder: str, tokens: Path, *extra: str) -> tuple[Any, int]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log_file = open(data.parent / f"serve-{port}.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memstore.cli",
            "serve",
            "--data",
            str(data.resolve()),
            "--embedder",
            embedder,
            "--port",
            str(port),
            "--tokens-file",
            str(tokens.resolve()),
            *extra,
        ],
        # ``-m`` puts the working directory first on sys.path, before
        # PYTHONPATH: run from ROOT so the server is this checkout's code.
        cwd=ROOT,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def stop_server(proc: Any) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)


# ------------------------------------------------------------ the load generator


class Connection:
    """One HTTP/1.1 keep-alive connection: a request, then its whole answer."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int
    ) -> None:
        self.reader, self.writer = reader, writer
        self.host = f"127.0.0.1:{port}"  # a loopback server answers loopback Host names only

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer, port)

    async def request(self, method: str, path: str, token: str, body: bytes) -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return status, payload

    def close(self) -> None:
        self.writer.close()


@dataclass
class Phase:
    name: str
    requests: int
    errors: int
    seconds: float
    per_s: float
    p50_ms: float
    p99_ms: float
    statuses: dict[str, int]
    server_cpu_ms: float | None = None
    """CPU time the server process spent per request (all its threads, user + system):
    what a request costs, much less sensitive than req/s to other loads on a shared machine."""
    client_cpu_ms: float | None = None
    """CPU time the load generator (this process) spent per request."""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all threads)."""
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


async def load(
    port: int,
    name: str,
    make: Any,
    concurrency: int,
    seconds: float,
    warmup: int,
    server_pid: int | None = None,
) -> Phase:
    """``concurrency`` connections sending ``make(rng) -> (path, body)`` for ``seconds``.

    ``server_pid``: the server process, whose CPU time per request is measured.
    """
    # The warm-up has a connection of its own: the load's connections open
    # after it, so none sits idle past the server's keep-alive timeout.
    rng = random.Random(7)
    first = await Connection.open(port)
    for _ in range(warmup):
        path, body = make(rng)
        await first.request("POST", path, TOKEN, body)
    first.close()
    conns = [await Connection.open(port) for _ in range(concurrency)]
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    stop_at = time.perf_counter() + seconds

    async def worker(conn: Connection, seed: int) -> None:
        local = random.Random(seed)
        while time.perf_counter() < stop_at:
            path, body = make(local)
            t0 = time.perf_counter()
            status, _ = await conn.request("POST", path, TOKEN, body)
            latencies.append((time.perf_counter() - t0) * 1000)
            statuses[str(status)] = statuses.get(str(status), 0) + 1

    cpu0 = cpu_seconds(server_pid) if server_pid is not None else 0.0
    client0 = time.process_time()
    t0 = time.perf_counter()
    # Each phase draws its own sequences: the unloaded phase would otherwise
    # repeat the first loaded connection's queries, which the query cache holds.
    base = zlib.crc32(name.encode()) << 8
    await asyncio.gather(*(worker(c, base + n) for n, c in enumerate(conns)))
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds(server_pid) - cpu0 if server_pid is not None else None
    client = time.process_time() - client0
    for c in conns:
        c.close()
    done = len(latencies)
    errors = done - statuses.get("200", 0)
    return Phase(
        name,
        done,
        errors,
        round(elapsed, 3),
        done / elapsed,
        percentile(latencies, 50),
        percentile(latencies, 99),
        statuses,
        round(cpu * 1000 / done, 3) if cpu is not None and done else None,
        round(client * 1000 / done, 3) if done else None,
    )


async def embedding_counts(port: int) -> dict[str, float]:
    """The server's recall query-embedding counters (``GET /metrics``,
    ``memstore_recall_embedding_*_total``: calls, queries, ahead, ahead_unused, at_hand);
    empty for a server that has none."""
    conn = await Connection.open(port)
    try:
        status, body = await conn.request("GET", "/metrics", TOKEN, b"")
    finally:
        conn.close()
    counts: dict[str, float] = {}
    prefix = "memstore_recall_embedding_"
    for line in body.decode().splitlines() if status == 200 else ():
        if line.startswith(prefix):
            name, _, value = line.partition(" ")
            counts[name.removeprefix(prefix).removesuffix("_total")] = float(value)
    return counts


async def ask_each(port: int, queries: list[str]) -> None:
    """Each query once, from one connection (a warm-up that leaves no query unseen)."""
    conn = await Connection.open(port)
    try:
        for q in queries:
            await conn.request(
                "POST", "/v1/recall", TOKEN, json.dumps({"query": q, "k": 10}).encode()
            )
    finally:
        conn.close()


async def rate_limit_check(
    port: int, tokens: list[str], concurrency: int, seconds: float
) -> dict[str, Any]:
    """Flood 4 tenants; the admitted count per tenant against burst + rate x elapsed."""
    conns = [await Connection.open(port) for _ in range(concurrency)]
    admitted = dict.fromkeys(tokens, 0)
    refused = dict.fromkeys(tokens, 0)
    bad = 0
    body = json.dumps({"query": "rate"}).encode()
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def worker(conn: Connection, token: str) -> None:
        nonlocal bad
        while time.perf_counter() < stop_at:
            status, payload = await conn.request("POST", "/v1/recall", token, body)
            if status == 200:
                admitted[token] += 1
            elif status == 429 and json.loads(payload)["error"] == "rate_limited":
                refused[token] += 1
            else:
                bad += 1

    await asyncio.gather(*(worker(c, tokens[n % len(tokens)]) for n, c in enumerate(conns)))
    elapsed = time.perf_counter() - t0
    for c in conns:
        c.close()
    bound = 120 + 60 * elapsed
    return {
        "tenants": len(tokens),
        "seconds": round(elapsed, 3),
        "bound_per_tenant": round(bound, 1),
        "admitted": list(admitted.values()),
        "refused_429": list(refused.values()),
        "other_statuses": bad,
        "within_limit": all(a <= bound for a in admitted.values()) and bad == 0,
    }


# ---------------------------------------------------------------------- driver


def run_embedder(
    embedder: str,
    chunks: int,
    concurrency: int,
    seconds: float,
    warmup: int,
    workdir: Path,
    cache: Path | None = None,
    warm_queries: bool = False,
    n_queries: int = 500,
) -> dict[str, Any]:
    data = workdir / f"data-{embedder}"
    log(f"[{embedder}] preloading {chunks} chunks")
    t0 = time.perf_counter()
    queries = preload_cached(data, embedder, chunks, cache, n_queries)
    preload_s = time.perf_counter() - t0
    tokens = workdir / "tokens.json"
    tokens.write_text(
        json.dumps({TOKEN: {"tenant": TENANT, "scopes": ["ingest", "recall", "forget"]}})
    )
    proc, port = start_server(
        data, embedder, tokens, "--rate-per-second", "1000000", "--rate-burst", "1000000"
    )
    words = [w for q in queries for w in q.split()]

    def recall(r: random.Random) -> tuple[str, bytes]:
        return "/v1/recall", json.dumps({"query": r.choice(queries), "k": 10}).encode()

    def ingest(r: random.Random) -> tuple[str, bytes]:
        text = " ".join(r.choices(words, k=30))
        content = f"# first\n{text}.\n\n# second\n{text[::-1]}.\n"
        return "/v1/ingest", json.dumps({"source": "bench:load", "content": content}).encode()

    try:
        if warm_queries:
            log(f"[{embedder}] asking each of the {len(set(queries))} queries once")
            asyncio.run(ask_each(port, sorted(set(queries))))
        log(f"[{embedder}] recall for {seconds}s at concurrency {concurrency}")
        pid = proc.pid
        before = asyncio.run(embedding_counts(port))
        rec = asyncio.run(load(port, "recall", recall, concurrency, seconds, warmup, pid))
        after = asyncio.run(embedding_counts(port))
        embedding = {k: v - before.get(k, 0.0) for k, v in after.items()}
        log(f"[{embedder}] recall for {seconds / 2}s at concurrency 1 (unloaded latency)")
        one = asyncio.run(load(port, "recall_c1", recall, 1, seconds / 2, 0, pid))
        log(f"[{embedder}] ingest for {seconds}s at concurrency {concurrency}")
        ing = asyncio.run(load(port, "ingest", ingest, concurrency, seconds, warmup // 4, pid))
    finally:
        stop_server(proc)
    return {
        "embedder": embedder,
        "chunks": chunks,
        "distinct_queries": len(set(queries)),
        "preload_s": round(preload_s, 1),
        "recall": asdict(rec),
        "recall_embedding": embedding,
        "recall_c1": asdict(one),
        "ingest": asdict(ing),
    }


def run_rate_limit(concurrency: int, seconds: float, workdir: Path) -> dict[str, Any]:
    tokens_path = workdir / "tokens-rl.json"
    tokens = [f"rl-{n}" for n in range(4)]
    tokens_path.write_text(
        json.dumps({t: {"tenant": f"rl{n}", "scopes": ["recall"]} for n, t in enumerate(tokens)})
    )
    data = workdir / "data-rl"
    proc, port = start_server(data, "hash", tokens_path)
    try:
        log(f"[rate limit] {concurrency} connections over 4 tenants for {seconds}s")
        return asyncio.run(rate_limit_check(port, tokens, concurrency, seconds))
    finally:
        stop_server(proc)


def targets(runs: list[dict[str, Any]], rl: dict[str, Any]) -> list[TargetResult]:
    out = []
    floors = {"hash": 600.0, "local": 150.0, "local-int8": 150.0}
    for run in runs:
        e = run["embedder"]
        rec = run["recall"]
        out.append(
            TargetResult(
                f"recall req/s ({e}) >= {floors[e]:.0f}",
                rec["per_s"],
                "req/s",
                _status(rec["per_s"], floors[e], at_least=True),
            )
        )
        out.append(
            TargetResult(
                f"recall p99 ({e}) < 100 ms", rec["p99_ms"], "ms", _status(rec["p99_ms"], 100.0)
            )
        )
        errors = rec["errors"] + run["ingest"]["errors"]
        out.append(TargetResult(f"errors ({e}) = 0", errors, "", "PASS" if errors == 0 else "MISS"))
    out.append(
        TargetResult(
            "no tenant over its rate limit", None, "", "PASS" if rl["within_limit"] else "MISS"
        )
    )
    return out


def report(data: dict[str, Any]) -> str:
    lines = [
        "| embedder | phase | req/s | p50 ms | p99 ms | server CPU ms/req | client CPU ms/req "
        "| requests | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in data["runs"]:
        for verb in ("recall", "recall_c1", "ingest"):
            p = run[verb]
            lines.append(
                f"| {run['embedder']} | {p['name']} | {_fmt(p['per_s'], 1)} | "
                f"{_fmt(p['p50_ms'], 2)} | {_fmt(p['p99_ms'], 2)} | "
                f"{_fmt(p.get('server_cpu_ms'), 2)} | {_fmt(p.get('client_cpu_ms'), 2)} | "
                f"{p['requests']} | "
                f"{p['errors']} |"
            )
    concurrency = data["config"]["concurrency"]
    for run in data["runs"]:
        e = run.get("recall_embedding") or {}
        if e.get("queries"):
            unused = e["ahead_unused"] / e["ahead"] if e.get("ahead") else 0.0
            lines.append(
                f"\n{run['embedder']}, recall at concurrency {concurrency} (with its "
                f"warm-up): {e['queries']:.0f} queries embedded in {e['calls']:.0f} calls, "
                f"{e.get('ahead', 0):.0f} sent ahead of their search's start, of which "
                f"{e.get('ahead_unused', 0):.0f} ({unused:.1%}) for a recall that then used no "
                f"vector; {e.get('at_hand', 0):.0f} at hand (the query cache)."
            )
    rl = data["rate_limit"]
    lines += [
        "",
        f"Rate limit (60 rps, burst 120; {rl['tenants']} tenants flooded for {rl['seconds']} s): "
        f"admitted {rl['admitted']} (bound {rl['bound_per_tenant']} each), "
        f"429s {rl['refused_429']}, other statuses {rl['other_statuses']}.",
        "",
        "| target | value | status |",
        "|---|---|---|",
    ]
    for t in data["targets"]:
        value = "-" if t["value"] is None else f"{_fmt(t['value'], 1)} {t['unit']}".strip()
        lines.append(f"| {t['name']} | {value} | {t['status']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, hash embedder only")
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--embedders", default="hash,local")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--data-cache",
        type=Path,
        default=None,
        help="keep the preloaded folders here and copy them for later runs "
        "(the same code only: delete it when the storage format changes)",
    )
    parser.add_argument(
        "--warm-queries",
        action="store_true",
        help="ask every distinct query once before the recall phase",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=500,
        help="how many queries the recall phases draw from (500; a large number, such as "
        "20000, makes a repeated query rare: the server's query cache then rarely helps)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.chunks, args.seconds, args.concurrency, args.embedders = 200, 1.0, 4, "hash"
    warmup = 20 if args.smoke else 200
    embedders = [e for e in args.embedders.split(",") if e]
    models = [e for e in embedders if e in ("local", "local-int8")]
    if models:
        from memstore_index import onnx_embedder

        if not onnx_embedder.AVAILABLE:
            log(f"local model not installed ({onnx_embedder.MISSING}); skipping {models}")
            embedders = [e for e in embedders if e not in models]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        runs = [
            run_embedder(
                e,
                args.chunks,
                args.concurrency,
                args.seconds,
                warmup,
                workdir,
                args.data_cache,
                args.warm_queries,
                args.queries,
            )
            for e in embedders
        ]
        rl = run_rate_limit(args.concurrency, min(args.seconds, 3.0), workdir)
    data: dict[str, Any] = {
        "smoke": args.smoke,
        "config": {
            "chunks": args.chunks,
            "seconds": args.seconds,
            "concurrency": args.concurrency,
            "embedders": embedders,
            "warm_queries": args.warm_queries,
            "queries": args.queries,
        },
        "runs": runs,
        "rate_limit": rl,
        "targets": [asdict(t) for t in targets(runs, rl)],
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpu": _cpu_model(),
            "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "commit": git_commit(ROOT),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
