"""Writes of many identical vectors: the HNSW graph's cost with and without duplicates.

Each row adds ``N`` vectors of one *corpus* in one batch and reports the CPU
seconds (``process_time``, all threads: the figure other work on a shared
machine disturbs least) of the add, by *layer*:

* ``hnswlib``: ``hnswlib.Index.add_items`` directly (``M`` 32,
  ``ef_construction`` 200, ``--threads`` threads: the graph's own cost);
* ``cells``: ``CellStore.apply`` of the raw vectors, in memory (what the
  index adds: the duplicate table, calibration, the entries);
* ``memory``: ``Memory.add_many`` of texts with the hash embedder, durable
  (journal, vector file, graph), for the corpora that are texts.

Corpora (unit vectors of ``--dim`` 256, the hash embedder's size):

* ``distinct``: ``N`` independent random vectors (texts ``note i about ...``);
* ``identical``: one vector ``N`` times (texts ``"ok thanks"``);
* ``few5``: ``N`` draws from 5 vectors (5 short texts);
* ``near``: one vector plus noise of 1e-4 per coordinate (raw vectors only:
  no two texts embed that close with the hash embedder).

In the ``cells`` layer it also times a search (``k`` 10, median of 200)
whose query is the most repeated vector, and the same search just after one
more copy of that vector was written (median of 30). The script imports ``memstore``
from ``PYTHONPATH`` first, so one copy of it can time another checkout::

    PYTHONPATH=/path/to/checkout python benchmarks/duplicates.py --out /tmp/d.json

Usage::

    python benchmarks/duplicates.py [--sizes 1000,5000,10000,20000]
        [--corpora distinct,identical,few5,near] [--layers hnswlib,cells,memory]
        [--threads 1] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout given there wins

TEXTS = {
    "distinct": lambda n, rng: [f"note {i} about topic {i * 7919 % 104729}" for i in range(n)],
    "identical": lambda n, rng: ["ok thanks"] * n,
    "few5": lambda n, rng: [
        ("ok", "thanks", "done", "GET /health 200", "retrying connection")[j]
        for j in rng.integers(0, 5, n)
    ],
}


def vectors(corpus: str, n: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    if corpus == "distinct":
        v = rng.standard_normal((n, dim))
    elif corpus == "identical":
        v = np.repeat(rng.standard_normal((1, dim)), n, 0)
    elif corpus == "few5":
        v = rng.standard_normal((5, dim))[rng.integers(0, 5, n)]
    elif corpus == "near":
        v = rng.standard_normal((1, dim)) + 1e-4 * rng.standard_normal((n, dim))
    else:
        raise SystemExit(f"unknown corpus {corpus!r}")
    v = v.astype(np.float32)
    return np.ascontiguousarray(v / np.linalg.norm(v, axis=1, keepdims=True))


def time_hnswlib(v: np.ndarray, threads: int) -> dict[str, Any]:
    import hnswlib  # type: ignore[import-untyped]

    index = hnswlib.Index(space="ip", dim=v.shape[1])
    index.init_index(max_elements=len(v), ef_construction=200, M=32, random_seed=100)
    c0 = time.process_time()
    index.add_items(v, np.arange(len(v)), num_threads=threads)
    return {"cpu_s": time.process_time() - c0}


def time_cells(v: np.ndarray) -> dict[str, Any]:
    from memstore_index import CellStore, HashEmbedder, IndexEntry
    from memstore_index._vectorfile import StoredVector

    cells = CellStore(HashEmbedder(dim=v.shape[1]))
    rows = [StoredVector(IndexEntry(f"v{i:06d}"), -1, f"h{i}", "", x) for i, x in enumerate(v)]
    c0 = time.process_time()
    cells.apply(rows)
    cpu = time.process_time() - c0
    q = v[0]
    cells.search_vector(q, 10)
    times = []
    for _ in range(200):
        cells._generation += 1  # no remembered walk: every search walks
        t0 = time.perf_counter()
        cells.search_vector(q, 10)
        times.append(time.perf_counter() - t0)
    graph = int(cells._hnsw.get_current_count()) if cells._hnsw is not None else 0
    after = []
    for j in range(30):  # one more copy of the query's vector, then the search
        cells.apply([StoredVector(IndexEntry(f"w{j:04d}"), -1, f"w{j}", "", q)])
        t0 = time.perf_counter()
        cells.search_vector(q, 10)
        after.append(time.perf_counter() - t0)
    cells.close()
    return {
        "cpu_s": cpu,
        "search_us": 1e6 * statistics.median(times),
        "search_after_write_us": 1e6 * statistics.median(after),
        "graph_nodes": graph,
    }


def time_memory(texts: list[str]) -> dict[str, Any]:
    from memstore import Memory
    from memstore_index import HashEmbedder

    with tempfile.TemporaryDirectory() as d, Memory(d, embedder=HashEmbedder()) as m:
        c0 = time.process_time()
        m.add_many(texts)
        return {"cpu_s": time.process_time() - c0}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="1000,5000,10000,20000")
    p.add_argument("--corpora", default="distinct,identical,few5,near")
    p.add_argument("--layers", default="hnswlib,cells,memory")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--threads", type=int, default=1, help="hnswlib layer only")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    logging.disable(logging.WARNING)  # the hash embedder's "lexical only" notice
    rows = []
    for corpus in args.corpora.split(","):
        for n in map(int, args.sizes.split(",")):
            for layer in args.layers.split(","):
                rng = np.random.default_rng(0)
                if layer == "memory":
                    if corpus not in TEXTS:
                        continue
                    got = time_memory(TEXTS[corpus](n, rng))
                elif layer == "hnswlib":
                    got = time_hnswlib(vectors(corpus, n, args.dim, rng), args.threads)
                else:
                    got = time_cells(vectors(corpus, n, args.dim, rng))
                row = {"corpus": corpus, "n": n, "layer": layer, **got}
                rows.append(row)
                print(
                    f"{corpus:9s} n={n:6d} {layer:8s} cpu={got['cpu_s']:7.2f}s"
                    + (f" search={got['search_us']:7.0f}us" if "search_us" in got else "")
                    + (
                        f" after a write={got['search_after_write_us']:7.0f}us"
                        if "search_after_write_us" in got
                        else ""
                    )
                    + (f" graph={got['graph_nodes']}" if "graph_nodes" in got else ""),
                    flush=True,
                )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
