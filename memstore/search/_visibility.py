"""Who may see what: the default partition rule of a search.

A search runs for one partition. By default it sees that partition's items
(tagged ``tenant/<partition>``), untagged items and ``shared`` ones; a
private item is never visible (a search has no caller identity). A host
replaces the rule with ``SearchConfig.visible`` (on items) and
``SearchConfig.doc_visible`` (on vector index entries).
"""

from __future__ import annotations

from memstore.item import SCOPE_PRIVATE, Item
from memstore.tags import in_partition

__all__ = ["default_visible"]


def default_visible(item: Item, partition: str) -> bool:
    """The default partition rule: the caller's partition, untagged items, ``shared`` ones.

    :data:`~memstore.tags.PARTITION_ALL` sees every shared item; a private
    item is never visible to a search (no caller identity).
    """
    return item.scope != SCOPE_PRIVATE and in_partition(item, partition)
