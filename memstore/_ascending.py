"""Ids in ascending order, lazily: the first few of a large set without sorting it all.

A walk over the links reads a hub's linkers in id order (so that where a
bounded walk stops does not depend on a set's iteration order), but a walk
that stops after a thousand of them has no use for the order of the other
99,000. :func:`ascending` heapifies a copy (linear) and pops the smallest
as they are asked for; once a good share has been asked for, it sorts
what is left and hands that out, so reading them all costs about what one
sort does.

>>> list(ascending({"c", "a", "b"}))
['a', 'b', 'c']
>>> from itertools import islice
>>> list(islice(ascending({f"s{n:03d}" for n in range(500)}), 3))
['s000', 's001', 's002']
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator
from typing import Final

__all__ = ["SORT_BELOW", "ascending"]

SORT_BELOW: Final = 256
"""Sets smaller than this are sorted at once (a heap saves nothing on so few)."""
_SORT_SHARE: Final = 16
"""Once 1/16 of the ids were popped, sort the rest: a pop costs more per id than a sort."""


def ascending(ids: Collection[str]) -> Iterator[str]:
    """``sorted(ids)``, produced lazily: ``k`` of ``n`` ids cost O(n + k log n), not O(n log n).

    ``ids`` is copied at the first ``next``, so a change to it afterwards is
    not seen.
    """
    if len(ids) < SORT_BELOW:
        yield from sorted(ids)
        return
    heap = list(ids)
    heapq.heapify(heap)
    for _ in range(len(heap) // _SORT_SHARE):
        yield heapq.heappop(heap)
    heap.sort()
    yield from heap
