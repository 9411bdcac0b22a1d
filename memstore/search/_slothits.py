"""A vector search's hits as two columns over the caller's slots: what the lean fusion reads.

The semantic channel hands the fusion a couple of hundred hits per search. As
``(entry, similarity)`` pairs each one costs a tuple, an attribute read and a
dictionary look-up of its id (on objects scattered through memory) before the
lean fusion (:class:`~memstore.search._lean.LeanFusion`) turns it back into an
integer slot of its snapshot. An index that knows the snapshot's ``id -> slot``
dictionary can hand the slots over directly, as an array, with the similarities
as another (``memstore_index``'s ``search_slots``): one gather per search.

:class:`SlotHits` is still a sequence of pairs for any other reader; the pairs
are made on first use (the index's entries as they stand then).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

__all__ = ["SlotHits"]


class SlotHits(Sequence[tuple[Any, float]]):
    """Vector hits, best first: ``slots`` (-1: the mapping does not hold the id) and ``sims``.

    ``slots`` are the values of the caller's ``id -> slot`` mapping, which may
    run past a snapshot's length (a later snapshot's ids): the reader masks them.

    >>> hits = SlotHits(np.array([4, -1]), np.array([0.9, 0.5]), lambda: [("a", 0.9), ("b", 0.5)])
    >>> len(hits), hits[1]
    (2, ('b', 0.5))
    """

    __slots__ = ("_made", "_pairs", "sims", "slots")

    def __init__(
        self,
        slots: npt.NDArray[np.intp],
        sims: npt.NDArray[np.float64],
        pairs: Callable[[], list[tuple[Any, float]]],
    ) -> None:
        self.slots = slots
        self.sims = sims
        self._pairs = pairs
        self._made: list[tuple[Any, float]] | None = None

    def __len__(self) -> int:
        return int(self.slots.size)

    @overload
    def __getitem__(self, i: int) -> tuple[Any, float]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[Any, float]]: ...
    def __getitem__(self, i: int | slice) -> tuple[Any, float] | Sequence[tuple[Any, float]]:
        made = self._made
        if made is None:
            made = self._made = self._pairs()
        return made[i]
