"""Vector search benchmark: memstore's CellStore against raw hnswlib and a flat numpy scan.

For each collection size, in one process and on the same random unit vectors
(dim 384, seeded numpy) and the same random unit queries:

* CellStore (``memstore_index.cellstore``): build throughput through
  ``apply()`` in chunks of 1000 (no embedder runs), ``search_vector(q, 10)``
  latency (p50/p95 of per-query medians), filtered latency with 1% and 10% of
  the entries visible through ``partitions=[...]`` and with 10% visible
  through a ``visible=`` predicate, and recall@10 against an exact scan. A
  CellStore keeps the graph walks of its index generation by query vector, so
  each timed pass asks every query nudged by 1e-6 in one component (a vector
  it has not seen: a walk); the same vectors asked again (the kept walk's
  lookup) are reported beside, as "asked again";
* raw ``hnswlib`` with the same M / ef_construction / ef (space ``"ip"``):
  build time, latency, recall@10, and the same 1%/10% subsets through a
  Python ``filter=`` callable;
* a flat numpy scan (``vecs @ q`` + ``argpartition``): latency.

Then the embedding throughput of the local ONNX model (all-MiniLM-L6-v2 int8,
when installed) and of ``HashEmbedder`` on short sentences.

Results go to a JSON file and a markdown report (with PASS/MISS per target)
to stdout; progress goes to stderr. The exit status is 0 whether targets pass
or not: this is a report, not a test.

Usage::

    python benchmarks/vector.py [--sizes 10000,100000] [--smoke] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import hnswlib  # type: ignore[import-untyped]
import numpy as np
from _common import (
    Latency,
    git_commit,
    load_average,
    log,
    percentile,
    source_digest,
    summarize,
    time_queries,
)
from _common import cpu_model as _cpu_model
from _common import version as _version
from _vector_data import (
    DATA_KINDS,
    DIM,
    FILTERS,
    LOWRANK_DIM,
    LOWRANK_NOISE,
    PARTITIONS,
    TOP_K,
    FilterSpec,
    Ids,
    Quality,
    Vec,
    exact_top_k,
    make_data,
    quality,
    sentences,
    subset_labels,
)
from _vector_data import partition as _partition
from _vector_report import (
    EmbedResult,
    FilteredResult,
    FlatResult,
    OursResult,
    RawResult,
    SizeResult,
    evaluate_targets,
    markdown,
)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # measure this checkout, not an installed copy
    sys.path.insert(0, str(ROOT))

from memstore_index._calibrate import DEFAULT_TARGET_RECALL  # noqa: E402
from memstore_index._vectorfile import StoredVector  # noqa: E402
from memstore_index.cellstore import (  # noqa: E402
    DEFAULT_EF,
    DEFAULT_EF_CONSTRUCTION,
    DEFAULT_M,
    EXACT_THRESHOLD,
    CellStore,
)
from memstore_index.entry import IndexEntry  # noqa: E402
from memstore_index.hash_embedder import HashEmbedder  # noqa: E402

if TYPE_CHECKING:
    from memstore_index.embedder import Embedder

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "vector.json"
DEFAULT_SIZES = (10_000, 100_000)
SMOKE_SIZES = (3_000,)
CHUNK = 1_000
"""Entries per ``CellStore.apply`` call while building."""
SENTENCES = 500
SMOKE_SENTENCES = 20
EMBED_BATCH = 32
SLOW_PROBE = 5
"""Queries timed first to decide whether a slow engine gets the full query set..."""
SLOW_MS = 5.0
"""...it does not when they average more than this (ms per query)..."""
SLOW_SUBSET = 20
"""...and is then timed on this many evenly spaced queries (the report says so)."""

R = TypeVar("R")


# --------------------------------------------------------------------------- timing


def query_subset(search: Callable[[Vec], object], queries: Sequence[Vec]) -> list[int]:
    """Indices of the queries a possibly slow engine is timed on.

    All of them, unless the first :data:`SLOW_PROBE` average more than
    :data:`SLOW_MS`; then :data:`SLOW_SUBSET` evenly spaced ones.
    """
    n = len(queries)
    if n <= SLOW_SUBSET:
        return list(range(n))
    probe = queries[:SLOW_PROBE]
    t0 = time.perf_counter()
    for q in probe:
        search(q)
    mean_ms = (time.perf_counter() - t0) * 1e3 / len(probe)
    if mean_ms <= SLOW_MS:
        return list(range(n))
    step = n / SLOW_SUBSET
    return [int(i * step) for i in range(SLOW_SUBSET)]


# --------------------------------------------------------------------------- CellStore


def nudged(q: Vec, n: int) -> Vec:
    """``q`` with one component moved by ``n`` x 1e-6: a query vector the CellStore has not
    seen, for :func:`~_common.time_queries`'s timed passes.

    A CellStore keeps its unfiltered graph walks of the current index generation by
    query vector (a server is asked the same questions again), so a query asked a
    second time is answered without walking: timing the same vectors pass after pass
    would time that lookup, not the search. A move of 1e-6 against components of
    ~0.05 changes the vector's bytes and no neighbour worth the name.
    """
    out = q.copy()
    out[n % len(out)] += np.float32(n * 1e-6)
    return out


def _row(hits: Sequence[tuple[IndexEntry, float]]) -> list[int]:
    """CellStore hits as row numbers (ids are ``v<row>``)."""
    return [int(e.id[1:]) for e, _ in hits]


def build_cellstore(vecs: Vec, args: argparse.Namespace) -> tuple[CellStore, dict[str, float]]:
    """Load ``vecs`` into a CellStore through ``apply`` in chunks; timings."""
    t0 = time.perf_counter()
    rows = [
        StoredVector(IndexEntry(f"v{i}", partition=_partition(i)), -1, f"h{i}", "", vecs[i])
        for i in range(len(vecs))
    ]
    t1 = time.perf_counter()
    cells = CellStore(
        HashEmbedder(dim=vecs.shape[1]), m=args.m, ef_construction=args.efc, ef_search=args.ef
    )
    for start in range(0, len(rows), CHUNK):
        cells.apply(rows[start : start + CHUNK])
    t2 = time.perf_counter()
    del rows
    if len(cells) != len(vecs):
        raise RuntimeError(f"CellStore holds {len(cells)} entries, expected {len(vecs)}")
    return cells, {"entries_s": t1 - t0, "build_s": t2 - t1}


def _filtered_search(
    cells: CellStore, spec: FilterSpec
) -> Callable[[Vec], list[tuple[IndexEntry, float]]]:
    """``search_vector`` restricted as ``spec`` says: by partitions or by a predicate."""
    parts = list(spec.partitions)
    if spec.via == "partitions":
        return lambda q: cells.search_vector(q, TOP_K, partitions=parts)
    allowed = frozenset(parts)

    def visible(e: IndexEntry) -> bool:
        return e.partition in allowed

    return lambda q: cells.search_vector(q, TOP_K, visible=visible)


def run_ours(
    vecs: Vec,
    queries: Sequence[Vec],
    truth: dict[str, list[set[int]]],
    args: argparse.Namespace,
) -> tuple[OursResult, dict[str, list[float]]]:
    """CellStore at one size; also returns per-query medians per case (for ratios)."""
    log("  CellStore: build")
    cells, t = build_cellstore(vecs, args)
    n = len(vecs)
    log(f"  CellStore: build {t['build_s']:.1f} s; queries")

    def plain(q: Vec) -> list[tuple[IndexEntry, float]]:
        return cells.search_vector(q, TOP_K)

    per_query, warm = time_queries(plain, queries, args.repeats, fresh=nudged)
    # The same vectors again, now that they were asked: the kept walks' lookup.
    repeated, _ = time_queries(plain, queries, args.repeats)
    medians = {"unfiltered": per_query}
    filtered: dict[str, FilteredResult] = {}
    for spec in FILTERS:
        log(f"  CellStore: {spec.name}")
        search = _filtered_search(cells, spec)
        visible_n = len(subset_labels(n, spec))
        candidates = visible_n if spec.via == "partitions" else n
        path = "exact scan" if candidates <= EXACT_THRESHOLD else f"hnsw + {spec.via}"
        fq, fwarm = time_queries(search, queries, args.repeats, fresh=nudged)
        medians[spec.name] = fq
        filtered[spec.name] = FilteredResult(
            visible=visible_n,
            latency=summarize(fq, args.repeats),
            quality=quality([_row(h) for h in fwarm], truth[spec.name]),
            path=path,
        )
    result = OursResult(
        entries_s=t["entries_s"],
        build_s=t["build_s"],
        build_per_s=n / t["build_s"],
        latency=summarize(per_query, args.repeats),
        quality=quality([_row(h) for h in warm], truth["unfiltered"]),
        filtered=filtered,
        repeated=summarize(repeated, args.repeats),
        search_ef=cells.search_ef,
        calibration_recall=cells.calibration[1] if cells.calibration else None,
    )
    return result, medians


# --------------------------------------------------------------------------- peers


def _raw_index(vecs: Vec, args: argparse.Namespace, threads: int) -> tuple[Any, float]:
    """A raw hnswlib graph over ``vecs`` (labels = row numbers) and its build seconds."""
    t0 = time.perf_counter()
    index = hnswlib.Index(space="ip", dim=vecs.shape[1])
    index.init_index(max_elements=len(vecs), ef_construction=args.efc, M=args.m, random_seed=100)
    index.add_items(vecs, np.arange(len(vecs)), num_threads=threads)
    index.set_ef(args.ef)
    return index, time.perf_counter() - t0


def run_raw(
    vecs: Vec,
    queries: Sequence[Vec],
    truth: dict[str, list[set[int]]],
    args: argparse.Namespace,
    ours_ef: int | None = None,
) -> tuple[RawResult, dict[str, list[int]]]:
    """Raw hnswlib at one size; also returns the query indices each filtered case used."""
    n = len(vecs)
    build_1thread: float | None = None
    threads = os.cpu_count() or 1
    if args.raw_single_thread and threads > 1:
        log("  hnswlib: build, 1 thread")
        single, build_1thread = _raw_index(vecs, args, 1)
        del single
        gc.collect()
    log(f"  hnswlib: build, {threads} threads")
    index, build_s = _raw_index(vecs, args, -1)
    if build_1thread is None and threads == 1:
        build_1thread = build_s

    def search(q: Vec) -> Any:
        return index.knn_query(q, k=TOP_K)

    log(f"  hnswlib: build {build_s:.1f} s; queries")
    per_query, warm = time_queries(search, queries, args.repeats)
    at_ef: Latency | None = None
    at_ef_quality: Quality | None = None
    if ours_ef is not None and ours_ef != args.ef:
        log(f"  hnswlib: queries at CellStore's ef {ours_ef}")
        index.set_ef(ours_ef)
        eq, ewarm = time_queries(search, queries, args.repeats)
        index.set_ef(args.ef)
        at_ef = summarize(eq, args.repeats)
        at_ef_quality = quality([r[0][0].tolist() for r in ewarm], truth["unfiltered"])
    subsets: dict[str, list[int]] = {}
    filtered: dict[str, FilteredResult] = {}
    for spec in FILTERS:
        if spec.via != "partitions":
            continue  # the same subset as "10% partitions": one raw figure per subset
        allowed = frozenset(subset_labels(n, spec).tolist())

        def fsearch(q: Vec, keep: Callable[[int], bool] = allowed.__contains__) -> Any:
            return index.knn_query(q, k=TOP_K, filter=keep)

        chosen = query_subset(fsearch, queries)
        subsets[spec.name] = chosen
        log(f"  hnswlib: {spec.name} filter, {len(chosen)} queries")
        fq, fwarm = time_queries(fsearch, [queries[i] for i in chosen], args.repeats)
        note = "filter=frozenset.__contains__"
        if len(chosen) < len(queries):
            note += f"; timed on {len(chosen)} of {len(queries)} queries (too slow for all)"
        filtered[spec.name] = FilteredResult(
            visible=len(allowed),
            latency=summarize(fq, args.repeats),
            quality=quality(
                [r[0][0].tolist() for r in fwarm], [truth[spec.name][i] for i in chosen]
            ),
            note=note,
        )
    result = RawResult(
        build_s=build_s,
        build_per_s=n / build_s,
        build_threads=threads,
        build_1thread_s=build_1thread,
        latency=summarize(per_query, args.repeats),
        quality=quality([r[0][0].tolist() for r in warm], truth["unfiltered"]),
        filtered=filtered,
        at_ours_ef=at_ef,
        at_ours_ef_quality=at_ef_quality,
    )
    return result, subsets


def run_flat(vecs: Vec, queries: Sequence[Vec], truth: list[set[int]], repeats: int) -> FlatResult:
    """A flat scan: one matrix-vector product, ``argpartition``, then sort the top ``k``."""
    kth = min(TOP_K, len(vecs)) - 1

    def search(q: Vec) -> Ids:
        scores = vecs @ q
        top = np.argpartition(-scores, kth)[: kth + 1]
        return top[np.argsort(-scores[top])]

    log("  flat numpy scan: queries")
    per_query, warm = time_queries(search, queries, repeats)
    return FlatResult(summarize(per_query, repeats), quality([r.tolist() for r in warm], truth))


# --------------------------------------------------------------------------- one size


def run_size(size: int, args: argparse.Namespace, kind: str = "uniform") -> SizeResult:
    """Every measurement at one size, on one generator's data."""
    log(f"[{size:,} {kind} vectors]")
    t0 = time.perf_counter()
    vecs, qmat = make_data(size, args.queries, args.dim, args.seed, kind)
    queries = list(qmat)
    t1 = time.perf_counter()
    truth = {"unfiltered": exact_top_k(vecs, qmat, None, TOP_K)}
    for spec in FILTERS:
        truth[spec.name] = exact_top_k(vecs, qmat, subset_labels(size, spec), TOP_K)
    t2 = time.perf_counter()
    ours, ours_ms = run_ours(vecs, queries, truth, args)
    gc.collect()  # the CellStore's graph goes before raw hnswlib builds its own
    raw, raw_subsets = run_raw(vecs, queries, truth, args, ours.search_ef)
    gc.collect()
    flat = run_flat(vecs, queries, truth["unfiltered"], args.repeats)
    ratios: dict[str, float | None] = {
        "ours_over_hnswlib_p50": ours.latency.p50_ms / raw.latency.p50_ms,
        "ours_over_flat_p50": ours.latency.p50_ms / flat.latency.p50_ms,
        "ours_over_hnswlib_build_s": ours.build_s / raw.build_s,
        "ours_over_hnswlib_1thread_build_s": (
            ours.build_s / raw.build_1thread_s if raw.build_1thread_s else None
        ),
    }
    for spec in FILTERS:
        f = ours.filtered[spec.name]
        ratios[f"ours_{spec.name}_over_unfiltered_p50"] = f.latency.p50_ms / ours.latency.p50_ms
        raw_name = spec.name if spec.name in raw.filtered else "10% partitions"
        chosen = raw_subsets[raw_name]
        ours_on_chosen = percentile([ours_ms[spec.name][i] for i in chosen], 50)
        ratios[f"hnswlib_filter_over_ours_{spec.name}_p50"] = (
            raw.filtered[raw_name].latency.p50_ms / ours_on_chosen
        )
    return SizeResult(
        size=size,
        data_gen_s=t1 - t0,
        ground_truth_s=t2 - t1,
        ours=ours,
        hnswlib=raw,
        flat=flat,
        ratios=ratios,
        data=kind,
    )


# --------------------------------------------------------------------------- embedders


def _throughput(emb: Embedder, texts: Sequence[str], repeats: int) -> tuple[float, float]:
    """(first-pass, median-of-``repeats``) sentences/s of ``emb`` embedding ``texts``."""
    t0 = time.perf_counter()
    emb.embed(list(texts))
    cold = len(texts) / (time.perf_counter() - t0)
    rates: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = emb.embed(list(texts))
        rates.append(len(texts) / (time.perf_counter() - t0))
        if out.shape != (len(texts), emb.dim):
            raise RuntimeError(f"{emb!r} returned shape {out.shape}")
    return cold, statistics.median(rates)


def run_embedders(args: argparse.Namespace) -> list[EmbedResult]:
    """Sentences/s of the local ONNX model (if installed) and of HashEmbedder."""
    texts = sentences(args.sentences, args.seed)
    mean_words = statistics.fmean(len(t.split()) for t in texts)
    repeats = max(1, min(args.repeats, 3))
    out: list[EmbedResult] = []

    log(f"[embedders: {len(texts)} sentences]")
    from memstore_index import onnx_embedder

    name = "OnnxMiniLMEmbedder (all-MiniLM-L6-v2 int8)"
    if not onnx_embedder.AVAILABLE:
        out.append(
            EmbedResult(
                name, None, False, 0, None, None, None, note=f"skipped: {onnx_embedder.MISSING}"
            )
        )
    else:
        try:
            t0 = time.perf_counter()
            onnx = onnx_embedder.OnnxMiniLMEmbedder(batch_size=EMBED_BATCH)
            load_s = time.perf_counter() - t0
            log("  onnx: embedding")
            onnx.embed(texts[:EMBED_BATCH])  # warm-up: first runs allocate
            cold, rate = _throughput(onnx, texts, repeats)
        except Exception as exc:  # report a broken model, do not fail the benchmark
            out.append(EmbedResult(name, None, False, 0, None, None, None, note=f"failed: {exc!r}"))
        else:
            threads = f"{onnx.threads} threads" if onnx.threads else "onnxruntime default threads"
            out.append(
                EmbedResult(
                    name,
                    onnx.model_id,
                    True,
                    len(texts),
                    EMBED_BATCH,
                    load_s,
                    rate,
                    cold,
                    mean_words,
                    note=f"{threads}; median of {repeats} passes after a warm-up batch",
                )
            )
    log("  HashEmbedder: embedding")
    t0 = time.perf_counter()
    hasher = HashEmbedder(dim=args.dim)
    load_s = time.perf_counter() - t0
    cold, rate = _throughput(hasher, texts, repeats)
    out.append(
        EmbedResult(
            f"HashEmbedder(dim={args.dim})",
            hasher.model_id,
            True,
            len(texts),
            None,
            load_s,
            rate,
            cold,
            mean_words,
            note=f"one call for all; warm = median of {repeats} passes (word memo filled)",
        )
    )
    return out


# --------------------------------------------------------------------------- main


def _memory_total() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def machine_info() -> dict[str, Any]:
    """Where and with what this run happened."""
    return {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_total_bytes": _memory_total(),
        "load_average_at_end": load_average(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "numpy": _version("numpy"),
        "hnswlib": _version("hnswlib"),
        "onnxruntime": _version("onnxruntime"),
        "tokenizers": _version("tokenizers"),
        "git_commit": git_commit(ROOT),
        "memstore_index_source_sha256": source_digest(ROOT, "memstore_index"),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (``--smoke`` changes the defaults, explicit flags win)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--sizes", help="comma-separated collection sizes (default 10000,100000)")
    p.add_argument(
        "--smoke", action="store_true", help="tiny run: 3000 vectors, 20 queries, 1 pass"
    )
    p.add_argument(
        "--out", type=Path, help=f"JSON output (default {DEFAULT_OUT.relative_to(ROOT)})"
    )
    p.add_argument("--queries", type=int, help="queries per size (default 200, smoke 20)")
    p.add_argument("--repeats", type=int, help="timed passes (default 5, smoke 1)")
    p.add_argument("--sentences", type=int, help="sentences to embed (default 500, smoke 20)")
    p.add_argument("--dim", type=int, default=DIM, help=f"vector length (default {DIM})")
    p.add_argument("--seed", type=int, default=42, help="data seed (default 42)")
    p.add_argument(
        "--data",
        help="comma-separated generators, each run at every size: uniform (unit vectors) "
        "and/or lowrank (near a 32-d subspace, like embeddings); default both, smoke uniform",
    )
    p.add_argument("--m", type=int, default=DEFAULT_M, help=f"HNSW M (default {DEFAULT_M})")
    p.add_argument(
        "--efc",
        type=int,
        default=DEFAULT_EF_CONSTRUCTION,
        help=f"HNSW ef_construction (default {DEFAULT_EF_CONSTRUCTION})",
    )
    p.add_argument(
        "--ef", type=int, default=DEFAULT_EF, help=f"HNSW ef at search (default {DEFAULT_EF})"
    )
    p.add_argument(
        "--no-raw-single-thread",
        dest="raw_single_thread",
        action="store_false",
        help="skip the extra 1-thread raw hnswlib build (on by default, off in smoke)",
    )
    args = p.parse_args(argv)
    if args.sizes:
        args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    else:
        args.sizes = list(SMOKE_SIZES if args.smoke else DEFAULT_SIZES)
    if args.queries is None:
        args.queries = 20 if args.smoke else 200
    if args.repeats is None:
        args.repeats = 1 if args.smoke else 5
    if args.sentences is None:
        args.sentences = SMOKE_SENTENCES if args.smoke else SENTENCES
    args.data = [
        d.strip()
        for d in (args.data or ("uniform" if args.smoke else ",".join(DATA_KINDS))).split(",")
        if d.strip()
    ]
    if not args.data or any(d not in DATA_KINDS for d in args.data):
        p.error(f"--data takes a comma-separated list of {', '.join(DATA_KINDS)}")
    if args.smoke:
        args.raw_single_thread = False
    if args.out is None:
        tmp = Path(tempfile.gettempdir()) / "memstore-vector-smoke.json"
        args.out = tmp if args.smoke else DEFAULT_OUT
    if min(args.sizes) < TOP_K or args.queries < 1 or args.repeats < 1:
        p.error(f"sizes must be >= {TOP_K}; queries and repeats >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, write the JSON, print the report. Always 0."""
    args = parse_args(argv)
    load0 = load_average()
    results = [run_size(n, args, kind) for kind in args.data for n in args.sizes]
    embedders = run_embedders(args)
    targets = evaluate_targets(results)
    payload = {
        "benchmark": "vector",
        "smoke": args.smoke,
        "config": {
            "sizes": args.sizes,
            "dim": args.dim,
            "queries": args.queries,
            "repeats": args.repeats,
            "seed": args.seed,
            "data": args.data,
            "lowrank": {"latent_dim": LOWRANK_DIM, "noise": LOWRANK_NOISE},
            "top_k": TOP_K,
            "apply_chunk": CHUNK,
            "partitions": PARTITIONS,
            "filters": [asdict(f) for f in FILTERS],
            "hnsw": {"space": "ip", "M": args.m, "ef_construction": args.efc, "ef": args.ef},
            "target_recall": DEFAULT_TARGET_RECALL,
            "exact_threshold": EXACT_THRESHOLD,
            "sentences": args.sentences,
            "embed_batch": EMBED_BATCH,
            "slow_subset": {"probe": SLOW_PROBE, "ms": SLOW_MS, "queries": SLOW_SUBSET},
        },
        "machine": {**machine_info(), "load_average_at_start": load0},
        "results": [asdict(r) for r in results],
        "embedders": [asdict(e) for e in embedders],
        "targets": [asdict(t) for t in targets],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    machine = payload["machine"]
    print(
        f"Data: {', '.join(args.data)} unit vectors, dim {args.dim}; {args.queries} queries x "
        f"{args.repeats} timed passes; HNSW M={args.m} ef_construction={args.efc} "
        f"ef={args.ef}; {machine['cpu_count']} CPUs ({machine['cpu_model']}); load average "
        f"{load0} at start, {machine['load_average_at_end']} at end.\n"
    )
    print(markdown(results, embedders, targets))
    print(f"\nJSON written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
