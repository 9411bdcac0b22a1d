"""What ``Memory``'s writes are given, made into the ``Item`` the store takes.

``Memory.add``, ``add_many`` and ``supersede`` accept plain text, an
:class:`~memstore.item.Item`, or (``add_many``) a mapping of ``Item`` fields,
with ``partition=`` and ``private_to=`` beside them. Each becomes one freshly
built ``Item`` here: field names checked, the partition's and the owner's tags
put in place (a caller never spells ``tenant/...`` by hand), everything else
validated by the model. Nothing else holds what these functions return, so
the store may take it without a defensive copy.

>>> item = build_item("Buy oat milk.", "alice", None, {})
>>> item.kind, item.content, item.tags
('note', 'Buy oat milk.', ['tenant/alice'])
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from memstore import arguments as arg
from memstore._plainitem import plain_check, plain_item
from memstore.errors import InvalidItemError
from memstore.item import (
    SCOPE_PRIVATE,
    Item,
    _copy_link,
    _new_item,
    _set_dict,
    _set_extra,
    _set_fields_set,
    _set_private,
    well_typed,
)
from memstore.limits import MAX_TAG_CHARS, MAX_TAGS
from memstore.tags import (
    PARTITION_ALL,
    PARTITION_TAG_PREFIX,
    PRIVATE_OWNER_TAG_PREFIX,
    partition_from_tags,
    private_owner,
)

DEFAULT_KIND: Final = "note"
"""The kind of a note added as plain text without ``kind=``."""

FIELDS: Final = frozenset(Item.model_fields)
_TIMES: Final = ("stale_after", "created_at", "updated_at")
_NUMBER: Final = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
"""A number as text, which the model would read as a Unix time."""
_BUILT_FIELDS: Final = FIELDS - {"cell_originated"}
"""The fields an item built from an ``Item`` counts as set (as validating its dump did)."""
_NOTE: Final = Item(kind=DEFAULT_KIND)
"""What a note added as plain text is a copy of (with its content and tags)."""


def build_item(
    text_or_item: str | Item,
    partition: str | None,
    private_to: str | None,
    fields: dict[str, Any],
    *,
    plain: bool | None = None,
) -> Item:
    """A new ``Item`` from text or an item, ``fields`` laid over it, placed and owned.

    The two common shapes take fast paths that give what validation would:
    an ``Item`` whose fields already hold their declared types is copied, and
    plain text with no fields is a copy of a template note. Anything else is
    dumped, merged and validated by the model
    (:class:`~memstore.errors.InvalidItemError` naming every problem).
    ``plain``: whether an ``Item`` given is :func:`~memstore._plainitem.plain_item`,
    when the caller knows (``None``: asked here).
    """
    check_fields(fields)
    if isinstance(text_or_item, Item) and not fields:
        # Every field already holds what the model declares: a copy is what
        # re-validating a dump of it would give, without the round trip. The
        # common item is recognised at once, its tags taken as they are.
        if plain if plain is not None else plain_item(text_or_item.__dict__):
            return _placed_copy(text_or_item, partition, private_to, plain=True)
        if well_typed(text_or_item):
            return _placed_copy(text_or_item, partition, private_to)
    if isinstance(text_or_item, str) and not fields:
        if not text_or_item.strip():
            raise InvalidItemError("a note needs text (or a title)")
        tags = placed_tags(None, partition, private_to)
        item = _NOTE.clone(content=text_or_item, tags=tags)
        if private_to is None:
            object.__setattr__(item, "__pydantic_fields_set__", {"kind", "content", "tags"})
        else:
            item.__dict__["scope"] = SCOPE_PRIVATE
            object.__setattr__(
                item, "__pydantic_fields_set__", {"kind", "content", "tags", "scope"}
            )
        return item
    if isinstance(text_or_item, Item):
        data = text_or_item.model_dump()
        for flag in ("no_embed", "links_set"):
            data[flag] = getattr(text_or_item, flag)
        data.update(fields)
    elif isinstance(text_or_item, str):
        if not text_or_item.strip() and not fields.get("title"):
            raise InvalidItemError("a note needs text (or a title)")
        data = {"kind": DEFAULT_KIND, "content": text_or_item, **fields}
    else:
        raise InvalidItemError(f"add takes text or an Item, got {type(text_or_item).__name__}")
    data["tags"] = placed_tags(data.get("tags"), partition, private_to)
    if private_to is not None:
        data["scope"] = SCOPE_PRIVATE
    return validated(data)


def _placed_copy(
    source: Item, partition: str | None, private_to: str | None, *, plain: bool = False
) -> Item:
    """A new plain ``Item`` with ``source``'s fields, placed (a well-typed ``source``).

    What ``source.clone(cell_originated=False)`` with the built fields set and
    :func:`placed_tags` laid over it gives, built once: the clone's copies of
    the tags and the fields set, each replaced at once, are not made.
    ``plain``: ``source`` is :func:`~memstore._plainitem.plain_item`, whose
    tags :func:`placed_tags` takes as they are.
    """
    d = source.__dict__.copy()
    if plain and partition is None and private_to is None:
        d["tags"] = list(d["tags"])  # what placed_tags returns for them
    else:
        d["tags"] = placed_tags(d["tags"], partition, private_to)  # a new list, checked
    links = d["links"]
    d["links"] = [_copy_link(link) for link in links] if links else []
    d["supersedes"] = list(d["supersedes"])
    d["evidence_refs"] = list(d["evidence_refs"])
    d["data"] = dict(d["data"])
    d["cell_originated"] = False
    if private_to is not None:
        d["scope"] = SCOPE_PRIVATE
    item = _new_item(Item)
    _set_dict(item, d)
    _set_fields_set(item, set(_BUILT_FIELDS))
    _set_extra(item, None)
    _set_private(item, None)
    return item


def build_entries(
    items: Iterable[str | Item | Mapping[str, Any]],
    partition: str | None,
    plain: list[bool] | None = None,
) -> list[Item]:
    """Every entry of an ``add_many`` built, or the first bad one named by its position.

    A mapping may carry ``text``, ``partition`` and ``private_to`` beside the
    ``Item`` fields; its ``partition`` overrides the call's. ``plain``, when
    given, gets for each entry whether the item built of it is
    :func:`~memstore._plainitem.plain_item` (known here for an ``Item``
    entry copied as it is: the store need not look again).
    """
    built: list[Item] = []
    if plain is not None and partition is None:
        is_plain = plain_check()  # compiled where built
        for n, entry in enumerate(arg.entries(items)):
            if type(entry) is Item and is_plain(entry.__dict__):
                built.append(_placed_copy(entry, None, None, plain=True))
                plain.append(True)
                continue
            try:
                built.append(_built_entry(entry, partition, plain=False))
            except InvalidItemError as e:
                raise InvalidItemError(f"entry {n}: {e.reason}") from None
            plain.append(False)
        return built
    for n, entry in enumerate(arg.entries(items)):
        try:
            built.append(_built_entry(entry, partition))
        except InvalidItemError as e:
            raise InvalidItemError(f"entry {n}: {e.reason}") from None
    if plain is not None:
        plain.extend([False] * len(built))
    return built


def _built_entry(
    entry: str | Item | Mapping[str, Any], partition: str | None, *, plain: bool | None = None
) -> Item:
    """One entry of :func:`build_entries`, built (``plain`` as for :func:`build_item`)."""
    if type(entry) is not Item and isinstance(entry, Mapping):  # an ABC check
        fields = dict(entry)
        text = fields.pop("text", None)
        part = fields.pop("partition", partition)
        owner = fields.pop("private_to", None)
        base = text if text is not None else Item(kind=DEFAULT_KIND)
        return build_item(base, part, owner, fields)
    return build_item(entry, partition, None, {}, plain=plain)


def placed_tags(raw: object, partition: str | None, private_to: str | None) -> list[str]:
    """``raw`` tags checked, with the partition's and the owner's tag put in place."""
    tags = [] if raw is None else arg.text_list(raw, "tags", MAX_TAGS, MAX_TAG_CHARS)
    if partition is not None:
        name = partition_name(partition)
        tags = [t for t in tags if not t.startswith(PARTITION_TAG_PREFIX)]
        tags.append(PARTITION_TAG_PREFIX + name)
    if private_to is not None:
        private_to = arg.name_arg(private_to, "private_to")
        tags = [t for t in tags if not t.startswith(PRIVATE_OWNER_TAG_PREFIX)]
        tags.append(PRIVATE_OWNER_TAG_PREFIX + private_to)
    return tags


def kept_placement(current: Item, raw: object) -> list[str]:
    """``raw`` tags for an update of ``current``, with its partition and owner tags kept.

    Where an item lives and whose private note it is are not free tags: an
    update that leaves them out keeps them, and one that names another
    partition or owner is refused (move an item with
    :meth:`~memstore.memory.Memory.supersede` and ``partition=``).
    """
    tags = [] if raw is None else arg.text_list(raw, "tags", MAX_TAGS, MAX_TAG_CHARS)
    for prefix, what, have in (
        (PARTITION_TAG_PREFIX, "partition", partition_from_tags(current.tags)),
        (PRIVATE_OWNER_TAG_PREFIX, "owner", private_owner(current)),
    ):
        given = {t for t in tags if t.startswith(prefix)}
        if given - {prefix + have}:
            raise InvalidItemError(
                f"update keeps an item's {what} ({have or 'none'}); tags {sorted(given)} "
                f"would change it"
            )
        if have and not given:
            tags.append(prefix + have)
    return tags


def check_fields(fields: Mapping[str, Any]) -> None:
    """Refuse field names an ``Item`` does not have, listing the ones it does."""
    if not fields:  # the common call (text or an Item alone): nothing to check
        return
    unknown = sorted(set(fields) - FIELDS)
    if unknown:
        raise InvalidItemError(
            f"unknown field(s) {unknown}; an item has {sorted(FIELDS - {'links_set'})}"
        )
    for name in _TIMES:
        value = fields.get(name)
        if isinstance(value, int | float) or (
            isinstance(value, str) and _NUMBER.fullmatch(value.strip())
        ):
            # The model would read it as seconds since 1970: stale_after=0 (or
            # "30", meaning days) would add an item that is stale at once.
            raise InvalidItemError(
                f"{name} must be an aware datetime (or RFC 3339 text), got "
                f"{arg.describe(value)}; a number is not a time"
            )


def validated(data: Mapping[str, Any]) -> Item:
    """``Item.model_validate`` with pydantic's report folded into one clear error."""
    try:
        return Item.model_validate(dict(data))
    except ValueError as e:  # pydantic's ValidationError, with every problem listed
        raise InvalidItemError(short(str(e))) from None


def short(text: str) -> str:
    """A pydantic message on one line, without its "For further information" links."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("For further")]
    return " ".join(ln.strip() for ln in lines)


def partition_name(partition: str | None) -> str:
    """A checked partition name (``""`` for none); ``*`` names every partition, not one."""
    if partition is None:
        return ""
    name = arg.name_arg(partition, "partition")
    if name == PARTITION_ALL:
        raise InvalidItemError(f"partition {name!r} is not a name here (no '*')")
    return name
