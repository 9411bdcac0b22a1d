"""The store's order by update time: one float key an item, cheap to compute.

The store keeps its items in a ``SortedKeyList`` by ``(updated_at, id)``
(:func:`update_key`) for the listings of the newest; a search breaks ties by
the same time (:func:`ts`). A restore fills the list in one pass
(:func:`by_update_of`), so the key's cost per item is most of the list's.
"""

from __future__ import annotations

import datetime as _dt
from operator import itemgetter

from sortedcontainers import SortedKeyList

from memstore.item import Item

__all__ = [
    "PARSED_EPOCH",
    "PARSED_UTC",
    "SECOND",
    "add_by_update",
    "by_update_of",
    "ts",
    "update_key",
]


def update_key(item: Item) -> tuple[float, str]:
    """``(updated_at.timestamp(), id)``: the update-time list's order (``-inf`` for no time).

    ``timestamp()`` asks both ends for their UTC offset, and the offset of a
    datetime parsed by pydantic (every restored item's) is a call into
    pydantic-core's ``TzInfo``: most of a restore's cost per key. Two
    datetimes that share one tzinfo object subtract without asking it, and a
    UTC one has offset zero at every instant; so for the two UTC tzinfo
    objects met here (the stdlib's, and the one pydantic-core's parser gives
    every ``Z`` datetime) the difference from an epoch sharing it, divided by
    one second, is the timestamp: the same division of the same integer
    microseconds, bit for bit. Any other tzinfo takes ``timestamp()`` itself.
    """
    dt = item.updated_at
    if dt is None:
        return (_NEVER, item.id)
    tz = dt.tzinfo
    if tz is PARSED_UTC:
        return ((dt - PARSED_EPOCH) / SECOND, item.id)
    if tz is _UTC:
        return ((dt - _EPOCH) / SECOND, item.id)
    return (dt.timestamp(), item.id)


def ts(dt: _dt.datetime | None) -> float:
    """``dt.timestamp()``, ``-inf`` for ``None``: the shortcut of :func:`update_key`."""
    if dt is None:
        return _NEVER
    tz = dt.tzinfo
    if tz is PARSED_UTC:
        return (dt - PARSED_EPOCH) / SECOND
    if tz is _UTC:
        return (dt - _EPOCH) / SECOND
    return dt.timestamp()


def _parsed_epoch() -> _dt.datetime:
    """The epoch as pydantic parses it: its tzinfo is the parser's shared UTC object.

    Should a pydantic-core ever parse ``Z`` otherwise, the stdlib's epoch
    stands in (that shortcut is then the stdlib one; nothing else changes).
    """
    at = Item.model_validate_json('{"updated_at": "1970-01-01T00:00:00Z"}').updated_at
    if at is None or at.utcoffset() != _dt.timedelta(0) or at != _EPOCH:
        return _EPOCH
    return at


_NEVER = float("-inf")
SECOND = _dt.timedelta(seconds=1)
_UTC = _dt.UTC
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_UTC)
PARSED_EPOCH = _parsed_epoch()
PARSED_UTC = PARSED_EPOCH.tzinfo


def by_update_of(
    keyed: list[tuple[tuple[float, str], Item]],
) -> SortedKeyList[Item, tuple[float, str]]:
    """``SortedKeyList(items, key=update_key)``, from ``(update_key(item), item)`` pairs.

    The list's own bulk ``update`` calls the key twice per item (to sort, then
    to store the keys); here the caller computed each key once. This fills
    the list's documented internal layout (sublists of ``_load`` values,
    their keys, the last key of each) the way ``update`` does on an empty
    list. The ids are distinct, so no two keys tie. Sorts ``keyed`` in place.
    """
    keyed.sort(key=itemgetter(0))
    out: SortedKeyList[Item, tuple[float, str]] = SortedKeyList(key=update_key)
    load: int = out._load  # type: ignore[attr-defined]
    keys = [k for k, _ in keyed]
    values = [v for _, v in keyed]
    starts = range(0, len(values), load)
    out._lists.extend(values[p : p + load] for p in starts)  # type: ignore[attr-defined]
    out._keys.extend(keys[p : p + load] for p in starts)  # type: ignore[attr-defined]
    out._maxes.extend(sub[-1] for sub in out._keys)  # type: ignore[attr-defined]
    out._len = len(values)  # type: ignore[attr-defined]
    return out


def add_by_update(order: SortedKeyList[Item, tuple[float, str]], item: Item) -> None:
    """``order.add(item)`` (``order`` keyed by :func:`update_key`), the newest item's way cheaper.

    A write stamps its item with the clock, so its key is nearly always the
    largest: ``SortedKeyList.add`` then appends it to the last sublist (its
    own branch for a key at or past the last one), and splits that sublist
    or updates the positional index only when it is due (``_expand``). This
    takes that branch directly, with the key computed here from the item's
    ``__dict__`` (a stdlib UTC stamp, as the default clock gives, the way
    :func:`update_key` computes it), and calls ``_expand`` only when it has
    something to do; any other item goes through ``add``. The list ends the
    same either way: its documented layout (``_lists``, ``_keys``,
    ``_maxes``, ``_len``, ``_index``), as :func:`by_update_of` fills it.
    """
    d = item.__dict__
    at = d["updated_at"]
    if at is None or at.tzinfo is not _UTC:
        order.add(item)
        return
    key = ((at - _EPOCH) / SECOND, d["id"])
    maxes: list[tuple[float, str]] = order._maxes  # type: ignore[attr-defined]
    if not maxes or key < maxes[-1]:
        order.add(item)
        return
    pos = len(maxes) - 1
    keys: list[tuple[float, str]] = order._keys[pos]  # type: ignore[attr-defined]
    order._lists[pos].append(item)  # type: ignore[attr-defined]
    keys.append(key)
    maxes[pos] = key
    if len(keys) > order._load << 1 or order._index:  # type: ignore[attr-defined]
        order._expand(pos)  # type: ignore[attr-defined]
    order._len += 1  # type: ignore[attr-defined]
