"""The version stamps a recall answers (``valid_from``), remembered between recalls.

A recall answers each hit with the stamp of its chunk's current version, which
the store does not hold: the journal does (one index seek per id,
:meth:`~memstore.journal.JournalBase.current_stamps`, about 5 us each plus
the statement's own cost). :class:`StampCache` remembers the stamps it read,
by id, until the next write of the id, so a hit reads its stamp once; and a
chunk written through this store gets its new stamp handed over once its
write group committed (:meth:`~memstore.journal.JournalBase.stamp_of`), so
a chunk just ingested is read never.

When queries rarely repeat, most hits are items no recall returned before.
So the first recalls of a tenant also read, in the same journal call, the
stamps of the tenant's other chunks, :data:`WARM_STEP` more each time
(never more than the cache has room for): after ``chunks / WARM_STEP``
recalls every chunk's stamp is remembered and a recall reads none.

A stamp remembered is always the current version's:

* every write group drops its ids' stamps before it becomes visible (a
  before-commit listener, with the store's lock held), and counts itself;
* a read notes that count *under the store's lock* before it asks the
  journal, and keeps what it read only if no group counted itself since.
  The lock matters: a group drops its stamps and writes its journal rows
  in one hold of the lock, so at the moment the count is noted no group is
  between the two (one would be, without the lock: its stamps dropped, its
  rows not yet in the journal, and the read that saw the old rows kept them);
* a committed group's stamps are handed over only when no group counted
  itself since this one (a later version of the id may be on its way).

>>> import tempfile
>>> from memstore import Memory
>>> with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as mem:
...     item = mem.add("the pool holds 40 connections", partition="acme")
...     cache = StampCache(mem.store, mem.journal)
...     first = cache.stamps("acme", [item.id])
...     first == [mem.history(item.id)[-1].valid_from], len(cache)
...     item = mem.update(item.id, content="the pool holds 60 connections")
...     len(cache), cache.stamps("acme", [item.id]) == [mem.history(item.id)[-1].valid_from]
(True, 1)
(0, True)
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from memstore.config import Change
from memstore.journal import Hlc, Journal, JournalBase, Version
from memstore.protocol.mapping import KIND_CHUNK, chunk_id
from memstore.store import Store

__all__ = ["STAMP_CACHE_SIZE", "WARM_STEP", "StampCache"]

STAMP_CACHE_SIZE: Final = 100_000
"""How many chunks' version stamps are remembered (the least recently answered go first)."""
WARM_STEP: Final = 1_000
"""How many of a tenant's other chunks a recall that reads the journal reads too (~5 ms)."""
_MAX_WRITTEN: Final = 100_000
"""How many written chunks' changes may wait for their commit to be handed over."""


class StampCache:
    """The current version stamp of chunks, by id: remembered, or read from the journal.

    Thread-safe. ``size`` and ``warm_step`` default to :data:`STAMP_CACHE_SIZE`
    and :data:`WARM_STEP` (``warm_step=0``: no warm-up, only the ids asked are read).
    """

    def __init__(
        self,
        store: Store,
        journal: Journal,
        *,
        size: int = STAMP_CACHE_SIZE,
        warm_step: int = WARM_STEP,
    ) -> None:
        self._store = store
        self._journal = journal
        self._size = size
        self._warm_step = warm_step
        self._held: OrderedDict[str, Hlc] = OrderedDict()
        self._lock = threading.Lock()
        self._writes = 0  # write groups seen: a stamp read across one is not kept
        self._warm: dict[str, list[str]] = {}  # tenant -> its chunk ids not warmed yet
        # id(change) -> (change, the write count its group set): what _committed hands over.
        self._written: dict[int, tuple[Change, int]] = {}
        self._hand_over = isinstance(journal, JournalBase)
        store.add_change_listener(_weakly(self, StampCache._forget), before_commit=True)
        if self._hand_over:
            store.add_change_listener(_weakly(self, StampCache._committed), grouped=True)
            store.add_undo_listener(_weakly(self, StampCache._undone))

    def __len__(self) -> int:
        return len(self._held)

    def stamps(self, tenant: str, ids: Sequence[str]) -> list[Hlc | None]:
        """The stamp of each id's current version (``None``: deleted, or never written).

        One journal read when some id is not remembered (it also warms
        ``tenant``'s other chunks, see the module docstring), none otherwise.
        """
        stamps: list[Hlc | None] = []
        held = self._held
        with self._lock:
            for key in ids:
                stamp = held.get(key)
                if stamp is not None:
                    held.move_to_end(key)
                stamps.append(stamp)
        missing = [key for key, stamp in zip(ids, stamps, strict=True) if stamp is None]
        if not missing:
            return stamps
        lock = self._store.lock  # no write group between its forgetting and its journal rows
        lock.acquire()
        try:
            writes = self._writes
        finally:
            lock.release()
        warm, taken = self._warm_ids(tenant, missing)
        read = self._read(missing + warm)
        with self._lock:
            keep = writes == self._writes
            for n, key in enumerate(ids):
                if stamps[n] is None and (stamp := read[key]) is not None:
                    stamps[n] = stamp
                    if keep:
                        held[key] = stamp
            if keep and taken:
                for key in warm:
                    if key not in held and (stamp := read[key]) is not None:
                        held[key] = stamp
                        held.move_to_end(key, last=False)  # not answered yet: the first to go
                del self._warm[tenant][:taken]
            while len(held) > self._size:
                held.popitem(last=False)
        return stamps

    def _warm_ids(self, tenant: str, missing: list[str]) -> tuple[list[str], int]:
        """The next of ``tenant``'s chunk ids to read beside ``missing`` (as many as fit),
        and how many of its pending ids they stand for (``missing`` is not read twice)."""
        room = min(self._warm_step, self._size - len(self._held) - len(missing))
        if room <= 0:
            return [], 0
        with self._lock:
            pending = self._warm.get(tenant)
        if pending is None:
            pending = self._tenant_chunks(tenant)
            if pending is None:
                return [], 0
            with self._lock:
                pending = self._warm.setdefault(tenant, pending)
        asked = set(missing)
        with self._lock:
            step = pending[:room]
        return [key for key in step if key not in asked], len(step)

    def _tenant_chunks(self, tenant: str) -> list[str] | None:
        """The ids of ``tenant``'s chunks the store holds now (``None``: not known cheaply
        yet, the store has no search snapshot at the moment)."""
        snap = self._store.search_snapshot()
        if snap is None:
            return None
        prefix = chunk_id(tenant, "")
        return [key for key in snap.ids[: len(snap)] if key.startswith(prefix)]

    def _read(self, ids: list[str]) -> dict[str, Hlc | None]:
        journal = self._journal
        if isinstance(journal, JournalBase):
            return journal.current_stamps(ids)
        # A journal of the host's own (the Journal protocol): its histories, one by one.
        return {key: _current_stamp(journal.history(key)) for key in ids}

    def _check(self) -> None:
        """Raise :class:`AssertionError` unless every remembered stamp is its id's current
        one in the journal and the cache holds no more than its size (the invariant; call
        it when no write is in flight)."""
        with self._lock:
            held = dict(self._held)
        if len(held) > self._size:
            raise AssertionError(f"{len(held)} stamps held, more than the size {self._size}")
        current = self._read(list(held))
        stale = {key: (stamp, current[key]) for key, stamp in held.items() if current[key] != stamp}
        if stale:
            raise AssertionError(f"stamps held that are not current (held, current): {stale}")

    def _forget(self, changes: Sequence[Change]) -> None:
        """Before a write group commits (store lock held): drop its ids' stamps, count it,
        and note its chunks' changes for :meth:`_committed`."""
        with self._lock:
            self._writes += 1
            writes, written = self._writes, self._written
            for change in changes:
                self._held.pop(change.id, None)
                if self._hand_over and change.kind == KIND_CHUNK:
                    written[id(change)] = (change, writes)
            if len(written) > _MAX_WRITTEN:  # never handed over (it only saves reads)
                written.clear()

    def _committed(self, changes: Sequence[Change]) -> None:
        """After write groups committed: remember the stamps their chunks were written with.

        Only when no group was counted since the change's own (then no later
        version can exist): a group still on its way makes the next read ask
        the journal, as before. An id's last change in the run decides.
        """
        journal = self._journal
        assert isinstance(journal, JournalBase)  # registered only then
        fresh: dict[str, Hlc | None] = {}
        with self._lock:
            for change in changes:
                noted = self._written.pop(id(change), None)
                if noted is None or noted[0] is not change:
                    continue
                current = noted[1] == self._writes
                fresh[change.id] = journal.stamp_of(change) if current else None
            held = self._held
            for key, stamp in fresh.items():
                if stamp is not None:
                    held[key] = stamp
                    held.move_to_end(key)
            while len(held) > self._size:
                held.popitem(last=False)

    def _undone(self, changes: Sequence[Change]) -> None:
        """A group the forgetting saw was undone: nothing of it will be handed over."""
        with self._lock:
            for change in changes:
                self._written.pop(id(change), None)


def _weakly(
    cache: StampCache, method: Callable[[StampCache, Sequence[Change]], None]
) -> Callable[[Sequence[Change]], None]:
    """A store listener calling ``method`` of ``cache``, held weakly: it leaves the
    store once ``cache`` is gone."""
    ref = weakref.ref(cache)
    store = cache._store

    def listener(changes: Sequence[Change]) -> None:
        held = ref()
        if held is None:
            store.remove_change_listener(listener)
            return
        method(held, changes)

    return listener


def _current_stamp(history: list[Version]) -> Hlc | None:
    """The stamp of the current version in ``history``, ``None`` when it ends deleted."""
    if not history or history[-1].op != "upsert":
        return None
    return history[-1].valid_from
