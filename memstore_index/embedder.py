"""The :class:`Embedder` protocol, its errors, and :func:`default_embedder`.

An embedder turns a batch of texts into one unit-length ``float32`` row each.
Everything downstream (the vector index, cosine scoring) relies on three
promises, which every embedder shipped here keeps and the tests check:

* ``embed(texts)`` returns shape ``(len(texts), dim)``, dtype ``float32``;
  an empty batch returns shape ``(0, dim)``.
* Every row has unit L2 norm, **including the row for an empty string**: no
  embedder returns a zero vector, so cosine similarity is always defined.
* A text embeds to the same vector whatever else is in its batch.

``model_id`` names the vector space. Vectors made under one ``model_id`` must
never be compared with vectors made under another, so an index stores it next
to its vectors and refuses a mismatch.

>>> from memstore_index.hash_embedder import HashEmbedder
>>> emb: Embedder = HashEmbedder(dim=64)
>>> isinstance(emb, Embedder)
True
>>> emb.embed(["payment api timeout", ""]).shape
(2, 64)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memstore.errors import MemstoreError

__all__ = [
    "Embedder",
    "EmbedderConfigError",
    "EmbedderInputError",
    "EmbeddingError",
    "check_texts",
    "default_embedder",
    "normalize_rows",
]

logger = logging.getLogger("memstore")


class EmbeddingError(MemstoreError, RuntimeError):
    """An embedding could not be produced: the model or the provider failed.

    ``status_code`` is the provider's HTTP status when there was one. The
    message never contains a provider's response body or credentials.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class EmbedderConfigError(MemstoreError, ValueError):
    """An embedder was constructed with an invalid setting (the message names it)."""


class EmbedderInputError(MemstoreError, TypeError):
    """``embed`` was given something other than a sequence of strings."""


@runtime_checkable
class Embedder(Protocol):
    """Anything that embeds a batch of texts into unit-length float32 rows.

    Plain attributes satisfy the two properties: a class that sets
    ``self.model_id`` and ``self.dim`` in ``__init__`` is an :class:`Embedder`.
    """

    @property
    def model_id(self) -> str:
        """The vector space: equal ids mean comparable vectors."""
        ...

    @property
    def dim(self) -> int:
        """The length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length row per text, shape ``(len(texts), dim)``, dtype float32."""
        ...


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or :class:`EmbedderInputError` naming the bad element.

    A bare ``str`` is refused: it is a sequence of characters, and embedding
    each character separately is never what the caller meant.
    """
    if isinstance(texts, str | bytes):
        raise EmbedderInputError(
            f"embed() takes a sequence of strings, got a single {type(texts).__name__}; "
            "wrap it in a list"
        )
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise EmbedderInputError(f"texts[{i}] is {type(t).__name__}, not str")
    return out


def normalize_rows(vectors: npt.NDArray[Any], what: str) -> npt.NDArray[np.float32]:
    """``vectors`` scaled to unit L2 norm per row, as float32.

    Normalisation runs in float64 so the float32 result is unit length to
    within float32 rounding. A row that is not finite or has zero norm cannot
    be normalised: :class:`EmbeddingError` names ``what`` produced it.
    """
    v: npt.NDArray[np.float64] = np.asarray(vectors, dtype=np.float64)
    if not np.isfinite(v).all():
        raise EmbeddingError(f"{what} returned a vector with non-finite values")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    if v.shape[0] and not (norms > 0.0).all():
        raise EmbeddingError(f"{what} returned a zero vector, which has no direction")
    out: npt.NDArray[np.float32] = (v / norms).astype(np.float32)
    return out


def default_embedder() -> Embedder:
    """The best embedder this installation can run offline.

    The local all-MiniLM-L6-v2 model (:class:`~memstore_index.onnx_embedder.OnnxMiniLMEmbedder`)
    when the ``embed`` extra is installed; otherwise a :class:`~memstore_index.hash_embedder.
    HashEmbedder`, with a warning on the ``memstore`` logger that semantic search is only
    as good as lexical matching. Loading the model costs about half a second.

    :raises EmbeddingError: the extra is installed but the model files fail
        their integrity check (a broken install is reported, not papered over).
    """
    # Imported here, not at the top: both modules import this one.
    from memstore_index import onnx_embedder
    from memstore_index.hash_embedder import HashEmbedder

    if onnx_embedder.AVAILABLE:
        return onnx_embedder.OnnxMiniLMEmbedder()
    logger.warning(
        "memstore: the local embedding model is not installed (%s); using HashEmbedder, "
        "so semantic search is lexical-quality only. For real semantic search: %s",
        onnx_embedder.MISSING,
        onnx_embedder.INSTALL_HINT,
    )
    return HashEmbedder()
