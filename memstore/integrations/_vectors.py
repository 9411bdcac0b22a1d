"""Field vectors for the LangGraph store: unit rows, their text form, and the engine bridge.

LangGraph's stores score a hit by the cosine similarity of the query with the
best of the item's indexed fields. The store keeps one unit vector per indexed
text in the item's ``data`` (base64 float32, so it is journaled with the item
and needs no re-embedding after a restart), and scores are plain dot products.

:class:`FieldEmbedder` wraps whatever embeds (a LangChain ``Embeddings``, a
function, a memstore :class:`~memstore_index.Embedder`); :class:`EngineEmbedder`
lends the same model to the engine's vector index, so that the semantic channel
of the hybrid search and the reported scores live in one space.
"""

from __future__ import annotations

import base64
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from memstore.errors import MemstoreError

__all__ = ["EngineEmbedder", "FieldEmbedder", "decode_rows", "encode_rows", "unit_rows"]

Rows = npt.NDArray[np.float32]
_CACHE_TEXTS: Final = 256
"""How many recent document embeddings the engine bridge reuses (put embeds, then the index)."""


def unit_rows(rows: Any, dims: int) -> Rows:
    """``rows`` as a float32 ``(n, dims)`` array of unit rows (zero rows stay zero).

    >>> unit_rows([[3.0, 4.0], [0.0, 0.0]], 2).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    arr = np.asarray(rows, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2 or (arr.size and arr.shape[1] != dims):
        shape = "x".join(map(str, arr.shape))
        raise MemstoreError(
            f"the embedder returned vectors of shape {shape}, expected {dims} dimensions "
            "(index={'dims': ...} must match the model)"
        )
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    out: Rows = np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)
    return out


def encode_rows(rows: Rows) -> str:
    """Rows as text for an item's ``data`` (base64 of little-endian float32)."""
    return base64.b64encode(rows.astype("<f4").tobytes()).decode("ascii")


def decode_rows(text: str, dims: int) -> Rows:
    """The inverse of :func:`encode_rows`.

    >>> decode_rows(encode_rows(unit_rows([[1.0, 0.0]], 2)), 2).tolist()
    [[1.0, 0.0]]
    """
    flat = np.frombuffer(base64.b64decode(text), dtype="<f4")
    return flat.reshape(-1, dims).astype(np.float32)


class FieldEmbedder:
    """Unit vectors of documents and queries from one model, with its dimension checked.

    ``adocuments`` and ``aquery``, when given, are the model's coroutines (a
    LangChain ``Embeddings``' ``aembed_documents`` and ``aembed_query``): the
    store's ``abatch`` awaits them on the event loop, as LangGraph's stores do,
    so an async embedding function works there.
    """

    def __init__(
        self,
        documents: Callable[[list[str]], Any],
        query: Callable[[str], Any],
        dims: int,
        model_id: str,
        *,
        adocuments: Callable[[list[str]], Awaitable[Any]] | None = None,
        aquery: Callable[[str], Awaitable[Any]] | None = None,
    ) -> None:
        if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
            raise MemstoreError(f"index 'dims' must be a positive integer, got {dims!r}")
        self._documents = documents
        self._query = query
        self._adocuments = adocuments
        self._aquery = aquery
        self.dims = dims
        self.model_id = model_id

    @property
    def awaitable(self) -> bool:
        """Whether the model has coroutines (:meth:`adocuments`, :meth:`aquery`)."""
        return self._adocuments is not None and self._aquery is not None

    def documents(self, texts: Sequence[str]) -> Rows:
        """One unit row per text (one embedding call)."""
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        return _one_each(unit_rows(self._documents(list(texts)), self.dims), texts)

    def query(self, text: str) -> npt.NDArray[np.float32]:
        """The unit vector of a query."""
        row: npt.NDArray[np.float32] = unit_rows(self._query(text), self.dims)[0]
        return row

    async def adocuments(self, texts: Sequence[str]) -> Rows:
        """:meth:`documents` through the model's coroutine (needs :attr:`awaitable`)."""
        assert self._adocuments is not None
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        return _one_each(unit_rows(await self._adocuments(list(texts)), self.dims), texts)

    async def aquery(self, text: str) -> npt.NDArray[np.float32]:
        """:meth:`query` through the model's coroutine (needs :attr:`awaitable`)."""
        assert self._aquery is not None
        row: npt.NDArray[np.float32] = unit_rows(await self._aquery(text), self.dims)[0]
        return row


def _one_each(rows: Rows, texts: Sequence[str]) -> Rows:
    if len(rows) != len(texts):
        raise MemstoreError(
            f"the embedder returned {len(rows)} vectors for {len(texts)} texts; "
            "it must return one vector per text"
        )
    return rows


class EngineEmbedder:
    """A :class:`~memstore_index.Embedder` over a :class:`FieldEmbedder`, reusing known rows.

    The store embeds a batch's texts (each put's fields, and the joined text
    the engine's index embeds) in one call before the batch runs, and
    :meth:`holding` lends those rows to this embedder while the batch writes:
    the engine's index, which embeds in the write's thread, then never calls
    the model itself (it could not call an async one there). Rows of recent
    puts are kept too (:meth:`remember`), for the index's later catch-up.
    """

    def __init__(self, fields: FieldEmbedder) -> None:
        self._fields = fields
        self.model_id = f"langgraph:{fields.model_id}:{fields.dims}"
        self.dim = fields.dims
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, npt.NDArray[np.float32]] = OrderedDict()
        self._held: dict[str, tuple[npt.NDArray[np.float32], int]] = {}

    def remember(self, texts: Sequence[str], rows: Rows) -> None:
        """Offer rows just computed for ``texts`` (also under the engine's ``"\\n" + text``)."""
        with self._lock:
            for text, row in zip(texts, rows, strict=True):
                for key in (text, "\n" + text):
                    self._recent[key] = row
                    self._recent.move_to_end(key)
            while len(self._recent) > _CACHE_TEXTS:
                self._recent.popitem(last=False)

    @contextlib.contextmanager
    def holding(self, rows: Mapping[str, npt.NDArray[np.float32]]) -> Iterator[None]:
        """Lend ``rows`` (text -> unit row) to :meth:`embed` until the block ends."""
        with self._lock:
            for text, row in rows.items():
                _, n = self._held.get(text, (row, 0))
                self._held[text] = (row, n + 1)
        try:
            yield
        finally:
            with self._lock:
                for text in rows:
                    row, n = self._held[text]
                    if n > 1:
                        self._held[text] = (row, n - 1)
                    else:
                        del self._held[text]

    def _known(self, text: str) -> npt.NDArray[np.float32] | None:
        held = self._held.get(text)
        return held[0] if held is not None else self._recent.get(text)

    def embed(self, texts: Sequence[str]) -> Rows:
        """Unit rows for ``texts``; only the texts neither held nor recent reach the model."""
        out = np.zeros((len(texts), self.dim), np.float32)
        with self._lock:
            known = [self._known(t) for t in texts]
        missing = [i for i, row in enumerate(known) if row is None]
        if missing:
            fresh = self._fields.documents([texts[i] for i in missing])
            for i, row in zip(missing, fresh, strict=True):
                out[i] = row
        for i, row in enumerate(known):
            if row is not None:
                out[i] = row
        return out
