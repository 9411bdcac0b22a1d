"""A hub's linkers in id order, kept at write time: the first thousand of 100,000 at once.

The store indexes, for every id, the items whose links point at it (its
linkers) as a set. A bounded read takes a hub's *first* linkers by id: a
search's spreading pass (:data:`~memstore.limits.SPREAD_REACH`, the one
candidate that passes the bound) and a bounded graph walk
(:data:`~memstore.limits.CONTEXT_REACH`). Taken from the set, the first
``k`` by id cost a copy and a heapify of the whole set
(:func:`~memstore._ascending.ascending`): 8-16 ms at 100,000 linkers on every
search that reaches the hub, for a thousand of them.

So a set of :data:`ORDERED_FROM` linkers or more is mirrored by a
``SortedList`` kept beside it, by the same writes (:func:`link`,
:func:`unlink`): an insertion or a removal costs O(log n), a few
microseconds, and the first ``k`` in order cost O(k + log n)
(:func:`ordered`). A smaller set is ordered when it is read, at most
:data:`ORDERED_FROM` ids. The order is made when a set reaches the size (a
sort of that many ids, once) or when a store is filled whole
(:func:`orders_of`); it goes when the set empties, and a set that shrinks
keeps it. ``Store._check`` holds every order to its set.

>>> from sortedcontainers import SortedList
>>> backlinks: dict[str, set[str]] = {}
>>> orders: dict[str, SortedList[str]] = {}
>>> for n in (3, 1, 2):
...     link(backlinks, orders, "hub", f"s{n}")
>>> unlink(backlinks, orders, "hub", "s1")
>>> list(ordered(backlinks, orders, "hub")), "hub" in orders  # under ORDERED_FROM: no order
(['s2', 's3'], False)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from sortedcontainers import SortedList

from memstore._ascending import ascending

__all__ = ["ORDERED_FROM", "link", "ordered", "orders_of", "unlink"]

ORDERED_FROM: Final = 1_024
"""Linkers from which an id's are also kept in order (below, ordering them when read is cheap).

At 1,024 a read orders at most that many ids (about 0.1 ms); a hub this
size pays one sort of them when it reaches it, then O(log n) a write.
"""

Backlinks = dict[str, set[str]]
Orders = dict[str, "SortedList[str]"]


def link(backlinks: Backlinks, orders: Orders, target: str, id: str) -> None:
    """Record that ``id`` links to ``target`` (again: nothing changes)."""
    ids = backlinks.get(target)
    if ids is None:
        backlinks[target] = {id}
        return
    if id in ids:
        return
    ids.add(id)
    order = orders.get(target)
    if order is not None:
        order.add(id)
    elif len(ids) >= ORDERED_FROM:
        orders[target] = SortedList(ids)


def unlink(backlinks: Backlinks, orders: Orders, target: str, id: str) -> None:
    """Record that ``id`` no longer links to ``target`` (already not: nothing changes)."""
    ids = backlinks.get(target)
    if ids is None or id not in ids:
        return
    ids.discard(id)
    if not ids:
        del backlinks[target]
        orders.pop(target, None)
        return
    order = orders.get(target)
    if order is not None:
        order.remove(id)


def ordered(backlinks: Backlinks, orders: Orders, target: str) -> Iterator[str]:
    """``target``'s linkers in ascending id order, lazily: the first ``k`` cost O(k + log n).

    Read under the store's lock, as every index is: the order is not changed
    while its iterator is in use.
    """
    order = orders.get(target)
    if order is not None:
        return iter(order)
    return ascending(backlinks.get(target, ()))


def orders_of(backlinks: Backlinks) -> Orders:
    """The orders a store filled whole with ``backlinks`` keeps: one per set of
    :data:`ORDERED_FROM` linkers or more."""
    return {t: SortedList(ids) for t, ids in backlinks.items() if len(ids) >= ORDERED_FROM}
