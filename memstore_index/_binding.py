"""Binding a CellStore to a Store: the index follows the store's commits, in commit order.

The store calls a before-commit listener once per write group, under its
lock (here: retry the backlog, then embed the group's changed texts, so an
embedding failure fails the write), and a grouped after-commit listener once
per run of committed changes, in commit order, without its lock (here: index
what was prepared, the whole run in one graph insert and one file write).
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
        store.add_change_listener(self._after_group, grouped=True)
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

    def _after_group(self, changes: Sequence[Change]) -> None:
        """Index a run of committed changes at once: each id as the run leaves it.

        The store's grouped listener (one call per write group, or per run of
        groups published together). Applying each change in turn would insert
        into the graph and write the vector file once per item; only the
        state each id ends the run in matters, so the run is reduced to one
        row or one removal per id (an item updated twice ends with its last
        vector, one added then deleted ends absent) and applied as one
        :meth:`_apply`: one graph insert, one file transaction. Each change
        still takes the row staged for its own item object, so a later
        group's staging is never mistaken for this one's.
        """
        final: dict[str, StoredVector | Item | None] = {}  # None: remove; Item: prepare now
        with self._lock:
            for c in changes:
                prepared = self._take_staged(c.id, c.item)
                before = final.pop(c.id, None)  # re-added: ids apply in their last change's order
                item = c.item
                if c.op == "delete" or item is None or not embeddable(item):
                    final[c.id] = None
                elif prepared is None or (prepared.vector.size == 0 and isinstance(before, Item)):
                    final[c.id] = item
                elif (
                    prepared.vector.size == 0
                    and isinstance(before, StoredVector)
                    and before.text_hash == prepared.text_hash
                ):
                    # Staged "text unchanged" against the change before it, which
                    # this run holds too: that change's vector is the one to keep.
                    final[c.id] = StoredVector(
                        prepared.entry, -1, prepared.text_hash, prepared.text, before.vector
                    )
                else:
                    final[c.id] = prepared
        rows = list(final.items())
        try:
            self._apply_run(rows)
        except Exception:
            # An embedding failed (nothing changed yet): each id on its own, so
            # that one failing text leaves only its own item pending.
            for id, row in rows:
                self._apply_one(id, row)

    def _take_staged(self, id: str, item: Item | None) -> StoredVector | None:
        """The row staged for this very ``item`` object, if any (lock held).

        What was staged before it goes too: older versions, or groups that
        were undone, which no change will take now.
        """
        staged = self._staged.get(id)
        if not staged:
            return None
        prepared: StoredVector | None = None
        for i, (obj, p) in enumerate(staged):
            if obj is item:
                prepared = p
                del staged[: i + 1]
                break
        if not staged:
            del self._staged[id]
        return prepared

    def _apply_run(self, rows: list[tuple[str, StoredVector | Item | None]]) -> None:
        """:meth:`_after_group`'s rows as one apply (one embedding call for the unstaged)."""
        todo = [(id, row) for id, row in rows if isinstance(row, Item)]
        made = self.prepare([(entry_for(it), embed_text(it)) for _, it in todo]) if todo else []
        fresh = {id: p for (id, _), p in zip(todo, made, strict=True)}
        puts: list[StoredVector] = []
        deletes: list[str] = []
        for id, row in rows:
            if row is None:
                deletes.append(id)
            else:
                puts.append(fresh[id] if isinstance(row, Item) else row)
        self._apply(puts, deletes)

    def _apply_one(self, id: str, row: StoredVector | Item | None) -> None:
        """One id's final row applied alone; an embedding failure leaves it pending."""
        if row is None:
            self._remove(id)
            return
        if isinstance(row, Item):
            entry, text = entry_for(row), embed_text(row)
        else:
            entry, text = row.entry, row.text
        try:
            self._apply(self.prepare([(entry, text)]) if isinstance(row, Item) else [row])
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
