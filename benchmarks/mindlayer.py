"""The Mind Layer API's benchmarks (seed 002's two figures) on memstore, in-process.

1. **Retrieval quality**, synthetic-v1 style: 12 authored facts about one
   fictional user and 12 queries (exact terms, inflections, paraphrases, one
   needing two facts), each labelled with the facts that answer it. For each
   mode (``lexical``, ``semantic``, ``hybrid``) and the "3 most recent facts"
   baseline: mean recall@3 (share of a query's evidence in the top 3) and
   MRR@3 (reciprocal rank of the first relevant hit, 0 when none). The set
   is this repository's own, not seed 002's (which is not published).
   The labels are used only for scoring.
2. **Latency**: 1,000 authored records in one scope of a durable memory
   (a folder: SQLite journal), written one by one through
   :meth:`MindLayer.remember` (the total time), then 30 warmed-up sequential
   keyword queries (p50/p95 over the queries of each query's median of 5
   runs, so that one preemption on a shared machine is not a query's
   latency). No provider; in-process as seed 002 measured, then the same
   through a real ``memstore serve --api mindlayer`` on loopback (one
   keep-alive connection, one request at a time).

Semantic and hybrid use ``--embedder`` (default ``local``: the offline MiniLM
model of extra ``embed``; ``hash`` is a lexical-ish stand-in, not a model).

Run: ``python benchmarks/mindlayer.py [--embedder local] [--out FILE]``;
``--smoke`` uses 100 records and 10 queries (for the test suite).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import cpu_model, git_commit, load_average, log, percentile

# This folder is on sys.path (for _common), and its http.py would shadow the
# standard library's http package, which httpx needs: take the folder off.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from memstore import Memory  # noqa: E402
from memstore.mindlayer import MindLayer, Scope  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mindlayer.json"
K = 3
REPEATS = 5
"""Runs of each latency query; its latency is their median."""

FACTS: dict[str, str] = {
    "diet": "The user is vegetarian and cooks dinner for two people.",
    "allergy": "The user is allergic to peanuts.",
    "bike": "The user commutes to the office by bicycle.",
    "sister": "The user's sister Marta lives in Porto.",
    "job": "The user works as a nurse on night shifts.",
    "piano": "The user started piano lessons in January.",
    "move": "The user is planning to move to a bigger flat next spring.",
    "cat": "The user has a grey cat called Pixel.",
    "coffee": "The user stopped drinking coffee after midnight shifts ruined their sleep.",
    "trip": "The user booked a hiking trip to the Azores in September.",
    "budget": "The user is saving money for a deposit on a house.",
    "language": "The user is learning Portuguese with an app every morning.",
}
"""Twelve authored facts about one fictional user."""

QUERIES: list[tuple[str, list[str], str]] = [
    ("vegetarian dinner", ["diet"], "exact"),
    ("peanut allergy", ["allergy"], "inflection"),
    ("cycling to work", ["bike"], "inflection"),
    ("Where does Marta live?", ["sister"], "exact"),
    ("What should guide my meal suggestions?", ["diet", "allergy"], "paraphrase, two facts"),
    ("Which musical instrument is the user studying?", ["piano"], "paraphrase"),
    ("Does the user have any pets?", ["cat"], "paraphrase"),
    ("What is their profession?", ["job"], "paraphrase"),
    ("Why did they give up caffeine?", ["coffee"], "paraphrase"),
    ("holiday plans for the autumn", ["trip"], "paraphrase"),
    ("Are they buying property?", ["budget", "move"], "paraphrase"),
    ("Which language are they practising?", ["language"], "inflection"),
]
"""Twelve queries with the facts that answer them, and what kind of match each needs."""


def dataset_digest() -> str:
    raw = json.dumps({"facts": FACTS, "queries": QUERIES}, sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()


def score(ranked: list[str], relevant: list[str]) -> tuple[float, float]:
    """(recall@K, reciprocal rank@K) of one ranked id list.

    >>> score(["a", "b", "c"], ["b", "z"])
    (0.5, 0.5)
    """
    top = ranked[:K]
    recall = sum(1 for r in relevant if r in top) / len(relevant)
    rr = next((1.0 / (n + 1) for n, i in enumerate(top) if i in relevant), 0.0)
    return recall, rr


def quality(embedder: str) -> dict[str, Any]:
    """recall@3 and MRR@3 per mode on the authored set."""
    scope = Scope("assistant", "synthetic-user")
    out: dict[str, Any] = {}
    with Memory(embedder=embedder) as mem:
        ml = MindLayer(mem)
        for mid, text in FACTS.items():
            ml.remember(scope, text, id=mid)
        recent = [m["id"] for m in reversed(ml.export(scope)["memories"])]
        runs: dict[str, list[list[str]]] = {
            "recent": [recent for _ in QUERIES],
            **{
                mode: [
                    [h["memory"]["id"] for h in ml.search(scope, q, mode=mode, limit=K)]
                    for q, _, _ in QUERIES
                ]
                for mode in ("lexical", "semantic", "hybrid")
            },
        }
        model = str(mem.cells.embedder.model_id) if mem.cells is not None else None
    for mode, ranked in runs.items():
        scores = [score(r, rel) for r, (_, rel, _) in zip(ranked, QUERIES, strict=True)]
        out[mode] = {
            "recall_at_3": sum(s[0] for s in scores) / len(scores),
            "mrr_at_3": sum(s[1] for s in scores) / len(scores),
            "per_query": [
                {"query": q, "relevant": rel, "ranked": r}
                for r, (q, rel, _) in zip(ranked, QUERIES, strict=True)
            ],
        }
    out["embedding_model"] = model
    return out


_TOPICS = ("garden", "invoice", "recipe", "flight", "meeting", "budget", "sensor", "library")


def record(n: int) -> str:
    """The n-th authored latency record: varied words, no two alike."""
    a, b = _TOPICS[n % len(_TOPICS)], _TOPICS[(n * 7 + 3) % len(_TOPICS)]
    return (
        f"Record {n}: the {a} note mentions the {b} plan number {n * 37 % 1000} for week {n % 52}."
    )


def latency(records: int, queries: int) -> dict[str, Any]:
    """Durable one-by-one writes (total seconds) and warmed keyword queries (p50/p95 ms)."""
    scope = Scope("assistant", "synthetic-user")
    with tempfile.TemporaryDirectory() as folder, Memory(folder, embedder=None) as mem:
        ml = MindLayer(mem)
        start = time.perf_counter()
        for n in range(records):
            ml.remember(scope, record(n))
        write_s = time.perf_counter() - start
        words = [f"{_TOPICS[n % len(_TOPICS)]} plan week {n % 52}" for n in range(queries)]
        for q in words[:5]:  # warm-up
            ml.search(scope, q)
        times = []
        for q in words:  # each query's median of REPEATS runs: one preemption is not its latency
            runs = []
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                ml.search(scope, q)
                runs.append((time.perf_counter() - t0) * 1000)
            times.append(statistics.median(runs))
    return {
        "records": records,
        "queries": queries,
        "repeats": REPEATS,
        "write_total_s": write_s,
        "query_p50_ms": percentile(times, 50),
        "query_p95_ms": percentile(times, 95),
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_latency(records: int, queries: int) -> dict[str, Any]:
    """:func:`latency` through a real ``memstore serve --api mindlayer`` on loopback.

    One keep-alive connection, requests one at a time: each figure is the
    engine's plus HTTP/JSON and the server's plumbing.
    """
    import httpx

    scope = {"agent": "assistant", "user": "synthetic-user"}
    with tempfile.TemporaryDirectory() as folder:
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env = {
            k: v for k, v in env.items() if not k.startswith(("MEMSTORE_PROVIDER_", "MIND_LAYER_"))
        }
        cmd = [
            sys.executable,
            "-m",
            "memstore.cli",
            "serve",
            "--api",
            "mindlayer",
            "--data",
            f"{folder}/data",
            "--embedder",
            "none",
            "--port",
            str(port),
        ]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=url, timeout=30) as c:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        if c.get("/healthz").status_code == 200:
                            break
                    except httpx.TransportError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.05)
                start = time.perf_counter()
                for n in range(records):
                    r = c.post("/v1/memories", json={"scope": scope, "text": record(n)})
                    r.raise_for_status()
                write_s = time.perf_counter() - start
                words = [f"{_TOPICS[n % len(_TOPICS)]} plan week {n % 52}" for n in range(queries)]
                body = [{"scope": scope, "query": q} for q in words]
                for b in body[:5]:
                    c.post("/v1/search", json=b)
                times = []
                for b in body:
                    runs = []
                    for _ in range(REPEATS):
                        t0 = time.perf_counter()
                        c.post("/v1/search", json=b).raise_for_status()
                        runs.append((time.perf_counter() - t0) * 1000)
                    times.append(statistics.median(runs))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    return {
        "records": records,
        "queries": queries,
        "repeats": REPEATS,
        "write_total_s": write_s,
        "query_p50_ms": percentile(times, 50),
        "query_p95_ms": percentile(times, 95),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", default="local", help="local (default), hash or auto")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--smoke", action="store_true", help="100 records, 10 queries")
    args = parser.parse_args()
    log(f"mindlayer benchmark: quality with embedder {args.embedder}")
    q = quality(args.embedder)
    records, queries = (100, 10) if args.smoke else (1000, 30)
    log(f"mindlayer benchmark: latency, {records} records")
    lat = latency(records, queries)
    log("mindlayer benchmark: the same over HTTP")
    http = http_latency(records, queries)
    result = {
        "smoke": args.smoke,
        "dataset_sha256": dataset_digest(),
        "quality": q,
        "latency": lat,
        "http_latency": http,
        "machine": {
            "python": platform.python_version(),
            "cpu": cpu_model(),
            "load_average": load_average(),
            "commit": git_commit(ROOT),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("| mode | recall@3 | MRR@3 |")
    print("|---|---|---|")
    for mode in ("recent", "lexical", "semantic", "hybrid"):
        print(f"| {mode} | {q[mode]['recall_at_3']:.2%} | {q[mode]['mrr_at_3']:.4f} |")
    print(f"embedding model: {q['embedding_model']}")
    for name, figures in (("in-process", lat), ("HTTP", http)):
        print(
            f"{name}: {figures['records']} durable writes: {figures['write_total_s']:.3f} s; "
            f"keyword query p50 {figures['query_p50_ms']:.3f} ms, "
            f"p95 {figures['query_p95_ms']:.3f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
