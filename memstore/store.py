"""The Store: memory items under the host's rules, with their lexical indexes.

A :class:`Store` keeps :class:`~memstore.item.Item` s in memory, validates every
write, stamps ids, timestamps, origins and deadlines, indexes shared active
items for lexical search, and tells its observers about every change.

>>> store = Store()
>>> fact = store.upsert(Item(kind="stable_fact", title="Payment API timeout",
...                          content="payment-api calls time out after 30s", confidence="high"))
>>> fact.id.startswith("memory-"), fact.origin
(True, 'derived')
>>> [it.title for it in store.keyword_search("what is the payment api timeout?")]
['Payment API timeout']
>>> store.keyword_search_scored("paymnet timeout")[1]   # a typo, still confident
True

Writes are atomic: a rejected item raises :class:`~memstore.errors.InvalidItemError`
and changes nothing, and ``with store.batch():`` groups writes so that they
commit, or roll back, together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence

from memstore import arguments as arg
from memstore._gc import bulk_load
from memstore._lexindex import LexicalIndex
from memstore._lexsnapshot import LexiconSnapshotError
from memstore._memory_build import validated
from memstore._store_lifecycle import StoreLifecycle
from memstore._store_reads import RECENT_WINDOW, StoreReads
from memstore._store_search import DEFAULT_SEARCH_LIMIT, StoreSearch
from memstore._store_writes import DEDUP_ELIGIBLE_KINDS, StoreWrites, _check_item
from memstore.arguments import describe
from memstore.config import (
    BeforeCommitListener,
    Change,
    ChangeListener,
    Config,
    HitHook,
    Locker,
)
from memstore.errors import InvalidItemError, ItemNotFoundError, JournalError, MemstoreError
from memstore.item import (
    SCOPE_PRIVATE,
    STATUS_ACTIVE,
    STATUS_SUPERSEDED,
    Item,
    Removed,
    well_typed,
)
from memstore.limits import MAX_REFS
from memstore.validate import item_fields, record_copy, record_rejection, validate_base
from memstore.vocabulary import Vocabulary

__all__ = [
    "DEDUP_ELIGIBLE_KINDS",
    "DEFAULT_SEARCH_LIMIT",
    "RECENT_WINDOW",
    "LexiconSource",
    "Store",
]

LexiconSource = tuple[str, int]
"""A saved lexical index: its path, and the generation it must carry to be used."""


class Store(StoreWrites, StoreReads, StoreSearch, StoreLifecycle):
    """The in-memory set of memory items with their lexical indexes.

    Thread-safe: every method takes the store's lock (the host's, when given);
    methods named ``*_locked`` expect the caller to hold it already.
    """

    # ------------------------------------------------------------ accessors

    @property
    def config(self) -> Config:
        """The host seams the store was built with."""
        return self._config

    def subject(self) -> str:
        """The instance identity the store was configured with."""
        return self._config.subject

    def vocabulary(self) -> Vocabulary:
        """The kind vocabulary in force."""
        return self._vocab

    @property
    def lock(self) -> Locker:
        """The lock guarding the store (the host's when one was given)."""
        return self._lock

    def __len__(self) -> int:
        with self._locked():
            return len(self._items)

    def len_locked(self) -> int:
        """The number of items. The caller holds the lock."""
        return len(self._items)

    # ---------------------------------------------------------------- hooks

    def set_change_hook(self, fn: ChangeListener | None) -> None:
        """Install (or clear with ``None``) the callback run after a published change.

        ``fn(op, item, id, kind)``: ``op`` is ``"upsert"`` (``item`` set) or
        ``"delete"`` (``item`` is ``None``). It runs after the lock is released,
        never for a private item, a link-only edit, a mirror that changed
        nothing, or an id the ``quiet`` seam names. The bridge to a change stream.

        An item made private leaves the shared items the hook shows: it hears
        that upsert as ``("delete", None, id, kind)``, so a consumer drops the
        copy it kept of the item as it was shared, and then nothing of the item
        while it stays private (its edits, its delete); shared again, it is an
        upsert. :meth:`set_change_record_hook` hears that change as it was
        made (an upsert, ``published`` false, the item before it in
        ``previous``).
        """
        self._change_hook = fn

    def set_change_record_hook(self, fn: Callable[[Change], None] | None) -> None:
        """Install (or clear) a change hook that receives the whole :class:`Change`.

        Fired when the change hook is (same changes, same order, lock
        released), beside it. An upsert that makes a published item private,
        which the change hook hears as a delete, reaches it as it was made
        (``change.published`` is ``False``, the item private,
        ``change.previous`` the item as it was seen), so that a change stream
        can withdraw the item from those who saw it. Nothing else about a
        private item reaches it. ``change.previous`` also carries
        the item a delete removed, or an upsert replaced, so a change stream
        can route the change by the partition the item was in.
        ``Config.published`` fires once per published change whichever hooks
        are installed.
        """
        self._record_hook = fn

    def set_hit_hook(self, fn: HitHook | None) -> None:
        """Install (or clear) the callback :meth:`notify_hit` fires."""
        self._hit_hook = fn

    def notify_hit(
        self, item_ids: Sequence[str], query: str, kind: str, kinds: Sequence[str] | None = None
    ) -> None:
        """Tell the hit hook that a search surfaced ``item_ids`` to a consumer.

        An empty hit is no event; ``kinds`` of the wrong length is dropped rather
        than forwarded misaligned. The hook gets copies.
        """
        fn = self._hit_hook
        if fn is None or not item_ids:
            return
        kinds_copy = list(kinds) if kinds is not None and len(kinds) == len(item_ids) else None
        fn(list(item_ids), query, kind, kinds_copy)

    def add_change_listener(
        self, fn: Callable[..., None], *, before_commit: bool = False, grouped: bool = False
    ) -> None:
        """Follow every change (private ones, link edits and mirrors included).

        An ordinary listener is called as ``fn(op, item, id, kind)`` once per
        change, after it is committed and the lock released, in registration
        order. A listener added with ``before_commit=True`` is called once per
        write group as ``fn(changes)`` (a sequence of :class:`Change`) after
        validation and before the group becomes visible, with the lock held; if
        it raises, the whole group is undone and the caller gets the exception.
        A journal uses it to write one transaction per group.

        A listener added with ``grouped=True`` follows committed changes as
        an ordinary one does (after commit, lock released, in commit order)
        but is called as ``fn(changes)`` once per run of them: a write group,
        or several groups committed while another thread was publishing. It
        is called before the ordinary listeners hear the run's first change,
        so it suits an index that costs less applied in bulk (a vector index:
        one graph insert and one file write per run, not per change).
        """
        if before_commit and grouped:
            raise ValueError("a listener is before_commit or grouped, not both")
        registry = self._before if before_commit else self._grouped if grouped else self._listeners
        registry.append(fn)

    def add_undo_listener(self, fn: BeforeCommitListener) -> None:
        """Be told when a write group the before-commit listeners saw is undone after all.

        ``fn(changes)`` gets the very changes they were given, once, with the
        lock held, after the group was rolled back (a later before-commit
        listener or the commit hook, the journal, refused it) and before the
        writer gets the exception. A before-commit listener that prepares work
        for the group's commit (an index staging vectors) drops it here. A
        listener that raises is logged; the group stays undone either way.
        """
        self._undone.append(fn)

    def set_commit_hook(self, fn: BeforeCommitListener | None) -> None:
        """Install (or clear with ``None``) the durable record of this store.

        ``fn(changes)`` runs once per write group, with the lock held, after
        every before-commit listener accepted the group: it is the last word
        before the group becomes visible. If it raises, the group is undone and
        the caller gets the exception; once it returns, the write is
        acknowledged. A journal installs it (one store, one journal), so that
        an embedding failure in a before-commit listener can never leave a
        version in the journal that the store rolled back.

        :raises JournalError: installing one inside this thread's open
            ``batch()``, whose writes a journal attaching now would adopt
            before they are made (and keep if the batch were undone).
        """
        with self._locked():  # never between a group's listeners and its record
            if fn is not None and self._commit_hook is not None and fn != self._commit_hook:
                raise MemstoreError("this store already has a commit hook (a journal is attached)")
            if fn is not None and self._txn is not None:  # the lock held: the group is ours
                raise JournalError(
                    "a journal cannot be attached inside store.batch(): the batch's writes "
                    "are not made yet; attach it before the batch or after it"
                )
            self._commit_hook = fn

    def remove_change_listener(self, fn: Callable[..., None]) -> None:
        """Stop calling ``fn``; unknown listeners are ignored."""
        for registry in (self._listeners, self._grouped, self._before, self._undone):
            if fn in registry:
                registry.remove(fn)

    # -------------------------------------------------------- transactions

    def batch(self) -> contextlib.AbstractContextManager[None]:
        """Group writes so that they commit, or roll back, together.

        The store's lock is held for the whole block, so no other thread sees
        a half-written group. Before-commit listeners see the group at once; an
        exception inside the block (or from such a listener) undoes every change
        the block made, in the items and in every index, and propagates. A
        nested ``batch()`` is a savepoint: its exception undoes its own changes.

        >>> store = Store()
        >>> with store.batch():
        ...     a = store.upsert(Item(kind="note", title="first"))
        ...     b = store.upsert(Item(kind="note", title="second"))
        >>> len(store)
        2
        """
        return self._writing()

    def in_batch(self) -> bool:
        """Whether the calling thread is inside a write group of this store.

        True inside a :meth:`batch` block, nested or not, where a write joins
        the open group and commits when the outermost block closes; ``False``
        elsewhere, where each write commits on its own (a before-commit
        listener runs as its group closes: ``False`` there too). A journal
        that checks a group when it commits asks this to know whether the
        group is its to check.

        >>> store = Store()
        >>> with store.batch():
        ...     store.in_batch()
        True
        >>> store.in_batch()
        False
        """
        # Only the thread inside a scope holds the lock: the open group is its own.
        return self._tls.__dict__.get("depth", 0) > 0 and self._txn is not None

    def holds_lock(self) -> bool:
        """Whether the calling thread holds the store's lock.

        True inside the store's own calls and :meth:`batch` blocks, and under
        ``with store.lock:`` when the lock can tell its owner (a
        ``threading.RLock``, the default, can; a host's lock without
        ``_is_owned`` counts only through the store's own calls). A thread
        holding it keeps every other thread out of the store, a journal's
        follower included: what it waits for cannot arrive meanwhile.

        >>> store = Store()
        >>> with store.lock:
        ...     store.holds_lock()
        True
        >>> store.holds_lock()
        False
        """
        if self._tls.__dict__.get("depth", 0) > 0:
            return True
        owned = getattr(self._lock, "_is_owned", None)
        return bool(owned()) if callable(owned) else False

    # ------------------------------------------------------- exact writes

    def put(self, item: Item) -> None:
        """Store ``item`` exactly as given: no validation, stamping or merge.

        For a caller that owns every field (seeding state from elsewhere). The
        lexical indexes are built and listeners told, as for any change. What
        no journal could keep and read back is still refused
        (:func:`~memstore.validate.record_rejection`: :class:`InvalidItemError`,
        nothing changes): no id, an id with whitespace or a control character,
        a field not of its declared type (a link weight of NaN), a NUL in the
        kind or a tag, a naive datetime, a lone surrogate; and so is a
        partition tag PostgreSQL could not index
        (:data:`~memstore.limits.MAX_PARTITION_TAG_CHARS`).
        """
        _check_item(item, "put")
        if not item.id:
            raise InvalidItemError("put needs an item with an id")
        it = record_copy(item, "put")
        with self._writing():
            self._write(it.id, it, as_given=True)

    def _put_recorded(self, item: Item) -> None:
        """:meth:`put` of an item nobody else holds, read from a record or checked already.

        An import's apply: each id's newest version, imported (held to the
        import's rules) or already on record (kept as the journal holds it,
        even one a write may no longer store).
        """
        with self._writing():
            self._write(item.id, item, as_given=True)

    def mirror(self, item: Item) -> bool:
        """Reflect a persisted cell written elsewhere, without acting as a mutation.

        No ``updated_at`` stamp, and nothing happens when nothing changed; a
        cell older than the stored item never clobbers it (that is a pending
        local change). Returns whether the stored state changed.
        """
        _check_item(item, "mirror")
        if not item.id:
            raise InvalidItemError("mirror needs an item with an id")
        item = record_copy(item, "mirror")  # what no journal could keep is refused
        with self._writing():
            existing = self._items.get(item.id)
            if existing is not None:
                if (
                    item.updated_at is not None
                    and existing.updated_at is not None
                    and item.updated_at < existing.updated_at
                ):
                    return False
                if existing.model_dump() == item.model_dump():
                    return False
            if existing is not None:
                item.cell_originated = existing.cell_originated
            self._write(item.id, item, mirrored=True)
            return True

    def reflect(self, id: str, item: Item | None) -> bool:
        """Make ``id`` exactly ``item`` (``None``: absent), as a shared record holds it.

        For a replica following a record that other writers share (a
        PostgreSQL journal): the record already decided which write won, so
        unlike :meth:`mirror` there is no freshness rule, and unlike
        :meth:`put` the change is marked ``mirrored`` and nothing happens when
        the store already holds exactly that state. No validation or stamping;
        the item is kept as ``cell_originated``. Returns whether anything changed.
        What no journal could keep and read back is refused, as by :meth:`put`
        (:func:`~memstore.validate.intake_rejection`): :class:`InvalidItemError`,
        nothing changes.
        """
        if item is not None:
            _check_item(item, "reflect")
            if item.id != id:
                raise InvalidItemError(f"reflect of {id!r} was given item {item.id!r}")
            item = record_copy(item, "reflect")
        return self._reflect_owned(id, item)

    def _reflect_owned(self, id: str, item: Item | None) -> bool:
        """:meth:`reflect` of an item just read from the shared record, kept as it is.

        Not checked again: the record holds it already, and a follower that
        refused it would stop following (opening the journal restores it the
        same way). Not copied: nobody else holds it.
        """
        with self._writing():
            existing = self._items.get(id)
            if item is None:
                if existing is None:
                    return False
                self._write(id, None, mirrored=True)
                return True
            if existing is not None and existing.model_dump() == item.model_dump():
                return False
            item.cell_originated = True
            self._write(id, item, mirrored=True)
            return True

    def restore(self, items: Iterable[Item]) -> None:
        """Replace every item with persisted ones (startup) and rebuild the indexes.

        Restored items are marked ``cell_originated``. No listener or hook fires:
        this loads the record, it does not change it. An item no journal could
        keep (:func:`~memstore.validate.record_rejection`) raises
        :class:`InvalidItemError` and nothing changes. A record is loaded as it
        is: a partition tag longer than a write may store now is kept.
        """
        loaded: list[Item] = []
        for item in items:
            if not _check_item(item, "restore").id:
                raise InvalidItemError("restore needs items with ids")
            it = record_copy(item, "restore", record_rejection)
            it.__dict__["cell_originated"] = True
            loaded.append(it)
        self._restore(loaded)

    def _restore_owned(self, items: list[Item], lexicon: LexiconSource | None = None) -> None:
        """:meth:`restore` of items nobody else holds (freshly parsed): kept, not cloned.

        ``lexicon``: a saved lexical index of exactly these items (a path and the
        generation it must carry), loaded instead of re-tokenising every item;
        one that is missing, stale or damaged is ignored (the items are indexed
        as usual) with a log line.
        """
        self._restore(items, lexicon, owned=True)

    def _restore(
        self,
        loaded: list[Item],
        lexicon: LexiconSource | None = None,
        *,
        owned: bool = False,
    ) -> None:
        """Replace every item with ``loaded`` (kept as given), after checking them all.

        The items obey the record rule already: a journal's rows were just
        built by the model's own validation, and :meth:`restore` checks what
        it is given (:func:`~memstore.validate.record_copy`). Distinct ids (a
        journal's live rows always are) take the bulk fill, each index built
        in one pass; a list naming an id
        twice keeps its last item, as item-by-item writes would. ``owned``:
        mark each ``cell_originated`` in place (as ``clone`` would set it).
        One pass over the items does all of that (at 100k, a pass is
        memory-bound: each item is cold).
        """
        ids: set[str] = set()
        for it in loaded:  # check everything before touching anything
            d = it.__dict__
            if owned:
                d["cell_originated"] = True
            id = d["id"]
            if not id:
                raise InvalidItemError("restore needs items with ids")
            ids.add(id)
        distinct = len(ids) == len(loaded)
        del ids  # not held through the fill (at 100k, a few MB of the peak)
        with self._locked(), bulk_load():
            if self._txn is not None:
                raise MemstoreError("restore cannot run inside a batch")
            for id in list(self._items):
                self._set(id, None)
            if distinct:
                indexed = self._indexed_of(loaded)
                lexed = lexicon is not None and self._load_lexicon(indexed, lexicon)
                self._fill_empty(loaded, indexed, lexed=lexed)
            else:
                for it in loaded:
                    self._set(it.id, it)
            self._lex.lexicon.flush()  # build the arrays now, not in the first query

    def _indexed_of(self, loaded: list[Item]) -> list[tuple[Item, bool]]:
        """The items of ``loaded`` the lexical index holds, with their ``index_id`` flags.

        ``_indexable`` and ``_index_id_text`` of each, with the vocabulary's
        verdict on a kind asked once per distinct kind.
        """
        data_kind: dict[str, bool] = {}
        is_data = self._vocab.is_data
        index_id_text = self._index_id_text
        out: list[tuple[Item, bool]] = []
        for it in loaded:
            if it.status != STATUS_ACTIVE or it.scope == SCOPE_PRIVATE:
                continue
            kind = it.kind
            data = data_kind.get(kind)
            if data is None:
                data = data_kind[kind] = is_data(kind)
            if not data:
                out.append((it, index_id_text(it.id)))
        return out

    def _load_lexicon(self, indexed: list[tuple[Item, bool]], source: LexiconSource) -> bool:
        """Install the saved lexical index of ``indexed`` (the lock held, the store empty).

        Returns whether it was installed (else the index is left as it was).
        """
        path, generation = source
        if not os.path.exists(path):
            return False
        try:
            self._lex = LexicalIndex.from_snapshot(path, indexed, expect_generation=generation)
        except (LexiconSnapshotError, OSError) as e:
            self._log.info("memstore: not using the saved lexical index %s (%s)", path, e)
            return False
        return True

    def save_lexicon(self, path: str | os.PathLike[str], *, generation: int) -> None:
        """Write the lexical index to ``path`` for a later restore to load (atomic rename).

        ``generation`` names the state it indexes (a journal's head): a restore
        loads it only when asked for that same generation.
        """
        tmp = f"{os.fspath(path)}.tmp"
        with self._locked():
            self._lex.save_snapshot(tmp, generation=generation)
        os.replace(tmp, path)

    def indexed_len(self) -> int:
        """How many items the lexical index holds (the active, searchable ones)."""
        with self._locked():
            return len(self._lex)

    def supersede(self, old_id: str, new_item: Item) -> Item:
        """Retire ``old_id`` as superseded and insert ``new_item`` pointing at it.

        Raises :class:`~memstore.errors.ItemNotFoundError` when ``old_id`` is
        unknown, :class:`~memstore.errors.InvalidItemError` when the new item is
        invalid or reuses ``old_id``, or when another active item already
        supersedes ``old_id`` (a chain never forks into two current versions:
        supersede that item instead); either way nothing changes.
        """
        if type(old_id) is not str:
            arg.id_arg(old_id, "old_id")
        it, had_deadline = self._prepare(new_item)
        if it.id == old_id:
            raise InvalidItemError(f"the superseding item cannot reuse the id {old_id!r}")
        with self._writing():
            old = self._items.get(old_id)
            if old is None:
                raise ItemNotFoundError(old_id)
            head = self._claimant_locked(old_id, it.id)
            if head is not None:
                raise InvalidItemError(
                    f"{old_id} is already superseded by {head}: supersede {head} instead"
                )
            existing = self._items.get(it.id) if it.id else None
            self._stamp(it, existing, had_deadline)
            if old_id not in it.supersedes:  # the most recent MAX_REFS, as mark_superseded keeps
                it.__dict__["supersedes"] = [*it.supersedes, old_id][-MAX_REFS:]
            if self._config.before is not None:
                it = self._amended(it)
            self._write(old_id, self._retire(old, STATUS_SUPERSEDED))
            self._write(it.id, it)
            return it.clone()

    def mutate(self, id: str, fn: Callable[[Item], bool]) -> bool:
        """Apply ``fn`` to a working copy of the item under the lock.

        When ``fn`` returns ``True`` the copy is validated, stamped with a new
        ``updated_at`` and stored (a failed validation raises and changes
        nothing). Returns whether the item exists.
        """
        if type(id) is not str:
            arg.id_arg(id)
        _check_callable(fn, "fn")
        with self._writing():
            item = self._items.get(id)
            if item is None:
                return False
            work = item.clone()
            if fn(work):
                work.id = id
                if not well_typed(work):  # fn assigned a field: pydantic did not check it
                    work = validated(item_fields(work))
                why = validate_base(self._vocab, work, item)
                if not why and self._config.validate is not None:
                    why = self._config.validate(work)
                if why:
                    raise InvalidItemError(why)
                work.updated_at = self._now()
                self._write(id, work.clone())  # the callback may keep ``work``
            return True

    def forget_locked(self, match: Callable[[Item], bool]) -> list[Removed]:
        """Delete every item ``match`` accepts; the caller holds the lock.

        Before-commit listeners see the deletions as one group. The change
        hook and after-commit listeners are told only when the caller, having
        released the lock, hands the result to :meth:`publish_removed`; until
        then the deletions hold their place in commit order, and changes
        committed after them wait behind them.
        """
        _check_callable(match, "match")
        gone = [
            Removed(id=id, kind=it.kind, scope=it.scope)
            for id, it in sorted(self._items.items())
            if match(it)
        ]
        with self._writing():
            for r in gone:
                self._write(r.id, None, held=True)
        return gone

    def publish_removed(self, gone: Iterable[Removed]) -> None:
        """Announce what :meth:`forget_locked` removed (call it outside the lock).

        The deletions are delivered in their commit order. A ``Removed`` that
        no pending deletion matches is announced on its own.
        """
        if isinstance(gone, str | bytes | Item) or not isinstance(gone, Iterable):
            raise InvalidItemError(f"gone must be a list of Removed, got {describe(gone)}")
        gone = list(gone)
        for r in gone:
            if not isinstance(r, Removed):
                raise InvalidItemError(f"gone must be a list of Removed, got one {describe(r)}")
        missing = set(self._release_held((r.id, r.kind) for r in gone))
        self._drain()
        self._publish(
            Change("delete", None, r.id, r.kind, published=r.scope != SCOPE_PRIVATE)
            for r in gone
            if (r.id, r.kind) in missing
        )

    def clone_into(self, lock: Locker | None, config: Config | None = None) -> Store:
        """A new store holding copies of these items, guarded by ``lock``.

        A config without a vocabulary inherits this store's. Takes no lock on
        this store: the caller holds it for the whole call.
        """
        if config is not None and not isinstance(config, Config):
            raise MemstoreError(f"config must be a memstore.Config, got {describe(config)}")
        cfg = config if config is not None else Config()
        if cfg.vocabulary is None:
            cfg = dataclasses.replace(cfg, vocabulary=self._config.vocabulary)
        copy = Store(cfg, lock=lock)
        for id, item in self._items.items():
            copy._set(id, item.clone())
        return copy


def _check_callable(fn: object, name: str) -> None:
    """Refuse a callback that cannot be called (it would fail inside the write)."""
    if not callable(fn):
        raise InvalidItemError(f"{name} must be a function, got {describe(fn)}")
