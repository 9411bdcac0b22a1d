"""Containers that the store's own items share: one empty list, one dict, common tag lists.

Most items carry no links, supersedes, evidence or data, and many carry the
same tags (a tenant's, a source's), yet each such field is a container of its
own, and every container is an object the cyclic garbage collector tracks and
walks at each full collection. An item cost eight of them (the model, its
``__dict__``, its fields set, four lists and a dict): at 20k items, 160k
objects walked again and again while the store grows, and kept in memory for
nothing.

A stored item is never changed in place (every change stores a new object,
and every read hands out a :meth:`~memstore.item.Item.clone`), so the store's
own items can share them: :func:`share_containers` points an item's empty
``links``, ``supersedes``, ``evidence_refs`` and ``data`` at one shared empty
container each, its ``tags`` at the one shared list of the same tags, and its
fields set at the one shared set of the same names. The shared containers
refuse every change (:class:`TypeError`), so code that would change a stored
item in place fails loudly instead of changing every other item at once;
:meth:`Item.clone`, ``copy`` and ``pickle`` make plain ones of them.

The containers that cannot be shared (non-empty ``data``, ``supersedes``,
``evidence_refs`` and ``links``, tags past the shared lists' cap) are frozen
copies of their own, and a stored item's links get frozen fields sets too:
whoever holds a stored item (a listener, a change hook) cannot change it in
place, so the store never drifts from what the journal recorded. Setting a
field is refused before it lands (:class:`~memstore.item.Item` checks its
fields set). Copying ``data`` and the lists costs well under a microsecond a
write; a frozen ``data`` dict is one more object the collector tracks.

>>> from memstore.item import Item
>>> a = Item(kind="note", title="a", tags=["tenant/ops"])
>>> b = Item(kind="note", title="b", tags=["tenant/ops"])
>>> share_containers(a); share_containers(b)
>>> a.links is b.links and a.data is b.data and a.tags is b.tags
True
>>> a.tags.append("x")
Traceback (most recent call last):
    ...
TypeError: a stored item is never changed in place: change a clone of it
>>> type(a.clone().tags) is list
True
>>> import copy
>>> copy.deepcopy(a).links.append("y")  # a copy is the caller's own
"""

from __future__ import annotations

from typing import Any, NoReturn

from pydantic import BaseModel

from memstore.item import (
    STORED_REFUSAL,
    Item,
    _copy_link,
    _new_item,
    _set_dict,
    _set_extra,
    _set_fields_set,
    _set_private,
)

__all__ = ["share_containers", "stored_copy"]

_REFUSED = STORED_REFUSAL


def _refuse(*_: Any, **__: Any) -> NoReturn:
    raise TypeError(_REFUSED)


class _SharedList(list[Any]):
    """A list shared by stored items, never changed; a copy of it (or a pickle) is a plain one."""

    __slots__ = ()
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: Any) -> list[Any]:
        return list(self)

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (list(self),)


class _FrozenDict(dict[str, str]):
    """A stored item's ``data``, never changed; a copy of it (or a pickle) is a plain dict."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    update = setdefault = pop = popitem = clear = _refuse

    def __copy__(self) -> dict[str, str]:
        return dict(self)

    def __deepcopy__(self, memo: Any) -> dict[str, str]:
        return dict(self)

    def __reduce__(self) -> tuple[type[dict[str, str]], tuple[dict[str, str]]]:
        return dict, (dict(self),)


class _FieldsSet(set[str]):
    """A pydantic fields set shared by every stored item with the same one: never changed.

    A copy of it (or a pickle) is a plain ``set``.
    """

    __slots__ = ()
    refuses_changes = True
    """What :class:`~memstore.item.Item` checks before a field is set: a stored item."""
    add = discard = remove = pop = clear = update = _refuse
    difference_update = intersection_update = symmetric_difference_update = _refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _refuse

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[type[set[str]], tuple[list[str]]]:
        return set, (list(self),)


_EMPTY_LIST: Any = _SharedList()
_EMPTY_DICT: Any = _FrozenDict()
_FIELDS_SETS: dict[frozenset[str], _FieldsSet] = {}
_MAX_FIELDS_SETS = 1024
"""Distinct fields sets shared (items name their fields in few ways); past it, none is."""
_TAG_LISTS: dict[tuple[str, ...], _SharedList] = {}
_MAX_TAG_LISTS = 4096
"""Distinct tag lists shared (a tenant's or a source's tags recur); past it, none is."""


def share_containers(item: Item) -> None:
    """Point the store's own ``item``'s containers at the shared ones (see above).

    Only for an item the store is about to keep and that nobody else holds:
    the item is changed in place. Never raises: a field that cannot be
    shared (an unhashable tag of an item stored unvalidated) keeps its own.
    """
    d = item.__dict__
    tags = d["tags"]
    if type(tags) is not _SharedList:
        try:
            key = tuple(tags)
            shared_tags = _TAG_LISTS.get(key)
            if shared_tags is None and len(_TAG_LISTS) < _MAX_TAG_LISTS:
                shared_tags = _TAG_LISTS.setdefault(key, _SharedList(key))
        except TypeError:
            shared_tags = None
        d["tags"] = shared_tags if shared_tags is not None else _SharedList(tags)
    links = d["links"]
    if not links:
        d["links"] = _EMPTY_LIST
    elif type(links) is not _SharedList:
        for link in links:
            _freeze_fields(link)
        d["links"] = _SharedList(links)
    for name in ("supersedes", "evidence_refs"):
        refs = d[name]
        if not refs:
            d[name] = _EMPTY_LIST
        elif type(refs) is not _SharedList:
            d[name] = _SharedList(refs)
    data = d["data"]
    if not data:
        d["data"] = _EMPTY_DICT
    elif type(data) is not _FrozenDict:
        d["data"] = _FrozenDict(data)
    _freeze_fields(item)


def stored_copy(item: Item) -> Item:
    """A copy of ``item`` for the store to keep, once :func:`share_containers` has run on it.

    :meth:`Item.clone` copies every list and dict, and :func:`share_containers`
    then replaces each of them with a shared (or frozen) one made from its
    contents: so this copies only what that leaves in place, the links (a
    stored item's are frozen, so a link must not be the caller's), and lets
    the copy point at ``item``'s other containers until then. The two share
    nothing after it: the write's item can go back to its writer as the item
    stored (equal to a clone of the stored one), one copy a write fewer.

    The copy gets its frozen fields set here (the one
    :func:`share_containers` would point it at): no plain copy of the set is
    made only to be replaced.
    """
    d = item.__dict__.copy()
    links = d["links"]
    if links:
        d["links"] = [_copy_link(link) for link in links]
    new = _new_item(Item)
    _set_dict(new, d)
    fields = item.__pydantic_fields_set__
    shared = _shared_fields(fields)
    _set_fields_set(new, set(fields) if shared is None else shared)
    _set_extra(new, None)
    _set_private(new, None)
    return new


def _freeze_fields(model: BaseModel) -> None:
    """Point ``model``'s fields set at the shared frozen one (past the cap: a frozen copy).

    A frozen fields set is what makes :class:`~memstore.item.Item` (and a link)
    refuse a change of a field before it lands.
    """
    fields = model.__pydantic_fields_set__
    if type(fields) is _FieldsSet:
        return
    shared = _shared_fields(fields)
    if shared is not None:
        _set_fields_set(model, shared)


_last_fields: list[_FieldsSet] = [_FIELDS_SETS.setdefault(frozenset(), _FieldsSet())]
"""The shared fields set :func:`_shared_fields` gave last (one slot, replaced whole).

It starts as the registered empty one, so that every set it gives is the
registered set of its names (below the cap).
"""


def _shared_fields(fields: set[str]) -> _FieldsSet | None:
    """The frozen fields set equal to ``fields``: the shared one (past the cap, a new one).

    ``None`` when ``fields`` holds something unhashable (an item stored
    unvalidated): it keeps its own. Writes in a row mostly name the same
    fields, so the set given last is tried first: comparing two sets of about
    twenty names costs about a third of building the ``frozenset`` key.
    """
    last = _last_fields[0]
    if len(fields) == len(last) and fields == last:
        return last
    try:
        key_fields = frozenset(fields)
    except TypeError:
        return None
    shared = _FIELDS_SETS.get(key_fields)
    if shared is None:
        if len(_FIELDS_SETS) >= _MAX_FIELDS_SETS:
            return _FieldsSet(key_fields)  # not shared, so not remembered as the last
        shared = _FIELDS_SETS.setdefault(key_fields, _FieldsSet(key_fields))
    _last_fields[0] = shared
    return shared
