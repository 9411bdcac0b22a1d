"""What the vector index knows about an item without hydrating it."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from memstore.item import SCOPE_PRIVATE, STATUS_ACTIVE, Item
from memstore.tags import SHARED_TAG, partition_from_tags

__all__ = ["IndexEntry", "embed_text", "entry_for"]


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """An index entry: the fields a visibility predicate reads, no text.

    A searcher decides what a caller may see from these alone (``DocVisible``
    in the seed), so a hit is filtered before the item is ever looked up.
    """

    id: str
    kind: str = ""
    subject: str = ""
    scope: str = "public"
    partition: str = ""
    tags: tuple[str, ...] = ()
    stale_after: _dt.datetime | None = None
    """The item's deadline: past it, the item reads as stale and a search skips it."""

    def expired(self, now: _dt.datetime) -> bool:
        """Whether the entry's deadline has passed at ``now``."""
        return self.stale_after is not None and now >= self.stale_after

    @property
    def shared(self) -> bool:
        """Whether the entry carries the ``shared`` tag (visible to every partition)."""
        return SHARED_TAG in self.tags

    @property
    def private(self) -> bool:
        """Whether the entry's item is private to its owner."""
        return self.scope == SCOPE_PRIVATE


def entry_for(item: Item) -> IndexEntry:
    """The index entry of a stored item."""
    return IndexEntry(
        id=item.id,
        kind=item.kind,
        subject=item.subject,
        scope=item.scope,
        partition=partition_from_tags(item.tags),
        tags=tuple(item.tags),
        stale_after=item.stale_after,
    )


def embed_text(item: Item) -> str:
    """The text an item is embedded from: its title, a newline, then its content.

    The title is the writer's own summary, so it leads: a model truncating a
    long content still sees it. Tags, subject and dates are left out: they
    filter, they do not mean.

    >>> embed_text(Item(kind="note", title="Deploy freeze", content="no deploys on Friday"))
    'Deploy freeze\\nno deploys on Friday'
    """
    if not item.content:
        return item.title
    if not item.title:
        return item.content
    return f"{item.title}\n{item.content}"


def embeddable(item: Item) -> bool:
    """Whether an item belongs in the vector index: active and not ``no_embed``."""
    return item.status == STATUS_ACTIVE and not item.no_embed
