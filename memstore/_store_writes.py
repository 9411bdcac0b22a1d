"""The Store's write path: validate, stamp and store one item or a batch.

Every write of a new or changed item goes the same way, in one place:

1. :meth:`StoreWrites._prepare` (no lock held) copies the caller's item
   (unless the caller built it for this write), lets the vocabulary coerce it,
   stamps a retained kind's retention deadline, and checks the base rules and
   the host's ``validate``: a rejected item raises
   :class:`~memstore.errors.InvalidItemError` before anything is touched.
2. Under the lock, :meth:`StoreWrites._stamp` fills what the store owns: the
   id, the timestamps, what an update keeps of the stored item, the origin, a
   private item's subject and a default deadline.
3. :meth:`StoreWrites._store_locked` runs the host's ``before`` seam and
   writes through :meth:`~memstore._store_base.StoreBase._write` (indexes,
   undo log, change records); the caller gets a copy back (the write's own
   item, when the store kept a copy of it: one copy a write either way).

:meth:`StoreWrites.upsert_dedup` adds a step between 2 and 3 for
model-authored knowledge: a restatement of an active cell of the same kind is
merged into that cell instead of stored beside it.
:class:`~memstore.store.Store` inherits all of this.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat

from memstore import arguments as arg
from memstore._gc import bulk_load, write_batch
from memstore._memory_build import validated
from memstore._shared import stored_copy
from memstore._store_base import StoreBase, _unfolded
from memstore._ulid import new_ulid
from memstore.arguments import describe
from memstore.errors import InvalidItemError, MemstoreError
from memstore.item import (
    KIND_HYPOTHESIS,
    KIND_OPERATIONAL_PATTERN,
    KIND_STABLE_FACT,
    KIND_UNKNOWN,
    KIND_WATCH_ITEM,
    ORIGIN_DERIVED,
    ORIGIN_HUMAN,
    SCOPE_PRIVATE,
    Item,
    well_typed,
)
from memstore.neardup import Incoming, near_duplicate_tokens
from memstore.tags import AUTHOR_TAG_PREFIX, private_owner, restored_origin
from memstore.text import word_dedup_tokens
from memstore.validate import (
    RETAINED_KINDS,
    item_fields,
    new_id_rejection,
    record_copy,
    stamp_knowledge_retention,
    validate_base,
)

__all__ = ["DEDUP_ELIGIBLE_KINDS", "StoreWrites"]

_DEFAULT_DEADLINE_KINDS = frozenset({KIND_HYPOTHESIS, KIND_UNKNOWN})
"""The retained kinds :func:`stamp_knowledge_retention` gives a deadline without a retention."""

DEDUP_ELIGIBLE_KINDS = frozenset(
    {KIND_STABLE_FACT, KIND_OPERATIONAL_PATTERN, KIND_WATCH_ITEM, KIND_HYPOTHESIS}
)
"""Kinds :meth:`Store.upsert_dedup` merges restatements of."""


class StoreWrites(StoreBase):
    """Adding and updating items: validation, stamping, dedup, the write itself."""

    def validate_base(self, item: Item) -> str:
        """Why ``item`` breaks the rules every item obeys, or ``""`` (see :func:`validate_base`).

        As a write of it would: the item stored under its id, if any, keeps its
        id and tags from the rules only new names obey.
        """
        _check_item(item, "validate_base")
        return validate_base(self._vocab, item, self._items.get(item.id) if item.id else None)

    def _mint_id(self) -> str:
        """A fresh id (the lock held): prefix + ULID, or the host's ``new_id``, checked.

        An id ``new_id`` gives that is no valid id, or names an item already
        stored (which the write would silently replace), raises
        :class:`~memstore.errors.MemstoreError`: the write is undone.
        """
        new_id = self._config.new_id
        if new_id is None:
            id = self._minted = self._config.id_prefix + new_ulid()
            return id
        id = new_id()
        why = new_id_rejection(id)
        if why:
            raise MemstoreError(f"Config.new_id gave no usable id: {why}")
        if id in self._items:
            raise MemstoreError(
                f"Config.new_id gave {id!r}, the id of an item already stored; "
                "the write would have replaced it, and was refused"
            )
        return id

    def _prepare(
        self, item: Item, *, owned: bool = False, plain: bool = False
    ) -> tuple[Item, bool]:
        """Copy, coerce, stamp and validate an incoming item (no lock held).

        ``owned``: the caller built ``item`` for this write and keeps no
        reference to it, so it is worked on without the defensive copy.
        ``plain``: the caller found the owned ``item``
        :func:`~memstore._plainitem.plain_item` (valid by every base rule), so
        the base rules are not asked again unless something here changed it.
        """
        _check_item(item)
        if owned:
            it = item
        elif well_typed(item):
            it = item.clone()
        else:  # a field assigned after construction (never validated): validate it now
            it = validated(item_fields(item))
        if self._vocab.coerce is not None:
            self._vocab.coerce(it)
        # Fields are read from the item's __dict__ here and below: an attribute
        # read on a pydantic model passes its __getattr__ hook (a few hundred
        # machine steps each), and every write of a batch comes this way.
        f = it.__dict__
        had_deadline = f["stale_after"] is not None
        if not had_deadline and f["kind"] in RETAINED_KINDS:
            # The clock only when it is used: a stable fact or a pattern gets a
            # deadline from the host's retention alone, so none without it.
            retention = self._config.retention
            if retention is not None or it.kind in _DEFAULT_DEADLINE_KINDS:
                stamp_knowledge_retention(it, retention, self._now())
        # The stored item it replaces keeps its id and tags (see validate_base).
        # (The plain item passes them whatever it replaces, unless changed here.)
        if plain and owned and self._vocab.coerce is None and f["stale_after"] is None:
            why = ""
        else:
            why = validate_base(self._vocab, it, self._items.get(it.id) if it.id else None)
        if not why and self._config.validate is not None:
            why = self._config.validate(it)
        if why:
            raise InvalidItemError(why)
        return it, had_deadline

    def _stamp(
        self, it: Item, existing: Item | None, had_deadline: bool, *, whole: bool = False
    ) -> None:
        """Fill what a write stamps: id, timestamps, origin, subject, deadline.

        ``whole``: ``it`` carries every field the caller wants (an edit of the
        stored item), so an empty ``supersedes`` clears it instead of keeping it.
        """
        cfg = self._config
        now = self._now()
        # Read and written in the item's __dict__: pydantic's per-field setattr
        # and its attribute hook are skipped (see _prepare).
        f = it.__dict__
        if not f["id"]:
            f["id"] = self._mint_id()
        f["updated_at"] = now
        if existing is not None:
            f["created_at"] = existing.created_at
            if not f["links_set"] and not f["links"]:
                f["links"] = [link.model_copy() for link in existing.links]
            if not f["supersedes"] and not whole:
                f["supersedes"] = list(existing.supersedes)
            f["origin"] = f["origin"] or existing.origin
            f["cell_originated"] = existing.cell_originated
        elif f["created_at"] is None:
            f["created_at"] = now
        if not f["origin"]:  # restored_origin's answer: human if an author tag, else derived
            origin = ORIGIN_DERIVED
            for tag in f["tags"]:
                if tag.startswith(AUTHOR_TAG_PREFIX):
                    origin = ORIGIN_HUMAN
                    break
            f["origin"] = origin
        if f["scope"] == SCOPE_PRIVATE and not f["subject"]:
            f["subject"] = cfg.subject
        ttl = cfg.default_ttl
        if ttl is not None and not had_deadline:
            if existing is not None and existing.stale_after is not None:
                f["stale_after"] = existing.stale_after
            elif existing is None and f["kind"] in ttl:
                f["stale_after"] = now + ttl[it.kind]
        f["links_set"] = False

    def upsert(self, item: Item) -> Item:
        """Add or update one item; returns the stored copy.

        Validation (the base rules, the vocabulary's coercion, the host's
        ``validate``) runs first: a rejected item raises
        :class:`~memstore.errors.InvalidItemError` and changes nothing. An item
        with no id gets a minted one; an update keeps the stored creation time,
        links (unless ``links_set``), supersedes and origin when the new one
        carries none.
        """
        return self._upsert(item, owned=False)

    def _upsert(self, item: Item, *, owned: bool, whole: bool = False) -> Item:
        """:meth:`upsert`; ``owned``: the caller built ``item`` for this write and drops it.

        ``whole``: as for :meth:`_stamp` (``Memory.update``'s edit of a stored item).
        """
        it, had_deadline = self._prepare(item, owned=owned)
        with self._writing():
            existing = self._items.get(it.id) if it.id else None
            self._stamp(it, existing, had_deadline, whole=whole)
            return self._store_locked(it)

    def upsert_many(self, items: Iterable[Item]) -> list[Item]:
        """:meth:`upsert` of every item, as one write group; returns the stored copies.

        Every item is validated before anything is written: one rejected item
        raises :class:`~memstore.errors.InvalidItemError` naming its position
        (``"entry 3: ..."``) and nothing changes. Then the items are written in
        order (a later one with the same id updates an earlier one) and commit
        together, as in ``with store.batch():`` (one journal transaction).

        >>> from memstore import Item, Store
        >>> store = Store()
        >>> [it.title for it in store.upsert_many([Item(kind="note", title="a"),
        ...                                        Item(kind="note", title="b")])]
        ['a', 'b']
        """
        if isinstance(items, str | bytes | Item) or not isinstance(items, Iterable):
            raise InvalidItemError(f"items must be a list of Items, got {arg.describe(items)}")
        # What the group builds lives on in the store (see memstore._gc.write_batch).
        with write_batch():
            return self._upsert_many(list(items), owned=False)

    def _upsert_many(
        self, items: Sequence[Item], *, owned: bool, plain: Sequence[bool] = ()
    ) -> list[Item]:
        """:meth:`upsert_many`; ``owned``: the caller built the items and drops them.

        ``plain``: for each owned item, whether the caller found it
        :func:`~memstore._plainitem.plain_item` (see :meth:`_prepare`).
        """
        prepared: list[tuple[Item, bool]] = []
        flags: Iterable[bool] = plain if len(plain) == len(items) else repeat(False)
        for n, (item, flag) in enumerate(zip(items, flags, strict=False)):
            try:
                prepared.append(self._prepare(item, owned=owned, plain=flag))
            except InvalidItemError as e:
                raise InvalidItemError(f"entry {n}: {e.reason}") from None
        out: list[Item] = []
        # Everything the group builds lives on in the store: the cyclic collector
        # would only walk it again and again meanwhile (it runs as usual after).
        with bulk_load(collect=False), self._writing():
            items_now = self._items
            for it, had_deadline in prepared:
                id = it.__dict__["id"]  # not it.id: see _prepare
                existing = items_now.get(id) if id else None
                out.append(self._upsert_locked(it, existing, had_deadline))
        return out

    def _upsert_locked(self, it: Item, existing: Item | None, had_deadline: bool) -> Item:
        """Stamp a prepared item, let the ``before`` seam amend it, write it; a copy back."""
        self._stamp(it, existing, had_deadline)
        return self._store_locked(it)

    def _store_locked(self, it: Item) -> Item:
        """Run the ``before`` seam on a ready item, write it, and return a copy.

        ``it`` is this write's own item (a copy of the caller's, or one built
        for the write). When no host code was handed it (no vocabulary
        ``coerce``, ``Config.validate`` or ``Config.before``, any of which
        could have kept a reference), nobody else holds it: the store keeps a
        :func:`~memstore._shared.stored_copy` of it and hands ``it`` itself
        back, which is what a clone of the stored item would be. Otherwise the
        store keeps ``it`` and hands back a clone, as it always did.
        """
        cfg = self._config
        if cfg.before is None and cfg.validate is None and self._vocab.coerce is None:
            self._write(it.__dict__["id"], stored_copy(it))
            return it
        if cfg.before is not None:
            it = self._amended(it)
        self._write(it.id, it)
        return it.clone()

    def _amended(self, it: Item) -> Item:
        """``it`` as the host's ``Config.before`` amends it, checked (the lock held).

        The hook runs after validation, so what it makes of the item is
        checked again, by the rules the write itself obeys
        (:func:`~memstore.validate.validate_base`, which holds the record
        rule): an item it broke would be acknowledged against the rules the
        write was held to (and refused by an import with ``check_rules=True``),
        or, past the record rule, unreadable at the next open. It may not
        change the id either (the write would land on another item). Either
        raises :class:`~memstore.errors.InvalidItemError` naming the hook, and
        the write changes nothing.
        """
        before = self._config.before
        assert before is not None
        id = it.id
        before(it)
        if it.id != id:
            raise InvalidItemError(
                f"Config.before changed the id of the item it amended from {id!r} to "
                f"{describe(it.id)}: a hook may amend an item, not move it; nothing was written"
            )
        if not well_typed(it):  # a field assigned in the hook: pydantic did not check it
            it = record_copy(it, "Config.before made the item unstorable")
        why = validate_base(self._vocab, it, self._items.get(id))
        if why:
            raise InvalidItemError(f"Config.before made the item break a rule: {why}")
        return it

    def upsert_dedup(self, item: Item) -> tuple[Item, str | None]:
        """The write gate for model-authored knowledge: restatements land on one cell.

        When ``item.id`` names an existing cell, or the kind is not one of
        :data:`DEDUP_ELIGIBLE_KINDS`, this is :meth:`upsert` (second value
        ``None``). Otherwise the item is scored against the active cells of its
        kind that share a token with it; on a near-duplicate that cell is
        updated in place (its id, creation time, links, supersedes kept; tags
        unioned, existing first; every other field, the origin included, from
        the restatement, an unset origin stamped as on any write) and its id is
        returned second.
        """
        return self._upsert_dedup(item, owned=False)

    def _upsert_dedup(self, item: Item, *, owned: bool) -> tuple[Item, str | None]:
        """:meth:`upsert_dedup`; ``owned`` as for :meth:`_upsert`."""
        _check_item(item)
        if item.kind not in DEDUP_ELIGIBLE_KINDS:
            return self._upsert(item, owned=owned), None
        it, had_deadline = self._prepare(item, owned=owned)
        with self._writing():
            if it.id and it.id in self._items:
                return self._upsert_locked(it, self._items[it.id], had_deadline), None
            # Compare the item as it would be stored: its origin and a private
            # item's subject are stamped, so they match cells stamped the same way.
            f = it.__dict__
            f["origin"] = it.origin or restored_origin(it)
            if it.scope == SCOPE_PRIVATE and not it.subject:
                f["subject"] = self._config.subject
            target = self._find_duplicate_locked(it)
            if target is None:
                return self._upsert_locked(it, None, had_deadline), None
            # ``it`` is this write's own copy: the merge is made in it, not in
            # another clone of it.
            merged = it
            f["tags"] = list(dict.fromkeys([*target.tags, *it.tags]))
            f["id"] = target.id
            f["created_at"] = target.created_at
            f["links"] = [link.model_copy() for link in target.links]
            f["supersedes"] = list(target.supersedes)
            f["cell_originated"] = target.cell_originated
            f["updated_at"] = self._now()
            ttl = self._config.default_ttl
            if ttl is not None and not had_deadline:
                # As for an update: a restatement without a deadline keeps the
                # stored one, unless renew_on_merge re-arms a default_ttl kind.
                if self._config.renew_on_merge and it.kind in ttl:
                    merged.__dict__["stale_after"] = self._now() + ttl[it.kind]
                else:
                    merged.__dict__["stale_after"] = target.stale_after
            # Each side was valid; together they may not be (tags past MAX_TAGS).
            why = validate_base(self._vocab, merged, target)
            if why:
                raise InvalidItemError(
                    f"this restates {target.id}, and the merged cell would break a rule: {why}"
                )
            return self._store_locked(merged), target.id

    def _find_duplicate_locked(self, item: Item) -> Item | None:
        """The best near-duplicate of ``item`` among the stored cells, or ``None``.

        Each candidate's token set comes from the store's cache (tokenised
        once while its title and content stay the same), not re-derived at
        every check. The item's own title and content are split once: the
        lexical index keeps that split for this write's indexing.
        """
        title_words, content_words = self._lex.split(item)
        tokens = word_dedup_tokens((*title_words, *content_words))
        if not tokens:
            return None
        if item.scope == SCOPE_PRIVATE:
            pool: Iterable[str] = sorted(self._private.get(private_owner(item), ()))
        else:
            # Any near-duplicate shares a folded token, i.e. contains a word
            # that folds to it: the postings of those words, of the item's
            # kind, are the candidates.
            words = [w for tok in tokens for w in _unfolded(tok)]
            pool = self._lex.ids_with_words(words, item.kind)
        now = self._now()
        incoming = Incoming(item)  # the item's side of every comparison, derived once
        best: tuple[Item, float] | None = None
        for cid in pool:
            cand = self._items.get(cid)
            if cand is None or cand.kind != item.kind or not cand.is_active(now):
                continue
            if not incoming.comparable(cand):
                continue
            score, dup = near_duplicate_tokens(self._dedup_cache.tokens(cand), tokens)
            if dup and (best is None or score > best[1]):
                best = (cand, score)
        return best[0] if best else None


def _check_item(item: object, what: str = "") -> Item:
    """``item`` when it is an :class:`Item`; else :class:`InvalidItemError` (naming ``what``)."""
    if not isinstance(item, Item):
        head = f"{what}: " if what else ""
        raise InvalidItemError(f"{head}expected an Item, got {describe(item)}")
    return item
