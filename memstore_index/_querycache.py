"""The query vectors a CellStore computed lately, so a query asked again is not embedded again.

A search server sees the same questions over and over: an agent re-asks what
it asked a turn ago, a client retries, a dashboard polls. Embedding a query is
most of what a semantic search costs with a local model (about half of an
HTTP recall's CPU with MiniLM), and a query's vector depends on nothing but
its text and the model: the CellStore's embedder is fixed for its life, so a
remembered vector is exactly the one the model would compute again.

:class:`QueryCache` keeps the last ``capacity`` distinct query texts with
their unit vectors (least recently used out first). Rows are stored
read-only and handed out as copies, so nothing a caller does to a vector it
was given reaches the cache. It is safe for concurrent use (one lock around
each lookup and insertion; the embedding itself runs outside it).

>>> import numpy as np
>>> cache = QueryCache(2)
>>> cache.put(["a", "b"], np.eye(2, dtype=np.float32))
>>> [None if v is None else v.tolist() for v in cache.get(["b", "c"])]
[[0.0, 1.0], None]
>>> cache.put(["c"], np.ones((1, 2), np.float32))  # "a" is the least recently used
>>> [v is None for v in cache.get(["a", "b", "c"])]
[True, False, False]
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_QUERY_CACHE", "QueryCache"]

DEFAULT_QUERY_CACHE = 1024
"""Query vectors a CellStore remembers by default (1.5 MB at 384 dimensions)."""

_Vector = npt.NDArray[np.float32]


class QueryCache:
    """A thread-safe LRU map from query text to its unit vector, of at least one entry."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"a query cache holds at least one vector, got {capacity!r}")
        self._capacity = capacity
        self._rows: OrderedDict[str, _Vector] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        """Queries answered from the cache so far."""
        self.misses = 0
        """Queries that had to be embedded so far."""

    @property
    def capacity(self) -> int:
        """The most query vectors kept."""
        return self._capacity

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, texts: Sequence[str]) -> list[_Vector | None]:
        """A copy of each text's vector, or ``None`` where it is not cached."""
        return self._look_up(texts, count_misses=True)

    def peek(self, texts: Sequence[str]) -> list[_Vector | None]:
        """Like :meth:`get`, but a text not cached is not counted as a miss.

        For a caller that only asks which vectors are at hand and has the others
        embedded later (through :meth:`get` again, which counts them then).
        """
        return self._look_up(texts, count_misses=False)

    def _look_up(self, texts: Sequence[str], *, count_misses: bool) -> list[_Vector | None]:
        out: list[_Vector | None] = []
        with self._lock:
            rows = self._rows
            for text in texts:
                row = rows.get(text)
                if row is None:
                    if count_misses:
                        self.misses += 1
                    out.append(None)
                else:
                    rows.move_to_end(text)
                    self.hits += 1
                    out.append(row.copy())
        return out

    def put(self, texts: Sequence[str], vectors: _Vector) -> None:
        """Remember ``vectors[i]`` as the vector of ``texts[i]`` (most recently used)."""
        with self._lock:
            rows = self._rows
            for text, vec in zip(texts, vectors, strict=True):
                row = vec.copy()
                row.flags.writeable = False
                rows[text] = row
                rows.move_to_end(text)
            while len(rows) > self._capacity:
                rows.popitem(last=False)

    def clear(self) -> None:
        """Forget every vector."""
        with self._lock:
            self._rows.clear()
