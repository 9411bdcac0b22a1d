"""The lexical index's write queue: puts and removes held until the next read.

A store writes far more often, item by item, than a search reads: a loop of
upserts, a transaction's rollback, a restore. Indexing each item as it comes
pays the per-document costs (splitting, counting, numbering words, the
per-slot columns) one call at a time, and indexes items that a later write in
the same burst replaces. The :class:`~memstore._lexindex.LexicalIndex`
instead queues its writes here and applies them in one batch when something
reads it, as a search engine's indexing buffer is refreshed before a search
(Lucene's near-real-time reader); here every read refreshes, so a search
always sees every write made before it.

The queue holds at most one entry per id, and collapses a run of writes to
the same id into what the eager sequence would have left behind, slot order
included: the lexicon orders ties by slot, and a document takes a new slot
exactly when its text (or its ``index_id`` flag) changes. So an entry
remembers whether the document must take a new slot (``reindex``), a write
that keeps the text keeps the entry where it stands (the eager index would
have kept the slot), and a write that changes it moves the entry to the end
of the queue (the eager index would have given it the highest slot so far).

>>> from memstore.item import Item
>>> q = WriteQueue()
>>> a, b = Item(id="a", kind="note", title="one"), Item(id="b", kind="note", title="two")
>>> q.put(a, False, indexed=None, indexed_flag=False)
1
>>> q.put(b, False, indexed=None, indexed_flag=False)
2
>>> q.put(a.clone(title="three"), False, indexed=None, indexed_flag=False)
2
>>> [(id, e.item.title, e.reindex) for id, e in q.take().items() if e]  # a moved behind b
[('b', 'two', True), ('a', 'three', True)]
"""

from __future__ import annotations

from typing import NamedTuple

from memstore.item import Item

__all__ = ["QUEUE_MAX", "Queued", "WriteQueue", "same_text"]

QUEUE_MAX = 512
"""Queued writes that trigger an apply without waiting for a read.

It bounds what the first read after a burst of writes waits for (about 10 ms
of indexing on a quick machine) and what the queue holds; batches of 128 to
2,048 documents cost the same per document, so nothing is gained above it."""


def same_text(a: Item, b: Item) -> bool:
    """Whether two items give the index the same words (title, content, event date)."""
    return a.title == b.title and a.content == b.content and a.event_date == b.event_date


class Queued(NamedTuple):
    """A put waiting to be applied.

    ``reindex``: the document takes a new slot (its words are indexed again);
    otherwise only its per-slot columns change. ``words``: its title's and
    content's words when the writer had them already (``None``: split at apply).
    """

    item: Item
    index_id: bool
    reindex: bool
    words: tuple[list[str], list[str]] | None


class WriteQueue:
    """Pending puts (a :class:`Queued`) and removes (``None``) by id, in apply order.

    Not thread-safe on its own: the index calls it under its lock.
    """

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: dict[str, Queued | None] = {}
        """The queue, id -> entry in apply order; a new dictionary after each :meth:`take`.

        Public for :meth:`LexicalIndex.put <memstore._lexindex.LexicalIndex.put>`,
        which adds a document new to the index and to the queue here itself, as
        :meth:`put` would (one frame fewer a write); everything else goes through
        :meth:`put`.
        """

    def __len__(self) -> int:
        return len(self.pending)

    def __bool__(self) -> bool:
        return bool(self.pending)

    def put(
        self,
        item: Item,
        index_id: bool,
        *,
        indexed: Item | None,
        indexed_flag: bool,
        words: tuple[list[str], list[str]] | None = None,
    ) -> int:
        """Queue ``item``; ``indexed`` and ``indexed_flag``: what the index holds for its id now.

        Putting the very item (and flag) that the index would hold after the
        queue is a no-op, as it is for the index itself. Returns how many
        writes wait now (what ``len()`` of the queue says, without a second
        call: the index's put asks it of every write).
        """
        id = item.id
        queue = self.pending
        if id not in queue:
            if indexed is None:
                # tuple.__new__ straight from C: the named tuple's own __new__ is a Python frame.
                queue[id] = tuple.__new__(Queued, (item, index_id, True, words))
            elif indexed is not item or indexed_flag != index_id:
                reindex = indexed_flag != index_id or not same_text(indexed, item)
                queue[id] = tuple.__new__(Queued, (item, index_id, reindex, words))
            return len(queue)
        queued = queue[id]
        if queued is None:  # removed since the last apply: a new slot
            del queue[id]
            queue[id] = Queued(item, index_id, True, words)
            return len(queue)
        if queued.index_id == index_id and same_text(queued.item, item):
            if queued.item is not item:  # the same words: the entry keeps its place
                queue[id] = Queued(item, index_id, queued.reindex, queued.words or words)
            return len(queue)
        del queue[id]  # new words: a new slot, after every slot given so far
        queue[id] = Queued(item, index_id, True, words)
        return len(queue)

    def remove(self, id: str, *, indexed: bool) -> None:
        """Queue the removal of ``id``; ``indexed``: whether the index holds it now."""
        self.pending.pop(id, None)
        if indexed:
            self.pending[id] = None

    def holds(self, id: str, indexed: bool) -> bool:
        """Whether ``id`` is indexed once the queue is applied (``indexed``: it is now)."""
        queued = self.pending.get(id, ...)
        return indexed if queued is ... else queued is not None

    def take(self) -> dict[str, Queued | None]:
        """Every queued write, in apply order; the queue is left empty."""
        queue, self.pending = self.pending, {}
        return queue
