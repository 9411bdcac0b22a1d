"""The engine's own visibility rule for a vector index entry, as a recognisable value.

A search hands its vector index a ``visible`` predicate. In the common case
(no kind filter, no non-searchable kinds, no host ``doc_visible``) that
predicate is :class:`ReadableAt`: not private, not past its deadline at
``now``. It is callable like any predicate, so every index can use it; an
index that knows it (:class:`memstore_index.CellStore`) applies it to a
cached partition set as one mask instead of one Python call per entry.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from memstore.item import SCOPE_PRIVATE

__all__ = ["ReadableAt"]


@dataclass(frozen=True, slots=True)
class ReadableAt:
    """Entries that are not private and not past their ``stale_after`` at ``now``."""

    now: _dt.datetime

    def __call__(self, entry: Any) -> bool:
        if entry.scope == SCOPE_PRIVATE:
            return False
        deadline = getattr(entry, "stale_after", None)
        return deadline is None or not self.now >= deadline
