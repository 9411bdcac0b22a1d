"""What the vector index does with an embedder's answer: check it, never trust it.

A custom embedder (anything with ``model_id``, ``dim`` and ``embed``) can
break the protocol's promises (docs/embedders.md): too few or too many rows,
a zero row, rows so large or so small that their float norm overflows or
underflows. The index checks every answer before it indexes anything:

* a wrong row count or a zero row is an ``EmbeddingError`` (a
  ``MemstoreError``), and the write that needed the vectors is refused and
  changes nothing (not a builtin ``ValueError`` from pairing texts with rows);
* a row of any finite, non-zero size is its direction: ``v * 1e30`` is
  stored as ``v``, never as a zero vector.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Memory, MemstoreError
from memstore_index import CellStore, HashEmbedder, IndexEntry
from memstore_index.embedder import EmbeddingError

DIM = 16


class Misbehaving:
    """HashEmbedder's vectors, answered wrongly once ``mode`` is set.

    ``short`` drops the last row, ``long`` doubles the batch, ``zero`` zeroes
    every row, ``scale`` multiplies the rows by ``factor`` in ``dtype``.
    """

    def __init__(self) -> None:
        self.inner = HashEmbedder(dim=DIM)
        self.model_id = "misbehaving-16"
        self.dim = DIM
        self.mode = ""
        self.factor = 1.0
        self.dtype: type[np.floating[npt.NBitBase]] = np.float64

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = self.inner.embed(texts)
        if self.mode == "short":
            return rows[:-1]
        if self.mode == "long":
            return np.vstack([rows, rows])
        if self.mode == "zero":
            return np.zeros_like(rows)
        if self.mode == "scale":
            out: npt.NDArray[np.float32] = rows.astype(self.dtype) * self.factor
            return out
        return rows


@pytest.mark.parametrize("mode", ["short", "long", "zero"])
def test_a_bad_answer_refuses_the_write_and_changes_nothing(tmp_path: Path, mode: str) -> None:
    emb = Misbehaving()
    with Memory(tmp_path, embedder=emb) as mem:
        kept = mem.add("the ledger pool ran dry at peak")
        emb.mode = mode
        match = "zero vector" if mode == "zero" else r"returned \d+ vectors for 1 texts"
        with pytest.raises(EmbeddingError, match=match):
            mem.add("the payment api timed out")
        with pytest.raises(EmbeddingError):
            mem.add_many(["one more note", "and another"])
        with pytest.raises(EmbeddingError):
            mem.update(kept.id, content="a new text for the first note")
        with pytest.raises(EmbeddingError, match=match.replace("1 texts", "2 texts")):
            mem.embed_queries(["ledger", "payment"])
        assert [it.id for it in mem.store.items()] == [kept.id]
        got = mem.get(kept.id)
        assert got is not None and got.content == "the ledger pool ran dry at peak"
        assert len(mem.history(kept.id)) == 1
        assert mem.cells is not None and mem.cells.ids() == [kept.id]
        assert mem.cells.pending == 0
        emb.mode = ""
        mem.cells._check(mem.store, vectors=True)
    with Memory(tmp_path, embedder=emb) as again:  # nothing half-written on disk either
        assert [it.id for it in again.store.items()] == [kept.id]
        assert again.cells is not None
        again.cells._check(again.store, vectors=True)


def test_an_embedding_error_is_a_memstore_error() -> None:
    emb = Misbehaving()
    emb.mode = "short"
    with Memory(embedder=emb) as mem, pytest.raises(MemstoreError):
        mem.add("hello")


@pytest.mark.parametrize("mode", ["short", "zero"])
def test_reembed_refuses_a_bad_answer_and_keeps_the_file(tmp_path: Path, mode: str) -> None:
    cells = CellStore(HashEmbedder(dim=DIM), path=tmp_path)
    cells.upsert(IndexEntry("a"), "alpha")
    cells.upsert(IndexEntry("b"), "beta")
    before = cells.vector("a")
    cells.close()
    emb = Misbehaving()
    emb.mode = mode
    with pytest.raises(EmbeddingError):
        CellStore.reembed(tmp_path, emb)
    reopened = CellStore(HashEmbedder(dim=DIM), path=tmp_path)  # still the old model's file
    assert reopened.ids() == ["a", "b"]
    assert np.array_equal(reopened.vector("a"), before)  # type: ignore[arg-type]
    reopened.close()


# float32 rows whose squares overflow (~1e19 and up) or underflow (~1e-19 and down), and
# float64 ones far past float32's range: each is a valid direction.
SCALES = st.one_of(
    st.tuples(st.just(np.float32), st.integers(-30, 30)),
    st.tuples(st.just(np.float64), st.integers(-290, 290)),
)


@settings(max_examples=60, deadline=None)
@given(scale=SCALES, text=st.sampled_from(["ledger pool", "payment api timeout", ""]))
def test_a_row_of_any_size_is_stored_as_its_direction(
    scale: tuple[type[np.floating[npt.NBitBase]], int], text: str
) -> None:
    dtype, exponent = scale
    emb = Misbehaving()
    emb.mode, emb.dtype, emb.factor = "scale", dtype, 10.0**exponent
    cells = CellStore(emb)
    cells.upsert(IndexEntry("a"), text)
    got = cells.vector("a")
    want = HashEmbedder(dim=DIM).embed([text])[0]
    assert got is not None
    assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-6
    np.testing.assert_allclose(got, want, atol=1e-6)
    np.testing.assert_allclose(cells.embed_query(text), want, atol=1e-6)
