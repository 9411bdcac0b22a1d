"""Every item of a kind that a partition sees: the full listing :meth:`Memory.search` never gives.

A surface that keeps its own records in items (the MCP knowledge-graph mode
keeps one item per entity) must list them all, not the best matches. This
reads the working set, so it costs O(items held), and returns copies.

>>> from memstore import Memory
>>> with Memory(embedder=None) as mem:
...     _ = mem.add("ops runs the nightly backup", kind="entity", partition="acme")
...     _ = mem.add("a note", partition="acme")
...     _ = mem.add("someone else's entity", kind="entity", partition="other")
...     [it.content for it in list_items(mem, kind="entity", partition="acme")]
['ops runs the nightly backup']
"""

from __future__ import annotations

import datetime as _dt

from memstore.item import Item
from memstore.memory import Memory
from memstore.search import default_visible
from memstore.tags import PARTITION_ALL

__all__ = ["list_items"]

_EPOCH = _dt.datetime.min.replace(tzinfo=_dt.UTC)


def list_items(memory: Memory, *, kind: str, partition: str | None = None) -> list[Item]:
    """Every active public item of ``kind`` visible to ``partition``, oldest first.

    ``partition`` as in :meth:`Memory.search`: that partition's items,
    untagged ones and ``shared`` ones; ``None`` or ``"*"`` every partition.
    Ties in creation time are ordered by id.
    """
    if not kind:
        raise ValueError("list_items needs a kind")
    part = PARTITION_ALL if partition is None else partition
    found = [
        it for it in memory.store.filtered(status="active", kind=kind) if default_visible(it, part)
    ]
    found.sort(key=lambda it: (it.created_at or _EPOCH, it.id))
    return found
