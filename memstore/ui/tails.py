"""Reads of one item's history that stop at what the inspector shows, not at its first version.

An item written ten thousand times has ten thousand versions; the inspector
shows at most a hundred of them, and of a neighbour only its state at one
moment. :func:`tail` reads the newest versions
(:meth:`~memstore.journal.JournalBase.history_tail`, one read with a count
of the rest), and :func:`state_at` reads back from the newest only as far as
the moment asked about: a moment near now costs a short read, whatever the
length of the history.

>>> import tempfile
>>> from memstore import Memory
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
...     a = mem.add("v0", partition="acme")
...     then = mem.journal.head()
...     for n in range(1, 40):
...         _ = mem.update(a.id, content=f"v{n}")
...     state_at(mem, a.id, then).content, tail(mem, a.id, 2).total
('v0', 40)
"""

from __future__ import annotations

from typing import Final

from memstore.item import Item
from memstore.journal import HistoryTail, JournalBase, Lsn
from memstore.journal._tail import MAX_TAIL
from memstore.memory import Memory

__all__ = ["FIRST_READ", "GROWTH", "MAX_TAIL", "state_at", "tail"]

FIRST_READ: Final = 8
"""Versions :func:`state_at` reads first (most items have fewer: one read, complete)."""
GROWTH: Final = 4
"""How many times more versions each further read of a reader going back takes."""


def tail(memory: Memory, id: str, newest: int) -> HistoryTail:
    """The newest ``newest`` versions of ``id`` and a summary of its history (one read).

    A journal of this package answers it without reading the older versions
    (:meth:`~memstore.journal.JournalBase.history_tail`); any other journal
    gives its whole history, and a summary that claims nothing.
    """
    journal = memory.journal
    if journal is None:
        return HistoryTail([], 0, None, False)
    if isinstance(journal, JournalBase):
        return journal.history_tail(id, newest)
    every = memory.history(id)
    return HistoryTail(every[-newest:], len(every), None, True)


def state_at(memory: Memory, id: str, when: Lsn) -> Item | None:
    """``id`` as it was at ``when`` (``None``: not written yet, or deleted, then).

    The newest :data:`FIRST_READ` versions are read, then :data:`GROWTH`
    times more each round, until they reach back to ``when`` (the first one
    read was written at or before it: an older one ended before the moment,
    so it cannot be the state then) or are the whole history. Past
    :data:`MAX_TAIL` versions back, the whole history is read. Same answer
    as looking through every version (:meth:`Memory.history`).
    """
    newest = FIRST_READ
    while True:
        read = tail(memory, id, newest)
        if read.complete or read.versions[0].valid_from.lsn <= when:
            return next((v.item for v in read.versions if v.visible_at(when)), None)
        if newest >= MAX_TAIL:
            return next((v.item for v in memory.history(id) if v.visible_at(when)), None)
        newest = min(newest * GROWTH, MAX_TAIL)
