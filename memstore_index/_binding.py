"""Binding a CellStore to a Store: the index follows the store's commits, in commit order.

The store calls a before-commit listener once per write group, under its
lock (here: retry the backlog, then embed the group's changed texts, so an
embedding failure fails the write), and an after-commit listener once per
change, in commit order, without its lock (here: index what was prepared).
The index lags the store until publication reaches it, so "text unchanged"
is decided against each change's ``previous`` item, never the index.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstore.config import Change
from memstore.item import Item
from memstore_index._vectorfile import StoredVector, text_hash
from memstore_index._writes import Writes
from memstore_index.entry import embed_text, embeddable, entry_for

if TYPE_CHECKING:
    from memstore.store import Store

__all__ = ["StoreBinding"]

_log = logging.getLogger("memstore")


class StoreBinding(Writes):
    """attach, sync, and the two listeners."""

    def attach(self, store: Store, *, fail_writes: bool = True) -> None:
        """Keep this index in step with ``store`` through its change listeners.

        An upsert of an active item embeds and indexes ``embed_text(item)``
        (unless ``no_embed``, or the text did not change); a delete, expiry,
        supersession or refutation removes it. With ``fail_writes`` (the
        default) the embedding runs before the write commits, so an embedding
        failure fails the write and store and index never disagree; without it
        embedding runs after the commit and a failure leaves the item pending
        (:attr:`pending`: found lexically, never by its old vector) until the
        next write group or :meth:`flush` embeds it.

        Saving vectors to the file happens after the commit either way: a
        vector file that refuses them (full disk) does not fail the write; the
        vectors join the backlog, and each write group starts by retrying it.

        The index follows the store in commit order even when writers race:
        "text unchanged" is decided against the item the change replaced (the
        store's committed state, exact under its lock), not against the index,
        which lags until earlier commits are published.
        """
        self._fail_writes = fail_writes
        store.add_change_listener(self._before_commit, before_commit=True)
        store.add_undo_listener(self._undone)
        store.add_change_listener(self._after_commit)
        self.sync(store)

    def sync(self, store: Store) -> None:
        """Make the index hold exactly the store's embeddable items (embedding what is missing)."""
        store.lock.acquire()
        try:
            items = [it for it in store.items_locked() if embeddable(it)]
        finally:
            store.lock.release()
        want = {it.id for it in items}
        with self._lock:
            for id in [i for i in self._label_of if i not in want]:
                self.remove(id)
        self.upsert_many((entry_for(it), embed_text(it)) for it in items)

    def _before_commit(self, changes: Sequence[Change]) -> None:
        self._retry_backlog()  # a write group is the backlog's natural retry point
        if not self._fail_writes:
            return
        todo = [c for c in changes if c.op == "upsert" and c.item and embeddable(c.item)]
        if not todo:
            return
        items = [c.item for c in todo if c.item is not None]
        # By the time these rows apply, every change committed before them has
        # applied: the id then holds its ``previous`` item's text.
        base = [
            text_hash(embed_text(c.previous))
            if c.previous is not None and embeddable(c.previous)
            else None
            for c in todo
        ]
        prepared = self._prepare([(entry_for(it), embed_text(it)) for it in items], base)
        with self._lock:
            for it, p in zip(items, prepared, strict=True):
                self._staged.setdefault(it.id, []).append((it, p))

    def _undone(self, changes: Sequence[Change]) -> None:
        """Drop what :meth:`_before_commit` staged for a group that never committed.

        Nothing else would: only a published change takes its staged row, so
        each failed write (a full disk, a locked journal) would keep its
        vectors here for good.
        """
        with self._lock:
            for c in changes:
                staged = self._staged.get(c.id)
                if staged and c.item is not None:
                    staged[:] = [(obj, p) for obj, p in staged if obj is not c.item]
                    if not staged:
                        del self._staged[c.id]

    def _after_commit(self, op: str, item: Item | None, id: str, kind: str) -> None:
        prepared: StoredVector | None = None
        with self._lock:
            staged = self._staged.get(id)
            if staged:
                # Staged for this very object: use it, and drop what was staged
                # before it (older versions, or groups that were undone).
                for i, (obj, p) in enumerate(staged):
                    if obj is item:
                        prepared = p
                        del staged[: i + 1]
                        break
                if not staged:
                    del self._staged[id]
        if op == "delete" or item is None or not embeddable(item):
            self._remove(id)
            return
        entry, text = entry_for(item), embed_text(item)
        try:
            self._apply([prepared] if prepared is not None else self.prepare([(entry, text)]))
        except Exception as e:
            # Committed, not embedded: the old vector must not answer for the
            # new text. The item waits in the backlog (lexical search finds it).
            with self._lock:
                first = not self._unembedded
                self._remove(id)
                self._unembedded[id] = (entry, text)
            if first:
                _log.warning(
                    "memstore: embedding %r failed after its write committed (%s); it is "
                    "searched lexically until the next write or flush() embeds it",
                    id,
                    e,
                )
