"""The supersede chains' rule: a chain never forks into two current versions, nor loops.

An item's ``supersedes`` names the versions it replaced. Followed from any
item, the names form a chain whose one *current* (active, within its
deadline) end is the version a reader should believe. Two writes could break
that: a second current item naming the same predecessor (a fork: two current
versions of one fact), or a current item naming one that names it in turn
(a loop: each sends the reader to the other). :func:`lineage_rejection` says
why a write would do either; the store refuses it, changing nothing.

>>> from memstore.item import Item
>>> items = {"a": Item(id="a", kind="note", title="v1", status="superseded"),
...          "b": Item(id="b", kind="note", title="v2", supersedes=["a"])}
>>> claims = {"a": {"b"}}
>>> now = dt.datetime.now(dt.timezone.utc)
>>> fork = Item(id="c", kind="note", title="v3", supersedes=["a"])
>>> lineage_rejection(items, claims, "c", fork, now)
'a is already superseded by b: supersede b instead'
>>> from_the_head = Item(id="c", kind="note", title="v3", supersedes=["b"])
>>> lineage_rejection(items, claims, "c", from_the_head, now)
''
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Set

from memstore.item import Item

__all__ = ["claimant", "lineage_rejection"]


def claimant(
    items: Mapping[str, Item],
    claims: Mapping[str, Set[str]],
    id: str,
    besides: str,
    now: dt.datetime,
) -> str | None:
    """The current item other than ``besides`` whose ``supersedes`` names ``id``, if any.

    ``claims`` maps a name to the ids of the items whose ``supersedes`` hold
    it (the store keeps it beside ``items``); of several, the first by id.
    """
    ids = claims.get(id)
    if not ids:
        return None
    for cid in sorted(ids):
        if cid != besides and items[cid].is_active(now):
            return cid
    return None


def lineage_rejection(
    items: Mapping[str, Item],
    claims: Mapping[str, Set[str]],
    id: str,
    new: Item,
    now: dt.datetime,
) -> str:
    """Why storing ``new`` as ``id`` would break the supersede chains, or ``""``.

    Only a current item (active, within its deadline) can fork or loop a
    chain: one whose ``supersedes`` names itself, an item another current
    item already supersedes (two current versions of one fact), or a
    current item that supersedes it in turn, directly or down its chain
    (each would name the other as the version to supersede). Only the
    claims the write adds are checked (all of them when it makes a retired
    item current again), so an item stored before this rule stays
    editable. A name no stored item has is lineage all the same (an item
    deleted, purged, or kept elsewhere by the host) and passes.
    """
    if not new.is_active(now):
        return ""
    refs = new.supersedes
    old = items.get(id)
    if old is not None and old.is_active(now):  # only the claims this write adds
        refs = [ref for ref in refs if ref not in old.supersedes]
    if id in refs:
        return f"{_short(id)} cannot supersede itself (its supersedes names it)"
    for ref in refs:
        head = claimant(items, claims, ref, id, now)
        if head is not None:
            ref, head = _short(ref), _short(head)
            return f"{ref} is already superseded by {head}: supersede {head} instead"
    # Down the chain through current items only: a retired one ends it (a
    # revert, a -> b -> a with b retired, is a chain, not a loop).
    seen: set[str] = set()
    stack = [(ref, ref) for ref in refs]
    while stack:
        at, first = stack.pop()
        if at in seen:
            continue
        seen.add(at)
        it = items.get(at)
        if it is None or not it.is_active(now):
            continue
        if id in it.supersedes:
            new_id, first = _short(id), _short(first)
            return (
                f"{new_id} cannot supersede {first}: {first} is current and supersedes "
                f"{new_id} (directly or down its chain), so the chain would loop"
            )
        stack.extend((r, first) for r in it.supersedes)
    return ""


def _short(name: str) -> str:
    """An id or reference for a message: at most 80 characters (a reference may hold 1,000)."""
    return name if len(name) <= 80 else f"{name[:77]}..."
