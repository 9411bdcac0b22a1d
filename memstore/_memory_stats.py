"""What :meth:`Memory.stats <memstore.memory.Memory.stats>` reports, in one frozen record."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from memstore.journal import Lsn

if TYPE_CHECKING:
    from memstore_hub import HubStats

__all__ = ["MemoryStats"]


@dataclasses.dataclass(frozen=True)
class MemoryStats:
    """What :meth:`Memory.stats` reports."""

    items: int
    """Items held (every status, private ones included)."""
    active: int
    """Active items now (private ones included), counted by the store's tally, not a walk."""
    vectors: int
    """Items with a vector (0 without an embedder)."""
    head: Lsn | None
    """The newest journal position (``None`` without a journal)."""
    search: Mapping[str, int]
    """The searcher's counters (``search.total``, ``search.keyword_hits``...)."""
    hub: HubStats | None = None
    """The hub's figures (``None`` without a hub)."""
    vectors_pending: int = 0
    """Vectors not yet durable after their write committed (a full disk, a failing
    embedder): indexed but unsaved, or not yet embedded. Drained by the next write
    or ``mem.cells.flush()``; see :attr:`~memstore_index.CellStore.pending`."""
