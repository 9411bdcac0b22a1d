"""How the local model takes a batch: its tokenising rule, and its cut into model runs.

:class:`~memstore_index.onnx_embedder.OnnxMiniLMEmbedder` tokenises a batch
of at most :data:`~memstore_index.onnx_embedder.ONE_BY_ONE_CHARS` characters
text by text (on the calling thread, holding the GIL), and a longer one with
``encode_batch`` (a thread pool, the GIL let go). Both ways must give the same
word pieces, so that a text's vector does not depend on the batch it came in.

It then cuts the length-sorted texts into runs where
:func:`~memstore_index.onnx_embedder.runs` says the padded work is least: that
function is checked against every possible cut of small inputs. The model's
tests are skipped when the ``embed`` extra is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore_index import onnx_embedder as onnx_mod
from memstore_index.embedder import EmbedderInputError
from memstore_index.onnx_embedder import runs


def _cost(lengths: list[int], cut: list[tuple[int, int]], run_tokens: int) -> int:
    return sum(run_tokens + (stop - start) * lengths[stop - 1] for start, stop in cut)


def _every_cut(n: int, most: int) -> list[list[tuple[int, int]]]:
    """Each way to cut ``n`` texts into consecutive runs of 1..``most`` (the oracle)."""
    if n == 0:
        return [[]]
    out = []
    for last in range(1, min(most, n) + 1):
        for head in _every_cut(n - last, most):
            out.append([*head, (n - last, n)])
    return out


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 256), max_size=9).map(sorted),
    most=st.integers(1, 10),
    run_tokens=st.integers(0, 40),
)
def test_runs_is_the_cheapest_cut(lengths: list[int], most: int, run_tokens: int) -> None:
    cut = runs(lengths, most, run_tokens)
    # A cover of the texts, in order, no run over ``most``.
    assert [i for start, stop in cut for i in range(start, stop)] == list(range(len(lengths)))
    assert all(1 <= stop - start <= most for start, stop in cut)
    least = min(_cost(lengths, c, run_tokens) for c in _every_cut(len(lengths), most))
    assert _cost(lengths, cut, run_tokens) == least


@settings(max_examples=100, deadline=None)
@given(lengths=st.lists(st.integers(1, 256), max_size=80).map(sorted), most=st.integers(1, 32))
def test_runs_never_cost_more_than_fixed_chunks(lengths: list[int], most: int) -> None:
    """The rule before: chunks of ``most`` in length order."""
    cut = runs(lengths, most)
    chunks = [(i, min(i + most, len(lengths))) for i in range(0, len(lengths), most)]
    tokens = onnx_mod.RUN_TOKENS
    assert _cost(lengths, cut, tokens) <= _cost(lengths, chunks, tokens)


def test_runs_keeps_a_batch_of_like_lengths_whole_and_cuts_a_mixed_one() -> None:
    assert runs([7, 7, 8, 8], most=32) == [(0, 4)]
    assert runs([5] * 6 + [200] * 2, most=32) == [(0, 6), (6, 8)]
    assert runs([5] * 6 + [200] * 2, most=32, run_tokens=2000) == [(0, 8)]


@pytest.fixture(scope="module")
def model() -> onnx_mod.OnnxMiniLMEmbedder:
    if not onnx_mod.AVAILABLE:
        pytest.skip(str(onnx_mod.MISSING))
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


def test_a_text_gets_its_own_vector_whatever_runs_its_batch_is_cut_into(
    model: onnx_mod.OnnxMiniLMEmbedder,
) -> None:
    """Short and long texts together: cut into several runs, each row as if embedded alone."""
    texts = ["a", "cats", "the cat sat on the mat"] * 3 + ["word " * 150, "more words " * 60]
    lengths = sorted(len(e.ids) for e in model._encode(texts))
    assert len(runs(lengths, model.batch_size)) > 1  # more than one run, as in a server batch
    together = model.embed(texts)
    alone = np.vstack([model.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
