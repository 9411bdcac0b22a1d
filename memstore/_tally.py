"""How many items each partition holds, by kind and status, kept as the store changes.

A :class:`Tally` answers "how many of this partition's items are there?" in
time that grows with the partition's kinds, not with the store: the store
(``StoreBase._set``) tells it of every item it stores or drops. Private items
are not counted in any partition (no partition reads them as its own), but
they are in :meth:`Tally.active`, the store's count of active items of every
scope (:meth:`~memstore.store.Store.count_active`, ``Memory.stats().active``).

Status is the one a reader is told: an ``active`` item past its
``stale_after`` deadline counts as ``stale`` (the store reports staleness
lazily, :meth:`~memstore.item.Item.is_active`). The tally keeps the deadlines
of the active items sorted, so the count of those expired by ``now`` is a
binary search, whatever the clock says.

>>> import datetime as dt
>>> from memstore.item import Item
>>> t = Tally()
>>> t.add(Item(id="a", kind="fact", tags=["tenant/acme"]))
>>> t.add(Item(id="b", kind="fact", tags=["tenant/acme"],
...            stale_after=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)))
>>> sorted(t.counts("acme", dt.datetime(2030, 1, 1, tzinfo=dt.UTC)).items())
[(('fact', 'active'), 1), (('fact', 'stale'), 1)]
"""

from __future__ import annotations

import datetime as _dt
from collections import Counter
from collections.abc import Iterable

from sortedcontainers import SortedList

from memstore.item import SCOPE_PRIVATE, STATUS_ACTIVE, STATUS_STALE, Item
from memstore.tags import partition_from_tags

__all__ = ["Tally"]


class Tally:
    """Counts of the store's non-private items: partition, then ``(kind, status)``."""

    __slots__ = ("_active", "_counts", "_deadlines", "_every_deadline")

    def __init__(self) -> None:
        self._counts: dict[str, Counter[tuple[str, str]]] = {}
        # partition -> kind -> the deadlines of its active items that have one
        self._deadlines: dict[str, dict[str, SortedList[_dt.datetime]]] = {}
        # Every scope, private included: the items whose status is active, and
        # the deadlines of those that have one (for active(now)).
        self._active = 0
        self._every_deadline: SortedList[_dt.datetime] = SortedList()

    @classmethod
    def of(cls, items: Iterable[Item]) -> Tally:
        """A tally of ``items`` (one walk: the store's, the first time it is asked)."""
        tally = cls()
        for it in items:
            tally.add(it)
        return tally

    def add(self, item: Item) -> None:
        """Count ``item``, now stored."""
        if item.status == STATUS_ACTIVE:
            self._active += 1
            if item.stale_after is not None:
                self._every_deadline.add(item.stale_after)
        if item.scope == SCOPE_PRIVATE:
            return
        partition = partition_from_tags(item.tags)
        self._counts.setdefault(partition, Counter())[(item.kind, item.status)] += 1
        if item.status == STATUS_ACTIVE and item.stale_after is not None:
            kinds = self._deadlines.setdefault(partition, {})
            kinds.setdefault(item.kind, SortedList()).add(item.stale_after)

    def remove(self, item: Item) -> None:
        """Stop counting ``item``, stored until now (stored items are never changed in place)."""
        if item.status == STATUS_ACTIVE:
            self._active -= 1
            if item.stale_after is not None:
                self._every_deadline.discard(item.stale_after)
        if item.scope == SCOPE_PRIVATE:
            return
        partition = partition_from_tags(item.tags)
        counts = self._counts.get(partition)
        if counts is None:
            return
        key = (item.kind, item.status)
        counts[key] -= 1
        if counts[key] <= 0:
            del counts[key]
        if not counts:
            del self._counts[partition]
        if item.status == STATUS_ACTIVE and item.stale_after is not None:
            kinds = self._deadlines.get(partition, {})
            deadlines = kinds.get(item.kind)
            if deadlines is not None:
                deadlines.discard(item.stale_after)
                if not deadlines:
                    del kinds[item.kind]
                if not kinds:
                    self._deadlines.pop(partition, None)

    def counts(self, partition: str, now: _dt.datetime) -> dict[tuple[str, str], int]:
        """``partition``'s items by ``(kind, status)`` as readers see them at ``now``.

        An active item whose deadline is ``now`` or earlier counts as stale
        (:meth:`~memstore.item.Item.is_expired`). ``""`` is the untagged items.
        """
        out = Counter(self._counts.get(partition, ()))
        for kind, deadlines in self._deadlines.get(partition, {}).items():
            expired = deadlines.bisect_right(now)
            if expired:
                out[(kind, STATUS_ACTIVE)] -= expired
                out[(kind, STATUS_STALE)] += expired
        return {key: n for key, n in out.items() if n > 0}

    def active(self, now: _dt.datetime) -> int:
        """How many items are active at ``now``, of every partition and scope (private too).

        :meth:`~memstore.item.Item.is_active` of each, counted without a walk:
        the items whose status is active, less those whose deadline is ``now``
        or earlier (a binary search).

        >>> import datetime as dt
        >>> from memstore.item import Item
        >>> t = Tally.of([Item(id="a", kind="fact", scope="private", tags=["user:u1"]),
        ...               Item(id="b", kind="fact", status="stale"),
        ...               Item(id="c", kind="fact",
        ...                    stale_after=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))])
        >>> t.active(dt.datetime(2019, 1, 1, tzinfo=dt.UTC))  # a (private) and c
        2
        >>> t.active(dt.datetime(2030, 1, 1, tzinfo=dt.UTC))  # c's deadline has passed
        1
        """
        return self._active - self._every_deadline.bisect_right(now)
