"""The store's state and machinery: the lock, write groups, the indexes.

:class:`StoreBase` holds everything the :class:`~memstore.store.Store` keeps and
the one primitive that changes it (``_set``), so that every index is updated
in one place. Reads and searches live in mixins beside it; writes in ``store.py``;
telling the after-commit listeners, in ``_publisher.py``.
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
import threading
from collections.abc import Callable, Iterable
from typing import Literal

from sortedcontainers import SortedKeyList

from memstore import _linkers
from memstore._anchors import Anchors
from memstore._lexindex import LexicalIndex
from memstore._lineage import claimant, lineage_rejection
from memstore._linkers import Orders, orders_of, unlink
from memstore._linkers import link as add_linker
from memstore._publisher import Publisher
from memstore._shared import share_containers
from memstore._tally import Tally
from memstore._updatekey import (
    PARSED_EPOCH,
    PARSED_UTC,
    SECOND,
    add_by_update,
    by_update_of,
    update_key,
)
from memstore.arguments import has_lone_surrogate
from memstore.config import (
    BeforeCommitListener,
    Change,
    ChangeListener,
    Config,
    HitHook,
    Locker,
)
from memstore.errors import InvalidItemError, JournalClosedError, MemstoreError
from memstore.item import (
    SCOPE_PRIVATE,
    STATUS_ACTIVE,
    STATUS_STALE,
    Item,
)
from memstore.limits import MAX_SUBJECT_CHARS
from memstore.neardup import DedupTokens
from memstore.tags import private_owner, service_tag_value
from memstore.text import normalize_query
from memstore.validate import new_id_rejection
from memstore.vocabulary import Vocabulary

__all__ = ["StoreBase"]

builtins_id = id  # methods here name their parameter ``id``, after the item field

_ULID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")  # ASCII alone: the stdlib engine is faster


class _Txn:
    """The open write group: an undo log, the changes made so far, the record it began with."""

    __slots__ = ("changes", "hook", "undo")

    def __init__(self, hook: BeforeCommitListener | None) -> None:  # cheaper than a dataclass
        self.undo: list[tuple[str, Item | None]] = []
        self.changes: list[Change] = []
        self.hook = hook  # the commit hook (a journal) when the group opened


class StoreBase(Publisher):
    """State, lock and write-group machinery shared by the Store's parts."""

    def __init__(self, config: Config | None = None, *, lock: Locker | None = None) -> None:
        if config is not None and not isinstance(config, Config):
            raise MemstoreError(f"config must be a memstore.Config, got {type(config).__name__}")
        self._config = config if config is not None else Config()
        prefix: object = self._config.id_prefix
        # What a minted id looks like: the prefix and a ULID.
        why = new_id_rejection(prefix + "0" * 26) if isinstance(prefix, str) else "it is not text"
        if why:
            raise MemstoreError(f"Config.id_prefix {prefix!r:.80} mints no usable id: {why}")
        subject: object = self._config.subject  # every private item written without one gets it
        if not isinstance(subject, str) or len(subject) > MAX_SUBJECT_CHARS:
            raise MemstoreError(
                f"Config.subject must be text of at most {MAX_SUBJECT_CHARS} characters, "
                f"got {subject!r:.80}"
            )
        if has_lone_surrogate(subject):
            raise MemstoreError("Config.subject is not valid Unicode text (a lone surrogate)")
        for kind, ttl in (self._config.default_ttl or {}).items():
            if not isinstance(ttl, _dt.timedelta) or abs(ttl) > _MAX_TTL:
                raise MemstoreError(
                    f"Config.default_ttl[{kind!r:.80}] must be a timedelta of at most "
                    f"{_MAX_TTL.days} days, got {ttl!r:.80}"
                )
        self._vocab = self._config.vocabulary or Vocabulary()
        if lock is not None and not (
            callable(getattr(lock, "acquire", None)) and callable(getattr(lock, "release", None))
        ):
            got = type(lock).__name__
            raise MemstoreError(f"lock must have acquire() and release(), got {got}")
        self._lock: Locker = lock if lock is not None else threading.RLock()
        self._log = self._config.logger or logging.getLogger("memstore")
        self._items: dict[str, Item] = {}
        self._lex = LexicalIndex()
        self._index_id: dict[str, bool] = {}
        self._minted = ""  # the last id minted as prefix + ULID (see _index_id_text)
        self._private: dict[str, set[str]] = {}
        self._backlinks: dict[str, set[str]] = {}
        # The linkers of each id with ORDERED_FROM or more, in id order: the first
        # few of a hub without sorting its whole set (memstore/_linkers.py).
        self._linker_order: Orders = {}
        self._citations: dict[str, set[str]] = {}
        # A superseded id to the ids of the items whose ``supersedes`` lists it.
        self._claims: dict[str, set[str]] = {}
        self._exact: dict[str, set[str]] = {}
        # Indexed ids not yet in ``_exact``: titles are normalised when an exact
        # lookup first needs them (``_exact_catch_up``), not on every write.
        self._exact_todo: set[str] = set()
        self._dedup_cache = DedupTokens()
        self._by_update: SortedKeyList[Item, tuple[float, str]] = SortedKeyList(key=update_key)
        # Counts by partition, kind and status: made at the first ask (StoreReads.tally),
        # then kept by _set; a bulk fill drops it (the next ask counts again).
        self._tally: Tally | None = None
        self._anchors: Anchors | None = None  # likewise, at the first anchor lookup
        self._txn: _Txn | None = None
        self._tls = threading.local()
        self._init_publication()  # the queue, the publishing turn, the waits
        self._change_hook: ChangeListener | None = None
        self._record_hook: Callable[[Change], None] | None = None
        self._hit_hook: HitHook | None = None
        self._listeners: list[ChangeListener] = []
        self._grouped: list[BeforeCommitListener] = []  # fn(changes) per published run
        self._before: list[BeforeCommitListener] = []
        self._undone: list[BeforeCommitListener] = []
        self._commit_hook: BeforeCommitListener | None = None

    def _now(self) -> _dt.datetime:
        return self._config.clock()

    def _locked(self) -> _Scope:
        """Hold the lock (reads): ``with self._locked(): ...``."""
        return _Scope(self, write=False)

    def _finish_group(self, txn: _Txn, failed: bool) -> None:
        """Close the outermost group: run before-commit listeners, then commit or undo."""
        self._txn = None
        if failed:
            self._rollback(txn, 0)
            self._drop_changes(txn, 0)
            return
        commit = self._commit_hook  # read once: the hook that saw the group records it
        if txn.changes and (self._before or commit is not None or txn.hook is not None):
            changes = tuple(txn.changes)
            try:
                for listener in list(self._before):
                    listener(changes)
                if txn.hook is not None and commit != txn.hook:
                    _refuse_unrecorded(changes)
                # The durable record goes last: once it has the group, nothing
                # else may veto it.
                if commit is not None:
                    commit(changes)
            except BaseException:
                self._rollback(txn, 0)
                self._drop_changes(txn, 0)
                self._tell_undone(changes)
                raise
        # Committed (and recorded): queued for its listeners before any seam
        # runs, so that a seam that raises cannot keep the group from them.
        n = len(txn.changes)
        if (
            self._listeners
            or self._grouped
            or self._change_hook is not None
            or self._record_hook is not None
        ):
            self._unpublished.extend(txn.changes)
            self._queued += n
            if n and not self._held:  # else delivered when publish_removed releases those
                self._tls.__dict__["owed"] = self._queued  # what the write waits for
        elif self._held:  # nobody to tell: nothing to hold either
            self._drop_changes(txn, 0)
        cfg = self._config
        if cfg.dirty is not None or cfg.signal is not None:
            self._fire_seams(n)

    def _fire_seams(self, n: int) -> None:
        """``Config.dirty`` and ``Config.signal`` once per committed change (lock held).

        The group is committed: a seam that raises is logged (as a listener
        is), never reported to the writer as a write that failed.
        """
        cfg = self._config
        for _ in range(n):
            for name, seam in (("dirty", cfg.dirty), ("signal", cfg.signal)):
                if seam is not None:
                    try:
                        seam()
                    except Exception:
                        self._log.exception("memstore: the %s seam raised", name)

    def _tell_undone(self, changes: tuple[Change, ...]) -> None:
        """Tell the undo listeners that a group the before-commit listeners saw was undone.

        The group's own exception is on its way to the writer: a listener
        that raises too is logged, and the others are still told.
        """
        for listener in list(self._undone):
            try:
                listener(changes)
            except Exception:
                self._log.exception("memstore: undo listener %r raised", listener)

    def _rollback(self, txn: _Txn, mark: int) -> None:
        while len(txn.undo) > mark:
            id, previous = txn.undo.pop()
            self._set(id, previous)

    def _drop_changes(self, txn: _Txn, mark: int) -> None:
        """Forget the group's changes from ``mark`` on (they will not be published)."""
        if self._held:
            for c in txn.changes[mark:]:
                self._held.discard(id(c))
        del txn.changes[mark:]

    def _write(
        self,
        id: str,
        new: Item | None,
        *,
        publish: bool = True,
        mirrored: bool = False,
        held: bool = False,
        as_given: bool = False,
    ) -> None:
        """Record and apply one change inside the open group.

        A current item's ``supersedes`` is checked first
        (:func:`~memstore._lineage.lineage_rejection`) unless the change is
        ``mirrored`` (another process wrote it) or stored ``as_given``
        (``put``): a rejection raises and records nothing.
        """
        txn = self._txn
        assert txn is not None, "writes happen inside a group"
        old = self._items.get(id)
        if old is None and new is None:
            return
        if new is not None and new.__dict__["supersedes"] and not (mirrored or as_given):
            why = lineage_rejection(self._items, self._claims, id, new, self._now())
            if why:
                raise InvalidItemError(why)
        txn.undo.append((id, old))
        self._set(id, new)
        # From the __dict__, not by attribute: each read would pass pydantic's hook.
        f = (new if new is not None else old).__dict__
        kind = f["kind"]
        private = f["scope"] == SCOPE_PRIVATE
        # The stored object itself: stored items are never mutated in place
        # (every change stores a new object), so listeners may keep it.
        change = _change(
            "delete" if new is None else "upsert",
            new,
            id,
            kind,
            mirrored,
            publish and not private,
            old,
        )
        txn.changes.append(change)
        if held:
            self._held.add(builtins_id(change))

    def _claimant_locked(self, id: str, besides: str) -> str | None:
        """The active item other than ``besides`` whose ``supersedes`` lists ``id``, if any."""
        return claimant(self._items, self._claims, id, besides, self._now())

    def _release_held(self, removed: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Release held deletes matching ``(id, kind)``; return the ones not found."""
        missing: list[tuple[str, str]] = []
        with self._locked():
            for rid, kind in removed:
                for c in self._unpublished:
                    if id(c) in self._held and c.id == rid and c.op == "delete":
                        self._held.discard(id(c))
                        break
                else:
                    missing.append((rid, kind))
        return missing

    def _writing(self) -> _Scope:
        """Lock, open (or join) a group; once unlocked, publish what it committed.

        The outermost group's write returns once every after-commit listener
        heard its changes, whichever thread told them
        (:meth:`~memstore._publisher.Publisher._await_published`).
        """
        return _Scope(self, write=True)

    # ------------------------------------------------------ the primitive

    def _indexable(self, item: Item) -> bool:
        return (
            item.status == STATUS_ACTIVE
            and item.scope != SCOPE_PRIVATE
            and not self._vocab.is_data(item.kind)
        )

    def _index_id_text(self, id: str) -> bool:
        """Whether ``id``'s own words are indexed: not for the ULIDs the store mints.

        An id that is the very string :meth:`_mint_id` minted last is a
        ULID after the prefix (what the pattern would find, without matching
        it): every id-less write asks this of the id it was just given.
        """
        skip = self._config.skip_id_text
        if skip is not None:
            return not skip(id)
        if id is self._minted:
            return False
        prefix = self._config.id_prefix
        start = len(prefix)
        return not (
            len(id) == start + 26
            and id.startswith(prefix)
            and _ULID.fullmatch(id, start) is not None
        )

    def _set(self, id: str, new: Item | None) -> None:
        """Make ``new`` the stored state of ``id`` (``None`` deletes) in every index."""
        if new is not None:
            share_containers(new)  # first: it never raises, and nothing has changed yet
        old = self._items.get(id)
        if self._tally is not None:
            if old is not None:
                self._tally.remove(old)
            if new is not None:
                self._tally.add(new)
        if self._anchors is not None:
            if old is not None:
                self._anchors.remove(old)
            if new is not None:
                self._anchors.add(new)
        if old is not None:
            self._by_update.remove(old)
            if old.scope == SCOPE_PRIVATE:
                _discard(self._private, private_owner(old), id)
            if old.links:
                for link in old.links:
                    unlink(self._backlinks, self._linker_order, link.to_id, id)
            if old.evidence_refs:
                for ref in old.evidence_refs:
                    _discard(self._citations, _cited_id(ref), id)
            if old.supersedes:
                for ref in old.supersedes:
                    _discard(self._claims, ref, id)
            if id in self._index_id and (new is None or not _same_exact_keys(old, new)):
                self._unexact(id, old)
        if new is None:
            self._dedup_cache.forget(id)
            self._items.pop(id, None)
            self._lex.remove(id)
            self._index_id.pop(id, None)
            return
        self._items[id] = new
        add_by_update(self._by_update, new)
        # The fields read from the item's __dict__ once: an attribute read on a
        # pydantic model passes its __getattr__ hook, and every write comes here.
        f = new.__dict__
        private = f["scope"] == SCOPE_PRIVATE
        if private:
            self._private.setdefault(private_owner(new), set()).add(id)
        for link in f["links"]:
            add_linker(self._backlinks, self._linker_order, link.to_id, id)
        for ref in f["evidence_refs"]:
            self._citations.setdefault(_cited_id(ref), set()).add(id)
        for ref in f["supersedes"]:
            self._claims.setdefault(ref, set()).add(id)
        # _indexable(new), from the fields read above.
        if f["status"] == STATUS_ACTIVE and not private and not self._vocab.is_data(f["kind"]):
            known = self._index_id.get(id)  # a function of the id alone: derived once
            was_indexed = known is not None
            index_id = self._index_id_text(id) if known is None else known
            self._lex.put(new, index_id)
            self._index_id[id] = index_id
            if not was_indexed or old is None or not _same_exact_keys(old, new):
                self._exact_todo.add(id)
        else:
            if id in self._index_id and old is not None and _same_exact_keys(old, new):
                self._unexact(id, old)  # kept above while it stayed indexed
            self._lex.remove(id)
            self._index_id.pop(id, None)

    def _fill_empty(
        self, loaded: list[Item], indexed: list[tuple[Item, bool]], *, lexed: bool
    ) -> None:
        """Enter ``loaded`` into the empty store's indexes: ``_set`` for a whole restore.

        The same end state as ``_set(it.id, it)`` for each item in turn, built
        one index at a time instead of item by item (the update-time list is
        sorted once, not grown by 100k insertions). The caller guarantees the
        store is empty and the ids distinct, and derived ``indexed``: the
        indexable items of ``loaded`` with their ``index_id`` flags, once each.
        ``lexed``: the lexical index already holds exactly those (a loaded
        snapshot); else each is put here.
        """
        assert not self._items, "a fill starts from an empty store"
        self._tally = None  # counted again when next asked, not at every start-up
        self._anchors = None  # likewise
        # One pass over the items for every per-item index: at 100k items a
        # pass is memory-bound (each item's object, dict and id are cold), so
        # fused passes cost about what one does. Fields are read from the
        # item's __dict__, where pydantic keeps them (as Item.clone does).
        items: dict[str, Item] = {}
        keyed: list[tuple[tuple[float, str], Item]] = []
        private, backlinks, citations = self._private, self._backlinks, self._citations
        claims = self._claims
        parsed_utc, parsed_epoch, second = PARSED_UTC, PARSED_EPOCH, SECOND
        for it in loaded:
            share_containers(it)
            d = it.__dict__
            id = d["id"]
            items[id] = it
            at = d["updated_at"]  # update_key, its commonest case inlined
            if at is not None and at.tzinfo is parsed_utc:
                keyed.append((((at - parsed_epoch) / second, id), it))
            else:
                keyed.append((update_key(it), it))
            if d["scope"] == SCOPE_PRIVATE:
                private.setdefault(private_owner(it), set()).add(id)
            if d["links"]:
                for link in d["links"]:
                    backlinks.setdefault(link.to_id, set()).add(id)
            if d["evidence_refs"]:
                for ref in d["evidence_refs"]:
                    citations.setdefault(_cited_id(ref), set()).add(id)
            if d["supersedes"]:
                for ref in d["supersedes"]:
                    claims.setdefault(ref, set()).add(id)
        self._items = items
        self._linker_order = orders_of(backlinks)
        self._by_update = by_update_of(keyed)
        if not lexed:
            put = self._lex.put
            for it, index_id in indexed:
                put(it, index_id)
        self._index_id = {it.id: index_id for it, index_id in indexed}
        self._exact_todo = set(self._index_id)  # titles normalised at the first exact lookup

    def _unexact(self, id: str, old: Item) -> None:
        """Take ``id`` (stored as ``old``) out of the exact-title index, or its queue."""
        if id in self._exact_todo:
            self._exact_todo.discard(id)  # never entered: nothing to take out
            return
        for key in _exact_keys(old):
            _discard(self._exact, key, id)

    def _exact_catch_up(self) -> None:
        """Enter the queued ids into the exact-title index (the lock held).

        Normalising a title costs about as much as the rest of a write's own
        bookkeeping, and only :meth:`exact_matches` reads the index: so writes
        queue their ids, and the first lookup after them enters them all.
        """
        todo = self._exact_todo
        if not todo:
            return
        exact, items = self._exact, self._items
        for id in todo:
            for key in _exact_keys(items[id]):
                ids = exact.get(key)
                if ids is None:
                    exact[key] = {id}
                else:
                    ids.add(id)
        todo.clear()

    def _view(self, item: Item, now: _dt.datetime) -> Item:
        """A copy for a reader, reporting lazy staleness."""
        if item.status == STATUS_ACTIVE and item.is_expired(now):
            return item.clone(status=STATUS_STALE)
        return item.clone()

    def _out(self, items: list[Item]) -> list[Item]:
        if self._config.read is not None and items:
            self._config.read(items)
        return items

    def _matches(
        self,
        it: Item,
        now: _dt.datetime,
        status: str,
        kind: str,
        scope: str,
        subject: str,
        confidence: str,
    ) -> bool:
        if status:
            effective = (
                STATUS_STALE if it.status == STATUS_ACTIVE and it.is_expired(now) else it.status
            )
            if effective != status:
                return False
        if kind and it.kind != kind:
            return False
        if scope and it.scope != scope:
            return False
        if confidence and it.confidence != confidence:
            return False
        return not subject or it.subject == subject or service_tag_value(it) == subject

    # ------------------------------------------------------------ invariant

    def _check(self) -> None:
        """Assert that every index agrees with the items (for tests)."""
        with self._locked():
            assert self._txn is None
            assert self._exact_todo <= set(self._index_id), "queued exact ids not indexed"
            self._exact_catch_up()
            indexable = {id: it for id, it in self._items.items() if self._indexable(it)}
            self._lex._check(indexable, self._index_id)
            assert set(self._index_id) == set(indexable)
            assert len(self._by_update) == len(self._items)
            self._by_update._check()  # type: ignore[attr-defined]  # its own invariants
            assert all(self._items.get(it.id) is it for it in self._by_update)
            private: dict[str, set[str]] = {}
            backlinks: dict[str, set[str]] = {}
            citations: dict[str, set[str]] = {}
            claims: dict[str, set[str]] = {}
            exact: dict[str, set[str]] = {}
            for id, it in self._items.items():
                assert it.id == id
                if it.scope == SCOPE_PRIVATE:
                    private.setdefault(private_owner(it), set()).add(id)
                for link in it.links:
                    backlinks.setdefault(link.to_id, set()).add(id)
                for ref in it.evidence_refs:
                    citations.setdefault(_cited_id(ref), set()).add(id)
                for ref in it.supersedes:
                    claims.setdefault(ref, set()).add(id)
                if id in indexable:
                    for key in _exact_keys(it):
                        exact.setdefault(key, set()).add(id)
            assert private == self._private, "private-owner index disagrees"
            assert backlinks == self._backlinks, "backlink index disagrees"
            for target, order in self._linker_order.items():
                assert list(order) == sorted(backlinks[target]), "linker order disagrees"
            big = {t for t, ids in backlinks.items() if len(ids) >= _linkers.ORDERED_FROM}
            assert big <= set(self._linker_order), "a hub's linkers are not kept in order"
            assert citations == self._citations, "citation index disagrees"
            assert claims == self._claims, "supersedes index disagrees"
            assert exact == self._exact, "exact-title index disagrees"
            if self._anchors is not None:
                fresh = Anchors.of(self._items.values())
                assert fresh == self._anchors, "anchor index disagrees"


# --------------------------------------------------------------- helpers


class _Scope:
    """Holds the store's lock and, for writes, the open group.

    A class rather than a generator context manager: it wraps every call, and
    ``contextlib`` costs several microseconds a time on that path.
    """

    __slots__ = ("_mark", "_outer", "_store", "_write")

    def __init__(self, store: StoreBase, *, write: bool) -> None:
        self._store = store
        self._write = write
        self._outer = False
        self._mark = (0, 0)

    def __enter__(self) -> None:
        store = self._store
        store._lock.acquire()
        d = store._tls.__dict__
        d["depth"] = d.get("depth", 0) + 1
        if self._write:
            txn = store._txn
            if txn is None:
                self._outer = True
                store._txn = _Txn(store._commit_hook)
            else:
                self._mark = (len(txn.undo), len(txn.changes))

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        store = self._store
        failed = exc_type is not None
        try:
            if self._write:
                txn = store._txn
                assert txn is not None
                if self._outer:
                    store._finish_group(txn, failed)
                elif failed:
                    store._rollback(txn, self._mark[0])
                    store._drop_changes(txn, self._mark[1])
        finally:
            store._tls.__dict__["depth"] -= 1
            store._lock.release()
        if self._write and not failed:
            if store._unpublished:  # else _drain has nothing to do
                store._drain()
            # Read your writes: its listeners heard it (_publisher.py). Nothing
            # to wait for when every change queued was delivered (an unlocked
            # peek: both counts only grow, and ours is among the queued).
            if self._outer and store._queued != store._delivered:
                store._await_published()


_new_change = Change.__new__
_CHANGE_SLOTS = tuple(
    Change.__dict__[name].__set__
    for name in ("op", "item", "id", "kind", "mirrored", "published", "previous")
)


def _change(
    op: Literal["upsert", "delete"],
    item: Item | None,
    id: str,
    kind: str,
    mirrored: bool,
    published: bool,
    previous: Item | None,
) -> Change:
    """``Change(op, item, id, kind, mirrored, published, previous=previous)``, built faster.

    The frozen dataclass's own ``__init__`` sets each field through
    ``object.__setattr__`` (looked up anew per field): every write builds one,
    so this sets the slots through their descriptors, as that does. The
    result is the same frozen :class:`~memstore.config.Change`.
    """
    c = _new_change(Change)
    set_op, set_item, set_id, set_kind, set_mirrored, set_published, set_previous = _CHANGE_SLOTS
    set_op(c, op)
    set_item(c, item)
    set_id(c, id)
    set_kind(c, kind)
    set_mirrored(c, mirrored)
    set_published(c, published)
    set_previous(c, previous)
    return c


def _refuse_unrecorded(changes: tuple[Change, ...]) -> None:
    """Refuse a group whose journal was closed (or detached) while it was open.

    A journal detaches under the store's lock, so only the group's own thread
    can close it mid-group (``journal.close()`` inside ``store.batch()``).
    Committed, the group would be acknowledged with no durable record, and
    gone at the next open. A group that only mirrors what another process
    recorded (a PostgreSQL follower's) had its record already.
    """
    if not all(c.mirrored for c in changes):
        raise JournalClosedError(
            "the journal recording this store was closed (or detached) inside this batch: "
            "the batch's writes were undone, as nothing would record them"
        )


_MAX_TTL = _dt.timedelta(days=1000 * 366)
"""The longest ``Config.default_ttl`` (a thousand years): any now plus it stays a datetime."""


def _discard(index: dict[str, set[str]], key: str, id: str) -> None:
    ids = index.get(key)
    if ids is not None:
        ids.discard(id)
        if not ids:
            del index[key]


def _cited_id(ref: str) -> str:
    return ref[5:] if ref.startswith("cell:") else ref


def _exact_keys(item: Item) -> set[str]:
    keys = {normalize_query(item.title)}
    svc = service_tag_value(item)
    if svc:
        keys.add(normalize_query(svc))
    keys.discard("")
    return keys


def _unfolded(tok: str) -> tuple[str, ...]:
    """Every word the dedup plural fold maps to ``tok`` (a superset)."""
    words = [tok, tok + "s", tok + "es"]
    if tok.endswith("y"):
        words.append(tok[:-1] + "ies")
    return tuple(words)


def _same_exact_keys(a: Item, b: Item) -> bool:
    return a.title == b.title and service_tag_value(a) == service_tag_value(b)
