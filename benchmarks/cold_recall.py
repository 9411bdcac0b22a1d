"""First-time against repeated recalls on the HTTP benchmark's store: CPU per query, in one process.

``http.py``'s recall phases ask about 499 distinct queries; in their first
seconds most are asked for the first time, and a first-time recall costs
about twice the CPU of a repeated one (the lexicon expands its tokens, the
journal is read for its hits' stamps, its vector is computed). This opens a
copy of ``http.py``'s preloaded folder (``--data-cache``: the same folders,
built by ``http.py`` or here), runs the server's recall (:class:`Verbs`, no
HTTP) for every distinct query once (*cold*), then twice more (*warm*), and
reports CPU per query (``time.process_time``). ``--split`` adds the time
spent in the lexicon's token matching and in the stamp reads, per query.

    python benchmarks/cold_recall.py --data-cache DIR [--embedder hash] [--split]
    python benchmarks/cold_recall.py --data-cache DIR --checkout ../main  # the A/B's other side

``--checkout DIR`` measures another checkout's memstore (with this script).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _timed(owner: Any, name: str, spent: Counter[str]) -> None:
    """Replace method ``name`` of class ``owner`` by one adding its CPU time to ``spent``."""
    inner: Callable[..., Any] = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[name] += time.process_time() - t0

    setattr(owner, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--data-cache", type=Path, required=True, help="http.py's --data-cache")
    ap.add_argument("--embedder", default="hash")
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--split", action="store_true", help="time token matching and stamp reads")
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the checkout to measure")
    args = ap.parse_args()
    root = args.checkout.resolve()
    sys.path[:0] = [str(root), str(root / "benchmarks")]
    spec = importlib.util.spec_from_file_location("http_bench", root / "benchmarks" / "http.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["http_bench"] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    memory_mod: Any = importlib.import_module("memstore")
    verbs_mod: Any = importlib.import_module("memstore.protocol.verbs")
    models: Any = importlib.import_module("memstore.protocol.models")
    print(f"memstore from {memory_mod.__file__}", file=sys.stderr)
    spent: Counter[str] = Counter()
    if args.split:
        _timed(importlib.import_module("memstore.lexical").Lexicon, "match_token", spent)
        _timed(verbs_mod.Verbs, "_valid_froms", spent)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        queries = bench.preload_cached(data, args.embedder, args.chunks, args.data_cache)
        distinct = list(dict.fromkeys(queries))
        reqs = [models.RecallRequest.model_validate({"query": q, "k": 10}) for q in distinct]
        memory = memory_mod.Memory(data, embedder=args.embedder, hub=True)
        verbs = verbs_mod.Verbs(memory)
        try:
            for label in ("cold", "warm", "warm"):
                spent.clear()
                times = []
                for req in reqs:
                    t0 = time.process_time()
                    verbs.recall(bench.TENANT, req)
                    times.append(time.process_time() - t0)
                parts = ", ".join(f"{k} {v / len(reqs) * 1e3:.3f}" for k, v in spent.items())
                print(
                    f"{label}: {sum(times) / len(reqs) * 1e3:.3f} ms CPU/query (median "
                    f"{statistics.median(times) * 1e3:.3f}; {len(reqs)} queries)"
                    + (f"; of which ms/query: {parts}" if parts else "")
                )
        finally:
            memory.close()


if __name__ == "__main__":
    main()
