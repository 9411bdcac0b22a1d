"""One write group over a :class:`~memstore.memory.Memory`: all of it is kept, or none.

A surface whose one request changes several items (deleting an entity and
the relations pointing at it) needs them committed together: in the store,
in the indexes and in the journal, in one durable transaction. Inside the
block other threads see none of the writes; an exception undoes them all.

>>> from memstore import Memory
>>> with Memory(embedder=None) as mem:
...     try:
...         with transaction(mem):
...             _ = mem.add("first")
...             raise RuntimeError("changed my mind")
...     except RuntimeError:
...         pass
...     mem.stats().items
0
"""

from __future__ import annotations

import contextlib

from memstore.memory import Memory

__all__ = ["transaction"]


def transaction(memory: Memory) -> contextlib.AbstractContextManager[None]:
    """A block whose writes through ``memory`` commit together (one journal transaction)."""
    return memory.store.batch()
