"""Each index label's slot in a caller's ``id -> slot`` dictionary, learnt as searches meet it.

What lets :meth:`~memstore_index._search.Searching.search_slots` hand a search's
hits over as an array of the caller's slots (the lean fusion's snapshot slots,
:mod:`memstore.search._slothits`) without reading an entry per hit.

A label names one id for as long as the index's entry list is the same list
(a label is never given to another id; a compaction or a load makes a new
list), and a slot dictionary that grows along a chain of derived snapshots
never changes the slot of an id it holds (:class:`memstore._search_snapshot.SearchSnapshot`).
So a label's slot, once looked up, stays right for that pair of objects; the
table is kept for the last pair searched with and starts afresh for another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat

import numpy as np
import numpy.typing as npt

from memstore_index.entry import IndexEntry

__all__ = ["UNKNOWN", "SlotTable"]

UNKNOWN = -2
"""A table row not looked up yet (or whose id the dictionary did not hold then)."""


class SlotTable:
    """The slots of ``entries``' labels in ``slot``, filled in as labels are asked for.

    Read and written under the index's lock only.

    >>> e = [IndexEntry("a"), None, IndexEntry("c")]
    >>> t = SlotTable({"c": 0}, e)
    >>> t.slots(np.array([2, 0], np.uint64)).tolist(), t.table.tolist()
    ([0, -1], [-2, -2, 0])
    """

    __slots__ = ("entries", "slot", "table")

    def __init__(self, slot: Mapping[str, int], entries: Sequence[IndexEntry | None]) -> None:
        self.slot = slot
        self.entries = entries
        self.table = np.empty(0, np.intp)

    def holds(self, slot: Mapping[str, int], entries: Sequence[IndexEntry | None]) -> bool:
        """Whether this table is for that dictionary and that entry list (the objects)."""
        return self.slot is slot and self.entries is entries

    def slots(self, labels: npt.NDArray[np.uint64] | npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
        """Each live label's slot, -1 where ``slot`` does not hold its id.

        One gather for the labels met before; an entry read and a look-up each
        for the others (a server's searches soon meet few new ones).
        """
        table = self.table
        if labels.size == 0:
            return np.empty(0, np.intp)
        top = int(labels.max()) + 1
        if top > table.size:
            grown = np.full(max(top, 2 * table.size, len(self.entries)), UNKNOWN, np.intp)
            grown[: table.size] = table
            table = self.table = grown
        out: npt.NDArray[np.intp] = table[labels]
        unknown = np.flatnonzero(out == UNKNOWN)
        if unknown.size:
            new = labels[unknown]
            met = map(self.entries.__getitem__, new.tolist())  # live labels: never None
            ids = [e.id for e in met if e is not None]
            assert len(ids) == new.size
            found = np.fromiter(map(self.slot.get, ids, repeat(-1)), np.intp, new.size)
            out[unknown] = found
            held = found >= 0  # an id not held yet may be held by a later snapshot of the chain
            table[new[held]] = found[held]
        return out
