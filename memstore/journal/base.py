"""The journal contract, and the part every backend shares.

A journal is the durable record of one :class:`~memstore.store.Store`.
:meth:`JournalBase.attach` restores the store from it, then installs itself as
the store's commit hook: every write group the store commits becomes versions
in one backend transaction *before* the write is acknowledged, and a failed
transaction undoes the group in the store. So what a caller was told is
written is on disk, and the store never holds what the journal does not.

Backends (:class:`~memstore.journal.sqlite.SqliteJournal`, and PostgreSQL for
scale-out) implement a handful of row operations; everything about stamps,
groups, import, purge and export lives here once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from memstore import arguments as arg
from memstore._gc import BulkLoad, bulk_load, thaw
from memstore.config import Change
from memstore.errors import (
    InvalidItemError,
    JournalClosedError,
    JournalCorruptError,
    JournalError,
    MemstoreError,
)
from memstore.item import Item
from memstore.journal._holding import _holding
from memstore.journal._stamps import CurrentStamps
from memstore.journal._tail import HistoryTails
from memstore.journal.exportfile import EXPORT_FORMAT, read_export, write_export
from memstore.journal.hlc import MAX_NODE_ID, AsOf, HybridClock, Lsn, to_lsn
from memstore.journal.importrules import import_rules
from memstore.journal.version import TABLE, Row, Version, group_rows
from memstore.limits import MAX_NAME_CHARS
from memstore.tags import PARTITION_ALL

if TYPE_CHECKING:
    from memstore.store import Store

__all__ = ["EXPORT_FORMAT", "Journal", "JournalBase", "PurgeMatch"]

_log = logging.getLogger("memstore.journal")

LEXICON_SNAPSHOT_MIN_ITEMS = 20_000
"""Indexed items from which closing a journal saves the store's lexical index beside it."""

_RECENT = 4096
"""How many committed changes :meth:`JournalBase.lsn_of` remembers."""
_change_of = itemgetter(0)

PurgeMatch = Callable[[Item], bool] | Collection[str]
"""What :meth:`Journal.purge` erases: item ids, or a predicate over each id's last state."""

T = TypeVar("T")


@runtime_checkable
class Journal(Protocol):
    """What the store, the front door and the HTTP adapter need of a journal."""

    def attach(self, store: Store) -> None: ...
    def detach(self) -> None: ...
    def head(self) -> Lsn: ...
    def last_lsn(self) -> Lsn | None: ...
    def lsn_of(self, change: Change) -> Lsn | None: ...
    def as_of(self, lsn: AsOf, *, partition: str | None = None) -> list[Item]: ...
    def history(self, id: str) -> list[Version]: ...
    def snapshot(self, lsn: AsOf, *, partition: str | None = None) -> Iterator[Version]: ...
    def current(self) -> Iterator[Item]: ...
    def purge(
        self, match: PurgeMatch, *, record: Callable[[list[str]], Item] | None = None
    ) -> list[str]: ...
    def matching(self, match: Callable[[Item], bool]) -> list[str]: ...
    def export(self, partition: str | None, fp: IO[str]) -> int: ...
    def import_(self, fp: IO[str], *, check_rules: bool = False) -> int: ...
    def transaction(self) -> contextlib.AbstractContextManager[None]: ...
    def close(self) -> None: ...


def _partition(partition: object) -> str | None:
    """A checked partition to read (``None`` for every one, ``PARTITION_ALL`` too)."""
    if partition is None or partition == PARTITION_ALL:
        return None
    return arg.key_arg(partition, "partition", MAX_NAME_CHARS)


class JournalBase(HistoryTails, CurrentStamps, ABC):
    """Stamps, groups, restore, import, export and purge over a backend's rows.

    History reads of one item's newest versions come from :class:`HistoryTails`,
    the current stamps of many items from :class:`CurrentStamps`."""

    def __init__(self, *, node_id: int, wall: Callable[[], int] | None) -> None:
        # Checked before a backend opens anything: a bad one would otherwise
        # surface at attach (a bare TypeError for node_id="3"), or never
        # (node_id=True stamped as node 1).
        if type(node_id) is not int or not 0 <= node_id <= MAX_NODE_ID:
            raise ValueError(f"node_id must be a whole number in 0..{MAX_NODE_ID}, got {node_id!r}")
        if wall is not None and not callable(wall):
            raise ValueError(f"wall must be a function returning milliseconds, got {wall!r:.40}")
        self._node_id = node_id
        self._wall = wall
        self._clock: HybridClock | None = None
        # The newest position on record (set with the clock): the clock may
        # run ahead of it, as a failed write spends a stamp and records nothing.
        self._head = Lsn(0, 0)
        self._store: Store | None = None
        self._frozen = False  # the restore froze the heap (see attach): thawed at detach
        self._restored_at: Lsn | None = None  # the head the restored items are the state at
        self._tls = threading.local()
        self._closed = False
        # id(change) -> (change, lsn): the change is held so that its id is not reused.
        self._recent: OrderedDict[int, tuple[Change, Lsn]] = OrderedDict()
        self._recent_lock = threading.Lock()

    # ------------------------------------------------------- backend rows

    @abstractmethod
    def _read_head(self) -> Lsn:
        """The newest stamp on record (``Lsn(0, 0)`` when empty)."""

    @abstractmethod
    def _commit_rows(self, rows: Sequence[Row], *, purge: Collection[str] = ()) -> Lsn:
        """In one transaction: erase every row of ``purge``, close the open row of
        each id in ``rows`` at its first new stamp, insert ``rows``; commit durably.
        Raise a :class:`JournalError` (having rolled back) on failure.

        Returns the commit's position: a position that covers it (waiting for
        it, or reading ``as_of`` it, sees the commit), as :meth:`last_lsn`
        reports it. For ``rows`` that is their (one) stamp."""

    @abstractmethod
    def _import_rows(self, rows: Sequence[Row]) -> Lsn:
        """In one transaction: insert ``rows`` not already present (same id and
        stamp) and relink ``valid_to`` of every touched id by stamp order.

        Returns the import's position, as :meth:`_commit_rows` does."""

    @abstractmethod
    def _current_rows(self) -> Iterator[Row]:
        """The open upsert rows: the live items."""

    def _current_items(self) -> Iterator[str]:
        """The live items as JSON text (a backend may fetch only that column)."""
        for row in self._current_rows():
            yield row.item or ""

    @abstractmethod
    def _rows_as_of(self, lsn: Lsn, partition: str | None) -> Iterator[Row]:
        """Upsert rows visible at ``lsn``, by id; ``partition`` adds shared items."""

    @abstractmethod
    def _rows_of(self, ids: Collection[str] | None, partition: str | None) -> Iterator[Row]:
        """Every row of ``ids`` (all when ``None``) or of ``partition``, by id then stamp."""

    @abstractmethod
    def _export_rows(self, partition: str | None) -> Iterator[Lsn | Row]:
        """What an export of ``partition`` (all when ``None``) writes, from one snapshot.

        First the head that snapshot is at, then the rows, by id then stamp:
        every row of the ids whose newest version (live or a delete) is in
        ``partition``, with their whole history. Read in one transaction
        while writers go on, so that a write group is in the rows wholly or
        not at all, and in them exactly when it is at or before the head
        (the header names that head: a reader resumes the stream from it).
        """

    @abstractmethod
    def _close_backend(self) -> None:
        """Release connections and locks."""

    # ------------------------------------------------------------ attach

    def _ensure_clock(self) -> HybridClock:
        if self._clock is None:
            self._head = self._read_head()
            kwargs: dict[str, Any] = {"last": self._head}
            if self._wall is not None:
                kwargs["wall"] = self._wall
            self._clock = HybridClock(self._node_id, **kwargs)
        return self._clock

    def _recorded(self, at: Lsn) -> None:
        """A write was recorded at ``at``: this thread's :meth:`last_lsn`, and the head.

        Called only once the backend committed (with the store's lock held), so
        :meth:`head` names a position on record, never a stamp a failed write spent.
        """
        self._tls.last = at
        if at > self._head:
            self._head = at

    def _check_open(self) -> None:
        if self._closed:
            raise JournalClosedError("the journal is closed")

    def _writable(self) -> None:
        """Raise unless this journal may be written (open, and not opened read-only)."""
        self._check_open()

    def attach(self, store: Store) -> None:
        """Restore ``store`` from this journal and record its writes from now on.

        The store must be empty unless the journal is: a journal adopts a new
        store's items as their first versions, but never merges two histories.
        Restored items are marked ``cell_originated``; no listener fires for them.

        A large restore ends by freezing the heap (:func:`gc.freeze`, see
        :func:`memstore._gc.bulk_load`) instead of walking it in a full
        collection: the restored items live as long as the attachment, and
        later collections skip them. :meth:`detach` (and so :meth:`close`)
        thaws it, so garbage among them is collected as usual afterwards.
        """
        self._check_open()
        if self._store is not None:
            raise JournalError("this journal is already attached to a store")
        clock = self._ensure_clock()
        load = BulkLoad()
        try:
            with bulk_load(freeze=True) as load:
                self._attach(store, clock)
        finally:
            if load.frozen:
                if self._store is store:
                    self._frozen = True
                else:  # the attach failed: nothing holds the load
                    thaw()

    def _attach(self, store: Store, clock: HybridClock) -> None:
        self._restored_at = None
        items = self._restore_items()
        # The head those items are the state at: read with them where the
        # backend can, since a saved lexical index is taken for the state
        # its head names (a writer may commit between two separate reads).
        at = self._restored_at if self._restored_at is not None else self._read_head()
        has_history = bool(items) or at > Lsn(0, 0)
        with _holding(store):
            if has_history and store.len_locked():
                raise JournalError(
                    "the store already holds items and the journal has a history: attach a "
                    "journal to an empty store (it restores it), or an empty journal to "
                    "a filled store (it adopts it)"
                )
            store.set_commit_hook(self._on_commit)
            try:
                if items:
                    saved = self._lexicon_path()
                    lexicon = (saved, at.packed()) if saved else None
                    store._restore_owned(items, lexicon)  # freshly parsed: no need to clone
                elif store.len_locked():
                    live = store.items_locked()
                    hlc = clock.tick()  # one group, one stamp
                    at = self._commit_rows(
                        [Row.of(it.id, hlc, "upsert", it.kind, it, it) for it in live]
                    )
                    self._head = max(self._head, at)
            except BaseException:
                store.set_commit_hook(None)
                raise
            self._store = store

    def _restore_items(self) -> list[Item]:
        """The items :meth:`attach` restores (a backend may read more in the same snapshot).

        A backend that reads the head in the same snapshot sets ``_restored_at`` to it.
        """
        return list(self.current())

    def detach(self) -> None:
        """Stop recording the store's writes (the store keeps its items)."""
        store, self._store = self._store, None
        if store is not None:
            # Under the store's lock: a write group in flight finishes (and is
            # recorded) before the hook goes, never half recorded.
            with _holding(store):
                store.set_commit_hook(None)
        if self._frozen:
            self._frozen = False
            thaw()

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        """Group writes into one transaction (one fsync): ``store.batch()`` of the store.

        An exception inside undoes every write of the block, in the store and
        in the journal.
        """
        return self._attached().batch()

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (reads of the store, then writes) on the record's current state.

        A journal with one writing process has nothing to add: the store's
        lock already makes a read and the write that follows it one step, so
        ``fn`` just runs. A journal shared by processes (PostgreSQL) refuses a
        group computed from a state another process has changed since, and
        runs ``fn`` again once it has caught up.
        """
        return fn()

    def _attached(self) -> Store:
        self._check_open()
        if self._store is None:
            raise JournalClosedError("the journal is not attached to a store")
        return self._store

    # ------------------------------------------------------- the hook

    def _on_commit(self, changes: Sequence[Change]) -> None:
        """The store's commit hook: the group's versions, durably, or an exception."""
        self._check_open()
        special: Callable[[Sequence[Change]], None] | None = getattr(self._tls, "special", None)
        if special is not None:
            self._tls.special = None
            special(changes)
            return
        rows = self._rows_for(changes)
        if not rows:  # the group changed nothing lasting (an id made and removed in it)
            return
        # Backends may re-stamp (PostgreSQL, when another process committed
        # first); every row of a group shares its one stamp either way.
        at = self._commit_rows(rows)
        self._recorded(at)
        self._remember(list(zip(changes, repeat(at))))

    def _remember(self, recorded: Sequence[tuple[Change, Lsn]]) -> None:
        """Keep where recent changes were recorded, for :meth:`lsn_of`."""
        with self._recent_lock:  # keyed by id(change), each pair kept as given
            recent = self._recent
            recent.update(zip(map(id, map(_change_of, recorded)), recorded, strict=True))
            for _ in range(len(recent) - _RECENT):
                recent.popitem(last=False)

    def lsn_of(self, change: Change) -> Lsn | None:
        """The position a recently committed change was recorded at (for change streams).

        The change hook and the hub see the very :class:`~memstore.config.Change`
        objects the journal recorded; the last few thousand are remembered.
        """
        with self._recent_lock:
            got = self._recent.get(id(change))
        return got[1] if got is not None and got[0] is change else None

    def _rows_for(self, changes: Sequence[Change]) -> list[Row]:
        """One version per id the group touched, all with the group's one stamp.

        A group is atomic: nobody ever saw its intermediate states, so only
        each id's final state becomes a version, and ``as_of`` any position
        sees a group wholly or not at all. An id created and removed inside
        the group leaves nothing.
        """
        first: dict[str, Change] = {}
        last: dict[str, Change] = {}
        for c in changes:
            first.setdefault(c.id, c)
            last[c.id] = c
        return group_rows(first, last, self._ensure_clock().tick())

    # ------------------------------------------------------------- reads

    def head(self) -> Lsn:
        """The newest position on record (a write that failed leaves it where it was)."""
        self._check_open()
        self._ensure_clock()
        return self._head

    def store_position(self) -> Lsn | None:
        """The position whose record the attached store holds, exactly; call it under its lock.

        Every change at or before it is in the store, none after it: what a
        reader saw holding ``store.lock`` is the record's state there. Here
        the head (this process, the only writer, records each write under
        the lock); a shared journal's may be ``None`` (no one position).
        """
        self._check_open()
        self._ensure_clock()
        return self._head  # this process's last write (not a backend's own reading of its head)

    def last_lsn(self) -> Lsn | None:
        """The position of the last write group this thread got acknowledged.

        Every write counts, a :meth:`purge` and an :meth:`import_` included
        (``None`` before the first): another process that waits for this
        position (``wait_for``) sees that write once the wait returns.
        """
        last: Lsn | None = getattr(self._tls, "last", None)
        return last

    def current(self) -> Iterator[Item]:
        """The live items, as restore loads them.

        A live row that cannot be read raises
        :class:`~memstore.errors.JournalCorruptError` naming it, so
        :meth:`attach` (opening a ``Memory``) refuses rather than restore a
        store without that item: silently dropping it would make the next
        write of the same id look like its first version, and an export or a
        backup taken then would lose it for good.
        """
        self._check_open()
        parse = Item.__pydantic_validator__.validate_json  # the model's own, minus a wrapper
        for text in self._current_items():
            try:
                yield parse(text)
            except ValueError:  # found by text alone: look the row up to name it
                raise self._corrupt_current() from None

    def _corrupt_current(self) -> JournalCorruptError:
        """The error naming the first unreadable live row (only on the failure path)."""
        for row in self._current_rows():
            try:
                row.stored_item()
            except JournalCorruptError as e:
                return e
        return JournalCorruptError(  # pragma: no cover - repaired between the two reads
            "a live journal row was unreadable, then readable again: open it again",
            table=TABLE,
        )

    def as_of(self, lsn: AsOf, *, partition: str | None = None) -> list[Item]:
        """The items exactly as they were at ``lsn``, ordered by id.

        ``lsn`` may be an :class:`Lsn`, an :class:`Hlc`, an aware datetime
        (the state at the end of that millisecond) or ``"wall_ms.counter"``.
        ``partition`` keeps that partition's items and ``shared`` ones (not
        untagged ones); ``None`` or ``PARTITION_ALL`` keeps all.
        """
        self._check_open()
        at = to_lsn(lsn)
        part = _partition(partition)
        return [r.stored_item() for r in self._rows_as_of(at, part)]

    def history(self, id: str) -> list[Version]:
        """Every version of ``id``, oldest first (empty when it never existed)."""
        id = arg.id_arg(id)
        self._check_open()
        return [r.version() for r in self._rows_of([id], None)]

    def snapshot(self, lsn: AsOf, *, partition: str | None = None) -> Iterator[Version]:
        """Stream every version visible at ``lsn`` (constant memory), ordered by id.

        ``partition`` keeps that partition's versions and ``shared`` ones, as
        :meth:`as_of` does; ``None`` or ``PARTITION_ALL`` keeps all.
        """
        self._check_open()
        at = to_lsn(lsn)
        part = _partition(partition)
        for row in self._rows_as_of(at, part):
            yield row.version()

    # ------------------------------------------------------------ purge

    def purge(
        self, match: PurgeMatch, *, record: Callable[[list[str]], Item] | None = None
    ) -> list[str]:
        """Hard delete: erase every version of the matching items, and the live ones.

        ``match`` is a collection of ids or a predicate over each id's last
        written state (deleted items included). The live items leave the store
        in the same transaction (listeners see deletes, the journal records
        nothing of them). Returns the ids asked for, sorted (one the journal
        never held included: after the call it holds none of them). The
        database's free pages still hold the bytes until SQLite reuses them or
        ``VACUUM`` runs: this is not secure erasure.

        ``record``, when given, is called with those ids and returns an item
        (an audit record of the erasure, say) that is written in the same
        transaction: the erasure and its record land together or not at all.
        It is not called when nothing matches.

        A predicate runs with the store's lock held, so this process's writers
        wait until the purge is done: none lands between the match and the
        erasure, where the purge would erase an acknowledged write it never judged.
        """
        if callable(match):
            predicate: Callable[[Item], bool] | None = match
            wanted: list[str] = []
        else:  # checked before anything: b"ab" is not the ids 97 and 98
            predicate, wanted = None, arg.id_list(match, "match")
        if record is not None and not callable(record):
            raise InvalidItemError(
                f"record must be a function of the erased ids, got {arg.describe(record)}"
            )
        store = self._attached()
        with _holding(store):
            ids = self.matching(predicate) if predicate is not None else sorted(set(wanted))
            if not ids:
                return []
            erased = set(ids)
            note = record(list(ids)) if record is not None else None
            if note is not None and (not isinstance(note, Item) or note.id in erased):
                what = (
                    f"item {note.id!r}, one it erases"
                    if isinstance(note, Item)
                    else arg.describe(note)
                )
                raise InvalidItemError(
                    f"record must return an Item the purge does not erase, got {what}"
                )
            self._writable()  # before the saved index goes: a refused purge changes nothing
            self._discard_lexicon()
            done = False

            def special(changes: Sequence[Change]) -> None:
                nonlocal done
                kept = [c for c in changes if c.id not in erased]  # the record's own write
                rows = self._rows_for(kept) if kept else []
                at = self._commit_rows(rows, purge=ids)
                self._recorded(at)
                self._remember(list(zip(changes, repeat(at))))  # erasures in effect from ``at``
                done = True

            def writes() -> None:
                for id in ids:
                    store.delete(id)
                if note is not None:
                    store.upsert(note)

            self._run_special(store, special, writes, versions=note is not None)
            if not done:  # none of them was live: only the record to erase
                self._recorded(self._commit_rows([], purge=ids))
        return ids

    def _run_special(
        self,
        store: Store,
        special: Callable[[Sequence[Change]], None],
        writes: Callable[[], object],
        *,
        versions: bool = False,
    ) -> None:
        """Run ``writes`` as one group whose record is ``special``, not the usual versions.

        ``versions``: ``special`` records some of the group's changes as
        versions of their own (a purge's record), so a backend keeping vectors
        beside its versions keeps theirs too.
        """
        if store._txn is not None:
            raise JournalError("purge and import cannot run inside a batch")
        self._tls.special = special
        self._tls.special_versions = versions
        try:
            with store.batch():
                writes()
        finally:
            self._tls.special = None
            self._tls.special_versions = False

    def matching(self, match: Callable[[Item], bool]) -> list[str]:
        """The ids whose last written state satisfies ``match``, deleted items included.

        What :meth:`purge` with that predicate would erase (a hard delete's
        preview): a soft-deleted item is still on record, so it is matched by
        the state it had when it was deleted. Sorted by id; reads every row.
        """
        if not callable(match):
            raise InvalidItemError(
                f"match must be a function of an Item, got {arg.describe(match)}"
            )
        self._check_open()
        out: list[str] = []
        last: Row | None = None
        for row in self._rows_of(None, None):
            if last is not None and row.id != last.id:
                self._check_match(last, match, out)
                last = None
            if row.op == "upsert":
                last = row
        if last is not None:
            self._check_match(last, match, out)
        return out

    @staticmethod
    def _check_match(row: Row, match: Callable[[Item], bool], out: list[str]) -> None:
        if match(row.stored_item()):
            out.append(row.id)

    # ------------------------------------------------- export and import

    def export(
        self,
        partition: str | None,
        fp: IO[str],
        *,
        on_corrupt: Callable[[JournalCorruptError], None] | None = None,
    ) -> int:
        """Write the items of ``partition`` (all when ``None``) with every version, as NDJSON.

        A partition's export holds that partition's own items only: those
        whose newest version (a delete's too) is in it, ``shared`` ones
        included, each with its whole history (versions from before a move
        into the partition too). Other partitions' ``shared`` items and
        untagged items are not in it, although a search in the partition
        returns them (and :meth:`as_of` the ``shared`` ones): each item is
        in one partition's export at most. The header's ``head`` is
        the position the export is the state at (see
        :mod:`memstore.journal.exportfile`).

        The first line names the format; then one line per item:
        ``{"id": ..., "versions": [{"valid_from": {...}, "op": ..., "kind": ...,
        "item": {...}}, ...]}``; the last line, ``{"end": true, "items": N}``,
        marks the export complete, so an import refuses a copy cut off
        anywhere (:mod:`memstore.journal.exportfile`). Returns the number of
        items written.

        A version that cannot be read raises
        :class:`~memstore.errors.JournalCorruptError` naming it, unless
        ``on_corrupt`` is given: then it is called with that error and the
        version is left out (an item with no readable version is left out
        whole). That is the salvage path for a damaged journal: export with
        ``on_corrupt=skipped.append`` from a ``readonly=True`` journal, import
        into a new one, and keep ``skipped`` as the list of what was lost.
        """
        part = _partition(partition)
        fp = arg.writable(fp)
        if on_corrupt is not None and not callable(on_corrupt):
            raise InvalidItemError(
                f"on_corrupt must be a function or None, got {arg.describe(on_corrupt)}"
            )
        self._check_open()
        return write_export(fp, part, self._export_rows(part), on_corrupt)

    def import_(self, fp: IO[str], *, check_rules: bool = False) -> int:
        """Load an :meth:`export`: the same versions, the same current items.

        An export is the record of what a store held, and an import restores
        it: every item is held to the record rule (what every stored item
        obeys, however it was written), not to the rules a write obeys, so an
        item :meth:`Store.put <memstore.store.Store.put>` stored as given (a
        stable fact of low confidence, a hypothesis with no deadline), or one
        written before the host's ``Config.validate`` or vocabulary got
        stricter, comes back as it was. ``check_rules=True`` holds every item
        to the write rules too, the host's ``Config.validate`` included: for a
        file from elsewhere that they must screen
        (:mod:`memstore.journal.importrules`).

        Everything is read and checked before anything is written, and then
        written in one transaction: a bad file raises
        :class:`~memstore.errors.InvalidItemError` (naming the line) and changes
        nothing, and so does an export missing its end line (cut off).
        Versions already on record (same id and stamp) are skipped, so
        importing twice is harmless. Returns the number of items the import
        changed (that gained a version): 0 for a file already imported.
        """
        fp = arg.readable(fp)
        check_rules = arg.flag(check_rules, "check_rules")
        store = self._attached()
        by_id = read_export(fp, import_rules(store, check_rules=check_rules))
        if not by_id:
            return 0
        rows = [r for rs in by_id.values() for r in rs]
        top = max(Lsn.unpack(r.lsn) for r in rows)
        self._writable()  # before the saved index goes: a refused import changes nothing
        self._discard_lexicon()

        done = False

        def special(changes: Sequence[Change]) -> None:
            nonlocal done
            self._recorded(at := self._import_rows(rows))
            self._remember(list(zip(changes, repeat(at))))  # all in effect from ``at``
            done = True

        with _holding(store):
            # The current state of each id after the import: its newest version
            # on record or imported, whichever is newer.
            newest: dict[str, Row] = {}
            on_record: set[tuple[str, int, int]] = set()
            for r in self._rows_of(list(by_id), None):
                newest[r.id] = r  # rows come in order: the last one of an id is its newest
                on_record.add((r.id, r.lsn, r.node))
            changed = {r.id for r in rows if (r.id, r.lsn, r.node) not in on_record}
            for id, rs in by_id.items():
                last = rs[-1]
                have = newest.get(id)
                if have is None or (last.lsn, last.node) > (have.lsn, have.node):
                    newest[id] = last

            def apply() -> None:
                for id, row in newest.items():
                    if row.op == "delete":
                        store.delete(id)
                    else:
                        store._put_recorded(row.stored_item())

            self._run_special(store, special, apply)
            if not done:
                self._recorded(self._import_rows(rows))
            self._ensure_clock().observe(top)
        return len(changed)

    # ------------------------------------------------------------- close

    def _lexicon_path(self) -> str | None:
        """Where this journal keeps its store's saved lexical index (``None``: nowhere)."""
        return None

    def _discard_lexicon(self) -> None:
        """Remove the saved lexical index before a write that may not move the head.

        Import keeps each version's own stamp and purge erases versions, so
        either can change what the items say while the head, which vouches
        for a saved index, stays where it was: a process killed before its
        next close would leave an index that a later open takes as current.
        Removing it first costs that open a re-tokenising restore, nothing
        more; if it cannot be removed, the write is refused and nothing changes.
        """
        path = self._lexicon_path()
        if path is None:
            return
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise JournalError(
                f"cannot remove the saved lexical index {path!r} before this write "
                f"({e.strerror or e}); nothing was written"
            ) from None

    def _save_lexicon(self) -> None:
        """On close: save the lexical index of a large store beside the journal.

        The next :meth:`attach` loads it instead of re-tokenising every item,
        when its generation (the journal head it was saved at) is still the
        head; any write after this close moves the head, so a saved index is
        never used for another state. Small stores re-index faster than they
        load, so below :data:`LEXICON_SNAPSHOT_MIN_ITEMS` nothing is saved
        (and an older file is removed). A failure loses nothing: it is logged.

        Closing inside a write group of this thread (``with store.batch():
        ... journal.close()``) saves nothing and removes an older file: the
        index then holds the group's writes, which are not on record (the group
        commits unrecorded, or is refused and undone), so a file saved at the
        current head would be taken as current by the next open and answer
        with text the items no longer have.
        """
        path, store = self._lexicon_path(), self._store
        if path is None or store is None:
            return
        try:
            with _holding(store):  # no group commits between the head read and the save
                in_group = store._txn is not None
                if not in_group and store.indexed_len() >= LEXICON_SNAPSHOT_MIN_ITEMS:
                    store.save_lexicon(path, generation=self._read_head().packed())
                elif os.path.exists(path):
                    os.remove(path)
        except (OSError, MemstoreError) as e:
            _log.warning("memstore: could not save the lexical index %r (%s)", path, e)

    def close(self) -> None:
        """Detach, release the file (or connection) and refuse further calls."""
        if self._closed:
            return
        self._save_lexicon()
        self.detach()
        self._closed = True
        self._close_backend()

    def __enter__(self) -> JournalBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_rows(rows: Iterable[Row]) -> Iterator[Row]:
    """Pass rows through (a seam for backends that stream from a cursor)."""
    yield from rows
