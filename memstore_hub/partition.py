"""Which subscribers an event reaches: the partition rule of search, applied to events.

A subscriber of partition ``p`` receives what a search in ``p`` may return
(:func:`memstore.search.default_visible`): items tagged ``tenant/p``, untagged
items and ``shared`` ones. An event therefore carries one audience
(:attr:`~memstore_hub.events.Event.partition`):

===========  ==================================================================
``"alpha"``  subscribers of ``alpha`` (and of every partition)
``""``       every subscriber (:data:`EVERY_PARTITION`: untagged or shared items)
``None``     subscribers of every partition only (audience unknown, operators)
===========  ==================================================================

>>> from memstore import Item
>>> item_partition(Item(kind="note", tags=["tenant/alpha"]))
'alpha'
>>> item_partition(Item(kind="note", tags=["tenant/alpha", "shared"]))
''
>>> receives("beta", "alpha"), receives("beta", ""), receives(None, "alpha")
(False, True, True)
"""

from __future__ import annotations

from collections.abc import Iterable

from memstore.item import Item
from memstore.tags import PARTITION_ALL, SHARED_TAG, partition_from_tags

__all__ = [
    "EVERY_PARTITION",
    "hit_partition",
    "item_partition",
    "reaches",
    "receives",
    "subscriber_partition",
]

EVERY_PARTITION = ""
"""An event audience meaning "every partition" (an untagged or ``shared`` item)."""


def item_partition(item: Item) -> str:
    """The audience of an event about ``item``: its ``tenant/`` tag's partition,
    or :data:`EVERY_PARTITION` when it has none or carries ``shared``."""
    tags = item.tags
    if SHARED_TAG in tags:
        return EVERY_PARTITION
    return partition_from_tags(tags)


def subscriber_partition(partition: str | None) -> str | None:
    """A subscriber's partition, normalised: ``None`` and :data:`PARTITION_ALL`
    (``"*"``) both mean every partition and become ``None``."""
    return None if partition is None or partition == PARTITION_ALL else partition


def receives(subscriber: str | None, audience: str | None, shared: bool = True) -> bool:
    """Whether a subscriber of partition ``subscriber`` (normalised, ``None`` for
    every partition) receives an event whose audience is ``audience``.

    ``shared=False``: a partition's subscriber keeps to the events addressed
    to that partition, without those every partition sees.

    >>> receives("alpha", "", shared=False), receives("alpha", "alpha", shared=False)
    (False, True)
    """
    if subscriber is None or audience == subscriber:
        return True
    return shared and audience == EVERY_PARTITION


def reaches(
    subscriber: str | None, shared: bool, audience: str | None, spared: str | None = None
) -> bool:
    """Whether an event for ``audience`` reaches a subscriber: the hub's one routing rule.

    :func:`receives`, except that an event may spare the subscribers of one
    more audience (``spared``; ``None``: it spares no one). A withdrawal
    (an item that was ``audience``'s moved to ``spared``) reaches those who
    saw the item and may no longer, not those who still see it. Both live
    delivery and a resumed stream's replay route by this, so a
    ``Memory.subscribe`` subscriber and an ``/v1/events`` stream see alike.

    >>> reaches("alpha", True, "alpha", spared="beta"), reaches("beta", True, "alpha", "beta")
    (True, False)
    >>> reaches(None, True, "alpha", spared="beta"), reaches(None, True, "alpha")
    (False, True)
    >>> reaches("alpha", False, "alpha", spared=""), reaches("alpha", True, "alpha", spared="")
    (True, False)
    """
    if not receives(subscriber, audience, shared):
        return False
    return spared is None or not receives(subscriber, spared, shared)


def hit_partition(items: Iterable[Item]) -> str | None:
    """The audience of a search hit, inferred from the items it surfaced.

    A search in partition ``p`` returns ``p``'s items plus ones every partition
    sees, so the one partition among the tagged, unshared items is the
    searcher's. When there is none (only untagged or shared items) or several
    (an operator's search across partitions), the searcher is not known and
    the hit, query text included, goes to subscribers of every partition only.

    >>> from memstore import Item
    >>> hit_partition([Item(kind="n", tags=["tenant/a"]), Item(kind="n", tags=["shared"])])
    'a'
    >>> hit_partition([Item(kind="n")]) is None
    True
    """
    found: str | None = None
    for item in items:
        p = item_partition(item)
        if p in (EVERY_PARTITION, found):
            continue
        if found is not None:
            return None
        found = p
    return found
