"""A store's items as arrays, for the searcher's lean path: one build per store generation.

A hybrid search scores a few hundred candidates, then reads a handful. Doing
the candidate work on :class:`~memstore.item.Item` objects (a visibility
predicate, a liveness test, a link walk per candidate) costs microseconds
each in Python; the same tests over integer slots are one numpy expression
for the whole pool. :class:`SearchSnapshot` holds what those tests read, per
slot: the item's kind, partition, ``shared`` tag, whether it is active and
public, its deadline and update time as integer microseconds (exactly the
``datetime`` comparisons, no float rounding), and, built on first use per
relation set, the link graph as compressed rows (:class:`LinkGraph`).

The store builds a snapshot lazily and keeps it until its next write
(:meth:`~memstore.store.Store.search_snapshot`); nothing here is updated in
place, so a snapshot is a consistent picture of one generation.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memstore.item import SCOPE_PRIVATE, STATUS_ACTIVE, Item
from memstore.tags import SHARED_TAG, partition_from_tags

__all__ = ["NEVER_US", "LinkGraph", "SearchSnapshot", "micros"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MICRO = _dt.timedelta(microseconds=1)
NEVER_US = np.iinfo(np.int64).max
"""The deadline of an item that has none (never reached)."""
_NO_UPDATE_US = np.iinfo(np.int64).min


def micros(dt: _dt.datetime) -> int:
    """``dt`` as integer microseconds since the epoch: exact, so comparisons match ``datetime``'s.

    A naive ``datetime`` raises ``TypeError`` (it cannot be compared with an
    aware one either); the snapshot is then not built and the searcher takes
    its general path.

    >>> micros(_dt.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=_dt.UTC))
    1000005
    """
    return (dt - _EPOCH) // _MICRO


@dataclass(frozen=True, slots=True)
class LinkGraph:
    """One hop along links of a relation set, both ways, as compressed rows over slots.

    The neighbours of slot ``s`` are ``other[start[s]:start[s + 1]]`` with the
    link weights ``weight[...]``: every ``s -> t`` link gives ``t`` to ``s``'s
    row and ``s`` to ``t``'s (a link is an association, as in
    :meth:`~memstore.store.Store.neighbours`); ``own[...]`` is true of the
    first (the row's item holds the link) and false of the second (the other
    end, one of its linkers, holds it). Liveness is not baked in: a search
    masks both ends at its own ``now``.
    """

    start: npt.NDArray[np.intp]
    other: npt.NDArray[np.intp]
    weight: npt.NDArray[np.float64]
    own: npt.NDArray[np.bool_]

    @classmethod
    def build(
        cls, items: list[Item], slot: dict[str, int], relations: Collection[str]
    ) -> LinkGraph:
        """The graph of ``items`` (slot order) along ``relations``; dangling links are left out."""
        rows: list[list[tuple[int, float, bool]]] = [[] for _ in items]
        for s, it in enumerate(items):
            for link in it.links:
                t = slot.get(link.to_id)
                if t is None or link.relation not in relations:
                    continue
                rows[s].append((t, link.weight, True))
                rows[t].append((s, link.weight, False))
        counts = np.fromiter((len(r) for r in rows), np.intp, len(rows))
        start = np.zeros(len(rows) + 1, np.intp)
        np.cumsum(counts, out=start[1:])
        flat = [edge for r in rows for edge in r]
        other = np.fromiter((t for t, _, _ in flat), np.intp, len(flat))
        weight = np.fromiter((w for _, w, _ in flat), np.float64, len(flat))
        own = np.fromiter((o for _, _, o in flat), np.bool_, len(flat))
        return cls(start, other, weight, own)

    def edges(
        self, sources: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """Every edge leaving ``sources``: ``(source, other, weight)`` arrays, one row per edge."""
        lo = self.start[sources]
        lens = self.start[sources + 1] - lo
        total = int(lens.sum())
        if total == 0:
            empty = np.zeros(0, np.intp)
            return empty, empty, np.zeros(0, np.float64)
        src = np.repeat(sources, lens)
        first = np.repeat(np.cumsum(lens) - lens, lens)
        at = np.arange(total, dtype=np.intp) - first + np.repeat(lo, lens)
        return src, self.other[at], self.weight[at]


class SearchSnapshot:
    """Per-slot arrays over every item of one store generation (see the module docstring)."""

    def __init__(self, generation: int, items: Iterable[Item]) -> None:
        self.generation = generation
        self.items: list[Item] = list(items)
        """The stored items, slot order (the store's own objects: read, never handed out)."""
        n = len(self.items)
        self.ids = [it.id for it in self.items]
        self.slot: dict[str, int] = {id: s for s, id in enumerate(self.ids)}
        self.kind_code: dict[str, int] = {}
        self.partition_code: dict[str, int] = {"": 0}
        kind = np.zeros(n, np.int32)
        part = np.zeros(n, np.int32)
        self.live = np.zeros(n, np.bool_)
        """Active and not private (the deadline is the search's to test)."""
        self.shared = np.zeros(n, np.bool_)
        self.deadline_us = np.full(n, NEVER_US, np.int64)
        self.updated_us = np.full(n, _NO_UPDATE_US, np.int64)
        for s, it in enumerate(self.items):
            kind[s] = self.kind_code.setdefault(it.kind, len(self.kind_code))
            part[s] = self.partition_code.setdefault(
                partition_from_tags(it.tags), len(self.partition_code)
            )
            self.live[s] = it.status == STATUS_ACTIVE and it.scope != SCOPE_PRIVATE
            self.shared[s] = SHARED_TAG in it.tags
            if it.stale_after is not None:
                self.deadline_us[s] = micros(it.stale_after)
            if it.updated_at is not None:
                self.updated_us[s] = micros(it.updated_at)
        self.kind = kind
        self.partition = part
        self.has_update = self.updated_us != _NO_UPDATE_US
        order = np.argsort(np.array(self.ids, dtype=object), kind="stable")
        self.id_rank = np.empty(n, np.intp)
        """Each slot's place in id order: ties broken by id become integer comparisons."""
        self.id_rank[order] = np.arange(n, dtype=np.intp)
        self.first_deadline_us = int(self.deadline_us.min()) if n else int(NEVER_US)
        """The earliest deadline: before it, no item is past its own."""
        self._graphs: dict[frozenset[str], LinkGraph] = {}
        self._linkers: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None = None
        self._partition_masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._readable: dict[tuple[str, tuple[str, ...], str | None], npt.NDArray[np.bool_]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def graph(self, relations: Collection[str]) -> LinkGraph:
        """The link graph along ``relations``, built on first use."""
        key = frozenset(relations)
        g = self._graphs.get(key)
        if g is None:
            g = self._graphs[key] = LinkGraph.build(self.items, self.slot, key)
        return g

    def linkers(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """Who links to each slot, by any relation: compressed rows of id ranks, ascending.

        ``ranks[start[s]:start[s + 1]]`` are the :attr:`id_rank` of the items
        holding a link to slot ``s``, each once, smallest first: the store's
        reverse-link index (``Store.linker_ids``) over slots. Built on first use.
        """
        if self._linkers is None:
            n, slot = len(self), self.slot
            to, by = [], []
            for s, it in enumerate(self.items):
                for link in it.links:
                    t = slot.get(link.to_id)
                    if t is not None:
                        to.append(t)
                        by.append(s)
            # One key per (target, linker's rank): sorted and made unique in one call.
            keys = np.unique(np.array(to, np.intp) * n + self.id_rank[np.array(by, np.intp)])
            width = max(n, 1)
            start = np.zeros(n + 1, np.intp)
            np.cumsum(np.bincount(keys // width, minlength=n), out=start[1:])
            self._linkers = start, keys % width
        return self._linkers

    def kinds_mask(self, names: Collection[str]) -> npt.NDArray[np.bool_]:
        """Slots whose kind is one of ``names``."""
        codes = [c for k, c in self.kind_code.items() if k in names]
        return np.isin(self.kind, codes)

    def readable_mask(
        self, kind: str, hidden: tuple[str, ...], partition: str | None
    ) -> npt.NDArray[np.bool_]:
        """Live slots of ``kind`` (or of no ``hidden`` kind) that ``partition`` may see.

        ``None``: every partition. Deadlines are the caller's to apply. Cached
        per argument triple for the snapshot's lifetime.
        """
        key = (kind, hidden, partition)
        mask = self._readable.get(key)
        if mask is None:
            mask = self.live
            if kind:
                mask = mask & self.kinds_mask((kind,))
            elif hidden:
                mask = mask & ~self.kinds_mask(hidden)
            if partition is not None:
                mask = mask & self.partition_mask(partition)
            self._readable[key] = mask
        return mask

    def partition_mask(self, partition: str) -> npt.NDArray[np.bool_]:
        """Slots the default rule lets ``partition`` see: its own, untagged and ``shared`` items.

        Private items are excluded by :attr:`live`; ``*`` is handled by the caller.
        """
        mask = self._partition_masks.get(partition)
        if mask is None:
            code = self.partition_code.get(partition, -1)
            mask = (self.partition == code) | (self.partition == 0) | self.shared
            self._partition_masks[partition] = mask
        return mask
