"""A store's items as arrays, for the searcher's lean path: one build per store generation.

A hybrid search scores a few hundred candidates, then reads a handful. Doing
the candidate work on :class:`~memstore.item.Item` objects (a visibility
predicate, a liveness test, a link walk per candidate) costs microseconds
each in Python; the same tests over integer slots are one numpy expression
for the whole pool. :class:`SearchSnapshot` holds what those tests read, per
slot: the item's kind, partition, ``shared`` tag, whether it is active and
public, its deadline and update time as integer microseconds (exactly the
``datetime`` comparisons, no float rounding), and, built on first use, its
word count (for the searcher's information prior, :func:`item_words`) and per
relation set, the link graph as compressed rows (:class:`LinkGraph`).

The store builds a snapshot lazily (:meth:`~memstore.store.Store.search_snapshot`);
after writes that only add new ids or replace held ones, it derives the next
generation's from the last (:meth:`SearchSnapshot.derive`, the same snapshot
for the cost of the items written), else it builds again. No snapshot is
changed once made, so each is a consistent picture of one generation; the
id-keyed lists and dictionary a derived one extends are shared, and read only
below each snapshot's length.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import numpy.typing as npt

from memstore.item import SCOPE_PRIVATE, STATUS_ACTIVE, Item
from memstore.tags import SHARED_TAG, partition_from_tags

__all__ = ["NEVER_US", "LinkGraph", "SearchSnapshot", "item_words", "micros"]

_Rows = slice | npt.NDArray[np.intp]
_ReadableKey = tuple[str, tuple[str, ...], str | None]
_ALL = slice(None)
_GROWN = (
    "kind",
    "partition",
    "live",
    "shared",
    "deadline_us",
    "updated_us",
    "has_update",
    "id_rank",
)
"""The per-slot columns a derived snapshot extends (:class:`_Column`)."""

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


def item_words(item: Item) -> int:
    """The number of whitespace-separated words in ``item``'s title and content.

    How much an item says, as the searcher's information prior reads it
    (:mod:`memstore.search._prior`): counted once per item, when a snapshot
    is built or derived.

    >>> item_words(Item(kind="event", title="Trip", content="Later, take care!"))
    4
    """
    return len(item.title.split()) + len(item.content.split())


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
        cls, items: Sequence[Item], slot: Mapping[str, int], relations: Collection[str]
    ) -> LinkGraph:
        """The graph of ``items`` (slot order) along ``relations``; dangling links are left out
        (and links to a slot ``slot`` holds past ``items``, a later generation's)."""
        n = len(items)
        rows: list[list[tuple[int, float, bool]]] = [[] for _ in items]
        for s, it in enumerate(items):
            for link in it.links:
                t = slot.get(link.to_id, n)
                if t >= n or link.relation not in relations:
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

    def grown(self, rows: int) -> LinkGraph:
        """This graph with ``rows`` more slots, none with an edge (the edge arrays are shared)."""
        if not rows:
            return self
        more = np.full(rows, self.start[-1], np.intp)
        return LinkGraph(np.concatenate((self.start, more)), self.other, self.weight, self.own)

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


def _counts(items: Sequence[Item]) -> npt.NDArray[np.int64]:
    """:func:`item_words` of each of ``items``, as an array."""
    return np.fromiter(map(item_words, items), np.int64, len(items))


class _Column:
    """One per-slot array shared along a chain of derived snapshots, with room to grow.

    Rows below ``end`` are written; each snapshot reads a view of its own
    first rows. :meth:`extended` writes a derived snapshot's new rows in
    place when this snapshot's rows are the column's end and there is room
    (the rows a reader of an earlier snapshot sees never change), else into
    a copy with twice the room: appending costs its new rows, amortised.
    """

    __slots__ = ("data", "end")

    def __init__(self, data: npt.NDArray[Any], end: int) -> None:
        self.data = data
        self.end = end

    def extended(
        self,
        n: int,
        tail: npt.NDArray[Any],
        at: npt.NDArray[np.intp],
        at_values: npt.NDArray[Any] | None,
    ) -> tuple[_Column, npt.NDArray[Any]]:
        """The first ``n`` rows, then ``tail``, with ``at`` set to ``at_values``: column and view.

        Setting a row below ``n`` always copies (an earlier snapshot reads it);
        ``at_values`` is ``None`` when ``at`` is empty.
        """
        end = n + tail.size
        col = self
        if at.size or self.end != n or end > self.data.size:
            data = np.empty(max(2 * end, 16), self.data.dtype)
            data[:n] = self.data[:n]
            col = _Column(data, n)
        col.data[n:end] = tail
        if at_values is not None:
            col.data[at] = at_values
        col.end = end
        return col, col.data[:end]


class _Facts:
    """The per-slot columns of some items, in order: what a build and a derivation both read.

    Kinds and partitions are coded through the dictionaries given, which gain
    the names first seen here. A naive ``datetime`` raises ``TypeError``.
    """

    __slots__ = ("deadline_us", "kind", "live", "partition", "shared", "updated_us")

    def __init__(self, n: int) -> None:
        self.kind = np.zeros(n, np.int32)
        self.partition = np.zeros(n, np.int32)
        self.live = np.zeros(n, np.bool_)
        self.shared = np.zeros(n, np.bool_)
        self.deadline_us = np.full(n, NEVER_US, np.int64)
        self.updated_us = np.full(n, _NO_UPDATE_US, np.int64)

    @classmethod
    def of(
        cls, items: Sequence[Item], kind_code: dict[str, int], partition_code: dict[str, int]
    ) -> _Facts:
        out = cls(len(items))
        kind, part, live, shared = out.kind, out.partition, out.live, out.shared
        for s, it in enumerate(items):
            kind[s] = kind_code.setdefault(it.kind, len(kind_code))
            part[s] = partition_code.setdefault(partition_from_tags(it.tags), len(partition_code))
            live[s] = it.status == STATUS_ACTIVE and it.scope != SCOPE_PRIVATE
            shared[s] = SHARED_TAG in it.tags
            if it.stale_after is not None:
                out.deadline_us[s] = micros(it.stale_after)
            if it.updated_at is not None:
                out.updated_us[s] = micros(it.updated_at)
        return out


class SearchSnapshot:
    """Per-slot arrays over every item of one store generation (see the module docstring).

    :meth:`derive` makes the next generation's snapshot from this one when the
    writes since were additions of new ids and replacements of held ones: the
    same snapshot a build over the store's items would make, for the cost of
    the changed items (and a copy of each column, in C). ``ids``, ``slot`` and
    ``items`` are then shared with the derived snapshot, which extends them:
    they may run past ``len(self)``, and only what lies below it is this
    snapshot's (:meth:`slot_of` reads ``slot`` so).
    """

    def __init__(self, generation: int, items: Iterable[Item]) -> None:
        self.generation = generation
        self.items: list[Item] = list(items)
        """The stored items, slot order (the store's own objects: read, never handed out)."""
        n = self._n = len(self.items)
        self.ids = [it.id for it in self.items]
        self.slot: dict[str, int] = {id: s for s, id in enumerate(self.ids)}
        self.kind_code: dict[str, int] = {}
        self.partition_code: dict[str, int] = {"": 0}
        cols = _Facts.of(self.items, self.kind_code, self.partition_code)
        self.kind, self.partition = cols.kind, cols.partition
        self.live, self.shared = cols.live, cols.shared
        """``live``: active and not private (the deadline is the search's to test)."""
        self.deadline_us, self.updated_us = cols.deadline_us, cols.updated_us
        self.has_update = self.updated_us != _NO_UPDATE_US
        order = np.argsort(np.array(self.ids, dtype=object), kind="stable")
        self.id_rank = np.empty(n, np.intp)
        """Each slot's place in id order: ties broken by id become integer comparisons."""
        self.id_rank[order] = np.arange(n, dtype=np.intp)
        self.max_id = self.ids[int(order[-1])] if n else ""
        """The largest id held (``""`` when none): a new id above it takes the next rank."""
        self.first_deadline_us = int(self.deadline_us.min()) if n else int(NEVER_US)
        """The earliest deadline: before it, no item is past its own."""
        self._columns = {name: _Column(getattr(self, name), n) for name in _GROWN}
        self._words: _Column | None = None
        self._graphs: dict[frozenset[str], LinkGraph] = {}
        self._linkers: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None = None
        self.of_graph: dict[frozenset[str], object] = {}
        """What a reader worked out from the edges of :meth:`graph` alone, per relation
        set (the searcher's inbound edges): carried to a derived snapshot with the
        graph, which differs from this one's by empty rows at most."""
        self._partition_masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._readable: dict[_ReadableKey, npt.NDArray[np.bool_]] = {}
        self._mask_columns: dict[object, _Column] = {}
        """The cached masks' columns (keyed by partition, or by readable key), to grow."""

    def derive(
        self, generation: int, changed: Sequence[Item], linked: Callable[[str], bool]
    ) -> SearchSnapshot | None:
        """The snapshot of ``generation``, made from this one, or ``None`` when it cannot be sure.

        ``changed``: the stored state of every id written since this
        snapshot's generation, each once, in the order each was first written
        (the store keeps its items in insertion order: a new id takes the next
        slot, a held one keeps its own, as in a build). ``linked(id)``: whether
        a stored item holds a link to ``id``. What makes the answer exact:

        * no id was deleted (the caller's to know: a deletion moves every later
          slot, so the caller builds instead);
        * every new id sorts above every held one (:attr:`max_id`), so each
          held id keeps its rank and the new ones take the next ranks;
        * the link graphs (and what was derived from them, :attr:`of_graph`)
          and the linker rows are kept only if no write could change them: no
          new item holds a link or is linked to, and each replaced item holds
          the same links as before; otherwise they are built again at first use.

        A deadline or update time that is a naive ``datetime`` gives ``None`` too,
        as it stops a build. The columns are this snapshot's, copied and extended;
        kinds and partitions first seen take the next codes (codes are names'
        stand-ins: a build may number them otherwise, with the same meaning).
        """
        n = self._n
        added: list[Item] = []
        replaced: list[tuple[int, Item]] = []
        for it in changed:
            s = self.slot.get(it.id, n)
            if s < n:
                replaced.append((s, it))
            else:
                added.append(it)
        fresh = sorted(it.id for it in added)
        if fresh and (fresh[0] <= self.max_id or len(set(fresh)) < len(fresh)):
            return None
        kind_code, partition_code = self.kind_code, self.partition_code
        if any(it.kind not in kind_code for it in changed):
            kind_code = dict(kind_code)  # never grown in place: a reader may be iterating it
        if any(partition_from_tags(it.tags) not in partition_code for it in changed):
            partition_code = dict(partition_code)
        try:
            new = _Facts.of(added, kind_code, partition_code)
            upd = (
                _Facts.of([it for _, it in replaced], kind_code, partition_code)
                if replaced
                else None
            )
        except TypeError:  # a naive datetime
            return None
        same_links = not any(it.links or linked(it.id) for it in added) and all(
            self.items[s].links == it.links for s, it in replaced
        )
        out = object.__new__(SearchSnapshot)
        out.generation, out._n = generation, n + len(added)
        # The id-keyed structures are shared and extended while this snapshot is
        # their end (the usual chain: each derived from the last); else copied.
        ids, slot, items = self.ids, self.slot, self.items
        if len(ids) != n or len(slot) != n or len(items) != n:
            ids, items = ids[:n], items[:n]
            slot = {id: s for s, id in enumerate(ids)}
        if replaced:
            items = items[:n]  # a replaced slot: this snapshot keeps its own item
            for s, it in replaced:
                items[s] = it
        for s, it in enumerate(added, n):
            ids.append(it.id)
            slot[it.id] = s
            items.append(it)
        out.ids, out.slot, out.items = ids, slot, items
        out.kind_code, out.partition_code = kind_code, partition_code
        at = np.fromiter((s for s, _ in replaced), np.intp, len(replaced))
        rank_of = {id: r for r, id in enumerate(fresh, n)}
        tails: dict[str, npt.NDArray[Any]] = {name: getattr(new, name) for name in _Facts.__slots__}
        tails["has_update"] = new.updated_us != _NO_UPDATE_US
        tails["id_rank"] = np.fromiter((rank_of[it.id] for it in added), np.intp, len(added))
        sets: dict[str, npt.NDArray[Any] | None] = dict.fromkeys(_GROWN)
        if upd is not None:
            sets.update((name, getattr(upd, name)) for name in _Facts.__slots__)
            sets["has_update"] = upd.updated_us != _NO_UPDATE_US
            sets["id_rank"] = self.id_rank[at]
        out._columns = {}
        for name in _GROWN:
            out._columns[name], view = self._columns[name].extended(n, tails[name], at, sets[name])
            setattr(out, name, view)
        out.max_id = fresh[-1] if fresh else self.max_id
        if replaced:
            out.first_deadline_us = int(out.deadline_us.min())
        else:
            out.first_deadline_us = min(
                self.first_deadline_us, int(new.deadline_us.min(initial=NEVER_US))
            )
        out._words = None
        if self._words is not None:  # counted here: the new and replaced items' counts only
            out._words, _ = self._words.extended(
                n,
                _counts(added),
                at,
                _counts([it for _, it in replaced]) if replaced else None,
            )
        out._graphs, out._linkers, out.of_graph = {}, None, {}
        if same_links:  # the new slots have no edges: each row set gains empty rows
            grow = len(added)
            out._graphs = {k: g.grown(grow) for k, g in self._graphs.items()}
            out.of_graph = dict(self.of_graph)
            if self._linkers is not None:
                start, ranks = self._linkers
                out._linkers = np.concatenate((start, np.full(grow, start[-1], np.intp))), ranks
        out._partition_masks, out._readable, out._mask_columns = {}, {}, {}
        out._carry_masks(self, at)
        return out

    def slot_of(self, id: str) -> int:
        """``id``'s slot, -1 when this snapshot does not hold it."""
        s = self.slot.get(id, -1)
        return s if s < self._n else -1

    def __len__(self) -> int:
        return self._n

    @property
    def words(self) -> npt.NDArray[np.int64]:
        """Each slot's word count (:func:`item_words`), counted on first use.

        Only a search with the information prior on reads it, so a store that
        never uses the prior never pays for it; a snapshot derived from one
        that counted them counts only the items written since.
        """
        col = self._words
        if col is None:
            items = self.items if len(self.items) == self._n else self.items[: self._n]
            col = self._words = _Column(_counts(items), self._n)
        out: npt.NDArray[np.int64] = col.data[: self._n]
        return out

    def graph(self, relations: Collection[str]) -> LinkGraph:
        """The link graph along ``relations``, built on first use."""
        key = frozenset(relations)
        g = self._graphs.get(key)
        if g is None:
            items = self.items if len(self.items) == self._n else self.items[: self._n]
            g = self._graphs[key] = LinkGraph.build(items, self.slot, key)
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
            for s, it in enumerate(islice(self.items, n)):
                for link in it.links:
                    t = slot.get(link.to_id, n)
                    if t < n:
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
        return self._kinds_rows(names, _ALL)

    def _kinds_rows(self, names: Collection[str], rows: _Rows) -> npt.NDArray[np.bool_]:
        table = np.zeros(len(self.kind_code), np.bool_)  # per kind code: one of ``names``
        table[[c for k, c in self.kind_code.items() if k in names]] = True
        mask: npt.NDArray[np.bool_] = table[self.kind[rows]]
        return mask

    def readable_mask(
        self, kind: str, hidden: tuple[str, ...], partition: str | None
    ) -> npt.NDArray[np.bool_]:
        """Live slots of ``kind`` (or of no ``hidden`` kind) that ``partition`` may see.

        ``None``: every partition. Deadlines are the caller's to apply. Cached
        per argument triple for the snapshot's lifetime (and carried to a
        derived snapshot, worked out for its written slots alone).
        """
        key = (kind, hidden, partition)
        mask = self._readable.get(key)
        if mask is None:
            mask = self._readable[key] = self._readable_rows(key, _ALL)
        return mask

    def _readable_rows(self, key: _ReadableKey, rows: _Rows) -> npt.NDArray[np.bool_]:
        """:meth:`readable_mask` of ``rows`` alone (``_ALL``: every slot)."""
        kind, hidden, partition = key
        mask = self.live[rows].copy()  # its own array: a carried mask grows in place
        if kind:
            mask = mask & self._kinds_rows((kind,), rows)
        elif hidden:
            mask = mask & ~self._kinds_rows(hidden, rows)
        if partition is not None:
            mask = mask & self._partition_rows(partition, rows)
        return mask

    def partition_mask(self, partition: str) -> npt.NDArray[np.bool_]:
        """Slots the default rule lets ``partition`` see: its own, untagged and ``shared`` items.

        Private items are excluded by :attr:`live`; ``*`` is handled by the caller.
        """
        mask = self._partition_masks.get(partition)
        if mask is None:
            mask = self._partition_masks[partition] = self._partition_rows(partition, _ALL)
        return mask

    def _partition_rows(self, partition: str, rows: _Rows) -> npt.NDArray[np.bool_]:
        code = self.partition_code.get(partition, -1)
        part = self.partition[rows]
        mask: npt.NDArray[np.bool_] = (part == code) | (part == 0) | self.shared[rows]
        return mask

    def _carry_masks(self, parent: SearchSnapshot, at: npt.NDArray[np.intp]) -> None:
        """``parent``'s cached masks, extended over the new slots and redone at ``at``."""
        tail, redo = slice(len(parent), self._n), at.size > 0
        for part, mask in parent._partition_masks.items():
            col = parent._mask_column(part, mask)
            self._mask_columns[part], self._partition_masks[part] = col.extended(
                len(parent),
                self._partition_rows(part, tail),
                at,
                self._partition_rows(part, at) if redo else None,
            )
        for key, mask in parent._readable.items():
            col = parent._mask_column(key, mask)
            self._mask_columns[key], self._readable[key] = col.extended(
                len(parent),
                self._readable_rows(key, tail),
                at,
                self._readable_rows(key, at) if redo else None,
            )

    def _mask_column(self, key: object, mask: npt.NDArray[np.bool_]) -> _Column:
        col = self._mask_columns.get(key)
        if col is None:  # built here, not carried: a column of its own (no room yet)
            col = self._mask_columns[key] = _Column(mask, self._n)
        return col
