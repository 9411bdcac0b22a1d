"""Reserved tags: partition, author, shared, private owner, service and topic.

Tags are plain strings on an item; a few prefixes carry meaning the engine
enforces:

==========================  ===================================================
``tenant/<name>``           the item's partition (:data:`PARTITION_TAG_PREFIX`)
``author/<identity>``       the authenticated caller that last authored it
``shared``                  deliberately visible to every partition
``user:<hash>``             the owner of a private item
``service/<name>``          the service or entity the item concerns
``topic/<value>``           a free-form subject a model supplied
==========================  ===================================================

>>> it = Item(kind="stable_fact", title="t", tags=["tenant/alpha", "service/auth"])
>>> partition_from_tags(it.tags), service_tag_value(it)
('alpha', 'auth')
>>> stamp_author_tag(it, "ana"); it.tags
['tenant/alpha', 'service/auth', 'author/ana']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import regex

from memstore.item import ORIGIN_DERIVED, ORIGIN_HUMAN, SCOPE_PRIVATE, Item

__all__ = [
    "AUTHOR_TAG_PREFIX",
    "PARTITION_ALL",
    "PARTITION_TAG_PREFIX",
    "PRIVATE_OWNER_TAG_PREFIX",
    "SERVICE_TAG_PREFIX",
    "SHARED_TAG",
    "TOPIC_TAG_PREFIX",
    "author_tag_value",
    "filter_visible_to_user",
    "has_shared_tag",
    "in_partition",
    "is_private_item",
    "is_shared_item",
    "partition_from_tags",
    "private_owner",
    "restored_origin",
    "sanitize_tag_value",
    "service_from_tags",
    "service_tag_value",
    "stamp_author_tag",
    "strip_author_tags",
    "visible_to_user",
]

PARTITION_ALL = "*"
"""The partition argument meaning "no partition filter" (read-only operator surfaces only)."""
PARTITION_TAG_PREFIX = "tenant/"
"""Prefix of the tag carrying an item's partition, e.g. ``tenant/alpha``."""
AUTHOR_TAG_PREFIX = "author/"
"""Prefix of the tag naming the authenticated caller that last authored a cell."""
PRIVATE_OWNER_TAG_PREFIX = "user:"
"""Prefix of the tag carrying a private item's owner hash: the only home of ownership."""
SERVICE_TAG_PREFIX = "service/"
"""Prefix of the tag naming the service or entity an item concerns."""
TOPIC_TAG_PREFIX = "topic/"
"""Prefix of the tag keeping a model-supplied subject that was not accepted as one."""
SHARED_TAG = "shared"
"""The literal tag that makes a cell visible to every partition (trusted writers only)."""


def _prefixed(tags: Iterable[str], prefix: str) -> str | None:
    for t in tags:
        if t.startswith(prefix):
            return t[len(prefix) :]
    return None


def partition_from_tags(tags: Sequence[str]) -> str:
    """The partition named by the first ``tenant/`` tag, or ``""`` when none is."""
    return _prefixed(tags, PARTITION_TAG_PREFIX) or ""


def in_partition(item: Item, partition: str | None) -> bool:
    """Whether ``partition``'s searches may see ``item`` by placement (scope aside).

    The item's own partition, untagged items and ``shared`` ones; ``None`` and
    :data:`PARTITION_ALL` take every partition, and ``""`` only untagged and
    shared items.
    """
    if partition is None or partition == PARTITION_ALL:
        return True
    return partition_from_tags(item.tags) in ("", partition) or SHARED_TAG in item.tags


def private_owner(item: Item) -> str:
    """The owner hash carried in the item's ``user:`` tag, or ``""``."""
    return _prefixed(item.tags, PRIVATE_OWNER_TAG_PREFIX) or ""


def is_private_item(item: Item) -> bool:
    """Whether the item is scoped private."""
    return item.scope == SCOPE_PRIVATE


def has_shared_tag(tags: Sequence[str]) -> bool:
    """Whether ``tags`` carries :data:`SHARED_TAG`."""
    return SHARED_TAG in tags


def is_shared_item(item: Item) -> bool:
    """Whether the item carries :data:`SHARED_TAG`."""
    return SHARED_TAG in item.tags


def visible_to_user(item: Item, user_hash: str) -> bool:
    """Whether a caller identified by ``user_hash`` may see ``item``.

    A shared (public) item is visible to everyone. A private item is visible
    only to the exact hash tagged as its owner: no administrator, partition or
    operator bypass, and an empty hash owns nothing.
    """
    if item.scope != SCOPE_PRIVATE:
        return True
    owner = private_owner(item)
    return bool(owner) and owner == user_hash


def filter_visible_to_user(items: Iterable[Item], user_hash: str) -> list[Item]:
    """The items :func:`visible_to_user` allows for ``user_hash``, order kept."""
    return [it for it in items if visible_to_user(it, user_hash)]


def author_tag_value(item: Item) -> str | None:
    """The identity from the item's first ``author/`` tag, or ``None``."""
    return _prefixed(item.tags, AUTHOR_TAG_PREFIX)


def service_from_tags(tags: Sequence[str]) -> str | None:
    """The value of the first ``service/`` tag, or ``None`` (an index entry's tags too)."""
    return _prefixed(tags, SERVICE_TAG_PREFIX)


def service_tag_value(item: Item) -> str | None:
    """The value of the item's ``service/`` tag, or ``None``."""
    return service_from_tags(item.tags)


def strip_author_tags(tags: Sequence[str] | None) -> list[str]:
    """``tags`` without any ``author/`` entry, order of the rest kept (``None``-safe)."""
    return [t for t in tags or () if not t.startswith(AUTHOR_TAG_PREFIX)]


def stamp_author_tag(item: Item, author: str) -> None:
    """Leave ``item.tags`` with a single ``author/<author>`` tag, appended last.

    Every existing author tag is removed first, so a caller-supplied list cannot
    assert another author than the one the write path resolved. Idempotent; a
    no-op when ``author`` is empty.
    """
    if not author:
        return
    item.tags = [*strip_author_tags(item.tags), AUTHOR_TAG_PREFIX + sanitize_tag_value(author)]


_TAG_UNSAFE = regex.compile(r"[,\p{Cc}]+")
_SPACES = regex.compile(r"\s+")


def sanitize_tag_value(v: str) -> str:
    """Make ``v`` safe as the value segment of a tag.

    Trims whitespace and turns commas (tag lists are split on them),
    newlines and the other control characters (no new tag may hold one, see
    :func:`memstore.validate.validate_base`) into single spaces, so a value
    cannot be re-split into several tags on a later round trip, break a
    one-line render or make a write refused.

    >>> sanitize_tag_value("  auth,\\nbilling ")
    'auth billing'
    >>> sanitize_tag_value("ana\\x1b[2J")
    'ana [2J'
    """
    return _SPACES.sub(" ", _TAG_UNSAFE.sub(" ", v)).strip()


def restored_origin(item: Item) -> str:
    """A restored cell's origin: its own, else human if authored, else derived."""
    if item.origin:
        return item.origin
    if author_tag_value(item) is not None:
        return ORIGIN_HUMAN
    return ORIGIN_DERIVED
