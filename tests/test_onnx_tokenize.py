"""The local model's tokenising rule: short batches one text at a time, long ones in a batch.

:class:`~memstore_index.onnx_embedder.OnnxMiniLMEmbedder` tokenises a batch
of at most :data:`~memstore_index.onnx_embedder.ONE_BY_ONE_CHARS` characters
text by text (on the calling thread, holding the GIL), and a longer one with
``encode_batch`` (a thread pool, the GIL let go). Both ways must give the same
word pieces, so that a text's vector does not depend on the batch it came in.
Skipped when the ``embed`` extra is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore_index import onnx_embedder as onnx_mod
from memstore_index.embedder import EmbedderInputError

pytestmark = pytest.mark.skipif(not onnx_mod.AVAILABLE, reason=str(onnx_mod.MISSING))


@pytest.fixture(scope="module")
def model() -> onnx_mod.OnnxMiniLMEmbedder:
    return onnx_mod.OnnxMiniLMEmbedder(batch_size=8, threads=1)


# Words the model's vocabulary splits in several ways (accents, CJK, digits,
# emoji, punctuation) and arbitrary text without lone surrogates.
_WORDS = st.sampled_from(
    ["the", "cat", "Ångström", "naïve", "東京", "2026-12-05", "🙂", "x" * 40, "re-use", "ÉCOLE"]
)
_TEXTS = st.one_of(
    st.lists(_WORDS, max_size=12).map(" ".join),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=60),
)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(_TEXTS, min_size=1, max_size=12))
def test_one_by_one_gives_the_word_pieces_of_the_batch_call(
    model: onnx_mod.OnnxMiniLMEmbedder, texts: list[str]
) -> None:
    assert sum(map(len, texts)) <= onnx_mod.ONE_BY_ONE_CHARS  # the one-by-one path
    tok = model._tokenizer
    one_by_one = [tok.encode(t).ids for t in texts]
    assert one_by_one == [e.ids for e in tok.encode_batch(texts)]  # truncation, no padding
    assert [e.ids for e in model._encode(texts)] == one_by_one


def test_a_long_batch_takes_the_batch_call_and_gives_the_same_vectors(
    model: onnx_mod.OnnxMiniLMEmbedder,
) -> None:
    texts = [f"note {n}: the meeting moved to the {n}th floor, bring the slides" for n in range(40)]
    assert sum(map(len, texts)) > onnx_mod.ONE_BY_ONE_CHARS  # the encode_batch path
    whole = model.embed(texts)
    pieces = np.vstack([model.embed(texts[i : i + 4]) for i in range(0, len(texts), 4)])
    assert sum(map(len, texts[:4])) <= onnx_mod.ONE_BY_ONE_CHARS  # each piece one by one
    np.testing.assert_allclose(whole, pieces, atol=1e-5)
    assert [e.ids for e in model._encode(texts)] == [model._tokenizer.encode(t).ids for t in texts]


def test_a_text_with_no_utf8_form_is_refused_on_either_path(
    model: onnx_mod.OnnxMiniLMEmbedder,
) -> None:
    bad = "a lone \ud800 surrogate"
    with pytest.raises(EmbedderInputError, match="lone surrogate"):
        model.embed(["fine", bad])
    with pytest.raises(EmbedderInputError, match="lone surrogate"):
        model.embed(["y" * onnx_mod.ONE_BY_ONE_CHARS, bad])
