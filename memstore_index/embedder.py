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
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memstore.errors import MemstoreError

__all__ = [
    "MAX_DIM",
    "Embedder",
    "EmbedderConfigError",
    "EmbedderInputError",
    "EmbeddingError",
    "check_dim",
    "check_texts",
    "default_embedder",
    "normalize_rows",
    "unit_rows",
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


MAX_DIM = 65_536
"""The longest vector an embedder may give: 16 times the widest text models' (4,096).

A CellStore keeps ``dim`` float32s per item and per slot of its graph, so a
dimension in the millions is a mistake (a configuration read as bytes, a
product of two settings), not a model: it is refused with a clear error before
anything is allocated instead of failing later as an allocation."""


def check_dim(dim: object, who: str) -> int:
    """``dim`` as an int in ``[1, MAX_DIM]``, or :class:`EmbedderConfigError` naming ``who``.

    >>> check_dim(384, "HashEmbedder")
    384
    >>> check_dim(10**9, "an embedder's")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    memstore_index.embedder.EmbedderConfigError: an embedder's dim must be ... got 1000000000
    """
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or not 1 <= dim <= MAX_DIM:
        raise EmbedderConfigError(
            f"{who} dim must be a whole number in [1, {MAX_DIM}], got {dim!r}"
        )
    return int(dim)


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, or :class:`EmbedderInputError` naming the bad element.

    A bare ``str`` is refused: it is a sequence of characters, and embedding
    each character separately is never what the caller meant. So is anything
    that is not iterable (``None``), and a mapping (whose keys would be
    embedded).
    """
    if isinstance(texts, Mapping):  # its keys are not what the caller meant to embed
        raise EmbedderInputError(
            f"embed() takes a sequence of strings, got a {type(texts).__name__}"
        )
    if isinstance(texts, str | bytes | bytearray):
        raise EmbedderInputError(
            f"embed() takes a sequence of strings, got a single {type(texts).__name__}; "
            "wrap it in a list"
        )
    try:
        out = list(texts)
    except TypeError:
        raise EmbedderInputError(
            f"embed() takes a sequence of strings, got {type(texts).__name__}"
        ) from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise EmbedderInputError(f"texts[{i}] is {type(t).__name__}, not str")
    return out


def normalize_rows(vectors: npt.ArrayLike, what: str) -> npt.NDArray[np.float32]:
    """``vectors`` scaled to unit L2 norm per row, as float32.

    Normalisation runs in float64 so the float32 result is unit length to
    within float32 rounding, and cannot overflow (see :func:`unit_rows`): a
    row of ``1e200`` values is a direction like any other. A row that is not
    finite (a number past float64's range included) or is all zeros cannot be
    normalised: :class:`EmbeddingError` names ``what`` produced it.

    >>> normalize_rows([[1e200, 1e200]], "the provider").tolist()
    [[0.7071067690849304, 0.7071067690849304]]
    >>> normalize_rows([[0.0, 0.0]], "the provider")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memstore_index.embedder.EmbeddingError: the provider returned a zero vector (row 0), ...
    """
    try:
        v: npt.NDArray[np.float64] = np.asarray(vectors, dtype=np.float64)
    except OverflowError:  # an integer past float64's range (a 400-digit number)
        raise EmbeddingError(f"{what} returned a vector with non-finite values") from None
    return unit_rows(v, what)


def unit_rows(v: npt.NDArray[np.floating[Any]], what: str) -> npt.NDArray[np.float32]:
    """Each row of the float32 or float64 matrix ``v`` at unit L2 norm, as float32.

    The arithmetic runs in ``v``'s own precision. Each row is first scaled by
    the power of two that brings its largest magnitude into [0.5, 1): that
    changes only exponents, so it is exact, and a row of ordinary size comes
    out bit for bit as it would without it; but no square in the norm can
    overflow (a float32 row of ``1e30`` values has an infinite plain norm) or
    underflow to zero (a row of ``1e-25`` values has a zero one), either of
    which would turn a valid direction into a zero vector. ``O(rows x dim)``,
    vectorised (a few passes over ``v``, no Python loop).

    :raises EmbeddingError: a row holds a NaN or an infinity, or is all zeros
        (it has no direction); the message names ``what`` returned it.
    """
    if not np.isfinite(v).all():
        raise EmbeddingError(f"{what} returned a vector with non-finite values")
    top = np.abs(v).max(axis=1, keepdims=True, initial=0.0)
    if not (top > 0.0).all():
        row = int(np.argmin(top[:, 0]))
        raise EmbeddingError(
            f"{what} returned a zero vector (row {row}), which has no direction; "
            "an embedder must give every text, the empty one included, a non-zero vector"
        )
    _, exponent = np.frexp(top)
    scaled = np.ldexp(v, -exponent)
    norms = np.linalg.norm(scaled, axis=1, keepdims=True)
    out: npt.NDArray[np.float32] = (scaled / norms).astype(np.float32)
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
