"""What a PostgreSQL journal's follower thread calls: it applies other processes' commits.

:class:`FeedApplier` is the :class:`~memstore.journal._pgfeed.FeedSink` half of
:class:`~memstore.journal.postgres.PostgresJournal`: the feed's batches go
into the attached store, each chunk in one hold of the store's lock, and the
position (:class:`~memstore.journal._pgposition.FeedPosition`) moves past a
batch in the same hold as its last chunk, so a reader holding the lock finds
the store and the position in agreement (``store_position``).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from memstore._gc import bulk_load
from memstore.config import Change
from memstore.journal._holding import _holding
from memstore.journal._pgfeed import FeedBatch, followed_item
from memstore.journal._pgposition import FeedPosition
from memstore.journal.base import JournalBase
from memstore.journal.hlc import Lsn

if TYPE_CHECKING:
    from memstore.store import Store
    from memstore_index import CellStore

__all__ = ["APPLY_CHUNK", "FeedApplier"]

APPLY_CHUNK: Final = 1000
"""Ids a follower applies to the store per hold of its lock."""


class FeedApplier(JournalBase):
    """A journal whose follower applies the feed to its store (the FeedSink methods)."""

    _position: FeedPosition
    _cells: CellStore | None

    def feed_position(self) -> int:
        return self._position.seq

    def feed_acked(self, seq: int) -> bool:
        return self._position.is_acked(seq)

    def feed_model(self) -> tuple[str, int] | None:
        cells = self._cells
        return None if cells is None else (str(cells.embedder.model_id), cells.dim)

    def feed_apply(self, batch: FeedBatch) -> None:
        """Bring the store up to date with a batch of the feed (the follower thread).

        Ids go in groups of :data:`APPLY_CHUNK`, each one store group under
        the store's lock, so the process's own writers wait for one chunk at
        most; the position moves once the whole batch is in, under the same
        hold of the lock as its last chunk. A reader holding the lock sees the
        store and the position agree (:meth:`store_position`), and a change
        stream hears of the batch only after both moved.

        A batch with no ids to apply (this process's own commits, already in
        the store) moves the position without the lock: the store does not
        change, so any reader's position still names its state, and a thread
        that holds the store's lock while it waits for its own write
        (:meth:`wait_for`) is not left waiting for a lock it holds.
        """
        ids = list(batch.items)
        if not ids:
            self._advance(batch)
            return
        chunks = [ids[start : start + APPLY_CHUNK] for start in range(0, len(ids), APPLY_CHUNK)]
        for n, chunk in enumerate(chunks):
            if not self._apply_chunk(batch, chunk, last=n >= len(chunks) - 1):
                return  # detached meanwhile

    def _apply_chunk(self, batch: FeedBatch, ids: list[str], *, last: bool) -> bool:
        store = self._store
        if store is None:
            return False
        with _holding(store, settle=False), bulk_load(collect=False):
            if self._store is not store:
                return False
            # An id this process wrote after the snapshot already holds the
            # newer state: the snapshot must not roll it back.
            todo = self._position.not_overtaken(ids, batch.top)
            if todo:
                self._apply_state(store, batch, todo)
            if last:
                self._advance(batch)
            else:
                self._position.partly_applied()
        return True

    def _apply_state(self, store: Store, batch: FeedBatch, todo: list[str]) -> None:
        state = {id: followed_item(id, batch.items[id]) for id in todo}
        cells = self._cells
        offer = (
            cells.offered(batch.vectors)
            if cells is not None and batch.vectors
            else contextlib.nullcontext()
        )
        with offer:
            self._run_special(
                store,
                functools.partial(self._remember_applied, batch),
                lambda: [store._reflect_owned(i, state[i]) for i in todo],
            )

    def _remember_applied(self, batch: FeedBatch, changes: Sequence[Change]) -> None:
        """The record of a group that mirrors the record: nothing to write.

        Each change is remembered for :meth:`lsn_of` at the stamp of the newest
        commit in ``batch`` that touched its id (the commit's last stamp: the
        Lsn its writer acknowledged, at or after the version's own), so change
        streams carry a position for other processes' writes too.
        """
        lsn_of_id: dict[str, int] = {}
        for commit in batch.commits:
            for i in commit.ids:
                lsn_of_id[i] = commit.lsn
        self._remember([(c, Lsn.unpack(lsn_of_id.get(c.id, batch.last.lsn))) for c in changes])

    def _advance(self, batch: FeedBatch) -> None:
        last = batch.last
        self._position.advance(last.seq, last.lsn)
        self._ensure_clock().observe(Lsn.unpack(last.lsn))
