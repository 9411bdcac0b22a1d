"""The engine's own visibility rule for a vector index entry, as a recognisable value.

A search hands its vector index a ``visible`` predicate. In the common case
(no non-searchable kinds, or a kind filter; no host ``doc_visible``) that
predicate is :class:`ReadableAt`: not private, of the kind searched for (if
one is), not past its deadline at ``now``. It is callable like any
predicate, so every index can use it; an index that knows it
(:class:`memstore_index.CellStore`) applies it to a cached partition set as
one mask (or to a graph walk as one label set) instead of one Python call
per entry.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from memstore.item import SCOPE_PRIVATE

__all__ = ["ReadableAt"]


@dataclass(frozen=True, slots=True)
class ReadableAt:
    """Entries that are not private, of ``kind`` (any kind when empty), and not past
    their ``stale_after`` at ``now``."""

    now: _dt.datetime
    kind: str = ""

    def __call__(self, entry: Any) -> bool:
        if entry.scope == SCOPE_PRIVATE or (self.kind and entry.kind != self.kind):
            return False
        deadline = getattr(entry, "stale_after", None)
        return deadline is None or not self.now >= deadline
