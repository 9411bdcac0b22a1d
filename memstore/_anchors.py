"""The items an anchor can name, by case-folded id and by case-folded subject.

:meth:`Store.resolve_anchors <memstore.store.Store.resolve_anchors>` turns the
text a caller gives :meth:`Memory.context <memstore.memory.Memory.context>`
into anchor ids: an item whose id is that text (case-insensitively), failing
that every item whose subject is that text, failing that every item whose
subject or title contains it. The first two are equality after
:meth:`str.casefold`, so an :class:`Anchors` index answers them with one dict
lookup each instead of a walk over the store.

Ids are stored as written, so ``"Ledger-DB"`` and ``"ledger-db"`` may be two
items: one folded key can name several ids. Only items that could ever be an
anchor are entered: shared ones whose stored status is ``active`` (a private
item never resolves, nor a retired one). Whether such an item is past its
``stale_after`` depends on the clock, so the reader still asks
:meth:`~memstore.item.Item.is_active` of what the index names.

The store builds the index at the first anchor lookup and keeps it as items
change (``StoreBase._set``), as it does its :class:`~memstore._tally.Tally`.

>>> from memstore.item import Item
>>> anchors = Anchors.of([Item(id="Ledger-DB", kind="note", subject="Ledger"),
...                       Item(id="ledger-db", kind="note", subject="ledger")])
>>> sorted(anchors.by_id("ledger-db")), sorted(anchors.by_subject("ledger"))
(['Ledger-DB', 'ledger-db'], ['Ledger-DB', 'ledger-db'])
>>> anchors.by_id("nothing")
()
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from memstore.item import SCOPE_PRIVATE, STATUS_ACTIVE, Item

__all__ = ["Anchors"]

_Ids = dict[str, str | set[str]]
"""A folded key to the one id it names (most keys) or the set of them."""


class Anchors:
    """Shared items of stored status ``active``, by folded id and by folded subject."""

    __slots__ = ("_ids", "_subjects", "_titles")

    def __init__(self) -> None:
        self._ids: _Ids = {}
        self._subjects: _Ids = {}
        self._titles: _Ids = {}

    @classmethod
    def of(cls, items: Iterable[Item]) -> Anchors:
        """An index of ``items`` (one walk: the store's, at the first anchor lookup)."""
        anchors = cls()
        for it in items:
            anchors.add(it)
        return anchors

    def add(self, item: Item) -> None:
        """Enter ``item``, now stored (nothing, if it can never be an anchor)."""
        if _named(item):
            d = item.__dict__  # where pydantic keeps the fields: faster than attributes
            id, subject, title = d["id"], d["subject"], d["title"]
            _put(self._ids, _fold(id), id)
            if subject:
                _put(self._subjects, _fold(subject), id)
            if title:
                _put(self._titles, _fold(title), id)

    def remove(self, item: Item) -> None:
        """Take out ``item``, stored until now (stored items are never changed in place)."""
        if _named(item):
            d = item.__dict__
            id, subject, title = d["id"], d["subject"], d["title"]
            _drop(self._ids, id.casefold(), id)
            if subject:
                _drop(self._subjects, subject.casefold(), id)
            if title:
                _drop(self._titles, title.casefold(), id)

    def by_id(self, folded: str) -> Collection[str]:
        """The ids whose :meth:`~str.casefold` is ``folded``, in no order."""
        return _get(self._ids, folded)

    def by_subject(self, folded: str) -> Collection[str]:
        """The ids of the items whose subject, case-folded, is ``folded``, in no order."""
        return _get(self._subjects, folded)

    def containing(self, folded: str) -> set[str]:
        """The ids of the items whose subject or title, case-folded, contains ``folded``.

        One pass over the distinct folded subjects and titles, not over the items.
        """
        found: set[str] = set()
        for index in (self._subjects, self._titles):
            for key, held in index.items():
                if folded in key:
                    if isinstance(held, str):
                        found.add(held)
                    else:
                        found |= held
        return found

    def __eq__(self, other: object) -> bool:
        """Whether both hold the same entries (the store's invariant check compares them)."""
        if not isinstance(other, Anchors):
            return NotImplemented
        return all(
            _sets(mine) == _sets(theirs)
            for mine, theirs in (
                (self._ids, other._ids),
                (self._subjects, other._subjects),
                (self._titles, other._titles),
            )
        )

    __hash__ = None  # type: ignore[assignment]  # mutable: compared, never hashed


def _named(item: Item) -> bool:
    """Whether ``item`` could be an anchor at some moment: shared and stored active."""
    return item.scope != SCOPE_PRIVATE and item.status == STATUS_ACTIVE


def _fold(text: str) -> str:
    """``text.casefold()``, as ``text`` itself when that is the same (one string kept, not two)."""
    folded = text.casefold()
    return text if folded == text else folded


def _put(index: _Ids, key: str, id: str) -> None:
    held = index.get(key)
    if held is None:
        index[key] = id
    elif isinstance(held, str):
        if held != id:
            index[key] = {held, id}
    else:
        held.add(id)


def _drop(index: _Ids, key: str, id: str) -> None:
    held = index.get(key)
    if held is None:
        return
    if isinstance(held, str):
        if held == id:
            del index[key]
        return
    held.discard(id)
    if len(held) == 1:
        index[key] = next(iter(held))


def _get(index: _Ids, key: str) -> Collection[str]:
    held = index.get(key)
    if held is None:
        return ()
    return (held,) if isinstance(held, str) else held


def _sets(index: _Ids) -> dict[str, set[str]]:
    return {key: {held} if isinstance(held, str) else set(held) for key, held in index.items()}
