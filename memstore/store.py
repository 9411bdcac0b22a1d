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

import base64
import contextlib
import dataclasses
import datetime as _dt
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import regex
from sortedcontainers import SortedKeyList
from ulid import ULID

from memstore._lexindex import LexicalHit, LexicalIndex
from memstore.config import (
    BeforeCommitListener,
    Change,
    ChangeListener,
    Config,
    HitHook,
    Locker,
)
from memstore.errors import InvalidItemError, ItemNotFoundError, MemstoreError
from memstore.graph import DEFAULT_CONTEXT_DECAY, DEFAULT_CONTEXT_DEPTH, spread
from memstore.item import (
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_WATCH_ITEM,
    MAX_MODEL_LINKS,
    ORIGIN_DERIVED,
    REFUTED_DATA_KEY,
    SCOPE_PRIVATE,
    STATUS_ACTIVE,
    STATUS_STALE,
    STATUS_SUPERSEDED,
    Item,
    RefutedRecord,
    Removed,
    ScoredItem,
    ThoughtLink,
)
from memstore.lexical import is_confident, score_document
from memstore.neardup import dedup_comparable, near_duplicate_tokens
from memstore.tags import private_owner, service_tag_value
from memstore.text import dedup_tokens, kw_tokens, normalize_query, words
from memstore.validate import stamp_knowledge_retention, thought_link_rejection, validate_base
from memstore.vocabulary import Vocabulary

__all__ = ["DEDUP_ELIGIBLE_KINDS", "DEFAULT_SEARCH_LIMIT", "RECENT_WINDOW", "Store"]

DEDUP_ELIGIBLE_KINDS = frozenset(
    {KIND_STABLE_FACT, KIND_OPERATIONAL_PATTERN, KIND_WATCH_ITEM, KIND_HYPOTHESIS}
)
"""Kinds :meth:`Store.upsert_dedup` merges restatements of."""
DEFAULT_SEARCH_LIMIT = 10
"""Results a keyword search returns when ``limit`` is not positive."""
RECENT_WINDOW = 500
"""How many of the most recently updated items :meth:`Store.recent` considers."""

_ULID = regex.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


@dataclass
class _Txn:
    """The open write group: an undo log and the changes made so far."""

    undo: list[tuple[str, Item | None]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    defer_publish: bool = False


class Store:
    """The in-memory set of memory items with their lexical indexes.

    Thread-safe: every method takes the store's lock (the host's, when given);
    methods named ``*_locked`` expect the caller to hold it already.
    """

    def __init__(self, config: Config | None = None, *, lock: Locker | None = None) -> None:
        self._config = config if config is not None else Config()
        self._vocab = self._config.vocabulary or Vocabulary()
        self._lock: Locker = lock if lock is not None else threading.RLock()
        self._log = self._config.logger or logging.getLogger("memstore")
        self._items: dict[str, Item] = {}
        self._lex = LexicalIndex()
        self._index_id: dict[str, bool] = {}
        self._private: dict[str, set[str]] = {}
        self._backlinks: dict[str, set[str]] = {}
        self._citations: dict[str, set[str]] = {}
        self._exact: dict[str, set[str]] = {}
        self._by_update: SortedKeyList[Item, tuple[float, str]] = SortedKeyList(key=_update_key)
        self._txn: _Txn | None = None
        self._tls = threading.local()
        self._unpublished: list[Change] = []
        self._publish_lock = threading.RLock()
        self._change_hook: ChangeListener | None = None
        self._hit_hook: HitHook | None = None
        self._listeners: list[ChangeListener] = []
        self._before: list[BeforeCommitListener] = []

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

    def _now(self) -> _dt.datetime:
        return self._config.clock()

    def _locked(self) -> _Scope:
        """Hold the lock (reads): ``with self._locked(): ...``."""
        return _Scope(self, write=False)

    # ---------------------------------------------------------------- hooks

    def set_change_hook(self, fn: ChangeListener | None) -> None:
        """Install (or clear with ``None``) the callback run after a published change.

        ``fn(op, item, id, kind)``: ``op`` is ``"upsert"`` (``item`` set) or
        ``"delete"`` (``item`` is ``None``). It runs after the lock is released,
        never for a private item, a link-only edit, a mirror that changed
        nothing, or an id the ``quiet`` seam names. The bridge to a change stream.
        """
        self._change_hook = fn

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

    def add_change_listener(self, fn: Callable[..., None], *, before_commit: bool = False) -> None:
        """Follow every change (private ones, link edits and mirrors included).

        An ordinary listener is called as ``fn(op, item, id, kind)`` once per
        change, after it is committed and the lock released, in registration
        order. A listener added with ``before_commit=True`` is called once per
        write group as ``fn(changes)`` (a sequence of :class:`Change`) after
        validation and before the group becomes visible, with the lock held; if
        it raises, the whole group is undone and the caller gets the exception.
        A journal uses it to write one transaction per group.
        """
        (self._before if before_commit else self._listeners).append(fn)

    def remove_change_listener(self, fn: Callable[..., None]) -> None:
        """Stop calling ``fn``; unknown listeners are ignored."""
        for registry in (self._listeners, self._before):
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

    def _finish_group(self, txn: _Txn, failed: bool) -> None:
        """Close the outermost group: run before-commit listeners, then commit or undo."""
        self._txn = None
        if failed:
            self._rollback(txn, 0)
            return
        if txn.changes and self._before:
            changes = tuple(txn.changes)
            try:
                for listener in list(self._before):
                    listener(changes)
            except BaseException:
                self._rollback(txn, 0)
                raise
        cfg = self._config
        if cfg.dirty is not None or cfg.signal is not None:
            for _ in txn.changes:
                if cfg.dirty is not None:
                    cfg.dirty()
                if cfg.signal is not None:
                    cfg.signal()
        if txn.changes and not txn.defer_publish:
            self._unpublished.extend(txn.changes)

    def _rollback(self, txn: _Txn, mark: int) -> None:
        while len(txn.undo) > mark:
            id, previous = txn.undo.pop()
            self._set(id, previous)

    def _write(
        self, id: str, new: Item | None, *, publish: bool = True, mirrored: bool = False
    ) -> None:
        """Record and apply one change inside the open group."""
        txn = self._txn
        assert txn is not None, "writes happen inside a group"
        old = self._items.get(id)
        if old is None and new is None:
            return
        txn.undo.append((id, old))
        self._set(id, new)
        kind = new.kind if new is not None else old.kind  # type: ignore[union-attr]
        private = (new or old).scope == SCOPE_PRIVATE  # type: ignore[union-attr]
        # The stored object itself: stored items are never mutated in place
        # (every change stores a new object), so listeners may keep it.
        txn.changes.append(
            Change(
                "delete" if new is None else "upsert",
                new,
                id,
                kind,
                mirrored,
                publish and not private,
            )
        )

    def _publish(self, changes: Iterable[Change]) -> None:
        """Fire the change hook and after-commit listeners (lock released)."""
        cfg = self._config
        hook = self._change_hook
        listeners = list(self._listeners)
        for c in changes:
            if hook is not None and c.published and not (cfg.quiet and cfg.quiet(c.id)):
                hook(c.op, c.item, c.id, c.kind)
                if cfg.published is not None:
                    cfg.published()
            for fn in listeners:
                fn(c.op, c.item, c.id, c.kind)

    def _writing(self, *, defer_publish: bool = False) -> _Scope:
        """Lock, open (or join) a group, and publish what it committed once unlocked."""
        return _Scope(self, write=True, defer_publish=defer_publish)

    def _drain(self) -> None:
        """Publish committed changes, in commit order, once this thread left the store."""
        if self._tls.__dict__.get("depth", 0) > 0:
            return
        with self._publish_lock:
            with self._locked():
                pending, self._unpublished = self._unpublished, []
            if pending:
                self._publish(pending)

    # ------------------------------------------------------ the primitive

    def _indexable(self, item: Item) -> bool:
        return (
            item.status == STATUS_ACTIVE
            and item.scope != SCOPE_PRIVATE
            and not self._vocab.is_data(item.kind)
        )

    def _index_id_text(self, id: str) -> bool:
        skip = self._config.skip_id_text
        if skip is not None:
            return not skip(id)
        prefix = self._config.id_prefix
        return not (id.startswith(prefix) and _ULID.fullmatch(id[len(prefix) :]) is not None)

    def _set(self, id: str, new: Item | None) -> None:
        """Make ``new`` the stored state of ``id`` (``None`` deletes) in every index."""
        old = self._items.get(id)
        if old is not None:
            self._by_update.remove(old)
            if old.scope == SCOPE_PRIVATE:
                _discard(self._private, private_owner(old), id)
            if old.links:
                for link in old.links:
                    _discard(self._backlinks, link.to_id, id)
            if old.evidence_refs:
                for ref in old.evidence_refs:
                    _discard(self._citations, _cited_id(ref), id)
            if id in self._index_id and (new is None or not _same_exact_keys(old, new)):
                for key in _exact_keys(old):
                    _discard(self._exact, key, id)
        if new is None:
            self._items.pop(id, None)
            self._lex.remove(id)
            self._index_id.pop(id, None)
            return
        self._items[id] = new
        self._by_update.add(new)
        if new.scope == SCOPE_PRIVATE:
            self._private.setdefault(private_owner(new), set()).add(id)
        for link in new.links:
            self._backlinks.setdefault(link.to_id, set()).add(id)
        for ref in new.evidence_refs:
            self._citations.setdefault(_cited_id(ref), set()).add(id)
        if self._indexable(new):
            was_indexed = id in self._index_id
            index_id = self._index_id_text(id)
            self._lex.put(new, index_id)
            self._index_id[id] = index_id
            if not was_indexed or old is None or not _same_exact_keys(old, new):
                for key in _exact_keys(new):
                    self._exact.setdefault(key, set()).add(id)
        else:
            if id in self._index_id and old is not None and _same_exact_keys(old, new):
                for key in _exact_keys(old):  # kept above while it stayed indexed
                    _discard(self._exact, key, id)
            self._lex.remove(id)
            self._index_id.pop(id, None)

    # --------------------------------------------------------------- writes

    def validate_base(self, item: Item) -> str:
        """Why ``item`` breaks the rules every item obeys, or ``""`` (see :func:`validate_base`)."""
        return validate_base(self._vocab, item)

    def _mint_id(self) -> str:
        if self._config.new_id is not None:
            return self._config.new_id()
        return f"{self._config.id_prefix}{ULID()}"

    def _prepare(self, item: Item) -> tuple[Item, bool]:
        """Copy, coerce, stamp and validate an incoming item (no lock held)."""
        if not isinstance(item, Item):
            raise InvalidItemError(f"expected an Item, got {type(item).__name__}")
        it = item.clone()
        if self._vocab.coerce is not None:
            self._vocab.coerce(it)
        had_deadline = it.stale_after is not None
        stamp_knowledge_retention(it, self._config.retention, self._now())
        why = validate_base(self._vocab, it)
        if not why and self._config.validate is not None:
            why = self._config.validate(it)
        if why:
            raise InvalidItemError(why)
        return it, had_deadline

    def _stamp(self, it: Item, existing: Item | None, had_deadline: bool) -> None:
        """Fill what a write stamps: id, timestamps, origin, subject, deadline."""
        cfg = self._config
        now = self._now()
        f = it.__dict__  # internal writes skip pydantic's per-field setattr
        if not it.id:
            f["id"] = self._mint_id()
        f["updated_at"] = now
        if existing is not None:
            f["created_at"] = existing.created_at
            if not it.links_set and not it.links:
                f["links"] = [link.model_copy() for link in existing.links]
            if not it.supersedes:
                f["supersedes"] = list(existing.supersedes)
            f["origin"] = it.origin or existing.origin
            f["cell_originated"] = existing.cell_originated
        elif it.created_at is None:
            f["created_at"] = now
        if not it.origin:
            f["origin"] = _restored_origin(it)
        if it.scope == SCOPE_PRIVATE and not it.subject:
            f["subject"] = cfg.subject
        ttl = cfg.default_ttl
        if ttl is not None and not had_deadline:
            if existing is not None and existing.stale_after is not None:
                f["stale_after"] = existing.stale_after
            elif existing is None and it.kind in ttl:
                f["stale_after"] = now + ttl[it.kind]
        f["links_set"] = False

    def upsert(self, item: Item) -> Item:
        """Add or update one item; returns the stored copy.

        Validation (the base rules, the vocabulary's coercion, the host's
        ``validate``) runs first: a rejected item raises
        :class:`~memstore.errors.InvalidItemError` and changes nothing. An item
        with no id gets a minted one; an update keeps the stored creation time,
        links (unless ``links_set``) and origin when the new one carries none.
        """
        it, had_deadline = self._prepare(item)
        with self._writing():
            existing = self._items.get(it.id) if it.id else None
            self._stamp(it, existing, had_deadline)
            if self._config.before is not None:
                self._config.before(it)
            self._write(it.id, it)
            return it.clone()

    def upsert_dedup(self, item: Item) -> tuple[Item, str | None]:
        """The write gate for model-authored knowledge: restatements land on one cell.

        When ``item.id`` names an existing cell, or the kind is not one of
        :data:`DEDUP_ELIGIBLE_KINDS`, this is :meth:`upsert` (second value
        ``None``). Otherwise the item is scored against the active cells of its
        kind that share a token with it; on a near-duplicate that cell is
        updated in place (its id, creation time, links, supersedes kept; tags
        unioned, existing first) and its id is returned second.
        """
        if item.kind not in DEDUP_ELIGIBLE_KINDS:
            return self.upsert(item), None
        it, had_deadline = self._prepare(item)
        with self._writing():
            if it.id and it.id in self._items:
                existing = self._items[it.id]
                self._stamp(it, existing, had_deadline)
                if self._config.before is not None:
                    self._config.before(it)
                self._write(it.id, it)
                return it.clone(), None
            # Compare the item as it would be stored: its origin and a private
            # item's subject are stamped, so they match cells stamped the same way.
            f = it.__dict__
            f["origin"] = it.origin or _restored_origin(it)
            if it.scope == SCOPE_PRIVATE and not it.subject:
                f["subject"] = self._config.subject
            target = self._find_duplicate_locked(it)
            if target is None:
                self._stamp(it, None, had_deadline)
                if self._config.before is not None:
                    self._config.before(it)
                self._write(it.id, it)
                return it.clone(), None
            merged = it.clone(
                id=target.id,
                created_at=target.created_at,
                links=[link.model_copy() for link in target.links],
                supersedes=list(target.supersedes),
                cell_originated=target.cell_originated,
                tags=list(dict.fromkeys([*target.tags, *it.tags])),
                updated_at=self._now(),
            )
            ttl = self._config.default_ttl
            if ttl is not None and not had_deadline:
                # As for an update: a restatement without a deadline keeps the
                # stored one, unless renew_on_merge re-arms a default_ttl kind.
                if self._config.renew_on_merge and it.kind in ttl:
                    merged.__dict__["stale_after"] = self._now() + ttl[it.kind]
                else:
                    merged.__dict__["stale_after"] = target.stale_after
            if self._config.before is not None:
                self._config.before(merged)
            self._write(merged.id, merged)
            return merged.clone(), target.id

    def _find_duplicate_locked(self, item: Item) -> Item | None:
        tokens = dedup_tokens(item)
        if not tokens:
            return None
        if item.scope == SCOPE_PRIVATE:
            pool: Iterable[str] = sorted(self._private.get(private_owner(item), ()))
        else:
            # Any near-duplicate shares a folded token, i.e. contains a word
            # that folds to it: the postings of those words are the candidates.
            lex = self._lex.lexicon
            found: set[str] = set()
            for tok in tokens:
                for w in _unfolded(tok):
                    slots = lex._postings.get(w)
                    if slots:
                        found.update(lex.id_at(s) or "" for s in slots)
            pool = sorted(found)
        now = self._now()
        best: tuple[Item, float] | None = None
        for cid in pool:
            cand = self._items.get(cid)
            if cand is None or cand.kind != item.kind or not cand.is_active(now):
                continue
            if not dedup_comparable(cand, item):
                continue
            score, dup = near_duplicate_tokens(dedup_tokens(cand), tokens)
            if dup and (best is None or score > best[1]):
                best = (cand, score)
        return best[0] if best else None

    def put(self, item: Item) -> None:
        """Store ``item`` exactly as given: no validation, stamping or merge.

        For a caller that owns every field (seeding state from elsewhere). The
        lexical indexes are built and listeners told, as for any change.
        """
        if not item.id:
            raise InvalidItemError("put needs an item with an id")
        why = _naive_datetime(item)
        if why:
            raise InvalidItemError(why)
        with self._writing():
            self._write(item.id, item.clone())

    def mirror(self, item: Item) -> bool:
        """Reflect a persisted cell written elsewhere, without acting as a mutation.

        No ``updated_at`` stamp, and nothing happens when nothing changed; a
        cell older than the stored item never clobbers it (that is a pending
        local change). Returns whether the stored state changed.
        """
        if not item.id:
            raise InvalidItemError("mirror needs an item with an id")
        why = _naive_datetime(item)
        if why:
            raise InvalidItemError(why)
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
            new = item.clone()
            if existing is not None:
                new.cell_originated = existing.cell_originated
            self._write(item.id, new, mirrored=True)
            return True

    def restore(self, items: Iterable[Item]) -> None:
        """Replace every item with persisted ones (startup) and rebuild the indexes.

        Restored items are marked ``cell_originated``. No listener or hook fires:
        this loads the record, it does not change it.
        """
        loaded = [it.clone(cell_originated=True) for it in items]
        for it in loaded:  # check everything before touching anything
            if not it.id:
                raise InvalidItemError("restore needs items with ids")
            why = _naive_datetime(it)
            if why:
                raise InvalidItemError(why)
        with self._locked():
            if self._txn is not None:
                raise MemstoreError("restore cannot run inside a batch")
            for id in list(self._items):
                self._set(id, None)
            for it in loaded:
                self._set(it.id, it)

    def delete(self, id: str) -> bool:
        """Remove one item by id; returns whether it existed."""
        with self._writing():
            if id not in self._items:
                return False
            self._write(id, None)
            return True

    def _retire(self, item: Item, status: str, **update: object) -> Item:
        return item.clone(status=status, updated_at=self._now(), **update)

    def expire(self, id: str) -> bool:
        """Mark an item stale; returns whether it exists."""
        with self._writing():
            item = self._items.get(id)
            if item is None:
                return False
            if item.status != STATUS_STALE:
                self._write(id, self._retire(item, STATUS_STALE))
            return True

    def sweep_expired(self) -> list[str]:
        """Write down the staleness of every active item past its deadline.

        Reads already report such items as stale (lazily, by the clock); this
        makes it a real change, so listeners (a journal, a change stream) see it
        and the lexical index drops them. Returns the ids expired.
        """
        with self._writing():
            now = self._now()
            due = sorted(
                id
                for id, it in self._items.items()
                if it.status == STATUS_ACTIVE and it.is_expired(now)
            )
            for id in due:
                self._write(id, self._retire(self._items[id], STATUS_STALE))
            return due

    def supersede(self, old_id: str, new_item: Item) -> Item:
        """Retire ``old_id`` as superseded and insert ``new_item`` pointing at it.

        Raises :class:`~memstore.errors.ItemNotFoundError` when ``old_id`` is
        unknown, :class:`~memstore.errors.InvalidItemError` when the new item is
        invalid or reuses ``old_id``; either way nothing changes.
        """
        it, had_deadline = self._prepare(new_item)
        if it.id == old_id:
            raise InvalidItemError(f"the superseding item cannot reuse the id {old_id!r}")
        with self._writing():
            old = self._items.get(old_id)
            if old is None:
                raise ItemNotFoundError(old_id)
            existing = self._items.get(it.id) if it.id else None
            self._stamp(it, existing, had_deadline)
            if old_id not in it.supersedes:
                it.supersedes = [*it.supersedes, old_id]
            if self._config.before is not None:
                self._config.before(it)
            self._write(old_id, self._retire(old, STATUS_SUPERSEDED))
            self._write(it.id, it)
            return it.clone()

    def mark_superseded(self, id: str, by_id: str) -> bool:
        """Retire ``id`` as superseded by the existing cell ``by_id``, in place.

        The keeper's ``supersedes`` records ``id``. Returns ``False``, writing
        nothing, when either id is empty or unknown, or they are equal.
        """
        if not id or not by_id or id == by_id:
            return False
        with self._writing():
            old, keeper = self._items.get(id), self._items.get(by_id)
            if old is None or keeper is None:
                return False
            self._write(id, self._retire(old, STATUS_SUPERSEDED))
            if id not in keeper.supersedes:
                self._write(
                    by_id, keeper.clone(supersedes=[*keeper.supersedes, id], updated_at=self._now())
                )
            return True

    def refute(
        self,
        id: str,
        reason: str,
        evidence: Sequence[str] = (),
        now: _dt.datetime | None = None,
    ) -> tuple[bool, list[str]]:
        """Refute a cell and expire what was derived from it, one hop only.

        Records ``data["refuted"]`` (a :class:`~memstore.item.RefutedRecord` as
        base64 JSON), expires the cell, then expires every active derived cell
        citing it (an evidence ref naming the id, with or without ``cell:``, or
        a link to it). Observed, human and verified cells are never cascaded.
        Returns whether the cell existed and the ids expired as a consequence.
        """
        when = now or self._now()
        record = RefutedRecord(
            reason=reason, evidence=list(evidence), at=when.isoformat().replace("+00:00", "Z")
        )
        encoded = base64.b64encode(record.model_dump_json().encode()).decode()
        with self._writing():
            item = self._items.get(id)
            if item is None:
                return False, []
            data = {**item.data, REFUTED_DATA_KEY: encoded}
            self._write(id, self._retire(item, STATUS_STALE, data=data))
            cascaded: list[str] = []
            citing = self._citations.get(id, set()) | self._backlinks.get(id, set())
            for cid in sorted(citing):
                cell = self._items.get(cid)
                if cell is None or cid == id or cell.status != STATUS_ACTIVE:
                    continue
                if cell.origin not in ("", ORIGIN_DERIVED):
                    continue
                self._write(cid, self._retire(cell, STATUS_STALE))
                cascaded.append(cid)
            return True, cascaded

    def add_link(self, from_id: str, link: ThoughtLink) -> bool:
        """Append a link to the cell ``from_id``; returns whether it was admitted.

        ``False`` when the cell does not exist, the link fails
        :func:`~memstore.validate.thought_link_rejection`, or the cell holds
        :data:`~memstore.item.MAX_MODEL_LINKS` links and this one does not
        out-weigh the lowest (which is then evicted). A link with the same
        target and relation replaces the old one and is exempt from the cap.
        A link-only edit is not published to the change hook.
        """
        if thought_link_rejection(from_id, link):
            return False
        with self._writing():
            item = self._items.get(from_id)
            if item is None:
                return False
            links = [lk.model_copy() for lk in item.links]
            same = [
                i
                for i, lk in enumerate(links)
                if (lk.to_id, lk.relation) == (link.to_id, link.relation)
            ]
            if same:
                links[same[0]] = link.model_copy()
            elif len(links) >= MAX_MODEL_LINKS:
                low = min(range(len(links)), key=lambda i: links[i].weight)
                if link.weight <= links[low].weight:
                    return False
                del links[low]
                links.append(link.model_copy())
            else:
                links.append(link.model_copy())
            self._write(from_id, item.clone(links=links), publish=False)
            return True

    def prune_invalid_links(self) -> int:
        """Drop structurally invalid links (empty target, self-link) from every cell.

        A link's target is not required to exist (the host may keep cells out
        of this store). Writes only cells that lose a link. Returns the number
        of links removed.
        """
        removed = 0
        with self._writing():
            for id in sorted(self._items):
                item = self._items[id]
                keep = [lk for lk in item.links if lk.to_id and lk.to_id != id]
                if len(keep) != len(item.links):
                    removed += len(item.links) - len(keep)
                    self._write(id, item.clone(links=keep), publish=False)
        return removed

    def prune_except(self, keep: Collection[str]) -> int:
        """Hard-delete, without notifying anyone, retired or cell-originated items not in ``keep``.

        Read-model garbage collection for a host that keeps the record
        elsewhere: an item loaded from a cell (``cell_originated``) whose id is
        not in ``keep``, and any stale or superseded item not in ``keep``, go.
        Active items authored in memory are never touched. Returns the count.
        """
        with self._locked():
            if self._txn is not None:
                raise MemstoreError("prune_except cannot run inside a batch")
            gone = [
                id
                for id, it in self._items.items()
                if id not in keep and (it.cell_originated or it.status != STATUS_ACTIVE)
            ]
            for id in gone:
                self._set(id, None)
            return len(gone)

    def mutate(self, id: str, fn: Callable[[Item], bool]) -> bool:
        """Apply ``fn`` to a working copy of the item under the lock.

        When ``fn`` returns ``True`` the copy is validated, stamped with a new
        ``updated_at`` and stored (a failed validation raises and changes
        nothing). Returns whether the item exists.
        """
        with self._writing():
            item = self._items.get(id)
            if item is None:
                return False
            work = item.clone()
            if fn(work):
                work.id = id
                why = validate_base(self._vocab, work)
                if not why and self._config.validate is not None:
                    why = self._config.validate(work)
                if why:
                    raise InvalidItemError(why)
                work.updated_at = self._now()
                self._write(id, work)
            return True

    def forget_locked(self, match: Callable[[Item], bool]) -> list[Removed]:
        """Delete every item ``match`` accepts; the caller holds the lock.

        Before-commit listeners see the deletions as one group. The change
        hook and after-commit listeners are told only when the caller, having
        released the lock, hands the result to :meth:`publish_removed`.
        """
        gone = [
            Removed(id=id, kind=it.kind, scope=it.scope)
            for id, it in sorted(self._items.items())
            if match(it)
        ]
        with self._writing(defer_publish=True):
            for r in gone:
                self._write(r.id, None)
        return gone

    def publish_removed(self, gone: Iterable[Removed]) -> None:
        """Announce what :meth:`forget_locked` removed (call it outside the lock)."""
        self._publish(
            Change("delete", None, r.id, r.kind, published=r.scope != SCOPE_PRIVATE) for r in gone
        )

    def clone_into(self, lock: Locker | None, config: Config | None = None) -> Store:
        """A new store holding copies of these items, guarded by ``lock``.

        A config without a vocabulary inherits this store's. Takes no lock on
        this store: the caller holds it for the whole call.
        """
        cfg = config if config is not None else Config()
        if cfg.vocabulary is None:
            cfg = dataclasses.replace(cfg, vocabulary=self._config.vocabulary)
        copy = Store(cfg, lock=lock)
        for id, item in self._items.items():
            copy._set(id, item.clone())
        return copy

    # ---------------------------------------------------------------- reads

    def _view(self, item: Item, now: _dt.datetime) -> Item:
        """A copy for a reader, reporting lazy staleness."""
        if item.status == STATUS_ACTIVE and item.is_expired(now):
            return item.clone(status=STATUS_STALE)
        return item.clone()

    def _out(self, items: list[Item]) -> list[Item]:
        if self._config.read is not None and items:
            self._config.read(items)
        return items

    def get(self, id: str) -> Item | None:
        """A copy of one item by id (through the ``read`` seam), or ``None``."""
        with self._locked():
            item = self._items.get(id)
            if item is None:
                return None
            return self._out([self._view(item, self._now())])[0]

    def get_fold(self, id: str, fold_scan: bool) -> Item | None:
        """:meth:`get` with a case-insensitive fallback scan when ``fold_scan`` (O(n))."""
        found = self.get(id)
        if found is not None or not fold_scan:
            return found
        with self._locked():
            folded = id.casefold()
            for key in sorted(self._items):
                if key.casefold() == folded:
                    return self._out([self._view(self._items[key], self._now())])[0]
        return None

    def items(self) -> list[Item]:
        """Every public item (any status), most recently updated first. Never a private one."""
        with self._locked():
            now = self._now()
            return self._out(
                [
                    self._view(it, now)
                    for it in reversed(self._by_update)
                    if it.scope != SCOPE_PRIVATE
                ]
            )

    def all_items(self) -> list[Item]:
        """Every active item, private ones included: for persistence, never a read surface."""
        with self._locked():
            now = self._now()
            return [it.clone() for it in reversed(self._by_update) if it.is_active(now)]

    def items_locked(self) -> list[Item]:
        """A copy of every item, private ones included. The caller holds the lock."""
        return [it.clone() for it in reversed(self._by_update)]

    def count_active(self) -> int:
        """The number of active items, private ones included."""
        with self._locked():
            now = self._now()
            return sum(1 for it in self._items.values() if it.is_active(now))

    def indexed(self, id: str) -> bool:
        """Whether ``id`` has entries in the lexical index."""
        with self._locked():
            return id in self._lex

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

    def filtered(
        self,
        status: str = "",
        kind: str = "",
        scope: str = "",
        subject: str = "",
        confidence: str = "",
        limit: int = 0,
    ) -> list[Item]:
        """Public items matching every non-empty filter, most recently updated first.

        ``subject`` matches the literal subject or a ``service/`` tag; ``status``
        is the effective one (an item past its deadline reads stale).
        ``limit <= 0`` means no limit.
        """
        return self.for_user("", status, kind, scope, subject, confidence, limit)

    def for_user(
        self,
        user_hash: str,
        status: str = "",
        kind: str = "",
        scope: str = "",
        subject: str = "",
        confidence: str = "",
        limit: int = 0,
    ) -> list[Item]:
        """:meth:`filtered` plus ``user_hash``'s own private items (and no one else's).

        The only reader that returns a private item, and only to its owner;
        an empty ``user_hash`` owns nothing.
        """
        with self._locked():
            now = self._now()
            own = self._private.get(user_hash, set()) if user_hash else set()
            out: list[Item] = []
            for it in reversed(self._by_update):
                if it.scope == SCOPE_PRIVATE and it.id not in own:
                    continue
                if not self._matches(it, now, status, kind, scope, subject, confidence):
                    continue
                out.append(self._view(it, now))
                if 0 < limit <= len(out):
                    break
            return self._out(out)

    def recent(
        self,
        kind: str = "",
        scope: str = "",
        subject: str = "",
        limit: int = 10,
        skip: Callable[[Item], bool] | None = None,
    ) -> list[Item]:
        """Active public items, newest first by creation (update time breaks ties).

        The recall path for memory selected by recency. Only the
        :data:`RECENT_WINDOW` most recently updated matches are sorted; ``skip``
        drops items the caller treats as expired.
        """
        with self._locked():
            now = self._now()
            window: list[Item] = []
            for it in reversed(self._by_update):
                if it.scope == SCOPE_PRIVATE or not it.is_active(now):
                    continue
                if not self._matches(it, now, "", kind, scope, subject, ""):
                    continue
                if skip is not None and skip(it):
                    continue
                window.append(it)
                if len(window) >= RECENT_WINDOW:
                    break
            window.sort(
                key=lambda it: (_ts(it.created_at), _ts(it.updated_at), it.id), reverse=True
            )
            return self._out([it.clone() for it in window[: max(limit, 0) or len(window)]])

    def exact_matches(self, query: str, kind: str = "", subject: str = "") -> list[Item]:
        """Active public items whose whole title, or ``service/`` tag value, equals ``query``.

        Both sides normalised: what a caller who typed a name means. Newest first.
        """
        key = normalize_query(query)
        if not key:
            return []
        with self._locked():
            now = self._now()
            found = [self._items[i] for i in self._exact.get(key, ())]
            found = [
                it
                for it in found
                if it.is_active(now) and self._matches(it, now, "", kind, "", subject, "")
            ]
            found.sort(key=lambda it: (_ts(it.updated_at), it.id), reverse=True)
            return self._out([it.clone() for it in found])

    # -------------------------------------------------------- lexical search

    def keyword_hits(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
        *,
        user_hash: str = "",
        own_only: bool = False,
    ) -> tuple[list[tuple[Item, LexicalHit]], int]:
        """Ranked lexical hits with their scores, and the number of query tokens.

        The engine under every ``keyword_search*`` variant. ``user_hash`` adds
        that owner's private items (scored by the same rule, since no index
        holds them); ``own_only`` searches those alone.
        """
        limit = limit if limit > 0 else DEFAULT_SEARCH_LIMIT
        tokens = kw_tokens(normalize_query(query))
        if not tokens:
            return [], 0
        with self._locked():
            now = self._now()
            plan = self._lex.plan(tokens)
            hits: list[LexicalHit] = []
            if not own_only:
                hidden = () if kind else self._vocab.non_searchable
                hits = self._lex.rank(
                    plan,
                    kind=kind,
                    subject=subject,
                    hidden_kinds=hidden,
                    now_ts=now.timestamp(),
                    limit=limit,
                )
            if user_hash:
                hits = self._merge_private(hits, plan, user_hash, kind, subject, now, limit)
            out = [(self._view(self._items[h.id], now), h) for h in hits]
            self._out([it for it, _ in out])
            return out, len(tokens)

    def _merge_private(
        self,
        hits: list[LexicalHit],
        plan: object,
        user_hash: str,
        kind: str,
        subject: str,
        now: _dt.datetime,
        limit: int,
    ) -> list[LexicalHit]:
        from memstore._lexindex import QueryPlan

        assert isinstance(plan, QueryPlan)
        extra: list[LexicalHit] = []
        for id in sorted(self._private.get(user_hash, ())):
            it = self._items[id]
            if not it.is_active(now) or not self._matches(it, now, "", kind, "", subject, ""):
                continue
            if not kind and self._vocab.is_non_searchable(it.kind):
                continue
            title = words(it.title)
            score, covered, fuzzy = score_document(
                plan.tokens, plan.weights, [*title, *words(it.content)], title, plan.fuzzy_ok
            )
            if score > 0.0:
                extra.append(LexicalHit(id, score, covered, fuzzy))
        if not extra:
            return hits
        items = self._items
        merged = sorted(
            [*hits, *extra],
            key=lambda h: (-h.score, -_ts(items[h.id].updated_at), h.id),
        )
        return merged[:limit]

    def keyword_search(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> list[Item]:
        """Active shared items ranked by lexical match on title and content.

        Candidates come from the Lexicon and the fuzzy trigram channel, never a
        scan of every item; cost grows with the candidates. ``kind`` and
        ``subject`` filter (``subject`` also matches a ``service/`` tag); an
        unfiltered search leaves out the vocabulary's non-searchable kinds.
        """
        return [it for it, _ in self.keyword_hits(query, kind, subject, limit)[0]]

    def keyword_search_scored(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> tuple[list[Item], bool]:
        """:meth:`keyword_search` plus whether the top hit is a confident lexical answer.

        Confident: the top hit covers every query token (all but one for three
        or more), whatever its raw score. A hybrid search skips the embedding
        round trip on a confident answer.
        """
        items, confident, _ = self.keyword_search_scored_with_trigram_hit(
            query, kind, subject, limit
        )
        return items, confident

    def keyword_search_with_trigram_hit(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> tuple[list[Item], bool]:
        """:meth:`keyword_search` plus whether the fuzzy trigram channel supplied a final hit."""
        items, _, trigram = self.keyword_search_scored_with_trigram_hit(query, kind, subject, limit)
        return items, trigram

    def keyword_search_scored_with_trigram_hit(
        self, query: str, kind: str = "", subject: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> tuple[list[Item], bool, bool]:
        """:meth:`keyword_search` plus confidence and the trigram-hit signal."""
        hits, n = self.keyword_hits(query, kind, subject, limit)
        confident = bool(hits) and is_confident(hits[0][1].covered, n)
        return [it for it, _ in hits], confident, any(h.fuzzy for _, h in hits)

    def keyword_search_for_user(
        self,
        user_hash: str,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
    ) -> list[Item]:
        """:meth:`keyword_search` that also considers ``user_hash``'s private items."""
        return [
            it for it, _ in self.keyword_hits(query, kind, subject, limit, user_hash=user_hash)[0]
        ]

    def keyword_search_own(
        self, user_hash: str, query: str, kind: str = "", limit: int = DEFAULT_SEARCH_LIMIT
    ) -> list[Item]:
        """Keyword search over ``user_hash``'s private items alone (empty hash: nothing)."""
        if not user_hash:
            return []
        hits = self.keyword_hits(query, kind, "", limit, user_hash=user_hash, own_only=True)[0]
        return [it for it, _ in hits]

    def keyword_search_per_kind(
        self,
        query: str,
        kind: str = "",
        subject: str = "",
        limit: int = DEFAULT_SEARCH_LIMIT,
        per_kind: int = 3,
    ) -> list[Item]:
        """:meth:`keyword_search` with at most ``per_kind`` results of any one kind.

        A dominant kind cannot fill the limit and starve the smaller ones;
        relevance order is kept and ``limit`` caps the total.
        """
        limit = limit if limit > 0 else DEFAULT_SEARCH_LIMIT
        per_kind = max(per_kind, 1)
        tokens = kw_tokens(normalize_query(query))
        if not tokens:
            return []
        with self._locked():
            now = self._now()
            plan = self._lex.plan(tokens)
            hidden = () if kind else self._vocab.non_searchable
            hits = self._lex.rank(
                plan,
                kind=kind,
                subject=subject,
                hidden_kinds=hidden,
                now_ts=now.timestamp(),
                limit=None,
            )
            taken: dict[str, int] = {}
            out: list[Item] = []
            for h in hits:
                it = self._items[h.id]
                if taken.get(it.kind, 0) >= per_kind:
                    continue
                taken[it.kind] = taken.get(it.kind, 0) + 1
                out.append(self._view(it, now))
                if len(out) >= limit:
                    break
            return self._out(out)

    # ----------------------------------------------------------------- graph

    def _traversable(self, id: str, now: _dt.datetime) -> bool:
        it = self._items.get(id)
        return it is not None and it.scope != SCOPE_PRIVATE and it.is_active(now)

    def traverse_scored(
        self, anchor_ids: Sequence[str], max_depth: int = 3, decay: float = DEFAULT_CONTEXT_DECAY
    ) -> list[ScoredItem]:
        """Spreading activation from ``anchor_ids`` over the links, with each item's score.

        Each hop multiplies the activation by ``decay`` and the link's weight;
        an item keeps its best path's score; ties order by id. Anchors and
        private or inactive items are excluded (there is no caller identity to
        check an owner against). ``max_depth`` outside 1..8 means 8.
        """
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay!r}")
        with self._locked():
            now = self._now()
            anchors = [a for a in dict.fromkeys(anchor_ids) if self._traversable(a, now)]
            items = self._items

            def neighbours(node: str) -> Iterator[tuple[str, float]]:
                for link in items[node].links:
                    if self._traversable(link.to_id, now):
                        yield link.to_id, link.weight
                for src in sorted(self._backlinks.get(node, ())):
                    if self._traversable(src, now):
                        for link in items[src].links:
                            if link.to_id == node:
                                yield src, link.weight

            ranked = spread(anchors, neighbours, max_depth, decay)
            out = [ScoredItem(item=self._view(items[id], now), score=s) for id, s in ranked]
            self._out([s.item for s in out])
            return out

    def traverse(
        self, anchor_ids: Sequence[str], max_depth: int = 3, decay: float = DEFAULT_CONTEXT_DECAY
    ) -> list[Item]:
        """:meth:`traverse_scored` without the scores."""
        return [s.item for s in self.traverse_scored(anchor_ids, max_depth, decay)]

    def resolve_anchors(self, anchor: str) -> list[str]:
        """Map an anchor string to ids of shared, active items.

        An exact id first (case-insensitively); failing that, every item whose
        subject is the anchor; failing that, every item whose subject or title
        contains it. Private items never resolve.
        """
        needle = anchor.strip().casefold()
        if not needle:
            return []
        with self._locked():
            now = self._now()
            live = [
                it for it in self._items.values() if it.scope != SCOPE_PRIVATE and it.is_active(now)
            ]
            for test in (
                lambda it: it.id.casefold() == needle,
                lambda it: it.subject.casefold() == needle,
                lambda it: needle in it.subject.casefold() or needle in it.title.casefold(),
            ):
                ids = sorted(it.id for it in live if test(it))
                if ids:
                    return ids
            return []

    def context(
        self, anchor: str, max_depth: int = DEFAULT_CONTEXT_DEPTH
    ) -> tuple[list[Item], list[ScoredItem]]:
        """What an anchor activates: the anchor items, and what spreads from them.

        Each hop multiplies by 0.6 and the link's weight; ``max_depth`` hops at
        most (default 3, at most 8). Only shared, active items take part.
        """
        ids = self.resolve_anchors(anchor)
        if max_depth <= 0:
            max_depth = DEFAULT_CONTEXT_DEPTH
        with self._locked():
            now = self._now()
            anchors = self._out([self._view(self._items[i], now) for i in ids])
        return anchors, self.traverse_scored(ids, max_depth, DEFAULT_CONTEXT_DECAY)

    # ------------------------------------------------------------ invariant

    def _check(self) -> None:
        """Assert that every index agrees with the items (for tests)."""
        with self._locked():
            assert self._txn is None
            indexable = {id: it for id, it in self._items.items() if self._indexable(it)}
            self._lex._check(indexable, self._index_id)
            assert set(self._index_id) == set(indexable)
            assert len(self._by_update) == len(self._items)
            assert all(self._items.get(it.id) is it for it in self._by_update)
            private: dict[str, set[str]] = {}
            backlinks: dict[str, set[str]] = {}
            citations: dict[str, set[str]] = {}
            exact: dict[str, set[str]] = {}
            for id, it in self._items.items():
                assert it.id == id
                if it.scope == SCOPE_PRIVATE:
                    private.setdefault(private_owner(it), set()).add(id)
                for link in it.links:
                    backlinks.setdefault(link.to_id, set()).add(id)
                for ref in it.evidence_refs:
                    citations.setdefault(_cited_id(ref), set()).add(id)
                if id in indexable:
                    for key in _exact_keys(it):
                        exact.setdefault(key, set()).add(id)
            assert private == self._private, "private-owner index disagrees"
            assert backlinks == self._backlinks, "backlink index disagrees"
            assert citations == self._citations, "citation index disagrees"
            assert exact == self._exact, "exact-title index disagrees"


# --------------------------------------------------------------- helpers


class _Scope:
    """Holds the store's lock and, for writes, the open group.

    A class rather than a generator context manager: it wraps every call, and
    ``contextlib`` costs several microseconds a time on that path.
    """

    __slots__ = ("_defer", "_mark", "_outer", "_store", "_write")

    def __init__(self, store: Store, *, write: bool, defer_publish: bool = False) -> None:
        self._store = store
        self._write = write
        self._defer = defer_publish
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
                store._txn = _Txn(defer_publish=self._defer)
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
                    del txn.changes[self._mark[1] :]
        finally:
            store._tls.__dict__["depth"] -= 1
            store._lock.release()
        if self._write and not failed:
            store._drain()


def _update_key(item: Item) -> tuple[float, str]:
    return (_ts(item.updated_at), item.id)


def _ts(dt: _dt.datetime | None) -> float:
    return dt.timestamp() if dt is not None else float("-inf")


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


def _naive_datetime(item: Item) -> str:
    from memstore.validate import naive_datetime_rejection

    return naive_datetime_rejection(item)


def _restored_origin(item: Item) -> str:
    from memstore.tags import restored_origin

    return restored_origin(item)
